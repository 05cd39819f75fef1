# SPDX-License-Identifier: MIT
# pod_spec.py DIR configmap
# pod_spec.py DIR loopback LISTEN_PORT STATS_PORT BACKEND
# The pod of contrib/kubernetes/splicer.yaml as podman would run it, for the
# image's tests (tests/integration/test_image.c): they run the image the way
# the Deployment says, so the manifest is checked against what the image
# really does. Writes the ConfigMap's splicer.conf to DIR/splicer.conf,
# verbatim (configmap) or with the route's listen, its backends and the
# stats address moved to 127.0.0.1 ports for host networking (loopback,
# every other setting kept), and prints one line per fact:
#   podman ARG     an argument of `podman run` that the pod's spec asks for:
#                  the security context, the volumes (the config from DIR,
#                  emptyDir as tmpfs), the environment;
#   arg ARG        the container's args (after the image's entrypoint);
#   prestop ARG    the preStop exec command, one line per word;
#   user UID:GID   runAsUser:runAsGroup (the image's own USER must be this:
#                  the tests do not pass --user);
#   readiness PATH the readiness probe's httpGet path (on the stats port);
#   grace SECONDS  terminationGracePeriodSeconds: what `podman stop -t` gets.
# A field podman cannot be told about here fails the script (exit 1) with
# its name: a manifest that changes makes the tests change with it.
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("PyYAML not installed (Debian: python3-yaml)")
    sys.exit(77)

MANIFEST = "contrib/kubernetes/splicer.yaml"


def die(msg):
    print("pod_spec.py: %s: %s" % (MANIFEST, msg), file=sys.stderr)
    sys.exit(1)


def size_bytes(text):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(text))
    if not m:
        die("emptyDir sizeLimit %r: not a size this script knows" % text)
    return int(m.group(1)) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2)]


def loopback(conf, listen, stats, backend):
    """The config with the one route's addresses and the stats address on
    127.0.0.1; every other line as it is."""
    routes = len(re.findall(r"^\s*\[route ", conf, re.M))
    if routes != 1:
        die("the ConfigMap's config has %d routes: the test knows one" % routes)
    out = []
    for line in conf.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line else ""
        if key == "listen":
            line = "listen = 127.0.0.1:%d" % listen
        elif key == "backend":
            line = "backend = %s" % backend
        elif key == "stats":
            line = "stats = 127.0.0.1:%d" % stats
        out.append(line)
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("configmap", "loopback") or \
            (sys.argv[2] == "loopback" and len(sys.argv) != 6):
        print("usage: pod_spec.py DIR configmap | pod_spec.py DIR loopback LISTEN_PORT STATS_PORT BACKEND",
              file=sys.stderr)
        sys.exit(2)
    out_dir, variant = sys.argv[1], sys.argv[2]
    docs = [d for d in yaml.safe_load_all(open(MANIFEST)) if d]
    kinds = {d.get("kind"): d for d in docs}
    if "ConfigMap" not in kinds or "Deployment" not in kinds:
        die("no ConfigMap or no Deployment")
    cm = kinds["ConfigMap"]
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    if len(pod.get("containers", [])) != 1:
        die("the pod has %d containers: the test knows one" % len(pod.get("containers", [])))
    c = pod["containers"][0]
    lines = []

    psc = pod.get("securityContext", {})
    for k in psc:
        if k not in ("runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile"):
            die("pod securityContext.%s: not translated to podman" % k)
    if psc.get("seccompProfile", {}).get("type", "RuntimeDefault") != "RuntimeDefault":
        die("seccompProfile %s: only RuntimeDefault (podman's default profile) is translated"
            % psc["seccompProfile"])
    if "runAsUser" not in psc or "runAsGroup" not in psc:
        die("no runAsUser/runAsGroup")
    lines.append("user %d:%d" % (psc["runAsUser"], psc["runAsGroup"]))

    csc = c.get("securityContext", {})
    for k, v in csc.items():
        if k == "allowPrivilegeEscalation":
            if v is False:
                lines.append("podman --security-opt=no-new-privileges")
        elif k == "readOnlyRootFilesystem":
            if v:
                lines.append("podman --read-only")
        elif k == "capabilities":
            for cap in v.get("drop", []):
                lines.append("podman --cap-drop=%s" % cap)
            for cap in v.get("add", []):
                lines.append("podman --cap-add=%s" % cap)
        else:
            die("container securityContext.%s: not translated to podman" % k)

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    conf_key = None
    for m in c.get("volumeMounts", []):
        vol = volumes.get(m["name"])
        if vol is None:
            die("volumeMount %s: no such volume" % m["name"])
        if "configMap" in vol:
            if vol["configMap"]["name"] != cm["metadata"]["name"] or len(cm["data"]) != 1:
                die("volume %s: not the one-key ConfigMap of this file" % m["name"])
            conf_key = next(iter(cm["data"]))
            lines.append("podman --mount=type=bind,src=%s,dst=%s%s" % (
                os.path.abspath(out_dir), m["mountPath"], ",ro" if m.get("readOnly") else ""))
        elif "emptyDir" in vol:
            ed = vol["emptyDir"] or {}
            size = ",tmpfs-size=%d" % size_bytes(ed["sizeLimit"]) if "sizeLimit" in ed else ""
            # an emptyDir is mode 0777, owned by root
            lines.append("podman --mount=type=tmpfs,dst=%s,tmpfs-mode=0777%s" % (m["mountPath"], size))
        else:
            die("volume %s: only configMap and emptyDir are translated" % m["name"])
    if conf_key is None:
        die("the ConfigMap is not mounted")
    for e in c.get("env", []):
        if "value" not in e:
            die("env %s: only plain values are translated" % e.get("name"))
        lines.append("podman --env=%s=%s" % (e["name"], e["value"]))
    if "command" in c:
        die("command: the pod runs the image's entrypoint; a command is not translated")
    for a in c.get("args", []):
        lines.append("arg %s" % a)
    for w in c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", []):
        lines.append("prestop %s" % w)
    probe = c.get("readinessProbe", {}).get("httpGet", {})
    if probe:
        lines.append("readiness %s" % probe.get("path", "/"))
    lines.append("grace %d" % pod.get("terminationGracePeriodSeconds", 30))

    conf = cm["data"][conf_key]
    if variant == "loopback":
        conf = loopback(conf, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    # a ConfigMap volume: a directory anyone may enter, files mode 0644
    # (defaultMode), so the image's user reads them
    os.makedirs(out_dir, exist_ok=True)
    os.chmod(out_dir, 0o755)
    path = os.path.join(out_dir, conf_key)
    with open(path, "w") as f:
        f.write(conf)
    os.chmod(path, 0o644)
    print("\n".join(lines))


main()
