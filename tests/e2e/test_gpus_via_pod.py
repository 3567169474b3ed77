"""gpuctl gpus --via pod (issue 21) against the real API server: one probe pod per node, run by
tests/cluster/sim_probe_pods.py (the node's own sshd host runs the pod's command), read back from
the pod's log through the real pods/log path and deleted. The same nodes read over ssh give the
same outcomes and GPUs; a pod that never starts and one that never ends are classified within
--probe-timeout; nothing is left behind (also after Ctrl-C); --fanout bounds the pods in flight;
the API requests per node are counted from gpuctl's -v 2 log."""
import json
import re
import signal
import time

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=gpus-via-pod"
PROBE_LABEL = "app.kubernetes.io/name=gpuctl-probe"
TIMEOUT = 8
# Nodes both sources read, and the pod-only ways a node fails.
BOTH = ["vpod-2080-0", "vpod-2080-1", "vpod-2080-lost", "vpod-t4-0", "vpod-t4-mm"]
LOG_LINE = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) (\S+) (\d{3}) in \d+ ms", re.M)


def via_pod(ns, *args, context=None, timeout=120):
    return h.gpuctl("gpus", "--via", "pod", "--probe-namespace", ns, "--probe-timeout", "%ds" % TIMEOUT, *args,
                    context=context, timeout=timeout)


def probe_pods(ns):
    return h.kubectl("get", "pods", "-n", ns, "-l", PROBE_LABEL, "-o", "json")["items"]


def requests(stderr, ns):
    """gpuctl's requests on the probe namespace's pods, from its -v 2 log: [(method, path, query)]."""
    out = []
    for method, url, _ in LOG_LINE.findall(stderr):
        path, _, query = url.partition("?")
        if "/namespaces/%s/pods" % ns in path:
            out.append((method, path.split("/api/v1", 1)[-1], query))
    return out


class GpusViaPodTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("gpus-via-pod")
        cls.ns = h.unique_namespace("vpod")
        cls.addClassCleanup(h.delete_namespace, cls.ns)
        cls.ssh = h.gpuctl("gpus", *BOTH, *h.ssh_flags(), "--ssh-timeout", "20s", "-o", "json")
        t0 = time.monotonic()
        cls.pod = via_pod(cls.ns, "-l", SELECTOR, "-o", "json", "-v", "2")
        cls.elapsed = time.monotonic() - t0
        cls.ssh_items = {i["name"]: i for i in json.loads(cls.ssh.stdout)["items"]}
        cls.items = {i["name"]: i for i in json.loads(cls.pod.stdout)["items"]}

    def test_same_outcomes_and_gpus_as_over_ssh(self):
        self.assertEqual(self.pod.rc, 1, self.pod.stderr)  # some nodes fail
        for name in BOTH:
            ssh, pod = self.ssh_items[name], self.items[name]
            self.assertEqual(pod["outcome"], ssh["outcome"], (name, pod["message"], ssh["message"]))
            self.assertEqual(pod["driverVersion"], ssh["driverVersion"], name)
            key = lambda g: (g["index"], g["uuid"], g["productName"], g["memory"]["totalMiB"], g["pciBusId"])  # noqa
            self.assertEqual([key(g) for g in pod["gpus"]], [key(g) for g in ssh["gpus"]], name)
            self.assertEqual([f["index"] for f in pod["failedGpus"]], [f["index"] for f in ssh["failedGpus"]], name)
        self.assertEqual(self.items["vpod-2080-0"]["outcome"], "ok")
        self.assertEqual(len(self.items["vpod-2080-0"]["gpus"]), 2)
        self.assertEqual(self.items["vpod-t4-mm"]["outcome"], "driver_library_mismatch")
        self.assertEqual(self.items["vpod-2080-lost"]["outcome"], "partial")
        for name in self.items:
            self.assertEqual(self.items[name].get("via"), "pod", name)

    def test_pods_that_never_start_or_never_end_are_classified_within_the_timeout(self):
        never, hang, down = self.items["vpod-never"], self.items["vpod-hang"], self.items["vpod-down"]
        self.assertEqual(never["outcome"], "image_pull_failed", never)
        self.assertIn("pull access denied", never["message"])
        self.assertLess(never["durationMs"], TIMEOUT * 1000)  # classified as soon as it is seen
        self.assertEqual(hang["outcome"], "timed_out", hang)
        self.assertGreaterEqual(hang["durationMs"], TIMEOUT * 1000)
        self.assertLess(hang["durationMs"], (TIMEOUT + 5) * 1000)
        self.assertEqual(down["outcome"], "unschedulable", down)
        self.assertLess(self.elapsed, TIMEOUT + 15, "the whole run took %.1fs" % self.elapsed)

    def test_no_probe_pod_is_left(self):
        self.assertEqual(probe_pods(self.ns), [])

    def test_api_requests_per_node(self):
        reqs = requests(self.pod.stderr, self.ns)
        creates = [r for r in reqs if r[0] == "POST"]
        logs = [r for r in reqs if r[0] == "GET" and r[1].endswith("/log")]
        deletes = [r for r in reqs if r[0] == "DELETE"]
        lists = [r for r in reqs if r[0] == "GET" and r[1].endswith("/pods")]
        made = len(self.items) - 1  # every node but the NotReady one gets one pod
        self.assertEqual(len(creates), made, reqs)
        self.assertEqual(len(deletes), made, reqs)
        # Logs read: every pod that ran (the never-start pod has none).
        self.assertEqual(len(logs), made - 1, reqs)
        self.assertEqual(len({r[1] for r in deletes}), made)  # each pod deleted once
        for r in lists:
            self.assertIn("probe.gpuctl.io%2Frun%3D", r[2])  # only this run's pods
        # One list per poll for all the pods in flight, never a GET per pod.
        self.assertLessEqual(len(lists), self.elapsed / 0.5 + 2, len(lists))
        print("\nAPI requests for %d nodes (%d probe pods) in %.1fs: %d creates, %d lists, %d log reads, %d deletes"
              % (len(self.items), made, self.elapsed, len(creates), len(lists), len(logs), len(deletes)))

    def test_the_kernel_log_is_read_only_by_a_privileged_probe_pod(self):
        def xid_findings(*extra):
            r = h.gpuctl("diagnose", "-l", "kubernetes.io/hostname=vpod-xid", "--check", "xid-errors", "--via", "pod",
                         "--probe-namespace", self.ns, "--probe-timeout", "%ds" % TIMEOUT, *extra, "-o", "json")
            self.assertIn(r.rc, (0, 4), r.stderr)
            return {f["severity"]: f for f in r.json["findings"] if f["node"] == "vpod-xid"}
        blind = xid_findings()
        self.assertEqual(sorted(blind), ["info"], blind)
        self.assertIn("--probe-privileged", " ".join(e["text"] for e in blind["info"]["evidence"]))
        self.assertIn("--via pod --probe-privileged -l kubernetes.io/hostname=vpod-xid", blind["info"]["remedy"][0])
        seen = xid_findings("--probe-privileged")
        self.assertEqual(sorted(seen), ["critical"], seen)
        self.assertIn("Xid 79", seen["critical"]["summary"])
        self.assertIn("GPU has fallen off the bus", " ".join(e["text"] for e in seen["critical"]["evidence"]))
        self.assertEqual(probe_pods(self.ns), [])

    def test_cleanup_removes_a_leftover(self):
        ns = self.namespace("vpod-clean")
        leftover = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "gpuctl-probe-left", "namespace": ns,
                                 "labels": {"app.kubernetes.io/name": "gpuctl-probe",
                                            "app.kubernetes.io/managed-by": "gpuctl"}},
                    "spec": {"nodeName": "vpod-never", "tolerations": [{"operator": "Exists"}],
                             "containers": [{"name": "probe", "image": "busybox:1.36", "command": ["sleep", "1"]}]}}
        h.create(leftover)
        other = dict(leftover, metadata={"name": "not-a-probe", "namespace": ns})
        h.create(other)
        r = via_pod(ns, "--cleanup")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("gpuctl-probe-left", r.stdout + r.stderr)
        h.wait_for(lambda: probe_pods(ns) == [], 30, "the leftover probe pod to go")
        self.assertEqual([p["metadata"]["name"] for p in h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"]],
                         ["not-a-probe"])

    def test_missing_namespace_is_one_line_with_the_fix(self):
        r = via_pod("vpod-no-such-ns", "vpod-2080-0")
        self.assertEqual(r.rc, 1, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("kubectl create namespace vpod-no-such-ns", lines[0])
        self.assertIn("--probe-namespace", lines[0])

    def test_forbidden_names_the_rbac_needed(self):
        r = via_pod(self.ns, "vpod-2080-0", context="viewer")  # may read pods, may not create them
        self.assertEqual(r.rc, 1, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("create, get, list and delete on pods and get on pods/log", lines[0])
        self.assertIn(self.ns, lines[0])
        self.assertEqual(probe_pods(self.ns), [])

    def test_ctrl_c_exits_130_and_leaves_no_pod(self):
        ns = self.namespace("vpod-int")
        s = h.gpuctl_stream("gpus", "--via", "pod", "--probe-namespace", ns, "--probe-timeout", "120s",
                            "vpod-hang", "vpod-2080-0")
        h.wait_for(lambda: any(p["spec"]["nodeName"] == "vpod-hang" and p["status"].get("phase") == "Running"
                               for p in probe_pods(ns)), 60, "the hang node's probe pod running")
        s.proc.send_signal(signal.SIGINT)
        r = s.finish(timeout=30)
        self.assertEqual(r.rc, 130, r.stderr)
        self.assertEqual(probe_pods(ns), [])

    def test_fanout_bounds_the_pods_in_flight(self):
        ns = self.namespace("vpod-fan")
        r = via_pod(ns, "--fanout", "2", "vpod-2080-0", "vpod-2080-1", "vpod-t4-0", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        outcomes = {i["name"]: i["outcome"] for i in json.loads(r.stdout)["items"]}
        self.assertEqual(outcomes, {"vpod-2080-0": "ok", "vpod-2080-1": "ok", "vpod-t4-0": "ok"})
        stats = json.loads((h.cluster().dir / "probe-pods.json").read_text())["runs"]
        runs = [s for s in stats.values() if s["namespace"] == ns]
        self.assertEqual(len(runs), 1, stats)
        self.assertEqual(runs[0]["pods"], 3)
        self.assertLessEqual(runs[0]["max_in_flight"], 2)
        self.assertGreaterEqual(runs[0]["max_in_flight"], 1)


if __name__ == "__main__":
    h.main()
