"""fednode.Node beside `fednode run` processes: a Python node in a 3-node chain ends with the
accuracies `fednode.simulate` gives; a node given its features as arrays ends as the same node
reading them from its files; its heads arrive as Classifiers that predict and export; errors are
the documented classes."""
import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

import fednode

# Ports of this file (below the ephemeral range; the C++ tests use 23xxx and 242xx-243xx).
PORTS = {"chain": 24400, "arrays": 24410, "cpp": 24420}


def chain_file(folder, port, method, data, node_data=None):
    """A 3-node chain n0 -> n1 -> n2 on loopback, keys made with fednode.keygen."""
    lines = [f'[federation]\nmode = "linear"\nmethod = "{method}"\nseed = 7\ndeadline_seconds = 120.0\n',
             "[federation.data]"] + [f'{k} = {json.dumps(v)}' for k, v in data.items()]
    for i in range(3):
        keys = folder / "keys" / f"n{i}"
        if not keys.exists():
            fednode.keygen(keys)
        lines += ["", "[[node]]", f"id = {i}", f'name = "n{i}"', f'address = "tcp://127.0.0.1:{port + i}"',
                  f'key_dir = "keys/n{i}"', f'state_dir = "state/n{i}"']
        for k, v in (node_data or {}).get(i, {}).items():
            lines.append(f"data.{k} = {json.dumps(v)}")
    for i in range(2):
        lines += ["", "[[edge]]", f'from = "n{i}"', f'to = "n{i + 1}"']
    path = folder / "chain.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start(cli, topology, name):
    return subprocess.Popen([cli, "run", "--topology", str(topology), "--id", name, "--quiet"])


def finish(proc):
    assert proc.wait(timeout=180) == 0


def result_of(folder, name):
    return json.loads((folder / "state" / name / "result.json").read_text())


@pytest.mark.parametrize("method", ["fedcgs", "fedpft"])
def test_a_python_node_in_a_chain_of_processes_equals_simulate(cli, tmp_path, data, npy_files, method):
    shared = dict(npy_files, partition="dirichlet", **{"dirichlet-alpha": 0.3})
    topology = chain_file(tmp_path, PORTS["chain"] + (5 if method == "fedpft" else 0), method, shared)
    heads, lines = [], []
    procs = [start(cli, topology, "n0"), start(cli, topology, "n2")]
    try:
        node = fednode.Node(topology, "n1", on_head=heads.append, on_log=lambda level, line: lines.append(line))
        result = node.run()
    finally:
        for p in procs:
            finish(p)
    assert result["status"] == "finished", result
    train, test = data
    simulated = fednode.simulate(train=train, test=test, method=method, topology="linear", nodes=3,
                                 partition="dirichlet", dirichlet_alpha=0.3, seed=7, baselines=False)
    networked = [result_of(tmp_path, "n0")["accuracy"], result["accuracy"], result_of(tmp_path, "n2")["accuracy"]]
    assert networked == [n["accuracy"] for n in simulated["nodes"]]
    assert any("merg" in line or "head" in line for line in lines), lines
    # The head it reported is the one it kept, and classifies as its accuracy says.
    assert heads and heads[-1].contributors == [0, 1]
    classifier = node.classifier()
    Xt, yt = test
    assert np.mean(classifier.predict(Xt) == yt) == pytest.approx(result["accuracy"])
    assert np.array_equal(classifier.predict(Xt), heads[-1].predict(Xt))
    probabilities = classifier.predict_proba(Xt[:5])
    assert probabilities.shape == (5, 6) and np.allclose(probabilities.sum(axis=1), 1, atol=1e-5)
    from_disk = fednode.Classifier.from_state_dir(node.state_dir)
    assert np.array_equal(from_disk.predict(Xt), classifier.predict(Xt))


def test_features_given_as_arrays_equal_the_same_features_from_files(cli, tmp_path, data):
    """Every node names its own files (partition "none"); the Python node n1 is given the same
    rows as arrays instead, and must end exactly as the C++ node reading them does."""
    (X, y), (Xt, yt) = data
    parts = np.array_split(np.arange(len(y)), 3)
    node_data = {}
    for i, rows in enumerate(parts):
        for name, array in (("train-features", X[rows]), ("train-labels", y[rows].astype(np.int32)),
                            ("test-features", Xt), ("test-labels", yt.astype(np.int32))):
            np.save(tmp_path / f"n{i}_{name}.npy", array)
        node_data[i] = {k: str(tmp_path / f"n{i}_{k}.npy")
                        for k in ("train-features", "train-labels", "test-features", "test-labels")}
        node_data[i]["partition"] = "none"
        node_data[i]["num-classes"] = 6
    cpp = tmp_path / "cpp"
    cpp.mkdir()
    topology = chain_file(cpp, PORTS["cpp"], "fedcgs", {}, node_data)
    procs = [start(cli, topology, f"n{i}") for i in range(3)]
    for p in procs:
        finish(p)
    expected = result_of(cpp, "n1")

    python = tmp_path / "python"
    python.mkdir()
    topology = chain_file(python, PORTS["arrays"], "fedcgs", {}, node_data)
    procs = [start(cli, topology, "n0"), start(cli, topology, "n2")]
    try:
        node = fednode.Node(topology, "n1", features=(X[parts[1]], y[parts[1]]), test=(Xt, yt),
                            backbone_fingerprint="unnamed", quiet=True)
        result = node.run()
    finally:
        for p in procs:
            finish(p)
    assert result["status"] == "finished"
    assert result["accuracy"] == expected["accuracy"]
    assert result["contributors"] == expected["contributors"]
    assert result_of(python, "n2")["accuracy"] == result_of(cpp, "n2")["accuracy"]


def test_node_errors_are_the_documented_classes(tmp_path, npy_files):
    topology = chain_file(tmp_path, 24430, "fedcgs", dict(npy_files))
    with pytest.raises(fednode.InputError, match="n7"):
        fednode.Node(topology, "n7")
    with pytest.raises(fednode.InputError, match="no such"):
        fednode.Node(tmp_path / "missing.toml", "n1")
    with pytest.raises(fednode.UsageError, match="test=\\(X, y\\) goes with features"):
        fednode.Node(topology, "n1", test=(np.zeros((2, 24), np.float32), np.zeros(2, int)))
    # Another process holds the port: the node cannot listen, a NetworkError (exit status 5).
    import socket
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", 24431))
        held.listen()
        with pytest.raises(fednode.NetworkError) as e:
            fednode.Node(topology, "n1")
        assert e.value.exit_status == 5


def test_load_topology_and_keygen(tmp_path, npy_files):
    topology = chain_file(tmp_path, 24440, "fedpft", dict(npy_files))
    t = fednode.load_topology(topology)
    assert t["mode"] == "linear" and t["method"] == "fedpft" and t["seed"] == 7
    assert [n["name"] for n in t["nodes"]] == ["n0", "n1", "n2"]
    assert t["edges"] == [(0, 1, False), (1, 2, False)]
    assert all(n["reachable"] for n in t["nodes"]) and t["relays"] == []
    public = (tmp_path / "keys" / "n1" / "node.pub").read_text().strip()
    assert t["nodes"][1]["public_key"] == public or public.endswith(t["nodes"][1]["public_key"])
    assert len(fednode.keygen(tmp_path / "new")) == 64
    # Behind NAT: nodes that accept no connections, and the relay where two of them meet.
    keys = [fednode.keygen(tmp_path / "sites" / k) for k in ("a", "b", "c", "r1")]
    text = '[federation]\nmode = "linear"\nmethod = "fedcgs"\n'
    for i, key in enumerate(keys[:3]):
        where = 'address = "tcp://127.0.0.1:24449"' if i == 2 else "reachable = false"
        text += f'\n[[node]]\nid = {i}\n{where}\npublic_key = "{key}"\n'
    text += "".join(f"\n[[edge]]\nfrom = {i}\nto = {i + 1}\n" for i in range(2))
    text += f'\n[[relay]]\nname = "r1"\naddress = "tcp://127.0.0.1:24448"\npublic_key = "{keys[3]}"\n'
    (tmp_path / "sites.toml").write_text(text)
    sites = fednode.load_topology(tmp_path / "sites.toml")
    assert [n["reachable"] for n in sites["nodes"]] == [False, False, True]
    assert [(r["name"], r["address"], r["public_key"]) for r in sites["relays"]] == [
        ("r1", "tcp://127.0.0.1:24448", keys[3])]
    bad = tmp_path / "bad.toml"
    bad.write_text('[federation]\nmode = "spiral"\n')
    with pytest.raises(fednode.InputError, match="bad.toml"):
        fednode.load_topology(bad)
