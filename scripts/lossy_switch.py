#!/usr/bin/env python3
"""A lossy, slow IPv4 switch in user space, joining network namespaces through TUN devices.

This kernel has no sch_netem, so links cannot be impaired with tc. Instead each namespace
fn<i> gets a TUN device fnt<i> with address 10.77.0.<i+1>/24 whose packets come to this process;
it drops each packet with probability --loss and hands the rest to the destination's TUN device
--delay seconds later. Every hop between two namespaces then crosses one such impaired link.

  sudo python3 scripts/lossy_switch.py --nodes 5 --loss 0.2 --delay 0.2 --seed 1

It creates the namespaces (and removes them on exit), prints "ready" once every device is up,
and runs until killed (SIGTERM or SIGINT). Counts of packets passed and dropped go to stderr
every 10 s. Used by scripts/lossy_chain.sh; not part of CI (a run takes tens of minutes).
"""
import argparse
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def sh(*args):
    subprocess.run(args, check=True)


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--loss", type=float, default=0.2, help="probability that a packet is dropped")
    ap.add_argument("--delay", type=float, default=0.2, help="seconds each packet is held")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if not 1 <= a.nodes <= 250 or not 0 <= a.loss < 1 or a.delay < 0:
        sys.exit("lossy_switch: --nodes in [1, 250], --loss in [0, 1), --delay >= 0")
    rng = random.Random(a.seed)

    fds = {}  # address -> tun fd
    names = [f"fn{i}" for i in range(a.nodes)]

    def cleanup(*_):
        for n in names:
            subprocess.run(["ip", "netns", "del", n], stderr=subprocess.DEVNULL)
        sys.exit(0)

    signal.signal(signal.SIGTERM, cleanup)
    signal.signal(signal.SIGINT, cleanup)
    try:
        for i, ns in enumerate(names):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
            sh("ip", "netns", "add", ns)
            dev = f"fnt{i}"
            fd = open_tun(dev)
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"10.77.0.{i + 1}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            fds[bytes([10, 77, 0, i + 1])] = fd
    except Exception as e:  # noqa: BLE001 - a failed setup must not leave namespaces behind
        print(f"lossy_switch: setup failed: {e}", file=sys.stderr)
        cleanup()
    print("ready", flush=True)

    queue = []  # (due, seq, fd, packet)
    seq = passed = dropped = 0
    last_report = time.monotonic()
    by_fd = list(fds.values())
    while True:
        now = time.monotonic()
        timeout = max(0.0, queue[0][0] - now) if queue else 1.0
        readable, _, _ = select.select(by_fd, [], [], min(timeout, 1.0))
        for fd in readable:
            while True:
                try:
                    packet = os.read(fd, 65535)
                except BlockingIOError:
                    break
                if len(packet) < 20 or packet[0] >> 4 != 4:
                    continue  # IPv4 only (the namespaces have no IPv6 address on the link)
                out = fds.get(packet[16:20])
                if out is None:
                    continue
                if rng.random() < a.loss:
                    dropped += 1
                    continue
                seq += 1
                heapq.heappush(queue, (time.monotonic() + a.delay, seq, out, packet))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, out, packet = heapq.heappop(queue)
            try:
                os.write(out, packet)
                passed += 1
            except OSError:
                dropped += 1
        if now - last_report >= 10:
            print(f"lossy_switch: {passed} packets passed, {dropped} dropped", file=sys.stderr, flush=True)
            last_report = now


if __name__ == "__main__":
    main()
