# SPDX-License-Identifier: MIT
# deploy_files.py BIN: the fleet's deployment files in contrib/ agree with
# themselves and with the binary, checked without a cluster or a container
# tool (neither runs here):
#   - contrib/fleet.conf, the ConfigMap's splicer.conf and the image's
#     placeholder config pass `splicer check --syntax-only`;
#   - kubernetes/splicer.yaml parses (YAML), and its Deployment reads
#     /health on the port the config's stats listens on, exposes the route's
#     listen port, runs preStop `ctl -s ADMIN lameduck` on the config's admin
#     socket (in a writable volume), runs as the image's non-root user, and
#     gives terminationGracePeriodSeconds more than the preStop's sleep plus
#     drain_timeout; the Service targets the route's port with
#     externalTrafficPolicy Local (maglev needs the client's address);
#   - splicer@.service's TimeoutStopSec covers fleet.conf's lameduck plus
#     drain_timeout;
#   - where `make test` built the image (SPLICER_IMAGE_STATE says "ok ID"),
#     the image itself, as podman inspects it: its USER is the pod's
#     runAsUser:runAsGroup, its STOPSIGNAL SIGTERM (the container runtimes
#     under Kubernetes send the image's: anything else skips the drain),
#     its entrypoint the splicer the preStop hook runs. (Running it is
#     tests/integration/test_image.c's.)
#   - contrib/bgp, one instance's BGP speaker: bird.conf parses (`bird -p`,
#     where BIRD 2 is installed), the static protocols the health hook
#     switches (its --up and --drain defaults) exist, start disabled and are
#     what the session exports; BFD is on; splicer-bgp@.service polls
#     fleet.conf's stats port and hands the hook BIRD's control socket.
# Exit 0, 1 with every disagreement, or 77 when PyYAML is not here.
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("PyYAML not installed (Debian: python3-yaml)")
    sys.exit(77)

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/splicer"
problems = []


def fail(msg):
    problems.append(msg)


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text.strip())
    if not m:
        raise ValueError("not a duration: %r" % text)
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def ini(text):
    """{section: {key: value}} of a splicer config (comments dropped)."""
    out, sec = {}, None
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            sec = line.strip("[]")
            out[sec] = {}
        elif "=" in line and sec is not None:
            k, v = line.split("=", 1)
            out[sec][k.strip()] = v.strip()
    return out


def check_config(name, text):
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run([BIN, "check", "--syntax-only", "-c", f.name], capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 0:
            fail("%s: splicer check --syntax-only: %s" % (name, (r.stderr or r.stdout).strip()))
    finally:
        os.unlink(f.name)


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


# fleet.conf and the unit that runs it
fleet = open("contrib/fleet.conf").read()
check_config("contrib/fleet.conf", fleet)
fg = ini(fleet)["global"]
unit = open("contrib/splicer@.service").read()
m = re.search(r"^TimeoutStopSec=(\d+)\s*$", unit, re.M)
need = seconds(fg["lameduck"]) + seconds(fg["drain_timeout"])
if not m or int(m.group(1)) <= need:
    fail("splicer@.service: TimeoutStopSec=%s does not cover fleet.conf's lameduck + drain_timeout "
         "(%g s)" % (m.group(1) if m else "(none)", need))

# the image's placeholder config: the printf lines of contrib/Containerfile
cf = open("contrib/Containerfile").read()
m = re.search(r"printf '%s\\n' \\\n(.*?)>\s*/etc/splicer/splicer.conf", cf, re.S)
if not m:
    fail("contrib/Containerfile: no placeholder config (printf ... > /etc/splicer/splicer.conf)")
else:
    check_config("contrib/Containerfile's placeholder config",
                 "\n".join(re.findall(r"'([^']*)'", m.group(1))) + "\n")
m = re.search(r"^USER (\d+):(\d+)\s*$", cf, re.M)
image_user = (int(m.group(1)), int(m.group(2))) if m else None
if not image_user or image_user[0] == 0:
    fail("contrib/Containerfile: no non-root numeric USER uid:gid")

# the Kubernetes objects
try:
    docs = [d for d in yaml.safe_load_all(open("contrib/kubernetes/splicer.yaml")) if d]
except yaml.YAMLError as e:
    print("FAIL: contrib/kubernetes/splicer.yaml does not parse: %s" % e, file=sys.stderr)
    sys.exit(1)
kinds = {d.get("kind"): d for d in docs}
missing = [k for k in ("ConfigMap", "Deployment", "Service") if k not in kinds]
for k in missing:
    fail("splicer.yaml: no %s" % k)
if not missing:
    conf_text = kinds["ConfigMap"]["data"]["splicer.conf"]
    check_config("splicer.yaml's ConfigMap splicer.conf", conf_text)
    conf = ini(conf_text)
    g = conf.get("global", {})
    routes = [v for k, v in conf.items() if k.startswith("route ")]
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    probe = c.get("readinessProbe", {}).get("httpGet", {})
    if probe.get("path") != "/health" or ports.get(probe.get("port")) != port_of(g.get("stats", ":0")):
        fail("Deployment: the readiness probe (%s) is not GET /health on the config's stats port (%s)"
             % (probe, g.get("stats")))
    if "httpGet" in c.get("livenessProbe", {}):
        fail("Deployment: an httpGet liveness probe would kill a draining pod (/health is 503 then)")
    if not routes or ports.get("tcp") != port_of(routes[0]["listen"]):
        fail("Deployment: container port tcp (%s) is not the route's listen port (%s)"
             % (ports.get("tcp"), routes[0]["listen"] if routes else None))
    pre = " ".join(c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", []))
    admin = g.get("admin", "")
    if not admin or ("ctl -s %s lameduck" % admin) not in pre:
        fail("Deployment: preStop (%s) does not run `splicer ctl -s %s lameduck`" % (pre, admin))
    mounts = {v["mountPath"]: v for v in c.get("volumeMounts", [])}
    if os.path.dirname(admin) not in mounts or mounts[os.path.dirname(admin)].get("readOnly"):
        fail("Deployment: the admin socket's directory %s is not a writable volume"
             % os.path.dirname(admin))
    if "/etc/splicer" not in mounts or "-c" not in c.get("args", []) or \
            c["args"][c["args"].index("-c") + 1] != "/etc/splicer/splicer.conf":
        fail("Deployment: the ConfigMap is not mounted at /etc/splicer and read with -c")
    sleep = re.search(r"sleep (\d+)", pre)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    need = (int(sleep.group(1)) if sleep else 0) + seconds(g.get("drain_timeout", "30s"))
    if grace <= need:
        fail("Deployment: terminationGracePeriodSeconds %s <= preStop sleep + drain_timeout (%g)"
             % (grace, need))
    sc = pod.get("securityContext", {})
    if not sc.get("runAsNonRoot") or (sc.get("runAsUser"), sc.get("runAsGroup")) != image_user:
        fail("Deployment: runs as %s:%s, the image as %s (runAsNonRoot %s)"
             % (sc.get("runAsUser"), sc.get("runAsGroup"), image_user, sc.get("runAsNonRoot")))
    svc = kinds["Service"]["spec"]
    if svc.get("externalTrafficPolicy") != "Local":
        fail("Service: externalTrafficPolicy is not Local: clients' addresses would be SNATed "
             "and maglev would hash the nodes'")
    if not any(p.get("targetPort") == "tcp" for p in svc.get("ports", [])):
        fail("Service: no port targets the container's tcp port")


# the BGP speaker of one instance (contrib/bgp): BIRD 2 parses its config;
# the two protocols the health hook switches are there, start disabled (no
# announcement before the first healthy polls) and are what the session
# exports; the session runs BFD; the unit polls fleet.conf's stats port
bgp_conf = open("contrib/bgp/bird.conf").read()
bird_parsed = False
if shutil.which("bird"):
    r = subprocess.run(["bird", "-p", "-c", "contrib/bgp/bird.conf"], capture_output=True,
                       text=True, timeout=20)
    if r.returncode != 0:
        fail("contrib/bgp/bird.conf: bird -p: %s" % (r.stderr or r.stdout).strip())
    bird_parsed = True
hook = open("contrib/bgp/splicer-bgp-health").read()
try:
    compile(hook, "contrib/bgp/splicer-bgp-health", "exec")
except SyntaxError as e:
    fail("contrib/bgp/splicer-bgp-health: %s" % e)
protos = dict(re.findall(r"^protocol (\w+)(?: (\w+))?\s*\{", bgp_conf, re.M)[::-1])
blocks = dict(re.findall(r"^protocol \w+ (\w+)\s*\{(.*?)^\}", bgp_conf, re.M | re.S))
for opt in ("up", "drain"):
    m = re.search(r'"--%s", default="(\w+)"' % opt, hook)
    name = m.group(1) if m else None
    body = blocks.get(name, "")
    if not m or not re.search(r"^protocol static %s\b" % name, bgp_conf, re.M):
        fail("contrib/bgp/bird.conf: no static protocol %s for the hook's --%s" % (name, opt))
    elif not re.search(r"^\s*disabled;", body, re.M):
        fail("contrib/bgp/bird.conf: protocol %s does not start disabled: the VIP would be "
             "announced before splicer's first healthy /health" % name)
    elif ('proto = "%s"' % name) not in blocks.get("upstream", ""):
        fail("contrib/bgp/bird.conf: the bgp protocol does not export protocol %s" % name)
if "bfd" not in protos or not re.search(r"^\s*bfd on;", blocks.get("upstream", ""), re.M):
    fail("contrib/bgp/bird.conf: no BFD (protocol bfd, and bfd on in the bgp session)")
bgp_unit = open("contrib/bgp/splicer-bgp@.service").read()
m = re.search(r"--stats \S*:(\d+)", bgp_unit)
if not m or int(m.group(1)) != port_of(fg["stats"]):
    fail("splicer-bgp@.service: --stats %s is not fleet.conf's stats port (%s)"
         % (m.group(1) if m else "(none)", fg["stats"]))
if not re.search(r"-s (\S+bird\.ctl)\b", bgp_unit) or \
        re.search(r"--control (\S+)", bgp_unit).group(1) != re.search(r"-s (\S+)", bgp_unit).group(1):
    fail("splicer-bgp@.service: the hook's --control is not BIRD's control socket (-s)")


def image_config():
    """The built image's config (podman image inspect), or None and why."""
    path = os.environ.get("SPLICER_IMAGE_STATE", "")
    try:
        state = open(path).read().split(None, 1) if path else []
    except OSError:
        state = []
    if len(state) != 2 or state[0] != "ok":
        return None, " ".join(state).strip() or "SPLICER_IMAGE_STATE names no outcome"
    r = subprocess.run(["sh", "tools/podman.sh", "image", "inspect", "--format", "{{json .Config}}",
                        state[1].strip()], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("the image %s that make test built: podman image inspect: %s"
             % (state[1].strip()[:12], r.stderr.strip()))
        return None, "inspect failed"
    return json.loads(r.stdout), None


image, image_why = image_config()
if image is not None and not missing:
    if image.get("User") != "%s:%s" % (sc.get("runAsUser"), sc.get("runAsGroup")):
        fail("the image runs as %r, the Deployment as %s:%s"
             % (image.get("User"), sc.get("runAsUser"), sc.get("runAsGroup")))
    if image.get("StopSignal", "SIGTERM") != "SIGTERM":
        fail("the image's STOPSIGNAL is %s: the runtime sends it at the pod's stop, and only "
             "SIGTERM drains" % image.get("StopSignal"))
    ep = image.get("Entrypoint") or []
    if not ep or ("%s ctl " % ep[0]) not in pre or "command" in c:
        fail("the image's entrypoint %s is not the splicer the preStop hook runs (%s)" % (ep, pre))

if problems:
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    sys.exit(1)
bird_said = "bird.conf parsed by bird" if bird_parsed else \
    "bird not installed: bird.conf not parsed; make fleet-deps installs it"
print("deployment files agree: fleet.conf, splicer@.service, Containerfile, kubernetes/splicer.yaml, "
      "bgp/ (%s)%s" % (bird_said, "; and the image as built" if image is not None else
                       "; the image itself not checked: %s" % image_why))
