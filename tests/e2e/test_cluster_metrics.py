"""The test ground's metrics API (tests/cluster/sim_metrics.py): the real metrics-server behind the
real aggregation layer, scraping kwok's /metrics/resource for every node through the kubelet port.
`kubectl top` shows the usage kwok reports from the pods' kwok.x-k8s.io/usage-* annotations,
metrics-server's delegated authorization refuses who RBAC refuses, and gpuctl diagnose's
monitoring-missing sees the group come and go. Enabled for this suite only and disabled again
(the other suites expect no metrics API)."""
import json
import re

import harness as h

FLEET = """
name: metrics-e2e
nodes:
  - name: mtr-busy-0
    cpu: "32"
    memory: 256Gi
  - name: mtr-idle-0
    cpu: "32"
    memory: 256Gi
"""
SELECTOR = "e2e.gpuctl.dev/fleet=metrics-e2e"
GiB = 1024 ** 3


def cpu_millis(q):
    """metrics.k8s.io CPU quantities: nanocores (n), microcores (u), millicores (m) or cores."""
    m = re.fullmatch(r"(\d+)(n|u|m)?", q)
    num, unit = int(m.group(1)), m.group(2)
    return num / {"n": 1e6, "u": 1e3, "m": 1, None: 1e-3}[unit]


def mem_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", q)
    return int(m.group(1)) * {"Ki": 1024, "Mi": 1024 ** 2, "Gi": GiB, None: 1}[m.group(2)]


class ClusterMetricsTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET, source="metrics-e2e fleet")
        was = h.enable_metrics()
        cls.addClassCleanup(h.disable_metrics, was)
        cls.ns = h.unique_namespace("metrics")
        cls.addClassCleanup(h.delete_namespace, cls.ns)
        # Two containers: kwok reports each container's usage, the node's is the sum of its pods'.
        pod = h.gpu_pod("busy", cls.ns, node="mtr-busy-0", gpus=0, annotations=h.usage(cpu="750m", memory="1536Mi"))
        pod["spec"]["containers"].append(dict(pod["spec"]["containers"][0], name="sidecar"))
        h.create(pod)
        h.wait_pod_phase("busy", cls.ns)

    def test_apiservice_is_available_and_in_discovery(self):
        svc = h.kubectl("get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json")
        cond = {c["type"]: c for c in svc["status"]["conditions"]}
        self.assertEqual(cond["Available"]["status"], "True", cond)
        self.assertNotIn("insecureSkipTLSVerify", svc["spec"])   # the serving certificate is verified
        self.assertTrue(svc["spec"]["caBundle"])
        code, body = h.api_curl("/apis")
        groups = {g["name"]: g for g in json.loads(body)["groups"]}
        self.assertEqual(code, 200)
        self.assertEqual([v["version"] for v in groups["metrics.k8s.io"]["versions"]], ["v1beta1"])
        r = h.kubectl("api-resources", "--api-group=metrics.k8s.io", "-o", "name", check=False)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split()), ["nodes.metrics.k8s.io", "pods.metrics.k8s.io"])
        self.assertNotIn("couldn't get resource list", r.stderr)

    def test_kubectl_top_shows_the_usage_kwok_reports(self):
        # 2 x 750m and 2 x 1536Mi: the node's working set is exactly 3Gi, its CPU rate 1.5 cores.
        obj = h.node_metrics("mtr-busy-0", ready=lambda o: mem_bytes(o["usage"]["memory"]) == 3 * GiB)
        self.assertAlmostEqual(cpu_millis(obj["usage"]["cpu"]), 1500, delta=30)
        # the time between the two scrapes: --metric-resolution=10s (upstream 15s)
        self.assertRegex(obj["window"], r"^(9\.\d+|10(\.\d+)?|1[1-4](\.\d+)?)s$")
        out = h.kubectl("top", "nodes", "-l", SELECTOR, "--no-headers")
        rows = {line.split()[0]: line.split() for line in out.splitlines()}
        busy = rows["mtr-busy-0"]
        self.assertAlmostEqual(int(busy[1].rstrip("m")), 1500, delta=30, msg=out)
        self.assertEqual(busy[2], "4%", out)            # of 32 allocatable CPUs
        self.assertEqual(busy[3], "3072Mi", out)
        self.assertEqual(busy[4], "1%", out)            # of 256Gi
        # A node without pods has no usage; metrics-server drops incomplete node metrics (as for a
        # kubelet that reports zero), so kubectl shows it as unknown.
        self.assertEqual(rows["mtr-idle-0"][1:], ["<unknown>"] * 4, out)
        h.pod_metrics(self.ns, "busy")
        out = h.kubectl("top", "pod", "busy", "-n", self.ns, "--containers", "--no-headers")
        cont = {line.split()[1]: line.split() for line in out.splitlines()}
        self.assertEqual(sorted(cont), ["main", "sidecar"], out)
        for row in cont.values():
            self.assertAlmostEqual(int(row[2].rstrip("m")), 750, delta=20, msg=out)
            self.assertEqual(row[3], "1536Mi", out)

    def test_metrics_server_authorizes_through_the_apiserver(self):
        # The aggregator passes the user in X-Remote-User (front-proxy client certificate);
        # metrics-server asks the apiserver (SubjectAccessReview, system:auth-delegator).
        h.node_metrics("mtr-busy-0")
        r = h.kubectl("top", "nodes", "-l", SELECTOR, context="viewer", check=False)
        self.assertNotEqual(r.rc, 0)
        self.assertIn('User "viewer" cannot list resource "nodes" in API group "metrics.k8s.io"', r.stderr)
        code, _ = h.api_curl("/apis/metrics.k8s.io/v1beta1/nodes/mtr-busy-0", identity="nobody")
        self.assertEqual(code, 403)
        code, _ = h.api_curl("/apis/metrics.k8s.io/v1beta1/nodes/mtr-busy-0", identity="badtoken")
        self.assertEqual(code, 401)
        code, body = h.api_curl("/apis/metrics.k8s.io/v1beta1/nodes/mtr-busy-0", identity="token")
        self.assertEqual(code, 200, body)   # cluster-admin, not system:masters

    def test_diagnose_monitoring_missing_follows_the_metrics_api(self):
        # CPU-only nodes: the DCGM part of the check has nothing to say, only the metrics API counts.
        args = ("diagnose", "--check", "monitoring-missing", "-l", SELECTOR, "-o", "json")
        r = h.gpuctl(*args)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.json["findings"], [])
        h.disable_metrics()
        try:
            r = h.gpuctl(*args)
            self.assertEqual(r.rc, 0, r.stderr)
            self.assertEqual([f["summary"] for f in r.json["findings"]],
                             ["no metrics API (metrics.k8s.io): kubectl top and autoscaling fail"])
            # Unregistered cleanly: discovery has no stale group, kubectl prints no discovery error.
            r = h.kubectl("get", "pods", "-n", self.ns, check=False)
            self.assertEqual((r.rc, r.stderr), (0, ""))
            r = h.kubectl("top", "nodes", check=False)
            self.assertIn("Metrics API not available", r.stderr)
        finally:
            h.enable_metrics()
        r = h.gpuctl(*args)
        self.assertEqual((r.rc, r.json["findings"]), (0, []), r.stderr)


if __name__ == "__main__":
    h.main()
