#!/usr/bin/env bash
# Installs what is missing, builds everything, runs every test and a short fuzzing pass. The
# README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
(cd build && ctest --output-on-failure -j"$(nproc)")
# Every decoder under libFuzzer with ASan and UBSan, a few seconds each, and the inputs of past
# findings (docs/security.md, "Fuzzing"): a separate clang build in build-fuzz/.
bash scripts/fuzz.sh --seconds 4
