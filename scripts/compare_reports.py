#!/usr/bin/env python3
"""Compares two output directories of scripts/regression_suite.sh, report by report.

    python3 scripts/compare_reports.py BEFORE_DIR AFTER_DIR

Every *.json and *.toml file in either directory is paired by name with the file of the same name
in the other; a file present on one side only is a failure. One line per difference, then
"N passed, N failed" (one count per file pair); exit status 0 only when every pair is equal.

What is compared, exactly (accuracies included: the runs are deterministic, so "close" would
hide a change):

simulate-*.json (`fednode simulate --report`, docs/report.md; also "fednode_seed_sweep" reports,
run by run):
  parameters, seed, data                       the whole objects: both sides ran the same case
  nodes[]: id, samples, classes, class_counts, contributors, accuracy, per_class_accuracy,
           local_only_accuracy (when either side has it), bytes_sent, bytes_received
  centralized (linear, lda; null with --no-baselines), local_only (per_node, mean)
  not compared: nodes[].seconds, wall_time_seconds (times)

launch-*.json (every node's result.json after `fednode launch`, docs/node.md):
  launch_exit_status, the number and order of the nodes, and per node: id, name, run, method, mode,
  status, samples, contributors, expected_contributors, missing, unacknowledged, refused_by,
  discarded_from, accuracy, per_class_accuracy, head, knowledge_bytes_sent (the payload bytes, the
  same figure as simulate's bytes_sent), messages_sent, messages_received (distinct messages:
  resends and duplicates are counted apart), restarts
  wire bytes, only when no frame was resent, duplicated or rejected anywhere in the federation
  on either side: bytes_sent, bytes_received
  not compared:
    seconds.*                         times
    resends, duplicates, frames_rejected
                                      depend on timing: a frame is resent when its ack has not
                                      come within 200 ms (NodeConfig::retry_initial), e.g. while
                                      the receiver is busy fitting a head on a loaded machine; a
                                      resend then arrives as a duplicate
    bytes_sent, bytes_received when any node resent, received a duplicate or rejected a frame:
                                      every resend adds a frame (and a duplicate's ack) to the
                                      sender's and receiver's wire bytes
  Two full suites with the same binary (47f191c, load average 5 from a parallel build) gave equal
  files by these rules; the first had resends in chain5, ring4 and star8 (1 to 2 per node,
  changing their wire bytes), the second none, and where neither side resent the wire bytes were
  equal too. See tests/regression/README.md.

  status (`fednode status --format json` after the run), per node: id, name, state, stage, awaiting,
  accepted, unacknowledged, contributors, missing, refused_by, accuracy; bytes and links as the
  wire bytes above
  metrics (each node's Prometheus file, launch --metrics-dir): every sample, except those whose
  name says seconds, timestamp, resend, duplicate, rejected, retries or start_time, and byte
  counters as the wire bytes above; a metric the baseline lacks is noted as added, not compared
  simulate reports also compare each node's privacy ledger and personalised accuracies

launch-*.toml (the topology file the suite launched): the text, exactly. A difference means the
two directories were not made by the same suite, and the other comparisons mean nothing.
"""
import json
import math
import os
import sys

SIMULATE_NODE_FIELDS = ["id", "samples", "classes", "class_counts", "contributors", "accuracy",
                        "per_class_accuracy", "local_only_accuracy", "bytes_sent", "bytes_received",
                        "privacy", "personalized"]
SIMULATE_TOP_FIELDS = ["parameters", "seed", "data", "centralized", "local_only"]
LAUNCH_NODE_FIELDS = ["id", "name", "run", "method", "mode", "status", "samples", "contributors",
                      "expected_contributors", "missing", "unacknowledged", "refused_by",
                      "discarded_from", "accuracy", "per_class_accuracy", "head",
                      "knowledge_bytes_sent", "messages_sent", "messages_received", "restarts",
                      "privacy", "personal_accuracy", "personal_per_class", "accuracy_in_own_proportions",
                      "personal_accuracy_in_own_proportions"]
LAUNCH_WIRE_FIELDS = ["bytes_sent", "bytes_received", "links"]
STATUS_NODE_FIELDS = ["id", "name", "state", "stage", "awaiting", "accepted", "unacknowledged", "contributors",
                      "missing", "refused_by", "accuracy"]
STATUS_WIRE_FIELDS = ["bytes_sent", "bytes_received", "links"]
# Metrics that count what happened, not how fast or how often the network hiccuped; a metric
# whose name holds one of these words is left out (times, resends, duplicates, rejected frames),
# and byte counters are compared only where the wire bytes are.
METRIC_TIMING_WORDS = ["seconds", "timestamp", "resend", "duplicate", "rejected", "retries", "start_time"]
METRIC_WIRE_WORDS = ["bytes"]
TIMING_COUNTERS = ["resends", "duplicates", "frames_rejected"]
MISSING = object()  # a field absent on one side


def show(v):
    if v is MISSING:
        return "(absent)"
    return json.dumps(v) if not isinstance(v, float) else repr(v)


def same_scalar(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return a == b  # exact: 0.812 and 0.8120000000000001 differ
    return type(a) is type(b) and a == b


def diff(path, a, b, out):
    """Appends 'path: before X, after Y' for every difference between a and b (deep)."""
    if a is MISSING and b is MISSING:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a.keys()) + [k for k in b.keys() if k not in a]:
            diff(f"{path}.{k}" if path else k, a.get(k, MISSING), b.get(k, MISSING), out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: before {show(a)}, after {show(b)} (length {len(a)} vs {len(b)})")
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                diff(f"{path}[{i}]", x, y, out)
    elif a is MISSING or b is MISSING or isinstance(a, (dict, list)) or isinstance(b, (dict, list)) \
            or not same_scalar(a, b):
        out.append(f"{path}: before {show(a)}, after {show(b)}")


def compare_simulate(a, b, out, prefix=""):
    for k in SIMULATE_TOP_FIELDS:
        diff(prefix + k, a.get(k, MISSING), b.get(k, MISSING), out)
    na, nb = a.get("nodes", []), b.get("nodes", [])
    if len(na) != len(nb):
        out.append(f"{prefix}nodes: before {len(na)} nodes, after {len(nb)}")
        return
    for i, (x, y) in enumerate(zip(na, nb)):
        for k in SIMULATE_NODE_FIELDS:
            diff(f"{prefix}nodes[{i}].{k}", x.get(k, MISSING), y.get(k, MISSING), out)


def compare_seed_sweep(a, b, out):
    diff("seeds", a.get("seeds"), b.get("seeds"), out)
    diff("summary", a.get("summary"), b.get("summary"), out)
    ra, rb = a.get("runs", []), b.get("runs", [])
    if len(ra) != len(rb):
        out.append(f"runs: before {len(ra)}, after {len(rb)}")
        return
    for i, (x, y) in enumerate(zip(ra, rb)):
        compare_simulate(x, y, out, prefix=f"runs[{i}].")


def quiet_network(nodes):
    return all(all(n.get(c, 0) == 0 for c in TIMING_COUNTERS) for n in nodes)


def compare_launch(a, b, out, notes):
    diff("topology", a.get("topology"), b.get("topology"), out)
    diff("launch_exit_status", a.get("launch_exit_status"), b.get("launch_exit_status"), out)
    na, nb = a.get("nodes", []), b.get("nodes", [])
    if len(na) != len(nb):
        out.append(f"nodes: before {len(na)} nodes, after {len(nb)}")
        return
    wire = quiet_network(na) and quiet_network(nb)
    if not wire:
        notes.append("bytes_sent/bytes_received not compared: a frame was resent, duplicated or rejected "
                     "(resends/duplicates/frames_rejected not all 0)")
    for i, (x, y) in enumerate(zip(na, nb)):
        label = f"nodes[{i}]({x.get('name', '?')})"
        for k in LAUNCH_NODE_FIELDS + (LAUNCH_WIRE_FIELDS if wire else []):
            diff(f"{label}.{k}", x.get(k, MISSING), y.get(k, MISSING), out)
    sa, sb = a.get("status", MISSING), b.get("status", MISSING)
    if sa is MISSING or sb is MISSING or len(sa) != len(sb):
        diff("status", sa, sb, out)
    else:
        for i, (x, y) in enumerate(zip(sa, sb)):
            for k in STATUS_NODE_FIELDS + (STATUS_WIRE_FIELDS if wire else []):
                diff(f"status[{i}].{k}", x.get(k, MISSING), y.get(k, MISSING), out)
    ma, mb = a.get("metrics", MISSING), b.get("metrics", MISSING)
    if ma is MISSING or mb is MISSING:
        diff("metrics", ma, mb, out)
    else:
        def kept(m):
            skip = METRIC_TIMING_WORDS + ([] if wire else METRIC_WIRE_WORDS)
            return {n: {k: v for k, v in vals.items() if not any(w in k for w in skip)} for n, vals in m.items()}
        # A metric the baseline did not have is something new to watch, not a change of behaviour:
        # it is noted, and every sample the baseline had must still be there, equal.
        ka, kb = kept(ma), kept(mb)
        added = sorted({k.split("{")[0] for n, vals in kb.items() for k in vals if k not in ka.get(n, {})})
        if added:
            notes.append("metrics added since the baseline (not compared): " + ", ".join(added))
            kb = {n: {k: v for k, v in vals.items() if k in ka.get(n, {})} for n, vals in kb.items()}
        diff("metrics", ka, kb, out)


def compare_file(before, after, name):
    """Returns (differences, notes) for one file pair."""
    out, notes = [], []
    if name.endswith(".toml"):
        with open(before) as f:
            ta = f.read()
        with open(after) as f:
            tb = f.read()
        if ta != tb:
            la, lb = ta.splitlines(), tb.splitlines()
            for i in range(max(len(la), len(lb))):
                x = la[i] if i < len(la) else "(no line)"
                y = lb[i] if i < len(lb) else "(no line)"
                if x != y:
                    out.append(f"line {i + 1}: before {x!r}, after {y!r}")
        return out, notes
    try:
        with open(before) as f:
            a = json.load(f)
        with open(after) as f:
            b = json.load(f)
    except (OSError, ValueError) as e:
        return [f"cannot read: {e}"], notes
    if "fednode_report" in a:
        diff("fednode_report", a.get("fednode_report"), b.get("fednode_report", MISSING), out)
        compare_simulate(a, b, out)
    elif "fednode_seed_sweep" in a:
        diff("fednode_seed_sweep", a.get("fednode_seed_sweep"), b.get("fednode_seed_sweep", MISSING), out)
        compare_seed_sweep(a, b, out)
    elif "fednode_regression_launch" in a:
        diff("fednode_regression_launch", a.get("fednode_regression_launch"),
             b.get("fednode_regression_launch", MISSING), out)
        compare_launch(a, b, out, notes)
    else:
        out.append("unknown report kind (neither fednode_report, fednode_seed_sweep nor "
                   "fednode_regression_launch)")
    return out, notes


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} BEFORE_DIR AFTER_DIR", file=sys.stderr)
        return 2
    before_dir, after_dir = argv[1], argv[2]
    for d in (before_dir, after_dir):
        if not os.path.isdir(d):
            print(f"{argv[0]}: not a directory: {d}", file=sys.stderr)
            return 2

    def reports(d):
        return {f for f in os.listdir(d) if f.endswith((".json", ".toml"))}

    rb, ra = reports(before_dir), reports(after_dir)
    passed = failed = 0
    if not rb and not ra:
        print("no reports in either directory")
        failed += 1
    for name in sorted(rb | ra):
        if name not in ra:
            print(f"FAIL {name}: missing in {after_dir}")
            failed += 1
            continue
        if name not in rb:
            print(f"FAIL {name}: missing in {before_dir}")
            failed += 1
            continue
        out, notes = compare_file(os.path.join(before_dir, name), os.path.join(after_dir, name), name)
        for n in notes:
            print(f"note {name}: {n}")
        if out:
            failed += 1
            for line in out:
                print(f"FAIL {name}: {line}")
        else:
            passed += 1
            print(f"ok   {name}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
