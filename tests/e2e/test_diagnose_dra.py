"""`gpuctl diagnose`'s DRA checks against the real control plane (issue 19): nodes of this suite's
own fleet (dxdra-*) publish their GPUs as NVIDIA's DRA driver does (tests/cluster/sim_dra.py); the
real scheduler allocates claims to them and leaves a pod pending whose claim asks for more than
exists. A device tainted for Xid 79 "by the driver" is reported critical with its node, device and
the pod still holding it; an incomplete pool is reported on its node; the pending pod's claim is
reported with the scheduler's own words. Node-bound checks are scoped with -l to this fleet and
the claims with -n to this suite's namespace, so suites running beside it do not disturb it."""
import re

import harness as h

FLEET = "diagnose-dra"
SEL = "e2e.gpuctl.dev/fleet=" + FLEET
XID, POOL, BIG, TWICE = "dxdra-xid-0", "dxdra-pool-0", "dxdra-big-0", "dxdra-twice-0"
T4 = "telegraf__tesla-t4__515.105.01__v11.xml"
FLEET_YAML = """
name: %s
defaults: {cpu: "16", memory: 64Gi, dra: true}
nodes:
  - name: %s
    gpus: 2
    ssh: {fixture: %s}
  - name: %s
    gpus: 1
    ssh: {fixture: %s}
  - name: %s
    gpus: 2
    ssh: {fixture: %s}
  - name: %s
    gpus: 2
    dra: false
    ssh: {fixture: %s}
""" % (FLEET, XID, T4, POOL, T4, BIG, T4, TWICE, T4)


def findings(doc, check, node=None):
    return [f for f in doc["findings"] if f["check"] == check and (node is None or f["node"] == node)]


def attr(device, name):
    a = device["attributes"][name]
    return a.get("string", a.get("version"))


def pod_scheduled(name, ns):
    for c in (h.pod(name, ns).get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled":
            return c
    return None


class DiagnoseDraTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET_YAML, source="test_diagnose_dra fleet")
        cls.ns = h.unique_namespace("dxdra")
        h.create([h.claim_template("one-gpu", cls.ns, count=1), h.claim_template("eight-gpus", cls.ns, count=8)])

    @classmethod
    def tearDownClass(cls):
        h.delete_namespace(cls.ns)

    def diagnose(self, *args):
        r = h.gpuctl("diagnose", "--no-ssh", *args, "-o", "json")
        self.assertIn(r.rc, (0, 4), r.stderr)
        return r.json

    def test_a_device_tainted_for_xid_79_is_critical_with_the_pod_holding_it(self):
        h.create(h.claim_pod("holder", self.ns, template="one-gpu", node=XID))
        h.wait_pod_phase("holder", self.ns)
        (claim,) = h.pod_claims("holder", self.ns)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        device = result["device"]
        h.dra_taint(XID, device)  # gpu.nvidia.com/xid=79 NoSchedule, as the driver's health check writes it
        self.addCleanup(h.dra_untaint, XID, device)
        uuid = [attr(d, "uuid") for d in h.dra_slice(XID)["spec"]["devices"] if d["name"] == device][0]

        doc = self.diagnose("-l", SEL, "--check", "dra-device-tainted")
        found = findings(doc, "dra-device-tainted", XID)
        self.assertEqual(len(found), 1, doc["findings"])
        f = found[0]
        self.assertEqual(f["severity"], "critical")
        self.assertTrue(f["summary"].startswith("%s/%s (%s, Tesla T4) is tainted gpu.nvidia.com/xid=79:NoSchedule "
                                                "by the driver since " % (XID, device, uuid)), f["summary"])
        self.assertIn("Xid 79 (GPU has fallen off the bus (PCIe)): NVIDIA's action RESTART_BM", f["summary"])
        self.assertIn("still held by claim %s/%s (pod(s) %s/holder): NoSchedule does not evict them"
                      % (self.ns, claim["metadata"]["name"], self.ns), f["summary"])
        self.assertEqual(f["evidence"][0]["text"], "gpu.nvidia.com/xid=79:NoSchedule")
        self.assertRegex(f["evidence"][0]["time"], r"^\d{4}-\d\d-\d\dT")
        self.assertEqual(f["remedy"][0], "gpuctl taint --device %s/%s gpu.nvidia.com/xid=79:NoExecute   (evicts the "
                                         "pods holding this GPU, only those)" % (XID, device))
        self.assertIn("gpuctl drain %s --ignore-daemonsets --reason 'Xid 79 on %s'" % (XID, device), f["remedy"])
        # The node's verdict: its GPUs are not healthy.
        verdicts = {v["node"]: v for v in doc["nodes"]}
        self.assertEqual(verdicts[XID]["firstFailingLayer"], "GPUs healthy")

    def test_an_incomplete_pool_is_reported_on_its_node(self):
        h.dra_incomplete_pool(POOL)
        self.addCleanup(h.dra_publish, POOL)
        doc = self.diagnose("-l", SEL, "--check", "dra-pool-incomplete")
        found = findings(doc, "dra-pool-incomplete", POOL)
        self.assertEqual(len(found), 1, doc["findings"])
        self.assertEqual(found[0]["severity"], "error")
        self.assertTrue(found[0]["summary"].startswith(
            "pool %s of gpu.nvidia.com on %s is left out of the counts: " % (POOL, POOL)), found[0]["summary"])
        self.assertIn("kubectl get resourceslices --field-selector spec.driver=gpu.nvidia.com,spec.nodeName=%s -o yaml"
                      % POOL, found[0]["remedy"])
        self.assertEqual(findings(doc, "dra-pool-incomplete", XID), [])

    def test_a_claim_asking_for_more_than_exists_is_unallocated_with_the_schedulers_words(self):
        h.create(h.claim_pod("too-big", self.ns, template="eight-gpus", node=BIG))
        cond = h.wait_for(lambda: (lambda c: c if c and c["status"] == "False" and c.get("message") else None)(
            pod_scheduled("too-big", self.ns)), 90, "the scheduler to judge too-big")
        (claim,) = h.pod_claims("too-big", self.ns)
        self.assertNotIn("allocation", claim.get("status") or {})

        def reported():
            doc = self.diagnose("-n", self.ns, "--check", "dra-claim-unallocated")
            found = findings(doc, "dra-claim-unallocated")
            return found if found else None
        found = h.wait_for(reported, 60, "dra-claim-unallocated to report too-big's claim")
        self.assertEqual(len(found), 1, found)
        f = found[0]
        self.assertEqual(f["severity"], "error")
        self.assertEqual(f["object"], {"kind": "ResourceClaim", "namespace": self.ns,
                                       "name": claim["metadata"]["name"]})
        self.assertIn("pod %s/too-big pending" % self.ns, f["summary"])
        self.assertRegex(f["summary"], r"claim %s/%s is not allocated: request gpu: 8 of class gpu\.nvidia\.com; \d+ free "
                                       r"device\(s\) match" % (self.ns, re.escape(claim["metadata"]["name"])))
        # The scheduler's own words, as the pod's PodScheduled condition carries them.
        self.assertEqual(f["evidence"][0]["source"], "pod %s/too-big condition PodScheduled" % self.ns)
        now = pod_scheduled("too-big", self.ns)
        self.assertIn(f["evidence"][0]["text"], ("%s: %s" % (cond["reason"], cond["message"]),
                                                 "%s: %s" % (now["reason"], now["message"])))
        self.assertIn("the scheduler says: " + f["evidence"][0]["text"], f["summary"])
        self.assertIn("cannot allocate all claims", f["summary"])
        self.assertIn("kubectl describe resourceclaim -n %s %s" % (self.ns, claim["metadata"]["name"]), f["remedy"])

    def test_gpus_offered_by_the_device_plugin_and_dra_at_once(self):
        # TWICE is a device-plugin node (nvidia.com/gpu: 2); a DRA driver starts publishing its GPUs too.
        c = h.cluster()
        c.require_running()
        h.dra_publish(TWICE, devices=h.sim_dra.host_devices(c.host_record(c.node(TWICE))))
        self.addCleanup(h.kubectl, "delete", "resourceslices", "--field-selector", "spec.nodeName=" + TWICE)
        doc = self.diagnose("-l", SEL, "--check", "dra-double-advertised")
        found = findings(doc, "dra-double-advertised")
        self.assertEqual([(f["node"], f["severity"]) for f in found], [(TWICE, "warning")], found)
        self.assertTrue(found[0]["summary"].startswith(
            "%s advertises nvidia.com/gpu=2 through the device plugin and publishes 2 NVIDIA DRA device(s) (gpu-0, "
            "gpu-1): the same GPUs are offered twice" % TWICE), found[0]["summary"])

    def test_a_device_class_whose_selectors_match_no_device(self):
        name = "dxdra-b300.example.com"
        selector = ("device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B300'")
        h.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                  "spec": {"selectors": [{"cel": {"expression": selector}}]}})
        self.addCleanup(h.kubectl, "delete", "deviceclass", name)

        def of_class(doc):
            return [f for f in findings(doc, "dra-class-matches-nothing") if f["object"]["name"] == name]
        (f,) = of_class(self.diagnose("--check", "dra-class-matches-nothing"))
        self.assertEqual(f["severity"], "info", "no claim asks for it yet")
        self.assertRegex(f["summary"], r"^DeviceClass %s matches none of the \d+ published device\(s\)" % re.escape(name))
        self.assertEqual(f["evidence"][0]["text"], selector)
        # A pod whose claim asks for it: a warning naming the claim, which the scheduler cannot allocate.
        h.create([h.claim_template("b300", self.ns, device_class=name), h.claim_pod("b300", self.ns, template="b300")])
        claim = h.wait_for(lambda: h.pod_claims("b300", self.ns), 60, "the claim of pod b300")[0]
        (f,) = of_class(self.diagnose("--check", "dra-class-matches-nothing"))
        self.assertEqual(f["severity"], "warning")
        self.assertIn("claim(s) request it and cannot be allocated: %s/%s" % (self.ns, claim["metadata"]["name"]),
                      f["summary"])


if __name__ == "__main__":
    h.main()
