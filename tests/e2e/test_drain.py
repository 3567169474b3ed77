"""gpuctl drain against the real API server: kubectl's pod filters, PDB-blocked evictions that
name the budget and go on once the workload is scaled up, --timeout, a dry run that writes
nothing, a parallel drain of 4 nodes, rolling maintenance of 6 nodes, and the same pods evicted
and kept as kubectl drain on the same scenario."""
import json
import os
import subprocess
import tempfile
import threading

import harness as h

HERE = os.path.dirname(os.path.abspath(__file__))


def node_obj(name):
    return h.kubectl("get", "node", name, "-o", "json")


def reset_node(name):
    patch = {"spec": {"unschedulable": None},
             "metadata": {"annotations": {"gpuctl.io/cordon-reason": None, "gpuctl.io/cordoned-by": None,
                                          "gpuctl.io/cordoned-at": None}}}
    h.kubectl("patch", "node", name, "--type", "merge", "-p", json.dumps(patch))


def pods_on(node, ns):
    items = h.kubectl("get", "pods", "-n", ns, "--field-selector", "spec.nodeName=" + node, "-o", "json")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def pinned(node):
    return {"kubernetes.io/hostname": node}


def deployment(name, ns, node, replicas=1, labels=None, empty_dir=False, node_selector=None):
    labels = {"app": name, **(labels or {})}
    spec = h.pod_spec(gpus=0, node_selector=node_selector or pinned(node))
    spec["terminationGracePeriodSeconds"] = 1
    spec["restartPolicy"] = "Always"
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def daemonset(name, ns, node):
    spec = h.pod_spec(gpus=0, node_selector=pinned(node))
    spec["restartPolicy"] = "Always"
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name, "role": name}}, "spec": spec}}}


def bare(name, ns, node, role):
    p = h.gpu_pod(name, ns, node=node, gpus=1, outcome_=h.outcome("run"), labels={"role": role})
    p["spec"]["terminationGracePeriodSeconds"] = 1
    return p


def scenario(ns, node):
    """A DaemonSet pod, a Deployment pod, a Deployment pod with emptyDir and a bare GPU pod on
    `node`; returns {role: uid} once all four run there."""
    h.create([daemonset("ds", ns, node),
              deployment("deploy", ns, node, labels={"role": "deploy"}),
              deployment("scratch", ns, node, labels={"role": "scratch"}, empty_dir=True),
              bare("bare", ns, node, "bare")])

    def running():
        pods = [p for p in pods_on(node, ns) if p["status"].get("phase") == "Running"]
        roles = {p["metadata"]["labels"].get("role"): p["metadata"]["uid"] for p in pods}
        return roles if set(roles) == {"ds", "deploy", "scratch", "bare"} else None
    return h.wait_for(running, 90, "the scenario's pods on %s" % node)


def surviving_roles(node, ns, uids):
    """Roles whose original pod (same UID) is still on the node."""
    now = {p["metadata"]["uid"] for p in pods_on(node, ns)}
    return {role for role, uid in uids.items() if uid in now}


class DrainTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("drain")

    def test_filters_refuse_then_flags_allow_and_dry_run_writes_nothing(self):
        node = "dr-s-0"
        reset_node(node)
        ns = self.namespace("drain-filters")
        uids = scenario(ns, node)

        # The plan: nothing written (the node's and every pod's resourceVersion unchanged).
        before = {"node": node_obj(node)["metadata"]["resourceVersion"],
                  "pods": sorted((p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in pods_on(node, ns))}
        r = h.gpuctl("drain", node, "--dry-run", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        plan = r.json
        self.assertEqual(plan["kind"], "DrainPlan")
        actions = {p["name"].split("-")[0]: (p["action"], p["reason"]) for p in plan["items"][0]["pods"]
                   if p["namespace"] == ns}
        self.assertEqual(actions["ds"], ("refuse", "daemonset"))
        self.assertEqual(actions["scratch"], ("refuse", "local-storage"))
        self.assertEqual(actions["bare"], ("refuse", "unmanaged"))
        self.assertEqual(actions["deploy"], ("evict", ""))
        self.assertFalse(plan["items"][0]["completes"])
        gpu = [p for p in plan["items"][0]["pods"] if p["namespace"] == ns and p["name"] == "bare"][0]
        self.assertTrue(gpu["gpuPod"])
        self.assertEqual(gpu["moveTo"]["product"], "NVIDIA-A100-SXM4-80GB")
        after = {"node": node_obj(node)["metadata"]["resourceVersion"],
                 "pods": sorted((p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in pods_on(node, ns))}
        self.assertEqual(before, after)

        # Without the flags: cordoned, but nothing evicted; every refusal names its flag.
        r = h.gpuctl("drain", node, "--reason", "e2e filters", "--grace-period", "0")
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        for flag in ("--ignore-daemonsets", "--delete-emptydir-data", "--force"):
            self.assertIn(flag, r.stdout)
        self.assertIn("error: 1 node(s) not fully drained: dr-s-0", r.stderr)
        self.assertTrue(node_obj(node)["spec"].get("unschedulable"))
        self.assertEqual(node_obj(node)["metadata"]["annotations"]["gpuctl.io/cordon-reason"], "e2e filters")
        self.assertEqual(surviving_roles(node, ns, uids), {"ds", "deploy", "scratch", "bare"})

        # With them: the DaemonSet pod stays, everything else goes; re-running continues.
        r = h.gpuctl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--grace-period", "0",
                     "--timeout", "60s")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"dr-s-0\s+drained\s+already cordoned\s+\d+\s+[1-9]")
        self.assertEqual(surviving_roles(node, ns, uids), {"ds"})
        reset_node(node)

    def test_same_pods_evicted_and_kept_as_kubectl_drain(self):
        flags = ["--ignore-daemonsets", "--delete-emptydir-data", "--force", "--grace-period", "0", "--timeout", "60s"]
        results = {}
        for tool, node in (("kubectl", "dr-s-1"), ("gpuctl", "dr-s-2")):
            reset_node(node)
            ns = self.namespace("drain-vs-" + tool)
            uids = scenario(ns, node)
            # Pods of other namespaces on these nodes are none of our business: only ours.
            if tool == "kubectl":
                r = h.kubectl("drain", node, *flags, check=False)
                rc = r.rc
            else:
                r = h.gpuctl("drain", node, *flags)
                rc = r.rc
            self.assertEqual(rc, 0, r.stdout + r.stderr)
            results[tool] = surviving_roles(node, ns, uids)
            self.assertTrue(node_obj(node)["spec"].get("unschedulable"))
            reset_node(node)
        self.assertEqual(results["gpuctl"], results["kubectl"])
        self.assertEqual(results["gpuctl"], {"ds"})

    def test_pdb_blocks_names_the_budget_until_scaled_up_and_timeout_is_honoured(self):
        node, spare = "dr-s-3", "dr-s-4"
        reset_node(node)
        reset_node(spare)
        h.kubectl("cordon", spare)
        ns = self.namespace("drain-pdb")
        sel = {"e2e.gpuctl.dev/drain-group": "s"}
        dep = deployment("ddp", ns, node, replicas=2, node_selector={"kubernetes.io/hostname": node})
        # Either node may host the workload; the spare is cordoned for now, so both land on `node`.
        dep["spec"]["template"]["spec"]["nodeSelector"] = sel
        dep["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                         "values": [node, spare]}]}]}}}
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "ddp-pdb", "namespace": ns},
               "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "ddp"}}}}
        h.create([dep, pdb])
        h.wait_for(lambda: len([p for p in pods_on(node, ns) if p["status"].get("phase") == "Running"]) == 2, 90,
                   "2 ddp pods on " + node)
        h.wait_for(lambda: h.kubectl("get", "pdb", "ddp-pdb", "-n", ns, "-o", "json")["status"].get("currentHealthy") == 2,
                   60, "the PDB to count 2 healthy")

        # --timeout: the drain gives up, names the node, and says which budget blocked it.
        r = h.gpuctl("drain", node, "--timeout", "7s", "--grace-period", "0")
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        budget = "pdb %s/ddp-pdb allows 0 disruptions, needs 2 healthy, has 2" % ns
        self.assertIn(budget, r.stderr)
        self.assertRegex(r.stdout, r"dr-s-3\s+timed_out")
        self.assertIn(budget, r.stdout)
        self.assertIn("error: 1 node(s) not fully drained: dr-s-3", r.stderr)
        self.assertEqual(len(pods_on(node, ns)), 2)

        # The plan shows the same budget.
        plan = h.gpuctl("drain", node, "--dry-run", "-o", "json").json
        ours = [p for p in plan["items"][0]["pods"] if p["namespace"] == ns]
        self.assertEqual({p["action"] for p in ours}, {"blocked"})
        self.assertEqual(ours[0]["pdbs"][0]["name"], "ddp-pdb")

        # Blocked until the workload is scaled up elsewhere: then it completes by itself.
        env = dict(os.environ, KUBECONFIG=h.info()["kubeconfig"])
        proc = subprocess.Popen([h.gpuctl_bin(), "drain", node, "--timeout", "120s", "--grace-period", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        err_lines = []
        saw_budget = threading.Event()

        def read_err():
            for line in proc.stderr:
                err_lines.append(line)
                if budget in line:
                    saw_budget.set()
        reader = threading.Thread(target=read_err)
        reader.start()
        self.assertTrue(saw_budget.wait(60), "".join(err_lines))
        h.kubectl("uncordon", spare)
        h.kubectl("scale", "deployment", "ddp", "-n", ns, "--replicas", "4")
        out = proc.stdout.read()
        rc = proc.wait(150)
        reader.join()
        self.assertEqual(rc, 0, out + "".join(err_lines))
        self.assertRegex(out, r"dr-s-3\s+drained")
        self.assertEqual(pods_on(node, ns), [])
        reset_node(node)
        reset_node(spare)

    def test_parallel_drain_of_four_nodes(self):
        nodes = ["dr-p-%d" % i for i in range(4)]
        for n in nodes:
            reset_node(n)
        ns = self.namespace("drain-par")
        h.create([deployment("w%d" % i, ns, n, replicas=2) for i, n in enumerate(nodes)])
        h.wait_for(lambda: all(len(pods_on(n, ns)) == 2 for n in nodes), 90, "2 pods on each node")
        r = h.gpuctl("drain", "-l", "e2e.gpuctl.dev/drain-group=p", "--max-concurrent", "4",
                     "--max-evictions-in-flight", "3", "--grace-period", "0", "--timeout", "90s", "--reason", "parallel")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        for n in nodes:
            self.assertRegex(r.stdout, n + r"\s+drained\s+cordoned\s+2\s")
            self.assertEqual(pods_on(n, ns), [])
            self.assertTrue(node_obj(n)["spec"].get("unschedulable"))
        for n in nodes:
            reset_node(n)

    def test_rolling_maintenance_of_six_nodes_two_at_a_time(self):
        nodes = ["dr-r-%d" % i for i in range(6)]
        for n in nodes:
            reset_node(n)
        ns = self.namespace("drain-roll")
        h.create([deployment("w%d" % i, ns, n) for i, n in enumerate(nodes)])
        h.wait_for(lambda: all(len(pods_on(n, ns)) == 1 for n in nodes), 90, "a pod on each node")
        i = h.info()
        log = tempfile.NamedTemporaryFile(delete=False, suffix=".log").name
        self.addCleanup(os.unlink, log)
        # The command gets the node as $1 and $GPUCTL_NODE, and records how many of the six are
        # cordoned while it runs (never more than --max-unavailable).
        command = ('test "$1" = "$GPUCTL_NODE" || exit 9; n=$(%s --kubeconfig %s get nodes -l e2e.gpuctl.dev/drain-group=r '
                   '-o jsonpath="{.items[*].spec.unschedulable}" | wc -w); echo "$1 $n" >> %s; echo done "$1"'
                   % (i["kubectl"], i["kubeconfig"], log))
        r = h.gpuctl("drain", "-l", "e2e.gpuctl.dev/drain-group=r", "--rolling", "--max-unavailable", "2",
                     "--exec", command, "--wait-ready", "30s", "--uncordon", "--no-verify", "--grace-period", "0",
                     "--timeout", "60s")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        with open(log) as f:
            lines = [line.split() for line in f.read().splitlines()]
        self.assertEqual(sorted(n for n, _ in lines), nodes)
        self.assertTrue(all(int(c) <= 2 for _, c in lines), lines)
        for n in nodes:
            self.assertRegex(r.stdout, n + r"\s+done\s+drained\s+1\s+ok\s+ready\s+uncordoned")
            self.assertFalse(node_obj(n)["spec"].get("unschedulable"))
            self.assertNotIn("gpuctl.io/cordon-reason", node_obj(n)["metadata"].get("annotations", {}))

        # A failing command stops the rolling at the first failure; the rest are not started.
        r = h.gpuctl("drain", "dr-r-0", "dr-r-1", "dr-r-2", "--rolling", "--exec", 'test "$1" != dr-r-0',
                     "--uncordon", "--no-verify", "--grace-period", "0", "--timeout", "60s")
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"dr-r-0\s+failed\s+drained\s+\d+\s+failed: exited with code 1")
        self.assertRegex(r.stdout, r"dr-r-1\s+not_started")
        self.assertRegex(r.stdout, r"dr-r-2\s+not_started")
        self.assertTrue(node_obj("dr-r-0")["spec"].get("unschedulable"))
        self.assertFalse(node_obj("dr-r-1")["spec"].get("unschedulable"))
        for n in nodes:
            reset_node(n)


if __name__ == "__main__":
    h.main()
