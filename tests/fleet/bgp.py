# SPDX-License-Identifier: MIT
"""The fleet's control plane (tests/fleet/fleet.py): BGP, as a real L4 fleet
runs it, with Debian's daemons, every one a child of the driver in a
namespace of the run, stopped by PID.

  router namespace   FRR: zebra (FIB; FPM to tests/fleet/fib_agent.py),
                     bgpd (iBGP to every instance, maximum-paths, weights
                     from the link bandwidth community), bfdd (BFD at
                     contrib/bgp/bird.conf's intervals)
  each instance      contrib/bgp/splicer-bgp-health running BIRD 2 with
                     contrib/bgp/bird.conf (its defines set to the
                     instance's addresses): the VIP announced while the
                     instance's /health is 200, weighted down while it is
                     503 draining, withdrawn otherwise

The router's FIB for the VIP is what the agent logs (its next hops and
weights, timed): Router.fib() reads it.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONTRIB = os.path.join(HERE, "..", "..", "contrib", "bgp")
BIRD_CONF = os.path.join(CONTRIB, "bird.conf")
HOOK = os.path.join(CONTRIB, "splicer-bgp-health")
FRR = "/usr/lib/frr"
FPM_PORT = 2620
TABLE = 100          # the resilient group's table (ip rule to VIP lookup TABLE)
# the resilient group's nexthop id, its members' after it: far above the ids
# zebra gives its own nexthop objects (it counts up from 1)
GROUP = 1 << 30
BUCKETS = 128
HEALTH_EVERY = "100ms"   # splicer-bgp-health's poll


def bird_defines(text):
    """{name: value} of the `define NAME = VALUE;` lines."""
    return dict(re.findall(r"^define\s+(\w+)\s*=\s*(.*?);", text, re.M))


def bfd_timers(text):
    """(interval ms, multiplier) of bird.conf's protocol bfd: the router's
    bfdd runs the same, so the shipped config's timing is what is measured."""
    rx = re.search(r"min rx interval (\d+) ms;", text)
    tx = re.search(r"min tx interval (\d+) ms;", text)
    mult = re.search(r"multiplier (\d+);", text)
    if not (rx and tx and mult) or rx.group(1) != tx.group(1):
        raise RuntimeError("contrib/bgp/bird.conf: no protocol bfd with equal min rx/tx "
                           "interval N ms and a multiplier")
    return int(rx.group(1)), int(mult.group(1))


def bird_config(text, **values):
    """contrib/bgp/bird.conf with the defines named set; every one must
    be there (the shipped config is what runs)."""
    for name, value in values.items():
        text, n = re.subn(r"^(define\s+%s\s*=\s*).*?;" % name, r"\g<1>%s;" % value, text, flags=re.M)
        if n != 1:
            raise RuntimeError("contrib/bgp/bird.conf: no `define %s = ...;`" % name)
    return text


class Router:
    """FRR and the FIB agent in the router's namespace."""

    def __init__(self, ns, tmp, vip, neighbors, asn, idle_timer):
        self.ns, self.vip, self.neighbors, self.asn = ns, vip, neighbors, asn
        with open(BIRD_CONF) as f:
            self.bfd_ms, self.bfd_mult = bfd_timers(f.read())
        self.idle = idle_timer
        self.dir = os.path.join(tmp, "frr")
        self.fiblog = os.path.join(tmp, "fib.log")
        self.procs = {}

    def write_configs(self):
        os.makedirs(self.dir, exist_ok=True)
        # the daemons drop to user frr: their directory is frr's (and the
        # run's temp directory above it searchable)
        shutil.chown(self.dir, "frr", "frr")
        os.chmod(os.path.dirname(self.dir), 0o711)
        d = self.dir
        conf = {
            # routes with their next hops inline (no kernel nexthop objects
            # of zebra's, none in FPM): the agent's own objects are then
            # no business of zebra's
            "zebra": ["no zebra nexthop kernel enable",
                      "fpm address 127.0.0.1 port %d" % FPM_PORT, "no fpm use-next-hop-groups"],
            "bfdd": ["bfd", " profile fleet", "  detect-multiplier %d" % self.bfd_mult,
                     "  receive-interval %d" % self.bfd_ms, "  transmit-interval %d" % self.bfd_ms,
                     " exit", "exit"],
            "bgpd": ["router bgp %s" % self.asn, " bgp router-id 10.200.1.1", " bgp log-neighbor-changes",
                     " no bgp default ipv4-unicast", " timers bgp 1 3",
                     " neighbor fleet peer-group", " neighbor fleet remote-as internal",
                     " neighbor fleet timers connect 1", " neighbor fleet advertisement-interval 0",
                     " neighbor fleet bfd profile fleet"] +
                    [" neighbor %s peer-group fleet" % n for n in self.neighbors] +
                    [" address-family ipv4 unicast", "  neighbor fleet activate",
                     "  maximum-paths ibgp 16", " exit-address-family", "exit"],
        }
        for name, lines in conf.items():
            with open(os.path.join(d, name + ".conf"), "w") as f:
                f.write("\n".join(["frr defaults traditional", "hostname fleet-router",
                                   "log file %s/%s.log" % (d, name)] + lines) + "\n")

    def daemon(self, name, *extra):
        d = self.dir
        lg = open(os.path.join(d, name + ".out"), "w")
        self.procs[name] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, os.path.join(FRR, name), *extra,
             "-z", d + "/zserv.api", "--vty_socket", d, "-i", "%s/%s.pid" % (d, name),
             "-f", "%s/%s.conf" % (d, name)], stdout=lg, stderr=subprocess.STDOUT)

    def start(self):
        self.write_configs()
        open(self.fiblog, "w").close()
        lg = open(os.path.join(self.dir, "fib_agent.out"), "w")
        self.procs["agent"] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "python3", os.path.join(HERE, "fib_agent.py"),
             "127.0.0.1:%d" % FPM_PORT, self.vip, str(TABLE), str(GROUP), str(BUCKETS),
             str(self.idle), self.fiblog], stdout=lg, stderr=subprocess.STDOUT)
        self.wait(lambda: self.listening(FPM_PORT), 5, "the FIB agent listening")
        self.daemon("zebra", "-M", "dplane_fpm_nl")
        self.wait(lambda: os.path.exists(self.dir + "/zserv.api"), 10, "zebra's socket")
        self.daemon("bfdd", "--bfdctl", self.dir + "/bfdd.sock")
        self.daemon("bgpd")
        self.wait(lambda: "BGP router identifier" in self.vtysh("show bgp summary", check=False), 10,
                  "bgpd answering")

    def listening(self, port):
        r = subprocess.run(["ip", "netns", "exec", self.ns, "ss", "-Hltn", "sport = :%d" % port],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return bool(r.stdout.strip())

    def wait(self, cond, secs, what):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError("router: %s exited (%d) while waiting for %s: see %s" % (
                        name, p.returncode, what, self.dir))
            if cond():
                return
            time.sleep(0.05)
        raise RuntimeError("router: timed out waiting for %s (see %s)" % (what, self.dir))

    def vtysh(self, cmd, check=True):
        r = subprocess.run(["vtysh", "--vty_socket", self.dir, "-c", cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=10)
        if check and r.returncode:
            raise RuntimeError("vtysh -c '%s': %s" % (cmd, r.stdout.strip()))
        return r.stdout

    def resilient(self, on):
        """Which FIB forwards: the agent's resilient group (a rule before
        the main table) or zebra's hash-threshold route in main."""
        verb = "add" if on else "del"
        subprocess.run(["ip", "-n", self.ns, "rule", verb, "to", self.vip + "/32", "lookup",
                        str(TABLE), "pref", "100"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def balanced(self):
        """Whether the resilient group's buckets are shared as its weights
        say, each member within one bucket of its share: the kernel gives
        a new or reweighted member only buckets idle for idle_timer, so a
        FIB change is not yet a balanced group."""
        try:
            grp = json.loads(self.ip_json("nexthop show id %d" % GROUP))[0]["group"]
            buckets = json.loads(self.ip_json("nexthop bucket show id %d" % GROUP))
        except (ValueError, IndexError, KeyError):
            return False
        total = sum(m["weight"] for m in grp)
        count = {}
        for b in buckets:
            count[b["bucket"]["nhid"]] = count.get(b["bucket"]["nhid"], 0) + 1
        return all(abs(count.get(m["id"], 0) - BUCKETS * m["weight"] / total) < 1 for m in grp)

    def ip_json(self, args):
        r = subprocess.run(["ip", "-j", "-n", self.ns] + args.split(), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        return r.stdout

    def fib_history(self):
        """[(monotonic seconds, {gateway: weight})] of every change."""
        out = []
        with open(self.fiblog) as f:
            for line in f:
                t, _, paths = line.strip().partition(" ")
                if paths == "":
                    continue
                hops = {} if paths == "-" else dict(
                    (gw, int(w)) for gw, w in (p.split("=") for p in paths.split(",")))
                out.append((float(t), hops))
        return out

    def fib(self):
        h = self.fib_history()
        return h[-1][1] if h else {}

    def reset_reason(self, neighbor):
        """bgpd's word on why the session with neighbor last went down."""
        out = self.vtysh("show bgp neighbors %s" % neighbor, check=False)
        m = re.search(r"Last reset [^,]*,\s*(.*)", out)
        return m.group(1).strip() if m else ""

    def stop(self):
        """SIGTERM (zebra takes its routes back, FRR removes its
        /var/tmp/frr/NAME.PID), then SIGKILL what is left, and what a
        killed daemon left in /var/tmp/frr."""
        for name in ("bgpd", "bfdd", "zebra", "agent"):
            p = self.procs.get(name)
            if p and p.poll() is None:
                p.terminate()
        for name, p in self.procs.items():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if name != "agent":
                shutil.rmtree("/var/tmp/frr/%s.%d" % (name, p.pid), ignore_errors=True)
        self.procs = {}


class Speaker:
    """An instance's splicer-bgp-health and its BIRD, from contrib/bgp."""

    def __init__(self, ns, tmp, name, vip, local, router, stats_port):
        self.ns, self.name = ns, name
        self.conf = os.path.join(tmp, "bird-%s.conf" % name)
        self.ctl = os.path.join(tmp, "bird-%s.ctl" % name)
        self.log = os.path.join(tmp, "speaker-%s.log" % name)
        with open(BIRD_CONF) as f:
            text = f.read()
        self.asn = bird_defines(text).get("ASN")
        with open(self.conf, "w") as f:
            f.write(bird_config(text, VIP=vip + "/32", LOCAL=local, ROUTER=router))
        self.stats_port = stats_port
        self.proc = None

    def start(self):
        if self.proc and self.proc.poll() is None:
            return
        lg = open(self.log, "a")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "python3", HOOK,
             "--stats", "127.0.0.1:%d" % self.stats_port, "--control", self.ctl,
             "--interval", HEALTH_EVERY, "--",
             "bird", "-f", "-c", self.conf, "-s", self.ctl], stdout=lg, stderr=subprocess.STDOUT)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def bird_pids(self):
        """The speaker's BIRD: the hook's children."""
        if not self.running():
            return []
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def kill(self):
        """SIGKILL, BIRD first: no goodbye to the router (no BGP
        notification, no withdrawal): it must notice by BFD."""
        for pid in self.bird_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.running():
            self.proc.kill()
        if self.proc:
            self.proc.wait()

    def stop(self):
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
