#!/usr/bin/env python3
"""The DP table of docs/privacy.md: DP-FedCGS and DP-FedPFT at each epsilon against the same
method without DP, on one federation (`fednode simulate`, star by default).

    python3 scripts/privacy_table.py FEDNODE OUT_DIR [--methods fedcgs,fedpft] [--eps 0.5,1,2,4,8]
        [--delta 1e-5] [--seeds 1] [--dp-args "--clip-norm 6"] -- SIMULATE_ARGS...

Everything after "--" goes to every run as it is (data, topology, nodes, partition); --dp-args
only to the DP runs (e.g. DP-FedCGS's clipping norm).
Prints one markdown row per (method, epsilon): the hub's accuracy (node 0, whose head every leaf
of a star uses), mean over the seeds, the largest epsilon any node's privacy ledger reports (which
must not exceed the target), and the wall time; then the non-private run and the centralised
heads. Reports stay in OUT_DIR.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def run(fednode, out_dir, name, args, extra):
    report = os.path.join(out_dir, name + ".json")
    cmd = [fednode, "simulate"] + args + ["--report", report, "--quiet"] + extra
    t0 = time.time()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit(f"privacy_table: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}")
    return json.load(open(report)), time.time() - t0


def ledger_epsilon(report):
    worst = 0.0
    for n in report["nodes"]:
        e = n["privacy"]["epsilon"]
        worst = float("inf") if e == "not private" else max(worst, e)
    return worst


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fednode")
    ap.add_argument("out_dir")
    ap.add_argument("--methods", default="fedcgs,fedpft")
    ap.add_argument("--eps", default="0.5,1,2,4,8")
    ap.add_argument("--delta", default="1e-5")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--dp-args", default="")
    args = ap.parse_args(argv)
    dp_extra = args.dp_args.split()
    os.makedirs(args.out_dir, exist_ok=True)
    seeds = [s for s in args.seeds.split(",") if s]
    mean = lambda v: sum(v) / len(v) if v else float("nan")
    print("| method | epsilon | accuracy (hub) | ledger epsilon (max over nodes) | wall s |")
    print("|---|---:|---:|---:|---:|")
    for method in args.methods.split(","):
        plain, central_linear, central_lda, wall = [], [], [], 0.0
        for seed in seeds:
            r, t = run(args.fednode, args.out_dir, f"{method}-plain-seed{seed}",
                       ["--method", method, "--seed", seed], extra)
            plain.append(r["nodes"][0]["accuracy"])
            central_linear.append(r["centralized"]["linear"])
            central_lda.append(r["centralized"]["lda"])
            wall += t
        print(f"| {method} | no DP | {mean(plain):.4f} | not private | {wall / len(seeds):.0f} |", flush=True)
        for eps in args.eps.split(","):
            acc, ledger, wall = [], 0.0, 0.0
            for seed in seeds:
                r, t = run(args.fednode, args.out_dir, f"{method}-eps{eps}-seed{seed}",
                           ["--method", method, "--dp", "--dp-epsilon", eps, "--dp-delta", args.delta, "--seed", seed,
                            "--no-baselines"] + dp_extra, extra)
                acc.append(r["nodes"][0]["accuracy"])
                ledger = max(ledger, ledger_epsilon(r))
                wall += t
            print(f"| {method} | {eps} | {mean(acc):.4f} | {ledger:.3g} | {wall / len(seeds):.0f} |", flush=True)
        print(f"| centralised (same features) | | linear {mean(central_linear):.4f}, LDA {mean(central_lda):.4f} | | |",
              flush=True)


if __name__ == "__main__":
    main()
