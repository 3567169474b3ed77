"""`gpuctl diagnose`'s node side against real sshd hosts (issue 16): each node-side check fires on the
node of fleets/diagnose-nodes.yaml made to fail its way and stays silent on the healthy dn-ok-0; a
hung nvidia-smi ends within --ssh-timeout and reads as a broken driver; a cut-off Ready node is a
management-network problem; --no-ssh skips the node side without exit 5."""
import time

import harness as h

FLEET = "diagnose-nodes"
SELECTOR = "e2e.gpuctl.dev/fleet=" + FLEET
NODE_SIDE = ("node-unreachable,driver-broken,nvidia-smi-warnings,gpu-count-mismatch,driver-version-skew,xid-errors,"
             "ecc-errors,gpu-throttled,gpu-memory-high,gpu-idle-allocated,pcie-link-degraded,nvlink-down,"
             "fabric-manager-down,persistence-mode-off,driver-too-old-for-cuda")
SSH_TIMEOUT = 15


class DiagnoseNodesTest(h.TestCase):
    report = None

    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file(FLEET)
        cls.ns = h.unique_namespace("dxnodes")
        pod = h.gpu_pod("cuda12", cls.ns, node="dn-old-0", gpus=1)
        pod["spec"]["containers"][0]["image"] = "nvidia/cuda:12.4.1-base-ubuntu22.04"
        h.create(pod)
        h.wait_pod_phase("cuda12", cls.ns)
        cls.cut = h.info()["netns"]["ok"]
        if cls.cut:
            h.cut("dn-cut-0")
        started = time.monotonic()
        cls.result = h.gpuctl("diagnose", "-l", SELECTOR, "--check", NODE_SIDE, "-n", cls.ns, "-o", "json",
                              "--ssh-timeout", "%ds" % SSH_TIMEOUT, *h.ssh_flags(), timeout=120)
        cls.elapsed = time.monotonic() - started

    @classmethod
    def tearDownClass(cls):
        if cls.cut:
            h.uncut("dn-cut-0")
        h.delete_namespace(cls.ns)

    def findings(self, node, check):
        self.assertIn(self.result.rc, (0, 4), self.result.stderr)
        return [f for f in self.result.json["findings"] if f["node"] == node and f["check"] == check]

    def one(self, node, check):
        found = self.findings(node, check)
        self.assertEqual(len(found), 1, "%s on %s: %s" % (check, node, found))
        return found[0]

    def test_the_healthy_node_passes_every_node_side_check(self):
        self.assertEqual(self.result.rc, 4, self.result.stderr)
        doc = self.result.json
        self.assertEqual([f for f in doc["findings"] if f["node"] == "dn-ok-0"], [])
        verdict = [v for v in doc["nodes"] if v["node"] == "dn-ok-0"]
        self.assertEqual(verdict, [{"node": "dn-ok-0", "firstFailingLayer": None, "check": "", "summary": ""}])
        self.assertEqual([c["id"] for c in doc["checks"] if c["status"] == "skipped"], [])

    def test_broken_drivers_on_ready_nodes_are_critical_with_the_message_verbatim(self):
        nodrv = self.one("dn-nodrv-0", "driver-broken")
        self.assertEqual(nodrv["severity"], "critical")
        self.assertIn("driver_not_loaded", nodrv["summary"])
        self.assertIn("which Kubernetes still sees Ready", nodrv["summary"])
        self.assertIn("couldn't communicate with the NVIDIA driver", nodrv["evidence"][0]["text"])
        self.assertIn("gpuctl cordon dn-nodrv-0 --reason 'nvidia driver not loaded'", nodrv["remedy"])
        mism = self.one("dn-mism-0", "driver-broken")
        self.assertIn("Driver/library version mismatch", mism["evidence"][0]["text"])
        self.assertTrue(any("reboot" in r for r in mism["remedy"]), mism["remedy"])
        lost = self.one("dn-lost-0", "driver-broken")
        self.assertRegex(lost["summary"], r"^GPU 2 \(\S+\) of dn-lost-0 fails in nvidia-smi \(gpu_lost\); 3 of 4 GPUs answer")
        layers = {v["node"]: v["firstFailingLayer"] for v in self.result.json["nodes"]}
        self.assertEqual(layers["dn-nodrv-0"], "driver")
        self.assertEqual(layers["dn-lost-0"], "driver")

    def test_a_hung_nvidia_smi_ends_within_the_deadline_and_reads_as_a_broken_driver(self):
        hung = self.one("dn-hang-0", "driver-broken")
        self.assertEqual(hung["severity"], "critical")
        self.assertIn("did not finish before the deadline", hung["summary"])
        self.assertEqual(self.findings("dn-hang-0", "node-unreachable"), [])   # reached: its sshd answered
        self.assertLess(self.elapsed, SSH_TIMEOUT + 30, "diagnose took %.0fs with a %ds ssh deadline" % (self.elapsed, SSH_TIMEOUT))

    def test_gpu_count_xid_ecc_and_state_checks_fire_on_their_nodes(self):
        few = self.one("dn-few-0", "gpu-count-mismatch")
        self.assertIn("nvidia-smi sees 3, the device plugin registered 4 (capacity)", few["summary"])
        xids = {f["severity"]: f for f in self.findings("dn-xid-0", "xid-errors")}
        self.assertEqual(sorted(xids), ["critical", "info"], xids)
        self.assertRegex(xids["critical"]["summary"], r"^GPU 1 \(0000:11:1E\.0\) on dn-xid-0, last 60m: .*Xid 79")
        self.assertIn("RESTART_BM", xids["critical"]["summary"])
        self.assertIn("GPU has fallen off the bus", " ".join(e["text"] for e in xids["critical"]["evidence"]))
        self.assertIn("Xid 43", xids["info"]["summary"])
        ecc = self.one("dn-ecc-0", "ecc-errors")
        self.assertEqual(ecc["severity"], "error")
        self.assertIn("2 uncorrectable ECC error(s) since the driver loaded", ecc["summary"])
        self.assertIn("a row remap waits for a GPU reset", ecc["summary"])
        self.assertRegex(ecc["summary"], r"^GPU 1 ")
        hot = self.one("dn-hot-0", "gpu-throttled")
        self.assertIn("hw_slowdown, hw_thermal_slowdown", hot["summary"])
        self.assertIn("2 C from its slowdown temperature", hot["summary"])
        full = self.one("dn-full-0", "gpu-memory-high")
        self.assertRegex(full["summary"], r"^GPU 1 .* 97% of its memory in use \(22500 of 23028 MiB, threshold 90%\)")
        pcie = self.one("dn-pcie-0", "pcie-link-degraded")
        self.assertIn("PCIe link degraded (x4 of x16)", pcie["summary"])
        nvl = self.one("dn-nvl-0", "nvlink-down")
        self.assertIn("GPU 1 of dn-nvl-0: 2 of 12 NVLinks inactive (links 3, 5)", nvl["summary"])
        fab = self.one("dn-fab-0", "fabric-manager-down")
        self.assertEqual(fab["severity"], "critical")
        self.assertIn("fabric state In Progress", fab["summary"])
        rom = self.one("dn-rom-0", "nvidia-smi-warnings")
        self.assertIn("infoROM is corrupted", rom["summary"])
        blind = self.one("dn-klog-0", "xid-errors")
        self.assertEqual(blind["severity"], "info")
        self.assertIn("Operation not permitted", blind["evidence"][0]["text"])
        # Persistence mode is off in the capture: every node that did not turn it on says so (info).
        self.assertEqual(self.one("dn-lost-0", "persistence-mode-off")["severity"], "info")

    def test_the_driver_only_the_probe_knows(self):
        # dn-old-0 has no GFD labels: its 510.47.03 comes from nvidia-smi over ssh.
        skew = self.one("dn-old-0", "driver-version-skew")
        self.assertRegex(skew["summary"], r"^dn-old-0 runs driver 510\.47\.03, older than the NVIDIA-A10G pool's 515\.105\.01")
        self.assertTrue(skew["evidence"][0]["source"].startswith("ssh dn-old-0"), skew["evidence"])
        cuda = [f for f in self.result.json["findings"] if f["check"] == "driver-too-old-for-cuda"]
        self.assertEqual(len(cuda), 1, cuda)
        self.assertIn("needs CUDA 12.4", cuda[0]["summary"])
        self.assertIn("dn-old-0's driver 510.47.03", cuda[0]["summary"])
        # The CUDA pod holds one of dn-old-0's GPUs, which sat idle during the probe.
        idle = self.one("dn-old-0", "gpu-idle-allocated")
        self.assertEqual(idle["severity"], "info")
        self.assertIn("pods hold 1 GPU(s) but only 0 were busy during the probe", idle["summary"])
        self.assertEqual(self.findings("dn-ok-0", "gpu-idle-allocated"), [])
        # No XML on dn-csv-0: the CSV answered, so its driver is known and nothing is broken.
        self.assertEqual(self.findings("dn-csv-0", "driver-broken"), [])
        r = h.gpuctl("gpus", "dn-csv-0", "-o", "json", *h.ssh_flags())
        self.assertEqual(r.rc, 0, r.stderr)
        (item,) = r.json["items"]
        self.assertEqual(len(item["gpus"]), 2)

    def test_a_ready_node_cut_off_is_a_management_network_problem(self):
        if not self.cut:
            self.skipTest(h.info()["netns"]["error"])
        cut = self.one("dn-cut-0", "node-unreachable")
        self.assertEqual(cut["severity"], "error")
        self.assertIn("while Kubernetes sees it Ready: the management network or ssh", cut["summary"])
        layers = {v["node"]: v["firstFailingLayer"] for v in self.result.json["nodes"]}
        self.assertEqual(layers["dn-cut-0"], "reachable")

    def test_no_ssh_skips_the_node_side_on_request(self):
        rc, out, err = h.gpuctl("diagnose", "-l", "kubernetes.io/hostname=dn-nodrv-0", "--check", NODE_SIDE, "--no-ssh")
        self.assertEqual(rc, 0, err)
        self.assertIn("13 node-side check(s) skipped (--no-ssh)", err)
        self.assertIn("No problems found by 2 check(s).", err)
        self.assertNotIn("could not run", err)


if __name__ == "__main__":
    h.main()
