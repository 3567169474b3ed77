"""The bench's own control plane: etcd and kube-apiserver only, from the binaries that
tests/cluster/build.sh caches in ~/.cache/gpuctl-cp/<versions>/bin, on free loopback ports and in a
state dir of its own, so it never meets a running e2e cluster. Auth is one static token in the group
system:masters (exempt from API Priority and Fairness, as an admin's client certificate is).

Everything started here is stopped by stop() (SIGTERM, then SIGKILL), and also when the bench dies
without running it: the children get SIGKILL when their parent goes (PR_SET_PDEATHSIG; SIGKILL
because an apiserver sent SIGTERM while its etcd goes too hangs in its graceful shutdown)."""
import contextlib
import ctypes
import fcntl
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "cluster"))
import cluster  # noqa: E402  (pick_ports, run, pid_alive, kill_pids: the e2e cluster's helpers)

BuildError = cluster.ClusterError


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


class Skip(Exception):
    """The control-plane binaries are not built and --no-build was given (ctest: skipped, 77)."""


def find_bin_dir(explicit=None, build=True):
    """The pinned control-plane build (tests/cluster/build.sh: build-or-reuse; warm, a no-op)."""
    if explicit:
        d = Path(explicit)
    else:
        cache = Path(os.environ.get("GPUCTL_CP_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                                Path.home() / ".cache") / "gpuctl-cp")
        d = cache / ("k8s-%s-etcd-%s-kwok-%s" % (cluster.K8S_VERSION, cluster.ETCD_VERSION, cluster.KWOK_VERSION)) / "bin"
        if not (d / "kube-apiserver").exists():
            if not build:
                raise Skip("no control-plane binaries in %s: tests/cluster/build.sh builds them (about 20 minutes "
                           "on 2 cores; ctest -L e2e does it too)" % d)
            log("building the control-plane binaries once (tests/cluster/build.sh, about 20 minutes on 2 cores)")
            p = subprocess.run(["bash", str(cluster.BUILD_SH)], stdout=subprocess.PIPE, text=True)
            if p.returncode != 0:
                raise BuildError("tests/cluster/build.sh failed (exit %d); its messages are above" % p.returncode)
            d = Path(p.stdout.strip().splitlines()[-1])
    for b in ("etcd", "kube-apiserver", "kubectl"):
        if not os.access(d / b, os.X_OK):
            raise BuildError("%s is not an executable (--bin-dir or tests/cluster/build.sh)" % (d / b))
    return d


def _die_with_parent():
    """In the child before exec: SIGKILL when the bench process goes, whatever way it goes."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    os.setsid()  # Ctrl-C reaches the bench only; it stops the children in order


class ControlPlane:
    def __init__(self, state_dir, bin_dir):
        self.dir = Path(state_dir).resolve()
        self.bin = Path(bin_dir)
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.kubeconfig = self.dir / "kubeconfig"
        self.procs = {}
        self.token = secrets.token_hex(20)
        self.port = None
        self._lock = None

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    def ssl_context(self):
        return ssl.create_default_context(cafile=str(self.pki / "ca.crt"))

    def headers(self):
        return {"Authorization": "Bearer " + self.token, "Accept": "application/json"}

    # -- start ---------------------------------------------------------------------------------

    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.dir / ".lock", "a+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BuildError("another bench runs in %s (its lock is held): use another --state-dir" % self.dir)
        self._stop_stale()
        for sub in ("etcd", "pki", "logs", "kubectl-cache"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        self.pki.mkdir()
        self.logs.mkdir()
        etcd_port, peer_port, self.port = cluster.pick_ports(3)
        t = time.time()
        self._make_pki()
        self.procs["etcd"] = self._spawn("etcd", [
            "--name=bench", "--data-dir=%s" % (self.dir / "etcd"),
            "--listen-client-urls=http://127.0.0.1:%d" % etcd_port,
            "--advertise-client-urls=http://127.0.0.1:%d" % etcd_port,
            "--listen-peer-urls=http://127.0.0.1:%d" % peer_port,
            "--initial-advertise-peer-urls=http://127.0.0.1:%d" % peer_port,
            "--initial-cluster=bench=http://127.0.0.1:%d" % peer_port,
            "--quota-backend-bytes=%d" % (8 * 1024 ** 3), "--unsafe-no-fsync", "--log-level=warn"])
        self._wait("etcd /health", lambda: self._get("http://127.0.0.1:%d/health" % etcd_port, None), 60, "etcd")
        P = self.pki
        self.procs["kube-apiserver"] = self._spawn("kube-apiserver", [
            "--etcd-servers=http://127.0.0.1:%d" % etcd_port,
            "--bind-address=127.0.0.1", "--secure-port=%d" % self.port, "--advertise-address=127.0.0.1",
            "--tls-cert-file=%s" % (P / "apiserver.crt"), "--tls-private-key-file=%s" % (P / "apiserver.key"),
            "--token-auth-file=%s" % (P / "tokens.csv"), "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file=%s" % (P / "sa.pub"),
            "--service-account-signing-key-file=%s" % (P / "sa.key"),
            "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
            "--allow-privileged=true", "--profiling=false"])
        self._wait("kube-apiserver /readyz", lambda: self._get(self.url + "/readyz", self.ssl_context()), 180,
                   "kube-apiserver")
        self._write_kubeconfig()
        (self.dir / "state.json").write_text(json.dumps(
            {"pids": {n: p.pid for n, p in self.procs.items()}, "url": self.url}, indent=1))
        log("etcd and kube-apiserver ready at %s in %.1fs (state %s)" % (self.url, time.time() - t, self.dir))

    def _make_pki(self):
        P, run = self.pki, cluster.run
        (P / "req.cnf").write_text("[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"
                                   "[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign\n")
        for k in ("ca", "apiserver"):
            run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(P / (k + ".key"))])
        run(["openssl", "req", "-x509", "-new", "-key", str(P / "ca.key"), "-subj", "/CN=gpuctl-bench-ca",
             "-config", str(P / "req.cnf"), "-extensions", "v3_ca", "-days", "30", "-out", str(P / "ca.crt")])
        run(["openssl", "req", "-new", "-key", str(P / "apiserver.key"), "-subj", "/CN=kube-apiserver",
             "-config", str(P / "req.cnf"), "-out", str(P / "apiserver.csr")])
        (P / "apiserver.ext").write_text("basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n"
                                         "subjectAltName = IP:127.0.0.1,DNS:localhost\n")
        run(["openssl", "x509", "-req", "-in", str(P / "apiserver.csr"), "-CA", str(P / "ca.crt"),
             "-CAkey", str(P / "ca.key"), "-CAcreateserial", "-days", "30", "-extfile", str(P / "apiserver.ext"),
             "-out", str(P / "apiserver.crt")])
        run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(P / "sa.key")])
        run(["openssl", "pkey", "-in", str(P / "sa.key"), "-pubout", "-out", str(P / "sa.pub")])
        (P / "tokens.csv").write_text('%s,bench-admin,uid-bench-admin,"system:masters"\n' % self.token)
        for f in P.glob("*.key"):
            os.chmod(f, 0o600)

    def _write_kubeconfig(self):
        # JSON is YAML: kubectl and gpuctl read it as a kubeconfig.
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "bench",
               "clusters": [{"name": "bench", "cluster": {"server": self.url,
                                                          "certificate-authority": str(self.pki / "ca.crt")}}],
               "users": [{"name": "bench-admin", "user": {"token": self.token}}],
               "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench-admin"}}]}
        self.kubeconfig.write_text(json.dumps(cfg, indent=1))
        os.chmod(self.kubeconfig, 0o600)

    def _spawn(self, name, args):
        logf = open(self.logs / (name + ".log"), "ab")
        try:
            return subprocess.Popen([str(self.bin / name), *args], stdin=subprocess.DEVNULL, stdout=logf,
                                    stderr=subprocess.STDOUT, cwd=str(self.dir), preexec_fn=_die_with_parent)
        finally:
            logf.close()

    def _get(self, url, ctx):
        req = urllib.request.Request(url, headers=self.headers() if ctx else {})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            return r.status == 200

    def _wait(self, what, fn, timeout, name):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.procs[name].poll() is not None:
                raise BuildError("%s exited (code %s) during start-up:\n%s" % (name, self.procs[name].returncode,
                                                                               self.tail(name)))
            with contextlib.suppress(OSError, ssl.SSLError, ValueError):
                if fn():
                    return
            time.sleep(0.3)
        raise BuildError("timed out after %ds waiting for %s:\n%s" % (timeout, what, self.tail(name)))

    def tail(self, name, n=20):
        with contextlib.suppress(OSError):
            return "".join((self.logs / (name + ".log")).read_text(errors="replace").splitlines(True)[-n:])
        return ""

    # -- stop ----------------------------------------------------------------------------------

    def _stop_stale(self):
        """A previous bench in this dir that was SIGKILLed together with its children's parent
        chain: its pids, if still alive and still ours (their command line names this dir)."""
        with contextlib.suppress(OSError, ValueError, KeyError):
            pids = json.loads((self.dir / "state.json").read_text())["pids"].values()
            ours = [p for p in pids if cluster.pid_alive(p) and str(self.dir) in cluster.proc_cmdline(p)]
            if ours:
                log("stopping processes left by an earlier bench in %s: %s" % (self.dir, ours))
                cluster.kill_pids(ours)

    def stop(self, keep_data=False):
        for name in ("kube-apiserver", "etcd"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        with contextlib.suppress(OSError):
            (self.dir / "state.json").unlink()
        if not keep_data:
            shutil.rmtree(self.dir / "etcd", ignore_errors=True)
        if self._lock:
            self._lock.close()
            self._lock = None
