#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A splicer fleet behind ECMP, on one machine: network namespaces for the
clients, a router, three splicer instances and five backends, joined by veth
pairs in 10.200.0.0/16 (traffic never leaves the namespaces).

    client (200 addresses) -- router -- instance 1..3 (VIP on lo) -- router -- backend 1..5

The route to the VIP is BGP's alone (tests/fleet/bgp.py): each instance runs
contrib/bgp/splicer-bgp-health with BIRD 2 (contrib/bgp/bird.conf), which
announces the VIP while the instance is healthy, weights it down in its lame
duck and withdraws it otherwise; the router runs FRR (bgpd multipath, BFD)
and forwards by L4 hash (fib_multipath_hash_policy=1) through either zebra's
hash-threshold route or a resilient nexthop group that the FIB agent
(tests/fleet/fib_agent.py) mirrors from zebra's FIB. This program starts
and stops processes and counts; it never touches a route.

Run by tests/fleet/fleet.sh (which owns the cleanup trap); see doc/deployment.md.
Every scenario is counted: connections tried, served, broken, clients that
moved, agreement between instances. Exit status 0 when no scenario failed.
"""
import argparse
import ctypes
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import bgp  # noqa: E402 (after the line above)

NET = "10.200"
VIP = NET + ".255.1"
PORT = 8080          # splicer's listener (VIP and each instance's own address)
STATS = 9100         # splicer's /health and /metrics
BPORT = 7000         # backends
NINST = 3
NBACK = 5
IDLE_TIMER = 1       # resilient group: a bucket without traffic for 1 s may move
PING_EVERY = 0.2     # held connections: one echo each per 200 ms keeps buckets busy
PING_WAIT = 2.0      # ... and an echo not back within 2 s is a broken flow
ENDING = 16384       # held connections end with this many random bytes echoed back
LAMEDUCK = "4s"     # > BGP's reweight (about 0.2 s) + IDLE_TIMER + the new flows tried in it
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
        self.speakers = {}    # instance index -> bgp.Speaker
        self.router = None    # bgp.Router
        self.isolated = set() # instances whose packets are dropped (kill_instance)
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
            self.speakers[i] = bgp.Speaker(self.ns(n), self.tmp, n, VIP, self.inst_addr(i),
                                           "%s.%d.1" % (NET, 10 + i), STATS)
        for j in range(1, NBACK + 1):
            n = "b%d" % j
            self.link(n, "r", "eth0", "rb%d" % j, self.back_addr(j), "%s.%d.1" % (NET, 20 + j))
            self.nsx(n, "ip route add default via %s.%d.1" % (NET, 20 + j))

    # ---- the router: BGP's FIB ----------------------------------------------

    def start_router(self):
        self.router = bgp.Router(self.ns("r"), self.tmp, VIP,
                                 [self.inst_addr(i) for i in range(1, NINST + 1)],
                                 self.speakers[1].asn, IDLE_TIMER)
        self.router.start()

    def set_mode(self, mode):
        """Which FIB the router forwards by: zebra's hash-threshold route,
        or the resilient group mirrored from it. Both hold BGP's paths."""
        self.router.resilient(mode == "resilient")
        self.mode = mode

    def inst_of(self, gw):
        return int(gw.split(".")[2]) - 10

    def fib(self, hops=None):
        """{instance: weight} of the router's FIB for the VIP (now, or of
        one entry of the history)."""
        hops = self.router.fib() if hops is None else hops
        return {self.inst_of(gw): w for gw, w in hops.items()}

    def fib_when(self, since, pred):
        """When the FIB first satisfied pred at or after since (monotonic
        seconds), or None."""
        for t, hops in self.router.fib_history():
            if t >= since and pred(self.fib(hops)):
                return t
        return None

    def wait_fib(self, pred, secs, what, since=None):
        """Waits until the FIB satisfies pred; when it first did (since
        `since`, when given)."""
        since = time.monotonic() if since is None else since
        wait_for(lambda: pred(self.fib()), secs, "the router's FIB: " + what)
        return self.fib_when(since, pred) or time.monotonic()

    def full(self, members=None):
        """A FIB predicate: exactly members (all instances by default),
        each at the same weight."""
        want = set(range(1, NINST + 1) if members is None else members)
        return lambda f: set(f) == want and len(set(f.values())) == 1

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
        if i in self.isolated:
            self.isolate(i, False)
        lg = open(self.ilog(i), "a")
        # ip netns exec execs splicer: the PID is the proxy's
        self.procs[i] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns("i%d" % i), self.bin, "-c", self.conf(i)],
            stdout=subprocess.DEVNULL, stderr=lg)
        wait_for(lambda: health(self.inst_addr(i)) == 200, 10, "instance %d /health 200" % i)
        # its speaker announces the VIP once /health has been 200 twice
        self.speakers[i].start()

    def ensure_instances(self):
        """Every instance up, seeing every backend, and announced: the
        router's FIB has all of them at full weight."""
        for i in range(1, NINST + 1):
            p = self.procs.get(i)
            if p is None or p.poll() is not None:
                self.start_instance(i)
            wait_for(lambda: health(self.inst_addr(i)) == 200, 10, "instance %d /health 200" % i)
            self.speakers[i].start()
        self.wait_backends()
        # a cold start: BGP sessions open (connect retry 1 s) and BFD comes up
        self.wait_fib(self.full(), 20, "every instance announced")
        if self.mode == "resilient":
            # a member back in the group gets its buckets once they idle
            wait_for(self.router.balanced, 5, "the resilient group's buckets balanced")

    def kill_instance(self, i):
        """The whole instance dies at once, as a host that hangs or loses
        power behind a switch that keeps the link up: first it stops
        answering anything (every packet in or out of its namespace
        dropped: no TCP reset, no BGP goodbye), then SIGKILL to its
        speaker, its proxy and anything else in its namespace. The router
        can only notice by BFD (or, without it, the BGP hold time)."""
        self.isolate(i, True)
        self.speakers[i].kill()
        self.kill_ns(i)
        self.procs[i].poll()

    def isolate(self, i, on):
        """Drops every packet in or out of instance i's namespace; the
        first rule counts the clients' packets for the VIP (reached())."""
        verb = "-I" if on else "-D"
        rules = ["OUTPUT -j DROP", "INPUT -j DROP", "INPUT -p tcp -d %s --dport %d -j DROP" % (VIP, PORT)]
        for r in rules if on else reversed(rules):
            sh("ip netns exec %s iptables -w %s %s" % (self.ns("i%d" % i), verb, r), check=on)
        if on:
            self.isolated.add(i)
        else:
            self.isolated.discard(i)

    def reached(self, i):
        """Packets for the VIP that reached isolated instance i (dropped)."""
        out = sh("ip netns exec %s iptables -w -nvxL INPUT 1" % self.ns("i%d" % i), check=False)
        try:
            return int(out.split()[0])
        except (IndexError, ValueError):
            return -1

    def kill_ns(self, i):
        for pid in sh("ip netns pids %s" % self.ns("i%d" % i), check=False).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass

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
            sp = self.speakers[i]
            speaker = set(sp.bird_pids() + ([sp.proc.pid] if sp.running() else []))
            live = [x for x in pids if x not in speaker and Adopted(x).poll() is None and
                    proc_state(x) != "Z"]
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
        for s in self.speakers.values():
            s.kill()
        for p in list(self.procs.values()) + self.backs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for i in range(1, NINST + 1):
            self.kill_ns(i)
        if self.router:
            self.router.stop()


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

    def __init__(self, src, dst, port=PORT, timeout=2):
        self.s = None
        self.backend = self.via = None
        self.err = None
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
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
        self.end_err = None
        try:
            self.s.sendall(data)
            ok = self.f.read(len(data)) == data
            self.s.shutdown(socket.SHUT_WR)
            ok = self.f.read() == b"" and ok
            if not ok:
                self.end_err = "bytes differ"
        except OSError as e:
            ok = False
            self.end_err = err_kind(e)
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
    may end while the others go on pinging.

    Every live connection is pinged each round whatever the others do: a
    ping waits for its echo at most PING_WAIT, but never holds up the
    others' next ping. (Pinged one after the other, a flow whose echo never
    came, on an instance whose backends went unreachable, held the round
    for its 2 s timeout; the flows on the instances that stayed went
    unpinged for longer than the router's idle timer, their buckets looked
    idle, and moved back to that instance when it returned: "held flows
    broken on the instances that stayed", scenario h, in 3 of the last 5
    suite runs.)"""

    def __init__(self, srcs):
        self.conns = [Conn(a, VIP) for a in srcs]
        self.failed_open = sum(1 for c in self.conns if not c.s)
        self.live = [c for c in self.conns if c.s]
        self.broken = set()
        self.ended = set()
        self.sent = {}  # k -> when its ping went, while its echo is awaited
        self.lock = threading.Lock()  # a connection is pinged or ended, not both
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def _echo(self, k):
        """Reads k's awaited echo (its bytes are there, or come within the
        socket's timeout); False when it failed. Under the lock."""
        c = self.live[k]
        del self.sent[k]
        try:
            return c.f.readline() == b"p\n"
        except OSError:
            return False

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            with self.lock:
                for k, c in enumerate(self.live):
                    if k in self.broken or k in self.ended or k in self.sent:
                        continue
                    try:
                        c.s.sendall(b"p\n")
                        self.sent[k] = t0
                    except OSError:
                        self.broken.add(k)
            # the echoes until the next round, each as it comes
            while not self.stop.is_set():
                left = PING_EVERY - (time.monotonic() - t0)
                with self.lock:
                    waiting = {self.live[k].s: k for k in self.sent}
                if left <= 0 or not waiting:
                    break
                ready, _, _ = select.select(list(waiting), [], [], left)
                with self.lock:
                    for sock in ready:
                        k = waiting[sock]
                        if k in self.sent and not self._echo(k):
                            self.broken.add(k)
            with self.lock:
                now = time.monotonic()
                for k in [k for k, t in self.sent.items() if now - t > PING_WAIT]:
                    del self.sent[k]
                    self.broken.add(k)
            self.stop.wait(max(0.0, PING_EVERY - (time.monotonic() - t0)))

    def on(self, fl, i):
        return [k for k, c in enumerate(self.live) if c.via == fl.inst_addr(i)]

    def end(self, which):
        """Ends the live connections numbered in which, each cleanly and
        byte-exact (Conn.close); the others go on. A ping still awaited is
        taken first (its echo comes before the end's bytes)."""
        for k in which:
            with self.lock:
                if k in self.ended:
                    continue
                if k in self.sent and not self._echo(k):
                    self.broken.add(k)
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


class Loop:
    """New connections through the VIP all along, until stopped: WORKERS
    threads, each going through its share of the client addresses, GAP
    apart. Each connection is kept for `hold` seconds and then ends
    cleanly and byte-exact (Conn.close), or at once when hold is 0; one
    thread of its own ends them on time, whatever the workers wait for: a
    flow silent for longer than the router's idle timer may rightly be
    moved (its bucket is idle). Records (start, via, what, seconds to the
    greeting): what is None (served), "failed" (no greeting: refused,
    reset, timed out) or "broken" (served, then its end failed: an
    established flow broken)."""
    GAP = 0.01
    WORKERS = 4
    TIMEOUT = 2.0  # a dead instance answers nothing: a worker waits this long

    def __init__(self, srcs, hold=0.0):
        self.hold = hold
        self.rec = []
        self.why = {}  # index in rec -> how and when a broken one ended
        self.lock = threading.Lock()
        self.held = []  # (deadline, index in rec, Conn), oldest first
        self.stop_ev = threading.Event()
        self.ts = [threading.Thread(target=self.run, args=(srcs[w::self.WORKERS],), daemon=True)
                   for w in range(self.WORKERS)]
        self.closer = threading.Thread(target=self.close_due, daemon=True)
        for th in self.ts + [self.closer]:
            th.start()

    def run(self, srcs):
        n = 0
        while not self.stop_ev.is_set():
            t0 = time.monotonic()
            c = Conn(srcs[n % len(srcs)], VIP, timeout=self.TIMEOUT)
            n += 1
            with self.lock:
                self.rec.append((t0, c.via, None if c.s else "failed", time.monotonic() - t0))
                if c.s and self.hold > 0:
                    self.held.append((time.monotonic() + self.hold, len(self.rec) - 1, c))
            if c.s and self.hold <= 0:
                c.s.close()
            self.stop_ev.wait(self.GAP)

    def close_due(self):
        """Ends each held connection at its deadline (all of them once
        the workers have stopped)."""
        while True:
            workers_done = not any(th.is_alive() for th in self.ts)
            with self.lock:
                self.held.sort(key=lambda x: x[0])
                due = self.held[0] if self.held and (
                    workers_done or self.held[0][0] <= time.monotonic()) else None
                if due:
                    self.held.pop(0)
            if due:
                _, k, c = due
                c.s.settimeout(2)
                if not c.close():
                    with self.lock:
                        self.rec[k] = self.rec[k][:2] + ("broken",) + self.rec[k][3:]
                        self.why[k] = "%s at %.3f" % (c.end_err, time.monotonic())
            elif workers_done:
                return
            else:
                time.sleep(0.01)

    def stop(self):
        self.stop_ev.set()
        for th in self.ts + [self.closer]:
            th.join()
        return self

    def failed(self, since=0.0, until=1e18, what=("failed", "broken")):
        return [r for r in self.rec if since <= r[0] < until and r[2] in what]


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


def ms(a, b):
    return "%.0f ms" % ((b - a) * 1000) if a is not None and b is not None else "never"


def weighted_down(k):
    """A FIB predicate: k still there, at a weight below every other's."""
    return lambda f: k in f and len(f) > 1 and all(f[k] < w for i, w in f.items() if i != k)


def sc_leave_lameduck(fl, srcs):
    """Instance 3 leaves properly, as doc/deployment.md has it, while every
    client holds a connection: SIGTERM; on its 503 its speaker announces
    the VIP weighted down (link bandwidth 1 against 100), so the router
    sends new flows to the others and, resilient, keeps its busy buckets;
    a new connection per client, none refused. Then three groups of held
    connections end, each cleanly and byte-exact: a third in the lame duck
    (their clients finish); half of those on instance 3 after its
    listeners have closed, in the drain, which ends with them (the process
    exits, its speaker withdraws the VIP); half of those elsewhere after
    the router has dropped the instance."""
    row, held = leave_start(fl, srcs, "lameduck")
    k = NINST
    on_k = held.on(fl, k)
    through_drain = on_k[::2]
    through_delete = [x for x in range(len(held.live)) if x not in on_k][::2]
    early = [x for x in range(len(held.live)) if x not in through_drain + through_delete]
    closes = fl.log_count(k, "lame duck over")
    t0 = time.monotonic()
    fl.signal(k, signal.SIGTERM)
    t_down = fl.wait_fib(weighted_down(k), 5, "i%d weighted down" % k, since=t0)
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
    t_exit = time.monotonic()
    exit_after = t_exit - ended
    t_gone = fl.wait_fib(lambda f: k not in f, 5, "i%d withdrawn" % k, since=ended)
    time.sleep(IDLE_TIMER + 0.5)
    held.finish()
    row.note = leave_count(fl, row, held, k, new, refused) + (
        "; through the drain: %d on i%d (broken %d; exit %.1f s after), through the withdrawal: "
        "%d (broken %d); after the listeners closed: %d of %d new refused; BGP: weighted down "
        "%s after SIGTERM, withdrawn %s after the exit" % (
            len(through_drain), k, len(held.broken & set(through_drain)), exit_after,
            len(through_delete), len(held.broken & set(through_delete)), late_refused, late_new,
            ms(t0, t_down), ms(min(t_exit, t_gone), t_gone)))
    row.expect(exited, "instance did not exit after lame duck and drain")
    if fl.mode != "resilient":
        if not row.fails:
            row.verdict = "info"  # hash-threshold moves flows on any change of weights
        return row
    row.expect(row.broken == 0, "flows broken by a proper leave")
    row.expect(through_drain and through_delete, "no held connection to keep through the drain "
               "(on i%d) or the withdrawal (elsewhere)" % k)
    row.expect(draining, "instance %d ended before the sessions held through its drain" % k)
    row.expect(exit_after < 3, "instance %d exited %.1f s after its last session ended, not with it" % (
        k, exit_after))
    return row


def outage(fl, row, loop, held, k, t0, t_gone, last=None):
    """The counts and figures of instance k's loss at t0, the router's
    FIB without it at t_gone, the last client packet reaching it at last
    (default: the start of the last new connection that failed): the
    note's text."""
    fails = loop.failed(t0)
    # a connection started after the FIB changed must not reach the lost
    # instance (50 ms: zebra writes the kernel and FPM in one pass)
    late = loop.failed(t_gone + 0.05) if t_gone else fails
    if last is None:
        last = max((r[0] for r in fails), default=None)
    on_k = set(held.on(fl, k))
    broken_k = len(held.broken & on_k)
    row.tried = len(held.conns) + len(loop.rec)
    row.broken = len(held.broken) + held.failed_open + len(loop.failed())
    row.served = row.tried - row.broken
    row.expect(t_gone is not None, "the router kept instance %d" % k)
    row.expect(not late, "%d new connections failed after the router's FIB dropped i%d" % (
        len(late), k))
    if fl.mode == "resilient":
        row.expect(len(held.broken) == broken_k, "%d held flows broken on the instances that "
                   "stayed" % (len(held.broken) - broken_k))
    # a SYN lost to a dead instance is sent again 1 s later, by when the
    # router sends it elsewhere: such a connection is delayed, not failed
    slow = [r for r in loop.rec if r[0] >= t0 and r[2] is None and r[3] > 0.9]
    return ("FIB without i%d %s after, last new flow to it %s after; new: %d of %d failed, %d "
            "delayed 1 s (SYN sent again); held %d, %d on i%d: broken %d there, %d elsewhere" % (
                k, ms(t0, t_gone), ms(t0, last) if last else "none", len(fails),
                len([r for r in loop.rec if r[0] >= t0]), len(slow), len(held.live), len(on_k), k,
                broken_k, len(held.broken) - broken_k))


def sc_leave_kill(fl, srcs):
    """Instance 3 dies outright (SIGKILL to its proxy and its speaker, as
    a host that loses power) while every client holds a connection and new
    ones arrive all along: the router notices by BFD, not by the 3 s hold
    time. Its held flows are lost; after the FIB change no new one is."""
    row, held = leave_start(fl, srcs, "kill")
    k = NINST
    loop = Loop(srcs)
    time.sleep(0.3)
    t0 = time.monotonic()
    fl.kill_instance(k)
    # the clients' packets that still reach the dead instance, sampled:
    # when the last one came is when the router stopped sending it flows
    samples, n = [], -1
    while time.monotonic() - t0 < 3 and (not samples or time.monotonic() - samples[-1][0] < 1.5):
        c = fl.reached(k)
        if c != n:
            samples.append((time.monotonic(), c))
            n = c
        time.sleep(0.02)
    t_gone = fl.wait_fib(lambda f: k not in f, 10, "i%d dropped" % k, since=t0)
    time.sleep(IDLE_TIMER + 0.5)
    loop.stop()
    held.finish()
    why = fl.router.reset_reason(fl.inst_addr(k))
    t_last = samples[-1][0] if len(samples) > 1 else None
    row.note = outage(fl, row, loop, held, k, t0, t_gone, t_last) + "; session down: " + (why or "?")
    row.expect("BFD" in why, "the router's session went down for '%s', not BFD" % why)
    bfd = fl.router.bfd_ms * fl.router.bfd_mult
    row.note += "; BFD %d ms x %d" % (fl.router.bfd_ms, fl.router.bfd_mult)
    row.expect(t_gone - t0 < bfd / 1000 + 1.5, "the router dropped i%d %s after its death: "
               "BFD takes %d ms" % (k, ms(t0, t_gone), bfd))
    return row


def sc_crash(fl, srcs):
    """Instance 3's proxy alone dies (SIGKILL); its speaker lives on and
    withdraws the VIP at the next /health poll that finds nobody."""
    row = Row("f crash", fl.mode)
    k = NINST
    fl.ensure_instances()
    time.sleep(IDLE_TIMER + 0.5)
    held = Held(srcs)
    loop = Loop(srcs)
    time.sleep(0.3)
    t0 = time.monotonic()
    fl.signal(k, signal.SIGKILL)
    t_gone = fl.wait_fib(lambda f: k not in f, 10, "i%d withdrawn" % k, since=t0)
    time.sleep(IDLE_TIMER + 0.5)
    loop.stop()
    held.finish()
    fl.procs[k].wait()
    row.note = outage(fl, row, loop, held, k, t0, t_gone)
    row.expect(t_gone - t0 < 1.5, "withdrawn %s after the crash: the health hook polls every "
               "%s" % (ms(t0, t_gone), bgp.HEALTH_EVERY))
    return row


def sc_join(fl, srcs):
    """Instance 3 joins 1 and 2 while every client holds a connection: its
    proxy starts, and its speaker announces the VIP once /health is 200. A
    flow sent to the newcomer is reset there (no socket)."""
    row = Row("c join", fl.mode)
    k = NINST
    fl.ensure_instances()
    fl.signal(k, signal.SIGKILL)
    fl.procs[k].wait()
    fl.wait_fib(lambda f: k not in f, 10, "i%d withdrawn" % k)
    time.sleep(IDLE_TIMER + 0.5)
    held = Held(srcs)
    t0 = time.monotonic()
    fl.start_instance(k)
    t_in = fl.wait_fib(fl.full(), 10, "i%d announced" % k, since=t0)
    time.sleep(2 * IDLE_TIMER + 0.5)
    new = [probe(a, VIP) for a in srcs]
    broken = held.finish()
    row.tried = len(held.conns) + len(new)
    row.broken = broken + held.failed_open + sum(1 for c in new if not c.backend)
    row.served = row.tried - row.broken
    row.moved = broken
    to_k = sum(1 for c in new if c.via == fl.inst_addr(k))
    row.note = "held %d: %d moved (reset); new flows on i%d: %d/%d; in the FIB %s after the start" % (
        len(held.live), broken, k, to_k, len(new), ms(t0, t_in))
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
    it directly and through the VIP; held connections ride it out, and so
    does its announcement (/health answers throughout)."""
    row = Row("e upgrade", fl.mode)
    k = 1
    fl.ensure_instances()
    t_start = time.monotonic()
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
    flaps = [h for t, h in fl.router.fib_history() if t >= t_start and fl.fib(h) != fl.fib()]
    row.expect(not flaps and fl.full()(fl.fib()), "the router's FIB changed during the upgrade: %s"
               % [fl.fib(h) for h in flaps])
    return row


def sc_health(fl, srcs):
    """Instance 2 can reach none of its backends (a blackhole route in its
    namespace: its checks fail, /metrics says none is up): its speaker
    withdraws the VIP, though /health is 200. New flows go to the others
    once the FIB has changed; when the backends are back, so is it."""
    row = Row("h backends unreachable", fl.mode)
    k = 2
    net = "%s.16.0/20" % NET  # the backends' links, 10.200.21-25.0/24
    fl.ensure_instances()
    time.sleep(IDLE_TIMER + 0.5)
    held = Held(srcs)
    loop = Loop(srcs)
    time.sleep(0.3)
    t0 = time.monotonic()
    fl.nsx("i%d" % k, "ip route add blackhole " + net)
    try:
        t_gone = fl.wait_fib(lambda f: k not in f, 15, "i%d withdrawn" % k, since=t0)
        time.sleep(IDLE_TIMER + 0.5)
        loop.stop()
    finally:
        fl.nsx("i%d" % k, "ip route del blackhole " + net)
    t1 = time.monotonic()
    t_back = fl.wait_fib(fl.full(), 15, "i%d announced again" % k, since=t1)
    held.finish()
    # the sessions of clients that went elsewhere at the withdrawal (their
    # end reached another instance) stay open on this one until its idle
    # timeout, and would hold a later drain to drain_timeout: a fresh
    # process for the scenarios after this one
    fl.signal(k, signal.SIGKILL)
    fl.procs[k].wait()
    row.note = outage(fl, row, loop, held, k, t0, t_gone) + "; back in the FIB %s after its " \
        "backends" % ms(t1, t_back)
    # splicer marks a backend down after `fall` (3) failed checks 200 ms
    # apart; the hook withdraws at its next poll
    row.expect(t_gone - t0 < 3, "withdrawn %s after the backends went: expected about 1 s" % (
        ms(t0, t_gone)))
    return row


def sc_rolling(fl, srcs):
    """Every instance in turn is replaced by a new process, the way a fleet
    rolls out a new binary with no in-place upgrade: SIGTERM (lame duck:
    the VIP weighted down; the drain; the exit: withdrawn), then a new
    proxy, announced again before the next one goes. New connections
    arrive all along and each is held 0.5 s, then ends byte-exact."""
    row = Row("g rolling upgrade", fl.mode)
    fl.ensure_instances()
    time.sleep(IDLE_TIMER + 0.5)
    loop = Loop(srcs, hold=0.5)
    windows, figures = [], []
    for k in range(1, NINST + 1):
        t0 = time.monotonic()
        fl.signal(k, signal.SIGTERM)
        t_down = fl.wait_fib(weighted_down(k), 5, "i%d weighted down" % k, since=t0)
        exited = fl.wait_exit(k, 30)
        row.expect(exited, "instance %d did not exit" % k)
        t_exit = time.monotonic()
        t_gone = fl.wait_fib(lambda f: k not in f, 5, "i%d withdrawn" % k, since=t0)
        fl.start_instance(k)
        t_back = fl.wait_fib(fl.full(), 10, "i%d announced again" % k, since=t_gone)
        windows.append((t0, t_gone + 0.05))
        fails = [r[0] - t0 for r in loop.failed(t0, what=("failed",))]
        figures.append("i%d: down %s, exit %.1f s, gone %s after exit, back %s, refused %d "
                       "from %s to %s" % (
                           k, ms(t0, t_down), t_exit - t0, ms(min(t_exit, t_gone), t_gone),
                           ms(t_gone, t_back), len(fails),
                           "%.2f s" % min(fails) if fails else "-",
                           "%.2f s" % max(fails) if fails else "-"))
    time.sleep(0.5)
    loop.stop()
    failed = loop.failed(what=("failed",))
    broken = loop.failed(what=("broken",))
    # refused only once the listeners have closed (lame duck over), until
    # the withdrawal
    lameduck = float(LAMEDUCK.rstrip("s"))
    outside = [r for r in failed if not any(a + lameduck - 0.1 <= r[0] < b for a, b in windows)]
    row.tried = len(loop.rec)
    row.broken = len(failed) + len(broken)
    row.served = row.tried - row.broken
    row.note = "%d new, each held 0.5 s: %d refused (all between a SIGTERM and its withdrawal: " \
        "new flows in buckets its sessions kept busy after its listeners closed), %d broken; %s" % (
            len(loop.rec), len(failed), len(broken), "; ".join(figures))
    row.expect(not outside, "%d connections failed outside an instance's leave" % len(outside))
    if broken:
        row.note += "; broken: " + ", ".join("%s at %+.2f s from i%d's SIGTERM (%s)" % (
            r[1], r[0] - windows[k][0], k + 1, loop.why.get(loop.rec.index(r))) for r in broken[:8]
            for k in [max([j for j, w in enumerate(windows) if w[0] <= r[0]], default=0)])
    if fl.mode == "resilient":
        row.expect(not broken, "%d established flows broken" % len(broken))
    elif not row.fails:
        row.verdict = "info"
    return row


def sc_speaker_stop(fl, srcs):
    """Instance 1's speaker is stopped (SIGTERM to the health hook, as
    `systemctl stop splicer-bgp@NAME` does) while the proxy stays healthy:
    the VIP leaves the router's FIB at once, by BGP (the hook withdraws,
    then stops BIRD, which closes with a Cease), not by BFD or a session
    timing out. Started again, it announces."""
    row = Row("i speaker stopped", fl.mode)
    k = 1
    fl.ensure_instances()
    t0 = time.monotonic()
    fl.speakers[k].stop()
    t_gone = fl.wait_fib(lambda f: k not in f, 5, "i%d withdrawn" % k, since=t0)
    why = fl.router.reset_reason(fl.inst_addr(k))
    t1 = time.monotonic()
    fl.speakers[k].start()
    t_back = fl.wait_fib(fl.full(), 15, "i%d announced again" % k, since=t1)
    row.note = "withdrawn %s after SIGTERM to the hook; session down: %s; back %s after the " \
        "hook's start (BGP's connect retry: 1 s)" % (ms(t0, t_gone), why or "?", ms(t1, t_back))
    row.expect(t_gone - t0 < 1, "withdrawn %s after the hook's SIGTERM" % ms(t0, t_gone))
    row.expect("Administrative Shutdown" in why, "the session ended with '%s', not BIRD's "
               "Cease (Administrative Shutdown)" % why)
    return row


# the letter of each scenario's row, for --only
SCENARIO_LETTER = {"sc_leave_lameduck": "b", "sc_leave_kill": "b", "sc_join": "c",
                   "sc_backend_gone": "d", "sc_upgrade": "e", "sc_crash": "f", "sc_rolling": "g",
                   "sc_health": "h", "sc_speaker_stop": "i"}


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
    ap.add_argument("--only", default="", help="the scenarios to run, by letter (e.g. bh; a always runs)")
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
        fl.start_router()

        def run(sc, *a):
            if args.only and sc is not sc_agree and SCENARIO_LETTER[sc.__name__] not in args.only:
                return None, None
            t = time.monotonic()
            r = sc(fl, srcs, *a)
            row = r[0] if isinstance(r, tuple) else r
            row.note += "%s%.1f s" % ("; " if row.note else "", time.monotonic() - t)
            rows.append(row)
            return r
        for m in modes:
            fl.set_mode(m)
            fl.ensure_instances()
            _, before = run(sc_agree, per_client)
            run(sc_leave_lameduck)
            run(sc_leave_kill)
            run(sc_join)
            run(sc_backend_gone, before)
            run(sc_upgrade, 6 if args.short else 20)
            run(sc_crash)
            run(sc_rolling)
            run(sc_health)
            run(sc_speaker_stop)
    except Exception as e:  # the table so far, and why it stopped
        r = Row("driver error", fl.mode or "-")
        r.verdict, r.note = "FAIL", str(e)
        rows.append(r)
    finally:
        fl.stop_all()
        ctypes.CDLL(None).setns(root, 0x40000000)
    print_table(rows)
    failed = sum(r.verdict == "FAIL" for r in rows)
    if failed or os.environ.get("FLEET_KEEP"):
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
