"""Fault matrix, part 2: API Priority and Fairness rejecting (429) a parallel drain, etcd frozen
under `nodes` and `drain` with --request-timeout, a node cut off from the network during `gpus`
and `drain`, an expired client certificate, and an exec-plugin token rotated during a drain's
watch. Runs on a private cluster (etcd pauses and apiserver restarts disturb everything)."""
import http.client
import json
import re
import ssl
import tempfile
import threading
import time
import uuid
from pathlib import Path

import harness as h
import faults_common as f

_stop = None


def setUpModule():
    global _stop
    _stop = f.start_cluster("faults-cluster")


def tearDownModule():
    if _stop:
        _stop()


TINY_LEVEL = "gpuctl-faults-tiny"
FLOW_SCHEMA = "gpuctl-faults-token-user"


def tiny_priority_level():
    """A priority level of about three seats that rejects at once (no queue, no borrowing) and a
    FlowSchema that sends everything the `token` context's user does there."""
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": TINY_LEVEL},
             "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                     "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}}
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": FLOW_SCHEMA},
              "spec": {"priorityLevelConfiguration": {"name": TINY_LEVEL}, "matchingPrecedence": 100,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "User", "user": {"name": "token-user"}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                     "clusterScope": True, "namespaces": ["*"]}],
                                  "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
    return [level, schema]


def rejected_by_tiny_level():
    code, text = h.api_curl("/metrics")
    assert code == 200, text[:300]
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_flowcontrol_rejected_requests_total{") and 'priority_level="%s"' % TINY_LEVEL in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class Load:
    """Threads listing pods as token-user without pause, to keep the tiny level's seats busy."""

    def __init__(self, threads=2):
        i = h.info()
        self.port = int(i["api_server"].rsplit(":", 1)[1])
        self.token = i["tokens"]["token"]
        self.ctx = ssl.create_default_context(cafile=i["ca_file"])
        self.stop = threading.Event()
        self.codes = {}
        self.levels = set()   # X-Kubernetes-PF-PriorityLevel-UID of the answers
        self.retry_after = set()   # Retry-After of the 429s
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
                while not self.stop.is_set():
                    c.request("GET", "/api/v1/pods", headers={"Authorization": "Bearer " + self.token})
                    r = c.getresponse()
                    r.read()
                    self.codes[r.status] = self.codes.get(r.status, 0) + 1
                    self.levels.add(r.getheader("X-Kubernetes-PF-PriorityLevel-UID"))
                    if r.status == 429:
                        self.retry_after.add(r.getheader("Retry-After"))
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)


PLUGIN = r'''#!/usr/bin/python3
# exec credential plugin for the rotation test: call 1 -> first token, later calls -> second token
import json, os, sys, time
d = os.path.dirname(os.path.abspath(__file__))
cfg = json.load(open(os.path.join(d, "tokens.json")))
log = os.path.join(d, "calls.log")
n = sum(1 for _ in open(log)) + 1 if os.path.exists(log) else 1
tok, ttl = (cfg["first"], cfg["first_ttl"]) if n == 1 else (cfg["second"], 3600)
with open(log, "a") as f:
    f.write("%d %s %s\n" % (n, time.strftime("%H:%M:%S"), "first" if n == 1 else "second"))
exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ttl))
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": tok, "expirationTimestamp": exp}}))
'''


class ClusterFaultTest(h.TestCase):
    def test_parallel_drain_throttled_by_priority_and_fairness(self):
        nodes = ["flt-p-%d" % i for i in range(6)]
        for n in nodes:
            f.reset_node(n)
        ns = self.namespace("flt-apf")
        h.create([f.bare_pod("p%d" % i, ns, n) for i, n in enumerate(nodes)])
        f.wait_running(ns, {"p%d" % i for i in range(6)})
        level, schema = tiny_priority_level()
        level_uid = h.create(level)["metadata"]["uid"]
        h.create(schema)
        self.addCleanup(h.kubectl, "delete", "flowschema", FLOW_SCHEMA, "prioritylevelconfiguration", TINY_LEVEL,
                        "--ignore-not-found")
        before = rejected_by_tiny_level()
        load = Load()
        self.addCleanup(load.close)
        h.wait_for(lambda: level_uid in load.levels, 30, "token-user's requests to land in the tiny priority level")

        # The load stays until gpuctl has been refused a few times; then gpuctl must get through
        # by itself, waiting as the server's Retry-After says (which can be tens of seconds).
        run = f.Background("drain", "-l", f.GROUP_LABEL + "=parallel", "--max-concurrent", "6", "--force",
                           "--grace-period", "0", "--timeout", "300s", "--reason", "faults: apf", "-v", "1",
                           context="token")
        self.addCleanup(run.kill)
        run.wait_line(r" 429 in \d+ ms \(attempt [3-9]", 120)
        load.close()
        r = run.finish(420)
        throttled = len(re.findall(r" 429 in \d+ ms", r.stderr))
        f.report("apf-429", rc=r.rc, seconds=round(r.elapsed, 1), gpuctl_429s=throttled,
                 level_rejections=rejected_by_tiny_level() - before, load=load.codes,
                 retry_after=sorted(load.retry_after, key=str),
                 waiting_notice=bool(re.search(r"throttl|Retry-After|retry after", r.stderr, re.I)))
        self.assertEqual(r.rc, 0, r.stdout + r.stderr[-4000:])
        self.assertGreater(throttled, 0, "gpuctl was never throttled, so this cell proves nothing:\n" + r.stderr[-2000:])
        for n in nodes:
            self.assertRegex(r.stdout, r"%s\s+drained" % n)
            cordoned, record = f.cordon_state(n)
            self.assertTrue(cordoned, n)
            self.assertEqual(record["gpuctl.io/cordon-reason"], "faults: apf")
        self.assertEqual(f.live_pods(ns), {})

    def test_etcd_frozen_under_nodes_ends_within_the_request_timeout(self):
        c = f.cluster()
        c.pause_component("etcd")
        try:
            r = f.run_bounded("nodes", "--request-timeout", "3s", bound=30)
        finally:
            c.pause_component("etcd", paused=False)
        f.report("etcd-frozen nodes", rc=r.rc, seconds=round(r.elapsed, 1), error=r.stderr.strip().splitlines()[-1:])
        self.assertIn(r.rc, (0, 1), r.stderr)
        if r.rc == 1:
            self.assertRegex(f.one_line_error(self, r.stderr), r"timed out|timeout")
            self.assertEqual(r.stdout, "")
        self.assertLess(r.elapsed, 3 + 5, "a 3 s request timeout took %.1fs" % r.elapsed)
        h.wait_for(lambda: f.run_bounded("nodes", "--request-timeout", "10s", bound=30).rc == 0, 60,
                   "gpuctl nodes to answer again once etcd runs")

    def test_etcd_frozen_during_a_drain_fails_cleanly_then_rerun_completes(self):
        node = "flt-d-0"
        f.reset_node(node)
        ns = self.namespace("flt-etcd")
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "held", "namespace": ns},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}}}
        h.create([f.bare_pod("held", ns, node, labels={"app": "held"}), pdb])
        f.wait_running(ns, {"held"})
        h.wait_for(lambda: h.kubectl("get", "pdb", "held", "-n", ns, "-o", "json")["status"].get("currentHealthy") == 1,
                   60, "the PDB to count its pod")
        args = ("drain", node, "--force", "--grace-period", "0", "--timeout", "90s", "--reason", "faults: etcd",
                "--request-timeout", "3s")
        run = f.Background(*args)
        self.addCleanup(run.kill)
        run.wait_line(r"eviction refused", 60)
        c = f.cluster()
        c.pause_component("etcd")
        paused_at = time.monotonic()
        try:
            first = run.finish(60)
        finally:
            c.pause_component("etcd", paused=False)
        after_pause = time.monotonic() - paused_at
        f.report("etcd-frozen drain", rc=first.rc, seconds_after_pause=round(after_pause, 1),
                 error=first.stderr.strip().splitlines()[-1:])
        # The next eviction retry (5 s) meets the frozen etcd: one request timeout later it ends.
        self.assertLess(after_pause, 5 + 3 + 10)
        self.assertEqual(first.rc, 1, first.stdout + first.stderr)
        self.assertRegex(first.stdout + first.stderr, r"timed out")
        f.one_line_error(self, first.stderr)
        h.kubectl("delete", "pdb", "held", "-n", ns)
        again = f.run_bounded(*args, bound=120)
        f.report("etcd-frozen drain", rerun_rc=again.rc)
        self.assertEqual(again.rc, 0, again.stdout + again.stderr)
        cordoned, record = f.cordon_state(node)
        self.assertTrue(cordoned)
        self.assertEqual(record["gpuctl.io/cordon-reason"], "faults: etcd")
        self.assertEqual(f.live_pods(ns, node), {})

    def test_node_cut_off_during_gpus_times_out_alone(self):
        nodes = ["flt-g-0", "flt-g-1", "flt-g-2"]
        if not h.info()["netns"]["ok"]:
            self.skipTest(h.info()["netns"]["error"])
        h.cut("flt-g-1")
        self.addCleanup(h.uncut, "flt-g-1")
        r = f.run_bounded("gpus", *nodes, *h.ssh_flags(), "--connect-timeout", "3s", "--ssh-timeout", "20s",
                          "-o", "json", bound=60)
        outcomes = {i["name"]: i["outcome"] for i in json.loads(r.stdout)["items"]} if r.stdout else {}
        f.report("cut gpus", rc=r.rc, seconds=round(r.elapsed, 1), outcomes=outcomes)
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertIn(outcomes.get("flt-g-1"), ("timed_out", "unreachable"))
        self.assertEqual(outcomes.get("flt-g-0"), "ok")
        self.assertEqual(outcomes.get("flt-g-2"), "ok")
        self.assertLess(r.elapsed, 20 + 10)

    def test_drain_of_a_cut_off_node(self):
        if not h.info()["netns"]["ok"]:
            self.skipTest(h.info()["netns"]["error"])
        cut, other = "flt-g-1", "flt-g-2"
        for n in (cut, other):
            f.reset_node(n)
        h.cut(cut)
        self.addCleanup(h.uncut, cut)
        ns = self.namespace("flt-cut")
        h.create([f.bare_pod("c0", ns, cut), f.bare_pod("c1", ns, other)])
        f.wait_running(ns, {"c0", "c1"})
        # Plain drain: all API, the node's network plays no part.
        r = f.run_bounded("drain", cut, "--force", "--grace-period", "0", "--timeout", "60s", bound=90)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        # Rolling with an ssh maintenance command: the cut node's command fails, the node stays
        # drained and cordoned, the other is not started.
        ssh_cmd = 'ssh -F %s -o ConnectTimeout=3 "$1" nvidia-smi -L' % h.info()["ssh"]["config_file"]
        r = f.run_bounded("drain", cut, other, "--rolling", "--max-unavailable", "1", "--force", "--grace-period", "0",
                          "--timeout", "60s", "--exec", ssh_cmd, "--exec-timeout", "30s", "--uncordon", "--no-verify",
                          "--reason", "faults: cut", bound=120)
        f.report("cut drain", rc=r.rc, seconds=round(r.elapsed, 1), table=r.stdout.strip().replace("\n", " | "))
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"%s\s+failed" % cut)
        self.assertRegex(r.stdout, r"%s\s+not_started" % other)
        f.one_line_error(self, r.stderr)
        self.assertTrue(f.cordon_state(cut)[0])
        self.assertEqual(f.live_pods(ns, cut), {})
        self.assertFalse(f.cordon_state(other)[0])
        self.assertEqual(set(f.live_pods(ns, other)), {"c1"})

    def test_expired_client_certificate(self):
        kc = f.cluster().mint_client_cert("expired-admin", "/O=system:masters/CN=expired-admin",
                                          "20200101000000Z", "20200102000000Z")
        r = f.run_bounded("nodes", kubeconfig=kc, bound=30)
        line = f.one_line_error(self, r.stderr)
        f.report("expired cert", rc=r.rc, error=line)
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertRegex(line, r"(?i)expired|rejected|unauthori")
        self.assertRegex(line, r"(?i)certificate")
        self.assertRegex(line, r"(?i)kubeconfig|log in|refresh|renew")

    def exec_kubeconfig(self, first_ttl):
        """A kubeconfig whose user is the rotation plugin; both tokens known to the server."""
        d = Path(tempfile.mkdtemp(prefix="flt-exec-"))
        tokens = {"first": uuid.uuid4().hex, "second": uuid.uuid4().hex, "first_ttl": first_ttl}
        (d / "tokens.json").write_text(json.dumps(tokens))
        (d / "plugin.py").write_text(PLUGIN)
        (d / "plugin.py").chmod(0o755)
        i = h.info()
        import base64
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "rot",
               "clusters": [{"name": "c", "cluster": {"server": i["api_server"], "certificate-authority-data":
                                                      base64.b64encode(Path(i["ca_file"]).read_bytes()).decode()}}],
               "users": [{"name": "rot", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                           "command": "/usr/bin/python3", "args": [str(d / "plugin.py")],
                                                           "interactiveMode": "Never"}}}],
               "contexts": [{"name": "rot", "context": {"cluster": "c", "user": "rot", "namespace": "default"}}]}
        (d / "kubeconfig").write_text(json.dumps(cfg))
        groups = ["gpuctl-e2e:token-users"]
        entry = lambda t: (t, "token-user", "uid-gpuctl-token-user", groups)  # noqa: E731
        c = f.cluster()
        c.set_extra_tokens([entry(tokens["first"]), entry(tokens["second"])])
        c.restart_apiserver()   # the tokens stay until the private cluster goes
        return d, tokens, entry

    def held_drain(self, kubeconfig, node, reason):
        """A drain that waits in its watch for a pod held by a finalizer."""
        f.reset_node(node)
        ns = self.namespace("flt-token")
        h.create([f.bare_pod("held", ns, node, finalizers=["faults.gpuctl.dev/hold"])])
        self.addCleanup(h.kubectl, "patch", "pod", "held", "-n", ns, "--type", "json",
                        "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', check=False)
        f.wait_running(ns, {"held"})
        run = f.Background("drain", node, "--force", "--grace-period", "0", "--timeout", "150s", "--reason", reason,
                           kubeconfig=kubeconfig)
        self.addCleanup(run.kill)
        run.wait_line(r"waiting for 1 pod\(s\) to go", 60)
        return ns, run

    def release(self, ns):
        h.kubectl("patch", "pod", "held", "-n", ns, "--type", "json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')

    def calls(self, d):
        p = d / "calls.log"
        return p.read_text().splitlines() if p.exists() else []

    def test_token_revoked_during_a_watch_is_replaced_by_the_plugin(self):
        d, tokens, entry = self.exec_kubeconfig(first_ttl=3600)
        ns, run = self.held_drain(d / "kubeconfig", "flt-d-3", "faults: rotation")
        self.assertEqual(len(self.calls(d)), 1)
        c = f.cluster()
        c.set_extra_tokens([entry(tokens["second"])])   # the first token is revoked
        c.restart_apiserver(down_for=1)
        h.wait_for(lambda: len(self.calls(d)) >= 2, 60, "gpuctl to run the plugin again after the 401")
        self.release(ns)
        r = run.finish(120)
        f.report("token rotation (401)", rc=r.rc, plugin_calls=self.calls(d))
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"flt-d-3\s+drained")
        self.assertEqual(f.cordon_state("flt-d-3")[1]["gpuctl.io/cordon-reason"], "faults: rotation")

    def test_expired_exec_credential_is_renewed_before_reuse(self):
        d, tokens, entry = self.exec_kubeconfig(first_ttl=4)
        ns, run = self.held_drain(d / "kubeconfig", "flt-d-3", "faults: expiry")
        time.sleep(6)   # the first token's expirationTimestamp has passed; the server still takes it
        f.cluster().restart_apiserver(down_for=1)   # the watch breaks: new requests need a token
        h.wait_for(lambda: len(self.calls(d)) >= 2, 60, "gpuctl to run the plugin again after the expiry")
        self.release(ns)
        r = run.finish(120)
        f.report("token expiry", rc=r.rc, plugin_calls=self.calls(d))
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    h.main()
