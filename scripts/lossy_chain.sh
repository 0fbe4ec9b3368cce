#!/usr/bin/env bash
# A FedCGS chain over impaired links (issue 25, section 2): NODES nodes in network namespaces
# joined by scripts/lossy_switch.py (each packet dropped with probability LOSS, the rest held
# DELAY seconds), against the same federation on loopback. Every node must finish (exit 0) with
# the accuracy, contributors and status of the clean run. Needs root (namespaces, TUN devices);
# not part of CI: at 20 % loss and 200 ms a 2.5 MB hop takes minutes.
#
#   sudo bash scripts/lossy_chain.sh build/fednode /tmp/lossy [--loss 0.2] [--delay 0.2] [--nodes 5]
#       [--train-limit 3000] [--test-limit 500] [--silence S] [--deadline S] [--seed 1]
#
# --deadline is the topology's deadline_seconds (default 300): since deadlines count from the last
# bytes that arrived, one shorter than a hop's transfer (82 s measured) must still give the clean
# run's results.
#
# Exit status: 0 when the lossy run equals the clean one, 1 otherwise, 2 for a usage error.
set -euo pipefail
usage() { echo "usage: $0 FEDNODE OUTDIR [--loss P] [--delay S] [--nodes N] [--train-limit N] [--test-limit N] [--silence S] [--deadline S] [--seed S]" >&2; exit 2; }
[ $# -ge 2 ] || usage
FEDNODE=$(realpath "$1")
OUT=$2
shift 2
LOSS=0.2 DELAY=0.2 NODES=5 TRAIN=3000 TEST=500 SILENCE=30 DEADLINE=300 SEED=1
while [ $# -gt 0 ]; do
  case "$1" in
    --loss) LOSS=$2 ;;
    --delay) DELAY=$2 ;;
    --nodes) NODES=$2 ;;
    --train-limit) TRAIN=$2 ;;
    --test-limit) TEST=$2 ;;
    --silence) SILENCE=$2 ;;
    --deadline) DEADLINE=$2 ;;
    --seed) SEED=$2 ;;
    *) usage ;;
  esac
  shift 2 || usage
done
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$OUT"
mkdir -p "$OUT/clean"
cd "$OUT"

run_all() {  # DIR PREFIX...: runs every node of DIR/t.toml, PREFIX i expanded per node
  local dir=$1 ns=$2 pids=() status=0
  for i in $(seq 0 $((NODES - 1))); do
    if [ "$ns" = yes ]; then
      ip netns exec "fn$i" "$FEDNODE" run --topology "$dir/t.toml" --id "$i" > "$dir/n$i.log" 2>&1 &
    else
      "$FEDNODE" run --topology "$dir/t.toml" --id "$i" > "$dir/n$i.log" 2>&1 &
    fi
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then echo "node $i of $dir exited with a failure" >&2; status=1; fi
  done
  return $status
}

"$FEDNODE" topology linear --nodes "$NODES" --method fedcgs --base-port 23400 --deadline "$DEADLINE" \
  --silence "$SILENCE" --run lossy-chain --seed "$SEED" --out clean/t.toml \
  --data dataset=fashion-mnist --data train-limit="$TRAIN" --data test-limit="$TEST" \
  --data partition=dirichlet --data dirichlet-alpha=0.5 > /dev/null
cp -r clean lossy
for i in $(seq 0 $((NODES - 1))); do
  sed -i "s|tcp://127.0.0.1:$((23400 + i))\"|tcp://10.77.0.$((i + 1)):$((23400 + i))\"|" lossy/t.toml
done

start=$(date +%s)
run_all clean no
echo "clean run on loopback: $(( $(date +%s) - start )) s"

python3 "$HERE/lossy_switch.py" --nodes "$NODES" --loss "$LOSS" --delay "$DELAY" --seed "$SEED" \
  > switch.out 2> switch.log &
switch=$!
trap 'kill $switch 2>/dev/null; wait $switch 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q ready switch.out 2>/dev/null && break; sleep 0.1; done
grep -q ready switch.out || { echo "the switch did not start: $(cat switch.log)" >&2; exit 1; }
start=$(date +%s)
lossy_status=0
run_all lossy yes || lossy_status=1
echo "lossy run ($LOSS loss, $DELAY s delay per packet): $(( $(date +%s) - start )) s; $(tail -1 switch.log)"

python3 - "$NODES" "$lossy_status" <<'EOF'
import json, sys
nodes, lossy_status = int(sys.argv[1]), int(sys.argv[2])
same = lossy_status == 0
for i in range(nodes):
    a = json.load(open(f"clean/state/n{i}/result.json"))
    b = json.load(open(f"lossy/state/n{i}/result.json"))
    keys = ("status", "accuracy", "contributors")
    ok = all(a.get(k) == b.get(k) for k in keys)
    same &= ok
    print(f"node {i}: clean {[a.get(k) for k in keys]}  lossy {[b.get(k) for k in keys]}"
          f"  resends {b.get('resends')} duplicates {b.get('duplicates')}  {'equal' if ok else 'DIFFERENT'}")
print("identical results" if same else "the lossy run differs")
sys.exit(0 if same else 1)
EOF
