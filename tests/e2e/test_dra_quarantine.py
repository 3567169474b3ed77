#!/usr/bin/python3
"""Quarantining one DRA GPU, end to end (issue 19): `gpuctl taint --device NODE/DEVICE` writes a
DeviceTaintRule that the real scheduler honours, `gpuctl nodes` and `gpuctl diagnose` show it, drain's
plan for a pod holding a DRA GPU finds room only where a matching device is free, the rule's removal
puts the GPU back in service, and backup/restore keep DeviceClasses, DeviceTaintRules and claim
templates but never ResourceSlices or the claims made for pods.

Fleet dra-quarantine (nodes draq-*): one RTX 3080 each, a product no other DRA node has, claimed
through a template whose CEL selector names it. The stages share state and run in order."""
import shutil
import tempfile
from pathlib import Path

import harness as h

FLEET = "dra-quarantine"
SEL = "e2e.gpuctl.dev/fleet=" + FLEET
A, B = "draq-3080-a", "draq-3080-b"
PRODUCT = "NVIDIA GeForce RTX 3080"
RULES = "devicetaintrules.v1beta2.resource.k8s.io"
SUITE_LABEL = "e2e.gpuctl.dev/suite"


def rules_of(node, device):
    return [r for r in h.kubectl("get", RULES, "-o", "json")["items"]
            if (r["spec"].get("deviceSelector") or {}).get("pool") == node
            and r["spec"]["deviceSelector"].get("device") == device]


def scheduling_failure(name, ns):
    for e in h.events_for("Pod", name, ns):
        if e["reason"] == "FailedScheduling":
            return e["message"]


class QuarantineTest(h.TestCase):
    passed = set()

    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file(FLEET)
        cls.tmp = Path(tempfile.mkdtemp(prefix="gpuctl-draq-"))
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.ns = h.unique_namespace("draq")
        cls.addClassCleanup(h.delete_namespace, cls.ns)
        h.create([h.claim_template("rtx", cls.ns,
                                   selectors=["device.attributes['gpu.nvidia.com'].productName == '%s'" % PRODUCT]),
                  h.claim_pod("train", cls.ns, template="rtx", node=A)])
        h.wait_pod_phase("train", cls.ns, timeout=120)

    def need(self, stage):
        if stage not in self.passed:
            self.skipTest("needs %s, which did not pass" % stage)

    def taint(self, *args):
        return h.gpuctl("taint", "--device", *args)

    def drain_plan(self):
        r = h.gpuctl("drain", A, "--dry-run", "--force", "--ignore-daemonsets", "-o", "json")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        (node,) = r.json["items"]
        (pod,) = [p for p in node["pods"] if p["name"] == "train"]
        return pod["moveTo"]

    def nodes_item(self, node):
        r = h.gpuctl("nodes", "-l", SEL, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        return {i["name"]: i for i in r.json["items"]}[node]

    def test_1_drain_plan_finds_the_free_matching_device(self):
        move = self.drain_plan()
        self.assertEqual(move["dra"], {"devices": 1, "fit": "fits", "node": B, "message": None})
        self.assertTrue(move["fits"])
        table = h.gpuctl("drain", A, "--dry-run", "--force", "--ignore-daemonsets")
        self.assertEqual(table.rc, 0, table.stderr)
        self.assertIn("yes (DRA devices on %s)" % B, table.stdout)
        self.assertEqual(h.kubectl("get", "node", A, "-o", "json")["spec"].get("unschedulable"), None,
                         "a dry run cordons nothing")
        self.passed.add("plan")

    def test_2_taint_device_quarantines_one_gpu(self):
        self.need("plan")
        dry = self.taint("%s/gpu-0" % B, "maint=xid-79:NoSchedule", "--dry-run", "-o", "json")
        self.assertEqual(dry.rc, 0, dry.stderr)
        self.assertEqual([i["result"] for i in dry.json["items"]], ["created"])
        self.assertEqual(rules_of(B, "gpu-0"), [], "--dry-run writes nothing")

        r = self.taint("%s/gpu-0" % B, "maint=xid-79:NoSchedule", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.json["device"]["node"], B)
        (rule,) = rules_of(B, "gpu-0")
        self.addCleanup(lambda: [h.kubectl("delete", RULES, x["metadata"]["name"], check=False)
                                 for x in rules_of(B, "gpu-0") if "quarantine" not in self.passed])
        self.assertEqual(rule["spec"]["deviceSelector"], {"driver": "gpu.nvidia.com", "pool": B, "device": "gpu-0"})
        self.assertEqual({k: rule["spec"]["taint"][k] for k in ("key", "value", "effect")},
                         {"key": "maint", "value": "xid-79", "effect": "NoSchedule"})
        self.assertTrue(rule["metadata"]["name"].startswith("gpuctl-%s-gpu-0-" % B))
        self.assertEqual(rule["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpuctl")
        again = self.taint("%s/gpu-0" % B, "maint=xid-79:NoSchedule", "-o", "json")
        self.assertEqual([i["result"] for i in again.json["items"]], ["unchanged"], again.stderr)

        # gpuctl nodes: the device is unhealthy, and the rule is named.
        item = self.nodes_item(B)
        self.assertEqual((item["gpus"]["capacity"], item["gpus"]["unhealthy"], item["gpus"]["free"]), (1, 1, 0))
        self.assertEqual([(t["device"], t["key"], t["value"], t["effect"], t["rule"]) for t in item["deviceTaints"]],
                         [("gpu-0", "maint", "xid-79", "NoSchedule", rule["metadata"]["name"])])
        # gpuctl diagnose names the node, the device and the rule.
        d = h.gpuctl("diagnose", "--no-ssh", "-l", SEL, "--check", "dra-device-tainted", "-o", "json")
        found = [f for f in d.json["findings"] if f["check"] == "dra-device-tainted"]
        self.assertEqual([f["node"] for f in found], [B], d.stdout + d.stderr)
        self.assertIn(rule["metadata"]["name"], str(found[0]))
        # The real scheduler gives the quarantined GPU to nobody.
        h.create(h.claim_pod("probe", self.ns, template="rtx", node=B))
        h.wait_for(lambda: scheduling_failure("probe", self.ns), 60, "FailedScheduling of the probe pod")
        self.assertEqual(h.pod("probe", self.ns)["status"]["phase"], "Pending")
        # And drain's plan for the pod on A has no room left.
        move = self.drain_plan()
        self.assertEqual((move["dra"]["fit"], move["fits"]), ("no-room", False), move)
        self.passed.add("quarantine")

    def test_3_noexecute_on_a_held_gpu_needs_yes(self):
        self.need("plan")
        r = self.taint("%s/gpu-0" % A, "maint=drain:NoExecute")
        self.assertEqual(r.rc, 2, r.stdout + r.stderr)
        self.assertIn("train", r.stderr)
        self.assertEqual(rules_of(A, "gpu-0"), [], "refused: nothing written")
        unknown = self.taint("%s/gpu-9" % A, "maint=x:NoSchedule")
        self.assertEqual(unknown.rc, 2, unknown.stderr)
        self.assertIn("gpu-0", unknown.stderr.splitlines()[-1], "the error lists the node's devices")

    def test_4_removing_the_taint_puts_the_gpu_back(self):
        self.need("quarantine")
        r = self.taint("%s/gpu-0" % B, "maint-", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual([i["result"] for i in r.json["items"]], ["deleted"])
        self.assertEqual(rules_of(B, "gpu-0"), [])
        h.wait_pod_phase("probe", self.ns, timeout=120)
        item = self.nodes_item(B)
        self.assertEqual((item["gpus"]["unhealthy"], item["gpus"]["used"], item["deviceTaints"]), (0, 1, []))

    def test_5_backup_keeps_classes_rules_and_templates_never_slices_or_pod_claims(self):
        self.need("plan")
        name = "draq-suite-watch"
        h.create({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
                  "metadata": {"name": name, "labels": {SUITE_LABEL: FLEET}},
                  "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": B, "device": "gpu-0"},
                           "taint": {"key": "example.com/watch", "value": "ecc", "effect": "None"}}})
        self.addCleanup(h.kubectl, "delete", RULES, name, "--ignore-not-found")
        archive = self.tmp / "dra.tgz"
        r = h.gpuctl("backup", "-f", archive, "-o", "json", timeout=300)
        self.assertEqual(r.rc, 0, r.stderr)
        files = {k["resource"]: [f["path"] for f in k["files"]] for k in r.json["kinds"]}
        self.assertIn("deviceclasses.resource.k8s.io/gpu.nvidia.com.yaml", files["deviceclasses.resource.k8s.io"])
        self.assertIn("devicetaintrules.resource.k8s.io/%s.yaml" % name, files["devicetaintrules.resource.k8s.io"])
        self.assertIn("resourceclaimtemplates.resource.k8s.io/%s/rtx.yaml" % self.ns,
                      files["resourceclaimtemplates.resource.k8s.io"])
        self.assertNotIn("resourceslices.resource.k8s.io", files)
        pod_claims = [c["metadata"]["name"] for c in h.pod_claims("train", self.ns)]
        self.assertEqual(len(pod_claims), 1)
        kept_claims = files.get("resourceclaims.resource.k8s.io", [])
        self.assertNotIn("resourceclaims.resource.k8s.io/%s/%s.yaml" % (self.ns, pod_claims[0]), kept_claims)

        # The rule is deleted, then restored from the archive (only it: the cluster is shared).
        h.kubectl("delete", RULES, name)
        scope = ("--only", "devicetaintrules", "-l", "%s=%s" % (SUITE_LABEL, FLEET))
        plan = h.gpuctl("restore", archive, *scope, "--dry-run", "-o", "json", timeout=300)
        self.assertEqual(plan.rc, 0, plan.stderr)
        self.assertEqual([(i["kind"], i["name"], i["action"]) for i in plan.json["items"]],
                         [("DeviceTaintRule", name, "create")])
        self.assertEqual(h.kubectl("get", RULES, name, check=False).rc, 1, "a dry run creates nothing")
        done = h.gpuctl("restore", archive, *scope, "-o", "json", timeout=300)
        self.assertEqual(done.rc, 0, done.stdout + done.stderr)
        back = h.kubectl("get", RULES, name, "-o", "json")
        self.assertEqual(back["spec"]["deviceSelector"], {"driver": "gpu.nvidia.com", "pool": B, "device": "gpu-0"})
        self.assertEqual(back["spec"]["taint"]["effect"], "None")
        # A None taint is shown, not counted: the GPU stays in service.
        item = self.nodes_item(B)
        self.assertEqual(item["gpus"]["unhealthy"], 0)
        self.assertIn(("gpu-0", "example.com/watch", "None", name),
                      [(t["device"], t["key"], t["effect"], t["rule"]) for t in item["deviceTaints"]])


if __name__ == "__main__":
    h.main()
