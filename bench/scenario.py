"""What every list scenario shares: one gpuctl command beside the limit (curl fetching exactly the
lists gpuctl reads, page by page, as gpuctl asks for them: HTTP/2, gzip, protobuf where gpuctl
got protobuf) and beside its peers
(kubectl, kubectl-view-allocations), in interleaved repetitions after one warm-up run of each;
then a correctness check that each scenario defines over gpuctl's output and the raw curl pages.

A scenario is a subclass: its name, gpuctl's arguments, kubectl's argvs, its peers and its
correctness check. The lists curl reads are discovered from one `gpuctl ... -v 2` run."""
import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

from controlplane import log
from measure import RunFailed, check, run_measured, summary

LOG_LINE = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) (\S+) (\d{3}) in \d+ ms")
# What gpuctl sends for the lists it reads in protobuf (kube/protobuf.hpp: kAcceptProtobufOrJson).
ACCEPT_PROTOBUF = "application/vnd.kubernetes.protobuf, application/json"


def _varint(b, i):
    value = shift = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7f) << shift
        shift += 7
        if c < 0x80:
            return value, i


def _fields(b, i, end):
    """(number, value) of each field of one protobuf message: ints, or (start, end) of bytes."""
    while i < end:
        tag, i = _varint(b, i)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 2:
            size, i = _varint(b, i)
            value, i = (i, i + size), i + size
        elif wire in (1, 5):
            value, i = None, i + (8 if wire == 1 else 4)
        else:
            raise ValueError("wire type %d" % wire)
        yield number, value


def protobuf_continue(b):
    """The continue token of a protobuf list page ("k8s\\0", runtime.Unknown {raw = 2}, the list's
    ListMeta = 1 with continue = 3); None on the last page."""
    raw = next(v for n, v in _fields(b, 4, len(b)) if n == 2)
    for n, v in _fields(b, raw[0], raw[1]):
        if n == 1:
            return next((b[w[0]:w[1]].decode() for m, w in _fields(b, v[0], v[1]) if m == 3), None) or None
    return None


class ListScenario:
    name = None
    gpuctl_args = ()
    gpuctl_out = "gpuctl.out"
    peers = ("kubectl",)  # beside gpuctl and curl; each has a run_<peer> (dashes as underscores)

    def __init__(self, cp, gpuctl, work_dir, extra_peers=None):
        """extra_peers: {tool name in the tables: peers.Peer} for the peers the bench installs."""
        self.cp, self.gpuctl = cp, str(Path(gpuctl).resolve())
        self.work = Path(work_dir) / self.name
        self.work.mkdir(parents=True, exist_ok=True)
        self.kubectl = str(cp.bin / "kubectl")
        self.extra = extra_peers or {}
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(cp.dir), "KUBECONFIG": str(cp.kubeconfig), "NO_COLOR": "1"}
        self.headers = {}
        for kind, accept in (("json", "application/json"), ("protobuf", ACCEPT_PROTOBUF)):
            self.headers[kind] = cp.pki / ("curl-headers-" + kind)
            self.headers[kind].write_text("Authorization: Bearer %s\nAccept: %s\n" % (cp.token, accept))
        # Not curl's own User-Agent: the apiserver pretty-prints JSON for curl/ and Wget/ agents,
        # which would make curl read larger pages than gpuctl does.
        self.curl_base = ["curl", "-sS", "--fail", "--http2", "--compressed", "--cacert", str(cp.pki / "ca.crt"),
                          "-A", "gpuctl-bench"]
        self.protobuf_lists = set()

    def tools(self):
        return ["gpuctl", "curl"] + list(self.peers)

    skipped_peers = set()  # --skip-peer: left out of every list scenario

    def unavailable(self, tool):
        """Why a peer cannot run (None when it can)."""
        if tool in self.skipped_peers:
            return "left out (--skip-peer %s)" % tool
        if tool in ("gpuctl", "curl", "kubectl"):
            return None
        p = self.extra.get(tool)
        return "not installed" if p is None else None if p.path else p.reason

    # -- what gpuctl asks for --------------------------------------------------------------------

    def discover(self):
        """One `gpuctl ... -v 2` run: its requests (counted, and the lists they read, without
        continue tokens, for curl and kubectl)."""
        what = "gpuctl %s -v 2" % " ".join(self.gpuctl_args)
        res = check(run_measured([self.gpuctl, *self.gpuctl_args, "-v", "2"], self.work / "gpuctl-v.out",
                                 env=self.env), what)
        reqs = [m.groups() for m in map(LOG_LINE.match, res["stderr"].splitlines()) if m]
        if not reqs:
            raise RunFailed("%s logged no requests:\n%s" % (what, res["stderr"][-2000:]))
        lists = []
        for line in res["stderr"].splitlines():
            m = LOG_LINE.match(line)
            if not m:
                continue
            u = urllib.parse.urlsplit(m.group(2))
            q = [(k, v) for k, v in urllib.parse.parse_qsl(u.query) if k != "continue"]
            base = (u.path, tuple(q))
            if base not in lists:
                lists.append(base)
            if ", protobuf" in line:  # gpuctl asked for protobuf and got it: curl asks as it does
                self.protobuf_lists.add(base)
        self.lists = lists
        self.requests = len(reqs)
        detail = sorted({l.split(" in ", 1)[1].split("[", 1)[-1].rstrip("]") for l in res["stderr"].splitlines()
                         if LOG_LINE.match(l) and "[" in l})
        self.info = {"requests": self.requests, "lists": ["%s?%s" % (p, urllib.parse.urlencode(q)) for p, q in lists],
                     "protobuf": ["%s?%s" % (p, urllib.parse.urlencode(q)) for p, q in lists if (p, q) in self.protobuf_lists],
                     "transport": detail[:4]}
        log("%s: gpuctl reads %d lists in %d requests: %s" % (self.name, len(lists), self.requests,
                                                                ", ".join(self.info["lists"])))

    # -- gpuctl, curl, kubectl -------------------------------------------------------------------

    def run_gpuctl(self, rep):
        return [check(run_measured([self.gpuctl, *self.gpuctl_args], self.work / self.gpuctl_out, env=self.env),
                      "gpuctl " + " ".join(self.gpuctl_args))]

    def run_curl(self, rep, json_only=False):
        """Every list page by page, following continue; one curl per page (the token is in the
        page just read: only its metadata is looked at, outside the timed part). A list gpuctl
        reads in protobuf is asked for in protobuf, unless json_only (the correctness check's
        pages, not timed)."""
        runs, pages = [], []
        for path, query in self.lists:
            kind = "protobuf" if (path, query) in self.protobuf_lists and not json_only else "json"
            token, n = None, 0
            while True:
                q = list(query) + ([("continue", token)] if token else [])
                url = "%s%s?%s" % (self.cp.url, path, urllib.parse.urlencode(q))
                out = self.work / ("curl-%s-%d.%s" % (path.rsplit("/", 1)[-1], n, kind))
                argv = self.curl_base + ["-H", "@" + str(self.headers[kind]), "-o", str(out), url]
                runs.append(check(run_measured(argv, env=self.env), "curl " + url))
                pages.append(out)
                with open(out, "rb") as f:
                    head = f.read(4) == b"k8s\0"
                if head:
                    token = protobuf_continue(out.read_bytes())
                else:
                    with open(out, "rb") as f:
                        m = re.search(rb'"continue":\s*"([^"]*)"', f.read(4096))
                    token = m.group(1).decode() if m else None
                n += 1
                if not token:
                    break
        if json_only:
            self.json_pages = pages
        else:
            self.curl_pages = pages
        return runs

    def kubectl_base(self):
        return [self.kubectl, "--kubeconfig", str(self.cp.kubeconfig), "--cache-dir", str(self.cp.dir / "kubectl-cache")]

    kubectl_output = ["-o", "json"]

    def kubectl_argvs(self):
        """One `kubectl get` per list gpuctl reads, with its selectors: what an admin would type."""
        argvs = []
        for path, query in self.lists:
            parts = path.strip("/").split("/")
            if is_discovery(parts):  # kubectl discovers (and caches) on its own
                continue
            a = self.kubectl_base() + ["get", parts[-1]]
            if "namespaces" in parts[:-1]:
                a += ["-n", parts[parts.index("namespaces") + 1]]
            elif parts[-1] not in ("nodes", "namespaces", "persistentvolumes"):
                a.append("-A")
            q = dict(query)
            a += self.kubectl_output
            a += ["--field-selector", q["fieldSelector"]] if q.get("fieldSelector") else []
            a += ["-l", q["labelSelector"]] if q.get("labelSelector") else []
            argvs.append(a)
        return argvs

    def run_kubectl(self, rep):
        return [check(run_measured(a, self.work / ("kubectl-%d.out" % i), env=self.env), " ".join(a[4:]))
                for i, a in enumerate(self.kubectl_argvs())]

    def kubectl_requests(self):
        n = 0
        for a in self.kubectl_argvs():
            res = check(run_measured(a + ["-v=6"], env=self.env), "kubectl -v=6")
            n += len(re.findall(r'(?m)(verb="GET"|\bGET https://).*', res["stderr"]))
        return n

    def peer_requests(self, tool):
        """HTTP requests of a peer without a request log, from one more run (not timed): the API
        server's own count of resource requests (apiserver_request_total) before and after."""
        before = self.api_requests()
        self.runner(tool)(-1)
        return self.api_requests() - before

    def api_requests(self):
        req = urllib.request.Request(self.cp.url + "/metrics", headers=self.cp.headers())
        with urllib.request.urlopen(req, context=self.cp.ssl_context(), timeout=60) as r:
            text = r.read().decode()
        # Resource requests only: /metrics itself, /api and /apis (discovery) have resource="".
        return int(sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                       if l.startswith("apiserver_request_total{") and re.search(r'[{,]resource="[^"]', l)))

    # -- the scenario ----------------------------------------------------------------------------

    def runner(self, tool):
        return getattr(self, "run_" + tool.replace("-", "_"))

    def measure(self, reps):
        self.discover()
        tools = [t for t in self.tools() if not self.unavailable(t)]
        for t in tools:  # warm-up, not counted: kubectl's discovery cache, the apiserver's first lists
            self.runner(t)(-1)
        # as in the timed runs
        requests = {"gpuctl": self.requests, **({"kubectl": self.kubectl_requests()} if "kubectl" in tools else {}),
                    **{t: self.peer_requests(t) for t in tools if t not in ("gpuctl", "curl", "kubectl")}}
        runs = {t: [] for t in tools}
        for rep in range(reps):
            k = rep % len(tools)
            for t in tools[k:] + tools[:k]:
                parts = self.runner(t)(rep)
                runs[t].append({"wall_s": sum(p["wall_s"] for p in parts), "rss_kib": max(p["rss_kib"] for p in parts),
                                "processes": len(parts)})
            log("%s rep %d/%d: %s" % (self.name, rep + 1, reps,
                                      ", ".join("%s %.2fs" % (t, runs[t][-1]["wall_s"]) for t in tools)))
        requests["curl"] = runs["curl"][-1]["processes"]
        out = {"gpuctl_requests": self.info, "tools": {}}
        for t in self.tools():
            if t not in runs:
                out["tools"][t] = {"unavailable": self.unavailable(t), "command": self.command(t)}
                continue
            out["tools"][t] = dict(summary(runs[t]), requests=requests[t], runs=runs[t], command=self.command(t))
        out["correctness"] = self.correctness()
        return out

    def command(self, t):
        if t == "gpuctl":
            return " ".join([self.gpuctl, *self.gpuctl_args])
        if t == "kubectl":
            return " && ".join(quote(a) for a in self.kubectl_argvs())
        if t == "curl":
            return "curl -sS --fail --http2 --compressed --cacert CA -A gpuctl-bench -H @HEADERS -o PAGE URL (one per " \
                "page, following continue; HEADERS: the token and Accept: application/json, or Accept: %s for the " \
                "lists gpuctl read in protobuf: %s): %s" % (ACCEPT_PROTOBUF, ", ".join(self.info["protobuf"]) or "none",
                                                            ", ".join(self.info["lists"]))
        return quote(self.peer_argv(t))

    def peer_argv(self, tool):
        raise NotImplementedError

    def correctness(self):
        """{"ok": bool, "errors": [...], ...}: gpuctl's output against the raw curl pages."""
        raise NotImplementedError

    def pages_items(self):
        """{kind of list (NodeList, PodList...): [items]} from the last curl run's pages, or, where
        some were protobuf, from one more curl run of the same lists in JSON (not timed)."""
        pages = self.curl_pages
        if self.protobuf_lists:
            self.run_curl(-1, json_only=True)
            pages = self.json_pages
        got = {}
        for page in pages:
            doc = json.loads(page.read_bytes())
            got.setdefault(doc.get("kind"), []).extend(doc.get("items") or [])
        return got

    def check_pages(self, errors):
        if len(self.curl_pages) != self.requests:
            errors.append("curl read %d pages, gpuctl sent %d requests" % (len(self.curl_pages), self.requests))


def is_discovery(parts):
    """/api, /api/v1, /apis, /apis/GROUP and /apis/GROUP/VERSION: discovery, not a list (gpuctl
    asks which resource.k8s.io versions serve DRA before it lists devices)."""
    return parts[0] == "api" and len(parts) <= 2 or parts[0] == "apis" and len(parts) <= 3


def quote(argv):
    return " ".join("'%s'" % x if any(c in x for c in "!, ") else x for x in argv)
