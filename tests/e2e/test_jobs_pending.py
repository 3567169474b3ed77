"""Why a GPU job pends, named (issue 20): jobs made with kubectl, not gpuctl, whose pods the real
scheduler cannot place. `gpuctl jobs NAME` and `-o json` name the taint the pod does not tolerate
with the nodes that carry it, and the values a label key has when the job's nodeSelector asks for
one that exists nowhere."""
import harness as h

FLEET = {"e2e.gpuctl.dev/fleet": "pending"}
NODES = ["pending-gpu-0", "pending-gpu-1"]
POOL = "pending.e2e.gpuctl.dev/pool"
MAINTENANCE = "gpu-maintenance=true:NoSchedule"


def pending_item(ns, name):
    """The job's GPUJobList item once the scheduler's verdict and the detail are in."""
    def ready():
        r = h.gpuctl("jobs", "-n", ns, name, "-o", "json")
        if r.rc != 0:
            raise h.HarnessError("gpuctl jobs failed: %s" % r.stderr)
        items = r.json["items"]
        item = items[0] if items else None
        if item and item["status"] == "Pending" and item["pending"] and item["reason"].startswith("not scheduled"):
            return item
        return None
    return h.wait_for(ready, 90, "job %s to be judged unschedulable" % name)


class JobsPendingTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("pending")

    def test_an_untolerated_taint_is_named_with_the_nodes_that_carry_it(self):
        ns = self.namespace("pending-taint")
        # Tolerates nvidia.com/gpu (the harness's default), not the maintenance taint.
        h.create(h.gpu_job("maint", ns, gpus=1, node_selector=FLEET, outcome_=h.outcome("run")))
        item = pending_item(ns, "maint")
        taints = {t["taint"]: t for t in item["pending"]["untoleratedTaints"]}
        self.assertIn(MAINTENANCE, taints, item)
        self.assertEqual(taints[MAINTENANCE]["nodes"], NODES)
        self.assertEqual((taints[MAINTENANCE]["key"], taints[MAINTENANCE]["value"], taints[MAINTENANCE]["effect"]),
                         ("gpu-maintenance", "true", "NoSchedule"))
        # The taint it does tolerate is not named; its placement matches, so no selector is blamed.
        self.assertNotIn("nvidia.com/gpu=present:NoSchedule", taints)
        self.assertIsNone(item["pending"]["unmatchedSelector"])
        self.assertTrue(item["pending"]["pod"].startswith("maint-"), item)
        self.assertIn("%s on %s" % (MAINTENANCE, ", ".join(NODES)), item["reason"])

        rc, out, err = h.gpuctl("jobs", "-n", ns, "maint")
        self.assertEqual(rc, 0, err)
        self.assertIn("taints it does not tolerate", out)
        self.assertIn("%s on %s" % (MAINTENANCE, ", ".join(NODES)), out)

        # Tolerating it, the job runs on those nodes: the detail was the whole story.
        fixed = h.gpu_job("maint-ok", ns, gpus=1, node_selector=FLEET, outcome_=h.outcome("run"),
                          tolerations=[{"key": "gpu-maintenance", "operator": "Exists", "effect": "NoSchedule"}])
        h.create(fixed)
        running = h.wait_for(lambda: (lambda r: r.json["items"][0] if r.rc == 0 and r.json["items"] and
                                      r.json["items"][0]["status"] == "Running" else None)(
            h.gpuctl("jobs", "-n", ns, "maint-ok", "-o", "json")), 90, "the tolerating job to run")
        self.assertIn(running["nodes"][0], NODES)
        self.assertIsNone(running["pending"])

    def test_a_selector_value_that_exists_nowhere_names_the_values_that_do(self):
        ns = self.namespace("pending-selector")
        h.create(h.gpu_job("h100", ns, gpus=1, node_selector={POOL: "h100-pool"}, outcome_=h.outcome("run")))
        item = pending_item(ns, "h100")
        selector = item["pending"]["unmatchedSelector"]
        self.assertIsNotNone(selector, item)
        self.assertEqual(selector["selector"], "nodeSelector %s=h100-pool" % POOL)
        self.assertEqual(selector["labels"], [{"key": POOL, "wanted": "h100-pool", "values": ["a100-pool"],
                                               "nodesWithout": selector["labels"][0]["nodesWithout"]}])
        self.assertGreater(selector["labels"][0]["nodesWithout"], 0)  # the other suites' nodes
        words = "nodeSelector %s=h100-pool matches no node; the cluster has %s=a100-pool" % (POOL, POOL)
        self.assertIn(words, item["reason"])

        rc, out, err = h.gpuctl("jobs", "-n", ns, "h100")
        self.assertEqual(rc, 0, err)
        self.assertIn(words, out)


if __name__ == "__main__":
    h.main()
