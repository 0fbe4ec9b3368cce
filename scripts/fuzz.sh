#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder (fuzz/, docs/security.md "Fuzzing"): builds the
# libFuzzer targets with clang under AddressSanitizer and UndefinedBehaviorSanitizer, writes the
# seed corpus, replays the inputs of earlier findings (fuzz/regressions/TARGET/), then fuzzes each
# target for SECONDS and prints one line per target. Any crash, leak, sanitizer report, timeout or
# memory beyond the limit fails the script and leaves the input under BUILD/findings/TARGET/.
#
#   scripts/fuzz.sh [--seconds S] [--jobs J] [--targets "a b"] [--build DIR] [--corpus DIR]
#                   [--optimize 0|1] [--build-only]
#
# CI builds it with --build-only while the tests run, then runs it with a few seconds a target,
# both at --optimize 0 (scripts/test.sh); a long run is, for example,
# `scripts/fuzz.sh --seconds 3600 --jobs 16`. Corpora grow in the corpus folder between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=5
jobs=$(nproc)
build=build-fuzz
corpus=
targets=
build_only=0
optimize=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --optimize) optimize=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds needs a whole number, got '$seconds'" >&2; exit 2 ;; esac
case "$optimize" in 0|1) ;; *) echo "fuzz.sh: --optimize is 0 or 1, got '$optimize'" >&2; exit 2 ;; esac
case "$jobs" in ''|*[!0-9]*|0) echo "fuzz.sh: --jobs needs a positive whole number, got '$jobs'" >&2; exit 2 ;; esac
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 1; }
build=$(realpath -m "$build")
corpus=$(realpath -m "${corpus:-$build/corpus}")

# Every library is instrumented (coverage and sanitizers); only the targets link libFuzzer. A
# Debug build keeps the asserts; line tables are all a finding's stack trace needs (full debug
# information made the compiles 5-18 % slower). -O0 compiles in about 55 % of -O1's time, for
# fewer executions a second: CI's short pass prefers it, a long run the default -O1. The level
# is part of the build folder's configuration, so switching it rebuilds everything.
flags="-O$optimize -fno-omit-frame-pointer -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined"
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$flags" \
  -DFEDNODE_BUILD_TESTS=OFF -DFEDNODE_BUILD_BENCH=OFF -DFEDNODE_PYTHON=OFF -DFEDNODE_BUILD_FUZZERS=ON > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target fuzzers > "$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 1; }
[ "$build_only" = 1 ] && exit 0

all=$(cd "$build/fuzz" && ls fuzz_* | grep -v '^fuzz_seeds$' | sed 's/^fuzz_//')
targets=${targets:-$all}
rm -rf "$build/seeds"
"$build/fuzz/fuzz_seeds" "$build/seeds" > /dev/null

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

failed=0
# Findings of earlier runs, kept in the tree once fixed: each must now pass.
for t in $targets; do
  if [ -d "fuzz/regressions/$t" ]; then
    if ! "$build/fuzz/fuzz_$t" -runs=1 "fuzz/regressions/$t"/* > "$build/regressions-$t.log" 2>&1; then
      echo "fuzz.sh: $t fails on a regression input:"; tail -30 "$build/regressions-$t.log"; failed=1
    fi
  fi
done

run_one() {
  local t=$1
  mkdir -p "$corpus/$t" "$build/findings/$t"
  # -rss_limit_mb: a decoder that lets one input of at most 1 MiB make it hold 2 GiB is a finding.
  "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len=1048576 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$t/" "$corpus/$t" "$build/seeds/$t" \
    > "$build/fuzz-$t.log" 2>&1
}
export -f run_one
export build corpus seconds
printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'run_one {} || echo {} >> "$build/failed-targets"' || true

printf '%-18s %12s %10s %8s %8s %8s\n' target executions "exec/s" edges corpus "rss MB"
for t in $targets; do
  log="$build/fuzz-$t.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo -)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo -)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo -)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo -)
  files=$(ls "$corpus/$t" | wc -l)
  printf '%-18s %12s %10s %8s %8s %8s\n' "$t" "${execs:--}" "${rate:--}" "${edges:--}" "$files" "${rss:--}"
done
if [ -s "$build/failed-targets" ]; then
  for t in $(cat "$build/failed-targets"); do
    echo "fuzz.sh: finding in $t (input under $build/findings/$t/):"
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$build/fuzz-$t.log" | head -10
  done
  rm -f "$build/failed-targets"
  failed=1
fi
exit $failed
