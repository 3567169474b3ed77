"""Real sshd hosts with the fake nvidia-smi for the bench, made by tests/cluster's own machinery
(cluster.Cluster: ssh keys, sshd shards of 16 addresses, host files, `hang` and the other ssh modes,
teardown of every process it marked), with the nodes written into the bench's API server instead of
an e2e cluster's. Only the host side of a Cluster is used: no etcd, apiserver or kwok of its own."""
import contextlib
import json
import os
import pwd
import random
import ssl
import time
import urllib.error
import urllib.request

from controlplane import cluster, log


def api(cp, method, path, body=None, ctype="application/json", ok=(200, 201), timeout=30):
    """One request to the bench's API server: (status, decoded JSON); ClusterError unless in `ok`."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(cp.url + path, data=data, method=method,
                                 headers=dict(cp.headers(), **{"Content-Type": ctype}))
    try:
        with urllib.request.urlopen(req, context=cp.ssl_context(), timeout=timeout) as r:
            code, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, raw = e.code, e.read()
    obj = json.loads(raw) if raw else None
    if ok and code not in ok:
        raise cluster.ClusterError("%s %s -> HTTP %d: %s" % (method, path, code, obj))
    return code, obj


class FleetHosts(cluster.Cluster):
    """cluster.Cluster whose API is the bench's control plane (token auth) and whose state is the
    host side only. Use: start(), apply_fleet_text(yaml, wait=False), set_ssh_mode(), down()."""

    def __init__(self, state_dir, cp):
        super().__init__(state_dir)
        self.cp = cp

    def start(self):
        """Fresh state (a stale one, from a bench killed with SIGKILL, is torn down first: its
        sshd shards are detached from us), ssh keys, an ssh port; no sshd runs until a fleet."""
        with self.locked():
            if self.state or self.dir.exists() and any(p.name != ".lock" for p in self.dir.iterdir()):
                log("stopping the ssh hosts left by an earlier bench in %s" % self.dir)
                self._teardown(keep_lock=True)
            self.dir.mkdir(parents=True, exist_ok=True)
            for sub in (self.ssh_dir / "hosts", self.ssh_dir / "bin", self.logs):
                sub.mkdir(parents=True, exist_ok=True)
            self.state = {"schema": 1, "id": "%08x" % random.getrandbits(32), "phase": "ready",
                          "ports": {"ssh": cluster.pick_ports(1)[0]}, "procs": {}, "sshd": [],
                          "user": pwd.getpwuid(os.getuid()).pw_name, "ip_base": random.randint(16, 250),
                          "next_ip": 0, "next_cut": 0, "netns": {"ok": False, "error": "the bench cuts no node off"},
                          "nodes": {}, "fleets": {}}
            self.make_ssh()
            self.save()

    def sshd_config(self, addrs):
        # A session's bash reads the account's ~/.bashrc when sshd runs it (Debian's
        # SSH_SOURCE_BASHRC) unless SHLVL says it is not a top-level shell. Here that file is this
        # machine's own (root's pyenv init: a pyenv rehash per login, seconds of CPU at 256 logins
        # and a stale lock, making every later login wait 60 s, when a session is killed in it);
        # a simulated GPU host's shell has no business running it.
        return super().sshd_config(addrs) + "SetEnv SHLVL=1\n"

    def save(self):
        # The state only: cluster.json describes a whole e2e cluster, which this is not.
        cluster.write_file(self.state_file, json.dumps(self.state, indent=1, sort_keys=True))

    def api(self, method, path, body=None, ctype="application/json", ok=(200, 201), timeout=30):
        return api(self.cp, method, path, body, ctype, ok, timeout)

    def delete_fleet_nodes(self, fleet):
        """Removes the fleet's nodes from the bench's API server (its other scenarios never see them)."""
        with contextlib.suppress(OSError, ssl.SSLError, ValueError, cluster.ClusterError):
            self.api("DELETE", "/api/v1/nodes?labelSelector=%s%%3D%s" % (cluster.FLEET_LABEL, fleet), ok=(200,))

    def down(self):
        t = time.time()
        if self.dir.exists():
            with self.locked():
                self._teardown(keep_lock=False)
            log("ssh hosts stopped in %.1fs (logs in %s)" % (time.time() - t, self.kept_logs))
