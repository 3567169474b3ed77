"""`gpuctl diagnose`'s workload checks against the real control plane (issue 15): the real
scheduler leaves pods pending for their real reasons, the real PV controller leaves a claim
Pending, the Job controller hits a real quota, kwok's stages give containers OOMKilled and
CrashLoopBackOff statuses, kwok serves the failed pods' and the device plugin's logs through
pods/log, and the kubelet's events are written as the kubelet writes them, with the fixtures' real
messages. Each check fires on its scenario; test_diagnose.py shows them silent on a healthy node."""
import json
import time

import diagnose_ground as ground
import harness as h

SEL = ground.SELECTOR
B200 = {"nvidia.com/gpu.product": "NVIDIA-B200"}
NCCL = "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3"


def by_check(doc):
    out = {}
    for f in doc["findings"]:
        out.setdefault(f["check"], []).append(f)
    return out


def summaries(doc, check):
    return [f["summary"] for f in by_check(doc).get(check, [])]


def pv(name, cls, size, mode):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"storageClassName": cls, "capacity": {"storage": size}, "accessModes": [mode],
                     "hostPath": {"path": "/tmp/" + name}}}


def pvc(name, ns, cls, size, mode):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"storageClassName": cls, "accessModes": [mode], "resources": {"requests": {"storage": size}}}}


class DiagnoseWorkloadsTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plugin = ground.ensure()
        cls.ns = h.unique_namespace("dxw")
        cls.quota_ns = h.unique_namespace("dxq")
        ns = cls.ns
        cls.pvs = ["%s-small" % ns, "%s-rwo" % ns, "%s-shared" % ns]
        on = {"e2e.gpuctl.dev/fleet": ground.FLEET}
        claim_pod = h.gpu_pod("claim", ns, node_selector=on)
        claim_pod["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "dx-data"}}]
        near_miss = h.gpu_pod("near-miss", ns, node="dx-h100-0",
                              tolerations=[{"key": "dx.gpuctl.dev/reserved", "operator": "Equal", "value": "a100",
                                            "effect": "NoSchedule"}])
        ddp = h.gpu_job("ddp", ns, node="dx-ok-0", outcome_=h.outcome("run"), completions=2, parallelism=2)
        ddp["spec"]["template"]["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "shared"}}]
        oom = h.gpu_pod("oom", ns, node="dx-sick-0", outcome_=h.outcome("fail", exit_code=137, reason="OOMKilled"),
                        resources={"limits": {"nvidia.com/gpu": "1", "memory": "16Gi"}})
        h.create([
            pv(cls.pvs[0], "dx-manual", "50Gi", "ReadWriteMany"), pv(cls.pvs[1], "dx-manual", "200Gi", "ReadWriteOnce"),
            pv(cls.pvs[2], "dx-rwo-" + ns, "10Gi", "ReadWriteOnce"),
            pvc("dx-data", ns, "dx-manual", "100Gi", "ReadWriteMany"), pvc("shared", ns, "dx-rwo-" + ns, "10Gi", "ReadWriteOnce"),
            h.gpu_pod("big", ns, gpus=16, node_selector=on),
            h.gpu_pod("b200", ns, node_selector=dict(on, **B200)),
            near_miss, claim_pod,
            h.gpu_pod("filler", ns, node="dx-old-0", gpus=4),
            h.gpu_pod("web", ns, node="dx-h100-2", gpus=0),
            h.gpu_pod("refused", ns, node="dx-sick-0"),
            h.gpu_pod("nfs", ns, node="dx-sick-0"),
            oom,
            h.gpu_pod("storm", ns, node="dx-sick-0"),
            h.gpu_job("cuda", ns, node="dx-sick-0", outcome_=h.outcome(
                "fail", exit_code=1, message="CUDA driver version is insufficient for CUDA runtime version")),
            h.gpu_job("nccl", ns, node="dx-sick-0", outcome_=h.outcome("fail", exit_code=1)),
            h.gpu_job("done", ns, node="dx-sick-0"),
            {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-typo", "namespace": ns},
             "spec": {"hard": {"nvidia.com/gpu": "64"}}},
            ddp,
        ])
        h.wait_pod_phase("filler", ns)
        h.create(h.gpu_pod("nofree", ns, node="dx-old-0", gpus=2))
        # The kubelet's refusals and mount failures, as it writes them, with the fixtures' messages.
        refused = h.wait_pod_phase("refused", ns)
        allocate = h.fixture("k8s-errors/admission__requested-number-unavailable__hami.txt").read_text().strip()
        h.record_event(ns, refused, "UnexpectedAdmissionError", allocate, host="dx-sick-0")
        nfs = h.wait_pod_phase("nfs", ns)
        missing = h.fixture("k8s-errors/mount__nfs-no-such-file-or-directory__systemd-run__one-line.txt").read_text().strip()
        h.record_event(ns, nfs, "FailedMount", missing, host="dx-sick-0", count=12)
        h.wait_pod_phase("storm", ns)
        h.set_pod_outcome(ns, "storm", "crashloop", restarts=7, exit_code=1)
        # The NCCL job's pod says why only in its log.
        pods = h.wait_for(lambda: h.kubectl("get", "pods", "-n", ns, "-l", "job-name=nccl", "-o", "json")["items"],
                          60, "job nccl's pod")
        h.set_pod_logs(ns, pods[0]["metadata"]["name"], {None: "step 1200 loss 2.31\n" + NCCL + "\n"})
        # A namespace at its GPU quota, and a Job it holds back (the Job controller's real FailedCreate).
        q = cls.quota_ns
        h.create([{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": q},
                   "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}])
        h.wait_for(lambda: h.kubectl("get", "resourcequota", "gpu", "-n", q, "-o", "json").get("status", {}).get("hard"),
                   60, "the quota controller to count quota gpu")
        h.create(h.gpu_pod("running", q, node="dx-sick-0"))
        h.wait_pod_phase("running", q)
        h.wait_for(lambda: h.kubectl("get", "resourcequota", "gpu", "-n", q, "-o", "json")["status"].get(
            "used", {}).get("requests.nvidia.com/gpu") == "1", 60, "quota gpu to count the running pod")
        h.create(h.gpu_job("held", q, node="dx-sick-0"))

    @classmethod
    def tearDownClass(cls):
        for ns in (cls.ns, cls.quota_ns):
            h.delete_namespace(ns)
        h.kubectl("delete", "pv", *cls.pvs, "--wait=false", check=False)

    def diagnose(self, *args, namespace=None):
        r = h.gpuctl("diagnose", "--no-ssh", "-l", SEL, "-n", namespace or self.ns, "-o", "json", *args)
        self.assertIn(r.rc, (0, 4), r.stderr)
        return r.json

    def until(self, check, text, *args, namespace=None, timeout=90):
        """The report once `check` has a finding containing `text` (the controllers and kwok act
        in their own time)."""
        def seen():
            doc = self.diagnose("--check", check, *args, namespace=namespace)
            return doc if any(text in s for s in summaries(doc, check)) else None
        return h.wait_for(seen, timeout, "%s to report %r" % (check, text))

    def test_pending_gpu_pods_get_their_cause_in_numbers(self):
        doc = self.until("gpu-pods-pending", "pending", timeout=120)
        doc = self.until("gpu-pods-pending", "/nofree pending")
        found = {f["object"]["name"]: f for f in by_check(doc)["gpu-pods-pending"]}
        self.assertIn("asks for 16 nvidia.com/gpu per pod and the largest node offers 8", found["big"]["summary"])
        self.assertEqual(found["big"]["severity"], "error")
        # The scheduler's own verdict is the evidence.
        self.assertTrue(any("nodes are available" in e["text"] for e in found["big"]["evidence"]), found["big"])
        self.assertIn("nvidia.com/gpu.product=NVIDIA-B200); those nodes have nvidia.com/gpu.product=", found["b200"]["summary"])
        self.assertIn("nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB", found["b200"]["summary"])
        self.assertIn("have taint dx.gpuctl.dev/reserved=h100:NoSchedule, which it does not tolerate",
                      found["near-miss"]["summary"])
        self.assertIn('its toleration for dx.gpuctl.dev/reserved has value "a100"', found["near-miss"]["summary"])
        self.assertEqual(found["nofree"]["severity"], "warning")
        self.assertIn("no nvidia.com/gpu free now", found["nofree"]["summary"])
        self.assertIn("it waits for claim dx-data (Pending)", found["claim"]["summary"])

    def test_claims_that_cannot_bind_and_rwo_claims_of_parallel_jobs(self):
        doc = self.until("pvc-unbound", "dx-data")
        text = "\n".join(summaries(doc, "pvc-unbound"))
        self.assertIn("claim %s/dx-data is Pending: no PersistentVolume matches" % self.ns, text)
        self.assertIn("1 are too small (at most 50Gi < 100Gi)", text)
        self.assertIn("1 lack access mode ReadWriteMany", text)
        self.assertIn("pod(s) wait on it: %s/claim" % self.ns, text)
        self.assertIn("job %s/ddp runs 2 GPU pods at once on claim shared, which is ReadWriteOnce" % self.ns, text)

    def test_kubelet_refusals_mounts_ooms_and_restarts(self):
        doc = self.diagnose("--check", "gpu-allocation-failed,volume-mount-failed,oom-killed,restart-storm")
        found = by_check(doc)
        alloc = found["gpu-allocation-failed"][0]
        self.assertEqual(alloc["node"], "dx-sick-0")
        self.assertIn("fewer healthy GPUs than the scheduler counted", alloc["summary"])
        self.assertEqual(alloc["evidence"][0]["source"], "event UnexpectedAdmissionError from kubelet on dx-sick-0")
        mount = found["volume-mount-failed"][0]
        self.assertIn("the NFS export path does not exist on the server (192.168.137.121:/nfs/nfs-data/", mount["summary"])
        self.assertEqual(mount["evidence"][0]["source"], "event FailedMount from kubelet on dx-sick-0 (x12)")
        self.assertTrue(any("%s/oom container main was OOMKilled at its memory limit 16Gi" % self.ns in f["summary"]
                            for f in found["oom-killed"]), found["oom-killed"])
        self.assertTrue(any("%s/storm container main restarted 7 times, now in CrashLoopBackOff" % self.ns in f["summary"]
                            for f in found["restart-storm"]), found["restart-storm"])
        # Below the threshold it is quiet.
        doc = self.diagnose("--check", "restart-storm", "--restart-threshold", "8")
        self.assertEqual(summaries(doc, "restart-storm"), [])

    def test_device_plugin_versions_and_a_stuck_rollout(self):
        # Two more plugin DaemonSets (Helm releases "pinned" and "rolling") on dx-old-0 and dx-h100-2.
        ns, nodes = self.ns, ["dx-old-0", "dx-h100-2"]
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}}
        pinned = h.device_plugin_daemonset(ns, release="pinned")
        pinned["spec"]["updateStrategy"] = {"type": "OnDelete"}
        rolling = h.device_plugin_daemonset(ns, release="rolling")
        # A careful rollout: a new pod counts as available after 10 s Ready (without it a pod that
        # crashes a second after starting counts as available, and the rollout runs through).
        rolling["spec"]["minReadySeconds"] = 10
        for ds in (pinned, rolling):
            ds["spec"]["template"]["spec"]["affinity"] = affinity
        h.create([pinned, rolling])
        for ds in ("pinned-nvidia-device-plugin", "rolling-nvidia-device-plugin"):
            for node in nodes:
                h.daemonset_pod(ns, ds, node)
        h.wait_for(lambda: h.kubectl("get", "daemonset", "-n", ns, "rolling-nvidia-device-plugin", "-o", "json")[
            "status"].get("numberAvailable") == 2, 90, "the rolling plugin's pods to be available")
        # OnDelete: a new image reaches only the pod that is deleted, so two versions run.
        new = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
        h.kubectl("set", "image", "-n", ns, "daemonset/pinned-nvidia-device-plugin", "nvidia-device-plugin-ctr=" + new)
        old_pod = h.daemonset_pod(ns, "pinned-nvidia-device-plugin", "dx-h100-2")["metadata"]["name"]
        h.kubectl("delete", "pod", "-n", ns, old_pod, "--wait=false")
        h.wait_for(lambda: (lambda p: p["metadata"]["name"] != old_pod and p["spec"]["containers"][0]["image"] == new)(
            h.daemonset_pod(ns, "pinned-nvidia-device-plugin", "dx-h100-2")), 90, "the pinned plugin's new pod")
        # RollingUpdate to a version that crash-loops: the controller replaces one pod and waits forever.
        patch = {"spec": {"template": {"metadata": {"labels": {h.OUTCOME_LABEL: "crashloop"}},
                                       "spec": {"containers": [{"name": "nvidia-device-plugin-ctr", "image": new}]}}}}
        h.kubectl("patch", "daemonset", "-n", ns, "rolling-nvidia-device-plugin", "--type=strategic", "-p",
                  json.dumps(patch))
        doc = self.until("device-plugin-unhealthy", "is stuck: 1 of 2 pods updated", timeout=120)
        text = "\n".join(summaries(doc, "device-plugin-unhealthy"))
        self.assertIn("the device plugin %s/pinned-nvidia-device-plugin runs 2 versions: "
                      "nvcr.io/nvidia/k8s-device-plugin:v0.17.0 on 1 node(s) (dx-old-0); %s on 1 node(s) (dx-h100-2)"
                      % (ns, new), text)
        self.assertIn("device plugin rollout of %s/rolling-nvidia-device-plugin is stuck: 1 of 2 pods updated, "
                      "1 unavailable" % ns, text)

    def test_an_image_that_needs_a_newer_driver_than_its_node_has(self):
        # dx-cuda-0's driver is 510.47.03 (CUDA 11.6, from the real P100 capture, in GFD's labels).
        h.create([h.gpu_pod("cuda12", self.ns, node="dx-cuda-0", image="nvidia/cuda:12.4.1-base-ubuntu22.04"),
                  h.gpu_pod("cuda11", self.ns, node="dx-cuda-0", image="nvidia/cuda:11.4.3-base-ubuntu20.04")])
        h.wait_pod_phase("cuda12", self.ns)
        h.wait_pod_phase("cuda11", self.ns)
        doc = self.diagnose("--check", "driver-too-old-for-cuda")
        found = by_check(doc).get("driver-too-old-for-cuda", [])
        self.assertEqual([f["object"]["name"] for f in found], ["cuda12"], found)
        self.assertIn("%s/cuda12 container main needs CUDA 12.4.1 but dx-cuda-0's driver 510.47.03 supports CUDA 11.6 "
                      "at most: CUDA 12.4 needs driver >= 550.54.14" % self.ns, found[0]["summary"])
        self.assertEqual(found[0]["evidence"][0]["text"], "image nvidia/cuda:12.4.1-base-ubuntu22.04")

    def test_failed_gpu_jobs_say_why_and_finished_ones_are_counted(self):
        doc = self.until("gpu-job-failed", "/nccl failed")
        doc = self.until("gpu-job-failed", "/cuda failed")
        found = {f["object"]["name"]: f for f in by_check(doc)["gpu-job-failed"]}
        self.assertIn("the node's driver is older than the container's CUDA runtime needs", found["cuda"]["summary"])
        self.assertIn("NCCL hit a system error (network or InfiniBand, shared memory, GPU peer access)",
                      found["nccl"]["summary"])
        self.assertIn(NCCL, [e["text"] for e in found["nccl"]["evidence"]])
        # gpuctl jobs shows the termination message too (it used to drop it).
        jobs = {j["name"]: j for j in h.gpuctl("jobs", "-n", self.ns, "-o", "json").json["items"]}
        cuda = jobs["cuda"]
        self.assertEqual(cuda["failure"]["terminationMessage"],
                         "CUDA driver version is insufficient for CUDA runtime version")
        # ...and the GPU cause it names, with the node the pod ran on (issue 20).
        self.assertIn(": CUDA driver version is insufficient for CUDA runtime version; GPU cause: the node's driver is "
                      "older than the container's CUDA runtime needs on node %s (" % cuda["failure"]["node"],
                      cuda["reason"])
        self.assertEqual(cuda["failure"]["gpuCause"]["id"], "driver-too-old")
        # The NCCL job's cause is only in its log: gpuctl jobs reads it there, as diagnose does.
        nccl = jobs["nccl"]["failure"]
        self.assertEqual((nccl["gpuCause"]["id"], nccl["gpuCause"]["source"], nccl["gpuCause"]["evidence"]),
                         ("nccl-system-error", "log", NCCL))
        # jobs-not-cleaned: `done` has no TTL; with the default 24h it is too young to count.
        self.assertEqual(summaries(self.diagnose("--check", "jobs-not-cleaned"), "jobs-not-cleaned"), [])
        time.sleep(2)
        doc = self.until("jobs-not-cleaned", "older than 1s", "--jobs-older-than", "1s")
        finding = by_check(doc)["jobs-not-cleaned"][0]
        self.assertEqual(finding["severity"], "info")
        self.assertIn("gpuctl jobs clean -n %s --older-than 1s" % self.ns, finding["remedy"])

    def test_quota_typos_and_exhausted_quota(self):
        doc = self.diagnose("--check", "quota-not-enforced")
        self.assertTrue(any("nvidia.com/gpu" in s for s in summaries(doc, "quota-not-enforced")), doc)
        doc = self.until("quota-exhausted", "holds back", namespace=self.quota_ns)
        self.assertIn("%s is at its GPU limit (1 nvidia.com/gpu of 1 used) and holds back 1 workload(s): Job held"
                      % self.quota_ns, summaries(doc, "quota-exhausted")[0])
        doc = self.until("gpu-pods-pending", "/held cannot create its pods", namespace=self.quota_ns)
        self.assertIn('quota "gpu"', summaries(doc, "gpu-pods-pending")[0])

    def test_taints_versions_and_the_device_plugin(self):
        doc = self.diagnose("--check", "gpu-node-untainted,gpu-taint-untolerated,kubelet-version-skew,"
                            "device-plugin-unhealthy,device-plugin-log-errors,monitoring-missing")
        text = "\n".join(f["summary"] for f in doc["findings"])
        self.assertIn("dx-h100-2 has no NoSchedule taint while 2 of the 3 NVIDIA-H100-80GB-HBM3 nodes have "
                      "dx.gpuctl.dev/reserved=h100:NoSchedule", text)
        self.assertIn("dx-h100-2 runs 1 pod(s) that use no GPU (%s: 1)" % self.ns, text)
        self.assertIn("no GPU workload tolerates dx.gpuctl.dev/reserved=h100:NoSchedule, the taint of 2 GPU node(s)", text)
        self.assertIn("dx-old-0's kubelet v1.32.0 is 4 minor versions behind the API server v1.36", text)
        self.assertIn("the NVIDIA-A100-SXM4-80GB pool runs 2 kubelet versions", text)
        self.assertIn("dx-h100-0 has no device plugin pod: dx-system/nvdp-nvidia-device-plugin does not tolerate the "
                      "node's taint dx.gpuctl.dev/reserved=h100:NoSchedule", text)
        self.assertIn("device plugin pod dx-system/%s on dx-noplugin-0 is CrashLoopBackOff" % self.plugin["crashing"], text)
        logs = [f for f in doc["findings"] if f["check"] == "device-plugin-log-errors"]
        self.assertTrue(logs, doc["findings"])
        self.assertEqual(logs[0]["node"], "dx-noplugin-0")
        self.assertIn("NVML could not be loaded", logs[0]["summary"])
        self.assertEqual(logs[0]["evidence"][0]["text"], "2022/05/13 23:09:23 Failed to initialize NVML: could not load NVML library.")
        self.assertRegex(logs[0]["evidence"][0]["time"], r"^\d{4}-\d\d-\d\dT")
        monitoring = summaries(doc, "monitoring-missing")
        self.assertEqual(len(monitoring), 1, monitoring)  # the DCGM exporter runs; the ground has no metrics-server
        self.assertIn("no metrics API", monitoring[0])
        # The verdicts: each GPU node's first failing layer.
        layers = {v["node"]: v["firstFailingLayer"] for v in doc["nodes"]}
        self.assertEqual(layers["dx-h100-0"], "device plugin")
        self.assertEqual(layers["dx-noplugin-0"], "device plugin")
        self.assertEqual(layers["dx-old-0"], "node")
        self.assertIsNone(layers["dx-ok-0"])
        # A workload that tolerates the pool's taint: its GPUs no longer idle.
        h.create(h.gpu_pod("h100-user", self.ns, node="dx-h100-0",
                           tolerations=[{"key": "dx.gpuctl.dev/reserved", "operator": "Exists"}]))
        doc = self.diagnose("--check", "gpu-taint-untolerated")
        self.assertEqual(summaries(doc, "gpu-taint-untolerated"), [])


if __name__ == "__main__":
    h.main()
