"""Populates the bench's control plane fast: GPU nodes with GPU Feature Discovery labels and a
status written through the status subresource, and 10 pods per node of realistic size, bound to
their node (spec.nodeName) and Running (status subresource). No scheduler, no kubelet: every
object is written by us over a few keep-alive HTTPS connections in parallel.

Everything is a pure function of the node index, so a larger size adds only the missing nodes
and pods, and expected_gpus_used() knows what each node should show."""
import http.client
import json
import queue
import threading
import time

from controlplane import BuildError, cluster, log

PODS_PER_NODE = 10
NAMESPACES = ["team-%02d" % i for i in range(12)]
SYSTEM_NS = ["kube-system", "gpu-operator", "monitoring"]
# (product as nvidia-smi names it, memory MiB, driver, CUDA)
PRODUCTS = [("NVIDIA H100 80GB HBM3", 81559, "550.90.07", "12.4"),
            ("NVIDIA A100-SXM4-80GB", 81920, "535.161.08", "12.2"),
            ("NVIDIA L40S", 46068, "550.90.07", "12.4"),
            ("NVIDIA A100-SXM4-40GB", 40960, "535.161.08", "12.2")]
# GPUs asked by the 6 workload pods of a node (rotated per node; 0 = a CPU pod)
WORKLOAD_GPUS = [4, 2, 1, 1, 0, 0]
DAEMONS = [("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.36.3", "100m", "128Mi"),
           ("gpu-operator", "nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", "50m", "64Mi"),
           ("gpu-operator", "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.8-3.6.0-ubuntu22.04",
            "100m", "512Mi"),
           ("monitoring", "node-exporter", "quay.io/prometheus/node-exporter:v1.8.2", "100m", "180Mi")]
TS = "2026-12-01T08:00:00Z"


def node_name(i):
    return "gpu-%s-%05d" % (PRODUCTS[i % len(PRODUCTS)][0].split()[1].split("-")[0].lower(), i)


def node_gpus(i):
    """(capacity, allocatable): every 17th node has a GPU the device plugin reports unhealthy;
    some of them (node 1 first, so --quick has one) carry pods on all 8 GPUs: used > allocatable,
    as after a GPU fails under running pods."""
    return 8, (7 if i % 17 == 1 else 8)


def pod_gpus(i, j):
    if j < len(DAEMONS):
        return 0
    w = j - len(DAEMONS)
    g = WORKLOAD_GPUS[(w + i) % len(WORKLOAD_GPUS)]
    return 0 if (i * 7 + w) % 5 == 0 else g


def expected_gpus_used(i):
    return sum(pod_gpus(i, j) for j in range(PODS_PER_NODE))


def node_objects(i):
    product, mem, drv, cuda = PRODUCTS[i % len(PRODUCTS)]
    cap_gpus, alloc_gpus = node_gpus(i)
    spec = {"name": node_name(i), "gpus": cap_gpus, "unhealthyGpus": cap_gpus - alloc_gpus, "fleet": "bench",
            "product": product, "cpu": "192", "memory": "2015Gi", "pods": "110", "ephemeralStorage": "3500Gi",
            "fixtureInfo": {"memory_mib": mem, "driver_version": drv, "cuda_version": cuda},
            "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone":
                       "us-east-1%s" % "abcd"[i % 4], "pool": "gpu-%d" % (i % 8)}}
    if i % 9 == 0:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    ip = "10.%d.%d.%d" % (i // 65536 % 256, i // 256 % 256, i % 256)
    node, _ = cluster.node_object(spec, ip)
    node["metadata"]["labels"].pop("type", None)
    node["metadata"]["annotations"] = {
        "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AVX512F,cpu-hardware_multithreading,pci-10de.present",
        "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": "i-%016x" % (i * 2654435761 % 2 ** 64)})}
    status = node.pop("status")
    now = TS
    status["conditions"] = [
        {"type": t, "status": "False", "reason": "Kubelet" + r, "message": "kubelet has " + m,
         "lastHeartbeatTime": now, "lastTransitionTime": now}
        for t, r, m in (("MemoryPressure", "HasSufficientMemory", "sufficient memory available"),
                        ("DiskPressure", "HasNoDiskPressure", "no disk pressure"),
                        ("PIDPressure", "HasSufficientPID", "sufficient PID available"))] + [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": now, "lastTransitionTime": now}]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    status["images"] = [{"names": ["%s@sha256:%064x" % (img.split(":")[0], k * 7919 + 1), img], "sizeBytes": 10 ** 8 * (k + 1)}
                        for k, (_, _, img, _, _) in enumerate(DAEMONS)] + [
        {"names": ["nvcr.io/nvidia/pytorch:24.0%d-py3" % k], "sizeBytes": 9876543210 + k} for k in range(1, 8)]
    return node, {"status": status}


def pod_objects(i, j):
    node = node_name(i)
    gpus = pod_gpus(i, j)
    if j < len(DAEMONS):
        ns, app, image, cpu, mem = DAEMONS[j]
        name = "%s-%s" % (app, node.split("-", 1)[1])
        owner = ("DaemonSet", "apps/v1", app)
        containers = [("main", image, cpu, mem, 0)]
    else:
        ns = NAMESPACES[(i + j) % len(NAMESPACES)]
        app = "train-%d" % (i * PODS_PER_NODE + j)
        name = "%s-w%d-%05x" % (app, j, (i * 31 + j) % 0xfffff)
        owner = ("Job", "batch/v1", app)
        containers = [("trainer", "nvcr.io/nvidia/pytorch:24.05-py3", "16" if gpus else "4",
                       "%dGi" % (64 * max(gpus, 1)), gpus),
                      ("log-shipper", "fluent/fluent-bit:3.1.9", "100m", "128Mi", 0)]
    uid = "%08x-0000-4000-8000-%012x" % (i, j)
    env = [{"name": k, "value": v} for k, v in (
        ("NCCL_DEBUG", "WARN"), ("NCCL_IB_HCA", "mlx5"), ("OMP_NUM_THREADS", "8"), ("WORLD_SIZE", "16"),
        ("MASTER_ADDR", app + "-0." + app), ("MASTER_PORT", "29500"), ("WANDB_PROJECT", ns), ("HF_HOME", "/cache/hf"))]
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}})
    cspecs = []
    for k, (cname, image, cpu, mem, g) in enumerate(containers):
        req = {"cpu": cpu, "memory": mem}
        lim = {"memory": mem}
        if g:
            req["nvidia.com/gpu"] = lim["nvidia.com/gpu"] = str(g)
        cspecs.append({
            "name": cname, "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/bash", "-c"], "args": ["exec python -m torch.distributed.run train.py --config /etc/job/config.yaml"],
            "env": env, "resources": {"requests": req, "limits": lim},
            "ports": [{"name": "metrics-%d" % k, "containerPort": 9400 + k, "protocol": "TCP"}],
            "volumeMounts": [{"name": "config", "mountPath": "/etc/job"}, {"name": "dshm", "mountPath": "/dev/shm"},
                             {"name": "cache", "mountPath": "/cache"}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 9400 + k}, "periodSeconds": 10},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": ns, "uid": uid,
        "labels": {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": ns, "batch.kubernetes.io/job-name": app,
                   "team": ns, "gpu": "true" if gpus else "false"},
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9400",
                        "kubectl.kubernetes.io/default-container": containers[0][0],
                        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        "ownerReferences": [{"apiVersion": owner[1], "kind": owner[0], "name": owner[2], "uid": uid[:-4] + "ffff",
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": node, "restartPolicy": "Never" if owner[0] == "Job" else "Always",
                 "containers": cspecs, "priorityClassName": "system-node-critical" if ns == "kube-system" else None,
                 "initContainers": [{"name": "fetch-config", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                 "volumes": [{"name": "config", "configMap": {"name": app + "-config"}},
                             {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                             {"name": "cache", "hostPath": {"path": "/mnt/cache", "type": "DirectoryOrCreate"}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    if pod["spec"]["priorityClassName"] is None:
        del pod["spec"]["priorityClassName"]
    started = {"startedAt": TS}
    status = {"status": {
        "phase": "Running", "hostIP": "10.%d.%d.%d" % (i // 65536 % 256, i // 256 % 256, i % 256),
        "podIP": "10.244.%d.%d" % (i % 256, j + 2), "startTime": TS,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": TS}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "initContainerStatuses": [{"name": "fetch-config", "ready": True, "restartCount": 0, "image": "busybox:1.36",
                                   "imageID": "docker.io/library/busybox@sha256:%064x" % 1,
                                   "containerID": "containerd://%064x" % (i * 100 + j),
                                   "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": TS, "finishedAt": TS}}}],
        "containerStatuses": [{"name": c[0], "ready": True, "restartCount": 0, "started": True, "image": c[1],
                               "imageID": c[1].split(":")[0] + "@sha256:%064x" % (k + 7),
                               "containerID": "containerd://%064x" % (i * 1000 + j * 10 + k),
                               "state": {"running": started}} for k, c in enumerate(containers)]}}
    return pod, status


class Writer:
    """Sends requests over `conns` keep-alive HTTPS connections in parallel; retries 429/5xx and
    lost connections a few times; 409 on create counts as done (an earlier run wrote it)."""

    def __init__(self, cp, conns=8):
        self.cp, self.conns = cp, conns
        self.errors, self.sent = [], 0
        self._lock = threading.Lock()

    def run(self, tasks):
        q = queue.Queue()
        for t in tasks:
            q.put(t)
        threads = [threading.Thread(target=self._worker, args=(q,), daemon=True) for _ in range(self.conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.errors:
            raise BuildError("populating failed (%d errors), first: %s" % (len(self.errors), self.errors[0]))

    def _worker(self, q):
        try:
            self._work(q)
        except Exception as e:  # recorded: run() fails with it instead of a thread dying unseen
            with self._lock:
                self.errors.append("%s: %s" % (type(e).__name__, e))

    def _work(self, q):
        conn = None
        while not self.errors:
            try:
                steps = q.get_nowait()
            except queue.Empty:
                break
            for method, path, body, ctype in steps:
                for attempt in range(6):
                    try:
                        if conn is None:
                            conn = http.client.HTTPSConnection("127.0.0.1", self.cp.port, context=self.cp.ssl_context(),
                                                               timeout=60)
                        conn.request(method, path, json.dumps(body), dict(self.cp.headers(), **{"Content-Type": ctype}))
                        r = conn.getresponse()
                        data = r.read()
                    except (OSError, http.client.HTTPException) as e:
                        conn, code, data = None, 0, str(e).encode()
                    else:
                        code = r.status
                    if code in (200, 201) or (code == 409 and method == "POST"):
                        break
                    if code and code not in (429, 500, 503, 504):
                        attempt = 99
                    if attempt >= 5:
                        with self._lock:
                            self.errors.append("%s %s -> %s %s" % (method, path, code, data[:300].decode(errors="replace")))
                        return
                    time.sleep(0.2 * (attempt + 1))
                with self._lock:
                    self.sent += 1


def populate(cp, first, count, conns=8):
    """Nodes first..first+count-1 and their pods; returns seconds taken."""
    t = time.time()
    w = Writer(cp, conns)
    if first == 0:
        w.run([[("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                 "application/json")] for ns in NAMESPACES + SYSTEM_NS[1:]])
        w.run([[("POST", "/api/v1/namespaces/%s/serviceaccounts" % ns,
                 {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, "application/json")]
               for ns in NAMESPACES + SYSTEM_NS])
    merge = "application/merge-patch+json"
    tasks = []
    for i in range(first, first + count):
        node, nstatus = node_objects(i)
        tasks.append([("POST", "/api/v1/nodes", node, "application/json"),
                      ("PATCH", "/api/v1/nodes/%s/status" % node["metadata"]["name"], nstatus, merge)])
    w.run(tasks)
    tasks = []
    for i in range(first, first + count):
        for j in range(PODS_PER_NODE):
            pod, pstatus = pod_objects(i, j)
            base = "/api/v1/namespaces/%s/pods" % pod["metadata"]["namespace"]
            pod["metadata"].pop("uid")
            tasks.append([("POST", base, pod, "application/json"),
                          ("PATCH", "%s/%s/status" % (base, pod["metadata"]["name"]), pstatus, merge)])
    w.run(tasks)
    secs = time.time() - t
    log("populated nodes %d..%d (%d nodes, %d pods, %d requests) in %.1fs" % (
        first, first + count - 1, count, count * PODS_PER_NODE, w.sent, secs))
    return secs
