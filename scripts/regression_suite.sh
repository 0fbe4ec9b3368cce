#!/usr/bin/env bash
# The fixed regression suite: runs one fednode binary over a fixed set of federations and writes one
# JSON report per case into OUTDIR, so that two binaries (before and after a change that must not
# change any result) can be compared with scripts/compare_reports.py.
#
#   bash scripts/regression_suite.sh FEDNODE_BINARY OUTDIR [--subset]
#
# Full suite (2.5 to 3 minutes on 2 cores busy with a parallel build, load average 5-6; Release):
#   simulate-<method>-<topology>.json   `fednode simulate --report` for fedpft, fedcgs, fedtc over
#                                       linear, ring, star (5 nodes) and graph (4 nodes: the diamond)
#   launch-<name>.json                  `fednode launch` of examples/topologies/<name>.toml for
#                                       chain5, diamond, ring4, star8: every node's result.json
#   launch-<name>.toml                  the rewritten topology file that was launched (see below)
#   simulate-<case>.json                the capabilities beside the merge rules (issue 50's proof that
#                                       moving them changes nothing): fedcgs-secagg-<topology>
#                                       (secure aggregation, all four topologies), fedcgs-personalize,
#                                       fedcgs-dp and fedpft-dp (star), fedmitr (its student head,
#                                       fedmitr-ensemble the default, fedmitr-best) and fgl (small stars;
#                                       FGL's generator trained here with a fixed seed)
#   launch-secagg-dropout.json          a star of 5 under secure aggregation whose last leaf never
#                                       starts: the unmasking round recovers (nodes run one by one,
#                                       deadline 4 s; the hub is stopped once every leaf has ended)
#   launch-stream.json                  a FedCGS chain of 3 expanded to 256 features: its statistics
#                                       (263 KB) travel as version-2 streams
#   launch-discover.json                a chain of 3 with no addresses, found by discovery
#                                       (launch --discover)
#   every launch also records `fednode status --format json` and each node's Prometheus metrics
#   (launch --metrics-dir) beside the result.json files
# --subset (CI, tests/regression/run_subset.sh; about 32 s there):
#   simulate fedpft-linear, fedcgs-ring, fedtc-star, fedpft-graph at smaller sizes, and a launch
#   of the diamond (graph, FedCGS).
#
# The settings are small on purpose (raw Fashion-MNIST pixels, no backbone; a few thousand
# samples; short head and adapter training) so that every run takes seconds. Every run is single-
# threaded (--threads 1 / launch's default), since LibTorch's thread count may reorder sums.
#
# What the launch cases change in the example files (on copies in a temporary directory; the
# repository is never written), identically for every binary:
#   - ports 71xx -> 261xx (full suite) or 262xx (subset): below 32768, not used by any other test
#   - run = "regression-<name>" (a fixed run name; every run uses fresh state and key directories)
#   - train-limit 12000 -> 3000 (subset 1500), test-limit 2000 -> 500 (subset 300)
#   - head-lr = 0.0001 added (and adapter-lr = 0.001 for star8): the papers' fixed learning rates,
#     as every simulate case passes them too, rather than the default choice on a validation
#     split, so that the suite's numbers stay comparable with those recorded before that default
#   - component-draws = "multinomial" added for chain5 (FedPFT), as FEDPFT_OPTS passes it to the
#     simulate cases: the paper's independent draws, the default before systematic draws
#   - star8 (FedTC): adapter-min-steps 2000 -> 300, plus adapter-hidden1 = 64, adapter-hidden2 = 32,
#     adapter-epochs = 3
# Keys are made fresh with `fednode keygen` on every run; they seal the frames and do not enter
# any result. The rewritten file is copied to OUTDIR as launch-<name>.toml, so compare_reports.py
# can tell when two outputs were not made by the same suite.
#
# Exit status: 0 when every case ran and wrote its report, 1 otherwise (the reports that were
# written are still there), 2 for a usage error.
set -u

usage() { echo "usage: $0 FEDNODE_BINARY OUTDIR [--subset]" >&2; exit 2; }
[ $# -ge 2 ] || usage
FEDNODE=$1
OUTDIR=$2
SUBSET=0
if [ $# -ge 3 ]; then
  [ "$3" = "--subset" ] || usage
  SUBSET=1
fi
[ -x "$FEDNODE" ] || { echo "$0: not an executable: $FEDNODE" >&2; exit 2; }
FEDNODE=$(cd "$(dirname "$FEDNODE")" && pwd)/$(basename "$FEDNODE")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fednode-regression.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The same thread settings for every binary and every machine.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

FAILED=0
START=$SECONDS
log() { echo "[$((SECONDS - START))s] $*"; }

if [ $SUBSET = 1 ]; then
  COMMON=(--dataset fashion-mnist --train-limit 1000 --test-limit 300 --partition dirichlet
          --dirichlet-alpha 0.5 --seed 3 --threads 1 --head-min-steps 300 --head-epochs 3 --head-lr 1e-4 --quiet)
  PORT_PREFIX=262
  TRAIN_LIMIT=1500
  TEST_LIMIT=300
else
  COMMON=(--dataset fashion-mnist --train-limit 2000 --test-limit 500 --partition dirichlet
          --dirichlet-alpha 0.5 --seed 3 --threads 1 --head-min-steps 500 --head-epochs 5 --head-lr 1e-4 --quiet)
  PORT_PREFIX=261
  TRAIN_LIMIT=3000
  TEST_LIMIT=500
fi
FEDPFT_OPTS=(--components 3 --component-draws multinomial)
FEDTC_OPTS=(--adapter-hidden1 64 --adapter-hidden2 32 --adapter-min-steps 300 --adapter-epochs 3 --adapter-lr 0.001)

simulate() {  # method topology
  local method=$1 topology=$2 nodes=5 out="$OUTDIR/simulate-$1-$2.json"
  [ "$topology" = graph ] && nodes=4   # 4 nodes: the diamond (fednode topology --help)
  local -a opts
  case $method in
    fedpft) opts=("${FEDPFT_OPTS[@]}") ;;
    fedcgs) opts=() ;;
    fedtc) opts=("${FEDTC_OPTS[@]}") ;;
  esac
  rm -f "$out"
  log "simulate $method $topology ($nodes nodes)"
  if ! "$FEDNODE" simulate "${COMMON[@]}" --method "$method" --topology "$topology" --nodes "$nodes" \
      ${opts[@]+"${opts[@]}"} --report "$out" > "$WORK/simulate-$method-$topology.out" 2>&1; then
    echo "FAILED: simulate $method $topology" >&2
    cat "$WORK/simulate-$method-$topology.out" >&2
    FAILED=1
  fi
}

simulate_case() {  # name, then simulate's arguments after COMMON
  local name=$1 out="$OUTDIR/simulate-$1.json"
  shift
  rm -f "$out"
  log "simulate $name"
  # From $WORK, so that files it names (FGL's generator) are the same relative path in every run.
  if ! (cd "$WORK" && "$FEDNODE" simulate "${COMMON[@]}" "$@" --report "$out") > "$WORK/simulate-$name.out" 2>&1; then
    echo "FAILED: simulate $name" >&2
    cat "$WORK/simulate-$name.out" >&2
    FAILED=1
  fi
}

# One report from a launched (or hand-run) federation: every node's result.json in the file's
# node order, `fednode status --format json`, and each node's metrics file where there is one.
collect() {  # topology file, name, exit status, metrics dir ("" for none)
  local file=$1 name=$2 rc=$3 metrics=$4 out="$OUTDIR/launch-$2.json"
  "$FEDNODE" status "$file" --format json > "$WORK/status-$name.json" 2> "$WORK/status-$name.err" ||
    echo "[]" > "$WORK/status-$name.json"
  "$PY" - "$file" "$name" "$rc" "$out" "$WORK/status-$name.json" "$metrics" <<'EOF' || { echo "FAILED: collecting launch $name" >&2; FAILED=1; }
import json, os, re, sys
file, name, rc, out, status, metrics = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
base = os.path.dirname(file)
text = open(file).read()
nodes, prom = [], {}
for block in re.split(r'^\[\[node\]\]\s*$', text, flags=re.M)[1:]:
    node_name = re.search(r'^name = "(.*)"$', block, re.M).group(1)
    state = re.search(r'^state_dir = "(.*)"$', block, re.M).group(1)
    path = os.path.join(base, state, "result.json")
    if os.path.exists(path):
        with open(path) as f:
            nodes.append(json.load(f))
    else:
        nodes.append({"name": node_name, "status": "no result.json"})
    metrics_file = os.path.join(metrics, "fednode-%s.prom" % node_name) if metrics else ""
    if metrics_file and os.path.exists(metrics_file):
        # name{labels} value, comments left out
        prom[node_name] = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1])
                           for l in open(metrics_file).read().splitlines() if l and not l.startswith("#")}
report = {"fednode_regression_launch": 1, "topology": name, "launch_exit_status": rc, "nodes": nodes,
          "status": json.load(open(status)), "metrics": prom}
with open(out, "w") as f:
    json.dump(report, f, indent=1)
    f.write("\n")
EOF
}

# A topology written by `fednode topology` (fixed run name and seed) into $WORK/launch-NAME/.
generated_topology() {  # name, then fednode topology's arguments
  local name=$1 dir="$WORK/launch-$1"
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  "$FEDNODE" topology "$@" --run "regression-$name" --seed 3 --out "$dir/$name.toml" \
    --data dataset=fashion-mnist --data train-limit=$TRAIN_LIMIT --data test-limit=$TEST_LIMIT \
    --data partition=dirichlet --data dirichlet-alpha=0.5 > "$WORK/topology-$name.out" 2>&1 ||
    { echo "FAILED: fednode topology for $name" >&2; cat "$WORK/topology-$name.out" >&2; FAILED=1; return 1; }
  cp "$dir/$name.toml" "$OUTDIR/launch-$name.toml"
}

launch_generated() {  # name, launch options, then fednode topology's arguments
  local name=$1 options=$2
  shift 2
  generated_topology "$name" "$@" || return
  local dir="$WORK/launch-$name" rc=0
  log "launch $name"
  (cd "$dir" && "$FEDNODE" launch "$name.toml" --threads 1 --timeout 400 --quiet --metrics-dir "$dir/metrics" $options) \
    > "$WORK/launch-$name.out" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "FAILED: launch $name (exit $rc)" >&2
    cat "$WORK/launch-$name.out" >&2
    FAILED=1
  fi
  collect "$dir/$name.toml" "$name" "$rc" "$dir/metrics"
}

# Secure aggregation's dropout: a star of a hub and four leaves, the last of which never starts.
# The survivors end incomplete (exit 3: the plan meant their heads to cover the absent leaf); the
# hub, which would wait for the absent leaf's acknowledgement of its head, is stopped (SIGTERM)
# once they have ended. Its result then says "stopped", with the head of the survivors' sum.
secagg_dropout() {
  local name=secagg-dropout
  generated_topology "$name" star --nodes 5 --method fedcgs --base-port ${PORT_PREFIX}40 --deadline 4 \
    --option secure-aggregation=all || return
  local dir="$WORK/launch-$name" file="$WORK/launch-$name/$name.toml" pids=() rc=0 id
  mkdir -p "$dir/metrics"
  log "run $name (node 4 absent)"
  for id in 0 1 2 3; do
    (cd "$dir" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 exec "$FEDNODE" run --topology "$name.toml" --id $id \
       --metrics "$dir/metrics/fednode-n$id.prom") > "$WORK/$name-n$id.out" 2>&1 &
    pids+=($!)
  done
  for id in 1 2 3; do
    local leaf_rc=0
    wait "${pids[$id]}" || leaf_rc=$?
    [ $leaf_rc = 3 ] || { echo "FAILED: $name leaf n$id exited $leaf_rc, not 3" >&2; cat "$WORK/$name-n$id.out" >&2; FAILED=1; rc=1; }
  done
  kill -TERM "${pids[0]}" 2>/dev/null
  wait "${pids[0]}" 2>/dev/null
  collect "$file" "$name" "$rc" "$dir/metrics"
}

launch() {  # example name (examples/topologies/<name>.toml)
  local name=$1
  local dir="$WORK/launch-$name" out="$OUTDIR/launch-$name.json"
  local src="$ROOT/examples/topologies/$name.toml" file="$WORK/launch-$name/$name.toml"
  rm -f "$out" "$OUTDIR/launch-$name.toml"
  mkdir -p "$dir"
  # The rewrite of the example file (see the header). Every change is checked to have happened.
  sed -e "s#127\.0\.0\.1:71\([0-9][0-9]\)\"#127.0.0.1:${PORT_PREFIX}\1\"#" \
      -e "s/^train-limit = .*/train-limit = $TRAIN_LIMIT/" \
      -e "s/^\[federation.options\]\$/[federation.options]\nhead-lr = 0.0001/" \
      -e "s/^test-limit = .*/test-limit = $TEST_LIMIT/" \
      -e "s/^\[federation\]\$/[federation]\nrun = \"regression-$name\"/" \
      "$src" > "$file"
  if [ "$name" = chain5 ]; then
    sed -i -e 's/^head-lr = 0.0001$/head-lr = 0.0001\ncomponent-draws = "multinomial"/' "$file"
    grep -q '^component-draws = "multinomial"$' "$file" || { echo "FAILED: rewriting $src" >&2; FAILED=1; return; }
  fi
  if [ "$name" = star8 ]; then
    sed -i -e 's/^adapter-min-steps = .*/adapter-min-steps = 300\nadapter-hidden1 = 64\nadapter-hidden2 = 32\nadapter-epochs = 3\nadapter-lr = 0.001/' "$file"
    grep -q '^adapter-hidden1 = 64$' "$file" || { echo "FAILED: rewriting $src" >&2; FAILED=1; return; }
  fi
  if grep -q '127\.0\.0\.1:71' "$file" || ! grep -q "^run = \"regression-$name\"\$" "$file" ||
     ! grep -q "^train-limit = $TRAIN_LIMIT\$" "$file" || ! grep -q "^head-lr = 0.0001\$" "$file" || ! grep -q "^test-limit = $TEST_LIMIT\$" "$file"; then
    echo "FAILED: rewriting $src" >&2; FAILED=1; return
  fi
  cp "$file" "$OUTDIR/launch-$name.toml"
  # Fresh key pairs for every key_dir the file names.
  local key
  for key in $(sed -n 's/^key_dir = "\(.*\)"$/\1/p' "$file"); do
    "$FEDNODE" keygen --out "$dir/$key" > /dev/null || { echo "FAILED: keygen $key" >&2; FAILED=1; return; }
  done
  log "launch $name"
  local rc=0
  (cd "$dir" && "$FEDNODE" launch "$name.toml" --threads 1 --timeout 400 --quiet --metrics-dir "$dir/metrics") \
    > "$WORK/launch-$name.out" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "FAILED: launch $name (exit $rc)" >&2
    cat "$WORK/launch-$name.out" >&2
    FAILED=1
  fi
  collect "$file" "$name" "$rc" "$dir/metrics"
}

if [ $SUBSET = 1 ]; then
  simulate fedpft linear
  simulate fedcgs ring
  simulate fedtc star
  simulate fedpft graph
  launch diamond
else
  for method in fedpft fedcgs fedtc; do
    for topology in linear ring star graph; do
      simulate "$method" "$topology"
    done
  done
  for name in chain5 diamond ring4 star8; do
    launch "$name"
  done
  for topology in linear ring star graph; do
    nodes=5
    [ "$topology" = graph ] && nodes=4
    simulate_case "fedcgs-secagg-$topology" --method fedcgs --secure-aggregation all --topology "$topology" --nodes $nodes
  done
  simulate_case fedcgs-personalize --method fedcgs --personalize --personal-epochs 5 --topology star --nodes 5
  simulate_case fedcgs-dp --method fedcgs --dp --dp-epsilon 1 --topology star --nodes 5
  simulate_case fedpft-dp --method fedpft --dp --dp-epsilon 1 --components 1 --covariance full --topology star --nodes 5
  # The student's numbers were recorded before views became the default (issue 54): the old setting keeps them guarding.
  simulate_case fedmitr --method fedmitr --receiver-head student --client-epochs 1 --client-min-steps 0 --distill-stages 1 \
    --images-per-stage 16 --inversion-iterations 6 --mask-at 2,4 --distill-epochs 1 --distill-views none --topology star --nodes 3
  simulate_case fedmitr-ensemble --method fedmitr --receiver-head ensemble --client-epochs 1 --client-min-steps 0 \
    --distill-stages 1 --images-per-stage 16 --inversion-iterations 6 --mask-at 2,4 --distill-epochs 1 --topology star --nodes 3
  simulate_case fedmitr-best --method fedmitr --receiver-head best --client-epochs 1 --client-min-steps 0 --distill-stages 1 \
    --images-per-stage 16 --inversion-iterations 6 --mask-at 2,4 --distill-epochs 1 --topology star --nodes 3
  log "train FGL's generator"
  if "$FEDNODE" train-generator --dataset fashion-mnist --from 59000 --to 60000 --epochs 1 --width 8 --latent 8 --seed 2 \
       --threads 1 --quiet --out "$WORK/generator.pt" > "$WORK/generator.out" 2>&1; then
    simulate_case fgl --method fgl --generator generator.pt --images-per-sample 0.3 --cnn-width 4 --cnn-hidden 16 \
      --cnn-epochs 1 --cnn-min-steps 40 --topology star --nodes 3
  else
    echo "FAILED: train-generator" >&2; cat "$WORK/generator.out" >&2; FAILED=1
  fi
  secagg_dropout
  launch_generated stream "" linear --nodes 3 --method fedcgs --base-port ${PORT_PREFIX}50 --data feature-expansion=256
  launch_generated discover --discover linear --nodes 3 --method fedcgs --no-addresses
fi

log "done: reports in $OUTDIR"
if [ $FAILED != 0 ]; then
  echo "some cases failed (see above)" >&2
  exit 1
fi
exit 0
