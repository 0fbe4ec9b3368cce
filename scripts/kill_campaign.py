#!/usr/bin/env python3
"""A kill -9 campaign against real `fednode run` processes, as an operator would run one.

    python3 scripts/kill_campaign.py FEDNODE_BINARY OUT_DIR [--trials N] [--seed S] [--base-port P]
                                     [--targeted [--receiver-delay S]] [--keep]

Each trial builds a FedCGS federation (a 5-node chain, a 4-node ring or a 5-node star, in turn),
starts every node, kills one node chosen at random with SIGKILL at a random moment of its first
seconds (loading, waiting, merging, sending, closing), starts it again with the same command after
a random pause of up to 4 s, and waits for every node. A trial passes when every node exits 0 and
its result.json equals `fednode simulate` of the same federation: status finished, the same
contributors and exactly the same accuracy. Exceptions are listed, then "N passed, N failed";
exit status 0 only when every trial passed. Seeded: the same --seed draws the same victims and
moments (the machine's timing still decides where in its work a kill lands).

The ack deadline is lowered to 20 s, so that a trial that would end incomplete says so quickly.

--targeted aims every kill at the acknowledgement window instead (docs/node.md, "What a restart
guarantees"): a 5-node chain (node 3 sends to node 4), a 4-node ring (node 1 to node 2) and a
7-node star (the hub to its leaves), in turn, with the default deadlines (60 s each). The sender
is killed the moment its receiver's inbox holds the sender's first stored message (the first leaf
to store the hub's head), and started again 1 s later. A targeted trial also compares every
node's head file, byte for byte, with a fault-free run of the same federation, and says how many
resends the receiver took as duplicates (1: the kill came before the sender recorded the ack) and
when the last node exited. --receiver-delay starts the receivers that much later than the others,
so that their senders' hellos wait for them (2 s found the windows the default timing missed).
--keep keeps the folders of passing trials (their node logs) too.
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
import tomllib

TOPOLOGIES = [("linear", 5), ("ring", 4), ("star", 5)]
# --targeted: (mode, nodes, sender, receiver); None for the star's hub and its leaves.
TARGETED = [("linear", 5, 3, 4), ("ring", 4, 1, 2), ("star", 7, None, None)]
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


def make_federation(fednode, d, mode, nodes, port, run, deadlines):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    topo = os.path.join(d, "t.toml")
    cmd = [fednode, "topology", mode, "--nodes", str(nodes), "--method", "fedcgs", "--base-port", str(port),
           "--seed", "3", "--run", run, "--out", topo] + deadlines
    for kv in DATA:
        cmd += ["--data", kv]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return topo


def wait_all(procs, timeout=300):
    codes = {}
    for i, p in procs.items():
        try:
            codes[i] = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            codes[i] = "timeout"
    return codes


def state_of(d, node):
    return os.path.join(d, "state", f"n{node}")


def simulated(fednode, d, mode, nodes):
    report = os.path.join(d, "simulate.json")
    sim = [fednode, "simulate", "--quiet", "--no-baselines", "--method", "fedcgs", "--topology", mode, "--nodes",
           str(nodes), "--seed", "3", "--report", report]
    for kv in DATA:
        k, v = kv.split("=", 1)
        sim += ["--" + k, v]
    subprocess.run(sim, check=True, stdout=subprocess.DEVNULL)
    return {n["id"]: n for n in json.load(open(report))["nodes"]}


def problems_of(d, nodes, codes, expected, heads=None):
    """What differs from `expected` (simulate's nodes) and, when given, from a fault-free run's heads."""
    problems = []
    for i in range(nodes):
        if codes[i] != 0:
            problems.append(f"node {i} exited {codes[i]}")
        path = os.path.join(state_of(d, i), "result.json")
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
        if heads is not None and read_bytes(os.path.join(state_of(d, i), "head")) != heads[i]:
            problems.append(f"node {i}'s head differs from the fault-free run's")
    return problems


def read_bytes(path):
    return open(path, "rb").read() if os.path.exists(path) else None


def trial(fednode, out, index, rng, base_port):
    mode, nodes = TOPOLOGIES[index % len(TOPOLOGIES)]
    d = os.path.join(out, f"trial{index:03d}-{mode}")
    port = base_port + 10 * (index % 50)
    topo = make_federation(fednode, d, mode, nodes, port, f"campaign-{index}-{os.getpid()}",
                           ["--deadline", "60", "--ack-deadline", "20"])
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
    codes = wait_all(procs, 180)
    problems = problems_of(d, nodes, codes, simulated(fednode, d, mode, nodes))
    what = f"{mode}: node {victim} killed at {kill_after:.2f} s, back after {pause:.2f} s" if killed else \
        f"{mode}: node {victim} had finished before {kill_after:.2f} s (no kill)"
    return what, problems, d


def stored_from(d, receivers, sender):
    """The first of `receivers` whose inbox holds a message of `sender` (files F-M.msg), or None."""
    for r in receivers:
        inbox = os.path.join(state_of(d, r), "inbox")
        try:
            names = os.listdir(inbox)
        except FileNotFoundError:
            continue
        if any(n.endswith(".msg") and int(n.split("-")[0]) == sender for n in names):
            return r
    return None


class Targeted:
    """Trials that kill a sender inside the acknowledgement window, against one fault-free run per topology."""

    def __init__(self, fednode, out, base_port, receiver_delay):
        self.fednode, self.out, self.base_port = fednode, out, base_port
        self.receiver_delay = receiver_delay
        self.reference = {}  # mode -> (simulate's nodes, heads of the fault-free run)

    def setup(self, index, mode, nodes):
        d = os.path.join(self.out, f"trial{index:03d}-{mode}")
        # One run name per topology: every trial is the same federation as its fault-free run.
        topo = make_federation(self.fednode, d, mode, nodes, self.base_port + 10 * (index % 50), f"targeted-{mode}", [])
        return d, topo

    def fault_free(self, index, mode, nodes):
        if mode in self.reference:
            return self.reference[mode]
        d, topo = self.setup(index, mode, nodes)
        codes = wait_all({i: spawn(self.fednode, topo, i, d) for i in range(nodes)})
        expected = simulated(self.fednode, d, mode, nodes)
        problems = problems_of(d, nodes, codes, expected)
        if problems:
            raise SystemExit(f"the fault-free {mode} run failed: " + "; ".join(problems) + f" (in {d})")
        heads = [read_bytes(os.path.join(state_of(d, i), "head")) for i in range(nodes)]
        shutil.rmtree(d, ignore_errors=True)
        self.reference[mode] = (expected, heads)
        return self.reference[mode]

    def trial(self, index):
        mode, nodes, sender, receiver = TARGETED[index % len(TARGETED)]
        expected, heads = self.fault_free(index, mode, nodes)
        d, topo = self.setup(index, mode, nodes)
        if sender is None:
            sender = tomllib.load(open(topo, "rb"))["federation"]["hub"]
        receivers = [receiver] if receiver is not None else [i for i in range(nodes) if i != sender]
        started = time.time()
        procs = {i: spawn(self.fednode, topo, i, d) for i in range(nodes) if i not in receivers}
        time.sleep(self.receiver_delay)
        procs.update({i: spawn(self.fednode, topo, i, d) for i in receivers})
        hit = None
        while hit is None and procs[sender].poll() is None and time.time() - started < 240:
            hit = stored_from(d, receivers, sender)
            if hit is None:
                time.sleep(0.002)
        if hit is None:
            codes = wait_all(procs)
            return f"{mode}: node {sender} was not killed (nothing of it stored)", ["missed the moment"], d
        at = time.time() - started
        procs[sender].send_signal(signal.SIGKILL)
        procs[sender].wait()
        time.sleep(1.0)
        procs[sender] = spawn(self.fednode, topo, sender, d)
        codes = wait_all(procs)
        took = time.time() - started
        problems = problems_of(d, nodes, codes, expected, heads)
        # A resend the receiver already held: the kill came before the sender recorded its ack.
        result = os.path.join(state_of(d, hit), "result.json")
        duplicates = json.load(open(result)).get("duplicates", 0) if os.path.exists(result) else "?"
        return (f"{mode}: node {sender} killed at {at:.2f} s when node {hit} stored its first message, "
                f"back 1 s later, all done after {took:.1f} s; node {hit} took {duplicates} resends as duplicates"), \
            problems, d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fednode")
    ap.add_argument("out")
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--base-port", type=int, default=24000)
    ap.add_argument("--targeted", action="store_true", help="kill senders inside the acknowledgement window")
    ap.add_argument("--keep", action="store_true", help="keep the folders of trials that passed too")
    ap.add_argument("--receiver-delay", type=float, default=0.0,
                    help="--targeted: start the receivers this many seconds after the other nodes")
    a = ap.parse_args()
    fednode = os.path.abspath(a.fednode)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    targeted = Targeted(fednode, a.out, a.base_port, a.receiver_delay) if a.targeted else None
    passed = failed = 0
    for i in range(a.trials):
        started = time.time()
        what, problems, d = targeted.trial(i) if targeted else trial(fednode, a.out, i, rng, a.base_port)
        took = time.time() - started
        if problems:
            failed += 1
            print(f"trial {i}: FAILED ({what}; {took:.0f} s): " + "; ".join(problems), flush=True)
        else:
            passed += 1
            print(f"trial {i}: ok ({what}; {took:.0f} s)", flush=True)
            if not a.keep:
                shutil.rmtree(d, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
