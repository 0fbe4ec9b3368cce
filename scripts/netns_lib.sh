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

# netns_wait_nodes START LIMIT: waits for every process in `pids` (node i's at index i), filling
# status[i] with its exit code; after LIMIT seconds from START (date +%s), prints the end of each
# $work/n<i>.log and fails. Sets elapsed.
declare -a status
netns_wait_nodes() {
  local start=$1 limit=$2 remaining=${#pids[@]} i rc
  while [ "$remaining" -gt 0 ]; do
    remaining=0
    for i in "${!pids[@]}"; do
      [ -n "${status[$i]:-}" ] && continue
      if kill -0 "${pids[$i]}" 2>/dev/null; then
        remaining=$((remaining + 1))
      else
        rc=0
        wait "${pids[$i]}" || rc=$?
        status[$i]=$rc
      fi
    done
    if [ "$remaining" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$limit" ]; then
      echo "FAILED: $remaining node(s) still running after $limit s" >&2
      for i in "${!pids[@]}"; do echo "--- n$i.log"; tail -n 20 "$work/n$i.log"; done >&2
      exit 1
    fi
    [ "$remaining" -gt 0 ] && sleep 0.5
  done
  elapsed=$(($(date +%s) - start))
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
