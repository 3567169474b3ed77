"""`gpuctl diagnose` against the real control plane: each node check fires on the node made to
fail its way (dx-down-0 has no kwok heartbeat: NotReady, then Unknown from the node lifecycle
controller), every check stays silent on a healthy node and namespace (with NVIDIA's device
plugin and a DCGM exporter running, diagnose_ground.py); RBAC refusals and refused credentials
give the documented exit codes (issue 15). The workload checks: test_diagnose_workloads.py."""
import json
import time

import diagnose_ground as ground
import harness as h

SELECTOR = ground.SELECTOR


class DiagnoseTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        ground.ensure()
        cls.ns = h.unique_namespace("diagnose")
        cls.healthy_ns = h.unique_namespace("dxok")
        h.create(h.gpu_pod("train", cls.healthy_ns, node="dx-ok-0", gpus=2))
        h.wait_pod_phase("train", cls.healthy_ns)
        # A GPU pod bound to the node that is down, as one placed before it went down: stranded there.
        pod = h.gpu_pod("stranded", cls.ns, gpus=2)
        pod["spec"]["nodeName"] = "dx-down-0"
        h.create([pod])
        # Conditions as their writers set them; kwok's heartbeat rewrites node status only every
        # 10-20 minutes, longer than this suite runs.
        cls.set_condition("dx-net-0", "NetworkUnavailable", "NoRouteCreated", "RouteController failed to create a route")
        cls.set_condition("dx-press-0", "MemoryPressure", "KubeletHasInsufficientMemory",
                          "kubelet has insufficient memory available")

    @staticmethod
    def set_condition(node, type_, reason, message):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        patch = {"status": {"conditions": [{"type": type_, "status": "True", "reason": reason, "message": message,
                                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}}
        h.kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p", json.dumps(patch))

    @classmethod
    def tearDownClass(cls):
        h.delete_namespace(cls.ns)
        h.delete_namespace(cls.healthy_ns)

    def findings_by_node(self, doc):
        out = {}
        for f in doc["findings"]:
            out.setdefault(f["node"], []).append(f)
        return out

    def test_each_node_check_fires_on_its_node_and_not_on_the_healthy_one(self):
        def down_seen():
            r = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, "-o", "json")
            found = self.findings_by_node(r.json) if r.rc in (0, 4) else {}
            return r if any(f["check"] == "node-not-ready" for f in found.get("dx-down-0", [])) else None
        r = h.wait_for(down_seen, 120, "diagnose to find dx-down-0 not ready")
        self.assertEqual(r.rc, 4, r.stderr)
        doc = r.json
        self.assertEqual(doc["kind"], "DiagnoseReport")
        found = self.findings_by_node(doc)
        self.assertNotIn("dx-ok-0", found)

        down = [f for f in found["dx-down-0"] if f["check"] == "node-not-ready"][0]
        self.assertEqual(down["severity"], "critical")
        self.assertRegex(down["summary"], r"^dx-down-0 is (NotReady|Unknown)")
        self.assertIn("1 GPU pod(s) stranded there: %s/stranded" % self.ns, down["summary"])
        self.assertTrue(down["evidence"][0]["text"].startswith("Ready="), down["evidence"])

        sick = [f for f in found["dx-sick-0"] if f["check"] == "gpu-unhealthy-devices"]
        self.assertEqual([f["summary"] for f in sick],
                         ["dx-sick-0: 2 of 8 nvidia.com/gpu unhealthy (capacity 8, allocatable 6)"])
        self.assertIn("gpuctl gpus dx-sick-0", sick[0]["remedy"])

        missing = [f for f in found["dx-noplugin-0"] if f["check"] == "device-plugin-missing"]
        self.assertEqual(len(missing), 1, found["dx-noplugin-0"])
        self.assertEqual(missing[0]["severity"], "critical")
        self.assertIn("nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB", missing[0]["summary"])

        net = [f for f in found["dx-net-0"] if f["check"] == "node-network-unavailable"]
        self.assertEqual(len(net), 1, found.get("dx-net-0"))
        self.assertIn("dx-net-0 has no working pod network", net[0]["summary"])
        self.assertIn("(NoRouteCreated)", net[0]["summary"])
        pressure = [f for f in found["dx-press-0"] if f["check"] == "node-pressure"]
        self.assertEqual(len(pressure), 1, found.get("dx-press-0"))
        self.assertIn("dx-press-0 is under MemoryPressure", pressure[0]["summary"])
        self.assertEqual(pressure[0]["evidence"][0]["text"],
                         "MemoryPressure=True reason=KubeletHasInsufficientMemory: kubelet has insufficient memory available")
        layers = {v["node"]: v["firstFailingLayer"] for v in doc["nodes"]}
        self.assertEqual(layers["dx-net-0"], "network")
        self.assertEqual(layers["dx-down-0"], "node")
        self.assertEqual(layers["dx-sick-0"], "GPUs healthy")
        # Only the node side is skipped, as asked (--no-ssh; test_diagnose_nodes.py runs it).
        self.assertEqual([c["id"] for c in doc["checks"] if c["status"] == "skipped" and not c["skippedByRequest"]], [])
        self.assertEqual(doc["summary"]["checksSkipped"], 13)
        self.assertGreaterEqual(doc["summary"]["critical"], 2)

        # The table: worst first, then what to run.
        rc, out, err = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR)
        self.assertEqual(rc, 4, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("SEVERITY"), out)
        self.assertTrue(lines[1].startswith("critical"), out)
        self.assertIn("What to run:", out)

    def test_a_healthy_node_passes_every_check(self):
        # The test ground has no metrics-server, so monitoring-missing (info) says so; every other
        # check of the API side has nothing to say about a Ready node with its plugin running and a
        # running GPU pod (the node side's healthy node: test_diagnose_nodes.py). DeviceClasses are
        # cluster-wide like the metrics API: the DRA test ground's (test_diagnose_dra.py) may be
        # there, and dra-class-matches-nothing judges them whatever -l says.
        args = ("diagnose", "--no-ssh", "-l", "kubernetes.io/hostname=dx-ok-0", "-n", self.healthy_ns)
        rc, out, err = h.gpuctl(*args, "--skip", "monitoring-missing,dra-class-matches-nothing", "--fail-on", "info")
        self.assertEqual(rc, 0, err + out)
        self.assertEqual(out, "")
        self.assertIn("No problems found by 26 check(s).", err)
        self.assertIn("13 node-side check(s) skipped (--no-ssh)", err)
        r = h.gpuctl(*args, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual([f["summary"] for f in r.json["findings"] if f["check"] != "dra-class-matches-nothing"],
                         ["no metrics API (metrics.k8s.io): kubectl top and autoscaling fail"])
        self.assertEqual(r.json["nodes"], [{"node": "dx-ok-0", "firstFailingLayer": None, "check": "", "summary": ""}])

    def test_monitoring_missing_is_silent_with_metrics_server_and_the_dcgm_exporter(self):
        # The real metrics-server behind APIService v1beta1.metrics.k8s.io (tests/cluster/sim_metrics.py),
        # only for this test: the others expect the test ground without a metrics API.
        was = h.enable_metrics()
        self.addCleanup(h.disable_metrics, was)
        r = h.gpuctl("diagnose", "--check", "monitoring-missing", "-l", "kubernetes.io/hostname=dx-ok-0", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.json["findings"], [])

    def test_lists_it_may_not_read_skip_checks_and_refused_credentials_stop_it(self):
        # nobody may list nothing: every check is skipped, exit 5, each named.
        rc, out, err = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, context="nobody")
        self.assertEqual(rc, 5, err)
        self.assertIn("Warning: check node-not-ready skipped: could not list nodes: forbidden", err)
        # viewer may read what a namespace viewer reads (nodes, pods and their logs, events, jobs,
        # quotas, DaemonSets), not claims and volumes, nor resource.k8s.io: pvc-unbound and the DRA
        # checks are skipped (never passed on an empty inventory), and the findings win.
        r = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, "-o", "json", context="viewer")
        self.assertEqual(r.rc, 4, r.stderr)
        self.assertEqual([c["id"] for c in r.json["checks"] if c["status"] == "skipped" and not c["skippedByRequest"]],
                         ["pvc-unbound", "dra-device-tainted", "dra-pool-incomplete", "dra-claim-unallocated",
                          "dra-class-matches-nothing", "dra-double-advertised"])
        self.assertIn("Warning: check pvc-unbound skipped: could not list persistentvolumeclaims: forbidden", r.stderr)
        self.assertIn("Warning: check dra-device-tainted skipped: could not list DRA objects (resource.k8s.io): "
                      "forbidden: resourceslices, resourceclaims, deviceclasses", r.stderr)
        rc, out, err = h.gpuctl("diagnose", context="badtoken")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")


if __name__ == "__main__":
    h.main()
