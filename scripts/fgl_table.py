#!/usr/bin/env python3
"""The table of docs/methods/fgl.md: FGL beside one-shot FedAvg of the same network trained
locally, local-only, FedPFT, FedCGS and the centralised ceilings, at each Dirichlet alpha (and
iid) over several seeds, with the bytes each leaf sends.

    python3 scripts/fgl_table.py FEDNODE OUT_DIR --generator GEN.pt [--alphas 0.01,0.1,0.5,iid] \
        [--seeds 1,2,3] [--methods fgl,fedpft,fedcgs] [--fgl-args "--cnn-min-steps 500"] -- SIMULATE_ARGS...

Everything after "--" goes to every run (data, nodes); the script adds --topology star, the
partition and --seed, and for FGL --generator. A run whose report is already in OUT_DIR is not
run again, so an interrupted table resumes. Every method runs on the same pixels: FGL's receivers
train on the generator's images, FedPFT and FedCGS summarise the nodes' pixels.
"""
import argparse
import json
import shlex
import os
import statistics
import subprocess
import sys
import time


def run(fednode, out_dir, method, alpha, seed, extra):
    report = os.path.join(out_dir, f"{method}_alpha{alpha}_seed{seed}.json")
    if not os.path.exists(report):
        partition = ["--partition", "iid"] if alpha == "iid" else ["--partition", "dirichlet", "--dirichlet-alpha", alpha]
        cmd = [fednode, "simulate", "--topology", "star", "--seed", str(seed), "--report", report + ".part",
               "--quiet"] + partition + extra[method]
        t0 = time.time()
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit(f"fgl_table: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}")
        os.replace(report + ".part", report)
        print(f"{method} alpha {alpha} seed {seed}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return json.load(open(report))


def leaf_bytes(report):
    return statistics.mean(n["bytes_sent"] for n in report["nodes"][1:])


def cell(values, digits=3):
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("fednode")
    p.add_argument("out_dir")
    p.add_argument("--generator", required=True)
    p.add_argument("--alphas", default="0.01,0.1,0.5,iid")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--methods", default="fgl,fedpft,fedcgs")
    p.add_argument("--fgl-args", default="")
    args, extra = p.parse_known_args()
    if extra and extra[0] == "--":
        extra = extra[1:]
    os.makedirs(args.out_dir, exist_ok=True)
    methods = args.methods.split(",")
    fgl = ["--method", "fgl", "--generator", args.generator] + shlex.split(args.fgl_args)
    per_method = {
        "fgl": fgl + extra,
        "fgl-linear": fgl + ["--receiver", "linear", "--no-baselines"] + extra,
        "fedpft": ["--method", "fedpft", "--no-baselines"] + extra,
        "fedcgs": ["--method", "fedcgs", "--no-baselines"] + extra,
    }
    seeds = [int(s) for s in args.seeds.split(",")]
    columns = ["local-only CNN", "FedAvg CNN", "FGL"] + [m for m in methods if m != "fgl"] + \
              ["central CNN", "central linear", "FGL bytes/leaf"] + [f"{m} bytes/leaf" for m in methods if m != "fgl"]
    print("| alpha | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for alpha in args.alphas.split(","):
        values = {c: [] for c in columns}
        for s in seeds:
            fgl = run(args.fednode, args.out_dir, "fgl", alpha, s, per_method)
            base = {b["name"]: b["accuracy"] for b in fgl["method_baselines"]}
            values["local-only CNN"].append(statistics.mean(fgl["local_only"]["per_node"]))
            values["FedAvg CNN"].append(base["fedavg"])
            values["FGL"].append(fgl["nodes"][0]["accuracy"])
            values["central CNN"].append(base["centralized"])
            values["central linear"].append(fgl["centralized"]["linear"])
            values["FGL bytes/leaf"].append(leaf_bytes(fgl))
            for m in methods:
                if m == "fgl":
                    continue
                r = run(args.fednode, args.out_dir, m, alpha, s, per_method)
                values[m].append(r["nodes"][0]["accuracy"])
                values[f"{m} bytes/leaf"].append(leaf_bytes(r))
        print(f"| {alpha} | " + " | ".join(cell(values[c], 0 if "bytes" in c else 3) for c in columns) + " |",
              flush=True)


if __name__ == "__main__":
    main()
