"""gpuctl jobs and gpuctl jobs clean against the real API server: succeeded, failed (with the
container's exit code), running and unschedulable jobs as `gpuctl jobs -o json` reports them,
and `jobs clean` removing finished jobs together with their pods, leaving the others."""
import tempfile
import harness as h

FLEET = {"e2e.gpuctl.dev/fleet": "jobs"}
NODES = {"jobs-0", "jobs-1"}


def job(name, ns, gpus=1, outcome_=None):
    return h.gpu_job(name, ns, gpus=gpus, outcome_=outcome_, node_selector=FLEET)


def items_by_name(ns):
    r = h.gpuctl("jobs", "-n", ns, "-o", "json")
    if r.rc != 0:
        raise h.HarnessError("gpuctl jobs failed: %s" % r.stderr)
    doc = r.json
    assert doc["apiVersion"] == "gpuctl.io/v1alpha1" and doc["kind"] == "GPUJobList", doc
    return {i["name"]: i for i in doc["items"]}


def job_names(ns):
    return {j["metadata"]["name"] for j in h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"]}


def pod_job_names(ns):
    pods = h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"]
    return {p["metadata"]["labels"].get("batch.kubernetes.io/job-name") for p in pods}


class JobsTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("jobs")

    def start_jobs(self, ns):
        h.create([
            job("ok", ns, gpus=2, outcome_=h.outcome("succeed")),
            job("bad", ns, gpus=1, outcome_=h.outcome("fail", exit_code=3)),
            job("runner", ns, gpus=1, outcome_=h.outcome("run")),
            job("huge", ns, gpus=16, outcome_=h.outcome("run")),  # no node has 16 GPUs
        ])

        def settled():
            items = items_by_name(ns)
            states = {n: (i["status"], i["finished"]) for n, i in items.items()}
            want = {"ok": ("Succeeded", True), "bad": ("Failed", True), "runner": ("Running", False),
                    "huge": ("Pending", False)}
            return items if states == want and items["huge"]["reason"] else None

        return h.wait_for(settled, 90, "the four jobs to settle")

    def test_jobs_lists_status_gpus_nodes_and_reasons(self):
        ns = self.namespace("jobs-list")
        items = self.start_jobs(ns)

        ok = items["ok"]
        self.assertEqual((ok["gpusPerPod"], ok["gpus"]), (2, 2))
        self.assertEqual(len(ok["nodes"]), 1)
        self.assertIn(ok["nodes"][0], NODES)
        self.assertIsNone(ok["reason"])
        self.assertIsNotNone(ok["finishedAt"])
        self.assertIsNotNone(ok["durationSeconds"])

        bad = items["bad"]
        self.assertEqual(bad["failure"]["exitCode"], 3)
        self.assertEqual(bad["failure"]["reason"], "BackoffLimitExceeded")
        self.assertEqual(bad["failure"]["container"], "main")
        self.assertIn("exited with code 3", bad["reason"])
        # kwok serves no log for it: the cause stays unknown and nothing fails.
        self.assertIsNone(bad["failure"]["gpuCause"])
        self.assertIsNone(bad["failedAttempts"][0]["gpuCause"])
        self.assertIn(bad["nodes"][0], NODES)

        huge = items["huge"]
        self.assertEqual(huge["gpus"], 16)
        self.assertEqual(huge["nodes"], [])
        self.assertIn("too few free nvidia.com/gpu", huge["reason"])
        self.assertTrue(huge["reason"].startswith("not scheduled: no node can take it now"), huge["reason"])

        runner = items["runner"]
        self.assertIn(runner["nodes"][0], NODES)
        self.assertIsNone(runner["failure"])

        # The table says the same, with the reasons.
        rc, out, err = h.gpuctl("jobs", "-n", ns)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("NAME "), out)
        self.assertEqual([l.split()[0] for l in lines[1:]], ["bad", "huge", "ok", "runner"])
        self.assertIn("too few free nvidia.com/gpu", out)
        # -A adds the namespace column and finds them too.
        rc, out, err = h.gpuctl("jobs", "-A")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("NAMESPACE "), out)
        self.assertEqual(sum(1 for l in out.splitlines() if l.startswith(ns + " ")), 4)

        # By name, as kubectl get NAME...: only those; one missing is an error after the others.
        rc, out, err = h.gpuctl("jobs", "-n", ns, "ok", "bad", "-o", "name")
        self.assertEqual((rc, out), (0, "job/bad\njob/ok\n"), err)
        rc, out, err = h.gpuctl("jobs", "-n", ns, "ok", "nope")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual([l.split()[0] for l in out.splitlines()[1:]], ["ok"])
        self.assertEqual(err, "error: job nope not found in namespace %s\n" % ns)
        # Job names complete from the namespace typed on the line (cobra's protocol, as the
        # shells' scripts read it); HOME is private so no completion cache is shared.
        with tempfile.TemporaryDirectory() as home:
            rc, out, err = h.gpuctl("__complete", "jobs", "-n", ns, "r", env={"HOME": home})
        self.assertEqual((rc, out, err), (0, "runner\n:4\n", ""))

    def test_a_gpu_cause_in_the_termination_message_is_named_with_the_node(self):
        # Two attempts (backoffLimit 1), each ending with NVML's own words (issue 20).
        ns = self.namespace("jobs-gpu-cause")
        nvml = "Failed to initialize NVML: Unknown Error"
        j = h.gpu_job("nvml", ns, gpus=1, backoff_limit=1, node_selector=FLEET,
                      outcome_=h.outcome("fail", exit_code=1, message="loading model\n" + nvml))
        h.create(j)
        item = h.wait_for(lambda: (lambda i: i if i and i["finished"] else None)(items_by_name(ns).get("nvml")), 90,
                          "the job to fail")
        pods = sorted(h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"],
                      key=lambda p: p["metadata"]["creationTimestamp"])
        self.assertEqual(len(pods), 2)
        self.assertEqual(item["failedNodes"], [p["spec"]["nodeName"] for p in pods])
        latest = [p for p in pods if p["metadata"]["name"] == item["failure"]["pod"]][0]
        self.assertEqual(item["failure"]["node"], latest["spec"]["nodeName"])
        self.assertEqual(item["failure"]["gpuCause"]["id"], "nvml-error")
        self.assertTrue(item["reason"].endswith(
            "exited with code 1 (Error): %s; GPU cause: NVML answered Unknown Error: the GPU or its driver is in a "
            "bad state on node %s (drain the node and check its GPUs (gpuctl gpus NODE))"
            % (nvml, latest["spec"]["nodeName"])), item["reason"])
        rc, out, err = h.gpuctl("jobs", "-n", ns, "-o", "wide")
        self.assertEqual(rc, 0, err)
        head, row = out.splitlines()[0].split(), out.splitlines()[1].split()
        # Each attempt's node with the cause its own termination message names.
        self.assertEqual(row[head.index("FAILED-ON")], ",".join(p["spec"]["nodeName"] + "(nvml-error)" for p in pods))
        # submit --wait ends with the same cause, and the container's exit code.
        r = h.gpuctl("submit", "nvml-wait", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", "RTX-3090",
                     "--wait", "--timeout", "2m",
                     "--label", "%s=fail" % h.OUTCOME_LABEL, "--annotation", "%s=1" % h.EXIT_CODE_ANNOTATION,
                     "--annotation", "%s=%s" % (h.MESSAGE_ANNOTATION, nvml), timeout=180)
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"job %s/nvml-wait failed .*exited with code 1 \(Error\); GPU cause: NVML answered "
                                   r"Unknown Error: the GPU or its driver is in a bad state on node \S+ \(" % ns)

    def test_a_gpu_cause_only_in_the_log_is_named_with_the_node(self):
        # PyTorch's way (issue 20): exit 1, no termination message, the error on stderr followed
        # by lines that name nothing (CUDA's advice; torchrun's elastic ERROR line).
        ns = self.namespace("jobs-log-cause")
        h.set_namespace_logs(ns, {None: h.fixture("k8s-errors/joblog__pytorch-cuda-error-out-of-memory.log")},
                             stream="stderr")
        h.create(h.gpu_job("oom", ns, gpus=1, backoff_limit=1, node_selector=FLEET,
                           outcome_=h.outcome("fail", exit_code=1)))
        item = h.wait_for(lambda: (lambda i: i if i and i["finished"] and i["failure"]["gpuCause"] else None)(
            items_by_name(ns).get("oom")), 90, "the job to fail with its cause")
        pods = sorted(h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"],
                      key=lambda p: p["metadata"]["creationTimestamp"])
        self.assertEqual(len(pods), 2)
        latest = pods[-1]
        node = latest["spec"]["nodeName"]
        failure = item["failure"]
        self.assertEqual((failure["pod"], failure["node"], failure["exitCode"], failure["terminationMessage"]),
                         (latest["metadata"]["name"], node, 1, None))
        self.assertEqual(failure["gpuCause"]["id"], "cuda-oom")
        self.assertEqual(failure["gpuCause"]["source"], "log")
        self.assertEqual(failure["gpuCause"]["evidence"], "RuntimeError: CUDA error: out of memory")
        self.assertTrue(item["reason"].endswith(
            "exited with code 1 (Error); GPU cause: the job ran out of GPU memory on node %s (lower the batch size or "
            "use a GPU with more memory); its log says: RuntimeError: CUDA error: out of memory" % node),
            item["reason"])
        # Each attempt with its node; a listing reads only the latest failed pod's log.
        self.assertEqual(item["failedNodes"], [p["spec"]["nodeName"] for p in pods])
        self.assertEqual([a["pod"] for a in item["failedAttempts"]], [p["metadata"]["name"] for p in pods])
        self.assertIsNone(item["failedAttempts"][0]["gpuCause"])
        self.assertEqual(item["failedAttempts"][1]["gpuCause"]["source"], "log")
        # gpuctl jobs NAME (jobs asked for by name: their newest attempts' logs too), table and -o wide.
        r = h.gpuctl("jobs", "oom", "-n", ns, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual([a["gpuCause"]["id"] for a in r.json["items"][0]["failedAttempts"]], ["cuda-oom", "cuda-oom"])
        rc, out, err = h.gpuctl("jobs", "oom", "-n", ns)
        self.assertEqual(rc, 0, err)
        self.assertIn("GPU cause: the job ran out of GPU memory on node %s" % node, out)
        rc, out, err = h.gpuctl("jobs", "oom", "-n", ns, "-o", "wide")
        self.assertEqual(rc, 0, err)
        head, row = out.splitlines()[0].split(), out.splitlines()[1].split()
        self.assertEqual(row[head.index("FAILED-ON")],
                         ",".join("%s(cuda-oom)" % p["spec"]["nodeName"] for p in pods))

    def test_submit_wait_names_the_nccl_cause_its_log_ends_with(self):
        ns = self.namespace("jobs-log-nccl")
        h.set_namespace_logs(ns, {None: h.fixture("k8s-errors/joblog__torchrun-nccl-unhandled-system-error-no-route.log")},
                             stream="stderr")
        # One attempt, so the one pod is the one the result line names.
        r = h.gpuctl("submit", "ddp", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", "RTX-3090",
                     "--backoff-limit", "0", "--wait", "--timeout", "2m",
                     "--label", "%s=fail" % h.OUTCOME_LABEL, "--annotation", "%s=1" % h.EXIT_CODE_ANNOTATION,
                     timeout=180)
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        pod = h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"][0]
        self.assertIn("job %s/ddp failed" % ns, r.stdout)
        self.assertIn("container main of pod %s exited with code 1 (Error); GPU cause: NCCL hit a system error "
                      "(network or InfiniBand, shared memory, GPU peer access) on node %s (check the GPUs' "
                      "NVLink/network and peers); its log says: torch.distributed.DistBackendError: NCCL error in: "
                      "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled system error"
                      % (pod["metadata"]["name"], pod["spec"]["nodeName"]), r.stdout)

    def test_clean_removes_finished_jobs_and_their_pods(self):
        ns = self.namespace("jobs-clean")
        self.start_jobs(ns)
        self.assertIn("ok", pod_job_names(ns))
        self.assertIn("bad", pod_job_names(ns))

        rc, out, err = h.gpuctl("jobs", "clean", "-n", ns, "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertIn("job %s/ok would be deleted" % ns, out)
        self.assertIn("job %s/bad would be deleted" % ns, out)
        self.assertIn("2 finished jobs would be deleted (dry run), 2 kept", out)
        self.assertEqual(job_names(ns), {"ok", "bad", "runner", "huge"})

        rc, out, err = h.gpuctl("jobs", "clean", "-n", ns, "--dry-run=server")
        self.assertEqual(rc, 0, err)
        self.assertIn("2 finished jobs deleted (server dry run)", out)
        self.assertEqual(job_names(ns), {"ok", "bad", "runner", "huge"})

        rc, out, err = h.gpuctl("jobs", "clean", "-n", ns, "--older-than", "1h")
        self.assertEqual(rc, 0, err)
        self.assertEqual(job_names(ns), {"ok", "bad", "runner", "huge"})  # they finished just now

        rc, out, err = h.gpuctl("jobs", "clean", "-n", ns)
        self.assertEqual(rc, 0, err)
        self.assertIn("job %s/ok deleted with its pods: Succeeded" % ns, out)
        self.assertIn("job %s/bad deleted with its pods: Failed" % ns, out)
        self.assertIn("2 finished jobs deleted, 2 kept", out)
        self.assertNotIn("Warning", err)  # no "child pods are preserved" warning: Background propagation
        self.assertEqual(job_names(ns), {"runner", "huge"})
        # The garbage collector removes their pods; the running and pending jobs keep theirs.
        h.wait_for(lambda: pod_job_names(ns) == {"runner", "huge"}, 60, "the finished jobs' pods to be collected")

        rc, out, err = h.gpuctl("jobs", "clean", "-n", ns)
        self.assertEqual(rc, 0, err)
        self.assertIn("No finished GPU jobs to delete in namespace %s, 2 kept" % ns, err)


if __name__ == "__main__":
    h.main()
