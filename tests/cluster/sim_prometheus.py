"""A real Prometheus (Debian's package, /usr/bin/prometheus) scraping dcgm-exporter expositions of
the fleet's nodes, for `gpuctl --via prometheus` (used by cluster.py: `cluster.py enable-prometheus`).

    gpuctl --via prometheus -> prometheus (127.0.0.1, plain HTTP)            -> exposition server
                            -> prometheus (127.0.0.1, HTTPS + basic auth)    -> (this file, `serve`)

The exposition server (a python http.server on 127.0.0.1) serves /metrics/<node> from
STATE/prometheus/expositions/<node>.prom: whatever a test set there (harness.serve_dcgm_metrics),
a captured dcgm-exporter output with Hostname relabelled to the node, or one rendered by
`render_exposition` from the same `nvidia-smi -q -x` the node's sshd host replays (so ssh, probe
pods and Prometheus read the same GPUs). A node without a file answers 404: its target is down, as
a node whose dcgm-exporter died, and Prometheus marks its series stale.

Each node is a target of its own (file_sd: STATE/prometheus/targets/<node>.json, one file per node,
so suites sharing the cluster never write the same file), labelled gpuctl_target=<node>, scraped
every second. Two Prometheus servers scrape the same targets: one on plain HTTP (cluster.json's
prometheus.url, GPUCTL_PROMETHEUS_URL in `cluster.py env`), one behind TLS (a certificate from the
cluster's CA) and basic auth (--web.config.file, bcrypt), for gpuctl's credential flags.

Only on request (`enable-prometheus`, idempotent, safe from parallel suites under the cluster's
lock): `up` stays as fast as before and suites that do not read Prometheus pay nothing.
"""
import http.server
import json
import os
import re
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

PROMETHEUS = os.environ.get("GPUCTL_PROMETHEUS_BIN", "/usr/bin/prometheus")
SCRAPE_INTERVAL = "1s"
TARGET_LABEL = "gpuctl_target"
BASIC_USER = "gpuctl"
# A test credential on loopback; the hash is bcrypt's ($2b$, cost 12) of the password, as
# --web.config.file wants it (made with Python's crypt.crypt(..., METHOD_BLOWFISH) once: neither the
# bcrypt module nor htpasswd is a dependency of the tests).
BASIC_PASSWORD = "gpuctl-e2e"
BASIC_HASH = "$2b$12$n5sN1Vm.bTkRHhbhif9tCu/6d8j6CahnMkcMC.S0PmV3wpHoDzjXy"
CERT_NAME = "prometheus"


class PrometheusError(Exception):
    """A failure with a message meant for the person running the tests."""


def base_dir(c):
    return c.dir / "prometheus"


def exposition_path(c, node):
    return base_dir(c) / "expositions" / (node + ".prom")


def target_path(c, node):
    return base_dir(c) / "targets" / (node + ".json")


def _write(path, text):
    tmp = path.with_name(path.name + ".tmp%d" % os.getpid())
    tmp.write_text(text)
    os.replace(tmp, path)


# -- the exposition server (`python3 sim_prometheus.py serve DIR PORT`) --------------------------------

class ExpositionHandler(http.server.BaseHTTPRequestHandler):
    directory = None

    def do_GET(self):  # noqa: N802 (http.server's name)
        m = re.fullmatch(r"/metrics/([a-z0-9][a-z0-9.-]*)", self.path)
        body = None
        if m:
            try:
                body = (Path(self.directory) / (m.group(1) + ".prom")).read_bytes()
            except OSError:
                body = None
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass  # one line per scrape per second would fill the log


def serve(directory, port):
    ExpositionHandler.directory = directory
    http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), ExpositionHandler).serve_forever()


# -- the servers --------------------------------------------------------------------------------------

def config_yaml(c):
    return ("global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n"
            "scrape_configs:\n  - job_name: dcgm-exporter\n    file_sd_configs:\n"
            "      - files: ['%s/*.json']\n        refresh_interval: 1s\n"
            % (SCRAPE_INTERVAL, SCRAPE_INTERVAL, SCRAPE_INTERVAL, base_dir(c) / "targets"))


def web_config_yaml(c):
    return ("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: '%s'\n"
            % (c.pki / (CERT_NAME + ".crt"), c.pki / (CERT_NAME + ".key"), BASIC_USER, BASIC_HASH))


def command(c, name, port, web_config=None):
    d = base_dir(c)
    cmd = [PROMETHEUS, "--config.file=%s" % (d / "prometheus.yml"), "--storage.tsdb.path=%s" % (d / ("data-" + name)),
           "--storage.tsdb.retention.time=2h", "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"]
    if web_config:
        cmd.append("--web.config.file=%s" % web_config)
    return cmd


def get(url, timeout=5, auth=None, cafile=None):
    """(status, body) of a GET; auth=(user, password)."""
    import ssl
    req = urllib.request.Request(url)
    if auth:
        import base64
        req.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % auth).encode()).decode())
    ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def enable(c, port_picker, timeout=60):
    """Starts the exposition server and both Prometheus servers (or keeps the running ones) and
    waits until they are ready. Returns the state's "prometheus" entry."""
    t = time.time()
    with c.locked():
        c.require_running()
        if not os.access(PROMETHEUS, os.X_OK):
            raise PrometheusError("%s is missing: install Debian's package prometheus (scripts/install-deps.sh)"
                                  % PROMETHEUS)
        st = c.state
        p = st.get("prometheus") or {}
        if all(c.ours(p.get(k)) for k in ("exposition_pid", "pid", "secure_pid")):
            return dict(p, seconds=time.time() - t)
        for k in ("exposition_pid", "pid", "secure_pid"):  # a half-started set: start again
            if c.ours(p.get(k)):
                os.kill(p[k], signal.SIGTERM)
        d = base_dir(c)
        for sub in ("expositions", "targets"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        if not (c.pki / (CERT_NAME + ".crt")).exists():
            c.sign_cert(CERT_NAME, "/CN=prometheus.monitoring.svc", "rsa-pkcs8",
                        "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\n"
                        "extendedKeyUsage = serverAuth\nsubjectAltName = DNS:localhost,IP:127.0.0.1\n")
        (d / "prometheus.yml").write_text(config_yaml(c))
        web_config = d / "web-config.yml"
        web_config.write_text(web_config_yaml(c))
        password_file = d / "password"
        password_file.write_text(BASIC_PASSWORD + "\n")
        os.chmod(password_file, 0o600)
        ports = [port_picker() for _ in range(3)]
        p = {"exposition_port": ports[0], "port": ports[1], "secure_port": ports[2]}
        p["exposition_pid"] = c.spawn("dcgm-exposition", [sys.executable, str(Path(__file__).resolve()), "serve",
                                                          str(d / "expositions"), str(ports[0])])
        p["pid"] = c.spawn("prometheus", command(c, "plain", ports[1]))
        p["secure_pid"] = c.spawn("prometheus-secure", command(c, "secure", ports[2], web_config))
        p.update(url="http://127.0.0.1:%d" % ports[1], secure_url="https://127.0.0.1:%d" % ports[2],
                 username=BASIC_USER, password_file=str(password_file), ca_file=str(c.pki / "ca.crt"),
                 dir=str(d), scrape_interval=SCRAPE_INTERVAL, target_label=TARGET_LABEL)
        st["prometheus"] = p
        c.save()

        def ready():
            for k, log in (("exposition_pid", "dcgm-exposition.log"), ("pid", "prometheus.log"),
                           ("secure_pid", "prometheus-secure.log")):
                if not c.ours(p[k]):
                    raise PrometheusError("%s exited:\n%s" % (log, c.tail(log)))
            plain = get(p["url"] + "/-/ready")[0] == 200
            secure = get(p["secure_url"] + "/-/ready", auth=(BASIC_USER, BASIC_PASSWORD), cafile=p["ca_file"])[0]
            return plain and secure == 200
        c.wait("Prometheus ready", ready, timeout, interval=0.3, logs=["prometheus.log", "prometheus-secure.log"])
    return dict(p, seconds=time.time() - t)


def describe(st):
    """cluster.json's "prometheus"."""
    p = (st or {}).get("prometheus")
    if not p:
        return {"enabled": False}
    keep = ("url", "secure_url", "username", "password_file", "ca_file", "dir", "scrape_interval", "target_label",
            "exposition_port")
    return dict({"enabled": True}, **{k: p.get(k) for k in keep})


# -- what a test serves -------------------------------------------------------------------------------

# nvidia-smi failures that leave no DCGM exporter running on a node (NVML cannot start).
NO_EXPORTER_MODES = ("hang", "driver-not-loaded", "driver-mismatch", "permissions", "no-devices", "garbage")


def serve_rendered_fleet(c):
    """Every node with an sshd host served the exposition rendered from its own capture (what
    `cluster.py enable-prometheus --render-fleet` and the sandbox do), except nodes whose driver
    fault would keep the exporter from running; returns the nodes served."""
    served = []
    for node, n in sorted((c.load() or {}).get("nodes", {}).items()):
        host_file = c.ssh_dir / "hosts" / ("%s.json" % n.get("internal_ip"))
        if not n.get("internal_ip") or not host_file.is_file():
            continue
        host = json.loads(host_file.read_text())
        # No XML capture (a CSV- or text-only host): nothing to render from.
        if host.get("mode", "ok") in NO_EXPORTER_MODES or not host.get("fixture"):
            continue
        set_exposition(c, node, render_exposition(c, node))
        served.append(node)
    return served


def set_exposition(c, node, text, target_labels=None):
    """Node's exposition served from now on; its target added (labels: gpuctl_target=<node> plus
    `target_labels`, as a relabelling would add them)."""
    d = base_dir(c)
    if not (d / "expositions").is_dir():
        raise PrometheusError("Prometheus is not enabled on this cluster: `cluster.py enable-prometheus` first")
    _write(exposition_path(c, node), text)
    p = (c.load() or {}).get("prometheus") or {}
    labels = dict(target_labels or {}, **{TARGET_LABEL: node, "__metrics_path__": "/metrics/" + node})
    group = [{"targets": ["127.0.0.1:%d" % p["exposition_port"]], "labels": labels}]
    text = json.dumps(group, sort_keys=True)
    path = target_path(c, node)
    if not path.exists() or path.read_text() != text:
        _write(path, text)


def remove_exposition(c, node):
    """The node's exporter gone: /metrics/<node> answers 404 (its target stays, down)."""
    try:
        exposition_path(c, node).unlink()
    except FileNotFoundError:
        pass


def query(c, promql, at=None):
    """The plain server's answer to an instant query (the `data.result` list)."""
    p = c.load()["prometheus"]
    params = {"query": promql}
    if at is not None:
        params["time"] = str(at)
    code, body = get(p["url"] + "/api/v1/query?" + urllib.parse.urlencode(params))
    doc = json.loads(body)
    if code != 200 or doc.get("status") != "success":
        raise PrometheusError("query %r: HTTP %d %s" % (promql, code, body[:300]))
    return doc["data"]["result"]


# -- an exposition from the node's nvidia-smi XML, in dcgm-exporter's format ----------------------------

# (metric, TYPE, HELP as etc/default-counters.csv writes it, XML path or function, format)
def _num(text):
    m = re.match(r"\s*(-?[0-9.]+)", text or "")
    return float(m.group(1)) if m else None


def render_exposition(c, node):
    """The exposition dcgm-exporter would serve on `node`: its GPUs as the node's fake nvidia-smi
    reports them (the same capture, GPU count, UUIDs and per-GPU overrides), in the format of the
    captured exporter (tests/fixtures/dcgm-exporter: labels gpu, UUID, pci_bus_id, device,
    modelName, Hostname, DCGM_FI_DRIVER_VERSION; the HELP texts of default-counters.csv), the default
    counters that nvidia-smi's XML has plus DCGM_FI_DEV_FB_TOTAL; a lost GPU is left out."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import fake_nvidia_smi
    import sim_gpu
    n = c.load()["nodes"][node]
    host = json.loads((c.ssh_dir / "hosts" / (n["internal_ip"] + ".json")).read_text())
    cap, blocks = fake_nvidia_smi.host_gpus(host)
    driver = fake_nvidia_smi.tag(cap.head, "driver_version")
    # A GPU the host reports lost (fallen off the bus) is one DCGM no longer reads: not exported.
    lost = host.get("gpu_index", 0) or 0 if host.get("mode") in ("gpu-lost", "gpu-unknown-error") else None
    rows = []
    for i, block in enumerate(blocks):
        if i == lost:
            continue
        v = lambda *path: sim_gpu.value(block, path)  # noqa: E731
        labels = ('gpu="%d",UUID="%s",pci_bus_id="%s",device="nvidia%d",modelName="%s",Hostname="%s",'
                  'DCGM_FI_DRIVER_VERSION="%s"' % (i, v("uuid"), fake_nvidia_smi.gpu_id(block), i, v("product_name"),
                                                   node, driver))
        used, free, reserved, total = (_num(v("fb_memory_usage", k)) for k in ("used", "free", "reserved", "total"))
        rows.append((labels, {
            "DCGM_FI_DEV_SM_CLOCK": _num(v("clocks", "sm_clock")),
            "DCGM_FI_DEV_MEM_CLOCK": _num(v("clocks", "mem_clock")),
            "DCGM_FI_DEV_GPU_TEMP": _num(v("temperature", "gpu_temp")),
            # R570+ XML splits power_draw into average_power_draw and instant_power_draw; the
            # average is what nvidia-smi's power.draw and DCGM's POWER_USAGE report.
            "DCGM_FI_DEV_POWER_USAGE": _num(v("gpu_power_readings", "power_draw")
                                            or v("gpu_power_readings", "average_power_draw")
                                            or v("power_readings", "power_draw")),
            "DCGM_FI_DEV_GPU_UTIL": _num(v("utilization", "gpu_util")),
            "DCGM_FI_DEV_MEM_COPY_UTIL": _num(v("utilization", "memory_util")),
            "DCGM_FI_DEV_XID_ERRORS": 0,
            "DCGM_FI_DEV_FB_FREE": free,
            "DCGM_FI_DEV_FB_USED": used,
            "DCGM_FI_DEV_FB_RESERVED": reserved,
            "DCGM_FI_DEV_FB_TOTAL": total,
        }))
    out = []
    for metric, typ, help_text in RENDERED:
        out.append("# HELP %s %s\n# TYPE %s %s\n" % (metric, help_text, metric, typ))
        for labels, values in rows:
            val = values.get(metric)
            if val is None:
                continue  # N/A in the XML: dcgm-exporter skips a field it cannot read
            text = "%f" % val if metric == "DCGM_FI_DEV_POWER_USAGE" else "%d" % val
            out.append("%s{%s} %s\n" % (metric, labels, text))
    return "".join(out)


RENDERED = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    # Not a default counter (the DataDog capture's exporter adds it): nvidia-smi rounds each of
    # used, free, reserved and total on its own, so their sum may miss its total by 1 MiB.
    ("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB)."),
]


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: sim_prometheus.py serve DIR PORT")
