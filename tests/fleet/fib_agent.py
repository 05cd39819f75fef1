#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The fleet router's forwarding-plane agent: what a switch's driver does
with the FIB its routing stack computes (SONiC's fpmsyncd, a Cumulus
switchd), for one prefix, the VIP.

FRR's zebra sends every route it installs over FPM (dplane_fpm_nl, netlink
messages framed by a 4-byte header) to --listen. For the VIP this agent
  - logs each change of its next hops and their weights, with the time
    (CLOCK_MONOTONIC, as the driver's time.monotonic()), to --log:
        <seconds> <gateway>=<weight>,...      ("-" when withdrawn)
    which is when the router's FIB changed: zebra installs into the kernel
    and sends to FPM in the same pass;
  - mirrors them into a resilient nexthop group (--group, in table
    --table): the router's resilient mode is `ip rule to VIP lookup TABLE`,
    its hash-threshold mode zebra's own route in the main table.
It decides nothing: the paths and weights are FRR's (bgpd's multipath,
weights from the link bandwidth community). Runs in the router's namespace
until killed.
"""
import os
import socket
import struct
import subprocess
import sys
import time

RTM_NEWROUTE, RTM_DELROUTE = 24, 25
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_MULTIPATH, RTA_TABLE = 1, 4, 5, 9, 15
RT_TABLE_MAIN = 254
DEBUG = os.environ.get("FLEET_DEBUG")


def attrs(data):
    """{type: payload} of a run of netlink attributes."""
    out, off = {}, 0
    while off + 4 <= len(data):
        ln, typ = struct.unpack_from("=HH", data, off)
        if ln < 4:
            break
        out[typ & 0x3FFF] = data[off + 4:off + ln]
        off += (ln + 3) & ~3
    return out


def paths_of(a):
    """[(gateway, ifindex, weight)] of a route's attributes."""
    if RTA_MULTIPATH in a:
        mp, off, out = a[RTA_MULTIPATH], 0, []
        while off + 8 <= len(mp):
            ln, _flags, hops, ifindex = struct.unpack_from("=HBBi", mp, off)
            if ln < 8:
                break
            gw = attrs(mp[off + 8:off + ln]).get(RTA_GATEWAY)
            if gw:
                out.append((socket.inet_ntoa(gw), ifindex, hops + 1))
            off += (ln + 3) & ~3
        return out
    if RTA_GATEWAY in a:
        return [(socket.inet_ntoa(a[RTA_GATEWAY]), struct.unpack("=i", a[RTA_OIF])[0], 1)]
    return []


class Agent:
    def __init__(self, vip, table, group, buckets, idle, logpath):
        self.vip, self.table, self.group = vip, table, group
        self.buckets, self.idle = buckets, idle
        self.log = open(logpath, "a", buffering=1)
        self.ids = {}   # gateway -> nexthop id
        self.now = None  # the last paths written

    def ip(self, lines):
        r = subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode:
            print("fib_agent: ip: %s" % r.stdout.strip(), file=sys.stderr, flush=True)

    def apply(self, paths):
        t = time.monotonic()
        key = sorted((gw, w) for gw, _, w in paths)
        if key == self.now:
            return
        self.now = key
        self.log.write("%.6f %s\n" % (t, ",".join("%s=%d" % kv for kv in key) or "-"))
        if not paths:
            self.ip(["route del %s/32 table %d" % (self.vip, self.table),
                     "nexthop del id %d" % self.group])
            return
        cmds = []
        for gw, ifindex, _ in paths:
            if gw not in self.ids:
                self.ids[gw] = self.group + 1 + len(self.ids)
                cmds.append("nexthop replace id %d via %s dev %s" % (
                    self.ids[gw], gw, socket.if_indextoname(ifindex)))
        grp = "/".join("%d,%d" % (self.ids[gw], w) for gw, _, w in paths)
        cmds.append("nexthop replace id %d group %s type resilient buckets %d idle_timer %d "
                    "unbalanced_timer 0" % (self.group, grp, self.buckets, self.idle))
        cmds.append("route replace %s/32 nhid %d table %d" % (self.vip, self.group, self.table))
        self.ip(cmds)

    def vip_paths(self, msg):
        """None when the netlink message is not about the VIP's route in
        the main table (zebra's FIB; never this agent's own); else its
        paths, [] for a deletion."""
        if len(msg) < 28:
            return None
        _len, typ = struct.unpack_from("=IH", msg)
        if typ not in (RTM_NEWROUTE, RTM_DELROUTE):
            return None
        family, dst_len, _src_len, _tos, table = struct.unpack_from("=BBBBB", msg, 16)
        a = attrs(msg[28:])
        if RTA_TABLE in a:
            table = struct.unpack("=I", a[RTA_TABLE])[0]
        if family != socket.AF_INET or dst_len != 32 or table != RT_TABLE_MAIN or \
                a.get(RTA_DST) != socket.inet_aton(self.vip):
            return None
        if DEBUG:
            print("fib_agent: %d %s" % (typ, msg.hex()), file=sys.stderr, flush=True)
        return paths_of(a) if typ == RTM_NEWROUTE else []

    def frame(self, data):
        """One FPM frame: netlink messages, several at times (a route
        replaced is a deletion and an addition in one frame): only the
        last word on the VIP counts, so a replacement never deletes the
        group (which would move every bucket)."""
        last, off = None, 0
        while off + 16 <= len(data):
            ln = struct.unpack_from("=I", data, off)[0]
            if ln < 16:
                break
            p = self.vip_paths(data[off:off + ln])
            if p is not None:
                last = p
            off += (ln + 3) & ~3
        if last is not None:
            self.apply(last)

    def serve(self, conn):
        buf = b""
        while True:
            d = conn.recv(65536)
            if not d:
                return
            buf += d
            while len(buf) >= 4:
                _ver, typ, ln = struct.unpack_from(">BBH", buf)
                if ln < 4 or len(buf) < ln:
                    break
                if typ == 1:  # netlink
                    self.frame(buf[4:ln])
                buf = buf[ln:]


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    agent = Agent(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                  int(sys.argv[6]), sys.argv[7])
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(1)
    while True:
        conn, _ = ls.accept()
        with conn:
            agent.serve(conn)


if __name__ == "__main__":
    if len(sys.argv) != 8:
        print("usage: fib_agent.py HOST:PORT VIP TABLE GROUP BUCKETS IDLE LOG", file=sys.stderr)
        sys.exit(2)
    main()
