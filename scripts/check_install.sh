#!/usr/bin/env bash
# Checks that fednode can be installed and embedded, end to end:
#   1. `cmake --install BUILD_DIR` into a temporary prefix;
#   2. every installed header's #include "..." resolves inside the installed headers;
#   3. examples/edge_app configures against that prefix alone (find_package(fednode)) and builds;
#   4. a 3-node linear FedCGS federation on loopback runs: nodes 0 and 2 are the installed
#      `fednode run`, node 1 in the middle is the edge app, so that it both receives and sends
#      knowledge; every node must finish with the samples, contributors and accuracy that
#      `fednode simulate` gives on the same data and seed. Node 1's head and node 2's input
#      depend on node 1's part of the data, so a partition that differs from the CLI's shows;
#   5. the installed fednode, training a LibTorch head, loads the installed lib/fednode/
#      libfednode_torch.so (core/torch_library.h), not the build tree's;
#   6. bash completion and (when the build found help2man) the man page are installed;
#   7. examples/edge_app also builds from `pkg-config --cflags --libs fednode` alone, and runs;
#   8. the Python module (when built) imports from the prefix and loads the copy of
#      libfednode_torch.so installed beside it.
# Usage: scripts/check_install.sh [BUILD_DIR]   (default: build; fednode_cli must be built there)
# Writes only inside one temporary directory, removed on exit (kept with KEEP_TMP=1).
set -euo pipefail

cmake="${CMAKE:-cmake}"   # CTest passes its own
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$src/build}" && pwd)"
[[ -x "$build/fednode" ]] || { echo "check_install: $build/fednode is not built (build the fednode_cli target)" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/fednode-install.XXXXXX")"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $rc -ne 0 || "${KEEP_TMP:-0}" == 1 ]]; then
    for log in "$tmp"/*.log; do
      [[ -f "$log" ]] && { echo "---- ${log##*/} (last lines)"; tail -n 25 "$log"; }
    done
  fi
  if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start=$SECONDS
step() { echo "== $* ($((SECONDS - start)) s)"; }
fail() { echo "check_install: FAILED: $*" >&2; exit 1; }

prefix="$tmp/prefix"
step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log"
# lib/cmake/fednode, or lib/<multiarch>/cmake/fednode when the build was configured for /usr.
config_dir="$(dirname "$(find "$prefix" -path '*/cmake/fednode/fednodeConfig.cmake' | head -n 1)")"
[[ -f "$config_dir/fednodeConfig.cmake" ]] || fail "no fednodeConfig.cmake installed"
[[ -x "$prefix/bin/fednode" ]] || fail "no bin/fednode installed"

step "bash completion and man page"
[[ -f "$prefix/share/bash-completion/completions/fednode" ]] || fail "no bash completion installed"
if grep -q '^FEDNODE_HELP2MAN:FILEPATH=/' "$build/CMakeCache.txt"; then
  man1="$prefix/share/man/man1/fednode.1"
  [[ -f "$man1" ]] || fail "no man page installed, though the build found help2man"
  for section in '^\.SH "EXIT STATUS"' '^\.SH ENVIRONMENT' 'simulate' 'protocol versions'; do
    grep -q -e "$section" "$man1" || fail "the man page lacks '$section'"
  done
else
  echo "  help2man was not found when $build was configured: no man page to check (scripts/setup.sh installs it)"
fi

step "installed headers include only installed headers"
inc="$prefix/include/fednode"
[[ -f "$inc/node/node.h" ]] || fail "node/node.h not installed under include/fednode"
missing=0
while IFS= read -r -d '' header; do
  while IFS= read -r included; do
    if [[ ! -f "$inc/$included" && ! -f "$(dirname "$header")/$included" ]]; then
      echo "  ${header#"$inc"/} includes \"$included\", which is not installed" >&2
      missing=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$header")
done < <(find "$inc" -name '*.h' -print0)
[[ $missing == 0 ]] || fail "installed headers are not self-contained (CMakeLists.txt, install(DIRECTORY ...))"
# The private dependencies, whose -dev packages fednodeConfig.cmake does not ask for.
private='^[[:space:]]*#[[:space:]]*include[[:space:]]*<(zmq[.]h|zmq[.]hpp|zmq_addon[.]hpp|msgpack|torch/|ATen/|c10/|sodium|png[.]h|jpeglib[.]h|zlib[.]h|cblas[.]h|toml)'
if grep -rlE "$private" "$inc" --include='*.h' >"$tmp/private.txt"; then
  sed 's/^/  includes a private dependency: /' "$tmp/private.txt" >&2
  fail "installed headers include private dependencies (CMakeLists.txt, install(DIRECTORY ...))"
fi

step "configure and build examples/edge_app against the prefix"
# The prefix is the only place find_package may look for fednode: no package registry, and the
# build tree is not on any search path.
"$cmake" -S "$src/examples/edge_app" -B "$tmp/edge-build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/edge-configure.log" 2>&1 \
  || fail "configuring examples/edge_app"
found="$(sed -n 's/^fednode_DIR:PATH=//p' "$tmp/edge-build/CMakeCache.txt")"
[[ "$found" == "$config_dir" ]] || fail "find_package(fednode) found '$found', not the prefix"
"$cmake" --build "$tmp/edge-build" -j2 >"$tmp/edge-build.log" 2>&1 || fail "building examples/edge_app"
edge="$tmp/edge-build/edge_app"

step "build examples/edge_app with pkg-config alone (no CMake)"
pcdir="$(dirname "$(find "$prefix" -name fednode.pc | head -n 1)")"
[[ -f "$pcdir/fednode.pc" ]] || fail "no fednode.pc installed"
flags="$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs fednode)" || fail "pkg-config cannot read fednode.pc"
# shellcheck disable=SC2086  # the flags are words
g++ -O1 "$src/examples/edge_app/main.cpp" $flags -o "$tmp/edge_pc" >"$tmp/edge-pkg-config.log" 2>&1 \
  || fail "building examples/edge_app with \$(pkg-config --cflags --libs fednode)"
pc_rc=0
"$tmp/edge_pc" >"$tmp/edge-pc-usage.log" 2>&1 || pc_rc=$?
[[ $pc_rc == 2 ]] && grep -q "usage: edge_app" "$tmp/edge-pc-usage.log" \
  || fail "the pkg-config build of edge_app did not run (exit $pc_rc)"

# Three consecutive ports nobody listens on (bash's /dev/tcp connects; refused means free).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=""
for ((i = 0; i < 200; i++)); do
  p=$((24000 + ($$ + i * 7) % 2600 * 3))
  if port_free "$p" && port_free $((p + 1)) && port_free $((p + 2)); then port=$p; break; fi
done
[[ -n "$port" ]] || fail "no three free consecutive ports found in 24000-31799"

nodes=3 train=2000 test=500 seed=5
step "$nodes-node linear fedcgs federation on 127.0.0.1:$port-$((port + nodes - 1)): node 1 is edge_app"
fed="$tmp/fed"
mkdir -p "$fed"
"$prefix/bin/fednode" topology linear --nodes $nodes --method fedcgs --base-port "$port" --seed "$seed" \
  --deadline 120 --out "$fed/f.toml" --data dataset=fashion-mnist --data train-limit=$train \
  --data test-limit=$test --data partition=iid >"$tmp/topology.log" 2>&1 || fail "fednode topology"

# Held-out images for edge_app to classify with its head: the last 50 training images (no node
# holds them with train-limit $train), as PNG files in class folders named by class number.
/usr/bin/python3 - "${FEDNODE_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" "$fed/held-out" <<'EOF' \
  || fail "writing held-out PNG images"
import gzip, os, sys
import numpy as np
from PIL import Image
src, out = sys.argv[1], sys.argv[2]
def read(prefix, offset):
    name = [f for f in os.listdir(src) if f.startswith(prefix)][0]
    raw = open(os.path.join(src, name), "rb").read()
    return np.frombuffer(gzip.decompress(raw) if name.endswith(".gz") else raw, np.uint8, offset=offset)
images = read("train-images", 16).reshape(-1, 28, 28)[-50:]
labels = read("train-labels", 8)[-50:]
for i, (x, y) in enumerate(zip(images, labels)):
    os.makedirs(os.path.join(out, str(y)), exist_ok=True)
    Image.fromarray(x).save(os.path.join(out, str(y), "%02d.png" % i))
EOF

for id in 0 1 2; do
  if [[ $id == 1 ]]; then
    timeout 300 "$edge" "$fed/f.toml" 1 fashion-mnist $train $test --classify "$fed/held-out" >"$tmp/edge_app.log" 2>&1 &
  else
    timeout 300 "$prefix/bin/fednode" run --topology "$fed/f.toml" --id $id >"$tmp/node$id.log" 2>&1 &
  fi
  pids+=($!)
done
for id in 0 1 2; do
  rc=0
  wait "${pids[$id]}" || rc=$?
  [[ $rc == 0 ]] || fail "node $id ($([[ $id == 1 ]] && echo edge_app || echo fednode run)) exited with $rc"
done
pids=()
grep -q "knowledge from node 0" "$tmp/edge_app.log" || fail "edge_app's knowledge callback never ran"
grep -q "head ready" "$tmp/edge_app.log" || fail "edge_app's head callback never ran"
grep -q "classified 50 images of $fed/held-out: accuracy" "$tmp/edge_app.log" \
  || fail "edge_app did not classify the held-out images with its head"
grep "classified" "$tmp/edge_app.log" | sed 's/^/  /'
# The installed fednode reads the head file the node wrote, as edge_app's classifier did.
"$prefix/bin/fednode" predict --state "$fed/state/n1" --images "$fed/held-out" --quiet --out "$tmp/predict.csv" \
  >"$tmp/predict.log" 2>&1 || fail "fednode predict on edge_app's state"
grep -q "^accuracy" "$tmp/predict.log" || fail "fednode predict printed no accuracy"

step "compare with fednode simulate"
"$prefix/bin/fednode" simulate --dataset fashion-mnist --train-limit $train --test-limit $test \
  --partition iid --method fedcgs --topology linear --nodes $nodes --seed "$seed" --no-baselines \
  --report "$fed/report.json" >"$tmp/simulate.log" 2>&1 || fail "fednode simulate"
python3 - "$fed/report.json" "$fed"/state/n{0,1,2}/result.json <<'EOF' || fail "results differ from fednode simulate"
import json, sys
report = json.load(open(sys.argv[1]))
ok = True
for path in sys.argv[2:]:
    got = json.load(open(path))
    want = next(n for n in report["nodes"] if n["id"] == got["id"])
    line = f"  node {got['id']}: status {got['status']}, samples {got['samples']}, " \
           f"contributors {got['contributors']}, accuracy {got['accuracy']}"
    print(line + f" (simulate: samples {want['samples']}, contributors {want['contributors']}, accuracy {want['accuracy']})")
    if got["status"] != "finished" or got["samples"] != want["samples"] or \
       got["contributors"] != want["contributors"] or got["accuracy"] != want["accuracy"]:
        ok = False
sys.exit(0 if ok else 1)
EOF

step "the installed fednode loads the installed LibTorch library"
# glibc's loader names every file it opens under LD_DEBUG=files. The paper's trained head (--head-fit
# sgd) needs LibTorch; FedPFT's default closed-form head does not.
LD_DEBUG=files "$prefix/bin/fednode" simulate --dataset fashion-mnist --train-limit 300 --test-limit 100 \
  --method fedpft --head-fit sgd --components 1 --nodes 2 --no-baselines --quiet >"$tmp/torch.log" 2>&1 \
  || fail "fednode simulate --method fedpft (installed)"
loaded="$(sed -n 's/.*file=\([^ ]*libfednode_torch[.]so\) .*/\1/p' "$tmp/torch.log" | head -n 1)"
[[ -n "$loaded" && "$loaded" -ef "$(find "$prefix" -path '*/fednode/libfednode_torch.so' -not -path '*-packages/*' | head -n 1)" ]] \
  || fail "the installed fednode loaded '${loaded:-nothing}', not the installed libfednode_torch.so"
echo "  loaded $loaded"

if grep -q '^FEDNODE_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then
  step "the installed Python module imports from the prefix and loads its own LibTorch library"
  init="$(find "$prefix" -path '*-packages/fednode/__init__.py' | head -n 1)"
  [[ -f "$init" ]] || fail "no fednode Python package installed"
  pydir="$(dirname "$init")"
  site="$(dirname "$pydir")"
  LD_DEBUG=files PYTHONPATH="$site" /usr/bin/python3 - "$pydir" >"$tmp/python.log" 2>&1 <<'EOF' \
    || fail "importing and using the installed Python module"
import os, sys
import fednode
assert os.path.dirname(fednode.__file__) == sys.argv[1], fednode.__file__
X, y, info = fednode.extract("fashion-mnist", limit=8, input_size=32, cache=False)  # runs the backbone
assert X.shape == (8, 1280), X.shape
print("extracted", X.shape, info["fingerprint"][:12])
EOF
  loaded="$(sed -n 's/.*file=\([^ ]*libfednode_torch[.]so\) .*/\1/p' "$tmp/python.log" | head -n 1)"
  [[ -n "$loaded" && "$loaded" -ef "$pydir/libfednode_torch.so" ]] \
    || fail "the installed Python module loaded '${loaded:-nothing}', not $pydir/libfednode_torch.so"
  echo "  $(grep '^extracted' "$tmp/python.log"); loaded $loaded"
fi
step "ok"
