"""`gpuctl diagnose -o junit|prometheus` and `--suppress` against the real control plane (issue 15),
judged by the readers that consume them: xmllint against junit-10.xsd, the schema Jenkins' xunit
plugin validates JUnit reports with (tests/fixtures/junit, SOURCES.md), and the official Python
client's parser of the Prometheus text format. Both readers are required: this suite fails, never
skips, when one is missing (scripts/install-deps.sh installs libxml2-utils and
python3-prometheus-client). The nodes are diagnose's own fleet (tests/e2e/fleets/diagnose-e2e.yaml:
dx-sick-0 has 2 unhealthy GPUs, dx-down-0 is NotReady, dx-ok-0 is healthy)."""
import os
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=diagnose-e2e"
SICK = "kubernetes.io/hostname=dx-sick-0"
# The checks that read only nodes: on dx-sick-0 gpu-unhealthy-devices is then the only error.
NODE_CHECKS = "node-not-ready,node-network-unavailable,node-pressure,device-plugin-missing,gpu-unhealthy-devices"
XSD = Path(__file__).resolve().parent.parent / "fixtures" / "junit" / "jenkins-xunit__junit-10.xsd"
LAYERS = ["reachable", "driver", "gpus_present", "gpu_errors", "node", "network", "device_plugin", "gpus_registered",
          "gpus_healthy", "gpu_pods", "workload"]
# The JSON schema's layer names as Prometheus labels them.
LAYER_LABEL = {"reachable": "reachable", "driver": "driver", "GPUs present": "gpus_present", "GPU errors": "gpu_errors",
               "node": "node", "network": "network", "device plugin": "device_plugin",
               "GPUs registered": "gpus_registered", "GPUs healthy": "gpus_healthy", "GPU pods": "gpu_pods",
               "workload": "workload"}
FAMILIES = ["gpuctl_diagnose_findings", "gpuctl_diagnose_suppressed_findings", "gpuctl_diagnose_check_status",
            "gpuctl_diagnose_check_duration_seconds", "gpuctl_diagnose_node_layer_ok",
            "gpuctl_diagnose_node_failing_layer", "gpuctl_diagnose_last_run_timestamp_seconds"]


def xmllint():
    path = shutil.which("xmllint")
    if not path:
        raise AssertionError("xmllint is missing: apt-get install libxml2-utils (scripts/install-deps.sh)")
    return path


def prometheus_parser():
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as e:
        raise AssertionError("prometheus_client is missing for /usr/bin/python3: apt-get install "
                             "python3-prometheus-client (scripts/install-deps.sh)") from e
    return text_string_to_metric_families


class DiagnoseFormatsTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("diagnose-e2e")
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-dx-formats-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def validate_junit(self, xml_text, name):
        path = self.write(name, xml_text)
        p = subprocess.run([xmllint(), "--noout", "--schema", str(XSD), path], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, "junit-10.xsd refuses %s:\n%s\n%s" % (name, p.stderr, xml_text[:4000]))
        return ET.fromstring(xml_text.encode())

    def parse_prometheus(self, text):
        """The families as prometheus_client reads them, after the rules node_exporter's textfile
        collector adds: HELP and TYPE before a family's samples, no timestamps, no series twice."""
        parse = prometheus_parser()
        families = {f.name: f for f in parse(text)}
        seen, declared = set(), set()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                declared.add(line.split()[2])
                continue
            if line.startswith("#") or not line:
                continue
            series, _, value = line.rpartition(" ")
            self.assertNotIn(" ", value)
            self.assertNotIn(series, seen, "series written twice: " + series)
            seen.add(series)
            self.assertIn(series.split("{")[0], declared, "sample before its TYPE: " + line)
        for family in families.values():
            self.assertEqual(family.type, "gauge", family.name)
            self.assertTrue(family.documentation, family.name)
            for s in family.samples:
                self.assertIsNone(s.timestamp, "the textfile collector refuses timestamps: %s" % (s,))
        return families

    def wait_for_down_node(self):
        """dx-down-0 turns NotReady once the node lifecycle controller sees no heartbeat; wait for it,
        so the runs compared below see one state."""
        def seen():
            r = h.gpuctl("diagnose", "-l", SELECTOR, "--check", "node-not-ready", "-o", "json")
            return r if r.rc == 4 and any(f["node"] == "dx-down-0" for f in r.json["findings"]) else None
        h.wait_for(seen, 120, "diagnose to find dx-down-0 not ready")

    def test_junit_is_valid_for_ci_with_one_testcase_per_object(self):
        self.wait_for_down_node()
        rc, out, err = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, "-o", "junit")
        self.assertIn(rc, (4, 5), err)
        root = self.validate_junit(out, "report.xml")
        self.assertEqual(root.tag, "testsuites")
        suites = {s.get("name"): s for s in root.findall("testsuite")}
        listed = h.gpuctl("diagnose", "--list-checks", "-o", "json").json["items"]
        self.assertEqual(sorted(suites), sorted(c["id"] for c in listed))
        for name, suite in suites.items():
            cases = suite.findall("testcase")
            self.assertGreater(len(cases), 0, name)
            self.assertEqual(int(suite.get("tests")), len(cases), name)
            self.assertEqual(int(suite.get("failures")), sum(1 for c in cases if c.find("failure") is not None))
            self.assertEqual(int(suite.get("skipped")), sum(1 for c in cases if c.find("skipped") is not None))
            names = [c.get("name") for c in cases]
            self.assertEqual(len(names), len(set(names)), "a testcase twice in %s: %s" % (name, names))
            for c in cases:
                self.assertEqual(c.get("classname"), "gpuctl.diagnose." + name)

        sick = {c.get("name"): c for c in suites["gpu-unhealthy-devices"].findall("testcase")}
        failure = sick["Node/dx-sick-0"].find("failure")
        self.assertEqual(failure.get("type"), "error")
        self.assertEqual(failure.get("message"), "dx-sick-0: 2 of 8 nvidia.com/gpu unhealthy (capacity 8, allocatable 6)")
        self.assertIn("run: gpuctl gpus dx-sick-0", failure.text)
        down = {c.get("name"): c for c in suites["node-not-ready"].findall("testcase")}
        self.assertEqual(down["Node/dx-down-0"].find("failure").get("type"), "critical")
        self.assertEqual(int(root.get("failures")), sum(int(s.get("failures")) for s in suites.values()))

        # nobody may list nothing: the checks are skipped, each a testcase saying why, still valid.
        rc, out, err = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, "-o", "junit", context="nobody")
        self.assertEqual(rc, 5, err)
        root = self.validate_junit(out, "nobody.xml")
        (case,) = root.findall("testsuite[@name='node-not-ready']/testcase")
        self.assertEqual(case.find("skipped").get("message")[:40], "could not run: could not list nodes: for")

    def test_prometheus_parses_and_agrees_with_the_json_report(self):
        self.wait_for_down_node()
        r = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, "-o", "prometheus")
        self.assertIn(r.rc, (4, 5), r.stderr)
        families = self.parse_prometheus(r.stdout)
        self.assertEqual(sorted(families), sorted(FAMILIES))
        doc = h.gpuctl("diagnose", "--no-ssh", "-l", SELECTOR, "-o", "json").json

        layer_ok = {(s.labels["node"], s.labels["layer"]): s.value
                    for s in families["gpuctl_diagnose_node_layer_ok"].samples}
        for verdict in doc["nodes"]:
            first = verdict["firstFailingLayer"]
            cut = LAYERS.index(LAYER_LABEL[first]) if first else len(LAYERS)
            got = [layer_ok[(verdict["node"], layer)] for layer in LAYERS]
            self.assertEqual(got, [1.0] * cut + [0.0] * (len(LAYERS) - cut), verdict)
        self.assertEqual(len(layer_ok), len(LAYERS) * len(doc["nodes"]))
        self.assertEqual(layer_ok[("dx-sick-0", "gpus_registered")], 1.0)
        self.assertEqual(layer_ok[("dx-sick-0", "gpus_healthy")], 0.0)
        self.assertEqual(layer_ok[("dx-down-0", "node")], 0.0)
        failing = {s.labels["node"]: s.labels for s in families["gpuctl_diagnose_node_failing_layer"].samples}
        self.assertEqual(failing["dx-down-0"]["check"], "node-not-ready")

        findings = {(s.labels["check"], s.labels["severity"], s.labels["node"]): s.value
                    for s in families["gpuctl_diagnose_findings"].samples}
        self.assertEqual(findings[("gpu-unhealthy-devices", "error", "dx-sick-0")], 1.0)
        status = {(s.labels["check"], s.labels["status"]): s.value
                  for s in families["gpuctl_diagnose_check_status"].samples}
        for check in doc["checks"]:
            self.assertEqual([status[(check["id"], st)] for st in ("pass", "fail", "skipped")],
                             [1.0 if check["status"] == st else 0.0 for st in ("pass", "fail", "skipped")], check)
        (stamp,) = families["gpuctl_diagnose_last_run_timestamp_seconds"].samples
        self.assertLess(abs(stamp.value - time.time()), 300)

    def test_suppress_sets_the_only_error_apart_and_the_exit_code_follows(self):
        base = ("diagnose", "-l", SICK, "--check", NODE_CHECKS)
        r = h.gpuctl(*base, "-o", "json")
        self.assertEqual(r.rc, 4, r.stderr)
        self.assertEqual([(f["check"], f["severity"]) for f in r.json["findings"]],
                         [("gpu-unhealthy-devices", "error")])

        rules = self.write("known.yaml", """# dx-sick-0 waits for its RMA
- check: gpu-unhealthy-devices
  node: dx-sick-*
  reason: RMA 4711, two GPUs out
  until: 2099-12-31
- check: node-pressure
  object: Node/dx-*
  reason: an old workaround
  until: 2020-01-31
""")
        rc, out, err = h.gpuctl(*base, "--suppress", rules)
        self.assertEqual(rc, 0, err + out)
        self.assertIn("No problems found by 5 check(s).", err)
        self.assertIn("Warning: suppression %s: entry 2 (line 6) expired after 2020-01-31" % rules, err)
        self.assertEqual(out.splitlines(), [
            "1 finding(s) suppressed (--suppress %s):" % rules,
            "  error gpu-unhealthy-devices Node/dx-sick-0: dx-sick-0: 2 of 8 nvidia.com/gpu unhealthy (capacity 8, "
            "allocatable 6) (RMA 4711, two GPUs out, until 2099-12-31)"])

        doc = h.gpuctl(*base, "--suppress", rules, "-o", "json")
        self.assertEqual(doc.rc, 0, doc.stderr)
        self.assertEqual(doc.json["findings"], [])
        self.assertEqual(doc.json["summary"]["suppressed"], 1)
        self.assertEqual(doc.json["suppressed"][0]["reason"], "RMA 4711, two GPUs out")
        self.assertEqual(doc.json["suppressed"][0]["finding"]["node"], "dx-sick-0")
        self.assertEqual([n["firstFailingLayer"] for n in doc.json["nodes"]], [None])

        rc, out, err = h.gpuctl(*base, "--suppress", rules, "-o", "junit")
        self.assertEqual(rc, 0, err)
        root = self.validate_junit(out, "suppressed.xml")
        self.assertEqual(root.get("failures"), "0")
        sick = root.find("testsuite[@name='gpu-unhealthy-devices']/testcase[@name='Node/dx-sick-0']")
        self.assertEqual(sick.find("skipped").get("message"), "suppressed until 2099-12-31: RMA 4711, two GPUs out")

        rc, out, err = h.gpuctl(*base, "--suppress", rules, "-o", "prometheus")
        self.assertEqual(rc, 0, err)
        families = self.parse_prometheus(out)
        self.assertEqual(families["gpuctl_diagnose_findings"].samples, [])
        suppressed = {s.labels["check"]: s.value for s in families["gpuctl_diagnose_suppressed_findings"].samples}
        self.assertEqual(suppressed["gpu-unhealthy-devices"], 1.0)
        self.assertEqual({s.value for s in families["gpuctl_diagnose_node_layer_ok"].samples}, {1.0})

    def test_a_bad_or_missing_suppression_file_is_named(self):
        bad = self.write("bad.yaml", "- check: gpu-unhealthy-devise\n  node: dx-sick-0\n  reason: typo\n")
        rc, out, err = h.gpuctl("diagnose", "-l", SICK, "--suppress", bad)
        self.assertEqual(rc, 2, err)
        self.assertEqual(out, "")
        self.assertIn("%s:1: entry 1: no check is named \"gpu-unhealthy-devise\" (list them with: "
                      "gpuctl diagnose --list-checks)" % bad, err)
        missing = os.path.join(self.tmp, "nope.yaml")
        rc, out, err = h.gpuctl("diagnose", "-l", SICK, "--suppress", missing)
        self.assertEqual(rc, 1, err)
        self.assertIn("--suppress: cannot read %s: No such file or directory" % missing, err)


if __name__ == "__main__":
    h.main()
