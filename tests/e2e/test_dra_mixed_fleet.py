#!/usr/bin/python3
"""`gpuctl nodes` and `gpuctl gpus` on a mixed fleet (issue 19): a device-plugin node and two nodes
whose GPUs NVIDIA's DRA driver publishes (fleets/dra-mixed.yaml, nodes drmix-*). The real scheduler
allocates a template's claim, a plain nvidia.com/gpu request through the DeviceClass's
extendedResourceName and a MIG claim; the driver taints a free device. Every number gpuctl prints
is checked against a count made here, independently, from the ResourceSlices, the ResourceClaims'
allocation results, the DeviceTaintRules, the nodes and the pods as kubectl reads them; every
live GPU's device, claim and pod against the claim that holds its UUID. submit's pre-flight counts
the DRA node's devices for a plain request pinned to it."""
import json
import shutil
import tempfile
from pathlib import Path

import harness as h

FLEET = "dra-mixed"
SEL = "e2e.gpuctl.dev/fleet=" + FLEET
PLUGIN, T4, MIG = "drmix-plugin-0", "drmix-t4-0", "drmix-mig-0"
DRIVER = "gpu.nvidia.com"
BLOCKING = ("NoSchedule", "NoExecute")


def attr(device, name):
    a = (device.get("attributes") or {}).get(name) or {}
    return a.get("string", a.get("version"))


def allocations():
    """{(pool, device): (claim namespace, claim name, [pods it is reserved for], extended)} of every
    allocated ResourceClaim of NVIDIA's driver, cluster-wide."""
    held = {}
    for c in h.kubectl("get", "resourceclaims", "-A", "-o", "json")["items"]:
        st = c.get("status") or {}
        ann = c["metadata"].get("annotations") or {}
        for r in ((st.get("allocation") or {}).get("devices") or {}).get("results") or []:
            if r["driver"] == DRIVER:
                held[(r["pool"], r["device"])] = (
                    c["metadata"]["namespace"], c["metadata"]["name"],
                    sorted(x["name"] for x in st.get("reservedFor") or [] if x.get("resource") == "pods"),
                    ann.get("resource.kubernetes.io/extended-resource-claim") == "true")
    return held


def rule_taints():
    """{(pool, device): [effect]} from DeviceTaintRules that name one device of NVIDIA's driver."""
    out = {}
    for r in h.kubectl("get", "devicetaintrules.v1beta2.resource.k8s.io", "-o", "json")["items"]:
        sel = r["spec"].get("deviceSelector") or {}
        if sel.get("driver") == DRIVER and sel.get("pool") and sel.get("device"):
            out.setdefault((sel["pool"], sel["device"]), []).append(r["spec"]["taint"]["effect"])
    return out


def expected_dra(node):
    """{resource: {capacity, allocatable, used, free, unhealthy}} of a DRA node from its slices:
    full GPUs under nvidia.com/gpu, MIG devices under nvidia.com/mig-<profile>."""
    slices = [s for s in h.kubectl("get", "resourceslices", "-o", "json")["items"]
              if s["spec"].get("nodeName") == node and s["spec"]["driver"] == DRIVER]
    held, rules = allocations(), rule_taints()
    counts = {}
    for s in slices:
        for d in s["spec"]["devices"]:
            res = "nvidia.com/gpu" if attr(d, "type") == "gpu" else "nvidia.com/mig-" + attr(d, "profile")
            c = counts.setdefault(res, {"capacity": 0, "allocatable": 0, "used": 0, "free": 0, "unhealthy": 0})
            key = (s["spec"]["pool"]["name"], d["name"])
            effects = [t["effect"] for t in d.get("taints") or []] + rules.get(key, [])
            bad = any(e in BLOCKING for e in effects)
            c["capacity"] += 1
            c["unhealthy"] += bad
            c["allocatable"] += not bad
            c["used"] += key in held
            c["free"] += not bad and key not in held
    return counts


def expected_plugin(node):
    n = h.kubectl("get", "node", node, "-o", "json")
    used = 0
    for p in h.kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=" + node, "-o", "json")["items"]:
        if p["status"].get("phase") not in ("Succeeded", "Failed"):
            used += sum(int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0))
                        for c in p["spec"]["containers"])
    alloc = int(n["status"]["allocatable"].get("nvidia.com/gpu", 0))
    cap = int(n["status"]["capacity"].get("nvidia.com/gpu", 0))
    return {"capacity": cap, "allocatable": alloc, "used": used, "free": max(0, alloc - used),
            "unhealthy": cap - alloc}


def numbers(x):
    return {k: x[k] for k in ("capacity", "allocatable", "used", "free", "unhealthy")}


class MixedFleetTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file(FLEET)
        cls.ns = h.unique_namespace("drmix")
        cls.addClassCleanup(h.delete_namespace, cls.ns)
        h.create([
            h.gpu_pod("plugin", cls.ns, node=PLUGIN, gpus=2),
            h.claim_template("one-gpu", cls.ns),
            h.claim_pod("claimed", cls.ns, template="one-gpu", node=T4),
            h.gpu_pod("extended", cls.ns, node=T4, gpus=2),   # served by the scheduler's claim
            h.claim_template("mig", cls.ns, device_class="mig.nvidia.com"),
            h.claim_pod("mig", cls.ns, template="mig", node=MIG),
        ])
        for p in ("plugin", "claimed", "extended", "mig"):
            h.wait_pod_phase(p, cls.ns, timeout=120)
        # The driver's health check taints the T4 nobody holds (Xid 79: fallen off the bus).
        held = {d for (pool, d) in allocations() if pool == T4}
        free = [d["name"] for d in h.dra_slice(T4)["spec"]["devices"] if d["name"] not in held]
        assert len(free) == 1, (held, free)
        cls.tainted = free[0]
        h.dra_taint(T4, cls.tainted)
        cls.addClassCleanup(h.dra_untaint, T4, cls.tainted)

    def nodes_json(self):
        r = h.gpuctl("nodes", "-l", SEL, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        return r.json

    def test_counts_per_node_are_the_slices_and_claims(self):
        doc = self.nodes_json()
        items = {i["name"]: i for i in doc["items"]}
        self.assertEqual(sorted(items), sorted([PLUGIN, T4, MIG]))
        # The device plugin's node: node status and pods, as before DRA.
        self.assertEqual(items[PLUGIN]["source"], "devicePlugin")
        self.assertEqual(numbers(items[PLUGIN]["gpus"]), expected_plugin(PLUGIN))
        self.assertEqual(items[PLUGIN]["gpus"]["used"], 2)
        # The T4 node: 4 devices, the template claim's one and the extended request's two used,
        # the driver-tainted one unhealthy. The plain request is counted once, through its claim.
        t4 = expected_dra(T4)
        self.assertEqual(list(t4), ["nvidia.com/gpu"])
        self.assertEqual(items[T4]["source"], "dra")
        self.assertEqual(numbers(items[T4]["gpus"]), t4["nvidia.com/gpu"])
        self.assertEqual(numbers(items[T4]["gpus"]),
                         {"capacity": 4, "allocatable": 3, "used": 3, "free": 0, "unhealthy": 1})
        self.assertIsNone(items[T4]["devicePluginGpus"])
        self.assertEqual([(t["device"], t["key"], t["value"], t["effect"], t["rule"]) for t in items[T4]["deviceTaints"]],
                         [(self.tainted, "gpu.nvidia.com/xid", "79", "NoSchedule", None)])
        # The MIG node: no whole GPU, its seven 1g.5gb devices, one claimed.
        mig = expected_dra(MIG)
        self.assertEqual(items[MIG]["gpus"]["capacity"], 0)
        got = {r["name"]: numbers(r) for r in items[MIG]["resources"] if r["source"] == "dra"}
        self.assertEqual(got, mig)
        self.assertEqual(got["nvidia.com/mig-1g.5gb"]["used"], 1)
        self.assertEqual(got["nvidia.com/mig-1g.5gb"]["free"], 6)

    def test_summary_per_product_covers_both_mechanisms(self):
        doc = self.nodes_json()
        want = {}
        for node in (PLUGIN, T4, MIG):
            product = h.kubectl("get", "node", node, "-o", "json")["metadata"]["labels"]["nvidia.com/gpu.product"]
            counts = {"nvidia.com/gpu": expected_plugin(node)} if node == PLUGIN else expected_dra(node)
            for res, c in counts.items():
                if c["capacity"] == 0:
                    continue
                w = want.setdefault((product, res), {"nodes": 0, "capacity": 0, "allocatable": 0, "used": 0, "free": 0})
                w["nodes"] += 1
                for k in ("capacity", "allocatable", "used", "free"):
                    w[k] += c[k]
        got = {(r["product"], r["resource"]): {k: r[k] for k in ("nodes", "capacity", "allocatable", "used", "free")}
               for r in doc["summary"]}
        for key, w in want.items():
            self.assertEqual(got.get(key), w, key)
        sources = {(r["product"], r["resource"]): r["source"] for r in doc["summary"]}
        self.assertEqual(sources[("NVIDIA-A10G", "nvidia.com/gpu")], "devicePlugin")
        self.assertEqual(sources[("Tesla-T4", "nvidia.com/gpu")], "dra")

    def test_table_says_where_the_numbers_came_from(self):
        r = h.gpuctl("nodes", "-l", SEL)
        self.assertEqual(r.rc, 0, r.stderr)
        lines = r.stdout.splitlines()
        head = lines[0].split()
        rows = {l.split()[0]: l.split() for l in lines[1:] if l.strip() and l.split()[0].startswith("drmix-")}
        col = {k: head.index(k) for k in ("SOURCE", "RESOURCE", "CAPACITY", "USED", "FREE", "UNHEALTHY")}

        def cells(node):
            return [rows[node][col[k]] for k in ("SOURCE", "RESOURCE", "CAPACITY", "USED", "FREE", "UNHEALTHY")]
        self.assertEqual(cells(PLUGIN)[:2], ["plugin", "gpu"])
        self.assertEqual(cells(T4), ["dra", "gpu", "4", "3", "0", "1"])
        self.assertEqual(cells(MIG), ["dra", "mig-1g.5gb", "7", "1", "6", "0"])
        wide = h.gpuctl("nodes", "-l", SEL, "-o", "wide")
        self.assertEqual(wide.rc, 0, wide.stderr)
        self.assertIn("%s:gpu.nvidia.com/xid=79:NoSchedule" % self.tainted,
                      [l for l in wide.stdout.splitlines() if l.startswith(T4 + " ")][0])

    def test_each_live_gpu_is_joined_with_its_device_claim_and_pod(self):
        r = h.gpuctl("gpus", T4, MIG, PLUGIN, *h.ssh_flags(), "--ssh-timeout", "20s", "-o", "json", timeout=120)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        items = {i["name"]: i for i in r.json["items"]}
        held = allocations()
        for node in (T4, MIG):
            devices = {d["name"]: d for d in h.dra_slice(node)["spec"]["devices"]}
            by_uuid = {}
            for d in devices.values():
                parent = attr(d, "parentUUID") or attr(d, "uuid")
                by_uuid.setdefault(parent, []).append(d["name"])
            live = items[node]["gpus"]
            self.assertEqual(sorted(g["uuid"] for g in live), sorted(by_uuid), node)
            for g in live:
                joined = {j["device"]: j for j in g["dra"]}
                self.assertEqual(sorted(joined), sorted(by_uuid[g["uuid"]]), g["uuid"])
                for name, j in joined.items():
                    self.assertEqual(j["uuid"], attr(devices[name], "uuid"))
                    h_ = held.get((node, name))
                    if h_ is None:
                        self.assertIsNone(j["claim"], name)
                        self.assertEqual(j["pods"], [], name)
                        continue
                    ns, claim, pods, extended = h_
                    self.assertEqual((j["claim"]["namespace"], j["claim"]["name"], j["claim"]["extendedResource"]),
                                     (ns, claim, extended), name)
                    self.assertEqual(sorted(j["pods"]), sorted(ns + "/" + p for p in pods), name)
        # Which pod holds which T4, exactly: the two pods of this suite, three devices between them.
        owners = {}
        for g in items[T4]["gpus"]:
            for j in g["dra"]:
                for p in j["pods"]:
                    owners.setdefault(p, []).append(j["device"])
        self.assertEqual(len(owners[self.ns + "/claimed"]), 1)
        self.assertEqual(len(owners[self.ns + "/extended"]), 2)
        tainted = [j for g in items[T4]["gpus"] for j in g["dra"] if j["device"] == self.tainted]
        self.assertEqual([j["unhealthy"] for j in tainted], [True])
        # The device plugin's node has no DRA devices.
        self.assertEqual([g["dra"] for g in items[PLUGIN]["gpus"]], [None] * 4)
        self.assertEqual(items[PLUGIN]["draDevices"], [])

    def test_gpus_table_names_the_pods_holding_dra_gpus(self):
        r = h.gpuctl("gpus", T4, MIG, *h.ssh_flags(), "--ssh-timeout", "20s", timeout=120)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        head = lines[0].split()
        rows = {l.split()[0]: l.split() for l in lines[1:3]}
        col = {k: head.index(k) for k in ("K8S-ALLOCATABLE", "K8S-USED", "GPU-PODS")}
        # Both pods holding T4s, the one whose claim came from a template too; the MIG node's
        # allocatable and used are its MIG devices, as gpuctl nodes counts them.
        self.assertEqual(sorted(rows[T4][col["GPU-PODS"]].split(",")),
                         sorted(["%s/claimed(1)" % self.ns, "%s/extended(2)" % self.ns]))
        self.assertEqual([rows[T4][col["K8S-ALLOCATABLE"]], rows[T4][col["K8S-USED"]]], ["3", "3"])
        self.assertEqual([rows[MIG][col[k]] for k in col], ["7", "1", "%s/mig(1)" % self.ns])

    def test_submit_counts_the_dra_node_a_plain_request_can_use(self):
        # A Job pinned to the DRA T4 node asking for plain nvidia.com/gpu: the node advertises none,
        # but DeviceClass gpu.nvidia.com serves it there (extendedResourceName). Its 3 healthy
        # devices are its room; the claims hold all three now.
        def job(gpus):
            f = self.tmp_file("job-%d.json" % gpus)
            f.write_text(json.dumps(h.gpu_job("plain-%d" % gpus, self.ns, node=T4, gpus=gpus)))
            return h.gpuctl("submit", "-f", f, "-n", self.ns, "--dry-run=client", "-o", "json")
        fits = job(2)
        self.assertEqual(fits.rc, 0, fits.stderr)
        self.assertIn("Warning: the 2 GPUs per pod exist but are busy: at most 0 free on one node now (0 free across 1 "
                      "node)", fits.stderr)
        too_big = job(4)
        self.assertEqual(too_big.rc, 3, too_big.stderr)
        self.assertIn("refused (gpu-capacity): no schedulable node matching kubernetes.io/hostname=%s has 4 GPUs: the "
                      "largest has 3" % T4, too_big.stderr)

    def tmp_file(self, name):
        d = Path(tempfile.mkdtemp(prefix="gpuctl-drmix-"))
        self.addCleanup(shutil.rmtree, d, True)
        return d / name


if __name__ == "__main__":
    h.main()
