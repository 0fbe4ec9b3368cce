#!/usr/bin/env python3
"""The table of docs/methods/fedmitr.md: FedMITR beside the paper's Table III baselines (one-shot
FedAvg, the ensemble, dense inversion + KD, sparse inversion + pseudo-labels), local-only and the
centralised ViT, at each Dirichlet alpha over several seeds, with the time per stage.

    python3 scripts/fedmitr_table.py FEDNODE OUT_DIR [--alphas 0.05,0.1,0.5] [--seeds 1,2,3] \
        [--have] -- SIMULATE_ARGS...

Everything after "--" goes to every run (data, nodes, FedMITR's options); the script adds
--method fedmitr --topology star --partition dirichlet --dirichlet-alpha A --seed S. A run whose
report is already in OUT_DIR is not run again, so that an interrupted table resumes (the reports
of record are kept in docs/methods/fedmitr-table/, so that the table grows across sessions);
--have prints what the reports there give and runs nothing.

Prints one markdown row per alpha: the mean and sd over the seeds of each accuracy (the node's head
is the hub's, which every leaf of a star uses; FedMITR's student is the hub's head under
--receiver-head student, and a baseline of the same receiver otherwise); then the seconds per receiver stage (each
receiver's seconds over its stages) and of the one-off steps, means over the runs; then one row per
run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

COLUMNS = ["local-only", "fedavg", "ensemble", "dense-kd", "sparse-pseudo-label", "fedmitr", "head", "centralized"]
HEADERS = ["local-only (mean)", "FedAvg", "ensemble", "dense + KD", "sparse + PL", "FedMITR (student)",
           "the node's head", "centralised ViT"]
RECEIVERS = ["fedmitr", "dense-kd", "sparse-pseudo-label"]


def report_path(out_dir, alpha, seed):
    return os.path.join(out_dir, f"alpha{alpha}_seed{seed}.json")


def run(fednode, out_dir, alpha, seed, extra):
    report = report_path(out_dir, alpha, seed)
    if not os.path.exists(report):
        cmd = [fednode, "simulate", "--method", "fedmitr", "--topology", "star", "--partition", "dirichlet",
               "--dirichlet-alpha", str(alpha), "--seed", str(seed), "--report", report + ".part", "--quiet"] + extra
        t0 = time.time()
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit(f"fedmitr_table: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}")
        os.replace(report + ".part", report)
        print(f"alpha {alpha} seed {seed}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return json.load(open(report))


def row(report):
    acc = {b["name"]: b["accuracy"] for b in report["method_baselines"]}
    acc["local-only"] = report["local_only"]["mean"]
    receiver = report["parameters"]["fedmitr"]["receiver"]
    head = receiver.get("head", "student")  # reports from before --receiver-head: the student
    acc["head"] = report["nodes"][0]["accuracy"]
    # The student is the hub's head, or (any other head) a baseline of the same receiver and seed.
    acc["fedmitr"] = acc["head"] if head == "student" else acc["student"]
    stages = receiver["stages"]
    seconds = {b["name"]: b["seconds"] for b in report["method_baselines"]}
    seconds.update(report["method_baseline_shared_seconds"])
    # the hub's client model, then its receiver
    seconds["fedmitr"] = report["nodes"][0]["seconds"] if head == "student" else seconds["student"]
    per_stage = {k: seconds[k] / max(stages, 1) for k in RECEIVERS}
    once = {k: v for k, v in seconds.items() if k not in RECEIVERS and k not in ("fedavg", "student")}
    return acc, per_stage, once, head


def cell(values):
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("fednode")
    p.add_argument("out_dir")
    p.add_argument("--alphas", default="0.05,0.1,0.5")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--have", action="store_true", help="print what the reports in OUT_DIR give; run nothing")
    args, extra = p.parse_known_args()
    if extra and extra[0] == "--":
        extra = extra[1:]
    os.makedirs(args.out_dir, exist_ok=True)
    alphas = args.alphas.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {}
    for alpha in alphas:
        for s in seeds:
            if args.have and not os.path.exists(report_path(args.out_dir, alpha, s)):
                continue
            runs[(alpha, s)] = row(run(args.fednode, args.out_dir, alpha, s, extra))
    print("| alpha | seeds | " + " | ".join(HEADERS) + " |")
    print("|---|---|" + "---:|" * len(HEADERS))
    for alpha in alphas:
        have = [(s, runs[(alpha, s)]) for s in seeds if (alpha, s) in runs]
        if have:
            print(f"| {alpha} | {','.join(str(s) for s, _ in have)} | " +
                  " | ".join(cell([r[0][c] for _, r in have]) for c in COLUMNS) + " |")
    if not runs:
        return
    mean = lambda k, i: statistics.mean(r[i][k] for r in runs.values())
    print()
    print("seconds per receiver stage (mean over the runs): " +
          ", ".join(f"{k} {mean(k, 1):.0f}" for k in RECEIVERS) + "; once a run: " +
          ", ".join(f"{k} {mean(k, 2):.0f}" for k in next(iter(runs.values()))[2]))
    print()
    print("| alpha | seed | " + " | ".join(HEADERS) + " |")
    print("|---|---|" + "---:|" * len(HEADERS))
    for (alpha, s), r in runs.items():
        print(f"| {alpha} | {s} | " + " | ".join(f"{r[0][c]:.3f}" for c in COLUMNS) + " |")
    print()
    # The bar: the head at least the best of local-only (mean), FedAvg and the student.
    for (alpha, s), r in runs.items():
        bar = max(r[0]["local-only"], r[0]["fedavg"], r[0]["fedmitr"])
        print(f"alpha {alpha} seed {s}: head ({r[3]}) {r[0]['head']:.3f} against the best of local-only, FedAvg and "
              f"the student {bar:.3f}: {'held' if r[0]['head'] >= bar else 'NOT held'}")


if __name__ == "__main__":
    main()
