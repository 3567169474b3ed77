"""gpuctl gpus --via prometheus against a real Prometheus (tests/cluster/sim_prometheus.py) scraping
dcgm-exporter expositions every second: real captures (tests/fixtures/dcgm-exporter) with Hostname
relabelled to this suite's nodes (prefix vprom-), one rendered from the nvidia-smi XML the node's
sshd host replays (read both ways, the numbers agree), a relabelled setup, a node whose exporter
stopped (stale), one without an exporter, and the URL and credential failures."""
import json
import re
import time

import harness as h

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - python3-prometheus-client (scripts/install-deps.sh)
    text_string_to_metric_families = None

FLEET = """
name: gpus-via-prometheus
nodes:
  - namePrefix: vprom-t4-
    count: 2
    cpu: "16"
    memory: 60Gi
    gpus: 1
    ssh: {fixture: telegraf__tesla-t4__515.105.01__v11.xml}
  - name: vprom-a100-0
    cpu: "96"
    memory: 1152Gi
    gpus: 2
  - name: vprom-rendered
    cpu: "16"
    memory: 60Gi
    gpus: 1
    ssh: {fixture: telegraf__tesla-t4__515.105.01__v11.xml}
  - name: vprom-relabel
    cpu: "16"
    memory: 60Gi
    gpus: 1
  - name: vprom-stale
    cpu: "16"
    memory: 60Gi
    gpus: 1
  - name: vprom-none
    cpu: "16"
    memory: 60Gi
    gpus: 1
  - name: vprom-lost
    cpu: "96"
    memory: 1152Gi
    gpus: 2
"""
T4 = "dcgm-exporter/datadog__t4-two-hosts.prom"
FAULTS = "dcgm-exporter/hand-edited__a100-two-gpus-faults.prom"


def expected(text, hostname):
    """{(gpu index, metric): value} of one Hostname, read with Prometheus' official text parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("Hostname") == hostname:
                out[(int(s.labels["gpu"]), s.name)] = (s.value, s.labels)
    return out


class GpusViaPrometheusTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        if text_string_to_metric_families is None:
            raise RuntimeError("python3-prometheus-client is missing: run scripts/install-deps.sh")
        h.apply_fleet(FLEET, source="gpus-via-prometheus fleet")
        cls.prom = h.enable_prometheus()
        cls.t4 = h.dcgm_capture(T4, {"424773df46e0": "vprom-t4-0", "551bdf382151": "vprom-t4-1"})
        cls.faults = h.dcgm_capture(FAULTS, {"dgx-a07": "vprom-a100-0"})
        # Each node is its own target (as a DaemonSet's pods are), serving its own lines.
        for node in ("vprom-t4-0", "vprom-t4-1"):
            lines = [l for l in cls.t4.splitlines(True) if l.startswith("#") or 'Hostname="%s"' % node in l]
            h.serve_dcgm_metrics(node, "".join(lines))
        h.serve_dcgm_metrics("vprom-a100-0", cls.faults)
        cls.rendered = h.render_dcgm_metrics("vprom-rendered")
        h.serve_dcgm_metrics("vprom-rendered", cls.rendered)
        # The exporter pod's name as Hostname; the node only in the label relabelling wrote.
        relabel = h.dcgm_capture(FAULTS, {"dgx-a07": "nvidia-dcgm-exporter-x7k2q"})
        h.serve_dcgm_metrics("vprom-relabel", relabel, target_labels={"node": "vprom-relabel"})
        h.serve_dcgm_metrics("vprom-stale", h.dcgm_capture(FAULTS, {"dgx-a07": "vprom-stale"}))
        h.stop_dcgm_metrics("vprom-stale")
        time.sleep(4)  # older than --prometheus-stale-after 3s below
        cls.result = cls.gpus("vprom-t4-0", "vprom-t4-1", "vprom-a100-0", "vprom-rendered", "vprom-relabel",
                              "vprom-stale", "vprom-none", "--prometheus-stale-after", "3s")
        cls.items = {i["name"]: i for i in json.loads(cls.result.stdout)["items"]}

    @classmethod
    def gpus(cls, *args, url=None):
        return h.gpuctl("gpus", "--via", "prometheus", "--prometheus-url", url or cls.prom["url"], "-o", "json", *args)

    def test_numbers_per_node_and_gpu_are_the_exposition_served(self):
        for node in ("vprom-t4-0", "vprom-t4-1", "vprom-a100-0"):
            item = self.items[node]
            served = expected(self.t4 if "t4" in node else self.faults, node)
            self.assertEqual(item["outcome"], "ok", item)
            self.assertEqual(item.get("via"), "prometheus")
            indices = sorted({i for i, _ in served})
            self.assertEqual([g["index"] for g in item["gpus"]], indices)
            for g in item["gpus"]:
                i = g["index"]
                labels = next(lbl for (gi, _), (_, lbl) in served.items() if gi == i)
                self.assertEqual(g["uuid"], labels["UUID"])
                self.assertEqual(g["productName"], labels["modelName"])
                self.assertEqual(item["driverVersion"], labels["DCGM_FI_DRIVER_VERSION"])
                for metric, key in (("DCGM_FI_DEV_FB_FREE", "freeMiB"), ("DCGM_FI_DEV_FB_TOTAL", "totalMiB"),
                                    ("DCGM_FI_DEV_FB_RESERVED", "reservedMiB")):
                    if (i, metric) in served:
                        self.assertEqual(g["memory"][key], served[(i, metric)][0], metric)
                if (i, "DCGM_FI_DEV_FB_USED") in served:
                    self.assertEqual(g["memory"]["usedMiB"], served[(i, "DCGM_FI_DEV_FB_USED")][0])
                if (i, "DCGM_FI_DEV_GPU_TEMP") in served:
                    self.assertEqual(g["temperature"]["gpuC"], served[(i, "DCGM_FI_DEV_GPU_TEMP")][0])
                if (i, "DCGM_FI_DEV_POWER_USAGE") in served:
                    self.assertAlmostEqual(g["power"]["drawW"], served[(i, "DCGM_FI_DEV_POWER_USAGE")][0], places=3)
                if (i, "DCGM_FI_DEV_GPU_UTIL") in served:
                    self.assertEqual(g["utilization"]["gpuPercent"], served[(i, "DCGM_FI_DEV_GPU_UTIL")][0])
                if (i, "DCGM_FI_DEV_SM_CLOCK") in served:
                    self.assertEqual(g["clocks"]["smMHz"], served[(i, "DCGM_FI_DEV_SM_CLOCK")][0])

    def test_faults_read_from_the_exporter(self):
        a100 = self.items["vprom-a100-0"]
        g0 = a100["gpus"][0]
        self.assertEqual(g0["ecc"]["volatile"]["uncorrected"], 2)
        self.assertEqual(g0["remappedRows"]["failure"], True)
        self.assertEqual(g0["clocksEventReasons"], ["hw_slowdown", "hw_thermal_slowdown"])
        self.assertIn("DCGM health MEM: FAIL (DCGM_FR_VOLATILE_DBE_DETECTED)", g0["warnings"])
        self.assertIsNone(a100["gpus"][1]["temperature"]["memoryC"])  # DCGM's blank, not 9e18

    def test_rendered_node_reads_the_same_over_ssh(self):
        ssh = h.gpuctl("gpus", "vprom-rendered", *h.ssh_flags(), "-o", "json")
        self.assertEqual(ssh.rc, 0, ssh.stderr)
        by_ssh = json.loads(ssh.stdout)["items"][0]
        by_prom = self.items["vprom-rendered"]
        self.assertEqual(by_prom["outcome"], by_ssh["outcome"])
        self.assertEqual(by_prom["driverVersion"], by_ssh["driverVersion"])
        for a, b in zip(by_prom["gpus"], by_ssh["gpus"], strict=True):
            for path in (("uuid",), ("productName",), ("memory", "usedMiB"), ("memory", "freeMiB"),
                         ("memory", "totalMiB"), ("temperature", "gpuC"), ("utilization", "gpuPercent")):
                va, vb = a, b
                for k in path:
                    va, vb = va[k], vb[k]
                self.assertEqual(va, vb, "/".join(path))

    def test_relabelled_node_label_finds_the_node(self):
        item = self.items["vprom-relabel"]
        self.assertEqual(item["outcome"], "ok", item)
        self.assertEqual(len(item["gpus"]), 2)

    def test_stopped_exporter_is_stale_with_its_last_numbers(self):
        item = self.items["vprom-stale"]
        self.assertEqual(item["outcome"], "stale", item)
        self.assertRegex(item["message"], r"newest sample is \d+s old \(--prometheus-stale-after 3s\)")
        self.assertEqual(len(item["gpus"]), 2)
        self.assertEqual(item["gpus"][0]["memory"]["usedMiB"], 78301)

    def test_gpu_gone_from_the_exporter_is_no_longer_counted(self):
        # A GPU that fell off the bus (Xid 79) leaves the exporter's output while the exporter
        # still answers: its old series must not stand in for it from the lookback window.
        both = h.dcgm_capture(FAULTS, {"dgx-a07": "vprom-lost"})
        h.serve_dcgm_metrics("vprom-lost", both)
        before = json.loads(self.gpus("vprom-lost").stdout)["items"][0]
        self.assertEqual([g["index"] for g in before["gpus"]], [0, 1], before)
        one = "".join(l for l in both.splitlines(True) if l.startswith("#") or 'gpu="0"' not in l)
        h.serve_dcgm_metrics("vprom-lost", one)
        after = json.loads(self.gpus("vprom-lost").stdout)["items"][0]
        self.assertEqual(after["outcome"], "ok", after)
        self.assertEqual([g["index"] for g in after["gpus"]], [1], after)

    def test_node_without_exporter(self):
        item = self.items["vprom-none"]
        self.assertEqual(item["outcome"], "no_exporter", item)
        self.assertIn("Hostname", item["message"])
        self.assertEqual(item["gpus"], [])
        self.assertNotEqual(self.result.rc, 0)  # not every node answered

    def test_wrong_url_is_one_line_naming_the_flag(self):
        r = self.gpus("vprom-t4-0", url="http://127.0.0.1:9")
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("--prometheus-url", r.stderr)
        # Something that answers HTTP but is not Prometheus: the exposition server itself.
        r = self.gpus("vprom-t4-0", url="http://127.0.0.1:%d" % self.prom["exposition_port"])
        self.assertEqual(r.rc, 1, r)
        self.assertIn("not Prometheus' API JSON", r.stderr)

    def test_credentials(self):
        secure = self.prom["secure_url"]
        ca = ["--prometheus-ca-file", self.prom["ca_file"]]
        wrong = h.unique_namespace("pw")  # any text that is not the password
        with open(self.prom["password_file"] + ".wrong", "w") as f:
            f.write(wrong + "\n")
        r = self.gpus("vprom-t4-0", *ca, "--prometheus-username", self.prom["username"],
                      "--prometheus-password-file", self.prom["password_file"] + ".wrong", url=secure)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("HTTP 401", r.stderr)
        self.assertIn("--prometheus-password-file", r.stderr)
        self.assertNotIn(wrong, r.stderr)
        r = self.gpus("vprom-t4-0", *ca, url=secure)  # no credentials at all
        self.assertEqual(r.rc, 1, r)
        self.assertIn("HTTP 401", r.stderr)
        r = self.gpus("vprom-t4-0", "--prometheus-username", self.prom["username"],
                      "--prometheus-password-file", self.prom["password_file"], url=secure)
        self.assertEqual(r.rc, 1, r)  # the cluster's CA is not in the system store
        self.assertIn("--prometheus-ca-file", r.stderr)
        r = self.gpus("vprom-t4-0", *ca, "--prometheus-username", self.prom["username"],
                      "--prometheus-password-file", self.prom["password_file"], url=secure)
        self.assertEqual(r.rc, 0, r)
        item = json.loads(r.stdout)["items"][0]
        self.assertEqual(item["outcome"], "ok")
        self.assertEqual(item["gpus"][0]["uuid"], "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e")

    def test_bad_flags_are_usage_errors(self):
        r = self.gpus("vprom-t4-0", "--prometheus-label", "host=Hostname")
        self.assertEqual(r.rc, 2, r)
        self.assertIn("unknown role \"host\"", r.stderr)
        r = h.gpuctl("gpus", "--via", "prometheus", "vprom-t4-0", env={"GPUCTL_PROMETHEUS_URL": ""})
        self.assertEqual(r.rc, 2, r)
        self.assertRegex(r.stderr, re.escape("--prometheus-url URL (or $GPUCTL_PROMETHEUS_URL)"))


if __name__ == "__main__":
    h.main()
