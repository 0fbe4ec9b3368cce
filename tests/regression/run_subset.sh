#!/usr/bin/env bash
# CI check (ctest: regression_subset): runs the regression suite's subset with FEDNODE_BINARY and
# compares every report with the golden files in tests/regression/baseline-subset/ (their history:
# tests/regression/README.md). Any difference in accuracy,
# contributors, bytes ... fails. Ports 26230-26233 (the launched diamond).
#   bash tests/regression/run_subset.sh FEDNODE_BINARY
set -u
[ $# = 1 ] || { echo "usage: $0 FEDNODE_BINARY" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/fednode-regression-subset.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
suite=0
bash "$ROOT/scripts/regression_suite.sh" "$1" "$OUT" --subset || suite=$?
compare=0
python3 "$ROOT/scripts/compare_reports.py" "$HERE/baseline-subset" "$OUT" || compare=$?
if [ $suite != 0 ] || [ $compare != 0 ]; then
  echo "regression subset: FAILED (suite exit $suite, compare exit $compare)" >&2
  exit 1
fi
echo "regression subset: every report equal to tests/regression/baseline-subset/"
