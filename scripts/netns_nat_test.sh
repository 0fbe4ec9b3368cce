#!/usr/bin/env bash
# A 5-node FedCGS chain across two NAT routers and a relay, in network namespaces (docs/deployment.md):
#
#   site A 192.168.10.0/24 --[router A, nftables masquerade]--+
#     n0 .10, n3 .13                                          |  public 10.232.0.0/24:
#   site B 192.168.20.0/24 --[router B, nftables masquerade]--+  relay r1 .10, n2 .2
#     n1 .11, n4 .14
#
# Each router forwards only connections its own site opens (a stateful nftables filter) and hides
# the site behind its public address; nothing routes to a private subnet from outside. So n0, n1,
# n3 and n4 are reachable = false: 0 -> 1 and 3 -> 4 cross between the two NATed sites through the
# relay, 1 dials the public n2, and n2 answers n3 on the connection n3 dialled. The test shows
# that a direct connection between the two sites fails (and one from the public side into a site),
# that the run completes with every node's accuracy and contributors exactly those of `fednode
# simulate`, and that the routers translated the traffic (their masquerade counters).
#
# With --kill-relay the relay's link is slowed to 8 Mbit/s (tc tbf), so that a 2.5 MB message
# takes seconds, and the relay is killed (SIGKILL) once it has carried its first frames and started
# again a second later: the results must be the same.
#
# usage: netns_nat_test.sh [--kill-relay] FEDNODE_BINARY
# Exit status: 0 passed, 1 failed, 2 usage, 77 skipped (namespaces, veths, bridges or nftables
# cannot be used here: not root, no iproute2 or nftables, a kernel without them).
# Everything lives in namespaces named fnnat<PID>-*, deleted at the end.
set -euo pipefail

readonly PORT=7300          # every node's port (each has its own address)
readonly RELAY_PORT=7310
readonly PROBE_PORT=7399    # the direct-connection probes' listener
readonly TIME_LIMIT=240

# shellcheck source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
netns_arguments --kill-relay "$@"
readonly kill_relay=$option_given
prefix=fnnat$$
relay_pid=""
probe_pid=""
netns_before_exit() { pids+=($relay_pid $probe_pid); }

command -v ip >/dev/null 2>&1 || skip "the 'ip' command is not installed (Debian package iproute2)"
command -v nft >/dev/null 2>&1 || skip "the 'nft' command is not installed (Debian package nftables; scripts/setup.sh installs it)"
[ "$kill_relay" -eq 0 ] || command -v tc >/dev/null 2>&1 || skip "--kill-relay needs tc (iproute2)"
ns() { echo "$prefix-$1"; }
in_ns() {
  local where=$1
  shift
  ip netns exec "$(ns "$where")" "$@"
}
make_ns() {
  local err
  err=$(ip netns add "$(ns "$1")" 2>&1) || skip "cannot create a network namespace (root, CAP_SYS_ADMIN): $err"
  created_ns+=("$(ns "$1")")
  ip -n "$(ns "$1")" link set lo up
}
# attach HOST IFACE SWITCH ADDRESS/PREFIX: a veth from SWITCH's bridge to HOST, named IFACE there.
attach() {
  local host=$1 iface=$2 sw=$3 address=$4 port="p-$1"
  local err
  err=$(ip -n "$(ns "$sw")" link add "$port" type veth peer name "$iface" netns "$(ns "$host")" 2>&1) ||
    skip "cannot create a veth pair (CAP_NET_ADMIN, kernel veth support): $err"
  ip -n "$(ns "$sw")" link set "$port" master br0
  ip -n "$(ns "$sw")" link set "$port" up
  ip -n "$(ns "$host")" addr add "$address" dev "$iface"
  ip -n "$(ns "$host")" link set "$iface" up
}

# --- the networks -------------------------------------------------------------------------
for sw in pub swa swb; do
  make_ns "$sw"
  err=$(ip -n "$(ns "$sw")" link add br0 type bridge 2>&1) || skip "cannot create a bridge (CAP_NET_ADMIN): $err"
  ip -n "$(ns "$sw")" link set br0 up
done
for host in ra rb relay n0 n1 n2 n3 n4; do make_ns "$host"; done
attach relay eth0 pub 10.232.0.10/24
attach n2 eth0 pub 10.232.0.2/24
attach ra pub pub 10.232.0.101/24
attach rb pub pub 10.232.0.102/24
attach ra lan swa 192.168.10.1/24
attach rb lan swb 192.168.20.1/24
attach n0 eth0 swa 192.168.10.10/24
attach n3 eth0 swa 192.168.10.13/24
attach n1 eth0 swb 192.168.20.11/24
attach n4 eth0 swb 192.168.20.14/24
for host in n0 n3; do ip -n "$(ns "$host")" route add default via 192.168.10.1; done
for host in n1 n4; do ip -n "$(ns "$host")" route add default via 192.168.20.1; done
for r in ra rb; do
  in_ns "$r" sysctl -qw net.ipv4.ip_forward=1
  # A home or hospital router: the site's own connections go out, translated to the router's
  # public address; nothing from outside comes in unless it answers one of them.
  err=$(in_ns "$r" nft -f - 2>&1 <<'NFT'
table ip nat {
  chain post {
    type nat hook postrouting priority srcnat;
    oifname "pub" counter masquerade
  }
}
table inet filter {
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "lan" oifname "pub" accept
  }
}
NFT
  ) || skip "nftables cannot set up NAT in a namespace (kernel nf_tables, nft_masq): $err"
done
if [ "$kill_relay" -eq 1 ]; then
  # Both directions of the relay's link: its own egress and the switch port's towards it.
  in_ns relay tc qdisc add dev eth0 root tbf rate 8mbit burst 32kbit latency 400ms
  ip netns exec "$(ns pub)" tc qdisc add dev p-relay root tbf rate 8mbit burst 32kbit latency 400ms
fi
echo "network: sites A (n0, n3) and B (n1, n4) behind NAT routers; relay and n2 public"

# --- what a NAT allows -----------------------------------------------------------------------
connects() {  # connects FROM_HOST IP PORT: whether a TCP connection is made within 3 s
  in_ns "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null
}
probe_listen() {  # a listener on PROBE_PORT in HOST, for the probes
  ip netns exec "$(ns "$1")" python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', $PROBE_PORT)); s.listen(8); s.settimeout(20)
end = time.time() + 20
while time.time() < end:
    try: s.accept()[0].close()
    except OSError: pass
" &
  probe_pid=$!
  sleep 0.5
}
failed=0
fail() {
  echo "FAILED: $*" >&2
  failed=1
}
probe_listen n1
connects n4 192.168.20.11 "$PROBE_PORT" || fail "the probe listener in site B is not reachable from its own site"
connects n0 192.168.20.11 "$PROBE_PORT" && fail "site A reached site B directly: no NAT in between"
kill "$probe_pid" 2>/dev/null; wait "$probe_pid" 2>/dev/null || true; probe_pid=""
probe_listen n2
connects n0 10.232.0.2 "$PROBE_PORT" || fail "site A cannot open a connection to the public subnet"
kill "$probe_pid" 2>/dev/null; wait "$probe_pid" 2>/dev/null || true; probe_pid=""
probe_listen n0
connects n2 192.168.10.10 "$PROBE_PORT" && fail "the public subnet reached into site A"
kill "$probe_pid" 2>/dev/null; wait "$probe_pid" 2>/dev/null || true; probe_pid=""
[ "$failed" -eq 0 ] || exit 1
echo "probes: site A -> site B fails, public -> site A fails, site A -> public works"
masqueraded() { in_ns "$1" nft list chain ip nat post | grep -o 'packets [0-9]*' | awk '{print $2}'; }
declare -A probed
for r in ra rb; do probed[$r]=$(masqueraded "$r"); done

# --- the federation ------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/fednode-nat.XXXXXX")
topo=$work/nat5.toml
"$fednode" topology linear --nodes 5 --method fedcgs --out "$work/raw.toml" --host 127.0.0.1 --base-port "$PORT" \
  --deadline 120 --keys "$work/keys" --state "$work/state" \
  --data dataset=fashion-mnist --data train-limit=3000 --data test-limit=500 \
  --data partition=dirichlet --data dirichlet-alpha=0.5 >/dev/null
"$fednode" keygen --out "$work/keys/r1" >/dev/null
# n2 listens on its public address; the others accept no connections; relay r1 joins them.
python3 - "$work/raw.toml" "$topo" "$PORT" "$RELAY_PORT" <<'PY'
import re, sys
raw, out, port, relay_port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
text = open(raw).read()
def node(m):
    block = m.group(0)
    nid = int(re.search(r"^id = (\d+)$", block, re.M).group(1))
    line = f'address = "tcp://10.232.0.2:{port}"\nbind = "tcp://*:{port}"' if nid == 2 else "reachable = false"
    new, n = re.subn(r'^address = ".*"$', line, block, flags=re.M)
    assert n == 1, block
    return new
text = re.sub(r"\[\[node\]\].*?(?=\n\[\[|\Z)", node, text, flags=re.S)
text += f'\n[[relay]]\nname = "r1"\naddress = "tcp://10.232.0.10:{relay_port}"\nkey_dir = "keys/r1"\n'
open(out, "w").write(text)
PY
grep -E '^(address|bind|reachable|name) = ' "$topo" | tr '\n' ' '; echo

start_relay() {
  # ip netns exec execs the command: $! is the relay itself, which the test kills.
  ip netns exec "$(ns relay)" "$fednode" relay --topology "$topo" --name r1 >>"$work/relay.log" 2>&1 &
  relay_pid=$!
}
start_relay
start=$(date +%s)
for i in 0 1 2 3 4; do
  ip netns exec "$(ns "n$i")" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$fednode" run --topology "$topo" --id "$i" >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
if [ "$kill_relay" -eq 1 ]; then
  for _ in $(seq 600); do grep -q "frames (" "$work/relay.log" && break; sleep 0.1; done
  grep -q "frames (" "$work/relay.log" || fail "the relay carried nothing within a minute"
  kill -KILL "$relay_pid"
  wait "$relay_pid" 2>/dev/null || true
  echo "relay: killed after $(grep -c 'frames (' "$work/relay.log") count line(s): $(grep 'frames (' "$work/relay.log" | tail -1)"
  sleep 1
  killed_at=$(wc -c <"$work/relay.log")
  start_relay
fi

netns_wait_nodes "$start" "$TIME_LIMIT"
kill -TERM "$relay_pid" 2>/dev/null || fail "the relay was no longer running at the end"
wait "$relay_pid" 2>/dev/null || true
relay_pid=""

# --- check ----------------------------------------------------------------------------------
"$fednode" simulate --quiet --no-baselines --method fedcgs --topology linear --nodes 5 --seed 0 \
  --dataset fashion-mnist --train-limit 3000 --test-limit 500 --partition dirichlet --dirichlet-alpha 0.5 \
  --report "$work/simulate.json" >/dev/null
for i in 0 1 2 3 4; do
  [ "${status[$i]}" -eq 0 ] || fail "node $i exited with status ${status[$i]}"
done
python3 - "$work" <<'PY' || failed=1
import json, sys
work = sys.argv[1]
sim = json.load(open(f"{work}/simulate.json"))["nodes"]
bad = 0
for i in range(5):
    try:
        r = json.load(open(f"{work}/state/n{i}/result.json"))
    except OSError as e:
        print(f"FAILED: node {i}: {e}", file=sys.stderr); bad = 1; continue
    want = (sim[i]["accuracy"], sim[i]["contributors"])
    got = (r["accuracy"], r["contributors"])
    print(f"node {i}: {r['status']}, accuracy {got[0]:.4f} contributors {got[1]} (simulate: {want[0]:.4f} {want[1]})")
    if r["status"] != "finished" or got != want:
        print(f"FAILED: node {i} ended {r['status']} with {got}, simulate has {want}", file=sys.stderr); bad = 1
sys.exit(bad)
PY
for r in ra rb; do
  # Counted once per connection: its first packet.
  made=$(($(masqueraded "$r") - ${probed[$r]}))
  echo "router $r: translated $made connection(s) of the run"
  [ "$made" -gt 0 ] || fail "router $r translated nothing: the sites' traffic did not cross their NAT"
done
grep -q "CurveZMQ, admitting the 5 node keys" "$work/relay.log" || fail "the relay did not run CurveZMQ"
tail -n 2 "$work/relay.log"
grep -q "0 refused" "$work/relay.log" || fail "the relay refused frames of the federation's own nodes"
grep -q "through relay 'r1'" "$work/n0.log" || fail "node 0 did not reach node 1 through the relay"
if [ "$kill_relay" -eq 1 ]; then
  tail -c +"$((killed_at + 1))" "$work/relay.log" | grep -q "frames (" || fail "the restarted relay carried nothing"
fi
if [ "$failed" -ne 0 ]; then
  for i in 0 1 2 3 4; do echo "--- n$i.log"; tail -n 30 "$work/n$i.log"; done >&2
  echo "--- relay.log"; cat "$work/relay.log" >&2
  exit 1
fi
echo "PASSED: 5-node chain across two NATs and a relay$([ "$kill_relay" -eq 1 ] && echo ", the relay killed and restarted mid-run,") in ${elapsed} s, equal to simulate"
