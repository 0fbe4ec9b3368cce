#!/usr/bin/env python3
"""DP-FedPFT's privacy-accuracy sweep: `fednode simulate --dp` for every epsilon and delta rule.

    python3 scripts/dp_sweep.py FEDNODE OUT_DIR [--eps 0.5,1,2,4,8] [--deltas 1e-5,per-class]
        [--seeds 1] -- SIMULATE_ARGS...

Everything after "--" goes to every `fednode simulate` run as it is (data, topology, nodes,
partition); the sweep adds --method fedpft --dp --dp-epsilon E --dp-delta D --seed S --report.
`--dp-delta per-class` is the paper's choice (delta = 1/n for a class of n samples, section 5),
a number a fixed delta. Prints one markdown row per (delta, epsilon): the accuracy of node 0
(a star's hub) and of the last node (a chain's end), each the mean over the seeds, then the
centralised linear head on the same features, and the run's wall time. Reports stay in OUT_DIR.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fednode")
    ap.add_argument("out_dir")
    ap.add_argument("--eps", default="0.5,1,2,4,8")
    ap.add_argument("--deltas", default="1e-5,per-class")
    ap.add_argument("--seeds", default="1")
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    seeds = [s for s in args.seeds.split(",") if s]
    print("| delta | epsilon | node 0 | last node | centralised linear | wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for delta in args.deltas.split(","):
        for eps in args.eps.split(","):
            first, last, central, wall = [], [], [], 0.0
            for seed in seeds:
                report = os.path.join(args.out_dir, f"dp-{delta}-eps{eps}-seed{seed}.json")
                cmd = [args.fednode, "simulate", "--method", "fedpft", "--dp", "--dp-epsilon", eps,
                       "--dp-delta", delta, "--seed", seed, "--report", report, "--quiet"] + extra
                t0 = time.time()
                run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                wall += time.time() - t0
                if run.returncode != 0:
                    sys.exit(f"dp_sweep: {' '.join(cmd)} failed ({run.returncode}):\n{run.stdout}")
                r = json.load(open(report))
                first.append(r["nodes"][0]["accuracy"])
                last.append(r["nodes"][-1]["accuracy"])
                if r.get("centralized"):
                    central.append(r["centralized"]["linear"])
            mean = lambda v: sum(v) / len(v) if v else float("nan")
            print(f"| {delta} | {eps} | {mean(first):.3f} | {mean(last):.3f} | {mean(central):.3f} | "
                  f"{wall / len(seeds):.0f} |", flush=True)


if __name__ == "__main__":
    main()
