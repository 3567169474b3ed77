#!/usr/bin/python3
"""Proves the DRA test ground with kubectl and ssh only (no gpuctl): DRA nodes publish their GPUs as
NVIDIA's DRA driver does (tests/cluster/sim_dra.py), the chart's DeviceClasses exist, and the real
scheduler, resourceclaim controller and kwok run pods on those devices: by ResourceClaimTemplate,
by a plain nvidia.com/gpu request (DRAExtendedResource), never on a tainted device or from an
incomplete pool.

Applies fleets/dra-ground.yaml (nodes draground-*); every pod is pinned to one of them."""
import re

import harness as h

FLEET = "dra-ground"
T4, TAINTED, POOL, MIG = "draground-t4-0", "draground-taint-0", "draground-pool-0", "draground-mig-0"


def setUpModule():
    h.apply_fleet_file(FLEET)


def attr(device, name):
    a = device["attributes"][name]
    return a.get("string", a.get("version"))


def smi_list(node):
    """`nvidia-smi -L` of the node's simulated host: ([(gpu uuid, product)], [mig uuid])."""
    r = h.ssh(node, "nvidia-smi -L")
    assert r.rc == 0, r
    gpus = re.findall(r"^GPU \d+: (.+) \(UUID: (GPU-[^)]+)\)$", r.stdout, re.M)
    return [(u, p) for p, u in gpus], re.findall(r"\(UUID: (MIG-[^)]+)\)", r.stdout)


def allocated(claim):
    return [(r["driver"], r["pool"], r["device"]) for r in
            ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])]


def scheduling_failure(name, ns):
    for e in h.events_for("Pod", name, ns):
        if e["reason"] == "FailedScheduling":
            return e["message"]


class Published(h.TestCase):
    def test_full_gpus_are_the_hosts_gpus(self):
        s = h.dra_slice(T4)
        self.assertEqual(s["spec"]["driver"], "gpu.nvidia.com")
        self.assertEqual(s["spec"]["nodeName"], T4)
        self.assertEqual(s["spec"]["pool"], {"name": T4, "generation": 1, "resourceSliceCount": 1})
        self.assertTrue(s["metadata"]["name"].startswith(T4 + "-gpu.nvidia.com-"))
        node = h.kubectl("get", "node", T4, "-o", "json")
        self.assertEqual([(o["kind"], o["name"], o["uid"]) for o in s["metadata"]["ownerReferences"]],
                         [("Node", T4, node["metadata"]["uid"])])
        devices = s["spec"]["devices"]
        self.assertEqual([d["name"] for d in devices], ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])
        smi, _ = smi_list(T4)
        self.assertEqual([(attr(d, "uuid"), attr(d, "productName")) for d in devices], smi)
        d = devices[0]
        self.assertEqual({k: attr(d, k) for k in ("type", "brand", "architecture", "cudaComputeCapability",
                                                  "driverVersion", "cudaDriverVersion",
                                                  "resource.kubernetes.io/pciBusID")},
                         {"type": "gpu", "brand": "NVIDIA", "architecture": "Turing", "cudaComputeCapability": "7.5.0",
                          "driverVersion": "515.105.1", "cudaDriverVersion": "11.7.0",
                          "resource.kubernetes.io/pciBusID": "0000:00:1e.0"})
        self.assertEqual(d["capacity"]["memory"]["value"], "15Gi")   # 15360 MiB, as the capture says
        # The DRA driver replaces the device plugin: no nvidia.com/gpu on the node, GFD labels stay.
        self.assertNotIn("nvidia.com/gpu", node["status"]["capacity"])
        self.assertNotIn("nvidia.com/gpu", node["status"]["allocatable"])
        self.assertEqual(node["metadata"]["labels"]["nvidia.com/gpu.product"], "Tesla-T4")
        self.assertEqual([x["name"] for x in h.node(T4)["dra"]["devices"]], ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])

    def test_mig_devices_are_the_hosts_mig_devices(self):
        devices = h.dra_slice(MIG)["spec"]["devices"]
        self.assertEqual([d["name"] for d in devices], ["gpu-0-mig-1g5gb-19-%d" % i for i in range(7)])
        (parent, product), = smi_list(MIG)[0]
        self.assertEqual([attr(d, "uuid") for d in devices], smi_list(MIG)[1])
        for d in devices:
            self.assertEqual((attr(d, "type"), attr(d, "parentUUID"), attr(d, "profile"), attr(d, "productName")),
                             ("mig", parent, "1g.5gb", product))
        self.assertEqual({k: v["value"] for k, v in devices[3]["capacity"].items()},
                         {"memory": "4864Mi", "multiprocessors": "14", "memorySlice3": "1"})

    def test_device_classes_of_the_chart(self):
        gpu = h.kubectl("get", "deviceclass", "gpu.nvidia.com", "-o", "json")["spec"]
        self.assertEqual(gpu["extendedResourceName"], "nvidia.com/gpu")
        self.assertEqual(gpu["selectors"], [{"cel": {"expression":
                         "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}])
        mig = h.kubectl("get", "deviceclass", "mig.nvidia.com", "-o", "json")["spec"]
        self.assertNotIn("extendedResourceName", mig)
        self.assertIn("device.attributes['gpu.nvidia.com'].type == 'mig'", mig["selectors"][0]["cel"]["expression"])

    def test_device_taint_rules_are_served(self):
        r = h.kubectl("get", "devicetaintrules.v1beta2.resource.k8s.io", check=False)
        self.assertEqual(r.rc, 0, r.stderr)


class Scheduled(h.TestCase):
    def test_claim_from_template_is_allocated_and_the_pod_runs(self):
        ns = self.namespace("dra-rct")
        h.create([h.claim_template("one-gpu", ns), h.claim_pod("p", ns, template="one-gpu", node=T4)])
        p = h.wait_pod_phase("p", ns, timeout=90)
        self.assertEqual(p["spec"]["nodeName"], T4)
        claims = h.pod_claims("p", ns)
        self.assertEqual(len(claims), 1)
        (driver, pool, device), = allocated(claims[0])
        self.assertEqual((driver, pool), ("gpu.nvidia.com", T4))
        self.assertIn(device, ["gpu-%d" % i for i in range(4)])
        self.assertEqual([r["name"] for r in claims[0]["status"]["reservedFor"]], ["p"])

    def test_plain_gpu_request_is_served_by_a_scheduler_made_claim(self):
        ns = self.namespace("dra-ext")
        h.create(h.gpu_pod("p", ns, node=T4, gpus=2))
        p = h.wait_pod_phase("p", ns, timeout=90)
        self.assertEqual(p["spec"]["nodeName"], T4)
        ext = p["status"]["extendedResourceClaimStatus"]
        self.assertEqual([(m["containerName"], m["resourceName"]) for m in ext["requestMappings"]],
                         [("main", "nvidia.com/gpu")])
        claim = h.kubectl("get", "resourceclaim", ext["resourceClaimName"], "-n", ns, "-o", "json")
        self.assertEqual(claim["metadata"]["annotations"].get("resource.kubernetes.io/extended-resource-claim"), "true")
        results = allocated(claim)
        self.assertEqual(len(results), 2)
        self.assertEqual({(d, p) for d, p, _ in results}, {("gpu.nvidia.com", T4)})

    def test_mig_claim_gets_a_mig_device(self):
        ns = self.namespace("dra-mig")
        h.create([h.claim_template("mig", ns, device_class="mig.nvidia.com",
                                   selectors=["device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"]),
                  h.claim_pod("p", ns, template="mig", node=MIG)])
        h.wait_pod_phase("p", ns, timeout=90)
        (_, pool, device), = allocated(h.pod_claims("p", ns)[0])
        self.assertEqual(pool, MIG)
        self.assertTrue(device.startswith("gpu-0-mig-1g5gb-19-"), device)

    def test_tainted_device_is_not_allocated(self):
        ns = self.namespace("dra-taint")
        s = h.dra_taint(TAINTED, "gpu-0")
        t = [d for d in s["spec"]["devices"] if d["name"] == "gpu-0"][0]["taints"]
        self.assertEqual([(x["key"], x["value"], x["effect"]) for x in t], [("gpu.nvidia.com/xid", "79", "NoSchedule")])
        self.assertIn("timeAdded", t[0])
        self.addCleanup(h.dra_untaint, TAINTED, "gpu-0")
        h.create([h.claim_template("one-gpu", ns), h.claim_pod("first", ns, template="one-gpu", node=TAINTED)])
        h.wait_pod_phase("first", ns, timeout=90)
        self.assertEqual(allocated(h.pod_claims("first", ns)[0]), [("gpu.nvidia.com", TAINTED, "gpu-1")])
        # The only other device is tainted: a second pod cannot be placed...
        h.create(h.claim_pod("second", ns, template="one-gpu", node=TAINTED))
        h.wait_for(lambda: scheduling_failure("second", ns), 60, "FailedScheduling of the second pod")
        self.assertEqual(h.pod("second", ns)["status"]["phase"], "Pending")
        # ...until the health check clears the taint.
        h.dra_untaint(TAINTED, "gpu-0")
        h.wait_pod_phase("second", ns, timeout=90)
        self.assertEqual(allocated(h.pod_claims("second", ns)[0]), [("gpu.nvidia.com", TAINTED, "gpu-0")])

    def test_incomplete_pool_is_not_used(self):
        ns = self.namespace("dra-pool")
        s = h.dra_incomplete_pool(POOL)
        self.addCleanup(h.dra_publish, POOL)
        self.assertEqual(s["spec"]["pool"], {"name": POOL, "generation": 2, "resourceSliceCount": 2})
        h.create([h.claim_template("one-gpu", ns), h.claim_pod("p", ns, template="one-gpu", node=POOL)])
        h.wait_for(lambda: scheduling_failure("p", ns), 60, "FailedScheduling while the pool is incomplete")
        self.assertEqual(h.pod("p", ns)["status"]["phase"], "Pending")
        s = h.dra_publish(POOL, generation=3)
        self.assertEqual(s["spec"]["pool"], {"name": POOL, "generation": 3, "resourceSliceCount": 1})
        h.wait_pod_phase("p", ns, timeout=90)
        self.assertEqual(allocated(h.pod_claims("p", ns)[0]), [("gpu.nvidia.com", POOL, "gpu-0")])


if __name__ == "__main__":
    h.main()
