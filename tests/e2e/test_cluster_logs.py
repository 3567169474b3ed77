#!/usr/bin/python3
"""Container logs through the real pods/log path: kubectl (and curl) ask kube-apiserver, which
connects to the node's InternalIP at its kubelet port over TLS checked against the cluster CA, and
kwok, the nodes' kubelet, reads the log files set by harness.set_pod_logs (real captures from
tests/fixtures). tailLines, sinceSeconds, limitBytes, timestamps, previous and follow are the
kubelet's own code (k8s.io/cri-client) running in kwok."""
import time

import harness as h

FLEET = "logs"
PLAIN = "k8s-errors/deviceplugin__register-context-deadline-exceeded__2018.log"   # Go log lines
PREVIOUS = "k8s-errors/deviceplugin__failed-to-initialize-nvml-could-not-load.log"
CRI = "k8s-errors/deviceplugin__v0.14-containerd-cri-log-format.log"            # containerd's own file


def setUpModule():
    h.apply_fleet_file(FLEET)


def text(relpath):
    t = h.fixture(relpath).read_text()
    return t if t.endswith("\n") else t + "\n"


def running_pod(ns, name, node="logs-cpu-0", **kw):
    h.create(h.gpu_pod(name, ns, node=node, gpus=0, **kw))
    return h.wait_pod_phase(name, ns)


class Logs(h.TestCase):
    def test_a_fixture_is_the_containers_log_and_its_previous_log(self):
        ns = self.namespace("logs-fixture")
        running_pod(ns, "plugin", node="logs-gpu-0")
        h.set_pod_logs(ns, "plugin", {"main": h.fixture(PLAIN)}, previous={"main": h.fixture(PREVIOUS)}, stream="stderr")
        self.assertEqual(h.kubectl("logs", "-n", ns, "plugin"), text(PLAIN))
        self.assertEqual(h.kubectl("logs", "-n", ns, "plugin", "--previous"), text(PREVIOUS))
        self.assertEqual(h.kubectl("logs", "-n", ns, "plugin", "--tail=3"), "".join(text(PLAIN).splitlines(True)[-3:]))
        # The API's own parameters, as gpuctl sends them.
        base = "/api/v1/namespaces/%s/pods/plugin/log?container=main" % ns
        code, body = h.api_curl(base + "&tailLines=2")
        self.assertEqual((code, body), (200, "".join(text(PLAIN).splitlines(True)[-2:])))
        code, body = h.api_curl(base + "&previous=true&limitBytes=14")
        self.assertEqual((code, body), (200, text(PREVIOUS)[:14]))
        # pods/log is authorized like any subresource: the viewer may read it, nobody may not.
        self.assertEqual(h.api_curl(base + "&tailLines=1", identity="viewer")[0], 200)
        self.assertEqual(h.api_curl(base, identity="nobody")[0], 403)

    def test_a_cri_format_capture_is_served_as_containerd_wrote_it(self):
        ns = self.namespace("logs-cri")
        running_pod(ns, "plugin")
        h.set_pod_logs(ns, "plugin", {"main": h.fixture(CRI)})
        raw = h.fixture(CRI).read_text().splitlines()
        want = "".join(l.split(" ", 3)[3] + "\n" for l in raw)
        self.assertEqual(h.kubectl("logs", "-n", ns, "plugin"), want)
        stamped = h.kubectl("logs", "-n", ns, "plugin", "--timestamps").splitlines()
        self.assertEqual(stamped[0], "%s %s" % (raw[0].split(" ")[0], raw[0].split(" ", 3)[3]))

    def test_since_and_follow(self):
        ns = self.namespace("logs-follow")
        running_pod(ns, "trainer")
        h.set_pod_logs(ns, "trainer", {"main": "epoch 1 loss 0.90\n"}, at=time.time() - 3600)
        h.append_pod_log(ns, "trainer", "main", "epoch 2 loss 0.45\n")
        self.assertEqual(h.kubectl("logs", "-n", ns, "trainer", "--since=10m"), "epoch 2 loss 0.45\n")
        i = h.info()
        follow = h.Stream([i["kubectl"], "--kubeconfig", i["kubeconfig"], "logs", "-f", "-n", ns, "trainer"], None)
        follow.wait_for("epoch 2")
        h.append_pod_log(ns, "trainer", "main", "epoch 3 loss 0.20\n")
        follow.wait_for("epoch 3")
        # kwok never ends a follow; the kubelet would when the container stops.
        self.assertGreaterEqual(h.end_log_streams("logs-cpu-0"), 1)
        r = follow.finish(30)
        self.assertEqual((r.rc, r.stdout), (0, "epoch 1 loss 0.90\nepoch 2 loss 0.45\nepoch 3 loss 0.20\n"), r.stderr)

    def test_namespace_logs_reach_pods_named_later_and_a_pods_own_win(self):
        ns = self.namespace("logs-ns")
        h.set_namespace_logs(ns, {None: "from the namespace\n"})
        h.create(h.gpu_job("job", ns, gpus=0, outcome_=h.outcome("run"),
                           node_selector={"kubernetes.io/hostname": "logs-cpu-0"}))
        pod = h.wait_for(lambda: [p for p in h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"]
                                  if p["status"].get("phase") == "Running"], 60, "the job's pod")[0]
        name = pod["metadata"]["name"]
        h.wait_for(lambda: h.kubectl("logs", "-n", ns, name, check=False).stdout == "from the namespace\n", 20,
                   "the namespace's logs on " + name)
        h.set_pod_logs(ns, name, {"main": "its own\n"})
        self.assertEqual(h.kubectl("logs", "-n", ns, name), "its own\n")

    def test_what_fails_fails_as_it_does_on_a_real_cluster(self):
        ns = self.namespace("logs-errors")
        running_pod(ns, "quiet")
        r = h.kubectl("logs", "-n", ns, "quiet", check=False)   # no log file: the kubelet's 400
        self.assertEqual(r.rc, 1)
        self.assertIn('no logs found for container "main"', r.stderr)
        h.set_pod_logs(ns, "quiet", {"main": "now\n"})
        r = h.kubectl("logs", "-n", ns, "quiet", "--previous", check=False)
        self.assertEqual(r.rc, 1, r.stdout)
        # A pod bound to a node without a kubelet endpoint (not run by kwok): no port to dial.
        pod = h.gpu_pod("stranded", ns, gpus=0)
        pod["spec"]["nodeName"] = "logs-down-0"
        h.create(pod)
        r = h.kubectl("logs", "-n", ns, "stranded", check=False, timeout=90)
        self.assertEqual(r.rc, 1, r.stdout)
        self.assertIn("Error from server", r.stderr)


if __name__ == "__main__":
    h.main()
