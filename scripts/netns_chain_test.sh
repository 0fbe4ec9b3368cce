#!/usr/bin/env bash
# A 5-node FedCGS chain with every node in its own network namespace: own IP address, own
# loopback, reachable only over a veth link to a bridge. This is the LAN case of docs/lan.md on
# one machine: nodes bind tcp://*:PORT and are addressed by their IP, and since the addresses
# exist only inside the namespaces, the run cannot silently fall back to loopback. All nodes even
# share one port number, which on a single network stack would collide.
#
# With --discover the file gives no node an address or bind: every node runs `fednode run
# --discover` and finds its peers by UDP beacons over the bridge (docs/lan.md, "Discovery"), while
# an intruder in a sixth namespace (scripts/beacon_forger.py) broadcasts forged beacons: the real
# ones pointing at its own silent TCP port, and ones with keys not in the topology. The run must
# still complete, no node may trust the intruder's address, and the foreign keys are ignored.
#
# usage: netns_chain_test.sh [--discover] FEDNODE_BINARY
# Exit status: 0 passed, 1 failed, 2 usage, 77 skipped (CTest's SKIP_RETURN_CODE): namespaces,
# veth pairs or bridges cannot be made here (not root / no CAP_SYS_ADMIN and CAP_NET_ADMIN, no
# iproute2, or a kernel without veth or bridge support).
#
# Everything it creates lives in namespaces named fnchain<PID>-*; the links are created inside
# them, never in the caller's namespace, so the host's interfaces and routes are not touched and
# two runs at once do not interfere. Deleting the namespaces removes the veths and the bridge.
set -euo pipefail

readonly NODES=5
readonly SUBNET=10.231.0        # /24, only ever configured inside the namespaces
readonly PORT=7300              # the same for every node: each has its own IP
readonly TIME_LIMIT=240         # below the CTest TIMEOUT so that we still get to clean up

readonly INTRUDER=100           # its host number on the subnet, in --discover mode
readonly DISCOVERY_PORT=7399    # the default [federation] discovery_port

# shellcheck source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
netns_arguments --discover "$@"
readonly discover=$option_given
prefix=fnchain$$
forger_pid=""
sw_ns=$prefix-sw
node_ns() { echo "$prefix-n$1"; }
netns_before_exit() {
  [ -n "$forger_pid" ] && kill -TERM "$forger_pid" 2>/dev/null && wait "$forger_pid" 2>/dev/null
  return 0
}

# --- can namespaces be made here? -----------------------------------------------------------
command -v ip >/dev/null 2>&1 ||
  skip "the 'ip' command is not installed (Debian package iproute2)"
ip netns list >/dev/null 2>&1 ||
  skip "'ip netns' is not supported by this iproute2: $(ip netns list 2>&1 | head -n1)"
if [ "$(id -u)" -ne 0 ]; then
  # Without root, only a process holding CAP_SYS_ADMIN (to create and mount namespaces) and
  # CAP_NET_ADMIN (to make links) can do this; the probe below decides, this names the cause.
  why_user="not running as root (uid $(id -u)); "
else
  why_user=""
fi

# The switch namespace doubles as the probe: if it cannot be made, nothing can.
if ! err=$(ip netns add "$sw_ns" 2>&1); then
  skip "${why_user}cannot create a network namespace ('ip netns add' needs CAP_SYS_ADMIN and a writable /run/netns): $err"
fi
created_ns+=("$sw_ns")
if ! err=$(ip -n "$sw_ns" link add br0 type bridge 2>&1); then
  skip "${why_user}cannot create a bridge inside a network namespace (CAP_NET_ADMIN, kernel bridge support): $err"
fi

for i in $(seq 0 $((NODES - 1))); do
  ns=$(node_ns "$i")
  if ! err=$(ip netns add "$ns" 2>&1); then
    skip "${why_user}cannot create network namespace $ns: $err"
  fi
  created_ns+=("$ns")
  # Created inside the switch namespace with its peer moved straight into the node's, so no
  # interface ever appears in the caller's namespace.
  if ! err=$(ip -n "$sw_ns" link add "port$i" type veth peer name eth0 netns "$ns" 2>&1); then
    skip "${why_user}cannot create a veth pair (CAP_NET_ADMIN, kernel veth support): $err"
  fi
done

# --- wire them up: every node on one bridge, so each reaches its successor directly ----------
ip -n "$sw_ns" link set lo up
ip -n "$sw_ns" link set br0 up
for i in $(seq 0 $((NODES - 1))); do
  ns=$(node_ns "$i")
  ip -n "$sw_ns" link set "port$i" master br0
  ip -n "$sw_ns" link set "port$i" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
done
echo "network: bridge br0 in $sw_ns; nodes in $prefix-n0..n$((NODES - 1)) at $SUBNET.1..$NODES/24"
intruder_ns=$prefix-x
if [ "$discover" -eq 1 ]; then
  command -v python3 >/dev/null 2>&1 || skip "--discover needs python3 for the forger (scripts/setup.sh installs it)"
  ip netns add "$intruder_ns"
  created_ns+=("$intruder_ns")
  ip -n "$sw_ns" link add portx type veth peer name eth0 netns "$intruder_ns"
  ip -n "$sw_ns" link set portx master br0
  ip -n "$sw_ns" link set portx up
  ip -n "$intruder_ns" link set lo up
  ip -n "$intruder_ns" addr add "$SUBNET.$INTRUDER/24" dev eth0
  ip -n "$intruder_ns" link set eth0 up
  echo "intruder: $intruder_ns at $SUBNET.$INTRUDER, forging beacons on UDP port $DISCOVERY_PORT"
fi

# --- the federation --------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/fednode-netns.XXXXXX")
raw=$work/chain5.generated.toml
topo=$work/chain5.toml
if [ "$discover" -eq 1 ]; then
  where=(--no-addresses)
else
  where=(--host "$SUBNET.1" --base-port "$PORT")
fi
"$fednode" topology linear --nodes "$NODES" --method fedcgs --out "$raw" \
  "${where[@]}" --deadline 60 \
  --keys "$work/keys" --state "$work/state" \
  --data dataset=fashion-mnist --data train-limit=3000 --data test-limit=500 \
  --data partition=dirichlet --data dirichlet-alpha=0.5

# Node i is addressed by its own IP (the builder gives every node --host) and listens on all of
# its namespace's interfaces; with --discover the builder wrote no address at all (each node
# listens on any port of every interface). The file keeps [[node]] tables with id before address; anything else is
# caught by the count check below rather than producing a half-rewritten file.
awk -v subnet="$SUBNET" -v port="$PORT" -v n="$NODES" -v discover="$discover" '
  /^\[\[/ { id = "" }
  /^id = [0-9]+$/ { id = $3 }
  /^address = / {
    if (id == "") { print "address before id" > "/dev/stderr"; exit 1 }
    rewritten++
    printf "address = \"tcp://%s.%d:%d\"\n", subnet, id + 1, port
    printf "bind = \"tcp://*:%d\"\n", port
    next
  }
  { print }
  END {
    want = discover ? 0 : n  # --no-addresses wrote none
    if (rewritten != want) { print "found " rewritten " addresses, expected " want > "/dev/stderr"; exit 1 }
  }
' "$raw" >"$topo"
echo "topology: $topo"
grep -E '^(address|bind) = ' "$topo" || echo "(no addresses: found by discovery)"

# --- run one node per namespace ----------------------------------------------------------------
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run_args=()
if [ "$discover" -eq 1 ]; then
  run_args=(--discover)
  # Forging before the nodes start, from the file's run name and public keys (no secrets), and
  # copying each real beacon as soon as it is heard.
  ip netns exec "$intruder_ns" python3 "$here/beacon_forger.py" "$SUBNET.255" "$DISCOVERY_PORT" "$work/forger.txt" \
    "$topo" >"$work/forger.log" 2>&1 &
  forger_pid=$!
  sleep 0.5
fi
start=$(date +%s)
for i in $(seq 0 $((NODES - 1))); do
  # One compute thread per node: five nodes share this machine's cores.
  ip netns exec "$(node_ns "$i")" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    "$fednode" run --topology "$topo" --id "$i" "${run_args[@]}" >"$work/n$i.log" 2>&1 &
  pids+=($!)
done

netns_wait_nodes "$start" "$TIME_LIMIT"

# --- check -------------------------------------------------------------------------------------
failed=0
fail() {
  echo "FAILED: $*" >&2
  failed=1
}
for i in $(seq 0 $((NODES - 1))); do
  ns=$(node_ns "$i")
  [ "${status[$i]}" -eq 0 ] || fail "node $i exited with status ${status[$i]}"
  result=$work/state/n$i/result.json
  if [ ! -f "$result" ]; then
    fail "node $i wrote no $result"
    continue
  fi
  # result.json may be laid out over many lines: compare it with all white space removed.
  flat=$(tr -d ' \t\r\n' <"$result")
  case $flat in *'"status":"finished"'*) ;; *) fail "node $i: result.json does not say \"status\": \"finished\"" ;; esac
  # The leading , or { keeps expected_contributors from matching.
  contributors=$(grep -o '[{,]"contributors":\[[0-9,]*\]' <<<"$flat" | head -n1 | sed 's/^.//')
  want=$(seq -s, 0 "$i")
  # Linear semantics: node i ends with the data of nodes 0..i.
  [ "$contributors" = "\"contributors\":[$want]" ] ||
    fail "node $i: expected contributors [$want], result.json has ${contributors:-none}"
  # The addresses exist only on eth0, so the knowledge must have crossed the veth link.
  rx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)
  tx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)
  echo "node $i ($SUBNET.$((i + 1))): exit ${status[$i]}, contributors [${contributors#*[}, eth0 rx $rx B, tx $tx B"
  { [ "$rx" -gt 0 ] && [ "$tx" -gt 0 ]; } || fail "node $i: no traffic on its veth link (rx $rx, tx $tx)"
  # The file sets no hop_encryption and the nodes listen beyond loopback: CurveZMQ by default.
  grep -q "hops: CurveZMQ" "$work/n$i.log" || fail "node $i: no CurveZMQ on its hops (the default beyond loopback)"
done
if [ "$discover" -eq 1 ]; then
  kill -TERM "$forger_pid" 2>/dev/null
  wait "$forger_pid" 2>/dev/null || true
  forger_pid=""
  cat "$work/forger.log" >&2
  forged=$(awk '$1 == "forged" { print $2 }' "$work/forger.txt" 2>/dev/null)
  accepted=$(awk '$1 == "accepted" { print $2 }' "$work/forger.txt" 2>/dev/null)
  intruder="tcp://$SUBNET.$INTRUDER:"
  [ "${forged:-0}" -gt 0 ] || fail "the intruder forged no beacon (it heard none?)"
  ignored=0
  dialled=0
  for i in $(seq 0 $((NODES - 1))); do
    log=$work/n$i.log
    grep -q "discovery: beaconing" "$log" || fail "node $i: did not beacon"
    # Its address is never trusted: no handshake with the silent port can succeed.
    if grep "proved its key" "$log" | grep -qF "$intruder"; then fail "node $i trusted the intruder's address"; fi
    grep -q "ignored a beacon from $SUBNET.$INTRUDER: it names" "$log" && ignored=$((ignored + 1))
    grep -q "may be at $intruder\|trying $intruder" "$log" && dialled=$((dialled + 1))
  done
  [ "$ignored" -gt 0 ] || fail "no node said it ignored the intruder's beacons with foreign keys"
  # Forged from before the start every 20 ms, against a node's one beacon a second: some node
  # hears a forged address for a peer first, dials it, and must give up on it.
  [ "$dialled" -gt 0 ] || fail "no node dialled a spoofed address: the forger was not heard first anywhere"
  echo "intruder: forged ${forged:-0} datagrams; $ignored node(s) ignored its foreign keys;" \
    "$dialled node(s) dialled a spoofed address (${accepted:-0} connections to its silent port), none trusted it"
fi
if [ "$failed" -ne 0 ]; then
  for i in $(seq 0 $((NODES - 1))); do echo "--- n$i.log"; tail -n 30 "$work/n$i.log"; done >&2
  exit 1
fi
if [ "$discover" -eq 1 ]; then
  echo "PASSED: $NODES-node chain across $NODES network namespaces, found by discovery past a forger, in ${elapsed} s"
else
  echo "PASSED: $NODES-node chain across $NODES network namespaces in ${elapsed} s"
fi
