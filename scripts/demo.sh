#!/usr/bin/env bash
# The main job on a fresh Debian machine: install, build, then a federation on real features —
# Fashion-MNIST through the bundled MobileNetV2, 5 nodes in a linear chain, FedPFT and FedCGS —
# run as 5 real node processes talking over ZeroMQ on loopback (sealed, acknowledged messages),
# then the same federation in one process with `fednode simulate` for the centralised baseline
# and local-only training; the networked nodes' accuracies equal the simulator's.
#
# Environment knobs (defaults are what the README's numbers were measured with):
#   DEMO_TRAIN   training images (first N of the 60k train split)   default 20000
#   DEMO_TEST    test images (first N of the 10k test split)         default 5000
#   DEMO_SIZE    backbone input size (multiple of 32)                default 64
#   DEMO_NODES   nodes in the chain                                  default 5
#   DEMO_OUT     where features and reports go                       default ./demo-out
#   DEMO_PORT    first TCP port of the nodes (loopback)              default 7400
#   DEMO_METHODS the methods, in order                               default "fedpft fedcgs"
#                (fedmitr too: it trains a ViT per node on the pixels, minutes not seconds; each
#                node's head is the ensemble of the models it holds, and `simulate` prints one
#                line per head a node could use instead (FedAvg, the distilled student, the
#                paper's inversion baselines) with its accuracy and the seconds it took; the same
#                at the demo's and two larger budgets: docs/methods/fedmitr.md, "What each head gives")
#   DEMO_FEDMITR options for fedmitr's runs (the student's budget)   default a small one
#                (fgl too: the demo first trains its generator on training images 50000-59999,
#                which the federation does not hold, then each node synthesises from the prompts
#                it holds and trains a CNN: minutes per node; docs/methods/fgl.md)
#   DEMO_FGL_EPOCHS the generator's training epochs                 default 20 (about 13 min)
#   DEMO_FGL     options for fgl's runs (its CNN's budget)           default --cnn-min-steps 500
set -euo pipefail
cd "$(dirname "$0")/.."
TRAIN=${DEMO_TRAIN:-20000}
TEST=${DEMO_TEST:-5000}
SIZE=${DEMO_SIZE:-64}
NODES=${DEMO_NODES:-5}
OUT=${DEMO_OUT:-demo-out}
PORT=${DEMO_PORT:-7400}
read -r -a METHODS <<< "${DEMO_METHODS:-fedpft fedcgs}"
read -r -a FEDMITR <<< "${DEMO_FEDMITR:---client-min-steps 300 --distill-stages 2 --images-per-stage 64 --inversion-iterations 40}"
read -r -a FGL <<< "${DEMO_FGL:---cnn-min-steps 500}"

step() { printf '\n== %s (%ds)\n' "$1" "$SECONDS"; }

step "installing dependencies"
bash scripts/setup.sh
step "building fednode"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target fednode_cli -j"$(nproc)" >/dev/null
FEDNODE=build/fednode

mkdir -p "$OUT"
step "extracting features (MobileNetV2 at ${SIZE}px; cached after the first run)"
"$FEDNODE" extract --dataset fashion-mnist --split train --limit "$TRAIN" --input-size "$SIZE" \
  --out "$OUT/train" --quiet
"$FEDNODE" extract --dataset fashion-mnist --split test --limit "$TEST" --input-size "$SIZE" \
  --out "$OUT/test" --quiet
DATA=(--train-features "$OUT/train_X.npy" --train-labels "$OUT/train_y.npy"
      --test-features "$OUT/test_X.npy" --test-labels "$OUT/test_y.npy"
      --backbone-fingerprint "mobilenet_v2@${SIZE}")

ABS=$(cd "$OUT" && pwd)
# A method's own options, given to simulate as they are and to the topology as --option NAME=VALUE.
as_topology_options() {
  OPTIONS=()
  local args=("$@")
  for ((i = 0; i + 1 < ${#args[@]}; i += 2)); do OPTIONS+=(--option "${args[i]#--}=${args[i+1]}"); done
}
for method in "${METHODS[@]}"; do
  TIMING=()
  # FedMITR's and FGL's nodes train networks on the images themselves, not on backbone features.
  if [ "$method" = fedmitr ] || [ "$method" = fgl ]; then
    NETDATA=(--data dataset=fashion-mnist --data train-limit="$TRAIN" --data test-limit="$TEST")
    SIMDATA=(--dataset fashion-mnist --train-limit "$TRAIN" --test-limit "$TEST")
  fi
  if [ "$method" = fedmitr ]; then
    SIMDATA+=("${FEDMITR[@]}")
    as_topology_options "${FEDMITR[@]}"
  elif [ "$method" = fgl ]; then
    if [ ! -f "$OUT/fgl_generator.pt" ]; then
      step "fgl: training its generator on training images 50000-59999 (no node holds them)"
      "$FEDNODE" train-generator --dataset fashion-mnist --from 50000 --to 60000 --epochs "${DEMO_FGL_EPOCHS:-20}" \
        --out "$OUT/fgl_generator.pt" --quiet
    fi
    FGL_ALL=(--generator "$ABS/fgl_generator.pt" "${FGL[@]}")
    SIMDATA+=("${FGL_ALL[@]}")
    as_topology_options "${FGL_ALL[@]}"
    # A chain's nodes fit their CNNs one after another before forwarding (docs/methods/fgl.md).
    TIMING=(--deadline 3600 --ack-deadline 3600)
  else
    NETDATA=(--data train-features="$ABS/train_X.npy" --data train-labels="$ABS/train_y.npy"
             --data test-features="$ABS/test_X.npy" --data test-labels="$ABS/test_y.npy"
             --data backbone-fingerprint="mobilenet_v2@${SIZE}")
    SIMDATA=("${DATA[@]}")
    OPTIONS=()
  fi
  step "$method: ${NODES} node processes in a linear chain over ZeroMQ, Dirichlet(0.1) label skew"
  # A fresh run each time: new run name (so old frames cannot be replayed into it), new state.
  rm -rf "$OUT/net/$method.toml" "$OUT/net/$method-state"
  "$FEDNODE" topology linear --nodes "$NODES" --method "$method" --seed 1 --base-port "$PORT" "${TIMING[@]}" \
    --keys "$OUT/net/keys" --state "$OUT/net/$method-state" --out "$OUT/net/$method.toml" \
    "${NETDATA[@]}" "${OPTIONS[@]}" --data partition=dirichlet --data dirichlet-alpha=0.1 >/dev/null
  "$FEDNODE" launch "$OUT/net/$method.toml" --threads 1 --quiet
  step "$method: the same federation in one process (fednode simulate), with the baselines"
  "$FEDNODE" simulate "${SIMDATA[@]}" --method "$method" --topology linear --nodes "$NODES" \
    --partition dirichlet --dirichlet-alpha 0.1 --seed 1 --quiet --report "$OUT/$method.json"
done
step "done; JSON reports in $OUT/, each node's result.json and node.log in $OUT/net/<method>-state/"
