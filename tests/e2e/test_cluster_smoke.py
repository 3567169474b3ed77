#!/usr/bin/python3
"""Proves the e2e cluster and its harness with kubectl, curl and ssh only (no gpuctl).

Applies fleets/smoke.yaml (nodes smoke-*) and checks the behaviours gpuctl's suites rely on."""
import concurrent.futures
import os
import socket
import subprocess
import time
import xml.dom.minidom

import harness as h

FLEET = "smoke"


def setUpModule():
    h.apply_fleet_file(FLEET)


def fleet_nodes():
    out = h.kubectl("get", "nodes", "-l", "e2e.gpuctl.dev/fleet=" + FLEET, "-o", "json")
    return {n["metadata"]["name"]: n for n in out["items"]}


def only_smoke_nodes():
    """Keeps test pods on this suite's nodes, so other suites' GPU accounting is untouched."""
    return {"e2e.gpuctl.dev/fleet": FLEET}


class Nodes(h.TestCase):
    def test_nodes_ready_with_capacity_labels_and_addresses(self):
        nodes = fleet_nodes()
        info = h.info()
        self.assertEqual(sorted(nodes), sorted(n for n, v in info["nodes"].items() if v["fleet"] == FLEET))
        for name, node in nodes.items():
            with self.subTest(node=name):
                conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
                self.assertEqual(conds.get("Ready"), "True")
                taints = [t["key"] for t in node["spec"].get("taints", [])]
                self.assertNotIn("node.kubernetes.io/not-ready", taints)
                ips = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
                self.assertEqual(ips, [info["nodes"][name]["internal_ip"]])
                self.assertNotEqual(ips[0], "127.0.0.1")
                self.assertEqual(node["status"]["capacity"], info["nodes"][name]["capacity"])
        # distinct addresses
        all_ips = [v["internal_ip"] for v in info["nodes"].values()]
        self.assertEqual(len(all_ips), len(set(all_ips)))

        t4 = nodes["smoke-t4-0"]
        self.assertEqual(t4["status"]["capacity"]["nvidia.com/gpu"], "4")
        self.assertEqual(t4["status"]["allocatable"]["nvidia.com/gpu"], "4")
        lab = t4["metadata"]["labels"]
        self.assertEqual(lab["nvidia.com/gpu.product"], "Tesla-T4")
        self.assertEqual(lab["nvidia.com/gpu.count"], "4")
        self.assertEqual(lab["nvidia.com/gpu.family"], "turing")
        self.assertEqual(lab["nvidia.com/gpu.memory"], "15360")
        # derived from the fixture: driver 515.105.01, CUDA 11.7
        self.assertEqual((lab["nvidia.com/cuda.driver.major"], lab["nvidia.com/cuda.driver.minor"],
                          lab["nvidia.com/cuda.driver.rev"]), ("515", "105", "01"))
        self.assertEqual((lab["nvidia.com/cuda.runtime.major"], lab["nvidia.com/cuda.runtime.minor"]), ("11", "7"))
        self.assertIn({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, t4["spec"]["taints"])

        v100 = nodes["smoke-v100-0"]
        self.assertEqual(v100["status"]["capacity"]["nvidia.com/gpu"], "2")
        self.assertEqual(v100["status"]["allocatable"]["nvidia.com/gpu"], "1")   # unhealthyGpus: 1
        self.assertEqual(v100["metadata"]["labels"]["nvidia.com/gpu.product"], "Tesla-V100-PCIE-32GB")

        cpu = nodes["smoke-cpu-0"]
        self.assertNotIn("nvidia.com/gpu", cpu["status"]["capacity"])
        self.assertNotIn("nvidia.com/gpu.product", cpu["metadata"]["labels"])
        self.assertEqual(cpu["status"]["capacity"]["cpu"], "16")



class Pods(h.TestCase):
    def test_taint_needs_toleration(self):
        ns = self.namespace("smoke-taint")
        h.create(h.gpu_pod("no-tol", ns, node="smoke-t4-0", gpus=1, tolerate_gpu_taint=False))
        h.create(h.gpu_pod("tol", ns, node="smoke-t4-0", gpus=1, tolerate_gpu_taint=True))
        p = h.wait_pod_phase("tol", ns, "Running", timeout=60)
        self.assertEqual(p["spec"]["nodeName"], "smoke-t4-0")
        self.assertEqual(p["status"]["hostIP"], h.node("smoke-t4-0")["internal_ip"])

        def unschedulable():
            for e in h.events_for("Pod", "no-tol", ns):
                if e["reason"] == "FailedScheduling":
                    return e["message"]
        msg = h.wait_for(unschedulable, 60, "FailedScheduling of the pod without toleration")
        self.assertIn("untolerated taint", msg)
        self.assertEqual(h.pod("no-tol", ns)["status"]["phase"], "Pending")

    def test_insufficient_gpu(self):
        ns = self.namespace("smoke-big")
        # 16: more than any smoke node has, and at most DRA's 32 devices per claim. With the DeviceClass
        # gpu.nvidia.com mapping nvidia.com/gpu (DRAExtendedResource), a larger request is refused
        # outright ("number of requested devices 64 exceeds the claim limit of 32"), whatever the nodes.
        h.create(h.gpu_pod("huge", ns, gpus=16, node_selector=only_smoke_nodes()))

        def failed():
            for e in h.events_for("Pod", "huge", ns):
                if e["reason"] == "FailedScheduling":
                    return e["message"]
        msg = h.wait_for(failed, 60, "FailedScheduling for 16 GPUs")
        self.assertIn("Insufficient nvidia.com/gpu", msg)

    def test_job_completes(self):
        ns = self.namespace("smoke-job")
        h.create(h.gpu_job("ok", ns, node="smoke-v100-0", gpus=1))
        job = h.wait_for(lambda: (lambda j: j if j["status"].get("succeeded") == 1 else None)(
            h.kubectl("get", "job", "ok", "-n", ns, "-o", "json")), 90, "Job ok to succeed")
        conds = {c["type"]: c["status"] for c in job["status"]["conditions"]}
        self.assertEqual(conds.get("Complete"), "True")
        pods = h.kubectl("get", "pods", "-n", ns, "-l", "job-name=ok", "-o", "json")["items"]
        term = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
        self.assertEqual(term["exitCode"], 0)

    def test_job_pod_fails_with_exit_code(self):
        ns = self.namespace("smoke-fail")
        policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
        h.create(h.gpu_job("bad", ns, node="smoke-v100-0", gpus=1, backoff_limit=3,
                           outcome_=h.outcome("fail", exit_code=42), pod_failure_policy=policy))

        def failed_pod():
            for p in h.kubectl("get", "pods", "-n", ns, "-l", "job-name=bad", "-o", "json")["items"]:
                if p["status"].get("phase") == "Failed":
                    return p
        p = h.wait_for(failed_pod, 90, "the Job's pod to fail")
        term = p["status"]["containerStatuses"][0]["state"]["terminated"]
        self.assertEqual(term["exitCode"], 42)
        self.assertEqual(term["reason"], "Error")

        def job_failed():
            j = h.kubectl("get", "job", "bad", "-n", ns, "-o", "json")
            for c in j["status"].get("conditions", []):
                if c["type"] == "Failed" and c["status"] == "True":
                    return c
        c = h.wait_for(job_failed, 90, "the Job to fail through its podFailurePolicy")
        self.assertEqual(c["reason"], "PodFailurePolicy")

    def test_bare_pod_outcomes(self):
        ns = self.namespace("smoke-bare")
        h.create([h.gpu_pod("ok", ns, node="smoke-v100-0", gpus=0, outcome_=h.outcome("succeed")),
                  h.gpu_pod("bad", ns, node="smoke-v100-0", gpus=0, outcome_=h.outcome("fail", exit_code=3)),
                  h.gpu_pod("runs", ns, node="smoke-v100-0", gpus=0)])
        ok = h.wait_pod_phase("ok", ns, "Succeeded")
        self.assertEqual(ok["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0)
        bad = h.wait_pod_phase("bad", ns, "Failed")
        self.assertEqual(bad["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3)
        h.wait_pod_phase("runs", ns, "Running")
        time.sleep(3)
        self.assertEqual(h.pod("runs", ns)["status"]["phase"], "Running")

    def test_evicted_job_pod_reaches_failed_with_disruption_target(self):
        """control-plane.md §2.7: with a podFailurePolicy only phase Failed counts, so an evicted Job
        pod must reach Failed (our kwok stage), carrying the DisruptionTarget condition."""
        ns = self.namespace("smoke-evict")
        policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                            {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}]}
        h.create(h.gpu_job("train", ns, node="smoke-v100-0", gpus=0, backoff_limit=0,
                           outcome_=h.outcome("run"), pod_failure_policy=policy))

        def running_pod():
            for p in h.kubectl("get", "pods", "-n", ns, "-l", "job-name=train", "-o", "json")["items"]:
                if p["status"].get("phase") == "Running":
                    return p
        first = h.wait_for(running_pod, 60, "the Job's pod to run")["metadata"]["name"]
        code, body = h.api_curl("/api/v1/namespaces/%s/pods/%s/eviction" % (ns, first), method="POST",
                                data={"apiVersion": "policy/v1", "kind": "Eviction",
                                      "metadata": {"name": first, "namespace": ns}})
        self.assertEqual(code, 201, body)

        def evicted_failed():
            r = h.kubectl("get", "pod", first, "-n", ns, "-o", "json", check=False)
            if r.rc != 0:
                return None
            p = r.json
            conds = {c["type"]: c for c in p["status"].get("conditions", [])}
            if p["status"].get("phase") == "Failed" and "DisruptionTarget" in conds:
                return p
        p = h.wait_for(evicted_failed, 60, "the evicted pod to be Failed with DisruptionTarget")
        self.assertEqual(p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137)

        def replaced():
            for q in h.kubectl("get", "pods", "-n", ns, "-l", "job-name=train", "-o", "json")["items"]:
                if q["metadata"]["name"] != first and q["status"].get("phase") == "Running":
                    return q
        h.wait_for(replaced, 60, "the Job to replace the evicted pod (Ignore rule)")
        job = h.kubectl("get", "job", "train", "-n", ns, "-o", "json")
        self.assertFalse(any(c["type"] == "Failed" for c in job["status"].get("conditions", [])), job["status"])
        h.wait_for(lambda: h.kubectl("get", "pod", first, "-n", ns, check=False).rc != 0, 60,
                   "the evicted pod object to be removed")


class Policy(h.TestCase):
    def test_gpu_quota(self):
        ns = self.namespace("smoke-quota")
        h.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": ns},
                  "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
        h.wait_for(lambda: "requests.nvidia.com/gpu" in (h.kubectl("get", "resourcequota", "gpus", "-n", ns, "-o", "json")
                                                         ["status"].get("used") or {}), 60, "quota status.used")
        nowhere = {"e2e.gpuctl.dev/fleet": "nowhere"}   # admitted and counted, never scheduled
        h.create(h.gpu_pod("a", ns, gpus=4, node_selector=nowhere))
        h.create(h.gpu_pod("b", ns, gpus=4, node_selector=nowhere))
        code, body = h.api_curl("/api/v1/namespaces/%s/pods" % ns, method="POST",
                                data=h.gpu_pod("c", ns, gpus=1, node_selector=nowhere))
        self.assertEqual(code, 403, body)
        self.assertIn("exceeded quota", body)
        self.assertIn("requests.nvidia.com/gpu", body)

        ns2 = self.namespace("smoke-quota-plain")
        # Accepted, but extended resources are only enforced under requests.<name>: no rejection.
        h.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": ns2},
                  "spec": {"hard": {"nvidia.com/gpu": "8"}}})
        h.wait_for(lambda: "status" in h.kubectl("get", "resourcequota", "gpus", "-n", ns2, "-o", "json"), 60,
                   "the plain-key quota's status")
        for name in ("a", "b", "c"):
            h.create(h.gpu_pod(name, ns2, gpus=4, node_selector=nowhere))

    def test_pdb_blocks_eviction_with_429(self):
        ns = self.namespace("smoke-pdb")
        h.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": dict(h.pod_spec(node="smoke-cpu-0", gpus=0), restartPolicy="Always")}}})
        h.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": ns},
                  "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})

        def pdb_ready():
            p = h.kubectl("get", "pdb", "web", "-n", ns, "-o", "json")
            s = p.get("status", {})
            return s.get("observedGeneration") == p["metadata"]["generation"] and s.get("currentHealthy") == 2
        h.wait_for(pdb_ready, 90, "the PDB to observe 2 healthy pods")
        pod = h.kubectl("get", "pods", "-n", ns, "-l", "app=web", "-o", "json")["items"][0]["metadata"]["name"]
        code, body = h.api_curl("/api/v1/namespaces/%s/pods/%s/eviction" % (ns, pod), method="POST",
                                data={"apiVersion": "policy/v1", "kind": "Eviction",
                                      "metadata": {"name": pod, "namespace": ns}})
        self.assertEqual(code, 429, body)
        self.assertIn("disruption budget", body)

    def test_identities(self):
        code, body = h.api_curl("/api/v1/nodes?limit=1", identity="viewer")
        self.assertEqual(code, 200, body)
        code, body = h.api_curl("/api/v1/nodes/smoke-cpu-0", method="PATCH", identity="viewer",
                                data={"metadata": {"labels": {"x": "y"}}}, content_type="application/merge-patch+json")
        self.assertEqual(code, 403, body)
        r = h.kubectl("label", "node", "smoke-cpu-0", "x=y", context="viewer", check=False)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("Forbidden", r.stderr)
        code, body = h.api_curl("/api/v1/nodes", identity="nobody")
        self.assertEqual(code, 403, body)
        r = h.kubectl("get", "nodes", context="nobody", check=False)
        self.assertIn("Forbidden", r.stderr)
        code, body = h.api_curl("/api/v1/nodes", identity="badtoken")
        self.assertEqual(code, 401, body)
        r = h.kubectl("get", "nodes", context="badtoken", check=False)
        self.assertIn("Unauthorized", r.stderr)
        code, body = h.api_curl("/api/v1/nodes?limit=1", identity="token")
        self.assertEqual(code, 200, body)
        self.assertIn("default", h.kubectl("get", "namespaces", context="token"))


class Ssh(h.TestCase):
    def fixture(self, name):
        return (h.fixtures_dir() / "nvidia-smi-xml" / name).read_text()

    def test_ok_node_returns_fixture_xml(self):
        r = h.ssh("smoke-t4-0", "nvidia-smi -q -x")
        self.assertEqual(r.rc, 0, r.stderr)
        doc = xml.dom.minidom.parseString(r.stdout)
        gpus = doc.getElementsByTagName("gpu")
        self.assertEqual(len(gpus), 4)                     # the node's 4 GPUs, cloned from the capture
        self.assertEqual(len({g.getAttribute("id") for g in gpus}), 4)
        self.assertEqual(doc.getElementsByTagName("attached_gpus")[0].firstChild.data, "4")
        r0 = h.ssh("smoke-t4-0", "nvidia-smi -q -x -i 0")
        self.assertEqual(r0.rc, 0)
        self.assertEqual(r0.stdout, self.fixture("telegraf__tesla-t4__515.105.01__v11.xml"))
        r = h.ssh("smoke-t4-0", "nvidia-smi -L")
        self.assertEqual(r.rc, 0)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertRegex(lines[0], r"^GPU 0: Tesla T4 \(UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a\)$")
        r = h.ssh("smoke-t4-0", "nvidia-smi -q -x -i 7")
        self.assertEqual((r.rc, r.stdout), (6, "No devices were found\n"))
        r = h.ssh("smoke-t4-0", "nvidia-smi --format=csv")      # --format without a --query-*
        self.assertEqual(r.rc, 2)
        self.assertIn("Invalid combination of input arguments", r.stdout)

    def test_shell_features_and_identity(self):
        r = h.ssh("smoke-t4-0", "command -v nvidia-smi && echo $SSH_CONNECTION && id -un")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn(h.node("smoke-t4-0")["internal_ip"], r.stdout)
        r = h.ssh("smoke-cpu-0", "nvidia-smi -L")
        self.assertEqual(r.rc, 127)
        self.assertRegex(r.stderr, r"nvidia-smi: (command )?not found")   # dash or bash as /bin/sh

    def test_gpu_lost(self):
        r = h.ssh("smoke-a100-0", "nvidia-smi -q -x")
        self.assertEqual(r.rc, 15)
        self.assertRegex(r.stdout, r"^Unable to determine the device handle for GPU 0000:[0-9A-F]{2}:04\.0: "
                                   r"GPU is lost\. Reboot the system to recover this GPU\n$")
        for i in (0, 2, 3):
            r = h.ssh("smoke-a100-0", "nvidia-smi -q -x -i %d" % i)
            self.assertEqual(r.rc, 0, (i, r.stdout[:200]))
            self.assertEqual(xml.dom.minidom.parseString(r.stdout).getElementsByTagName("gpu").length, 1)
        r = h.ssh("smoke-a100-0", "nvidia-smi -q -x --id=1")
        self.assertEqual(r.rc, 15)
        r = h.ssh("smoke-a100-0", "nvidia-smi -L")
        self.assertEqual(r.rc, 15)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-"), lines)
        self.assertTrue(any(l.startswith("Unable to determine the device handle for GPU") for l in lines), lines)

    def test_hang_is_cut_by_timeout_and_cleaned_up(self):
        cmd = h.ssh_command("smoke-hang-0", "nvidia-smi -q -x")
        t = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with self.assertRaises(subprocess.TimeoutExpired):
            p.communicate(timeout=4)
        p.kill()
        p.communicate()
        self.assertGreaterEqual(time.time() - t, 4)

        def sleepers():
            return [pid for pid in h.cluster().marked_pids() if "fake_nvidia_smi" in self._cmdline(pid)]
        h.wait_for(lambda: not sleepers(), 20, "the hung fake nvidia-smi to end after the client left")

    @staticmethod
    def _cmdline(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def test_cut_node_times_out_on_connect(self):
        info = h.info()
        if not info["netns"]["ok"]:
            self.fail(info["netns"]["error"])
        ip = h.cut("smoke-cut-0")["internal_ip"]
        self.assertTrue(ip.startswith("198.18."), ip)
        self.assertEqual([a["address"] for a in h.kubectl("get", "node", "smoke-cut-0", "-o", "json")["status"]["addresses"]
                          if a["type"] == "InternalIP"], [ip])
        info = h.info()
        s = socket.socket()
        s.settimeout(2)
        t = time.time()
        with self.assertRaises(socket.timeout):
            s.connect((ip, info["ssh"]["port"]))
        s.close()
        self.assertGreaterEqual(time.time() - t, 1.9)
        r = h.ssh("smoke-cut-0", "nvidia-smi -L", connect_timeout=2, timeout=30)
        self.assertEqual(r.rc, 255)
        self.assertIn("Connection timed out", r.stderr)
        self.assertNotIn("refused", r.stderr)

    def test_cut_and_uncut_at_run_time(self):
        info = h.info()
        if not info["netns"]["ok"]:
            self.fail(info["netns"]["error"])
        try:
            n = h.cut("smoke-hostkey-0")
            node = h.kubectl("get", "node", "smoke-hostkey-0", "-o", "json")
            ips = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
            self.assertEqual(ips, [n["internal_ip"]])
            r = h.ssh("smoke-hostkey-0", "true", connect_timeout=2, timeout=30)
            self.assertIn("Connection timed out", r.stderr)
        finally:
            n = h.uncut("smoke-hostkey-0")
        self.assertEqual(n["internal_ip"], n["ssh_address"])
        r = h.ssh("smoke-hostkey-0", "true")
        self.assertIn("REMOTE HOST IDENTIFICATION HAS CHANGED", r.stderr)

    def test_hostkey_mismatch_is_refused(self):
        r = h.ssh("smoke-hostkey-0", "nvidia-smi -L")
        self.assertEqual(r.rc, 255)
        self.assertIn("REMOTE HOST IDENTIFICATION HAS CHANGED", r.stderr)
        self.assertIn("Host key verification failed", r.stderr)

    def test_ssh_mode_switches_immediately(self):
        try:
            h.ssh_mode("smoke-v100-0", "driver-not-loaded")
            r = h.ssh("smoke-v100-0", "nvidia-smi -q -x")
            self.assertEqual(r.rc, 9)
            self.assertEqual(r.stdout, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                       "Make sure that the latest NVIDIA driver is installed and running.\n")
            h.ssh_mode("smoke-v100-0", "driver-mismatch")
            r = h.ssh("smoke-v100-0", "nvidia-smi -L")
            self.assertEqual((r.rc, r.stdout), (18, "Failed to initialize NVML: Driver/library version mismatch\n"))
            h.ssh_mode("smoke-v100-0", "permissions")
            r = h.ssh("smoke-v100-0", "nvidia-smi -q -x")
            self.assertEqual((r.rc, r.stdout), (4, "Failed to initialize NVML: Insufficient Permissions\n"))
            h.ssh_mode("smoke-v100-0", "no-devices")
            r = h.ssh("smoke-v100-0", "nvidia-smi -L")
            self.assertEqual((r.rc, r.stdout), (6, "No devices were found\n"))
            h.ssh_mode("smoke-v100-0", "gpu-unknown-error", gpu_index=1)
            r = h.ssh("smoke-v100-0", "nvidia-smi -q -x")
            self.assertEqual(r.rc, 255)
            self.assertRegex(r.stdout, r"^Unable to determine the device handle for GPU 0000:[0-9A-F:.]+: Unknown Error\n$")
            h.ssh_mode("smoke-v100-0", "inforom", gpu_index=0)
            r = h.ssh("smoke-v100-0", "nvidia-smi -q -x")
            self.assertEqual(r.rc, 14)
            self.assertTrue(r.stdout.endswith("</nvidia_smi_log>\nWARNING: infoROM is corrupted at gpu 0000:21:01.0\n"),
                            r.stdout[-200:])
            h.ssh_mode("smoke-v100-0", "garbage")
            r = h.ssh("smoke-v100-0", "nvidia-smi -q -x")
            self.assertEqual(r.rc, 0)
            with self.assertRaises(Exception):
                xml.dom.minidom.parseString(r.stdout)
            h.ssh_mode("smoke-v100-0", "no-nvidia-smi")
            r = h.ssh("smoke-v100-0", "nvidia-smi -q -x")
            self.assertEqual(r.rc, 127)
        finally:
            h.ssh_mode("smoke-v100-0", "ok")
        self.assertEqual(h.ssh("smoke-v100-0", "nvidia-smi -q -x").rc, 0)

    def test_many_concurrent_sessions(self):
        n = int(os.environ.get("GPUCTL_E2E_SSH_CONCURRENCY", "24"))
        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            results = list(ex.map(lambda _: h.ssh("smoke-t4-0", "nvidia-smi -L", timeout=120, connect_timeout=30), range(n)))
        bad = [r for r in results if r.rc != 0]
        self.assertEqual(bad, [], [(r.rc, r.stderr) for r in bad][:3])


if __name__ == "__main__":
    h.main()
