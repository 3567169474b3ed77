"""gpuctl submit against the real API server, scheduler and Job controller: the derived
tolerations take a job to a tainted GPU pool, --wait returns the job's result as the exit code,
every pre-flight refusal stops the job before it exists, and --dry-run=server catches a quota
breach through a dry-run pod (a dry-run Job alone never reaches quota admission)."""
import json
import os
import tempfile

import harness as h

GPU_TYPE = "RTX-4090"   # matches NVIDIA-GeForce-RTX-4090, carried only by this suite's nodes
POOL_TAINT_KEY = "example.com/gpu-pool"


def submit(*args, timeout=180):
    return h.gpuctl("submit", *args, timeout=timeout)


def job_exists(ns, name):
    out = h.kubectl("get", "jobs", "-n", ns, "-o", "json")
    return name in {j["metadata"]["name"] for j in out["items"]}


def gpu_quota(ns, gpus):
    h.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": ns},
              "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}})
    # Until the quota controller has counted, pod admission says "status unknown for quota".
    h.wait_for(lambda: "requests.nvidia.com/gpu" in h.kubectl("get", "resourcequota", "gpus", "-n", ns, "-o", "json")
               .get("status", {}).get("used", {}), 60, "quota usage to be counted")


class SubmitTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("submit")

    def test_job_lands_on_the_tainted_pool_and_succeeds(self):
        ns = self.namespace("submit-ok")
        r = submit("train", "-n", ns, "--image", "busybox", "--gpus", "2", "--gpu-type", GPU_TYPE, "--wait",
                   "--timeout", "2m", "--", "sh", "-c", "true")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("job %s/train succeeded" % ns, r.stdout)
        self.assertIn("tolerates example.com/gpu-pool=rtx4090:NoSchedule", r.stdout)
        job = h.kubectl("get", "job", "train", "-n", ns, "-o", "json")
        spec = job["spec"]["template"]["spec"]
        self.assertIn({"key": POOL_TAINT_KEY, "operator": "Equal", "value": "rtx4090", "effect": "NoSchedule"},
                      spec["tolerations"])
        self.assertEqual(spec["nodeSelector"], {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090"})
        limits = spec["containers"][0]["resources"]["limits"]
        self.assertEqual(limits["nvidia.com/gpu"], spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
        self.assertEqual(job["spec"]["backoffLimit"], 2)
        self.assertEqual(job["spec"]["ttlSecondsAfterFinished"], 7 * 24 * 3600)
        self.assertEqual(job["spec"]["podFailurePolicy"]["rules"][0]["action"], "Ignore")
        pods = h.kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=train", "-o", "json")["items"]
        self.assertTrue(pods and all(p["spec"]["nodeName"].startswith("submit-") for p in pods), pods)

    def test_wait_returns_the_failed_containers_exit_code(self):
        ns = self.namespace("submit-fail")
        r = submit("crash", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE,
                   "--backoff-limit", "0", "--label", "%s=fail" % h.OUTCOME_LABEL,
                   "--annotation", "%s=7" % h.EXIT_CODE_ANNOTATION, "--wait", "--parsable", "--timeout", "2m")
        self.assertEqual(r.rc, 7, r)
        self.assertEqual(r.stdout, "%s/crash\n" % ns)  # --parsable: only the name on stdout
        self.assertIn("exited with code 7", r.stderr)

    def test_deadline_exceeded_exits_124(self):
        ns = self.namespace("submit-deadline")
        r = submit("slow", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE,
                   "--label", "%s=run" % h.OUTCOME_LABEL, "--active-deadline", "3s", "--wait", "--timeout", "2m")
        self.assertEqual(r.rc, 124, r)
        self.assertIn("DeadlineExceeded", r.stdout + r.stderr)

    def test_follow_without_node_logs_still_returns_the_result(self):
        # The node's kubelet has no log for the container (the API server relays its 400): --follow
        # says so and goes on.
        ns = self.namespace("submit-follow")
        r = submit("logs", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE, "--follow",
                   "--timeout", "2m")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("==> pod logs-", r.stderr)
        self.assertIn("are not available", r.stderr)
        self.assertIn("succeeded", r.stderr)

    def test_follow_streams_the_pods_log_to_stdout(self):
        ns = self.namespace("submit-follow-logs")
        log = "step 1/2 loss=0.91\nstep 2/2 loss=0.47\ncheckpoint saved to /ckpt/step-2\n"
        h.set_namespace_logs(ns, {None: log})   # the job's pod, whatever its name
        s = h.gpuctl_stream("submit", "train", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE,
                            "--follow", "--timeout", "2m", "--", "python", "train.py")
        s.wait_for("checkpoint saved")
        # kwok's kubelet never ends a follow; a real one does when the container exits.
        pod = h.kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=train", "-o", "json")["items"][0]
        h.end_log_streams(pod["spec"]["nodeName"])
        r = s.finish(120)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout, log)   # stdout is the log, verbatim; the rest goes to stderr
        self.assertIn("==> pod %s on node %s <==" % (pod["metadata"]["name"], pod["spec"]["nodeName"]), r.stderr)
        self.assertIn("job %s/train succeeded" % ns, r.stderr)

    def test_refused_when_no_node_could_ever_hold_the_gpus(self):
        ns = self.namespace("submit-capacity")
        r = submit("big", "-n", ns, "--image", "busybox", "--gpus", "8", "--gpu-type", GPU_TYPE)
        self.assertEqual(r.rc, 3, r)
        self.assertIn("refused (gpu-capacity)", r.stderr)
        self.assertIn("4", r.stderr)  # the largest node's allocatable
        self.assertEqual(r.stdout, "")
        self.assertFalse(job_exists(ns, "big"))
        # With --wait (or --follow) a refusal exits 126, never 3: 3 would read as the container's
        # own exit code.
        for wait in ("--wait", "--follow"):
            r = submit("big", "-n", ns, "--image", "busybox", "--gpus", "8", "--gpu-type", GPU_TYPE, wait)
            self.assertEqual(r.rc, 126, r)
            self.assertIn("error: job %s/big was not submitted" % ns, r.stderr)
            self.assertFalse(job_exists(ns, "big"))
        # An unknown type is refused with the types the cluster has.
        r = submit("odd", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", "B200")
        self.assertEqual(r.rc, 3, r)
        self.assertIn("NVIDIA-GeForce-RTX-4090", r.stderr)
        # --force submits anyway: the job exists and pends.
        r = submit("big", "-n", ns, "--image", "busybox", "--gpus", "8", "--gpu-type", GPU_TYPE, "--force")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("--force", r.stderr)
        self.assertTrue(job_exists(ns, "big"))

    def test_refused_by_quota_and_server_dry_run_catches_the_breach(self):
        ns = self.namespace("submit-quota")
        gpu_quota(ns, 1)
        r = submit("q", "-n", ns, "--image", "busybox", "--gpus", "2", "--gpu-type", GPU_TYPE)
        self.assertEqual(r.rc, 3, r)
        self.assertIn("refused (quota)", r.stderr)
        self.assertFalse(job_exists(ns, "q"))
        # The server's own verdict, past gpuctl's check: a dry-run Job is admitted (no pods), the
        # dry-run pod from its template is refused by the quota plugin.
        r = submit("q", "-n", ns, "--image", "busybox", "--gpus", "2", "--gpu-type", GPU_TYPE, "--dry-run=server",
                   "--force")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("would refuse the pods", r.stderr)
        self.assertIn("requests.nvidia.com/gpu", r.stderr)
        self.assertFalse(job_exists(ns, "q"))
        # Within the quota, the server dry run passes and still creates nothing.
        r = submit("q", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE, "--dry-run=server",
                   "-o", "json")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.json["kind"], "Job")
        self.assertFalse(job_exists(ns, "q"))

    def test_refused_when_a_claim_is_missing_or_not_bound(self):
        ns = self.namespace("submit-claim")
        r = submit("c", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE,
                   "--volume", "datasets:/data:ro")
        self.assertEqual(r.rc, 3, r)
        self.assertIn("refused (volume-claim)", r.stderr)
        self.assertIn("datasets", r.stderr)
        # A claim that exists but is not Bound (no storage class can bind it here).
        h.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "ckpt", "namespace": ns},
                  "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none-such",
                           "resources": {"requests": {"storage": "1Gi"}}}})
        r = submit("c", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", GPU_TYPE, "--volume", "ckpt:/ckpt")
        self.assertEqual(r.rc, 3, r)
        self.assertIn("Pending", r.stderr)
        self.assertFalse(job_exists(ns, "c"))

    def test_manifest_is_completed_with_the_defaults(self):
        ns = self.namespace("submit-manifest")
        manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "from-file"},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            json.dump(manifest, f)
        self.addCleanup(os.unlink, f.name)
        r = submit("-f", f.name, "-n", ns, "--gpu-type", GPU_TYPE, "--dry-run=client", "-o", "json")
        self.assertEqual(r.rc, 0, r)
        spec = r.json["spec"]["template"]["spec"]
        self.assertEqual(spec["restartPolicy"], "Never")
        self.assertEqual(spec["containers"][0]["resources"]["requests"], {"nvidia.com/gpu": 1})
        self.assertIn(POOL_TAINT_KEY, [t["key"] for t in spec["tolerations"]])
        self.assertFalse(job_exists(ns, "from-file"))  # client dry run sends nothing
        r = submit("-f", f.name, "-n", ns, "--wait", "--timeout", "2m")
        self.assertEqual(r.rc, 0, r)

    def test_bad_input_is_a_usage_error(self):
        for args, needle in [
            (["x", "--image", "busybox"], "--gpus is required"),
            (["Bad_Name", "--image", "busybox", "--gpus", "1"], "not valid"),
            (["x", "--image", "busybox", "--gpus", "1", "--volume", "data"], "--volume"),
            (["x", "--image", "busybox", "--gpus", "1", "--ttl-after-finished", "soon"], "--ttl-after-finished"),
            (["x", "--image", "busybox", "--gpus", "1", "--wait", "--dry-run"], "--dry-run"),
        ]:
            r = submit(*args)
            self.assertEqual(r.rc, 2, (args, r))
            self.assertIn(needle, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)  # one line


if __name__ == "__main__":
    h.main()
