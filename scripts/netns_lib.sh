# What the network-namespace tests share (sourced, after `set -euo pipefail`): skip() with CTest's
# code 77, and on exit stopping the processes in `pids` (SIGTERM, then SIGKILL after 5 s) and
# deleting the namespaces in `created_ns` and the folder `work`. A test that has more to stop first
# defines netns_before_exit.
skipping=0
work=""
option_given=0
fednode=""
pids=()
created_ns=()

# netns_arguments OPTION "$@": the test's command line, [OPTION] FEDNODE_BINARY. Sets option_given
# (0 or 1) and fednode (an absolute path); exits 2 on a wrong command line, 1 when the binary is
# not an executable.
netns_arguments() {
  local option=$1
  shift
  if [ "${1:-}" = "$option" ]; then
    option_given=1
    shift
  fi
  if [ $# -ne 1 ]; then
    echo "usage: $0 [$option] FEDNODE_BINARY" >&2
    exit 2
  fi
  fednode=$1
  case $fednode in /*) ;; *) fednode=$PWD/$fednode ;; esac
  if [ ! -x "$fednode" ]; then
    echo "FAILED: $fednode is not an executable" >&2
    exit 1
  fi
}

skip() {
  echo "SKIPPED: $*"
  skipping=1
  exit 77
}

netns_cleanup() {
  local rc=$?
  set +e
  # Only skip() may report a skip; a command that failed with 77 is a failure.
  [ "$rc" -eq 77 ] && [ "$skipping" -eq 0 ] && rc=1
  if declare -F netns_before_exit >/dev/null; then netns_before_exit; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  for ns in "${created_ns[@]}"; do ip netns delete "$ns" 2>/dev/null; done
  [ -n "$work" ] && rm -rf "$work"
  exit "$rc"
}
trap netns_cleanup EXIT
trap 'echo "FAILED: line $LINENO: \"$BASH_COMMAND\" exited with status $?" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM
