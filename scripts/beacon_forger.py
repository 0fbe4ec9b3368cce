#!/usr/bin/env python3
"""A hostile host on a fednode LAN, for scripts/netns_chain_test.sh --discover.

It listens for the nodes' discovery beacons (docs/protocol.md, section 13) and broadcasts forged
ones beside them: each real beacon again with this host as the sender and the port of a TCP
listener that accepts and never answers (a spoofed address: the node that dials it must not trust
it, since no CurveZMQ handshake can succeed), and each with one byte of its public key changed (a
key not in the topology: to be ignored). Also a few datagrams that are not beacons.

With TOPOLOGY (a file with `run = "..."`), it forges from the start, before any node beacons: the
run tag and the nodes' public keys are no secret (docs/protocol.md, section 13), so a node hears a
forged address for its peers before the real one and dials it first.

usage: beacon_forger.py BROADCAST_ADDRESS DISCOVERY_PORT REPORT_FILE [TOPOLOGY]
Runs until SIGTERM, then writes "forged N" and "accepted M" lines to REPORT_FILE.
"""
import hashlib
import os
import select
import signal
import socket
import sys
import time
import tomllib

BEACON_BYTES = 52
KEY_AT = 20


def beacons_of(topology_file, port):
    """What every node of the file would beacon, listening on `port`."""
    with open(topology_file, "rb") as f:
        topology = tomllib.load(f)
    run_id = hashlib.blake2b(b"fednode/1 run id" + topology["federation"]["run"].encode(), digest_size=16).digest()
    tag = hashlib.blake2b(b"fednode/1 beacon" + run_id, digest_size=16).digest()[:8]
    out = {}
    for node in topology["node"]:
        if "public_key" in node:
            key = bytes.fromhex(node["public_key"])
        else:
            key_dir = os.path.join(os.path.dirname(os.path.abspath(topology_file)), node["key_dir"])
            with open(os.path.join(key_dir, "node.pub")) as f:
                key = bytes.fromhex(f.read().strip())
        node_id = node["id"].to_bytes(4, "big")
        out[node_id] = b"FNDB\x01\x00" + port.to_bytes(2, "big") + node_id + tag + key
    return out


def main():
    if len(sys.argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    broadcast, port, report = sys.argv[1], int(sys.argv[2]), sys.argv[3]

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    udp.bind(("", port))
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("", 0))
    silent.listen(64)
    silent_port = silent.getsockname()[1]

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    heard = beacons_of(sys.argv[4], silent_port) if len(sys.argv) == 5 else {}  # node id -> its beacon
    mine = set()  # what it forged
    held = []
    forged = accepted = 0
    next_burst = time.monotonic()
    while not stop:
        ready, _, _ = select.select([udp, silent], [], [], 0.05)
        if silent in ready:
            conn, _ = silent.accept()
            held.append(conn)  # kept open and silent
            accepted += 1
        if udp in ready:
            data, _ = udp.recvfrom(2048)
            # Its own broadcasts come back too: only the nodes' beacons are copied.
            if len(data) == BEACON_BYTES and data[:4] == b"FNDB" and data not in mine:
                heard[data[8:12]] = data
        if time.monotonic() >= next_burst:
            next_burst = time.monotonic() + 0.02
            out = [b"FNDB but not a beacon", b"\x00" * BEACON_BYTES]
            for beacon in list(heard.values()):
                out.append(beacon[:6] + silent_port.to_bytes(2, "big") + beacon[8:])  # spoofed address
                key = bytearray(beacon)
                key[KEY_AT] ^= 0x5A
                out.append(bytes(key))  # a key that is not the node's
            for d in out:
                mine.add(d)
                try:
                    udp.sendto(d, (broadcast, port))
                    forged += 1
                except OSError:
                    pass
    with open(report, "w") as f:
        f.write("forged %d\naccepted %d\nsilent_port %d\nnodes_heard %d\n" % (forged, accepted, silent_port, len(heard)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
