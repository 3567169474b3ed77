"""Scenarios nodes-json and nodes-table: `gpuctl nodes -o json` and `gpuctl nodes` (its table)
beside the limit (curl of the lists gpuctl reads), kubectl (`get nodes` + `get pods -A` with
gpuctl's field selector, as JSON or as tables) and kubectl-view-allocations (`-r gpu -g
resource,node --ignore-taints`, which computes the same per-node requested/allocatable GPUs; as
CSV or its table). Correctness: gpuctl's GPU counts of every node against a count made here from
the raw curl pages and against what populate wrote."""
import json

import populate
from controlplane import log
from measure import check, run_measured
from peers import VIEW_ALLOCATIONS
from peers import VIEW_ALLOCATIONS_TOOL as VA
from scenario import ListScenario


class NodesJson(ListScenario):
    name = "nodes-json"
    gpuctl_args = ("nodes", "-o", "json")
    gpuctl_out = "gpuctl.json"
    peers = ("kubectl", VA)
    va_output = ["-o", "csv"]

    def peer_argv(self, tool):
        exe = self.extra[VA].path or VIEW_ALLOCATIONS
        return [exe, "--kubeconfig", str(self.cp.kubeconfig), "-r", "gpu", "-g", "resource,node", "--ignore-taints",
                *self.va_output]

    def run_view_allocations(self, rep):
        return [check(run_measured(self.peer_argv(VA), self.work / "view-allocations.out", env=self.env),
                      VIEW_ALLOCATIONS)]

    # -- correctness -----------------------------------------------------------------------------

    def gpuctl_counts(self):
        """{node: {capacity, allocatable, used, free}} as gpuctl's last output says."""
        return {i["name"]: i["gpus"] for i in json.loads((self.work / self.gpuctl_out).read_bytes())["items"]}

    def correctness(self):
        """Every node of gpuctl's output: capacity, allocatable, used and free GPUs equal what the
        raw curl pages say (used: the scheduler's rule over the pods bound to the node; free:
        allocatable - used, at least 0) and what populate wrote; and curl read as many pages as
        gpuctl sent requests. kubectl-view-allocations' requested GPUs are compared too, as
        information (never a failure: it is not ours)."""
        lists = self.pages_items()
        nodes, pods = lists.get("NodeList", []), lists.get("PodList", [])
        used = {}
        for p in pods:
            used[p["spec"].get("nodeName")] = used.get(p["spec"].get("nodeName"), 0) + pod_gpus(p)
        want = {}
        for n in nodes:
            st = n.get("status", {})
            cap = int(st.get("capacity", {}).get("nvidia.com/gpu", 0))
            alloc = int(st.get("allocatable", {}).get("nvidia.com/gpu", 0))
            u = used.get(n["metadata"]["name"], 0)
            # A GPU that fails under running pods leaves used above allocatable: free is then 0.
            want[n["metadata"]["name"]] = {"capacity": cap, "allocatable": alloc, "used": u, "free": max(0, alloc - u)}
        got = self.gpuctl_counts()
        errors = []
        self.check_pages(errors)
        if set(got) != set(want):
            errors.append("gpuctl lists %d nodes, the API %d" % (len(got), len(want)))
        for name, w in want.items():
            g = {k: (got.get(name) or {}).get(k) for k in w}
            if g != w:
                errors.append("%s: gpuctl %s, raw lists %s" % (name, g, w))
            idx = int(name.rsplit("-", 1)[1])
            if w["used"] != populate.expected_gpus_used(idx):
                errors.append("%s: raw lists say %d GPUs used, populate wrote %d" % (
                    name, w["used"], populate.expected_gpus_used(idx)))
        res = {"nodes_checked": len(want), "pods_counted": len(pods), "gpus_used": sum(used.values()),
               "ok": not errors, "errors": errors[:20]}
        if VA in self.extra and self.extra[VA].path and self.va_output == ["-o", "csv"]:
            res["view_allocations_agrees"] = self.view_allocations_agrees(want)
        log("%s correctness: %d nodes, %d pods, %d GPUs used: %s" % (
            self.name, len(want), len(pods), res["gpus_used"], "ok" if not errors else "%d MISMATCHES" % len(errors)))
        return res

    def view_allocations_agrees(self, want):
        """How many nodes kubectl-view-allocations shows with gpuctl's requested and allocatable."""
        rows = {}
        for line in (self.work / "view-allocations.out").read_text().splitlines()[1:]:
            f = line.split(",")
            if len(f) >= 9 and f[1] == "node":
                rows[f[3]] = (float(f[4]), float(f[8]))
        same = sum(1 for n, w in want.items() if rows.get(n) == (float(w["used"]), float(w["allocatable"])))
        return {"nodes_shown": len(rows), "nodes_same": same, "nodes": len(want)}


class NodesTable(NodesJson):
    """The same lists and peers, every tool printing its table."""
    name = "nodes-table"
    gpuctl_args = ("nodes",)
    gpuctl_out = "gpuctl.txt"
    kubectl_output = []
    va_output = ["-o", "table"]

    def gpuctl_counts(self):
        """The node rows of the table (up to the blank line before the per-product summary)."""
        lines = (self.work / self.gpuctl_out).read_text().splitlines()
        head = lines[0].split()
        col = {k: head.index(k.upper()) for k in ("capacity", "allocatable", "used", "free")}
        got = {}
        for line in lines[1:]:
            if not line.strip():
                break
            f = line.split()
            got[f[0]] = {k: int(f[i]) for k, i in col.items()}
        return got


def pod_gpus(pod, res="nvidia.com/gpu"):
    """The scheduler's request of a pod: the larger of the app containers' sum and the largest
    init container, plus the overhead."""
    def req(c):
        return int((c.get("resources", {}).get("requests") or {}).get(res, 0))
    spec = pod["spec"]
    app = sum(req(c) for c in spec.get("containers", []))
    init = max([req(c) for c in spec.get("initContainers", [])] or [0])
    return max(app, init) + int((spec.get("overhead") or {}).get(res, 0))
