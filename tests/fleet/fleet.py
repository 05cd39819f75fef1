#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A splicer fleet behind ECMP, on one machine: network namespaces for the
clients, a router, three splicer instances and five backends, joined by veth
pairs in 10.200.0.0/16 (traffic never leaves the namespaces).

    client (200 addresses) -- router -- instance 1..3 (VIP on lo) -- router -- backend 1..5

The router is Linux itself: a multipath route to the VIP with L4 hashing
(fib_multipath_hash_policy=1), either a hash-threshold route or a resilient
nexthop group. This program is also the router's health checker: it reads
each instance's /health and changes the route.

Run by tests/fleet/fleet.sh (which owns the cleanup trap); see doc/deployment.md.
Every scenario is counted: connections tried, served, broken, clients that
moved, agreement between instances. Exit status 0 when no scenario failed.
"""
import argparse
import ctypes
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

NET = "10.200"
VIP = NET + ".255.1"
PORT = 8080          # splicer's listener (VIP and each instance's own address)
STATS = 9100         # splicer's /health and /metrics
BPORT = 7000         # backends
NINST = 3
NBACK = 5
IDLE_TIMER = 1       # resilient group: a bucket without traffic for 1 s may move
PING_EVERY = 0.2     # held connections: one echo each per 200 ms keeps buckets busy
ENDING = 16384       # held connections end with this many random bytes echoed back
LAMEDUCK = "6s"     # > the router's drain below (about 3 s): nothing is refused
DRAIN = "10s"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode:
        raise RuntimeError("`%s` failed (%d): %s" % (cmd, r.returncode, r.stdout.strip()))
    return r.stdout


# ---- topology ---------------------------------------------------------------

class Fleet:
    def __init__(self, prefix, binary, tmp, balance):
        self.p = prefix
        self.bin = binary
        self.tmp = tmp
        self.balance = balance
        self.procs = {}       # instance index -> Popen
        self.backs = []       # backend Popen
        self.members = []     # instances in the VIP route, in order
        self.mode = None
        self.backends = list(range(1, NBACK + 1))

    def ns(self, name):
        return "%s-%s" % (self.p, name)

    def nsx(self, name, cmd):
        return sh("ip netns exec %s %s" % (self.ns(name), cmd))

    def inst_addr(self, i):
        return "%s.%d.2" % (NET, 10 + i)

    def back_addr(self, j):
        return "%s.%d.2" % (NET, 20 + j)

    def client_addrs(self, n):
        return ["%s.1.%d" % (NET, 10 + k) for k in range(n)]

    def link(self, a, b, ifa, ifb, addr_a, addr_b):
        sh("ip link add %s netns %s type veth peer name %s netns %s" % (ifa, self.ns(a), ifb, self.ns(b)))
        self.nsx(a, "ip addr add %s/24 dev %s" % (addr_a, ifa))
        self.nsx(b, "ip addr add %s/24 dev %s" % (addr_b, ifb))
        self.nsx(a, "ip link set %s up" % ifa)
        self.nsx(b, "ip link set %s up" % ifb)

    def sysctl(self, name, *kv):
        self.nsx(name, "sysctl -qw " + " ".join(kv))

    def build(self, nclients):
        names = ["c", "r"] + ["i%d" % i for i in range(1, NINST + 1)] + ["b%d" % j for j in range(1, NBACK + 1)]
        for n in names:
            sh("ip netns add " + self.ns(n))
            self.nsx(n, "ip link set lo up")
            self.sysctl(n, "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
        self.sysctl("r", "net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1")
        self.link("c", "r", "eth0", "rc", NET + ".1.2", NET + ".1.1")
        self.nsx("c", "ip route add default via %s.1.1" % NET)
        batch = os.path.join(self.tmp, "addrs")
        with open(batch, "w") as f:
            for a in self.client_addrs(nclients):
                f.write("addr add %s/24 dev eth0\n" % a)
        self.nsx("c", "ip -batch " + batch)
        for i in range(1, NINST + 1):
            n = "i%d" % i
            # the VIP on lo: the instance takes packets for it, and never
            # answers ARP for it on its link (arp_ignore/arp_announce), as
            # the instances of a real anycast fleet must not
            self.sysctl(n, "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
            self.link(n, "r", "eth0", "ri%d" % i, self.inst_addr(i), "%s.%d.1" % (NET, 10 + i))
            self.nsx(n, "ip addr add %s/32 dev lo" % VIP)
            self.nsx(n, "ip route add default via %s.%d.1" % (NET, 10 + i))
            self.nsx("r", "ip nexthop add id %d via %s dev ri%d" % (i, self.inst_addr(i), i))
        for j in range(1, NBACK + 1):
            n = "b%d" % j
            self.link(n, "r", "eth0", "rb%d" % j, self.back_addr(j), "%s.%d.1" % (NET, 20 + j))
            self.nsx(n, "ip route add default via %s.%d.1" % (NET, 20 + j))

    # ---- the VIP route: the router's only state -----------------------------

    def route(self, members, drain=None):
        """members: instance indices in the route; drain: one of them whose
        share goes to the others for new flows only (resilient: weight 1
        against 255, so its busy buckets stay until idle)."""
        if self.mode == "threshold":
            hops = " ".join("nexthop via %s dev ri%d" % (self.inst_addr(i), i)
                            for i in members if i != drain)
            self.nsx("r", "ip route replace %s/32 %s" % (VIP, hops))
        else:
            grp = "/".join("%d,%d" % (i, 1 if i == drain else 255) for i in members)
            verb = "replace" if self.members else "add"
            self.nsx("r", "ip nexthop %s id 100 group %s type resilient buckets 128 idle_timer %d "
                     "unbalanced_timer 0" % (verb, grp, IDLE_TIMER))
            if not self.members:
                self.nsx("r", "ip route replace %s/32 nhid 100" % VIP)
        self.members = list(members)

    def route_reset(self, mode):
        sh("ip -n %s route del %s/32" % (self.ns("r"), VIP), check=False)
        sh("ip -n %s nexthop del id 100" % self.ns("r"), check=False)
        self.mode = mode
        self.members = []

    # ---- processes ----------------------------------------------------------

    def start_backends(self):
        me = os.path.abspath(__file__)
        for j in range(1, NBACK + 1):
            lg = open(os.path.join(self.tmp, "b%d.log" % j), "w")
            self.backs.append(subprocess.Popen(
                ["ip", "netns", "exec", self.ns("b%d" % j), sys.executable, me, "backend", "b%d" % j],
                stdout=lg, stderr=subprocess.STDOUT))
        for j in range(1, NBACK + 1):
            wait_for(lambda: connects(self.back_addr(j), BPORT), 5, "backend b%d listening" % j)

    def config_text(self, backends):
        g = ["[global]", "workers = 1", "stats = :%d" % STATS, "drain_timeout = " + DRAIN,
             "lameduck = " + LAMEDUCK]
        r = ["[route web]", "listen = :%d" % PORT,
             "backend = " + " ".join("%s:%d" % (self.back_addr(j), BPORT) for j in backends),
             "balance = " + self.balance, "check = tcp", "check_interval = 200ms"]
        return "\n".join(g + [""] + r) + "\n"

    def write_configs(self, backends):
        self.backends = list(backends)
        for i in range(1, NINST + 1):
            with open(self.conf(i), "w") as f:
                f.write(self.config_text(backends))

    def conf(self, i):
        return os.path.join(self.tmp, "i%d.conf" % i)

    def ilog(self, i):
        return os.path.join(self.tmp, "i%d.log" % i)

    def start_instance(self, i):
        lg = open(self.ilog(i), "a")
        # ip netns exec execs splicer: the PID is the proxy's
        self.procs[i] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns("i%d" % i), self.bin, "-c", self.conf(i)],
            stdout=subprocess.DEVNULL, stderr=lg)
        wait_for(lambda: health(self.inst_addr(i)) == 200, 10, "instance %d /health 200" % i)

    def ensure_instances(self):
        for i in range(1, NINST + 1):
            p = self.procs.get(i)
            if p is None or p.poll() is not None:
                self.start_instance(i)
            wait_for(lambda: health(self.inst_addr(i)) == 200, 10, "instance %d /health 200" % i)
        self.wait_backends()

    def wait_backends(self):
        """Every instance sees every backend of its config up: until then
        the instances may rightly disagree."""
        n = len(self.backends)
        for i in range(1, NINST + 1):
            wait_for(lambda: backends_up(self.inst_addr(i)) == (n, n), 10,
                     "instance %d: %d backends up" % (i, n))

    def signal(self, i, sig):
        self.procs[i].send_signal(sig)

    def wait_exit(self, i, secs):
        try:
            self.procs[i].wait(timeout=secs)
            return True
        except subprocess.TimeoutExpired:
            return False

    def adopt_successor(self, i, secs):
        """After an upgrade: once the old process has drained and gone,
        the one top-level process left in the namespace is the instance
        (the same PID if the upgrade kept it). False if none, or several,
        after secs."""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            self.procs[i].poll()  # reaps ours when it ends
            pids = [int(x) for x in sh("ip netns pids %s" % self.ns("i%d" % i), check=False).split()]
            live = [x for x in pids if Adopted(x).poll() is None and proc_state(x) != "Z"]
            # a proxy's own helper processes are its children: count the
            # top-level ones (the successor is the old one's child until
            # the old one has drained and gone). The old one's upgrade
            # spawner (single-threaded, forked before any thread) may
            # outlive it, an orphan parent of the successor: the proxy is
            # the top-level process with worker threads.
            top = [x for x in live if ppid(x) not in live]
            proxies = [x for x in live if threads(x) > 1]
            if len(top) == 1 and len(proxies) == 1:
                if proxies[0] != self.procs[i].pid:
                    self.procs[i] = Adopted(proxies[0])
                return True
            time.sleep(0.1)
        return False

    def log_count(self, i, needle):
        with open(self.ilog(i)) as f:
            return sum(needle in line for line in f)

    def reload_all(self):
        before = {i: self.log_count(i, "SIGHUP: reloaded") for i in range(1, NINST + 1)}
        for i in range(1, NINST + 1):
            self.signal(i, signal.SIGHUP)
        for i in range(1, NINST + 1):
            wait_for(lambda: self.log_count(i, "SIGHUP: reloaded") > before[i], 5,
                     "instance %d reloaded" % i)
        self.wait_backends()

    def stop_all(self):
        """Ours only: the processes this driver started, and what they
        became (an upgrade's successor lives in the same namespace)."""
        for p in list(self.procs.values()) + self.backs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for i in range(1, NINST + 1):
            for pid in sh("ip netns pids %s" % self.ns("i%d" % i), check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass


class Adopted:
    """An instance this driver did not fork: the successor an upgrade
    started in the instance's namespace. Popen's interface, by PID."""

    def __init__(self, pid):
        self.pid = pid

    def poll(self):
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return None if f.read().split(") ")[1][0] != "Z" else 0
        except (OSError, IndexError):
            return 0

    def send_signal(self, sig):
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout=None):
        end = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > end:
                raise subprocess.TimeoutExpired("splicer", timeout)
            time.sleep(0.05)
        return 0


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def threads(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


# ---- client side ------------------------------------------------------------

def wait_for(pred, secs, what):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def connects(addr, port):
    try:
        socket.create_connection((addr, port), timeout=1).close()
        return True
    except OSError:
        return False


def http_get(addr, path):
    """(status, body) of GET path on an instance's stats port; (0, "") when
    it does not answer."""
    try:
        s = socket.create_connection((addr, STATS), timeout=1)
        s.sendall(("GET %s HTTP/1.0\r\n\r\n" % path).encode())
        data = b""
        while len(data) < 1 << 20:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
        head, _, body = data.decode(errors="replace").partition("\r\n\r\n")
        return int(head.split()[1]), body
    except (OSError, IndexError, ValueError):
        return 0, ""


def backends_up(addr):
    """(up, listed) backends of the instance, from its /metrics."""
    _, body = http_get(addr, "/metrics")
    rows = [l for l in body.splitlines() if l.startswith("splicer_backend_up{")]
    return sum(l.endswith(" 1") for l in rows), len(rows)


def health(addr):
    """The status of GET /health, 0 when it does not answer."""
    try:
        s = socket.create_connection((addr, STATS), timeout=1)
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        line = s.makefile("rb").readline()
        s.close()
        return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def err_kind(e):
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, ConnectionResetError):
        return "reset"
    if isinstance(e, socket.timeout):
        return "timeout"
    return "error"


class Conn:
    """One client connection; the backend greets it with "NAME PEER\\n"
    (PEER: the instance's address, so which instance carried it) and
    echoes each line until EOF."""

    def __init__(self, src, dst, port=PORT):
        self.s = None
        self.backend = self.via = None
        self.err = None
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.bind((src, 0))
            s.connect((dst, port))
            self.f = s.makefile("rb")
            line = self.f.readline().decode()
            if not line:
                raise ConnectionResetError("eof before greeting")
            self.backend, self.via = line.split()
            self.s = s
        except OSError as e:
            self.err = err_kind(e)
            s.close()

    def ping(self):
        try:
            self.s.sendall(b"p\n")
            if self.f.readline() != b"p\n":
                raise ConnectionResetError("eof")
            return True
        except OSError:
            return False

    def close(self):
        """A clean, byte-exact end: ENDING bytes echoed back unchanged,
        then shutdown and the backend's EOF."""
        data = os.urandom(ENDING)
        try:
            self.s.sendall(data)
            ok = self.f.read(len(data)) == data
            self.s.shutdown(socket.SHUT_WR)
            ok = self.f.read() == b"" and ok
        except OSError:
            ok = False
        self.s.close()
        return ok


def probe(src, dst, port=PORT):
    c = Conn(src, dst, port)
    if c.s:
        c.s.close()
    return c


class Held:
    """Long-lived connections, each echoing a line every PING_EVERY; the
    first failure of each is recorded (a broken established flow). Some
    may end while the others go on pinging."""

    def __init__(self, srcs):
        self.conns = [Conn(a, VIP) for a in srcs]
        self.failed_open = sum(1 for c in self.conns if not c.s)
        self.live = [c for c in self.conns if c.s]
        self.broken = set()
        self.ended = set()
        self.lock = threading.Lock()  # a connection is pinged or ended, not both
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            for k, c in enumerate(self.live):
                with self.lock:
                    if k not in self.broken and k not in self.ended and not c.ping():
                        self.broken.add(k)
            self.stop.wait(max(0.0, PING_EVERY - (time.monotonic() - t0)))

    def on(self, fl, i):
        return [k for k, c in enumerate(self.live) if c.via == fl.inst_addr(i)]

    def end(self, which):
        """Ends the live connections numbered in which, each cleanly and
        byte-exact (Conn.close); the others go on."""
        for k in which:
            with self.lock:
                if k in self.ended:
                    continue
                if k in self.broken:
                    self.live[k].s.close()
                elif not self.live[k].close():
                    self.broken.add(k)
                self.ended.add(k)

    def finish(self):
        """Stops pinging, ends every live one; broken count."""
        self.stop.set()
        self.t.join()
        self.end(range(len(self.live)))
        return len(self.broken)


# ---- the table --------------------------------------------------------------

class Row:
    def __init__(self, name, mode):
        self.name, self.mode = name, mode
        self.tried = self.served = self.broken = 0
        self.moved = "-"
        self.agree = "-"
        self.verdict = "ok"
        self.note = ""
        self.errs = {}
        self.fails = []

    def count(self, c):
        self.tried += 1
        if c.s or c.backend:
            self.served += 1
        else:
            self.broken += 1
            self.errs[c.err] = self.errs.get(c.err, 0) + 1

    def expect(self, cond, why):
        if not cond:
            self.verdict = "FAIL"
            self.fails.append(why)


def pct(a, n):
    return "%.1f%%" % (100.0 * a / n) if n else "-"


def print_table(rows):
    hdr = ("scenario", "router", "tried", "served", "broken", "moved", "agreement", "result")
    w = (26, 10, 7, 7, 7, 9, 10, 8)
    line = lambda cols: "  ".join(str(c).ljust(n) if k < 2 else str(c).rjust(n)
                                  for k, (c, n) in enumerate(zip(cols, w)))
    print(line(hdr))
    print("-" * (sum(w) + 2 * (len(w) - 1)))
    for r in rows:
        out = line((r.name, r.mode, r.tried, r.served, r.broken, r.moved, r.agree, r.verdict))
        note = "; ".join([r.note] * bool(r.note) + ["FAIL: " + f for f in r.fails])
        print(out + ("  " + note if note else ""))
    sys.stdout.flush()


# ---- scenarios --------------------------------------------------------------

def backend_map(fl, row, srcs, per_client, dst=VIP):
    """Each client's backends over per_client connections to dst."""
    seen = {}
    for a in srcs:
        for _ in range(per_client):
            c = probe(a, dst)
            row.count(c)
            if c.backend:
                seen.setdefault(a, set()).add(c.backend)
    return seen


def agreement(maps, srcs):
    """Clients that got one and the same backend from every map."""
    same = 0
    for a in srcs:
        s = set()
        for m in maps:
            s |= m.get(a, {"?missing"})
        same += len(s) == 1 and "?missing" not in s
    return same


def sc_agree(fl, srcs, per_client):
    row = Row("a agreement", fl.mode)
    vip = backend_map(fl, row, srcs, per_client)
    direct = [backend_map(fl, row, srcs, 1, fl.inst_addr(i)) for i in range(1, NINST + 1)]
    same = agreement([vip] + direct, srcs)
    row.agree = pct(same, len(srcs))
    spread = {}
    for a in srcs:
        c = probe(a, VIP)
        if c.via:
            spread[c.via] = spread.get(c.via, 0) + 1
    row.note = "VIP spread " + "/".join(str(spread.get(fl.inst_addr(i), 0)) for i in range(1, NINST + 1))
    row.expect(row.broken == 0, "connections broken: %s" % row.errs)
    row.expect(same == len(srcs), "instances disagree")
    return row, vip


def leave_start(fl, srcs, how):
    """The row of a leave, and every client holding a connection through
    the VIP to all three instances."""
    row = Row("b leave " + how, fl.mode)
    fl.ensure_instances()
    fl.route(range(1, NINST + 1))
    time.sleep(IDLE_TIMER + 0.5)
    return row, Held(srcs)


def new_flows(srcs):
    """One new connection per client through the VIP: (tried, refused)."""
    new = [probe(a, VIP) for a in srcs]
    return len(new), sum(1 for c in new if not c.backend)


def leave_count(fl, row, held, k, new, refused):
    """The row's counts once every held connection has ended; its note."""
    broken = len(held.broken)
    row.tried = len(held.conns) + new
    row.broken = broken + refused + held.failed_open
    row.served = row.tried - row.broken
    on_k = held.on(fl, k)
    on_k_broken = sum(1 for x in held.broken if x in on_k)
    return "held %d, %d on i%d: broken %d there, %d elsewhere; new: %d refused" % (
        len(held.live), len(on_k), k, on_k_broken, broken - on_k_broken, refused)


def sc_leave_lameduck(fl, srcs):
    """Instance 3 leaves properly, as doc/deployment.md has it, while every
    client holds a connection: SIGTERM; on its 503 the router reweights it
    (1 against 255: new flows go to the others, its busy buckets stay); a
    new connection per client, none refused. Then three groups of held
    connections end, each cleanly and byte-exact: half of them in the lame
    duck (their clients finish); half of those on instance 3 after its
    listeners have closed, in the drain, which ends with them (the process
    exits); half of those elsewhere after the router has deleted the
    instance's next hop."""
    row, held = leave_start(fl, srcs, "lameduck")
    k = NINST
    on_k = held.on(fl, k)
    through_drain = on_k[::2]
    through_delete = [x for x in range(len(held.live)) if x not in on_k][::2]
    early = [x for x in range(len(held.live)) if x not in through_drain + through_delete]
    closes = fl.log_count(k, "lame duck over")
    fl.signal(k, signal.SIGTERM)
    wait_for(lambda: health(fl.inst_addr(k)) == 503, 5, "instance %d /health 503" % k)
    fl.route(range(1, NINST + 1), drain=k)
    time.sleep(IDLE_TIMER + 0.5)
    new, refused = new_flows(srcs)
    held.end(early)
    wait_for(lambda: fl.log_count(k, "lame duck over") > closes, 10,
             "instance %d's listeners closing (lame duck over)" % k)
    # the drain: the buckets of the flows still on it stay busy and put
    time.sleep(IDLE_TIMER + 0.5)
    # a new flow hashed to such a bucket still goes to the instance, whose
    # listeners are closed now: counted for the note, not held against it
    late_new, late_refused = new_flows(srcs)
    draining = fl.procs[k].poll() is None
    held.end(through_drain)
    ended = time.monotonic()
    exited = fl.wait_exit(k, 15)
    exit_after = time.monotonic() - ended
    fl.route([i for i in range(1, NINST + 1) if i != k])
    time.sleep(IDLE_TIMER + 0.5)
    held.finish()
    row.note = leave_count(fl, row, held, k, new, refused) + (
        "; through the drain: %d on i%d (broken %d; exit %.1f s after), through the next hop's "
        "deletion: %d (broken %d); after the listeners closed: %d of %d new refused" % (
            len(through_drain), k, len(held.broken & set(through_drain)), exit_after,
            len(through_delete), len(held.broken & set(through_delete)), late_refused, late_new))
    row.expect(exited, "instance did not exit after lame duck and drain")
    if fl.mode != "resilient":
        if not row.fails:
            row.verdict = "info"  # hash-threshold can only delete the next hop
        return row
    row.expect(row.broken == 0, "flows broken by a proper leave")
    row.expect(through_drain and through_delete, "no held connection to keep through the drain "
               "(on i%d) or the next hop's deletion (elsewhere)" % k)
    row.expect(draining, "instance %d ended before the sessions held through its drain" % k)
    row.expect(exit_after < 3, "instance %d exited %.1f s after its last session ended, not with it" % (
        k, exit_after))
    return row


def sc_leave_kill(fl, srcs):
    """For comparison: instance 3 gets SIGKILL while every client holds a
    connection; when /health stops answering the router deletes it."""
    row, held = leave_start(fl, srcs, "kill")
    k = NINST
    fl.signal(k, signal.SIGKILL)
    wait_for(lambda: health(fl.inst_addr(k)) == 0, 5, "instance %d /health silent" % k)
    fl.route([i for i in range(1, NINST + 1) if i != k])
    time.sleep(IDLE_TIMER + 0.5)
    new, refused = new_flows(srcs)
    held.finish()
    row.note = leave_count(fl, row, held, k, new, refused)
    if not row.fails:
        row.verdict = "info"
    return row


def sc_join(fl, srcs):
    """Instance 3 joins a route of 1 and 2 while every client holds a
    connection: a flow sent to the newcomer is reset there (no socket)."""
    row = Row("c join", fl.mode)
    k = NINST
    fl.ensure_instances()
    fl.route([i for i in range(1, NINST + 1) if i != k])
    time.sleep(IDLE_TIMER + 0.5)
    held = Held(srcs)
    fl.route(range(1, NINST + 1))
    time.sleep(2 * IDLE_TIMER + 0.5)
    new = [probe(a, VIP) for a in srcs]
    broken = held.finish()
    row.tried = len(held.conns) + len(new)
    row.broken = broken + held.failed_open + sum(1 for c in new if not c.backend)
    row.served = row.tried - row.broken
    row.moved = broken
    to_k = sum(1 for c in new if c.via == fl.inst_addr(k))
    row.note = "held %d: %d moved (reset); new flows on i%d: %d/%d" % (
        len(held.live), broken, k, to_k, len(new))
    if fl.mode == "resilient":
        row.expect(row.broken == 0, "established flows moved")
    elif not row.fails:
        row.verdict = "info"
    return row


def binomial_band(n, p, tail):
    """[lo, hi]: the counts of n draws of probability p each outside which
    a fair draw falls with probability below tail on either side. Backend
    3's clients are such a count: maglev gives each of 5 backends about
    1/5 of its table and a client's address picks an entry as a fair coin
    would. The clients' addresses are fixed, so the count is too (8 of the
    short run's 50, 39 of 200): the band cannot flake, it tells a hash
    that favours or starves a backend. With 1e-4 a side it is 20..62 of
    200 clients (10-31 %) and 1..22 of 50."""
    pmf = [math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)]
    lo, acc = 0, 0.0
    while acc + pmf[lo] < tail:
        acc += pmf[lo]
        lo += 1
    hi, acc = n, 0.0
    while acc + pmf[hi] < tail:
        acc += pmf[hi]
        hi -= 1
    return lo, hi


def sc_backend_gone(fl, srcs, before):
    """Backend 3 leaves every instance's config (SIGHUP): its clients move,
    nobody else does, and the instances still agree."""
    row = Row("d backend removed", fl.mode)
    fl.ensure_instances()
    fl.route(range(1, NINST + 1))
    gone = "b3"
    fl.write_configs([j for j in range(1, NBACK + 1) if j != 3])
    fl.reload_all()
    vip = backend_map(fl, row, srcs, 1)
    direct = [backend_map(fl, row, srcs, 1, fl.inst_addr(i)) for i in range(1, NINST + 1)]
    same = agreement([vip] + direct, srcs)
    was = {a: next(iter(before[a])) for a in srcs if a in before and len(before[a]) == 1}
    on_gone = [a for a in was if was[a] == gone]
    moved = [a for a in was if a in vip and vip[a] != {was[a]}]
    others = [a for a in moved if was[a] != gone]
    stayed_on_gone = [a for a in on_gone if a in vip and gone in vip[a]]
    lo, hi = binomial_band(len(srcs), 1.0 / NBACK, 1e-4)
    row.moved = len(moved)
    row.agree = pct(same, len(srcs))
    row.note = "clients on %s: %d (%s of %d; band %d..%d), others moved: %d" % (
        gone, len(on_gone), pct(len(on_gone), len(srcs)), len(srcs), lo, hi, len(others))
    row.expect(row.broken == 0, "connections broken")
    row.expect(len(was) == len(srcs), "%d clients had no one backend before" % (len(srcs) - len(was)))
    row.expect(lo <= len(on_gone) <= hi, "%d clients of %d on %s, outside %d..%d: maglev's share "
               "is not about 1/%d" % (len(on_gone), len(srcs), gone, lo, hi, NBACK))
    row.expect(len(moved) == len(on_gone), "%d moved, %d were on %s" % (len(moved), len(on_gone), gone))
    row.expect(not stayed_on_gone, "a client still reached the removed backend")
    row.expect(not others, "%d clients not on %s moved" % (len(others), gone))
    if os.environ.get("FLEET_DEBUG"):
        for a in others:
            log(a, was[a], vip.get(a), [d.get(a) for d in direct])
    row.expect(same == len(srcs), "instances disagree")
    fl.write_configs(range(1, NBACK + 1))
    fl.reload_all()
    back = backend_map(fl, Row("", ""), srcs, 1)
    row.expect(all(back.get(a) == {was[a]} for a in was), "clients did not return after the backend came back")
    return row


def sc_upgrade(fl, srcs, rounds):
    """Instance 1 is upgraded in place (SIGUSR2) while a loop connects to
    it directly and through the VIP; held connections ride it out."""
    row = Row("e upgrade", fl.mode)
    k = 1
    fl.ensure_instances()
    fl.route(range(1, NINST + 1))
    held = Held(srcs[: max(1, len(srcs) // 4)])
    fails = {"refused": 0, "reset": 0, "timeout": 0, "error": 0}
    signalled = None
    n = 0
    # the loop spans the hand-over: rounds, and at least 3 s after SIGUSR2
    while n < rounds or time.monotonic() < signalled + 3:
        for a in srcs[:20]:
            for dst in (fl.inst_addr(k), VIP):
                c = probe(a, dst)
                row.count(c)
                if c.err:
                    fails[c.err] += 1
        if n == 1:
            fl.signal(k, signal.SIGUSR2)
            signalled = time.monotonic()
        n += 1
    broken = held.finish()
    row.expect(fl.adopt_successor(k, 20), "no single instance after the upgrade")
    row.expect(health(fl.inst_addr(k)) == 200, "the upgraded instance's /health is not 200")
    row.tried += len(held.conns)
    row.served += len(held.live) - broken
    row.broken += broken + held.failed_open
    row.note = "refused %d, reset %d, timeout %d; held %d: %d broken" % (
        fails["refused"], fails["reset"], fails["timeout"], len(held.live), broken)
    row.expect(fails["refused"] == 0, "connections refused during the upgrade")
    row.expect(row.broken == 0, "connections broken during the upgrade")
    return row


# ---- backend process --------------------------------------------------------

def backend_main(name):
    """A tiny backend: greets each connection with its name and the peer's
    address, echoes lines until EOF, then closes."""
    import selectors
    sel = selectors.DefaultSelector()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", BPORT))
    ls.listen(1024)
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is ls:
                try:
                    c, peer = ls.accept()
                except OSError:
                    continue
                c.setblocking(True)
                try:
                    c.sendall(("%s %s\n" % (name, peer[0])).encode())
                except OSError:
                    c.close()
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
            else:
                c = key.fileobj
                try:
                    d = c.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    d = b""
                if not d:
                    sel.unregister(c)
                    c.close()
                    continue
                try:
                    c.setblocking(True)
                    c.settimeout(1)
                    c.sendall(d)
                    c.setblocking(False)
                except OSError:
                    sel.unregister(c)
                    c.close()


# ---- main -------------------------------------------------------------------

def enter_ns(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "setns " + path)
    os.close(fd)


class Stopped(Exception):
    pass


def stopped(sig, frame):
    # once: timeout(1) signals its child and then its process group, so
    # a second TERM may follow, and must not break off the stop_all and
    # the table the first one leads to
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped("stopped by SIGTERM (time limit, or fleet.sh was interrupted)")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "backend":
        return backend_main(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--balance", default="maglev")
    args = ap.parse_args()
    # SIGTERM (fleet.sh's timeout, or a signal fleet.sh passes on): the
    # scenario under way fails, the table so far is printed, the logs kept
    signal.signal(signal.SIGTERM, stopped)
    nclients, per_client = (50, 4) if args.short else (200, 10)
    modes = ["resilient"] if args.short else ["threshold", "resilient"]
    tmp = tempfile.mkdtemp(prefix="splicer-fleet-")
    fl = Fleet(args.prefix, os.path.abspath(args.bin), tmp, args.balance)
    rows = []
    t0 = time.monotonic()
    root = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        fl.build(nclients)
        # from here on every socket of this process is a client's: none
        # is made in the host's namespace, so no packet leaves the test
        enter_ns("/var/run/netns/" + fl.ns("c"))
        fl.write_configs(range(1, NBACK + 1))
        fl.start_backends()
        srcs = fl.client_addrs(nclients)
        for m in modes:
            fl.route_reset(m)
            fl.ensure_instances()
            fl.route(range(1, NINST + 1))
            row, before = sc_agree(fl, srcs, per_client)
            rows.append(row)
            rows.append(sc_leave_lameduck(fl, srcs))
            rows.append(sc_leave_kill(fl, srcs))
            rows.append(sc_join(fl, srcs))
            rows.append(sc_backend_gone(fl, srcs, before))
            rows.append(sc_upgrade(fl, srcs, 6 if args.short else 20))
    except Exception as e:  # the table so far, and why it stopped
        r = Row("driver error", fl.mode or "-")
        r.verdict, r.note = "FAIL", str(e)
        rows.append(r)
    finally:
        fl.stop_all()
        ctypes.CDLL(None).setns(root, 0x40000000)
    print_table(rows)
    failed = sum(r.verdict == "FAIL" for r in rows)
    if failed:
        log("fleet: logs kept in " + tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    skipped = sum(r.verdict == "skipped" for r in rows)
    passed = sum(r.verdict == "ok" for r in rows)
    info = sum(r.verdict == "info" for r in rows)
    print("fleet: %d scenarios, %d ok, %d failed, %d skipped, %d for comparison; %d clients, %s, %.0f s" % (
        len(rows), passed, failed, skipped, info, nclients, "short" if args.short else "full",
        time.monotonic() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
