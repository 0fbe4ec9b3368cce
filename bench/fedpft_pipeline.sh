#!/usr/bin/env bash
# The whole FedPFT pipeline against the reference a user would write (issue 51, goal 1): `fednode
# simulate --method fedpft` (defaults: the head solved from the mixtures' moments; the paper's head
# trained on draws, --head-fit sgd; and that head with the fixed recipe --head-lr 1e-4) and
# bench/ref_fedpft_pipeline.py (scikit-learn GaussianMixture per client and class, a PyTorch linear
# head on the samples), on the same .npy files, the same star of N clients and Dirichlet alpha,
# taking turns REPS times each, 2 threads each. Prints every run and the medians' ratios.
# Usage: bench/fedpft_pipeline.sh FEDNODE PREFIX [NODES] [ALPHA] [REPS]
#   PREFIX_train_X.npy, PREFIX_train_y.npy, PREFIX_test_X.npy, PREFIX_test_y.npy (e.g. what
#   scripts/make_manyclass.py writes: the 100-class proxy of docs/performance.md).
set -euo pipefail
fednode="${1:?usage: fedpft_pipeline.sh FEDNODE PREFIX [NODES] [ALPHA] [REPS]}"
prefix="${2:?usage: fedpft_pipeline.sh FEDNODE PREFIX [NODES] [ALPHA] [REPS]}"
nodes="${3:-50}" alpha="${4:-0.1}" reps="${5:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
data=(--train-features "${prefix}_train_X.npy" --train-labels "${prefix}_train_y.npy"
      --test-features "${prefix}_test_X.npy" --test-labels "${prefix}_test_y.npy")
run_fednode() {  # label, extra options
  local label=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$fednode" simulate --method fedpft --topology star --nodes "$nodes" --partition dirichlet \
    --dirichlet-alpha "$alpha" --seed 1 --no-baselines --quiet "${data[@]}" "$@" --report "$tmp/r.json" >/dev/null
  t1=$(date +%s.%N)
  python3 -c "import json,sys; r=json.load(open('$tmp/r.json')); print('$label', 'seconds', round($t1-$t0,3), 'accuracy', r['nodes'][0]['accuracy'])"
}
for ((i = 0; i < reps; i++)); do
  run_fednode "fednode-defaults"
  run_fednode "fednode-head-fit-sgd" --head-fit sgd
  run_fednode "fednode-head-lr-1e-4" --head-lr 1e-4
  echo "reference $(/usr/bin/python3 "$here/ref_fedpft_pipeline.py" --train-X "${prefix}_train_X.npy" \
    --train-y "${prefix}_train_y.npy" --test-X "${prefix}_test_X.npy" --test-y "${prefix}_test_y.npy" \
    --nodes "$nodes" --alpha "$alpha" --threads 2 --seed 1)"
done | tee "$tmp/runs.txt"
python3 - "$tmp/runs.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    words = line.split()
    fields = dict(zip(words[1::2], words[2::2]))
    runs.setdefault(words[0], []).append((float(fields["seconds"]), float(fields["accuracy"])))
ref = statistics.median(s for s, _ in runs["reference"])
for name, values in runs.items():
    t = statistics.median(s for s, _ in values)
    print(f"{name:22s} median {t:7.2f} s  accuracy {values[0][1]:.4f}  ratio reference/this {ref / t:5.2f}x")
PY
