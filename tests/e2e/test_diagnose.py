"""`gpuctl diagnose` against the real control plane: each node check fires on the node made to
fail its way (dx-down-0 has no kwok heartbeat: NotReady, then Unknown from the node lifecycle
controller) and stays silent on a healthy one; RBAC refusals and refused credentials give the
documented exit codes (issue 15)."""
import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=diagnose-e2e"


class DiagnoseTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("diagnose-e2e")
        cls.ns = h.unique_namespace("diagnose")
        # A GPU pod bound to the node that is down, as one placed before it went down: stranded there.
        pod = h.gpu_pod("stranded", cls.ns, gpus=2)
        pod["spec"]["nodeName"] = "dx-down-0"
        h.create([pod])

    @classmethod
    def tearDownClass(cls):
        h.delete_namespace(cls.ns)

    def findings_by_node(self, doc):
        out = {}
        for f in doc["findings"]:
            out.setdefault(f["node"], []).append(f)
        return out

    def test_each_node_check_fires_on_its_node_and_not_on_the_healthy_one(self):
        def down_seen():
            r = h.gpuctl("diagnose", "-l", SELECTOR, "-o", "json")
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

        self.assertEqual(doc["summary"]["checksSkipped"], 0)
        self.assertGreaterEqual(doc["summary"]["critical"], 2)

        # The table: worst first, then what to run.
        rc, out, err = h.gpuctl("diagnose", "-l", SELECTOR)
        self.assertEqual(rc, 4, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("SEVERITY"), out)
        self.assertTrue(lines[1].startswith("critical"), out)
        self.assertIn("What to run:", out)

    def test_a_healthy_node_passes_every_check(self):
        rc, out, err = h.gpuctl("diagnose", "-l", "kubernetes.io/hostname=dx-ok-0")
        self.assertEqual(rc, 0, err + out)
        self.assertEqual(out, "")
        self.assertIn("No problems found by 5 check(s).", err)

    def test_lists_it_may_not_read_skip_checks_and_refused_credentials_stop_it(self):
        # nobody may list nothing: every check is skipped, exit 5, each named.
        rc, out, err = h.gpuctl("diagnose", "-l", SELECTOR, context="nobody")
        self.assertEqual(rc, 5, err)
        self.assertIn("Warning: check node-not-ready skipped: could not list nodes: forbidden", err)
        # viewer may read nodes and pods: everything runs.
        r = h.gpuctl("diagnose", "-l", SELECTOR, "-o", "json", context="viewer")
        self.assertIn(r.rc, (0, 4), r.stderr)
        self.assertEqual(r.json["summary"]["checksSkipped"], 0)
        rc, out, err = h.gpuctl("diagnose", context="badtoken")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")


if __name__ == "__main__":
    h.main()
