"""gpuctl gpus against real sshd hosts: three products that answer, and the ways real nodes fail
(a hung nvidia-smi, a driver/library mismatch, a node cut off from the network, a changed host
key, one GPU fallen off the bus), each classified; the hung node's deadline bounds the run."""
import json
import os
import re
import tempfile
import time

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=gpus-e2e"
DEADLINE = 6


def gpus(*args, timeout=120):
    return h.gpuctl("gpus", *args, *h.ssh_flags(), "--ssh-timeout", "%ds" % DEADLINE, "--connect-timeout", "2s",
                    timeout=timeout)


class GpusTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("gpus-e2e")
        cls.ns = h.unique_namespace("gpus")
        cls.addClassCleanup(h.delete_namespace, cls.ns)
        h.create([h.gpu_pod("train", cls.ns, node="gp-v100-0", gpus=3)])
        h.wait_pod_phase("train", cls.ns)
        t0 = time.monotonic()
        cls.result = gpus("-l", SELECTOR, "-o", "json")
        cls.elapsed = time.monotonic() - t0
        cls.doc = json.loads(cls.result.stdout)
        cls.items = {i["name"]: i for i in cls.doc["items"]}

    def test_exit_code_and_schema(self):
        self.assertEqual(self.result.rc, 1, self.result.stderr)  # some nodes did not answer
        self.assertEqual(self.doc["kind"], "GPUList")
        self.assertEqual(self.doc["apiVersion"], "gpuctl.io/v1alpha1")
        self.assertEqual(sorted(self.items), sorted(n for n in h.info()["nodes"] if n.startswith("gp-")))

    def test_answering_nodes_match_their_captures_and_kubernetes(self):
        expect = {"gp-a100-0": (8, "NVIDIA A100-SXM4-40GB", "510.47.03"),
                  "gp-v100-0": (4, "Tesla V100-PCIE-32GB", "460.39"),
                  "gp-t4-0": (1, "Tesla T4", "515.105.01")}
        for name, (count, product, driver) in expect.items():
            item = self.items[name]
            self.assertEqual(item["outcome"], "ok", item)
            self.assertEqual(len(item["gpus"]), count)
            self.assertEqual({g["productName"] for g in item["gpus"]}, {product})
            self.assertEqual(item["driverVersion"], driver)
            self.assertEqual(len({g["uuid"] for g in item["gpus"]}), count)  # per-GPU UUIDs
            node = h.kubectl("get", "node", name, "-o", "json")
            self.assertEqual(item["kubernetes"]["allocatable"], int(node["status"]["allocatable"]["nvidia.com/gpu"]))
            self.assertEqual(item["address"], h.info()["nodes"][name]["internal_ip"])
        v100 = self.items["gp-v100-0"]["kubernetes"]
        self.assertEqual(v100["used"], 3)
        self.assertEqual(v100["pods"], [{"namespace": self.ns, "name": "train", "resources": {"nvidia.com/gpu": 3}}])

    def test_each_failure_is_classified(self):
        outcomes = {n: i["outcome"] for n, i in self.items.items()}
        self.assertEqual(outcomes["gp-v100-hang"], "timed_out")
        self.assertEqual(outcomes["gp-v100-mm"], "driver_library_mismatch")
        self.assertEqual(outcomes["gp-t4-cut"], "unreachable")
        self.assertEqual(outcomes["gp-t4-key"], "host_key_mismatch")
        self.assertEqual(outcomes["gp-a100-lost"], "partial")
        lost = self.items["gp-a100-lost"]
        self.assertEqual(sorted(g["index"] for g in lost["gpus"]), [0, 1, 2, 4, 5, 6, 7])
        self.assertEqual(len(lost["failedGpus"]), 1)
        self.assertEqual(lost["failedGpus"][0]["index"], 3)
        self.assertIn("GPU is lost", self.items["gp-a100-lost"]["message"])
        groups = {g["outcome"]: g for g in self.doc["failures"]}
        self.assertEqual(groups["timed_out"]["nodes"], ["gp-v100-hang"])
        self.assertEqual(sum(g["count"] for g in self.doc["failures"]), 5)

    def test_the_hung_node_costs_one_deadline_not_more(self):
        # Every host runs at once; the hung one is killed at its deadline. The two list calls
        # and ssh start-up are the margin.
        self.assertGreaterEqual(self.items["gp-v100-hang"]["durationMs"], DEADLINE * 1000)
        self.assertLess(self.elapsed, DEADLINE + 10, "the whole run took %.1fs" % self.elapsed)

    def test_table_groups_failures_and_failed_hosts_file_names_them(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "failed")
            rc, out, err = gpus("-l", SELECTOR, "--failed-hosts", path)
            self.assertEqual(rc, 1, err)
            with open(path) as f:
                failed = f.read().split()
        self.assertEqual(sorted(failed), ["gp-a100-lost", "gp-t4-cut", "gp-t4-key", "gp-v100-hang", "gp-v100-mm"])
        self.assertIn("5 of 8 node(s) did not fully answer:", out)
        self.assertIn("  timed_out (1): no answer within --ssh-timeout %ds" % DEADLINE, out)
        self.assertIn("gp-a100-lost   3     gpu_lost", out)
        # A re-run over just the healthy nodes exits 0.
        rc, out, err = gpus("gp-a100-0", "gp-t4-0", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual([i["outcome"] for i in json.loads(out)["items"]], ["ok", "ok"])

    def test_unknown_node_and_bad_flags(self):
        rc, out, err = gpus("gp-nope")
        self.assertEqual((rc, out), (1, ""), err)
        self.assertIn("no such node: gp-nope", err)
        rc, out, err = h.gpuctl("gpus", "--ssh-option", "novalue")
        self.assertEqual((rc, out), (2, ""), err)
        rc, out, err = h.gpuctl("gpus", "--ssh-host-from", "bogus")
        self.assertEqual((rc, out), (2, ""), err)

    def test_nodes_live_adds_the_nodes_own_word(self):
        rc, out, err = h.gpuctl("nodes", "-l", SELECTOR, "--live", *h.ssh_flags(), "--ssh-timeout", "%ds" % DEADLINE,
                                "--connect-timeout", "2s", "-o", "json")
        self.assertEqual(rc, 1, err)  # some nodes did not answer
        items = {i["name"]: i for i in json.loads(out)["items"]}
        v100 = items["gp-v100-0"]["live"]
        self.assertEqual(v100["outcome"], "ok")
        self.assertEqual(v100["driverVersion"], "460.39")
        self.assertEqual(v100["gpusAnswered"], 4)
        gpus_of = self.items["gp-v100-0"]["gpus"]
        self.assertEqual(v100["memoryUsedMiB"], sum(g["memory"]["usedMiB"] for g in gpus_of))
        self.assertEqual(items["gp-t4-cut"]["live"]["outcome"], "unreachable")
        self.assertEqual(items["gp-v100-mm"]["live"]["outcome"], "driver_library_mismatch")
        # Kubernetes' numbers are the same as without --live.
        self.assertEqual(items["gp-v100-0"]["gpus"]["used"], 3)
        rc, out, err = h.gpuctl("nodes", "-l", SELECTOR, "--live", *h.ssh_flags(), "--ssh-timeout", "%ds" % DEADLINE,
                                "--connect-timeout", "2s")
        self.assertRegex(out, r"gp-v100-0 .* ok +460\.39 +\d+% +\d+/130040 MiB")

    def test_watch_refreshes(self):
        r = h._run(["timeout", "-s", "INT", "9", h.gpuctl_bin(), "gpus", "gp-t4-0", "--watch", "1s", *h.ssh_flags()],
                   env={**os.environ, "KUBECONFIG": h.info()["kubeconfig"]}, timeout=30)
        frames = len(re.findall(r"^gp-t4-0 +ok ", r.stdout, re.M))
        self.assertGreaterEqual(frames, 2, r.stdout + r.stderr)


if __name__ == "__main__":
    h.main()
