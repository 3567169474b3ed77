#!/usr/bin/python3
"""`gpuctl submit --nodes N --gpus-per-node G` against the real control plane (issue 20): the real
scheduler places the Indexed Job's pods one per node (the required anti-affinity gpuctl writes),
every pod carries the same rendezvous environment with its completion index as its rank, and the
headless Service's EndpointSlice (made by the real endpointslice controller) gives each pod's
hostname <job>-<i> its pod IP, so MASTER_ADDR <job>-0.<job> names the pod of index 0. The
Service is owned by the Job: the garbage collector deletes it with the Job. Pre-flight counts
nodes (one pod each), not GPUs; --queue on a cluster without Kueue is refused, and a distributed
job without a queue gets the honest warning that nothing starts its pods together.
--avoid-failed-nodes: a job whose pod fails with NVML's Unknown Error has its node labelled while
`submit --wait` watches, the retry lands elsewhere (where without the flag the scheduler puts it
back on the same node), and the labels go when the job ends.
Fleet submit-nodes (nodes sdn-0..2, 2 GPUs each, their own product and pool taint)."""
import harness as h

NODES = ["sdn-0", "sdn-1", "sdn-2"]
TYPE = "rtx-2070"
INDEX = "batch.kubernetes.io/job-completion-index"


def job_pods(ns, job):
    return h.kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=" + job, "-o", "json")["items"]


def env_of(pod):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0].get("env", [])}


NVML = "Failed to initialize NVML: Unknown Error"
POOL_TOLERATION = {"key": "example.com/gpu-pool", "operator": "Exists", "effect": "NoSchedule"}


def submit(ns, name, *flags, outcome="run"):
    return h.gpuctl("submit", name, "-n", ns, "--image", "nvcr.io/nvidia/pytorch:24.05-py3", "--gpu-type", TYPE,
                    "--label", "%s=%s" % (h.OUTCOME_LABEL, outcome), *flags, "--", "torchrun", "train.py")


def failed_nodes(ns, job):
    pods = sorted(job_pods(ns, job), key=lambda p: p["metadata"]["creationTimestamp"])
    return [p["spec"]["nodeName"] for p in pods if p["status"].get("phase") == "Failed"]


def nodes_labelled(prefix):
    return sorted(n["metadata"]["name"] for n in h.kubectl("get", "nodes", "-o", "json")["items"]
                  if any(k.startswith(prefix) for k in n["metadata"].get("labels", {})))


class SubmitDistributedTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("submit-nodes")

    def test_three_nodes_one_pod_each_with_ranks_and_a_rendezvous_service(self):
        ns = self.namespace("sdist-ddp")
        r = submit(ns, "ddp", "--nodes", "3", "--gpus-per-node", "2")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("no gang scheduler here (Kueue is not installed): the 3 pods are scheduled one at a time",
                      r.stderr)
        self.assertIn("rendezvous: headless Service ddp", r.stdout)

        def running():
            pods = job_pods(ns, "ddp")
            ok = len(pods) == 3 and all(p["status"].get("phase") == "Running" and p["status"].get("podIP")
                                        for p in pods)
            return pods if ok else None

        pods = h.wait_for(running, 120, "the three pods running")
        self.assertEqual(sorted(p["spec"]["nodeName"] for p in pods), NODES)
        by_index = {p["metadata"]["annotations"][INDEX]: p for p in pods}
        self.assertEqual(sorted(by_index), ["0", "1", "2"])
        # The server defaults the fieldRef's apiVersion.
        index_ref = {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['%s']" % INDEX}}
        for i, pod in by_index.items():
            self.assertEqual(pod["spec"]["hostname"], "ddp-" + i)
            self.assertEqual(pod["spec"]["subdomain"], "ddp")
            env = env_of(pod)
            self.assertEqual({k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "PET_NNODES",
                                                  "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT")},
                             {"MASTER_ADDR": "ddp-0.ddp", "MASTER_PORT": "29500", "WORLD_SIZE": "3",
                              "PET_NNODES": "3", "PET_NPROC_PER_NODE": "2", "PET_MASTER_ADDR": "ddp-0.ddp",
                              "PET_MASTER_PORT": "29500"})
            for rank in ("RANK", "NODE_RANK", "PET_NODE_RANK"):
                self.assertEqual(env[rank], index_ref)
            # The Job controller's own variable reads the label of the same index as the annotation.
            self.assertEqual(pod["metadata"]["labels"][INDEX], i)
            self.assertEqual(env["JOB_COMPLETION_INDEX"],
                             {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['%s']" % INDEX}})

        job = h.kubectl("get", "job", "ddp", "-n", ns, "-o", "json")
        service = h.kubectl("get", "service", "ddp", "-n", ns, "-o", "json")
        self.assertEqual(service["spec"]["clusterIP"], "None")
        self.assertEqual(service["metadata"]["ownerReferences"][0]["uid"], job["metadata"]["uid"])

        # The rendezvous name resolves through the API's endpoints: hostname ddp-<i> -> pod i's IP.
        def endpoints():
            slices = h.kubectl("get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=ddp",
                               "-o", "json")["items"]
            found = {e.get("hostname"): e["addresses"][0] for s in slices for e in s.get("endpoints") or []}
            return found if len(found) == 3 else None

        found = h.wait_for(endpoints, 60, "three endpoints of service ddp")
        self.assertEqual(found, {"ddp-" + i: p["status"]["podIP"] for i, p in by_index.items()})

        listed = h.gpuctl("jobs", "ddp", "-n", ns, "-o", "json")
        self.assertEqual(listed.rc, 0, listed.stderr)
        item = listed.json["items"][0]
        self.assertEqual((item["gpusPerPod"], item["gpus"], sorted(item["nodes"])), (2, 6, NODES))

        # Deleting the job deletes its Service (the garbage collector, through the owner).
        h.kubectl("delete", "job", "ddp", "-n", ns, "--wait=false")
        h.wait_for(lambda: not h.kubectl("get", "services", "-n", ns, "-o", "json")["items"], 90,
                   "the service collected with the job")

    def test_preflight_counts_nodes_not_gpus(self):
        ns = self.namespace("sdist-count")
        # 4 pods of 2 GPUs: 8 GPUs exist on the fleet's 3 nodes... and on no fourth node.
        r = submit(ns, "wide", "--nodes", "4", "--gpus-per-node", "2")
        self.assertEqual(r.rc, 3, r.stderr)
        self.assertIn("refused (gpu-capacity): the job runs 4 pods at once, one per node, but only 3 schedulable "
                      "nodes with product NVIDIA-GeForce-RTX-2070 have 2 GPUs (sdn-0, sdn-1, sdn-2)",
                      r.stderr)
        # The same GPUs asked for as 2 pods of 4 per node: no node has 4.
        r = submit(ns, "fat", "--nodes", "2", "--gpus-per-node", "4")
        self.assertEqual(r.rc, 3, r.stderr)
        self.assertIn("refused (gpu-capacity): no schedulable node with product NVIDIA-GeForce-RTX-2070 "
                      "has 4 GPUs", r.stderr)
        self.assertEqual(h.kubectl("get", "jobs,services", "-n", ns, "-o", "json")["items"], [])

    def test_queue_without_kueue_is_refused_and_nothing_is_made(self):
        ns = self.namespace("sdist-queue")
        r = submit(ns, "queued", "--nodes", "2", "--gpus-per-node", "1", "--queue", "team-a")
        self.assertEqual(r.rc, 3, r.stderr)
        self.assertIn("refused (queue): the job is for Kueue's LocalQueue \"team-a\" (kueue.x-k8s.io/queue-name), but "
                      "this cluster does not serve Kueue (no kueue.x-k8s.io API): the job would stay suspended for "
                      "ever", r.stderr)
        self.assertEqual(h.kubectl("get", "jobs,services", "-n", ns, "-o", "json")["items"], [])

    def test_server_dry_run_admits_job_and_service_and_makes_nothing(self):
        ns = self.namespace("sdist-dry")
        r = submit(ns, "dry", "--nodes", "2", "--gpus-per-node", "1", "--dry-run=server", "-o", "name")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["job.batch/dry", "service/dry"])
        self.assertEqual(h.kubectl("get", "jobs,services", "-n", ns, "-o", "json")["items"], [])

    def test_completions_and_parallelism_make_a_plain_parallel_job(self):
        ns = self.namespace("sdist-plain")
        r = submit(ns, "sweep", "--gpus", "1", "--completions", "4", "--parallelism", "2")
        self.assertEqual(r.rc, 0, r.stderr)
        spec = h.kubectl("get", "job", "sweep", "-n", ns, "-o", "json")["spec"]
        self.assertEqual((spec["completions"], spec["parallelism"], spec["completionMode"]), (4, 2, "NonIndexed"))
        h.wait_for(lambda: len([p for p in job_pods(ns, "sweep") if p["status"].get("phase") == "Running"]) == 2
                   or None, 90, "two pods running")
        # Its GPUs are the fleet's: give them back before the next test counts them.
        h.kubectl("delete", "job", "sweep", "-n", ns, "--cascade=foreground", "--wait=true", "--timeout=90s")
        h.wait_for(lambda: not job_pods(ns, "sweep"), 90, "the sweep's pods gone")

    def test_avoid_failed_nodes_sends_the_retry_elsewhere(self):
        ns = self.namespace("sdist-avoid")
        # CPU load makes the scheduler's choice certain: sdn-0 (idle) first, then sdn-1, sdn-2 last.
        h.create([h.gpu_pod("busy-1", ns, node="sdn-1", gpus=0, outcome_=h.outcome("run"),
                            resources={"requests": {"cpu": "16"}}, tolerations=[POOL_TOLERATION]),
                  h.gpu_pod("busy-2", ns, node="sdn-2", gpus=0, outcome_=h.outcome("run"),
                            resources={"requests": {"cpu": "28"}}, tolerations=[POOL_TOLERATION])])
        h.wait_for(lambda: all(p["status"].get("phase") == "Running" for p in
                               h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"]) or None, 60, "busy pods")
        failing = ("--gpus", "1", "--backoff-limit", "1", "--annotation", "%s=%s" % (h.MESSAGE_ANNOTATION, NVML),
                   "--wait", "--timeout", "3m")

        # Without the flag the retry goes back to the node that just failed it.
        plain = submit(ns, "plain", *failing, outcome="fail")
        self.assertEqual(plain.rc, 1, plain.stderr)
        self.assertEqual(failed_nodes(ns, "plain"), ["sdn-0", "sdn-0"])

        r = submit(ns, "avoid", *failing, "--avoid-failed-nodes", outcome="fail")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(failed_nodes(ns, "avoid"), ["sdn-0", "sdn-1"])
        key = h.kubectl("get", "job", "avoid", "-n", ns, "-o", "json")["spec"]["template"]["spec"]["affinity"][
            "nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchExpressions"][-1]["key"]
        self.assertTrue(key.startswith("avoid.gpuctl.io/avoid-"), key)
        self.assertRegex(r.stderr, r"pod avoid-\S+ failed on node sdn-0: NVML answered Unknown Error[^\n]*; the job's "
                                   r"next pods keep off it \(label %s=nvml-error\)" % key.replace(".", r"\."))
        self.assertIn("node sdn-0: label %s removed (the job has finished)" % key, r.stderr)
        self.assertIn("node sdn-1: label %s removed (the job has finished)" % key, r.stderr)
        self.assertEqual(nodes_labelled("avoid.gpuctl.io/"), [])
        self.assertIn("GPU cause: NVML answered Unknown Error", r.stdout.splitlines()[-1])


if __name__ == "__main__":
    h.main()
