#!/usr/bin/env python3
"""The table of docs/methods/fedmitr.md: FedMITR beside the paper's Table III baselines (one-shot
FedAvg, the ensemble, dense inversion + KD, sparse inversion + pseudo-labels), local-only and the
centralised ViT, at each Dirichlet alpha over several seeds, with the time per stage.

    python3 scripts/fedmitr_table.py FEDNODE OUT_DIR [--alphas 0.05,0.1,0.5] [--seeds 1,2,3] \
        -- SIMULATE_ARGS...

Everything after "--" goes to every run (data, nodes, FedMITR's options); the script adds
--method fedmitr --topology star --partition dirichlet --dirichlet-alpha A --seed S. A run whose
report is already in OUT_DIR is not run again, so that an interrupted table resumes. Prints one
markdown row per alpha: the mean and sd over the seeds of each accuracy (FedMITR's is the hub's,
whose head every leaf of a star uses), then one row of seconds per stage (means).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

COLUMNS = ["local-only", "fedavg", "ensemble", "dense-kd", "sparse-pseudo-label", "fedmitr", "centralized"]


def run(fednode, out_dir, alpha, seed, extra):
    report = os.path.join(out_dir, f"alpha{alpha}_seed{seed}.json")
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
    acc["fedmitr"] = report["nodes"][0]["accuracy"]
    seconds = {b["name"]: b["seconds"] for b in report["method_baselines"]}
    seconds.update(report["method_baseline_shared_seconds"])
    seconds["fedmitr hub"] = report["nodes"][0]["seconds"]
    return acc, seconds


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
    args, extra = p.parse_known_args()
    if extra and extra[0] == "--":
        extra = extra[1:]
    os.makedirs(args.out_dir, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    print("| alpha | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    times = {}
    for alpha in args.alphas.split(","):
        rows = [row(run(args.fednode, args.out_dir, alpha, s, extra)) for s in seeds]
        print(f"| {alpha} | " + " | ".join(cell([r[0][c] for r in rows]) for c in COLUMNS) + " |", flush=True)
        for _, sec in rows:
            for k, v in sec.items():
                times.setdefault(k, []).append(v)
    print()
    print("seconds per stage (mean over every run): " +
          ", ".join(f"{k} {statistics.mean(v):.0f}" for k, v in times.items() if k not in ("fedavg",)))


if __name__ == "__main__":
    main()
