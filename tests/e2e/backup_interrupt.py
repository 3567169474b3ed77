"""Ways to catch gpuctl at a known point, for the Ctrl-C stages of the backup/restore suite
(test_backup_restore.py), without racing it:

- HeldWrites: a validating admission webhook served from the test process that holds the
  writes it matches until release(); a restore waiting on one is, for certain, in the middle of
  applying (the kinds before it applied, the ones after it not started).
- BlockedStderr: gpuctl started with its stderr a pipe the test filled beforehand, so gpuctl's
  first line there (a -v request log) blocks it until the test drains the pipe; a backup blocked
  so is, for certain, still collecting: it has not written its file.

Both signal gpuctl as a terminal's Ctrl-C does: its own session, the signal to its process group."""
import base64
import fcntl
import json
import os
import signal
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness as h

HOLD_AT_MOST_S = 25   # below the webhook's timeoutSeconds (30), so the server never times it out


class HeldWrites:
    """ValidatingWebhookConfiguration `name` on CREATE/UPDATE of `resource` (core/v1) in
    `namespaces`, served here over TLS with the API server's own serving certificate (it names
    127.0.0.1; the cluster CA is the caBundle). Server-side dry runs are answered at once (they
    show the webhook is called); other requests wait for release(). Use as a context manager."""

    def __init__(self, name, resource, namespaces):
        self.name, self.resource, self.namespaces = name, resource, list(namespaces)
        self.seen = []                 # (operation, namespace, name, dryRun), in arrival order
        self.held = threading.Event()  # set when the first real write arrives
        self.released = threading.Event()
        self.server = None

    def __enter__(self):
        pki = h.state_dir() / "pki"
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        try:
            h.create(self._configuration((pki / "ca.crt").read_bytes()))
            self._wait_called()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        h.kubectl("delete", "validatingwebhookconfiguration", self.name, "--ignore-not-found", check=False)
        self.release()
        self.server.shutdown()
        self.server.server_close()

    def release(self):
        self.released.set()

    def writes(self):
        return [(op, ns, name) for op, ns, name, dry in self.seen if not dry]

    def _configuration(self, ca):
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": self.name},
                "webhooks": [{
                    "name": "hold.backup.gpuctl.dev",
                    "clientConfig": {"url": "https://127.0.0.1:%d/hold" % self.server.server_address[1],
                                     "caBundle": base64.b64encode(ca).decode()},
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                               "resources": [self.resource], "scope": "Namespaced"}],
                    "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                "operator": "In", "values": self.namespaces}]},
                    "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 30,
                    "failurePolicy": "Fail"}]}

    def _wait_called(self):
        """Until the API server calls the webhook (its configuration is read asynchronously)."""
        ns = self.namespaces[0]

        def called():
            h.kubectl("create", "quota", "webhook-probe", "-n", ns, "--hard=pods=1", "--dry-run=server", check=False)
            return any(dry for _, _, _, dry in self.seen)
        h.wait_for(called, 60, "the API server to call webhook %s" % self.name)

    def _handler(self):
        hold = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                req = review["request"]
                hold.seen.append((req["operation"], req.get("namespace", ""), req.get("name", ""),
                                  bool(req.get("dryRun"))))
                if not req.get("dryRun"):
                    hold.held.set()
                    hold.released.wait(HOLD_AT_MOST_S)
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": req["uid"], "allowed": True}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        return Handler


def _fill(fd):
    """Writes into the pipe until it is full; returns how many bytes."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    n = 0
    for chunk in (b"#" * 4096, b"#"):
        try:
            while True:
                n += os.write(fd, chunk)
        except BlockingIOError:
            pass
    fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    return n


# The number of write(2) on this machine, as /proc/PID/task/TID/syscall shows it.
_WRITE_SYSCALL = {"x86_64": 1, "aarch64": 64}.get(os.uname().machine)


class BlockedStderr:
    """gpuctl (args) in its own session, its stderr a full pipe: its first write there blocks it."""

    def __init__(self, *args):
        if _WRITE_SYSCALL is None:
            raise h.HarnessError("no write(2) number known for %s" % os.uname().machine)
        r, w = os.pipe()
        self.filler = _fill(w)
        env = dict(os.environ, KUBECONFIG=h.info()["kubeconfig"])
        self.proc = subprocess.Popen([h.gpuctl_bin(), *map(str, args)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=w, env=env, start_new_session=True)
        os.close(w)
        self.read_end = r

    def blocked_on_stderr(self):
        """True once a thread of gpuctl sits in write(2, ...) (the pipe is full, so it stays there)."""
        task_dir = "/proc/%d/task" % self.proc.pid
        for tid in os.listdir(task_dir):
            try:
                with open("%s/%s/syscall" % (task_dir, tid)) as f:
                    call = f.read().split()
            except OSError:
                continue
            if len(call) > 1 and call[0] == str(_WRITE_SYSCALL) and int(call[1], 16) == 2:
                return True
        if self.proc.poll() is not None:
            raise h.HarnessError("gpuctl exited (%s) before writing to stderr" % self.proc.returncode)
        return False

    def interrupt(self, timeout=60):
        """Ctrl-C to the process group once gpuctl is blocked, then the pipe drained; returns
        (rc, stdout, stderr without the filler)."""
        h.wait_for(self.blocked_on_stderr, 60, "gpuctl to block writing its stderr", interval=0.05)
        os.killpg(self.proc.pid, signal.SIGINT)
        chunks = []
        drain = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(self.read_end, 65536), b"")))
        drain.start()
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise h.HarnessError("gpuctl still running %ss after SIGINT" % timeout)
        finally:
            drain.join(10)
            os.close(self.read_end)
        data = b"".join(chunks)
        if data[:self.filler].strip(b"#"):
            raise h.HarnessError("gpuctl's stderr came before the filler: %r" % data[:200])
        return self.proc.returncode, out.decode(errors="replace"), data[self.filler:].decode(errors="replace")
