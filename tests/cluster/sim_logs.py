"""Container logs for the simulated nodes, through the real pods/log path (used by cluster.py).

kubectl logs -> kube-apiserver -> https://<node InternalIP>:<kubeletEndpoint.Port>/containerLogs/...
-> kubelet_relay.py (bytes only, on the nodes' loopback addresses) -> kwok's kubelet server, which
reads the container's log file in CRI format as a kubelet does (k8s.io/cri-client/pkg/logs:
tailLines, sinceSeconds/sinceTime, limitBytes, timestamps, previous, follow).

Which file a container's log is: kwok's Logs (one pod, by name and namespace) and ClusterLogs (pods
selected by namespace and name) objects (kwok.x-k8s.io/v1alpha1), created through the API here:
kwok runs with --enable-crds=Logs,ClusterLogs and watches them, so a test attaches logs to a pod
at run time. The files live under DIR/pod-logs.
"""
import datetime
import json
import os
import re
import socket
import time
from pathlib import Path

KWOK_GROUP = "kwok.x-k8s.io"
KWOK_API = "/apis/kwok.x-k8s.io/v1alpha1"
CRDS = ("Logs", "ClusterLogs")
CRD_FILES = ("kwok.x-k8s.io_logs.yaml", "kwok.x-k8s.io_clusterlogs.yaml")
# Node addresses the kwok serving certificate names (127.B.0.2 .. for the first N nodes). The
# apiserver verifies it against the address it dials (--kubelet-certificate-authority), so a node
# beyond these has no logs (x509 error); raise it if a suite ever needs more.
CERT_NODE_ADDRESSES = 2000

CRI_LINE = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) (stdout|stderr) [^ ]+ ")
DOCKER_JSON_LINE = re.compile(rb'^\{.*"log":.*"stream":.*"time":.*\}$')


class LogsError(Exception):
    pass


# -- certificates and the relay ------------------------------------------------------------------


def node_address(ip_base, k):
    """The k-th node's loopback address, as cluster.py's apply_fleet_text assigns them."""
    return "127.%d.%d.%d" % (ip_base, k // 250, 2 + k % 250)


def kubelet_serving_sans(ip_base, n=CERT_NODE_ADDRESSES):
    """openssl extension lines: serverAuth with IP SANs for 127.0.0.1 and the first n node addresses."""
    ips = ["127.0.0.1"] + [node_address(ip_base, k) for k in range(n)]
    return ("basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage = serverAuth\nsubjectAltName = @alt\n[alt]\nDNS.1 = localhost\n" +
            "".join("IP.%d = %s\n" % (i + 1, ip) for i, ip in enumerate(ips)))


def relay_command(bin_python, script, port, kwok_port, control):
    return [bin_python, "-S", str(script), "--port", str(port), "--target", "127.0.0.1:%d" % kwok_port,
            "--control", str(control)]


def relay_send(control, line, timeout=10):
    """One command to kubelet_relay.py's control socket; returns its answer line."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(control))
        s.sendall((line + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    answer = data.decode(errors="replace").strip()
    if not answer or answer.startswith("error"):
        raise LogsError("kubelet relay: %r -> %r" % (line, answer))
    return answer


# -- CRI log lines -------------------------------------------------------------------------------


def rfc3339_nano(t):
    sec, nanos = divmod(int(round(t * 1e9)), 1000000000)
    return datetime.datetime.fromtimestamp(sec, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%09dZ" % nanos


def read_source(src):
    """Text (str), a file (pathlib.Path) or lines (list) -> bytes."""
    if isinstance(src, Path):
        return src.read_bytes()
    if isinstance(src, (list, tuple)):
        return "".join(l if l.endswith("\n") else l + "\n" for l in src).encode()
    if isinstance(src, bytes):
        return src
    return str(src).encode()


def is_runtime_format(data):
    first = next((l for l in data.split(b"\n") if l.strip()), b"")
    return bool(CRI_LINE.match(first) or DOCKER_JSON_LINE.match(first.strip()))


def to_cri(data, stream="stdout", at=None, step=0.001):
    """Bytes of a plain log -> CRI lines as containerd writes them ("<RFC3339Nano> stdout F <text>"),
    the text kept byte for byte; line i is stamped at + i*step (at: epoch seconds, default now).
    A log already in CRI or docker json-file format is returned as it is."""
    if is_runtime_format(data):
        return data if data.endswith(b"\n") or not data else data + b"\n"
    if stream not in ("stdout", "stderr"):
        raise LogsError("stream must be stdout or stderr, not %r" % stream)
    at = time.time() if at is None else float(at)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return b"".join(b"%s %s F %s\n" % (rfc3339_nano(at + i * step).encode(), stream.encode(), l)
                    for i, l in enumerate(lines))


# -- Logs and ClusterLogs objects ----------------------------------------------------------------


def logs_root(c):
    return c.dir / "pod-logs"


def write_log(path, data, append=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with open(path, "ab") as f:   # appended in place: a follow sees the new lines
            f.write(data)
        return
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def upsert(c, path, obj):
    """Create, or replace keeping the server's resourceVersion."""
    code, cur = c.api("GET", path + "/" + obj["metadata"]["name"], ok=None)
    if code == 200:
        obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        c.api("PUT", path + "/" + obj["metadata"]["name"], obj)
    else:
        c.api("POST", path, obj)


def log_entries(by_container):
    """{container or None: {logsFile, previousLogsFile}} -> kwok's spec.logs (None: the default)."""
    entries = []
    for name, e in sorted(by_container.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        d = dict(e)
        if name is not None:
            d["containers"] = [name]
        entries.append(d)
    return entries


def _write_files(c, folder, logs, previous, stream, at, step):
    files = {}
    for kind, srcs in (("logsFile", logs or {}), ("previousLogsFile", previous or {})):
        for name, src in srcs.items():
            p = folder / ("%s%s.log" % (name or "_all", ".previous" if kind == "previousLogsFile" else ""))
            write_log(p, to_cri(read_source(src), stream, at, step))
            files.setdefault(name, {})[kind] = str(p)
    return files


def set_pod_logs(c, namespace, pod, logs, previous=None, stream="stdout", at=None, step=0.001, wait=True):
    """Makes `logs` ({container: text | Path | [lines]}; container None: every container without
    an entry of its own) the current logs of the pod's containers, `previous` those of their
    previous instance (kubectl logs --previous). Replaces what was set for these containers before,
    keeps the others. With wait, returns once the API server serves the first of them (when the
    pod is bound to a node). Returns {container: {logsFile, previousLogsFile}}."""
    c.require_running()
    files = _write_files(c, logs_root(c) / namespace / pod, logs, previous, stream, at, step)
    path = "%s/namespaces/%s/logs" % (KWOK_API, namespace)
    code, cur = c.api("GET", "%s/%s" % (path, pod), ok=None)
    by_container = {}
    for e in ((cur.get("spec") or {}).get("logs") if code == 200 else None) or []:
        for name in e.get("containers") or [None]:
            by_container[name] = {k: v for k, v in e.items() if k != "containers"}
    for name, f in files.items():
        by_container[name] = dict(by_container.get(name, {}), **f)
    obj = {"apiVersion": "%s/v1alpha1" % KWOK_GROUP, "kind": "Logs",
           "metadata": {"name": pod, "namespace": namespace, "labels": {"e2e.gpuctl.dev/logs": "true"}},
           "spec": {"logs": log_entries(by_container)}}
    upsert(c, path, obj)
    if wait:
        container = next(iter(logs or previous))
        wait_served(c, namespace, pod, container, previous=not logs)
    return files


def set_namespace_logs(c, namespace, logs, previous=None, stream="stdout", at=None, step=0.001, names=None):
    """The same for every pod of a namespace (or those named in `names`) that has no Logs of its
    own: a ClusterLogs owned by the Namespace, so it goes when the namespace does. For pods whose
    names are not known in advance (a Job's, a DaemonSet's)."""
    c.require_running()
    _, ns = c.api("GET", "/api/v1/namespaces/" + namespace)
    files = _write_files(c, logs_root(c) / namespace / "_namespace", logs, previous, stream, at, step)
    selector = {"matchNamespaces": [namespace]}
    if names:
        selector["matchNames"] = list(names)
    obj = {"apiVersion": "%s/v1alpha1" % KWOK_GROUP, "kind": "ClusterLogs",
           "metadata": {"name": "gpuctl-e2e-" + namespace, "labels": {"e2e.gpuctl.dev/logs": "true"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": namespace,
                                             "uid": ns["metadata"]["uid"]}]},
           "spec": {"selector": selector, "logs": log_entries(files)}}
    upsert(c, KWOK_API + "/clusterlogs", obj)
    return files


def append_pod_log(c, namespace, pod, container, text, stream="stdout", at=None, previous=False):
    """Appends lines to a container's log set by set_pod_logs (a follow in progress sees them)."""
    p = logs_root(c) / namespace / pod / ("%s%s.log" % (container or "_all", ".previous" if previous else ""))
    if not p.exists():
        raise LogsError("no log file %s: call set_pod_logs for %s/%s container %s first" % (p, namespace, pod, container))
    write_log(p, to_cri(read_source(text), stream, at), append=True)
    return p


def wait_served(c, namespace, pod, container, previous=False, timeout=20):
    """Until kwok (which watches Logs objects) serves the container's log through the apiserver."""
    code, obj = c.api("GET", "/api/v1/namespaces/%s/pods/%s" % (namespace, pod), ok=None)
    if code != 200 or not (obj.get("spec") or {}).get("nodeName"):
        return False
    q = "limitBytes=1" + ("&container=%s" % container if container else "") + ("&previous=true" if previous else "")
    path = "/api/v1/namespaces/%s/pods/%s/log?%s" % (namespace, pod, q)
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        code, body = c.api("GET", path, ok=None)
        if code == 200:
            return True
        last = body
        time.sleep(0.2)
    raise LogsError("the API server does not serve the logs of %s/%s container %s after %ds: %s"
                    % (namespace, pod, container, timeout, json.dumps(last)[:500]))


def end_log_streams(c, node):
    """Ends every log stream (and idle connection) the API server holds to the node's kubelet, as a
    kubelet ends a follow when the container stops. Returns how many connections were closed."""
    c.require_running()
    n = c.node(node)
    return int(relay_send(c.dir / "kubelet-relay.sock", "close " + n["ssh_address"]).split()[1])
