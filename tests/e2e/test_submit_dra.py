"""gpuctl submit --device-class against the real API server, scheduler, resourceclaim controller,
garbage collector and kwok, on nodes whose GPUs are DRA devices only (fleets/submit-dra.yaml,
nodes submitdra-*, published as NVIDIA's DRA driver does by tests/cluster/sim_dra.py): the
scheduler allocates the claimed devices of the asked-for product on one node, the template belongs
to the Job (deleting the Job deletes it), --dry-run=client prints the template and the Job and
creates nothing, a claim no node can hold is refused before anything exists, and quota counts the
claims under the DRA keys (and requests.nvidia.com/gpu, which the class serves) and refuses past
them."""
import harness as h

FLEET = "submit-dra"
PRODUCT = "P2000"   # Quadro P2000: only this suite's DRA node has it
CLASS = "gpu.nvidia.com"


def setUpModule():
    h.apply_fleet_file(FLEET)


def submit(*args, timeout=180):
    return h.gpuctl("submit", *args, timeout=timeout)


def templates(ns):
    return h.kubectl("get", "resourceclaimtemplates", "-n", ns, "-o", "json")["items"]


def jobs(ns):
    return h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"]


def allocated(claim):
    return [(r["driver"], r["pool"], r["device"]) for r in
            ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])]


def device_products(node):
    """device name -> productName in the node's ResourceSlice."""
    return {d["name"]: d["attributes"]["productName"]["string"] for d in h.dra_slice(node)["spec"]["devices"]}


class SubmitDeviceClassTest(h.TestCase):
    def test_scheduler_allocates_the_claimed_devices_of_the_product(self):
        ns = self.namespace("submitdra-run")
        r = submit("train", "-n", ns, "--image", "busybox", "--gpus", "2", "--gpu-type", PRODUCT, "--device-class",
                   CLASS, "--label", "%s=run" % h.OUTCOME_LABEL, "--", "sleep", "3600")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("job %s/train submitted: 2 devices of DeviceClass %s per pod" % (ns, CLASS), r.stdout)
        self.assertIn("through ResourceClaimTemplate train-gpus", r.stdout)

        # The Job's pod runs with a claim made from the template, allocated by the real scheduler.
        def running_pod():
            pods = h.kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=train", "-o",
                             "json")["items"]
            return pods[0] if pods and pods[0].get("spec", {}).get("nodeName") else None
        pod = h.wait_for(running_pod, 120, "the job's pod to be scheduled")
        claims = h.wait_for(lambda: [c for c in h.pod_claims(pod["metadata"]["name"], ns) if allocated(c)], 60,
                            "the pod's claim to be allocated")
        self.assertEqual(len(claims), 1, claims)
        results = allocated(claims[0])
        self.assertEqual(len(results), 2, results)
        node = pod["spec"]["nodeName"]
        products = device_products(node)
        for driver, pool, device in results:
            self.assertEqual(driver, "gpu.nvidia.com")
            self.assertEqual(pool, node)   # one pool per node, named after it: both devices on the pod's node
            self.assertIn("P2000", products[device])
        request = claims[0]["spec"]["devices"]["requests"][0]["exactly"]
        self.assertEqual((request["deviceClassName"], request["count"]), (CLASS, 2))

        # The template belongs to the Job: deleting the Job deletes it.
        job = h.kubectl("get", "job", "train", "-n", ns, "-o", "json")
        [template] = templates(ns)
        self.assertEqual(template["metadata"]["name"], "train-gpus")
        self.assertEqual([(o["kind"], o["name"], o["uid"], o["controller"], o["blockOwnerDeletion"])
                          for o in template["metadata"]["ownerReferences"]],
                         [("Job", "train", job["metadata"]["uid"], False, False)])
        h.kubectl("delete", "job", "train", "-n", ns, "--cascade=background", "--wait=false")
        h.wait_for(lambda: not templates(ns), 120, "the garbage collector to delete the template with its Job")

    def test_dry_run_client_prints_the_template_and_the_job_and_creates_nothing(self):
        ns = self.namespace("submitdra-dry")
        r = submit("smoke", "-n", ns, "--image", "busybox", "--gpus", "2", "--gpu-type", PRODUCT, "--device-class",
                   CLASS, "--dry-run=client", "-o", "json", "--", "nvidia-smi")
        self.assertEqual(r.rc, 0, r)
        doc = r.json
        self.assertEqual(doc["kind"], "List")
        self.assertEqual([i["kind"] for i in doc["items"]], ["ResourceClaimTemplate", "Job"])
        template, job = doc["items"]
        exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        self.assertEqual((exactly["deviceClassName"], exactly["allocationMode"], exactly["count"]),
                         (CLASS, "ExactCount", 2))
        self.assertIn("matches('p2000')", exactly["selectors"][0]["cel"]["expression"])
        pod_spec = job["spec"]["template"]["spec"]
        self.assertEqual(pod_spec["resourceClaims"], [{"name": "gpus", "resourceClaimTemplateName": "smoke-gpus"}])
        self.assertEqual(pod_spec["containers"][0]["resources"], {"claims": [{"name": "gpus"}]})
        self.assertEqual(templates(ns), [])
        self.assertEqual(jobs(ns), [])
        # The API server takes both as they are (strict field validation), still creating nothing.
        r = submit("smoke", "-n", ns, "--image", "busybox", "--gpus", "2", "--gpu-type", PRODUCT, "--device-class",
                   CLASS, "--dry-run=server", "--", "nvidia-smi")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("the API server admitted the ResourceClaimTemplate, the Job and a pod", r.stdout)
        self.assertEqual(templates(ns), [])
        self.assertEqual(jobs(ns), [])

    def test_refused_before_anything_exists(self):
        ns = self.namespace("submitdra-refused")
        # Three P2000s on one node: the only P2000 node has two, and a claim never spans nodes.
        r = submit("big", "-n", ns, "--image", "busybox", "--gpus", "3", "--gpu-type", PRODUCT, "--device-class", CLASS)
        self.assertEqual(r.rc, 3, r)
        self.assertIn("refused (device-capacity): no schedulable node has 3 devices of DeviceClass %s" % CLASS,
                      r.stderr)
        self.assertEqual(templates(ns), [])
        self.assertEqual(jobs(ns), [])
        # A class the cluster does not have is named, with the ones it has.
        r = submit("odd", "-n", ns, "--image", "busybox", "--gpus", "1", "--device-class", "gpu.example.com")
        self.assertEqual(r.rc, 2, r)
        self.assertIn('DeviceClass "gpu.example.com" does not exist; the cluster has: ', r.stderr)
        self.assertIn(CLASS, r.stderr)

    def test_quota_counts_the_claims_and_refuses_past_it(self):
        ns = self.namespace("submitdra-quota")
        r = h.gpuctl("quota", "set", ns, "--gpus", "4", "--devices", "%s=2" % CLASS, "--claims", "1")
        self.assertEqual(r.rc, 0, r)
        r = submit("first", "-n", ns, "--image", "busybox", "--gpus", "1", "--device-class", CLASS,
                   "--label", "%s=run" % h.OUTCOME_LABEL)
        self.assertEqual(r.rc, 0, r)

        # kube-controller-manager counts the claim the pod got under both DRA keys, and (the class
        # serves nvidia.com/gpu as an extended resource) under requests.nvidia.com/gpu too.
        def counted():
            doc = h.gpuctl("quota", "-n", ns, "-o", "json").json
            used = {r["key"]: r["used"] for r in doc["items"][0]["quotas"][0]["resources"]}
            return used if used.get("count/resourceclaims.resource.k8s.io") == 1 else None
        used = h.wait_for(counted, 60, "the quota to count the claim")
        self.assertEqual(used, {"requests.nvidia.com/gpu": 1, "%s.deviceclass.resource.k8s.io/devices" % CLASS: 1,
                                "count/resourceclaims.resource.k8s.io": 1})
        r = submit("second", "-n", ns, "--image", "busybox", "--gpus", "1", "--device-class", CLASS)
        self.assertEqual(r.rc, 3, r)
        self.assertIn("refused (quota): quota %s/gpuctl-gpu-quota allows 1 count/resourceclaims.resource.k8s.io, 1 in "
                      "use" % ns, r.stderr)
        self.assertEqual([t["metadata"]["name"] for t in templates(ns)], ["first-gpus"])


if __name__ == "__main__":
    h.main()
