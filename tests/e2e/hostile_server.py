"""A small hostile HTTP server for the answers a real API server never gives.

The hostile-input suites (tests/e2e/test_hostile_*.py) run the real gpuctl against it when the
point of a test is a broken, compromised or strange server: an empty or `null` body in a 200,
a gzip bomb, a list whose continue token never changes, wrongly typed fields, terminal escapes,
Retry-After forever. Everything a real API server can say is tested against the real control
plane instead (tests/cluster).

It listens on 127.0.0.1 only (an ephemeral port), answers from a route table, and records every
request (method, path with query, headers, body) so a test can assert what gpuctl sent, or that
it sent nothing at all.

    import hostile_server as hs
    with hs.HostileServer() as srv:
        srv.route("GET", "/api/v1/nodes", hs.json_body(None))          # 200 with `null`
        srv.route("GET", "/api/v1/pods", hs.raw(b"...", gzip=True))    # compressed by us
        kc = srv.kubeconfig(tmpdir)                                     # a kubeconfig for it
        rc, out, err = h.gpuctl("nodes", kubeconfig=kc)
        srv.requests  # [Request(method, path, headers, body), ...]

A route is (method, path) where path is matched exactly against the request path without its
query, or, when it ends in '*', as a prefix. The answer is a function (request) -> Response, so a
route can count calls, change its answer over time or sleep. Unmatched requests get a 404 Status,
as the API server would answer for an unknown path.
"""
import gzip as _gzip
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit


@dataclass
class Request:
    method: str
    path: str        # with the query string, exactly as sent
    headers: dict    # header name (lower case) -> list of values, in order
    body: bytes

    @property
    def bare_path(self):
        return urlsplit(self.path).path

    @property
    def query(self):
        return urlsplit(self.path).query


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: list = field(default_factory=list)  # [(name, value), ...]
    delay_s: float = 0.0                          # sleep before answering
    chunks: object = None                         # iterable of bytes: streamed instead of body


def raw(body, status=200, content_type="application/json", gzip=False, headers=(), delay_s=0.0):
    """A fixed answer. gzip=True compresses the body and says so in Content-Encoding."""
    if isinstance(body, str):
        body = body.encode()
    hdrs = [("Content-Type", content_type), *headers]
    if gzip:
        body = _gzip.compress(body, compresslevel=9)
        hdrs.append(("Content-Encoding", "gzip"))
    resp = Response(status=status, body=body, headers=hdrs, delay_s=delay_s)
    return lambda _req: resp


def json_body(obj, status=200, **kw):
    """A fixed JSON answer (obj may be None, which sends `null`)."""
    return raw(json.dumps(obj), status=status, **kw)


def status_body(code, reason, message, headers=(), details=None):
    """A Kubernetes Status object as the API server sends it for errors."""
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if details is not None:
        st["details"] = details
    return json_body(st, status=code, headers=headers)


def node_list(items, rv="1", cont=None):
    meta = {"resourceVersion": rv}
    if cont is not None:
        meta["continue"] = cont
    return {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": items}


def gpu_node(name, gpus=8, product="NVIDIA-H100-80GB-HBM3", **overrides):
    """A plausible Ready GPU node; overrides replace top-level keys (e.g. status=None)."""
    n = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
                                "nvidia.com/gpu.count": str(gpus)}},
        "spec": {},
        "status": {"capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                   "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}]},
    }
    n.update(overrides)
    return n


def empty_list(kind):
    return {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}


class HostileServer:
    def __init__(self):
        self._routes = []
        self._lock = threading.Lock()
        self.requests = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args):  # quiet: the tests print what matters
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                hdrs = {}
                for k, v in self.headers.items():
                    hdrs.setdefault(k.lower(), []).append(v)
                req = Request(self.command, self.path, hdrs, body)
                with srv._lock:
                    srv.requests.append(req)
                resp = srv._answer(req)
                if resp.delay_s:
                    time.sleep(resp.delay_s)
                try:
                    self.send_response(resp.status)
                    names = {k.lower() for k, _ in resp.headers}
                    for k, v in resp.headers:
                        self.send_header(k, v)
                    if resp.chunks is not None:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for c in resp.chunks:
                            if not c:
                                continue
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        if "content-length" not in names:
                            self.send_header("Content-Length", str(len(resp.body)))
                        self.end_headers()
                        self.wfile.write(resp.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # gpuctl gave up on a long answer: that is often the point

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def route(self, method, path, answer):
        """Adds (or, for the same method and path, replaces) a route; answer(req) -> Response."""
        with self._lock:
            self._routes = [r for r in self._routes if (r[0], r[1]) != (method, path)]
            self._routes.append((method, path, answer))

    def _answer(self, req):
        bare = req.bare_path
        with self._lock:
            routes = list(self._routes)
        for method, path, answer in routes:
            if method != req.method and method != "*":
                continue
            if path == bare or (path.endswith("*") and bare.startswith(path[:-1])):
                return answer(req)
        return status_body(404, "NotFound", "the server could not find the requested resource")(req)

    def requests_to(self, path_prefix, method=None):
        with self._lock:
            return [r for r in self.requests
                    if r.bare_path.startswith(path_prefix) and (method is None or r.method == method)]

    def kubeconfig(self, directory, name="hostile.kubeconfig", namespace=None, user=None, server=None):
        """Writes a kubeconfig for this server (plain http, a bearer token unless `user` is given)
        and returns its path. `user` is the kubeconfig's user entry as a dict."""
        ctx = {"cluster": "hostile", "user": "hostile"}
        if namespace is not None:
            ctx["namespace"] = namespace
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "hostile",
            "clusters": [{"name": "hostile", "cluster": {"server": server or self.url}}],
            "users": [{"name": "hostile", "user": user if user is not None else {"token": "hostile-token"}}],
            "contexts": [{"name": "hostile", "context": ctx}],
        }
        p = Path(directory) / name
        p.write_text(json.dumps(cfg, indent=1))
        return str(p)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_exc):
        self._httpd.shutdown()
        self._httpd.server_close()
