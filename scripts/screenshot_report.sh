#!/usr/bin/env bash
# The report page in a real browser (issue 22, section 1): a small `fednode simulate` run, its
# page from `fednode report --html`, and a screenshot of it by headless Chromium (Debian package
# chromium, a test-only tool: docs/dependencies.md). README.md shows the picture it makes.
#
#   bash scripts/screenshot_report.sh [FEDNODE] [OUT.png]     (defaults: build/fednode, docs/images/report.png)
#
# Data: the first 6000/1000 Fashion-MNIST images as pixels (Debian's dataset-fashion-mnist) when
# installed, otherwise a synthetic 10-class set written here. Without chromium it says
# "skipped: chromium not installed" and exits 0, so a machine without a browser passes.
set -euo pipefail
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "skipped: chromium not installed (Debian: apt-get install chromium)"
  exit 0
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FEDNODE=$(realpath "${1:-$ROOT/build/fednode}")
OUT=$(realpath -m "${2:-$ROOT/docs/images/report.png}")
[ -x "$FEDNODE" ] || { echo "$0: no fednode executable at $FEDNODE (build it, or give its path)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

FM_DIR=${FEDNODE_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ -e "$FM_DIR/train-images-idx3-ubyte.gz" ] || [ -e "$FM_DIR/train-images-idx3-ubyte" ]; then
  DATA=(--dataset fashion-mnist --train-limit 6000 --test-limit 1000)
else
  # Ten Gaussian classes in 16 dimensions, as .npy files written without numpy.
  python3 - "$WORK" <<'PY'
import random, struct, sys
def npy(path, dtype, shape, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, shape)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), dtype[-2]), *values))
rng = random.Random(1)
for split, n in (("train", 4000), ("test", 1000)):
    X, y = [], []
    for i in range(n):
        c = i % 10
        y.append(c)
        X += [(2.5 if j % 10 == c else 0.0) + rng.gauss(0, 1) for j in range(16)]
    npy(f"{sys.argv[1]}/{split}_X.npy", "<f4", (n, 16), X)
    npy(f"{sys.argv[1]}/{split}_y.npy", "<i4", (n,), y)
PY
  DATA=(--train-features "$WORK/train_X.npy" --train-labels "$WORK/train_y.npy"
        --test-features "$WORK/test_X.npy" --test-labels "$WORK/test_y.npy")
fi

"$FEDNODE" simulate "${DATA[@]}" --method fedpft --topology linear --nodes 5 --partition dirichlet \
  --dirichlet-alpha 0.3 --seed 2 --quiet --report "$WORK/report.json" > /dev/null
# From inside WORK, so that the page names its report as report.json, not a temporary path.
(cd "$WORK" && "$FEDNODE" report report.json --html html > /dev/null)
mkdir -p "$(dirname "$OUT")"
# --no-sandbox: Chromium's sandbox cannot start as root or in most containers, and the page is
# our own file. Its own chatter on stderr (GPU, D-Bus) is noise here.
"$CHROMIUM" --headless --disable-gpu --no-sandbox --hide-scrollbars --screenshot="$OUT" \
  --window-size=1200,1600 "file://$WORK/html/index.html" > "$WORK/chromium.log" 2>&1 || {
  cat "$WORK/chromium.log" >&2
  echo "$0: chromium failed" >&2
  exit 1
}
[ -s "$OUT" ] || { echo "$0: chromium wrote no screenshot" >&2; exit 1; }
echo "wrote $OUT ($(stat -c %s "$OUT") bytes)"
