#!/usr/bin/env bash
# bench_hop over a 1 Gbit/s link instead of memory-speed loopback: both ends run in a private
# network namespace whose loopback is shaped to 1 Gbit/s with a token bucket (tc tbf), so the
# same program measures fednode's hop and raw ZeroMQ at a LAN's speed. Needs root (or
# CAP_NET_ADMIN + CAP_SYS_ADMIN) and iproute2; says so and exits 77 otherwise.
#   bash bench/hop_1gbit.sh BUILD_DIR [bench_hop options, e.g. --reps 20 --memory cold]
set -euo pipefail
build=${1:-build}
shift || true
ns="fnhop$$"
command -v ip >/dev/null || { echo "SKIPPED: no 'ip' command (Debian package iproute2)"; exit 77; }
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$ns" 2>/dev/null || { echo "SKIPPED: cannot create a network namespace (needs root or CAP_SYS_ADMIN)"; exit 77; }
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" tc qdisc add dev lo root tbf rate 1gbit burst 256kb latency 50ms ||
  { echo "SKIPPED: cannot shape the namespace's loopback (tc tbf)"; exit 77; }
echo "link: $(ip netns exec "$ns" tc qdisc show dev lo)"
ip netns exec "$ns" "$build/bench/bench_hop" "$@"
