"""`gpuctl nodes` against the real control plane: every number checked against what this test
computes independently from kubectl's view of the same nodes and pods (issue 3's first suite)."""
import json
import re

import harness as h

FLEET = "nodes-e2e"
SELECTOR = "e2e.gpuctl.dev/fleet=nodes-e2e"
NVIDIA = "nvidia.com/"
PRODUCT_LABELS = ["nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator",
                  "gpu.nvidia.com/class", "skypilot.co/accelerator", "accelerator"]


def quantity(v):
    """Integer quantities are all GPU counts take; anything else is a test bug."""
    return int(v)


def container_requests(c):
    res = c.get("resources", {})
    out = {k: quantity(v) for k, v in res.get("requests", {}).items() if k.startswith(NVIDIA)}
    for k, v in res.get("limits", {}).items():
        if k.startswith(NVIDIA):
            out.setdefault(k, quantity(v))
    return out


def pod_gpu_requests(pod):
    """The scheduler's rule, written out independently: max(sum(app), max(init)) + overhead."""
    spec = pod["spec"]
    total = {}
    for c in spec.get("containers", []):
        for k, v in container_requests(c).items():
            total[k] = total.get(k, 0) + v
    init_max = {}
    for c in spec.get("initContainers", []) or []:
        for k, v in container_requests(c).items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    for k, v in (spec.get("overhead") or {}).items():
        if k.startswith(NVIDIA):
            total[k] = total.get(k, 0) + quantity(v)
    return total


def expected_inventory():
    nodes = h.kubectl("get", "nodes", "-l", SELECTOR, "-o", "json")["items"]
    pods = h.kubectl("get", "pods", "-A", "-o", "json")["items"]
    used = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node or p["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for k, v in pod_gpu_requests(p).items():
            used.setdefault(node, {})[k] = used.setdefault(node, {}).get(k, 0) + v
    expected = {}
    for n in nodes:
        name = n["metadata"]["name"]
        labels = n["metadata"].get("labels", {})
        cap = {k: quantity(v) for k, v in n["status"]["capacity"].items() if k.startswith(NVIDIA)}
        alloc = {k: quantity(v) for k, v in n["status"]["allocatable"].items() if k.startswith(NVIDIA)}
        product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), None)
        if not cap and product is None:
            continue  # not a GPU node
        u = used.get(name, {})
        gpu = "nvidia.com/gpu"
        ready = next((c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"), "Unknown")
        expected[name] = {
            "status": {"True": "Ready", "False": "NotReady"}.get(ready, "Unknown"),
            "schedulable": not n["spec"].get("unschedulable", False),
            "product": product,
            "gpus": {"capacity": cap.get(gpu, 0), "allocatable": alloc.get(gpu, 0), "used": u.get(gpu, 0),
                     "free": max(alloc.get(gpu, 0) - u.get(gpu, 0), 0),
                     "unhealthy": max(cap.get(gpu, 0) - alloc.get(gpu, 0), 0)},
            "resources": sorted(
                [{"name": k, "source": "devicePlugin", "capacity": cap.get(k, 0), "allocatable": alloc.get(k, 0),
                  "used": u.get(k, 0), "free": max(alloc.get(k, 0) - u.get(k, 0), 0),
                  "unhealthy": max(cap.get(k, 0) - alloc.get(k, 0), 0)}
                 for k in set(cap) | set(alloc) | set(u) if k != gpu],
                key=lambda r: r["name"]),
            "taints": [{k: t[k] for k in ("key", "value", "effect", "timeAdded") if t.get(k)} for t in n["spec"].get("taints", [])],
            "internalIP": next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"),
        }
    return expected


class NodesTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file(FLEET)
        ns = cls.ns = h.unique_namespace("nodes")
        init = {"name": "warm", "image": "busybox", "command": ["true"],
                "resources": {"limits": {"nvidia.com/gpu": "3"}}}
        pods = [
            h.gpu_pod("a100-two", ns, node="ne-a100-1", gpus=2, tolerations=[{"operator": "Exists"}]),
            h.gpu_pod("v100-one", ns, node="ne-v100-0", gpus=1),
            h.gpu_pod("v100-three", ns, node="ne-v100-0", gpus=3),
            h.gpu_pod("v100-sick", ns, node="ne-v100-1", gpus=1),
            h.gpu_pod("t4-one", ns, node="ne-t4-0", gpus=1),
            h.gpu_pod("cpu-only", ns, node="ne-a10g-0", gpus=0, resources={"requests": {"cpu": "1"}}),
            # finished pods hold nothing
            h.gpu_pod("done", ns, node="ne-a10g-0", gpus=1, outcome_=h.outcome("succeed")),
            h.gpu_pod("failed", ns, node="ne-v100-1", gpus=1, outcome_=h.outcome("fail", exit_code=3)),
            # MIG slices on the mixed-strategy node
            h.gpu_pod("mig", ns, node="ne-a100-0", gpus=0, resources={"limits": {"nvidia.com/mig-3g.20gb": "5"}}),
        ]
        # an init container asking for more than the app container: the pod holds 3
        big_init = h.gpu_pod("init-wins", ns, node="ne-a100-1", gpus=1, tolerations=[{"operator": "Exists"}])
        big_init["spec"]["initContainers"] = [init]
        pods.append(big_init)
        # cordoned ne-a100-1 still runs pods bound to it by name: nodeName skips the scheduler
        for p in pods:
            if p["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname") == "ne-a100-1":
                p["spec"]["nodeName"] = "ne-a100-1"
                del p["spec"]["nodeSelector"]
        h.create(pods)
        for name, phase in [("a100-two", "Running"), ("v100-one", "Running"), ("v100-three", "Running"),
                            ("v100-sick", "Running"), ("t4-one", "Running"), ("cpu-only", "Running"),
                            ("done", "Succeeded"), ("failed", "Failed"), ("mig", "Running"), ("init-wins", "Running")]:
            h.wait_pod_phase(name, ns, phase, timeout=120)

    @classmethod
    def tearDownClass(cls):
        h.delete_namespace(cls.ns)

    def nodes_json(self, *args, **kw):
        r = h.gpuctl("nodes", "-l", SELECTOR, "-o", "json", *args, **kw)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return r.json

    def test_every_number_matches_kubectl(self):
        expected = expected_inventory()
        doc = self.nodes_json()
        self.assertEqual(doc["apiVersion"], "gpuctl.io/v1alpha1")
        self.assertEqual(doc["kind"], "GPUNodeList")
        got = {i["name"]: i for i in doc["items"]}
        self.assertEqual(sorted(got), sorted(expected), "GPU nodes (ne-cpu-0 must not be one)")
        for name, want in expected.items():
            item = got[name]
            actual = {k: item[k] for k in want}
            actual["resources"] = sorted(item["resources"], key=lambda r: r["name"])
            self.assertEqual(actual, want, name)
        # the numbers this fleet and these pods were designed to produce
        self.assertEqual(got["ne-v100-0"]["gpus"], {"capacity": 4, "allocatable": 4, "used": 4, "free": 0, "unhealthy": 0})
        self.assertEqual(got["ne-v100-1"]["gpus"], {"capacity": 4, "allocatable": 2, "used": 1, "free": 1, "unhealthy": 2})
        self.assertEqual(got["ne-a100-1"]["gpus"]["used"], 5)  # 2 + max(1, init 3)
        self.assertFalse(got["ne-a100-1"]["schedulable"])
        self.assertEqual(got["ne-a10g-0"]["gpus"]["used"], 0)  # the finished pod does not count
        self.assertEqual(got["ne-a100-0"]["resources"][0]["name"], "nvidia.com/mig-3g.20gb")
        self.assertEqual(got["ne-a100-0"]["resources"][0]["used"], 5)
        self.assertEqual(got["ne-t4-0"]["product"], "nvidia-tesla-t4")
        self.assertEqual(got["ne-t4-0"]["productLabel"], "cloud.google.com/gke-accelerator")
        self.assertEqual(got["ne-a10g-0"]["productLabel"], "accelerator")
        self.assertEqual(got["ne-v100-0"]["driverVersion"], "460.39")

    def test_summary_per_product(self):
        expected = expected_inventory()
        want = {}

        def add(product, resource, counts):
            s = want.setdefault((product, resource), {"nodes": 0, "capacity": 0, "allocatable": 0, "used": 0, "free": 0})
            s["nodes"] += 1
            for k in ("capacity", "allocatable", "used", "free"):
                s[k] += counts[k]

        for e in expected.values():
            add(e["product"], "nvidia.com/gpu", e["gpus"])
            for r in e["resources"]:
                add(e["product"], r["name"], r)
        # A product whose nodes offer no whole GPUs but other resources (MIG) has no whole-GPU row.
        for product in {p for p, _ in want}:
            row = want[(product, "nvidia.com/gpu")]
            if row["capacity"] == 0 and any(p == product and r != "nvidia.com/gpu" for p, r in want):
                del want[(product, "nvidia.com/gpu")]
        doc = self.nodes_json()
        got = {(s["product"], s["resource"]): {k: s[k] for k in ("nodes", "capacity", "allocatable", "used", "free")}
               for s in doc["summary"]}
        self.assertEqual(got, want)
        self.assertEqual(got[("NVIDIA-A100-SXM4-40GB", "nvidia.com/mig-3g.20gb")]["used"], 5)

    def test_table_and_wide(self):
        r = h.gpuctl("nodes", "-l", SELECTOR)
        self.assertEqual(r.rc, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "STATUS", "PRODUCT", "SOURCE", "RESOURCE", "CAPACITY",
                                            "ALLOCATABLE", "USED", "FREE", "UNHEALTHY", "TAINTS", "AGE"])
        rows = {l.split()[0]: l.split() for l in lines[1:] if l.startswith("ne-")}
        self.assertEqual(rows["ne-a100-1"][1], "Ready,SchedulingDisabled")
        self.assertEqual(rows["ne-v100-1"][3:10], ["plugin", "gpu", "4", "2", "1", "1", "2"])
        self.assertEqual(rows["ne-t4-0"][10], "nvidia.com/gpu:NoSchedule")
        # Every GPU of ne-a100-0 is MIG-partitioned: the default view shows its MIG devices, not 0 0 0 0.
        self.assertEqual(rows["ne-a100-0"][3:10], ["plugin", "mig-3g.20gb", "16", "16", "5", "11", "0"])
        self.assertIn("PRODUCT", [l.split()[0] for l in lines if l], "the product summary follows the table")
        w = h.gpuctl("nodes", "-l", SELECTOR, "-o", "wide")
        self.assertEqual(w.rc, 0, w.stderr)
        wide = {l.split()[0]: l for l in w.stdout.splitlines() if l.startswith("ne-")}
        self.assertIn(h.node("ne-v100-0")["internal_ip"], wide["ne-v100-0"])
        self.assertIn("mig-3g.20gb=5/16", wide["ne-a100-0"])
        self.assertIn("460.39", wide["ne-v100-0"])

    def test_all_includes_cpu_nodes_and_name_output(self):
        doc = self.nodes_json("--all")
        names = [i["name"] for i in doc["items"]]
        self.assertIn("ne-cpu-0", names)
        cpu = next(i for i in doc["items"] if i["name"] == "ne-cpu-0")
        self.assertFalse(cpu["gpuNode"])
        r = h.gpuctl("nodes", "-l", SELECTOR, "-o", "name", "--sort-by", "free")
        self.assertEqual(r.rc, 0, r.stderr)
        ordered = [l.split("/", 1)[1] for l in r.stdout.split()]
        # What the table counts: whole GPUs, or a node whose GPUs are all MIG-partitioned its MIG devices.
        def offered_free(i):
            migs = [r for r in i["resources"] if r["name"].startswith("nvidia.com/mig-")]
            return sum(r["free"] for r in migs) if i["gpus"]["capacity"] == 0 and migs else i["gpus"]["free"]
        frees = {i["name"]: offered_free(i) for i in self.nodes_json()["items"]}
        self.assertEqual([frees[n] for n in ordered], sorted(frees[n] for n in ordered))

    def test_yaml_is_the_same_document(self):
        import yaml
        y = h.gpuctl("nodes", "-l", SELECTOR, "-o", "yaml")
        self.assertEqual(y.rc, 0, y.stderr)
        j = self.nodes_json()
        from_yaml = yaml.safe_load(y.stdout)
        for doc in (from_yaml, j):
            for item in doc["items"]:
                item.pop("ageSeconds")  # the two runs are a moment apart
        self.assertEqual(from_yaml, j)

    def test_read_only_identity_can_list(self):
        # The viewer may not read resource.k8s.io: the nodes are listed, and one line says what the
        # counts leave out.
        r = h.gpuctl("nodes", "-l", SELECTOR, "-o", "json", context="viewer")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertTrue(r.json["items"])
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("Warning: DRA objects not read (resourceslices, resourceclaims, "
                                            "deviceclasses"), r.stderr)
        self.assertTrue(lines[0].endswith("forbidden): GPUs published through DRA are left out of these counts"),
                        r.stderr)

    def test_unauthorized_token_is_a_clear_error(self):
        r = h.gpuctl("nodes", context="badtoken")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("error: unauthorized: the API server rejected these credentials"), r.stderr)

    def test_forbidden_identity_names_user_verb_and_resource(self):
        r = h.gpuctl("nodes", context="nobody")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn('forbidden: nodes is forbidden: User "nobody" cannot list resource "nodes" in API group "" '
                      'at the cluster scope', r.stderr)
        self.assertIn("kubectl auth can-i", r.stderr)

    def test_two_paginated_lists_read_side_by_side_over_http2(self):
        r = h.gpuctl("nodes", "-v", "2", "-o", "name")
        self.assertEqual(r.rc, 0, r.stderr)
        # The two lists; DRA's discovery and lists are read beside them.
        requests = [l for l in r.stderr.splitlines() if l.startswith("GET ") and "/apis/resource.k8s.io" not in l]
        self.assertEqual(len(requests), 2, r.stderr)
        # The two lists are read at once (on two threads), so either may be logged first, each
        # on one whole line.
        nodes = [l for l in requests if re.match(r"^GET https://127\.0\.0\.1:\d+/api/v1/nodes\?limit=500 200 ", l)]
        pods = [l for l in requests if "/api/v1/pods?fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded" in l]
        self.assertEqual(len(nodes), 1, r.stderr)
        self.assertEqual(len(pods), 1, r.stderr)
        for line in requests:
            self.assertRegex(line, r" 200 in \d+ ms \[HTTP/2, (new|reused) connection", line)
        # The pods, the largest list, arrive in protobuf (the real API server's answer to
        # gpuctl's Accept); the nodes in JSON. The inventory's numbers checked by the other tests
        # of this suite were read from that protobuf.
        self.assertIn(", protobuf", pods[0])
        self.assertNotIn("protobuf", nodes[0])
        for secret in h.info()["tokens"].values():
            self.assertNotIn(secret, r.stderr)

    def test_large_lists_arrive_gzip_compressed(self):
        # The API server compresses only answers over 128 KiB, and only when asked: fill the pod
        # list past that with pods that carry a large annotation, bound to a node by name.
        ns = self.namespace("gzip")
        filler = "x" * 4096
        pods = []
        for i in range(40):
            p = h.gpu_pod("bulk-%02d" % i, ns, gpus=0, resources={"requests": {"cpu": "10m"}},
                          annotations={"e2e.gpuctl.dev/filler": filler})
            p["spec"]["nodeName"] = "ne-a10g-0"
            pods.append(p)
        h.create(pods)
        r = h.gpuctl("nodes", "-v", "2", "-o", "name")
        self.assertEqual(r.rc, 0, r.stderr)
        pod_list = [l for l in r.stderr.splitlines() if l.startswith("GET ") and "/api/v1/pods?" in l]
        self.assertEqual(len(pod_list), 1, r.stderr)
        self.assertIn(", gzip]", pod_list[0])


if __name__ == "__main__":
    h.main()
