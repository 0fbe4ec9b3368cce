#!/usr/bin/env python3
"""A kill -9 campaign against real `fednode run` processes, as an operator would run one.

    python3 scripts/kill_campaign.py FEDNODE_BINARY OUT_DIR [--trials N] [--seed S] [--base-port P]

Each trial builds a FedCGS federation (a 5-node chain, a 4-node ring or a 5-node star, in turn),
starts every node, kills one node chosen at random with SIGKILL at a random moment of its first
seconds (loading, waiting, merging, sending, closing), starts it again with the same command after
a random pause of up to 4 s, and waits for every node. A trial passes when every node exits 0 and
its result.json equals `fednode simulate` of the same federation: status finished, the same
contributors and exactly the same accuracy. Exceptions are listed, then "N passed, N failed";
exit status 0 only when every trial passed. Seeded: the same --seed draws the same victims and
moments (the machine's timing still decides where in its work a kill lands).

The ack deadline is lowered to 20 s, so that a trial that would end incomplete says so quickly.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

TOPOLOGIES = [("linear", 5), ("ring", 4), ("star", 5)]
DATA = ["dataset=fashion-mnist", "train-limit=3000", "test-limit=500", "partition=dirichlet",
        "dirichlet-alpha=0.5", "min-samples=20"]


def node_env():
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def spawn(fednode, topo, node, state):
    log = open(os.path.join(state, f"n{node}.log"), "a")
    return subprocess.Popen([fednode, "run", "--topology", topo, "--id", str(node)], stdout=log,
                            stderr=subprocess.STDOUT, env=node_env())


def trial(fednode, out, index, rng, base_port):
    mode, nodes = TOPOLOGIES[index % len(TOPOLOGIES)]
    d = os.path.join(out, f"trial{index:03d}-{mode}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    topo = os.path.join(d, "t.toml")
    port = base_port + 10 * (index % 50)
    cmd = [fednode, "topology", mode, "--nodes", str(nodes), "--method", "fedcgs", "--base-port", str(port),
           "--deadline", "60", "--ack-deadline", "20", "--seed", "3", "--run", f"campaign-{index}-{os.getpid()}",
           "--out", topo]
    for kv in DATA:
        cmd += ["--data", kv]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    victim = rng.randrange(nodes)
    kill_after = rng.uniform(0.3, 3.5)
    pause = rng.uniform(0.0, 4.0)
    procs = {i: spawn(fednode, topo, i, d) for i in range(nodes)}
    time.sleep(kill_after)
    killed = procs[victim].poll() is None
    if killed:
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        time.sleep(pause)
        procs[victim] = spawn(fednode, topo, victim, d)
    codes = {}
    for i, p in procs.items():
        try:
            codes[i] = p.wait(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            codes[i] = "timeout"
    report = os.path.join(d, "simulate.json")
    sim = [fednode, "simulate", "--quiet", "--no-baselines", "--method", "fedcgs", "--topology", mode, "--nodes",
           str(nodes), "--seed", "3", "--report", report]
    for kv in DATA:
        k, v = kv.split("=", 1)
        sim += ["--" + k, v]
    subprocess.run(sim, check=True, stdout=subprocess.DEVNULL)
    expected = {n["id"]: n for n in json.load(open(report))["nodes"]}
    problems = []
    for i in range(nodes):
        if codes[i] != 0:
            problems.append(f"node {i} exited {codes[i]}")
        path = os.path.join(d, "state", f"n{i}", "result.json")
        if not os.path.exists(path):
            problems.append(f"node {i} wrote no result.json")
            continue
        got = json.load(open(path))
        want = expected[i]
        if got["status"] != "finished":
            problems.append(f"node {i} {got['status']} (unacknowledged {got.get('unacknowledged')})")
        if got["contributors"] != want["contributors"]:
            problems.append(f"node {i} contributors {got['contributors']} != {want['contributors']}")
        if got["accuracy"] != want["accuracy"]:
            problems.append(f"node {i} accuracy {got['accuracy']} != {want['accuracy']}")
    what = f"{mode}: node {victim} killed at {kill_after:.2f} s, back after {pause:.2f} s" if killed else \
        f"{mode}: node {victim} had finished before {kill_after:.2f} s (no kill)"
    return what, problems, d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fednode")
    ap.add_argument("out")
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--base-port", type=int, default=24000)
    a = ap.parse_args()
    fednode = os.path.abspath(a.fednode)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    passed = failed = 0
    for i in range(a.trials):
        started = time.time()
        what, problems, d = trial(fednode, a.out, i, rng, a.base_port)
        took = time.time() - started
        if problems:
            failed += 1
            print(f"trial {i}: FAILED ({what}; {took:.0f} s): " + "; ".join(problems), flush=True)
        else:
            passed += 1
            print(f"trial {i}: ok ({what}; {took:.0f} s)", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
