"""fednode.simulate against `fednode simulate`: the same keywords and data give the same report,
bit for bit (only the data's description and the timings differ); errors are the documented
classes; the training array is read in place; Ctrl-C ends a run."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fednode

OPTIONS = dict(topology="star", nodes=5, partition="dirichlet", dirichlet_alpha=0.3, seed=4)


def run_cli(cli, tmp_path, npy_files, method, extra=()):
    report = tmp_path / f"{method}.json"
    argv = [cli, "simulate", "--method", method, "--quiet", "--report", str(report)]
    for name, path in npy_files.items():
        argv += ["--" + name, path]
    for key, value in OPTIONS.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    subprocess.run(argv + list(extra), check=True, stdout=subprocess.DEVNULL)
    return json.loads(report.read_text())


def without_timings(report):
    """The report less what no two runs share: seconds, and how the data was given."""
    if isinstance(report, dict):
        return {k: without_timings(v) for k, v in report.items()
                if "seconds" not in k and k not in ("dataset", "wall_time_seconds")}
    if isinstance(report, list):
        return [without_timings(v) for v in report]
    return report


@pytest.mark.parametrize("method", ["fedpft", "fedcgs", "fedtc"])
def test_simulate_equals_the_command_bit_for_bit(cli, tmp_path, data, npy_files, method):
    train, test = data
    ours = fednode.simulate(train=train, test=test, method=method, **OPTIONS)
    theirs = run_cli(cli, tmp_path, npy_files, method)
    assert without_timings(ours) == without_timings(theirs)
    accuracies = [node["accuracy"] for node in ours["nodes"]]
    assert len(accuracies) == 5 and 0.3 < min(accuracies) < 1.0  # a real task, not a trivial one
    assert ours["parameters"]["dataset"].startswith("arrays (3000 train, 800 test)")


def test_seeds_give_the_sweep_and_flags_their_negation(cli, tmp_path, data, npy_files):
    train, test = data
    ours = fednode.simulate(train=train, test=test, method="fedcgs", seeds=[1, 2], baselines=False,
                            nodes=3)
    argv = [cli, "simulate", "--method", "fedcgs", "--seeds", "1,2", "--no-baselines", "--nodes", "3",
            "--quiet", "--report", str(tmp_path / "sweep.json")]
    for name, path in npy_files.items():
        argv += ["--" + name, path]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    theirs = json.loads((tmp_path / "sweep.json").read_text())
    assert without_timings(ours) == without_timings(theirs)


def test_other_layouts_and_tensors_give_the_same_report(data):
    (X, y), test = data
    reference = fednode.simulate(train=(X, y), test=test, method="fedcgs", nodes=3, baselines=False)
    fortran = fednode.simulate(train=(np.asfortranarray(X.astype(np.float64)), y.astype(np.int16)), test=test,
                               method="fedcgs", nodes=3, baselines=False)
    assert without_timings(fortran) == without_timings(reference)
    torch = pytest.importorskip("torch")
    tensors = fednode.simulate(train=(torch.from_numpy(X), torch.from_numpy(y)), test=test, method="fedcgs",
                               nodes=3, baselines=False)
    assert without_timings(tensors) == without_timings(reference)


def test_progress_lines_reach_the_callback(data):
    train, test = data
    lines = []
    fednode.simulate(train=train, test=test, method="fedcgs", nodes=2, baselines=False, progress=lines.append)
    assert any("node 1" in line for line in lines), lines
    lines.clear()
    fednode.simulate(train=train, test=test, method="fedcgs", nodes=2, baselines=False, progress=lines.append,
                     quiet=True)
    assert lines == []


def test_errors_are_the_documented_classes(data):
    (X, y), test = data
    with pytest.raises(fednode.UsageError, match="--method must be") as e:
        fednode.simulate(train=(X, y), test=test, method="nope")
    assert e.value.exit_status == 2 and isinstance(e.value, ValueError) and isinstance(e.value, fednode.Error)
    with pytest.raises(fednode.UsageError, match="bogus: not an option"):
        fednode.simulate(train=(X, y), test=test, bogus=1)
    with pytest.raises(fednode.UsageError, match="dirichlet-alpha"):
        fednode.simulate(train=(X, y), test=test, partition="dirichlet", dirichlet_alpha=-1)
    with pytest.raises(fednode.InputError, match="X has 3000 rows, y 10 labels") as e:
        fednode.simulate(train=(X, y[:10]), test=test)
    assert e.value.exit_status == 1 and isinstance(e.value, ValueError)
    bad = X.copy()
    bad[7, 3] = np.nan
    with pytest.raises(fednode.InputError, match="non-finite value at row 7, column 3"):
        fednode.simulate(train=(bad, y), test=test)
    with pytest.raises(fednode.InputError, match="labels are integers"):
        fednode.simulate(train=(X, y.astype(np.float32)), test=test)
    stray = y.copy()
    stray[5] = 2_000_000_000  # one stray label must not make two billion classes
    with pytest.raises(fednode.InputError, match="largest label 2000000000 implies more than"):
        fednode.simulate(train=(X, stray), test=test)
    stray[5] = 5000
    with pytest.raises(fednode.InputError, match="only 7 distinct labels occur"):
        fednode.simulate(train=(X, stray), test=test)
    report = fednode.simulate(train=(X, y), test=test, method="fedcgs", nodes=2, baselines=False, num_classes=8)
    assert report["data"]["num_classes"] == 8 and report["data"]["absent_classes"] == [6, 7]
    with pytest.raises(fednode.InputError, match="outside \\[0, 4\\)"):
        fednode.simulate(train=(X, y), test=test, num_classes=4)
    with pytest.raises(fednode.UsageError, match="exclude each other"):
        fednode.simulate(train=(X, y), test=test, dataset="fashion-mnist")
    with pytest.raises(fednode.InputError, match="training features have dimension 24, test features 23"):
        fednode.simulate(train=(X, y), test=(np.zeros((5, 23), np.float32), np.zeros(5, int)))


def test_the_training_array_is_read_in_place():
    """20 000 x 1 280 float32 (98 MB): while FedCGS runs on 5 nodes, memory grows by the nodes'
    shares (one copy, split) and their statistics, not by a second copy of the array; a float64
    array, which must be converted, shows what a copy adds."""
    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))

    # Every block of 1 MiB or more mapped on its own and unmapped when freed, whichever thread
    # allocates it: otherwise glibc keeps freed blocks resident in per-thread arenas, and the
    # peak moved by 50 MB between runs (one run's leftovers absorbing the next one's copy).
    libc = ctypes.CDLL("libc.so.6")
    M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
    assert libc.mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1 and libc.mallopt(M_ARENA_MAX, 1) == 1

    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 20000)
    X = rng.standard_normal((20000, 1280), dtype=np.float32)
    test = (X[:500].copy(), y[:500])

    def growth(train):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak (VmHWM) to the current resident size
        before = status("VmRSS")
        fednode.simulate(train=train, test=test, method="fedcgs", topology="star", nodes=5, baselines=False)
        return status("VmHWM") - before

    growth((X[:200], y[:200]))  # libraries loaded before measuring
    in_place = growth((X, y))
    converted = growth((X.astype(np.float64), y))
    print(f"array {X.nbytes / 2**20:.0f} MB: peak growth {in_place / 2**20:.0f} MB in place, "
          f"{converted / 2**20:.0f} MB from float64")
    # In place: the shares (one copy of the array, split) and the statistics, a 1 280 x 1 280
    # Gram matrix of doubles (13 MB) at each of the five nodes and the hub: 182 MB measured.
    # A second copy of the array would add its 98 MB, as the float64 array's conversion does.
    statistics = 6 * 1280 * 1280 * 8
    assert in_place < 1.3 * X.nbytes + statistics, in_place
    assert converted > in_place + 0.8 * X.nbytes  # the measurement sees a copy when there is one


def test_ctrl_c_ends_a_run_with_keyboard_interrupt(tmp_path):
    script = tmp_path / "long.py"
    script.write_text(textwrap.dedent("""
        import sys, numpy as np, fednode
        rng = np.random.default_rng(0)
        X = rng.standard_normal((40000, 256), dtype=np.float32); y = rng.integers(0, 50, 40000)
        try:
            fednode.simulate(train=(X, y), test=(X[:100], y[:100]), method="fedpft", nodes=20, seed=1,
                             progress=lambda line: print(line, flush=True))
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
            sys.exit(7)
    """))
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        if "node 0" in line:  # the federation is at work
            break
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    assert proc.wait(timeout=60) == 7, rest
    assert "KeyboardInterrupt" in rest
