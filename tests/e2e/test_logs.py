#!/usr/bin/python3
"""`gpuctl logs JOB` against the real control plane (issue 20): the logs kwok serves for a Job's
pods through the API server's pods/log, each line prefixed with its pod as `kubectl logs --prefix`
does; --pod by completion index, --tail, --no-prefix; -f following a pod, then the pod of the
retry the Job controller makes after it failed, until the job succeeds; the status line last.
Fleet logs-cmd (node lgc-cpu-0): CPU pods, logs need no GPU."""
import harness as h

NODE = "lgc-cpu-0"
FLEET_YAML = """
name: logs-cmd
nodes:
  - name: %s
    cpu: "16"
""" % NODE


def job_pods(ns, job):
    pods = h.kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=" + job, "-o", "json")["items"]
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])


class LogsTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET_YAML, source="test_logs fleet")

    def test_every_pod_prefixed_then_the_status_line(self):
        ns = self.namespace("logs-indexed")
        h.set_namespace_logs(ns, {None: "rank up\nstep 1 loss=0.9\n"})
        job = h.gpu_job("two", ns, node=NODE, gpus=0, completions=2, parallelism=2, outcome_=h.outcome("run"))
        job["spec"]["completionMode"] = "Indexed"
        h.create(job)
        h.wait_for(lambda: len([p for p in job_pods(ns, "two") if p["status"].get("phase") == "Running"]) == 2, 90,
                   "both pods running")
        names = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p["metadata"]["name"]
                 for p in job_pods(ns, "two")}
        order = [p["metadata"]["name"] for p in job_pods(ns, "two")]

        r = h.gpuctl("logs", "two", "-n", ns)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(),
                         ["[pod/%s/main] %s" % (p, line) for p in order for line in ("rank up", "step 1 loss=0.9")])
        self.assertEqual(r.stderr.splitlines()[-1], "job %s/two: Running on %s" % (ns, NODE))

        one = h.gpuctl("logs", "two", "-n", ns, "--pod", "1", "--tail", "1", "--no-prefix")
        self.assertEqual(one.rc, 0, one.stderr)
        self.assertEqual(one.stdout, "step 1 loss=0.9\n")
        self.assertIn("[pod/%s/main] rank up" % names["0"], h.gpuctl("logs", "two", "-n", ns, "--pod", "0").stdout)

        missing = h.gpuctl("logs", "two", "-n", ns, "--pod", "7")
        self.assertEqual(missing.rc, 2, missing.stderr)
        self.assertEqual(missing.stderr.strip(), "error: job %s/two has no started pod with completion index \"7\"" % ns)
        absent = h.gpuctl("logs", "nope", "-n", ns)
        self.assertEqual(absent.rc, 1, absent.stderr)
        self.assertIn('job "nope" not found in namespace "%s"' % ns, absent.stderr)

    def test_follow_goes_on_with_the_retry_until_the_job_ends(self):
        ns = self.namespace("logs-follow")
        h.set_namespace_logs(ns, {None: "attempt started\n"})
        h.create(h.gpu_job("retry", ns, node=NODE, gpus=0, backoff_limit=1, outcome_=h.outcome("run")))
        first = h.wait_for(lambda: [p for p in job_pods(ns, "retry") if p["status"].get("phase") == "Running"], 90,
                           "the first pod running")[0]["metadata"]["name"]
        s = h.gpuctl_stream("logs", "retry", "-n", ns, "-f")
        s.wait_for("[pod/%s/main] attempt started" % first)
        # The first attempt fails; its kubelet ends the stream, the Job controller makes a retry.
        h.set_pod_outcome(ns, first, "fail", exit_code=1)
        h.end_log_streams(NODE)
        second = h.wait_for(lambda: [p["metadata"]["name"] for p in job_pods(ns, "retry")
                                     if p["metadata"]["name"] != first and p["status"].get("phase") == "Running"], 90,
                            "the retry running")[0]
        s.wait_for("[pod/%s/main] attempt started" % second)
        h.set_pod_outcome(ns, second, "succeed")
        h.wait_for(lambda: any(c["type"] == "Complete" and c["status"] == "True" for c in
                               h.kubectl("get", "job", "retry", "-n", ns, "-o", "json")["status"].get("conditions", [])),
                   90, "the job complete")
        h.end_log_streams(NODE)
        r = s.finish(60)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["[pod/%s/main] attempt started" % first,
                                                 "[pod/%s/main] attempt started" % second])
        self.assertTrue(r.stderr.splitlines()[-1].startswith("job %s/retry succeeded" % ns), r.stderr)


if __name__ == "__main__":
    h.main()
