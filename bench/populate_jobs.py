"""Populates what `gpuctl jobs` and `gpuctl quota` read: one batch/v1 Job per node, in the team
namespaces of bench/populate.py, with a realistic template (the trainer + log shipper of the job
pods, GPU requests, volumes, tolerations) and status written through the status subresource
(most Running, some Complete, some Failed, a few suspended), a Warning FailedCreate event for
every pending one (the quota refusal that `jobs` and `quota` explain), and one ResourceQuota per team
namespace with GPU keys whose status.used is rewritten at every size. Like populate.py: pure
functions of the index, written fast over keep-alive connections in parallel (populate.Writer)."""
import populate
from controlplane import log

QUOTA_NAME = "gpu-quota"
# Every 7th job is CPU-only: `gpuctl jobs` lists GPU jobs only, so its count is not the list's.
CPU_ONLY_EVERY = 7


def job_name(i):
    return "train-%05d" % i


def job_namespace(i):
    return populate.NAMESPACES[i % len(populate.NAMESPACES)]


def job_gpus(i):
    """GPUs per pod, 0 for the CPU-only jobs."""
    return 0 if i % CPU_ONLY_EVERY == 5 else (8, 4, 2, 1)[i % 4]


def job_state(i):
    """Running, Complete, Failed, Suspended or Pending (its pods refused by quota): a fleet's mix."""
    k = i % 20
    return {3: "Complete", 11: "Complete", 17: "Complete", 7: "Failed", 13: "Suspended", 19: "Pending"}.get(k, "Running")


def job_requests_gpu(job):
    for c in job["spec"]["template"]["spec"]["containers"]:
        if any(k.startswith("nvidia.com/") for k in (c.get("resources", {}).get("requests") or {})):
            return True
    return False


def job_objects(i):
    """The Job to POST and the status to PATCH (None for a suspended job: it never started)."""
    ns, name, gpus, state = job_namespace(i), job_name(i), job_gpus(i), job_state(i)
    pod, _ = populate.pod_objects(i, len(populate.DAEMONS))  # a job pod's template, as populate writes pods
    spec = pod["spec"]
    spec.pop("nodeName")
    trainer = spec["containers"][0]
    req, lim = trainer["resources"]["requests"], trainer["resources"]["limits"]
    req.pop("nvidia.com/gpu", None)
    lim.pop("nvidia.com/gpu", None)
    if gpus:
        req["nvidia.com/gpu"] = lim["nvidia.com/gpu"] = str(gpus)
    spec["restartPolicy"] = "Never"
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": ns, "team": ns,
              "gpu": "true" if gpus else "false"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "namespace": ns, "labels": labels,
        "annotations": {"gpuctl.io/submitted-by": "bench", "kueue.x-k8s.io/queue-name": ns + "-queue"}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 3, "ttlSecondsAfterFinished": 86400,
                 "activeDeadlineSeconds": 7 * 86400, "suspend": state == "Suspended",
                 "template": {"metadata": {"labels": dict(labels), "annotations": pod["metadata"]["annotations"]},
                              "spec": spec}}}
    return job, job_status(state)


def job_status(state):
    ts, end = populate.TS, "2026-12-01T09:30:00Z"
    if state == "Suspended":
        return None
    if state in ("Running", "Pending"):
        n = int(state == "Running")
        return {"status": {"startTime": ts, "active": n, "ready": n, "terminating": 0, "uncountedTerminatedPods": {}}}

    def cond(t, reason, msg):
        return {"type": t, "status": "True", "reason": reason, "message": msg,
                "lastProbeTime": end, "lastTransitionTime": end}
    if state == "Complete":
        return {"status": {"startTime": ts, "completionTime": end, "succeeded": 1, "ready": 0, "terminating": 0,
                           "uncountedTerminatedPods": {},
                           "conditions": [cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                                          cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")]}}
    msg = "Job has reached the specified backoff limit"
    return {"status": {"startTime": ts, "failed": 4, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
                       "conditions": [cond("FailureTarget", "BackoffLimitExceeded", msg),
                                      cond("Failed", "BackoffLimitExceeded", msg)]}}


def event_object(i):
    ns, name = job_namespace(i), job_name(i)
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "%s.%016x" % (name, i * 2654435761 % 2 ** 64), "namespace": ns},
            "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns},
            "reason": "FailedCreate", "type": "Warning", "count": 3, "source": {"component": "job-controller"},
            "firstTimestamp": populate.TS, "lastTimestamp": populate.TS,
            "message": 'Error creating: pods "%s-x7k2p" is forbidden: exceeded quota: %s, requested: '
                       'requests.nvidia.com/gpu=%d, used: requests.nvidia.com/gpu=64, limited: '
                       'requests.nvidia.com/gpu=64' % (name, QUOTA_NAME, max(job_gpus(i), 1))}


def quota_used(ns, nodes):
    """GPUs requested by the running pods of namespace ns on nodes 0..nodes-1 (populate's pods)."""
    return sum(populate.pod_gpus(i, j) for i in range(nodes) for j in range(len(populate.DAEMONS), populate.PODS_PER_NODE)
               if populate.NAMESPACES[(i + j) % len(populate.NAMESPACES)] == ns)


def quota_objects(ns, nodes):
    # The hard limit grows with the fleet: twice a namespace's share of its GPUs (some still go over).
    hard_gpus = max(16, nodes * 8 * 2 // len(populate.NAMESPACES))
    hard = {"requests.nvidia.com/gpu": str(hard_gpus), "requests.cpu": str(hard_gpus * 24),
            "requests.memory": "%dGi" % (hard_gpus * 256), "pods": str(nodes * 10)}
    if populate.NAMESPACES.index(ns) % 4 == 0:  # a key Kubernetes never enforces, which gpuctl flags
        hard["limits.nvidia.com/gpu"] = hard["requests.nvidia.com/gpu"]
    used = quota_used(ns, nodes)
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": QUOTA_NAME, "namespace": ns,
                                                                       "labels": {"team": ns}}, "spec": {"hard": hard}}
    used_now = {"requests.nvidia.com/gpu": str(used), "requests.cpu": "%d" % (used * 16),
                "requests.memory": "%dGi" % (used * 64), "pods": "0"}
    if "limits.nvidia.com/gpu" in hard:
        used_now["limits.nvidia.com/gpu"] = str(used)
    status = {"status": {"hard": hard, "used": used_now}}
    return quota, status


def lift_quotas(cp, conns=8):
    """Before a larger size's pods are created: quota admission would refuse the pods that go
    over the quotas written for the smaller size, so every limit is lifted until populate_jobs
    writes the new size's quotas (admission reads status.hard, which kube-controller-manager would
    copy from spec.hard: there is none here)."""
    w = populate.Writer(cp, conns)
    tasks = []
    for ns in populate.NAMESPACES:
        hard = {k: "1000Ti" if k.endswith("memory") else "1000000" for k in quota_objects(ns, 1)[0]["spec"]["hard"]}
        tasks.append([("PATCH", "/api/v1/namespaces/%s/resourcequotas/%s/status" % (ns, QUOTA_NAME),
                       {"status": {"hard": hard}}, "application/merge-patch+json")])
    w.run(tasks)


def populate_jobs(cp, first, count, conns=8):
    """Jobs (and events) first..first+count-1, the quotas' status for first+count nodes."""
    w = populate.Writer(cp, conns)
    merge = "application/merge-patch+json"
    nodes = first + count
    tasks = []
    for ns in populate.NAMESPACES:
        quota, status = quota_objects(ns, nodes)
        base = "/api/v1/namespaces/%s/resourcequotas" % ns
        steps = [("POST", base, quota, "application/json")] if first == 0 else []
        tasks.append(steps + [("PATCH", "%s/%s" % (base, QUOTA_NAME), {"spec": quota["spec"]}, merge),
                              ("PATCH", "%s/%s/status" % (base, QUOTA_NAME), status, merge)])
    w.run(tasks)
    tasks = []
    for i in range(first, nodes):
        job, status = job_objects(i)
        base = "/apis/batch/v1/namespaces/%s/jobs" % job_namespace(i)
        steps = [("POST", base, job, "application/json")]
        if status:
            steps.append(("PATCH", "%s/%s/status" % (base, job_name(i)), status, merge))
        if job_state(i) == "Pending":
            steps.append(("POST", "/api/v1/namespaces/%s/events" % job_namespace(i), event_object(i), "application/json"))
        tasks.append(steps)
    w.run(tasks)
    log("populated jobs %d..%d, %d quotas (%d requests)" % (first, nodes - 1, len(populate.NAMESPACES), w.sent))
