"""metrics.k8s.io on the local cluster, served by the real metrics-server through the real
aggregation layer (used by cluster.py: `cluster.py enable-metrics` / `disable-metrics`, `up --metrics`).

    kubectl top nodes -> kube-apiserver (aggregator: APIService v1beta1.metrics.k8s.io, front-proxy
    client certificate) -> metrics-server (a host process on 127.0.0.1, built by build.sh)
    metrics-server -> https://<node InternalIP>:<kubeletEndpoint.Port><resource-metrics-path>
    -> kubelet_relay.py -> kwok, which serves kubelet's /metrics/resource for every node
       (its Metric "metrics-resource", usage from its ClusterResourceUsage "usage-from-annotation")

What is always there (kubeadm sets the same for every cluster), so that metrics can be switched on
and off on a running cluster without restarting anything:
  - kube-apiserver's aggregation flags: --requestheader-* with a front-proxy CA of its own (as
    kubeadm's front-proxy-ca: a client certificate from the cluster CA must not be able to assert
    X-Remote-User), --proxy-client-cert-file/--proxy-client-key-file (CN front-proxy-client);
  - kwok's Metric and ClusterResourceUsage from kwok's own kustomize/metrics (module cache), and
    on every node the annotation metrics.k8s.io/resource-metrics-path (kwokctl's node template):
    kwok has one server for all nodes, so the path names the node.

What `enable-metrics` adds, as metrics-server's own manifests (manifests/base in its module: the
ServiceAccount, RBAC, Service and APIService) set them, with these differences:
  - metrics-server runs as a host process with a kubeconfig holding a token of its ServiceAccount
    (TokenRequest API): the same identity and RBAC as in a pod;
  - the Service is of type ExternalName (localhost) instead of a ClusterIP Service with endpoints.
    There is no kube-proxy, and --enable-aggregator-routing (dial the Service's endpoint) does not
    help: the API refuses endpoints on loopback ("may not be in the loopback range (127.0.0.0/8,
    ::1/128)", ValidateEndpointIP, for Endpoints and EndpointSlices alike) and metrics-server must
    not listen on an external interface. The aggregator resolves an ExternalName Service to
    <externalName>:<APIService port> (k8s.io/apiserver/pkg/util/proxy.ResolveCluster);
  - the APIService verifies metrics-server's serving certificate (caBundle: the cluster CA; the
    certificate names metrics-server.kube-system.svc, the name the aggregator checks) instead of
    insecureSkipTLSVerify: true;
  - metrics-server verifies kwok's serving certificate against the cluster CA
    (--kubelet-certificate-authority), never --kubelet-insecure-tls;
  - --metric-resolution=10s (the minimum; upstream 15s) so tests wait less, with
    --kubelet-request-timeout=5s (it must stay below the resolution; default 10s).

Only on request, because a registered APIService whose server is down breaks discovery for every
client (kubectl prints "couldn't get resource list for metrics.k8s.io/v1beta1", namespace deletion
stalls on NamespaceDeletionDiscoveryFailure), and because the suites that share the cluster expect
diagnose's monitoring-missing to fire (there is no metrics API on a cluster without metrics-server).
"""
import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

VERSION = os.environ.get("METRICS_SERVER_VERSION", "v0.9.0")   # as build.sh
NAME = "metrics-server"
NAMESPACE = "kube-system"
APISERVICE = "v1beta1.metrics.k8s.io"
GROUP = "metrics.k8s.io"
SERVICE_DNS = "%s.%s.svc" % (NAME, NAMESPACE)      # the TLS server name the aggregator checks
EXTERNAL_NAME = "localhost"
RESOLUTION = "10s"
PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
USAGE_CPU_ANNOTATION = "kwok.x-k8s.io/usage-cpu"         # kwok's usage-from-annotation reads these
USAGE_MEMORY_ANNOTATION = "kwok.x-k8s.io/usage-memory"
TOKEN_SECONDS = 30 * 24 * 3600
FRONT_PROXY_CLIENT = "front-proxy-client"


class MetricsError(Exception):
    """A failure with a message meant for the person running the tests."""


def node_metrics_path(node):
    """Where kwok serves a node's /metrics/resource (the Metric's path with {nodeName})."""
    return "/metrics/nodes/%s/metrics/resource" % node


def binary(bin_dir):
    return Path(bin_dir) / ("metrics-server-" + VERSION)


def metrics_server_module_dir(modcache_dirs):
    for c in modcache_dirs:
        d = Path(c) / "sigs.k8s.io" / ("metrics-server@" + VERSION)
        if (d / "manifests" / "base").is_dir():
            return d
    raise MetricsError("metrics-server %s's manifests are not in the Go module cache (looked in %s); "
                       "run tests/cluster/build.sh, which downloads the module"
                       % (VERSION, ", ".join(map(str, modcache_dirs))))


# -- always: front proxy, kwok's metrics ------------------------------------------------------------

def _openssl(*args):
    p = subprocess.run(["openssl", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise MetricsError("openssl %s failed: %s" % (args[0], p.stderr.strip()))


def make_front_proxy_pki(c):
    """front-proxy-ca and its client certificate, as kubeadm makes them (a CA of their own: the
    apiserver trusts X-Remote-* headers only from front-proxy-client signed by it)."""
    P = c.pki
    (P / "front-proxy-ca.cnf").write_text(
        "[req]\ndistinguished_name = dn\nx509_extensions = v3_ca\nprompt = no\n[dn]\nCN = front-proxy-ca\n"
        "[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign,digitalSignature\n"
        "subjectKeyIdentifier = hash\n")
    c.genkey(P / "front-proxy-ca.key", "rsa-pkcs8")
    _openssl("req", "-x509", "-new", "-key", P / "front-proxy-ca.key", "-config", P / "front-proxy-ca.cnf",
             "-days", "3650", "-sha256", "-out", P / "front-proxy-ca.crt")
    c.genkey(P / "front-proxy-client.key", "rsa-pkcs8")
    (P / "front-proxy-client.ext").write_text(
        "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = clientAuth\n")
    _openssl("req", "-new", "-key", P / "front-proxy-client.key", "-subj", "/CN=" + FRONT_PROXY_CLIENT,
             "-config", P / "req.cnf", "-out", P / "front-proxy-client.csr")
    _openssl("x509", "-req", "-in", P / "front-proxy-client.csr", "-CA", P / "front-proxy-ca.crt",
             "-CAkey", P / "front-proxy-ca.key", "-CAcreateserial", "-days", "3650", "-sha256",
             "-extfile", P / "front-proxy-client.ext", "-out", P / "front-proxy-client.crt")


def apiserver_flags(P):
    """The aggregation layer's flags, as kubeadm sets them. No --enable-aggregator-routing: see the
    module's docstring (the Service is an ExternalName)."""
    return [
        "--requestheader-client-ca-file=%s" % (P / "front-proxy-ca.crt"),
        "--requestheader-allowed-names=" + FRONT_PROXY_CLIENT,
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--proxy-client-cert-file=%s" % (P / "front-proxy-client.crt"),
        "--proxy-client-key-file=%s" % (P / "front-proxy-client.key"),
    ]


def has_aggregation_flags(argv):
    return any(a.startswith("--proxy-client-cert-file=") for a in argv)


def kwok_config(kwok_dir):
    """kwok's own Metric (kubelet's /metrics/resource) and ClusterResourceUsage (usage from the pod
    annotations kwok.x-k8s.io/usage-cpu and -memory, default 1m and 1Mi per container), read from
    the module cache as the stages are."""
    import yaml
    root = Path(kwok_dir) / "kustomize" / "metrics"
    docs = []
    for f in (root / "resource" / "metrics-resource.yaml", root / "usage" / "usage-from-annotation.yaml"):
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


# -- on request: metrics-server ---------------------------------------------------------------------

def manifests(module_dir, port, ca_pem):
    """metrics-server's manifests/base objects, changed as the module's docstring says."""
    import yaml
    base = Path(module_dir) / "manifests" / "base"
    objs = []
    for f in ("rbac.yaml", "service.yaml", "apiservice.yaml"):
        objs += [d for d in yaml.safe_load_all((base / f).read_text()) if d]
    for o in objs:
        o.setdefault("metadata", {}).setdefault("labels", {})["k8s-app"] = NAME   # as components.yaml
        if o["kind"] == "Service":
            o["spec"] = {"type": "ExternalName", "externalName": EXTERNAL_NAME,
                         "ports": [{"name": "https", "port": port, "protocol": "TCP", "targetPort": port}]}
        elif o["kind"] == "APIService":
            spec = o["spec"]
            spec.pop("insecureSkipTLSVerify", None)
            spec["service"]["port"] = port
            spec["caBundle"] = base64.b64encode(ca_pem).decode()
    return objs


PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Service": "/api/v1/namespaces/{ns}/services",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "APIService": "/apis/apiregistration.k8s.io/v1/apiservices",
}


def collection(obj):
    return PATHS[obj["kind"]].format(ns=obj["metadata"].get("namespace", ""))


def apply(c, obj):
    """Create, or replace what an earlier enable left (its port may differ)."""
    path = collection(obj)
    code, body = c.api("POST", path, obj, ok=None)
    if code == 409:
        item = path + "/" + obj["metadata"]["name"]
        _, cur = c.api("GET", item)
        obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=cur["metadata"]["resourceVersion"]))
        code, body = c.api("PUT", item, obj, ok=None)
    if code not in (200, 201):
        raise MetricsError("%s %s: HTTP %d: %s" % (obj["kind"], obj["metadata"]["name"], code, body))


def apiservice_status(c):
    """(available: bool, why) of APIService v1beta1.metrics.k8s.io; (None, ...) when absent."""
    code, obj = c.api("GET", "/apis/apiregistration.k8s.io/v1/apiservices/" + APISERVICE, ok=None, timeout=10)
    if code == 404:
        return None, "not registered"
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Available":
            return cond.get("status") == "True", "%s: %s" % (cond.get("reason"), cond.get("message"))
    return False, "no Available condition yet"


def write_kubeconfig(c, path, token):
    import yaml
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": NAME,
        "clusters": [{"name": "gpuctl-e2e", "cluster": {
            "server": "https://127.0.0.1:%d" % c.state["ports"]["apiserver"],
            "certificate-authority": str(c.pki / "ca.crt")}}],
        "users": [{"name": NAME, "user": {"token": token}}],
        "contexts": [{"name": NAME, "context": {"cluster": "gpuctl-e2e", "user": NAME}}],
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    os.chmod(path, 0o600)


def command(c, port, kubeconfig):
    """metrics-server's flags: components.yaml's (--kubelet-use-node-status-port, --secure-port,
    the address types without ExternalIP/Hostname, which kwok nodes lack), plus what a host process
    needs (a kubeconfig for the API, authentication and authorization; a serving certificate)."""
    P = c.pki
    kc = str(kubeconfig)
    return [str(binary(c.state["bin_dir"])),
            "--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
            "--bind-address=127.0.0.1", "--secure-port=%d" % port,
            "--tls-cert-file=%s" % (P / "metrics-server.crt"), "--tls-private-key-file=%s" % (P / "metrics-server.key"),
            "--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port",
            "--kubelet-certificate-authority=%s" % (P / "ca.crt"),
            # it must stay above --kubelet-request-timeout (default 10s), or metrics-server exits
            "--metric-resolution=" + RESOLUTION, "--kubelet-request-timeout=5s"]


def enable(c, port_picker, modcache_dirs, timeout=120):
    """Starts metrics-server (or keeps the one running), applies its objects and waits until the
    APIService is Available. Returns the state's "metrics" entry."""
    t = time.time()
    with c.locked():
        c.require_running()
        st = c.state
        port = None
        if not has_aggregation_flags(c.component_argv("kube-apiserver")):
            raise MetricsError("this cluster's kube-apiserver runs without the aggregation flags (it was started "
                               "by an older cluster.py): `down`, then `up` again")
        exe = binary(st["bin_dir"])
        if not os.access(exe, os.X_OK):
            raise MetricsError("%s is missing: run tests/cluster/build.sh (it builds metrics-server %s)" % (exe, VERSION))
        module = metrics_server_module_dir(modcache_dirs)
        m = st.get("metrics") or {}
        if not c.ours(m.get("pid")):
            P = c.pki
            if not (P / "metrics-server.crt").exists():
                c.sign_cert("metrics-server", "/CN=" + SERVICE_DNS, "rsa-pkcs8",
                            "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\n"
                            "extendedKeyUsage = serverAuth\n"
                            "subjectAltName = DNS:%s,DNS:%s.%s,DNS:%s,DNS:localhost,IP:127.0.0.1\n"
                            % (SERVICE_DNS, NAME, NAMESPACE, NAME))
                os.chmod(P / "metrics-server.key", 0o600)
            port = m.get("port") or port_picker()
            objs = manifests(module, port, (P / "ca.crt").read_bytes())
            for o in objs:
                if o["kind"] != "APIService":
                    apply(c, o)
            code, tok = c.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (NAMESPACE, NAME),
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"expirationSeconds": TOKEN_SECONDS}})
            kubeconfig = P / "metrics-server.kubeconfig"
            write_kubeconfig(c, kubeconfig, tok["status"]["token"])
            pid = c.spawn(NAME, command(c, port, kubeconfig))
            st["metrics"] = {"pid": pid, "port": port, "version": VERSION, "kubeconfig": str(kubeconfig)}
            c.save()
            def livez():
                if not c.ours(pid):
                    raise MetricsError("metrics-server exited:\n%s" % c.tail(NAME + ".log"))
                return https_status(P / "ca.crt", port, "/livez") == 200
            c.wait("metrics-server /livez", livez, 60, interval=0.3, logs=[NAME + ".log"])
        else:
            port = m["port"]
            objs = manifests(module, port, (c.pki / "ca.crt").read_bytes())
        for o in objs:
            if o["kind"] == "APIService":
                apply(c, o)

        def available():
            if not c.ours(c.state["metrics"]["pid"]):
                raise MetricsError("metrics-server exited:\n%s" % c.tail(NAME + ".log"))
            ok, why = apiservice_status(c)
            available.why = why
            return ok
        available.why = ""
        c.wait("APIService %s Available" % APISERVICE, available, timeout, logs=[NAME + ".log", "kube-apiserver.log"])
        # The group is in discovery once the aggregator has it (what kubectl and gpuctl read).
        c.wait("%s in GET /apis" % GROUP,
               lambda: any(g.get("name") == GROUP for g in c.api("GET", "/apis")[1].get("groups", [])), 30)
    return dict(st["metrics"], seconds=time.time() - t)


def https_status(cafile, port, path):
    """GET https://127.0.0.1:PORT/PATH, checking the certificate against the name the aggregator
    checks (metrics-server.kube-system.svc); returns the HTTP status."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
        with ctx.wrap_socket(raw, server_hostname=SERVICE_DNS) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, SERVICE_DNS)).encode())
            head = s.recv(64).decode("latin-1")
    return int(head.split()[1])


def disable(c, timeout=60):
    """The APIService first (so discovery never lists a group nobody serves), then metrics-server
    and its Service. RBAC and the ServiceAccount stay (harmless; the next enable reuses them)."""
    t = time.time()
    with c.locked():
        c.require_running()
        c.api("DELETE", "/apis/apiregistration.k8s.io/v1/apiservices/" + APISERVICE, ok=(200, 202, 404))
        c.wait("%s gone from GET /apis" % GROUP,
               lambda: not any(g.get("name") == GROUP for g in c.api("GET", "/apis")[1].get("groups", [])), timeout)
        m = c.state.get("metrics") or {}
        pid = m.get("pid")
        if c.ours(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.time() + 15
            while c.ours(pid) and time.time() < deadline:
                time.sleep(0.05)
            if c.ours(pid):
                os.kill(pid, signal.SIGKILL)
        c.api("DELETE", "/api/v1/namespaces/%s/services/%s" % (NAMESPACE, NAME), ok=(200, 202, 404))
        c.state.pop("metrics", None)
        c.save()
    return time.time() - t


def describe(st):
    """cluster.json's "metrics"."""
    m = (st or {}).get("metrics")
    return {"enabled": bool(m), "apiservice": APISERVICE, "version": VERSION,
            "port": (m or {}).get("port"), "pid": (m or {}).get("pid"),
            "path_annotation": PATH_ANNOTATION,
            "usage_annotations": {"cpu": USAGE_CPU_ANNOTATION, "memory": USAGE_MEMORY_ANNOTATION}}
