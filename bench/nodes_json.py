"""Scenario nodes-json: `gpuctl nodes -o json` beside the limit (curl fetching exactly the lists
gpuctl reads, page by page, as gpuctl asks for them: HTTP/2, gzip) and beside kubectl (`get nodes
-o json` + `get pods -A -o json` with gpuctl's field selector). Interleaved repetitions; then a
correctness check of gpuctl's GPU counts against a count made here from the raw curl pages."""
import json
import re
import urllib.parse
from pathlib import Path

import populate
from controlplane import log
from measure import RunFailed, check, run_measured, summary

TOOLS = ("gpuctl", "curl", "kubectl")
LOG_LINE = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) (\S+) (\d{3}) in \d+ ms")


class NodesJson:
    def __init__(self, cp, gpuctl, work_dir):
        self.cp, self.gpuctl = cp, str(Path(gpuctl).resolve())
        self.work = Path(work_dir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.kubectl = str(cp.bin / "kubectl")
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(cp.dir), "KUBECONFIG": str(cp.kubeconfig), "NO_COLOR": "1"}
        hdr = cp.pki / "curl-headers"
        hdr.write_text("Authorization: Bearer %s\nAccept: application/json\n" % cp.token)
        # Not curl's own User-Agent: the apiserver pretty-prints JSON for curl/ and Wget/ agents,
        # which would make curl read larger pages than gpuctl does.
        self.curl_base = ["curl", "-sS", "--fail", "--http2", "--compressed", "--cacert", str(cp.pki / "ca.crt"),
                          "-H", "@" + str(hdr), "-A", "gpuctl-bench"]

    # -- what gpuctl asks for --------------------------------------------------------------------

    def discover(self):
        """One `gpuctl nodes -o json -v 2` run: its requests (counted, and the lists they read,
        without continue tokens, for curl and kubectl)."""
        res = check(run_measured([self.gpuctl, "nodes", "-o", "json", "-v", "2"], self.work / "gpuctl-v.json",
                                 env=self.env), "gpuctl nodes -o json -v 2")
        reqs = [m.groups() for m in map(LOG_LINE.match, res["stderr"].splitlines()) if m]
        if not reqs:
            raise RunFailed("gpuctl -v 2 logged no requests:\n" + res["stderr"][-2000:])
        lists = []
        for _, url, _ in reqs:
            u = urllib.parse.urlsplit(url)
            q = [(k, v) for k, v in urllib.parse.parse_qsl(u.query) if k != "continue"]
            base = (u.path, tuple(q))
            if base not in lists:
                lists.append(base)
        self.lists = lists
        self.requests = len(reqs)
        detail = sorted({l.split(" in ", 1)[1].split("[", 1)[-1].rstrip("]") for l in res["stderr"].splitlines()
                         if LOG_LINE.match(l) and "[" in l})
        pods = [dict(q) for p, q in lists if p.endswith("/pods")]
        self.field_selector = pods[0].get("fieldSelector", "") if pods else ""
        self.info = {"requests": self.requests, "lists": ["%s?%s" % (p, urllib.parse.urlencode(q)) for p, q in lists],
                     "transport": detail[:4]}
        log("gpuctl reads %d lists in %d requests: %s" % (len(lists), self.requests, ", ".join(self.info["lists"])))

    # -- the three tools -------------------------------------------------------------------------

    def run_gpuctl(self, rep):
        return [check(run_measured([self.gpuctl, "nodes", "-o", "json"], self.work / "gpuctl.json", env=self.env),
                      "gpuctl nodes -o json")]

    def run_curl(self, rep, keep=False):
        """Every list page by page, following continue; one curl per page (the token is in the
        page just read: only its first bytes are looked at, outside the timed part)."""
        runs, pages = [], []
        for path, query in self.lists:
            token, n = None, 0
            while True:
                q = list(query) + ([("continue", token)] if token else [])
                url = "%s%s?%s" % (self.cp.url, path, urllib.parse.urlencode(q))
                out = self.work / ("curl-%s-%d.json" % (path.rsplit("/", 1)[-1], n))
                runs.append(check(run_measured(self.curl_base + ["-o", str(out), url], env=self.env), "curl " + url))
                pages.append(out)
                with open(out, "rb") as f:
                    m = re.search(rb'"continue":\s*"([^"]*)"', f.read(4096))
                token, n = (m.group(1).decode() if m else None), n + 1
                if not token:
                    break
        self.curl_pages = pages
        return runs

    def kubectl_argvs(self):
        k = [self.kubectl, "--kubeconfig", str(self.cp.kubeconfig), "--cache-dir", str(self.cp.dir / "kubectl-cache")]
        pods = k + ["get", "pods", "-A", "-o", "json"]
        if self.field_selector:
            pods += ["--field-selector", self.field_selector]
        return [k + ["get", "nodes", "-o", "json"], pods]

    def run_kubectl(self, rep):
        return [check(run_measured(a, self.work / ("kubectl-%d.json" % i), env=self.env), " ".join(a[4:]))
                for i, a in enumerate(self.kubectl_argvs())]

    def kubectl_requests(self):
        n = 0
        for a in self.kubectl_argvs():
            res = check(run_measured(a + ["-v=6"], env=self.env), "kubectl -v=6")
            n += len(re.findall(r'(?m)(verb="GET"|\bGET https://).*', res["stderr"]))
        return n

    # -- the scenario ----------------------------------------------------------------------------

    def measure(self, reps):
        self.discover()
        for t in TOOLS:  # warm-up, not counted: kubectl's discovery cache, the apiserver's first lists
            getattr(self, "run_" + t)(-1)
        requests = {"gpuctl": self.requests, "kubectl": self.kubectl_requests()}  # as in the timed runs
        runs = {t: [] for t in TOOLS}
        for rep in range(reps):
            order = TOOLS[rep % 3:] + TOOLS[:rep % 3]
            for t in order:
                parts = getattr(self, "run_" + t)(rep)
                runs[t].append({"wall_s": sum(p["wall_s"] for p in parts), "rss_kib": max(p["rss_kib"] for p in parts),
                                "processes": len(parts)})
            log("rep %d/%d: %s" % (rep + 1, reps, ", ".join("%s %.2fs" % (t, runs[t][-1]["wall_s"]) for t in TOOLS)))
        requests["curl"] = runs["curl"][-1]["processes"]
        out = {"gpuctl_requests": self.info, "tools": {}}
        for t in TOOLS:
            out["tools"][t] = dict(summary(runs[t]), requests=requests[t], runs=runs[t], command=self.command(t))
        out["correctness"] = self.correctness()
        return out

    def command(self, t):
        if t == "gpuctl":
            return "%s nodes -o json" % self.gpuctl
        if t == "kubectl":
            return " && ".join(" ".join("'%s'" % x if "!" in x else x for x in a) for a in self.kubectl_argvs())
        return "curl -sS --fail --http2 --compressed --cacert CA -H @HEADERS -A gpuctl-bench URL (one per page, " \
            "following continue): " + \
            ", ".join(self.info["lists"])

    # -- correctness -----------------------------------------------------------------------------

    def correctness(self):
        """Every node of gpuctl's output: capacity, allocatable, used and free GPUs equal what the
        raw curl pages say (used: the scheduler's rule over the pods bound to the node; free:
        allocatable - used, at least 0) and what populate wrote; and curl read as many pages as
        gpuctl sent requests."""
        nodes, pods = [], []
        for page in self.curl_pages:
            doc = json.loads(page.read_bytes())
            (nodes if doc.get("kind") == "NodeList" else pods).extend(doc["items"])
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
        got = {i["name"]: i["gpus"] for i in json.loads((self.work / "gpuctl.json").read_bytes())["items"]}
        errors = []
        if len(self.curl_pages) != self.requests:
            errors.append("curl read %d pages, gpuctl sent %d requests" % (len(self.curl_pages), self.requests))
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
        log("correctness: %d nodes, %d pods, %d GPUs used: %s" % (
            len(want), len(pods), res["gpus_used"], "ok" if not errors else "%d MISMATCHES" % len(errors)))
        return res


def pod_gpus(pod, res="nvidia.com/gpu"):
    """The scheduler's request of a pod: the larger of the app containers' sum and the largest
    init container, plus the overhead."""
    def req(c):
        return int((c.get("resources", {}).get("requests") or {}).get(res, 0))
    spec = pod["spec"]
    app = sum(req(c) for c in spec.get("containers", []))
    init = max([req(c) for c in spec.get("initContainers", [])] or [0])
    return max(app, init) + int((spec.get("overhead") or {}).get(res, 0))
