"""gpuctl taint, label, cordon and uncordon against the real API server: what gpuctl says it did
is checked against kubectl's view of the node, concurrent writers lose nothing, dry runs write
nothing, and refusals leave the node as it was."""
import concurrent.futures
import json

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=node-admin"


def node(name):
    return h.kubectl("get", "node", name, "-o", "json")


def taints(name):
    return [(t["key"], t.get("value", ""), t["effect"]) for t in node(name)["spec"].get("taints", [])]


def rv(name):
    return node(name)["metadata"]["resourceVersion"]


class NodeAdminTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("node-admin")

    def reset(self, name):
        """Back to no taints, schedulable, no gpuctl annotations (other tests share the nodes)."""
        patch = {"spec": {"taints": None, "unschedulable": None},
                 "metadata": {"annotations": {"gpuctl.io/cordon-reason": None, "gpuctl.io/cordoned-by": None,
                                              "gpuctl.io/cordoned-at": None},
                              "labels": {"team": None, "accelerator": None}}}
        h.kubectl("patch", "node", name, "--type", "merge", "-p", json.dumps(patch))

    def test_taint_add_is_idempotent_and_overwrite_is_explicit(self):
        self.reset("na-0")
        rc, out, err = h.gpuctl("taint", "na-0", "dedicated=ml:NoSchedule")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "node/na-0 tainted: added dedicated=ml:NoSchedule\n")
        self.assertIn(("dedicated", "ml", "NoSchedule"), taints("na-0"))

        before = rv("na-0")
        rc, out, err = h.gpuctl("taint", "na-0", "dedicated=ml:NoSchedule")
        self.assertEqual((rc, out), (0, "node/na-0 unchanged: already has dedicated=ml:NoSchedule\n"), err)
        self.assertEqual(rv("na-0"), before)  # nothing was written

        rc, out, err = h.gpuctl("taint", "na-0", "dedicated=vision:NoSchedule")
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(out, "")
        self.assertIn("--overwrite is false", err)
        self.assertEqual(err.count("\n"), 1)
        self.assertEqual(rv("na-0"), before)

        rc, out, err = h.gpuctl("taint", "na-0", "dedicated=vision:NoSchedule", "--overwrite")
        self.assertEqual(rc, 0, err)
        self.assertEqual(taints("na-0"), [("dedicated", "vision", "NoSchedule")])

        rc, out, err = h.gpuctl("taint", "na-0", "dedicated-")
        self.assertEqual((rc, out), (0, "node/na-0 tainted: removed dedicated\n"), err)
        self.assertEqual(taints("na-0"), [])

    def test_invalid_taints_are_usage_errors_and_change_nothing(self):
        self.reset("na-0")
        before = rv("na-0")
        for spec in ["a:Bogus", "bad key=x:NoSchedule", "k=" + "v" * 64 + ":NoSchedule", "a=b"]:
            rc, out, err = h.gpuctl("taint", "na-0", spec)
            self.assertEqual(rc, 2, (spec, out, err))
            self.assertEqual(out, "")
            self.assertTrue(err.startswith("error: "), err)
        self.assertEqual(rv("na-0"), before)

    def test_concurrent_taint_writers_lose_nothing(self):
        self.reset("na-1")
        keys = ["writer-%d" % i for i in range(8)]
        with concurrent.futures.ThreadPoolExecutor(len(keys)) as pool:
            results = list(pool.map(lambda k: h.gpuctl("taint", "na-1", k + "=x:NoSchedule", "-o", "json"), keys))
        for k, r in zip(keys, results):
            self.assertEqual(r.rc, 0, (k, r.stderr))
            self.assertEqual(r.json["items"][0]["result"], "changed")
        present = {t[0] for t in taints("na-1")}
        self.assertEqual(present, set(keys))
        # Eight writers on one node's list: the server refused some writes with 409 and gpuctl
        # re-planned them; a blind write would have dropped taints and failed the check above.
        conflicts = sum(r.json["items"][0]["conflicts"] for r in results)
        print("conflicts retried:", conflicts)

    def test_noexecute_names_the_pods_it_would_evict_and_needs_yes(self):
        self.reset("na-2")
        ns = self.namespace()
        h.create([h.gpu_pod("intolerant", ns, node="na-2", gpus=1),
                  h.gpu_pod("tolerant", ns, node="na-2", gpus=1, tolerations=[{"key": "maint", "operator": "Exists"}])])
        h.wait_pod_phase("intolerant", ns)
        h.wait_pod_phase("tolerant", ns)
        before = rv("na-2")
        rc, out, err = h.gpuctl("taint", "na-2", "maint=now:NoExecute")
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(out, "")
        self.assertIn("1 pod(s) do not tolerate maint=now:NoExecute and would be evicted: %s/intolerant" % ns, err)
        self.assertIn("--yes", err)
        self.assertEqual(rv("na-2"), before)

        rc, out, err = h.gpuctl("taint", "na-2", "maint=now:NoSchedule")
        self.assertEqual(rc, 0, err)
        self.assertIn("do not tolerate maint=now:NoSchedule", err)  # a warning: they keep running
        self.assertIn("%s/intolerant" % ns, err)

        rc, out, err = h.gpuctl("taint", "na-2", "maint=now:NoExecute", "--yes")
        self.assertEqual(rc, 0, err)
        self.assertIn(("maint", "now", "NoExecute"), taints("na-2"))
        t = next(t for t in node("na-2")["spec"]["taints"] if t["effect"] == "NoExecute")
        self.assertIn("timeAdded", t)
        # The taint manager (kube-controller-manager) evicts the pod that does not tolerate it.
        h.wait_for(lambda: h.kubectl("get", "pod", "intolerant", "-n", ns, check=False).rc != 0, timeout=90,
                   what="the intolerant pod to be evicted by the NoExecute taint")
        self.assertEqual(h.pod("tolerant", ns)["status"]["phase"], "Running")
        self.reset("na-2")

    def test_cordon_records_reason_user_and_time_and_uncordon_clears_them(self):
        self.reset("na-3")
        me = h.kubectl("auth", "whoami", "-o", "json")["status"]["userInfo"]["username"]
        rc, out, err = h.gpuctl("cordon", "na-3", "--reason", "uncorrectable ECC errors")
        self.assertEqual((rc, out), (0, 'node/na-3 cordoned: reason "uncorrectable ECC errors"\n'), err)
        n = node("na-3")
        self.assertTrue(n["spec"]["unschedulable"])
        ann = n["metadata"]["annotations"]
        self.assertEqual(ann["gpuctl.io/cordon-reason"], "uncorrectable ECC errors")
        self.assertEqual(ann["gpuctl.io/cordoned-by"], me)
        self.assertRegex(ann["gpuctl.io/cordoned-at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

        inv = h.gpuctl("nodes", "-l", SELECTOR, "-o", "json").json
        item = next(i for i in inv["items"] if i["name"] == "na-3")
        self.assertFalse(item["schedulable"])
        self.assertEqual(item["cordon"]["reason"], "uncorrectable ECC errors")
        self.assertEqual(item["cordon"]["by"], me)
        rc, wide, err = h.gpuctl("nodes", "-l", SELECTOR, "-o", "wide")
        self.assertIn('"uncorrectable ECC errors" by %s at ' % me, wide)

        before = rv("na-3")
        rc, out, err = h.gpuctl("cordon", "na-3", "--reason", "something else")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith('node/na-3 unchanged: already cordoned: reason "uncorrectable ECC errors" by '), out)
        self.assertEqual(rv("na-3"), before)

        rc, out, err = h.gpuctl("uncordon", "na-3")
        self.assertEqual((rc, out), (0, 'node/na-3 uncordoned: cleared reason "uncorrectable ECC errors"\n'), err)
        n = node("na-3")
        self.assertFalse(n["spec"].get("unschedulable", False))
        self.assertFalse(any(k.startswith("gpuctl.io/") for k in n["metadata"].get("annotations", {})))
        rc, out, err = h.gpuctl("uncordon", "na-3")
        self.assertEqual((rc, out), (0, "node/na-3 unchanged: already uncordoned\n"), err)

    def test_dry_runs_write_nothing(self):
        for name in ("na-0", "na-1"):
            self.reset(name)
        before = {n: rv(n) for n in ("na-0", "na-1")}
        rc, out, err = h.gpuctl("cordon", "na-0", "na-1", "--reason", "test", "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertIn("node/na-0 cordoned: reason \"test\" (dry run)\n  PATCH /api/v1/nodes/na-0 (application/merge-patch+json) {", out)
        rc, out, err = h.gpuctl("taint", "na-0", "na-1", "x=y:NoSchedule", "--dry-run=server", "-o", "json")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["dryRun"], "server")
        self.assertEqual([i["result"] for i in doc["items"]], ["changed", "changed"])
        rc, out, err = h.gpuctl("label", "-l", SELECTOR, "team=vision", "--dry-run=server")
        self.assertEqual(rc, 0, err)
        self.assertEqual({n: rv(n) for n in ("na-0", "na-1")}, before)
        self.assertEqual(taints("na-0"), [])

    def test_label_by_selector_with_overwrite(self):
        names = ["na-0", "na-1", "na-2", "na-3"]
        for name in names:
            self.reset(name)
        rc, out, err = h.gpuctl("label", "-l", SELECTOR, "accelerator=nvidia-v100", "-o", "name")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.split()), ["node/" + n for n in names])
        for n in names:
            self.assertEqual(node(n)["metadata"]["labels"]["accelerator"], "nvidia-v100")
        rc, out, err = h.gpuctl("label", "na-0", "accelerator=nvidia-a100")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("already has label accelerator=nvidia-v100, and --overwrite is false", err)
        rc, out, err = h.gpuctl("label", "na-0", "accelerator=nvidia-a100", "--overwrite")
        self.assertEqual((rc, out), (0, "node/na-0 labeled: changed accelerator=nvidia-v100 to nvidia-a100\n"), err)
        # The product column of `gpuctl nodes` reads GFD's label first; the hand-made label is kept too.
        rc, out, err = h.gpuctl("label", "-l", SELECTOR, "accelerator-")
        self.assertEqual(rc, 0, err)
        for n in names:
            self.assertNotIn("accelerator", node(n)["metadata"]["labels"])

    def test_missing_node_is_named_and_the_others_go_on(self):
        self.reset("na-0")
        rc, out, err = h.gpuctl("label", "na-0", "na-nope", "team=vision")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(out, "node/na-0 labeled: set team=vision\n")
        self.assertIn('error: node/na-nope: node "na-nope" not found', err)
        self.assertTrue(err.endswith("error: 1 of 2 node(s) failed: na-nope\n"), err)
        self.assertEqual(node("na-0")["metadata"]["labels"]["team"], "vision")

    def test_read_only_identity_is_refused_clearly(self):
        rc, out, err = h.gpuctl("cordon", "na-0", context="viewer")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(out, "")
        self.assertIn("forbidden", err)
        self.assertFalse(node("na-0")["spec"].get("unschedulable", False))


if __name__ == "__main__":
    h.main()
