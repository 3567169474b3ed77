"""One fleet read three ways (issue 21): over ssh, through probe pods and from the DCGM exporter's
metrics in Prometheus, by the real binary against the real API server, kwok running the probe pods
(tests/cluster/sim_probe_pods.py) and a real Prometheus scraping expositions rendered from the same
nvidia-smi capture each node's sshd host replays (tests/cluster/sim_prometheus.py). Where the
sources overlap they must agree: the same outcome per node and the same numbers per GPU; where
they cannot (a driver that does not load leaves no exporter running), each says so in its words,
and diagnose skips what metrics cannot answer instead of passing it."""
import json

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=node-sources"
HEALTHY = ["via3-3060-0", "via3-3060-1"]
BROKEN = "via3-3060-mm"
# The fields every source reports for a GPU (Prometheus: the default counters).
SHARED = (("index",), ("uuid",), ("productName",), ("pciBusId",), ("memory", "usedMiB"), ("memory", "freeMiB"),
          ("temperature", "gpuC"), ("utilization", "gpuPercent"), ("clocks", "smMHz"))


def at(obj, path):
    for k in path:
        obj = obj[k]
    return obj


class NodeSourcesTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("node-sources")
        cls.ns = h.unique_namespace("via3")
        cls.addClassCleanup(h.delete_namespace, cls.ns)
        cls.prom = h.enable_prometheus()
        for node in HEALTHY:  # the broken node's exporter cannot start: NVML fails there too
            h.serve_dcgm_metrics(node, h.render_dcgm_metrics(node))
        cls.reads = {
            "ssh": h.gpuctl("gpus", "-l", SELECTOR, *h.ssh_flags(), "-o", "json"),
            "pod": h.gpuctl("gpus", "-l", SELECTOR, "--via", "pod", "--probe-namespace", cls.ns, "-o", "json"),
            "prometheus": h.gpuctl("gpus", "-l", SELECTOR, "--via", "prometheus", "--prometheus-url",
                                   cls.prom["url"], "-o", "json"),
        }
        cls.items = {via: {i["name"]: i for i in json.loads(r.stdout)["items"]} for via, r in cls.reads.items()}

    def test_each_read_names_its_source_and_fails_on_the_broken_node(self):
        for via, r in self.reads.items():
            self.assertEqual(r.rc, 1, (via, r.stderr))  # the broken node did not answer
            self.assertEqual(sorted(self.items[via]), sorted(HEALTHY + [BROKEN]), via)
            for item in self.items[via].values():
                self.assertEqual(item["via"], via, item["name"])
        prom = self.items["prometheus"][HEALTHY[0]]
        self.assertIsNotNone(prom["sampledAt"])  # when Prometheus sampled it; null for the probe
        self.assertIsNone(self.items["ssh"][HEALTHY[0]]["sampledAt"])

    def test_healthy_nodes_agree_on_outcome_driver_and_every_shared_gpu_number(self):
        for node in HEALTHY:
            ssh = self.items["ssh"][node]
            self.assertEqual(ssh["outcome"], "ok", ssh)
            self.assertEqual(len(ssh["gpus"]), 1)
            for via in ("pod", "prometheus"):
                other = self.items[via][node]
                self.assertEqual(other["outcome"], "ok", (via, other))
                self.assertEqual(other["driverVersion"], ssh["driverVersion"], via)
                for a, b in zip(other["gpus"], ssh["gpus"], strict=True):
                    for path in SHARED:
                        self.assertEqual(at(a, path), at(b, path), (via, node, "/".join(path)))
                    self.assertAlmostEqual(a["power"]["drawW"], b["power"]["drawW"], places=2)
                    # nvidia-smi rounds used, free and reserved each on its own: the exporter's
                    # total (their sum where FB_TOTAL is not exported) may miss it by 1 MiB.
                    self.assertLessEqual(abs(a["memory"]["totalMiB"] - b["memory"]["totalMiB"]), 1, via)
        # The probe pod ran the same script: the same transcript, field for field.
        for node in HEALTHY:
            self.assertEqual(self.items["pod"][node]["gpus"], self.items["ssh"][node]["gpus"], node)

    def test_the_broken_node_in_each_sources_words(self):
        self.assertEqual(self.items["ssh"][BROKEN]["outcome"], "driver_library_mismatch")
        self.assertEqual(self.items["pod"][BROKEN]["outcome"], "driver_library_mismatch")
        self.assertEqual(self.items["pod"][BROKEN]["message"], self.items["ssh"][BROKEN]["message"])
        prom = self.items["prometheus"][BROKEN]
        self.assertEqual(prom["outcome"], "no_exporter", prom)
        self.assertEqual(prom["gpus"], [])

    def test_nodes_live_says_where_each_node_came_from(self):
        r = h.gpuctl("nodes", "--live", "-l", SELECTOR, "--via", "pod", "--probe-namespace", self.ns, "-o", "json")
        self.assertEqual(r.rc, 1, r.stderr)
        live = {i["name"]: i["live"] for i in r.json["items"]}
        self.assertEqual({n: l["via"] for n, l in live.items()}, {n: "pod" for n in HEALTHY + [BROKEN]})
        self.assertEqual(live[HEALTHY[0]]["outcome"], "ok")
        self.assertEqual(live[BROKEN]["outcome"], "driver_library_mismatch")
        self.assertEqual(h.kubectl("get", "pods", "-n", self.ns, "-o", "json")["items"], [])  # none left

    def test_diagnose_from_metrics_skips_what_they_cannot_answer(self):
        checks = "node-unreachable,driver-broken,nvlink-down,ecc-errors,gpu-memory-high"
        r = h.gpuctl("diagnose", "-l", SELECTOR, "--check", checks, "--via", "prometheus", "--prometheus-url",
                     self.prom["url"], "-o", "json")
        report = r.json
        status = {c["id"]: c for c in report["checks"]}
        for skipped in ("driver-broken", "nvlink-down"):
            self.assertEqual(status[skipped]["status"], "skipped", status[skipped])
            self.assertIn("--via prometheus", status[skipped]["skippedBecause"])
        for ran in ("ecc-errors", "gpu-memory-high"):
            self.assertEqual(status[ran]["status"], "pass", status[ran])
        unreachable = [f for f in report["findings"] if f["check"] == "node-unreachable"]
        self.assertEqual([f["node"] for f in unreachable], [BROKEN])
        self.assertIn("no DCGM exporter series", unreachable[0]["summary"])
        # Evidence names where it was read: never ssh, which this run did not use.
        self.assertEqual(unreachable[0]["evidence"][0]["source"], "Prometheus %s: dcgm-exporter" % BROKEN)
        self.assertEqual(r.rc, 4, r.stderr)  # an error finding; the skips are the user's choice, not exit 5

        # The probe sees what metrics cannot: the same checks through probe pods name the driver.
        r = h.gpuctl("diagnose", "-l", SELECTOR, "--check", checks, "--via", "pod", "--probe-namespace", self.ns,
                     "-o", "json")
        broken = [f for f in r.json["findings"] if f["check"] == "driver-broken"]
        self.assertEqual([f["node"] for f in broken], [BROKEN])
        self.assertIn("driver_library_mismatch", broken[0]["summary"])
        self.assertEqual(broken[0]["evidence"][0]["source"], "probe pod on %s: nvidia-smi" % BROKEN)
        # Its node commands in a node debug pod, not over the ssh this run did without.
        debug = "kubectl debug node/%s -it --profile=sysadmin --image=busybox:1.36 -- chroot /host sudo reboot" % BROKEN
        self.assertTrue([r for r in broken[0]["remedy"] if r.startswith(debug)], broken[0]["remedy"])
        self.assertFalse([r for r in broken[0]["remedy"] if r.startswith("ssh ")], broken[0]["remedy"])


if __name__ == "__main__":
    h.main()
