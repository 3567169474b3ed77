"""Containers that restart, on kwok's Stages: one DaemonSet pod on one node crash-loops when
labelled (as a device plugin does on a node whose driver is broken), a running pod shows restarts
and its last termination (OOMKilled), and Events posted as the kubelet and kube-scheduler write
them read back as theirs do. What tests/e2e/test_diagnose.py builds its broken nodes from."""
import time

import harness as h

FLEET = "restarts"
SELECTOR = {"e2e.gpuctl.dev/fleet": FLEET}
LOG = "k8s-errors/deviceplugin__register-context-deadline-exceeded__2018.log"


def setUpModule():
    h.apply_fleet_file(FLEET)


def ready(pod):
    return {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}.get("Ready")


class Restarts(h.TestCase):
    def test_one_daemonset_pod_crash_loops_on_one_node(self):
        ns = self.namespace("restarts-ds")
        ds = h.device_plugin_daemonset(ns, node_selector=SELECTOR)
        h.create(ds)
        name = ds["metadata"]["name"]
        self.assertEqual(name, "nvdp-nvidia-device-plugin")
        pod = h.daemonset_pod(ns, name, "restarts-gpu-1")
        pname = pod["metadata"]["name"]
        h.set_pod_logs(ns, pname, {"nvidia-device-plugin-ctr": "2018/11/27 03:44:00 Loading NVML\n"},
                       previous={"nvidia-device-plugin-ctr": h.fixture(LOG)}, stream="stderr")
        pod = h.set_pod_outcome(ns, pname, "crashloop", exit_code=1, reason="Error", message="Registration failed")
        st = pod["status"]
        self.assertEqual(st["phase"], "Running")
        self.assertEqual(ready(pod), "False")
        cond = [c for c in st["conditions"] if c["type"] == "Ready"][0]
        self.assertEqual((cond["reason"], cond["message"]),
                         ("ContainersNotReady", "containers with unready status: [nvidia-device-plugin-ctr]"))
        c = st["containerStatuses"][0]
        self.assertEqual((c["ready"], c["restartCount"], c["state"]["waiting"]["reason"]), (False, 6, "CrashLoopBackOff"))
        self.assertEqual(c["state"]["waiting"]["message"],
                         "back-off 5m0s restarting failed container=nvidia-device-plugin-ctr pod=%s_%s(%s)"
                         % (pname, ns, pod["metadata"]["uid"]))
        last = c["lastState"]["terminated"]
        self.assertEqual((last["exitCode"], last["reason"], last["message"]), (1, "Error", "Registration failed"))
        # What kubectl shows, and the previous instance's log from the fixture.
        row = [l for l in h.kubectl("get", "pods", "-n", ns, "--no-headers").splitlines() if l.startswith(pname)][0]
        self.assertEqual(row.split()[1:4], ["0/1", "CrashLoopBackOff", "6"])
        self.assertEqual(h.kubectl("logs", "-n", ns, pname, "--previous"), h.fixture(LOG).read_text())
        # Only that node's pod: the others stay Ready, and the DaemonSet counts one unavailable.
        for node in ("restarts-gpu-0", "restarts-gpu-2"):
            other = h.daemonset_pod(ns, name, node)
            self.assertEqual((ready(other), other["status"]["containerStatuses"][0]["restartCount"]), ("True", 0))
        h.wait_for(lambda: (lambda s: s.get("numberReady") == 2 and s.get("numberUnavailable") == 1)(
            h.kubectl("get", "ds", name, "-n", ns, "-o", "json")["status"]), 60, "the DaemonSet to count it")
        self.assertNotIn("restarts-cpu-0", [p["spec"]["nodeName"] for p in h.kubectl(
            "get", "pods", "-n", ns, "-o", "json")["items"]])   # the chart's affinity: GPU nodes only

    def test_one_container_of_the_gpu_operators_pod_and_a_pod_labelled_from_the_start(self):
        ns = self.namespace("restarts-op")
        ds = h.device_plugin_daemonset(ns, flavor="gpu-operator", node_selector=SELECTOR)
        ds["spec"]["template"]["spec"]["nodeSelector"].pop("nvidia.com/gpu.deploy.device-plugin")
        h.create(ds)
        pod = h.daemonset_pod(ns, "nvidia-device-plugin-daemonset", "restarts-gpu-2")
        pod = h.set_pod_outcome(ns, pod["metadata"]["name"], "crashloop", restarts=2, container="nvidia-device-plugin")
        by = {c["name"]: c for c in pod["status"]["containerStatuses"]}
        self.assertEqual(by["nvidia-device-plugin"]["state"]["waiting"]["message"].split(" restarting")[0], "back-off 20s")
        self.assertEqual(by["nvidia-device-plugin"]["restartCount"], 2)
        self.assertEqual((by["config-manager"]["ready"], by["config-manager"]["restartCount"]), (True, 0))
        cond = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"][0]
        self.assertEqual(cond["message"], "containers with unready status: [nvidia-device-plugin]")
        # Labelled at creation: Running first (kwok's pod-ready), then crash-looping.
        h.create(h.gpu_pod("born-crashing", ns, node="restarts-cpu-0", gpus=0, outcome_=h.outcome("crashloop", restarts=1)))
        p = h.wait_for(lambda: (lambda p: p if p["status"].get("containerStatuses", [{}])[0].get("state", {}).get("waiting")
                                else None)(h.pod("born-crashing", ns)), 60, "born-crashing to crash-loop")
        self.assertIn("back-off 10s", p["status"]["containerStatuses"][0]["state"]["waiting"]["message"])

    def test_a_restarted_pod_is_ready_with_its_last_termination(self):
        ns = self.namespace("restarts-oom")
        h.create(h.gpu_pod("trainer", ns, node="restarts-gpu-0", gpus=1,
                           outcome_=h.outcome("restarted", restarts=4, exit_code=137, reason="OOMKilled")))
        pod = h.wait_for(lambda: (lambda p: p if p["status"].get("containerStatuses", [{}])[0].get("restartCount")
                                  else None)(h.pod("trainer", ns)), 60, "trainer to restart")
        c = pod["status"]["containerStatuses"][0]
        self.assertEqual((pod["status"]["phase"], ready(pod), c["ready"], c["restartCount"]), ("Running", "True", True, 4))
        self.assertIn("running", c["state"])
        self.assertEqual((c["lastState"]["terminated"]["exitCode"], c["lastState"]["terminated"]["reason"]),
                         (137, "OOMKilled"))

    def test_events_read_back_as_the_kubelets_and_the_schedulers(self):
        ns = self.namespace("restarts-events")
        h.create(h.gpu_pod("pending", ns, gpus=1, node_selector={"e2e.gpuctl.dev/fleet": "none-such"}))
        real = h.wait_for(lambda: h.events_for("Pod", "pending", ns), 60, "the scheduler's FailedScheduling")[0]
        pod = h.pod("pending", ns)
        ours = h.record_event(ns, pod, "FailedScheduling", "0/9 nodes are available: 9 Insufficient nvidia.com/gpu.",
                              component="default-scheduler", count=3, first=time.time() - 120)
        got = h.kubectl("get", "event", ours["metadata"]["name"], "-n", ns, "-o", "json")
        self.assertEqual(sorted(k for k in got if k not in ("series", "metadata", "message")),
                         sorted(k for k in real if k not in ("series", "metadata", "message")))
        for k in ("source", "reportingComponent", "reportingInstance", "action", "type", "firstTimestamp",
                  "lastTimestamp"):
            self.assertEqual(got[k], real[k], k)
        strip = lambda ref: {k: v for k, v in ref.items() if k != "resourceVersion"}  # noqa: E731
        self.assertEqual(strip(got["involvedObject"]), strip(real["involvedObject"]))
        self.assertEqual(got["series"]["count"], 3)
        # The kubelet's BackOff, aggregated over ten minutes, on the container (legacy core/v1).
        node = h.kubectl("get", "node", "restarts-gpu-0", "-o", "json")
        ev = h.record_event(ns, pod, "BackOff", "Back-off restarting failed container main in pod x", host="restarts-gpu-0",
                            count=25, first=time.time() - 600, field_path="spec.containers{main}")
        self.assertEqual((ev["source"], ev["reportingComponent"], ev["reportingInstance"], ev["count"]),
                         ({"component": "kubelet", "host": "restarts-gpu-0"}, "kubelet", "restarts-gpu-0", 25))
        self.assertIsNone(ev.get("eventTime"))
        self.assertTrue(ev["metadata"]["name"].startswith("pending."))
        self.assertIn("(x25 over 10m)", h.kubectl("describe", "pod", "pending", "-n", ns))
        ev = h.record_event("default", node, "NodeNotReady", "Node restarts-gpu-0 status is now: NodeNotReady",
                            type="Normal", host="restarts-gpu-0")
        self.addCleanup(h.kubectl, "delete", "event", ev["metadata"]["name"], "-n", "default", check=False)
        self.assertEqual(ev["involvedObject"], {"apiVersion": "v1", "kind": "Node", "name": "restarts-gpu-0",
                                                "uid": "restarts-gpu-0"})

    def test_the_other_device_plugin_manifests_are_valid(self):
        ns = self.namespace("restarts-manifests")
        for flavor, name, label in (("static", "nvidia-device-plugin-daemonset", {"name": "nvidia-device-plugin-ds"}),
                                    ("gpu-operator", "nvidia-device-plugin-daemonset",
                                     {"app": "nvidia-device-plugin-daemonset"})):
            ds = h.device_plugin_daemonset(ns, flavor=flavor)
            self.assertEqual((ds["metadata"]["name"], ds["spec"]["selector"]["matchLabels"]), (name, label))
            h.kubectl("create", "--dry-run=server", "-f", "-", input=ds)


if __name__ == "__main__":
    h.main()
