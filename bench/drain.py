"""Scenario drain: `gpuctl drain` of one node with P pods (no PodDisruptionBudget) beside
`kubectl drain` of an identical node, with the same flags (--ignore-daemonsets
--delete-emptydir-data, the same --grace-period and --timeout).

Pods must really go, so kwok (the cached binary, tests/cluster's stages) runs against the bench's
API server for this scenario only, managing only the two drain nodes (a label of their own); it
makes their pods Running and deletes them once evicted, as a kubelet would. The pods are populate's
(4 DaemonSet pods, whose DaemonSets exist, and job pods with an emptyDir; the job pods labelled to
stay Running). Before every repetition the node is uncordoned and its pods re-created; after every
drain the node must be cordoned with only its DaemonSet pods left."""
import contextlib
import subprocess
import time
import urllib.parse
from pathlib import Path

import populate
from controlplane import cluster, log
from fleet_hosts import api
from measure import RunFailed, interleave, run_measured, tools_and_correctness

TOOLS = ("gpuctl", "kubectl")
KWOK_LABEL = ("bench.gpuctl.dev/kwok", "drain")
# Node indices far above any --sizes; equal modulo 60, so both nodes get the same products, GPUs,
# namespaces and pods (populate's rotations repeat every 4, 5, 6 and 12 nodes).
NODE_INDEX = {"gpuctl": 900002, "kubectl": 900062}
FLAGS = ["--ignore-daemonsets", "--delete-emptydir-data", "--grace-period", "30", "--timeout", "300s"]
MERGE = "application/merge-patch+json"
# The drained nodes' workload pods live in a namespace of their own: the team namespaces carry
# the jobs scenario's GPU quotas, which would refuse them.
NAMESPACE = "bench-drain"


class Drain:
    def __init__(self, cp, gpuctl, work_dir, pods):
        self.cp, self.gpuctl = cp, str(Path(gpuctl).resolve())
        self.work = Path(work_dir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.pods = pods
        self.node = {t: populate.node_name(i) for t, i in NODE_INDEX.items()}
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(cp.dir), "KUBECONFIG": str(cp.kubeconfig), "NO_COLOR": "1"}
        self.kwok = None

    # -- kwok and the nodes ----------------------------------------------------------------------

    def start_kwok(self):
        stages = self.work / "kwok-stages.yaml"
        stages.write_text(cluster.kwok_stages())
        port = cluster.pick_ports(1)[0]
        self.kwok = self.cp._spawn("kwok", [
            "--kubeconfig=%s" % self.cp.kubeconfig, "--config=%s" % stages, "--manage-all-nodes=false",
            "--manage-nodes-with-label-selector=%s=%s" % KWOK_LABEL, "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16", "--server-address=127.0.0.1:%d" % port])

    def stop_kwok(self):
        if self.kwok and self.kwok.poll() is None:
            self.kwok.terminate()
            try:
                self.kwok.wait(10)
            except subprocess.TimeoutExpired:
                self.kwok.kill()
                self.kwok.wait()
        self.kwok = None

    def setup(self):
        api(self.cp, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": NAMESPACE}}, ok=(201, 409))
        # No controller-manager here makes the default service account that admission wants.
        api(self.cp, "POST", "/api/v1/namespaces/%s/serviceaccounts" % NAMESPACE,
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, ok=(201, 409))
        for ns, app in {(d[0], d[1]) for d in populate.DAEMONS}:
            api(self.cp, "POST", "/apis/apps/v1/namespaces/%s/daemonsets" % ns, daemonset(app), ok=(201, 409))
        for tool, i in NODE_INDEX.items():
            node, status = populate.node_objects(i)
            node["metadata"]["labels"][KWOK_LABEL[0]] = KWOK_LABEL[1]
            api(self.cp, "POST", "/api/v1/nodes", node)
            api(self.cp, "PATCH", "/api/v1/nodes/%s/status" % node["metadata"]["name"], status, MERGE)
        self.start_kwok()
        log("drain: kwok manages %s; %d pods per node" % (", ".join(self.node.values()), self.pods))

    def teardown(self):
        for tool, name in self.node.items():
            with contextlib.suppress(Exception):
                self.delete_pods(name)
            with contextlib.suppress(Exception):
                api(self.cp, "DELETE", "/api/v1/nodes/" + name, ok=(200, 404))
        self.stop_kwok()

    # -- pods ------------------------------------------------------------------------------------

    def pods_on(self, node):
        q = urllib.parse.urlencode({"fieldSelector": "spec.nodeName=" + node})
        return api(self.cp, "GET", "/api/v1/pods?" + q, ok=(200,))[1]["items"]

    def delete_pods(self, node):
        for p in self.pods_on(node):
            m = p["metadata"]
            api(self.cp, "DELETE", "/api/v1/namespaces/%s/pods/%s" % (m["namespace"], m["name"]),
                {"gracePeriodSeconds": 0}, ok=(200, 404))

    def reset(self, tool):
        """Uncordons the node, removes what is left on it, creates its pods and waits until kwok
        runs them all."""
        name, i = self.node[tool], NODE_INDEX[tool]
        api(self.cp, "PATCH", "/api/v1/nodes/" + name, {"spec": {"unschedulable": None}, "metadata": {"annotations": {
            "gpuctl.io/cordon-reason": None, "gpuctl.io/cordoned-by": None, "gpuctl.io/cordoned-at": None}}}, MERGE)
        self.delete_pods(name)
        wait_for(lambda: not self.pods_on(name), 60, "the pods of %s gone" % name)
        tasks = []
        for j in range(self.pods):
            pod, _ = populate.pod_objects(i, j)
            pod["metadata"].pop("uid")
            if j >= len(populate.DAEMONS):  # job pods stay Running (kwok's pod-complete leaves them)
                pod["metadata"]["labels"][cluster.SIM_LABEL + "/outcome"] = "run"
                pod["metadata"]["namespace"] = NAMESPACE
            tasks.append([("POST", "/api/v1/namespaces/%s/pods" % pod["metadata"]["namespace"], pod, "application/json")])
        populate.Writer(self.cp).run(tasks)
        wait_for(lambda: sum(p.get("status", {}).get("phase") == "Running" for p in self.pods_on(name)) == self.pods,
                 120, "%d pods Running on %s (kwok)" % (self.pods, name))

    # -- the drain -------------------------------------------------------------------------------

    def argv(self, tool):
        if tool == "gpuctl":
            return [self.gpuctl, "drain", self.node[tool], *FLAGS]
        return [str(self.cp.bin / "kubectl"), "--kubeconfig", str(self.cp.kubeconfig), "--cache-dir",
                str(self.cp.dir / "kubectl-cache"), "drain", self.node[tool], *FLAGS]

    def run(self, tool):
        self.reset(tool)
        res = run_measured(self.argv(tool), self.work / ("%s.out" % tool), env=self.env, timeout=600)
        errors = [] if res["rc"] == 0 else ["%s drain exited %s: %s" % (tool, res["rc"], res["stderr"].strip()[-500:])]
        errors += self.check(tool)
        return {"wall_s": res["wall_s"], "rss_kib": res["rss_kib"], "rc": res["rc"], "errors": errors[:10]}

    def check(self, tool):
        """Cordoned, and only the DaemonSet pods left (nothing else, not even terminating)."""
        name = self.node[tool]
        errors = []
        if not api(self.cp, "GET", "/api/v1/nodes/" + name, ok=(200,))[1]["spec"].get("unschedulable"):
            errors.append("%s is not cordoned after %s drain" % (name, tool))
        left = [p["metadata"]["name"] for p in self.pods_on(name)
                if [o["kind"] for o in p["metadata"].get("ownerReferences", [])] != ["DaemonSet"]]
        if left:
            errors.append("%d evictable pods left on %s after %s drain: %s" % (len(left), name, tool, left[:3]))
        return errors

    def measure(self, reps):
        try:
            self.setup()
            for t in TOOLS:  # warm-up, not counted: kubectl's discovery cache, the first lists
                self.run(t)
            runs = interleave("drain", TOOLS, reps, self.run)
        finally:
            self.teardown()
        out = {"pods": self.pods, "daemonset_pods": len(populate.DAEMONS), "nodes": self.node}
        out["tools"], out["correctness"] = tools_and_correctness(runs, {t: " ".join(self.argv(t)) for t in TOOLS})
        g, k = out["tools"]["gpuctl"], out["tools"]["kubectl"]
        out["target"] = {"gpuctl_over_kubectl_median": round(g["median_s"] / k["median_s"], 3),
                         "no_slower_than_kubectl": g["median_s"] <= k["median_s"]}
        log("drain correctness: %s" % ("ok" if out["correctness"]["ok"] else "ERRORS"))
        return out


def daemonset(app):
    labels = {"app.kubernetes.io/name": app}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": app},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"bench.gpuctl.dev/no-node": "true"},
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}}


def wait_for(fn, timeout, what):
    deadline = time.time() + timeout
    while not fn():
        if time.time() > deadline:
            raise RunFailed("timed out after %ds waiting for %s" % (timeout, what))
        time.sleep(0.2)
