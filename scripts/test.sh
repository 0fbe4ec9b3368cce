#!/usr/bin/env bash
# Installs what is missing, builds everything, runs every test and a short fuzzing pass. The
# README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Each stage's seconds go to the log: CI's time is a goal of its own (docs/performance.md).
stage() { echo "test.sh: $1 took $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }
stage_start=$SECONDS
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
stage "configuring and building"

# Every decoder under libFuzzer with ASan and UBSan, a few seconds each, and the inputs of past
# findings (docs/security.md, "Fuzzing"): a separate clang build in build-fuzz/. That build needs
# nothing from the tests, so it runs beside them at low priority, on what the tests leave idle
# while their nodes wait out deadlines (ctest -j2 keeps two cores about 1.5 busy); the tests keep
# the machine whenever they want it. Job control gives it a process group of its own, so that a
# failed test run can stop the whole build. Unoptimised, it compiles in about 55 % of the time,
# and 4 s a target is a smoke test and a replay of past findings either way.
mkdir -p build-fuzz
set -m
nice -n 15 bash scripts/fuzz.sh --optimize 0 --build-only < /dev/null > build-fuzz/build-only.log 2>&1 &
fuzz_build=$!
set +m
tests=0
(cd build && ctest --output-on-failure -j"$(nproc)") || tests=$?
stage "ctest"
if [ "$tests" -ne 0 ]; then
  kill -- -"$fuzz_build" 2>/dev/null || true
  exit "$tests"
fi
wait "$fuzz_build" || { cat build-fuzz/build-only.log; exit 1; }
stage "waiting for the fuzzers' build"
bash scripts/fuzz.sh --optimize 0 --seconds 4
stage "fuzzing"
