#!/usr/bin/env bash
# The test suites under sanitizers (docs/security.md, "Sanitizers"):
#   scripts/sanitize.sh asan [CTEST ARGS]  every suite, built with AddressSanitizer and
#                                          UndefinedBehaviorSanitizer (build-asan/)
#   scripts/sanitize.sh tsan [CTEST ARGS]  the transport and node suites (threads: the transport,
#                                          the sealing pool, the node's worker) under
#                                          ThreadSanitizer (build-tsan/)
# Any report fails the run. Too slow for CI on two cores (a full instrumented build and the
# network suite's real processes take most of an hour); run it before a release and after
# touching threads or decoders.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
case "$mode" in
  asan)
    build=build-asan
    flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
    targets="all"
    # install_and_embed builds examples/edge_app against the installed library with the
    # compiler's plain flags, which cannot link an instrumented library: it checks packaging,
    # which the ordinary build's test run covers.
    tests=(-E install_and_embed "$@")
    # LibTorch and OpenBLAS are not instrumented: their own allocations are not checked, and
    # LibTorch's static initialisers define symbols twice across its libraries (ODR reports that
    # are LibTorch's, not ours). LeakSanitizer is off: its tracer crashes (signal 11 while it
    # suspends threads, "LeakSanitizer has encountered a fatal error") in every process that has
    # loaded LibTorch, after all its tests passed; the fuzzers check the decoders for leaks.
    export ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0:abort_on_error=1:strict_string_checks=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  tsan)
    build=build-tsan
    flags="-O1 -g -fno-omit-frame-pointer -fsanitize=thread"
    targets="test_node test_network fednode_cli fednode_torch"
    tests=(-R 'test_node|test_network' "$@")
    # libgomp (OpenMP) is not instrumented: its barriers are invisible to ThreadSanitizer, so
    # the loops Eigen and our parallel_for run under it would read as races.
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(pwd)/scripts/sanitizers/tsan.supp
    export OMP_NUM_THREADS=1
    ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan [ctest arguments]" >&2; exit 2 ;;
esac
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="${flags/-O1 -g /}" -DCMAKE_SHARED_LINKER_FLAGS="${flags/-O1 -g /}" \
  -DCMAKE_MODULE_LINKER_FLAGS="${flags/-O1 -g /}" -DFEDNODE_BUILD_BENCH=OFF > "$build/configure.log"
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets
cd "$build"
# Instrumented, the network suite takes well over its ordinary 20-minute limit.
ctest --output-on-failure --timeout 5400 "${tests[@]}"
