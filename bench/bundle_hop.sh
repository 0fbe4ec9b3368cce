#!/usr/bin/env bash
# Packs bench_hop with every shared library it loads (the dynamic loader and libc included) into
# one folder that runs on another x86-64 Linux machine whatever its distribution, as the 16-core
# numbers of docs/performance.md ("Version 2") were taken on a lent machine:
#   bash bench/bundle_hop.sh build build/hopdev      # then, on the other machine:
#   bash build/hopdev/run.sh OUT_DIR                 # loopback warm and cold (pool of 2), warm with
#                                                    # every core, and 1 Gbit/s when it can shape a link
set -euo pipefail
build=${1:?usage: bundle_hop.sh BUILD_DIR OUT_DIR}
out=${2:?usage: bundle_hop.sh BUILD_DIR OUT_DIR}
bin="$build/bench/bench_hop"
[ -x "$bin" ] || { echo "bundle_hop: no $bin (cmake --build $build --target bench_hop)"; exit 1; }
rm -rf "$out"
mkdir -p "$out"
cp "$bin" "$out/"
for lib in $(ldd "$bin" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do cp -L "$lib" "$out/"; done
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# bench_hop through its own copies of the shared libraries (bench/bundle_hop.sh).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
results="${1:-$here/results}"
mkdir -p "$results"
hop() { "$here/ld-linux-x86-64.so.2" --library-path "$here" "$here/bench_hop" "$@"; }
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for mem in warm cold; do
  echo "== loopback, memory $mem, pool of 2"
  OMP_NUM_THREADS=2 hop --reps 20 --memory $mem --json "$results/hop_loopback_$mem.json"
done
echo "== loopback, memory warm, pool of every core"
hop --reps 20 --memory warm --json "$results/hop_loopback_warm_allcores.json"
ns="fnhopbundle$$"
if command -v tc >/dev/null && ip netns add "$ns" 2>/dev/null; then
  ip netns exec "$ns" ip link set lo up
  if ip netns exec "$ns" tc qdisc add dev lo root tbf rate 1gbit burst 256kb latency 50ms; then
    echo "== 1 Gbit/s, memory warm, pool of 2"
    OMP_NUM_THREADS=2 ip netns exec "$ns" "$here/ld-linux-x86-64.so.2" --library-path "$here" "$here/bench_hop" \
      --reps 12 --memory warm --json "$results/hop_1gbit_warm.json"
  fi
  ip netns del "$ns"
else
  echo "== no network namespace or tc here: 1 Gbit/s skipped"
fi
RUN
chmod +x "$out/run.sh"
echo "bundle_hop: $(du -sh "$out" | cut -f1) in $out; run: bash $out/run.sh [RESULTS_DIR]"
