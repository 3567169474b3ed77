"""The ground the backup/restore suite (test_backup_restore.py) stands on: the state it builds on
its private cluster (node labels, taints, cordons with their records, three team namespaces with
GPU quotas and LimitRanges, static PVs with PVCs the PV binder bound to them, GPU Jobs, a device
plugin DaemonSet with the ConfigMap it mounts, a Secret, a non-GPU Job), the damage done to it
after the backup with the plan restore must show for it, and snapshots of what the cluster holds
for "nothing was written". Node names: br-."""
import json
import re
import time

import harness as h
import faults_common as f

# -- the state the suite builds -------------------------------------------------------------------

TEAMS = {"br-team-a": {"gpus": 8, "max": 4, "pv": "br-pv-a"},
         "br-team-b": {"gpus": 4, "max": 2, "pv": "br-pv-b"},
         "br-team-c": {"gpus": 2, "max": 2, "pv": "br-pv-c"}}
PLUGIN_NS = "br-gpu-system"
QUOTA, LIMITS, PVC = "gpu-quota", "gpu-limits", "data"
STORAGE_CLASS = "br-static"
PRIORITY_CLASS, RUNTIME_CLASS, DEVICE_CLASS = "br-gpu-high", "br-nvidia", "br-gpu.example.com"
POOL = "br.gpuctl.dev/pool"
RACK = "br.gpuctl.dev/rack"
PART_OF = "app.kubernetes.io/part-of"
GPU_TAINT_KEY = "nvidia.com/gpu"
CORDON_REASON, CORDONED_BY, CORDONED_AT = f.CORDON_KEYS
REASONS = {"br-a10g-1": "ECC errors, RMA 4711", "br-t4-0": "driver 550 upgrade"}
POOLS = {"br-a10g-0": "training", "br-a10g-1": "training", "br-t4-0": "inference", "br-t4-1": "inference",
         "br-cpu-0": "services", "br-gone": "spare"}
TRAIN_NODE = "br-a10g-0"     # where the GPU Jobs run (tolerated nvidia.com/gpu taint, never cordoned)
# GPU Jobs (namespace, name, GPUs, labels) and the one non-GPU Job
GPU_JOBS = [("br-team-a", "train-a", 2, {PART_OF: "br-training"}),
            ("br-team-b", "train-b", 1, {PART_OF: "br-training"}),
            ("br-team-c", "train-c", 1, {})]
CPU_JOB = ("br-team-a", "prep-a")
SECRET_NS, SECRET_NAME = "br-team-a", "registry-token"
SECRET_VALUE = "br-s3cr3t-7f3a9c-do-not-leak"
PLUGIN_CONFIG_MAP, OTHER_CONFIG_MAP = "nvdp-nvidia-device-plugin-configs", "unrelated-settings"
PLUGIN_CONFIG = "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n" \
                "    - name: nvidia.com/gpu\n      replicas: 2\n"
TUNER = "quota-tuner"        # the other field manager that edits a quota after the backup

# archive path prefix -> (kind, apiVersion) as the contract names them
RESOURCES = {
    "nodes": ("Node", "v1"), "namespaces": ("Namespace", "v1"), "resourcequotas": ("ResourceQuota", "v1"),
    "limitranges": ("LimitRange", "v1"), "persistentvolumes": ("PersistentVolume", "v1"),
    "persistentvolumeclaims": ("PersistentVolumeClaim", "v1"), "configmaps": ("ConfigMap", "v1"),
    "secrets": ("Secret", "v1"), "jobs.batch": ("Job", "batch/v1"), "daemonsets.apps": ("DaemonSet", "apps/v1"),
    "priorityclasses.scheduling.k8s.io": ("PriorityClass", "scheduling.k8s.io/v1"),
    "runtimeclasses.node.k8s.io": ("RuntimeClass", "node.k8s.io/v1"),
    "storageclasses.storage.k8s.io": ("StorageClass", "storage.k8s.io/v1"),
    "deviceclasses.resource.k8s.io": ("DeviceClass", "resource.k8s.io/v1"),
}
CLUSTER_SCOPED = {"nodes", "namespaces", "persistentvolumes", "priorityclasses.scheduling.k8s.io",
                  "runtimeclasses.node.k8s.io", "storageclasses.storage.k8s.io", "deviceclasses.resource.k8s.io"}
STRIPPED_META = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation")
WRITE_LINE = re.compile(r"^(POST|PUT|PATCH|DELETE) ", re.M)


def team_objects(ns, spec):
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": QUOTA, "namespace": ns},
             "spec": {"hard": {"requests.nvidia.com/gpu": str(spec["gpus"])}}}
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": LIMITS, "namespace": ns},
              "spec": {"limits": [  # as `gpuctl quota set --max-per-pod` writes it
                  {"type": "Container", "max": {"nvidia.com/gpu": str(spec["max"])}, "default": {"nvidia.com/gpu": "0"},
                   "defaultRequest": {"nvidia.com/gpu": "0"}},
                  {"type": "Pod", "max": {"nvidia.com/gpu": str(spec["max"])}}]}}
    return [quota, limits, pv_claim(ns)]


def pv_claim(ns):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": PVC, "namespace": ns},
            "spec": {"storageClassName": STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                     "volumeName": TEAMS[ns]["pv"], "resources": {"requests": {"storage": "100Gi"}}}}


def static_pv(name, ns):
    """A hand-made PV (hostPath, Retain, our own class), pre-bound to its team's claim by name as
    admins write them for static provisioning."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": {"br.gpuctl.dev/team": ns}},
            "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                     "hostPath": {"path": "/mnt/datasets/" + ns, "type": "DirectoryOrCreate"},
                     "claimRef": {"namespace": ns, "name": PVC}}}


def cluster_objects():
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
          "provisioner": "kubernetes.io/no-provisioner", "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": PRIORITY_CLASS},
          "value": 100000, "globalDefault": False, "description": "GPU training that may preempt batch work"}
    rc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": RUNTIME_CLASS}, "handler": "nvidia"}
    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
          "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
    return [sc, pc, rc, dc] + [static_pv(t["pv"], ns) for ns, t in TEAMS.items()]


def plugin_objects():
    ds = h.device_plugin_daemonset(PLUGIN_NS, node_selector={"e2e.gpuctl.dev/fleet": "backup"})
    pod = ds["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "available-configs", "configMap": {"name": PLUGIN_CONFIG_MAP}})
    pod["containers"][0]["volumeMounts"].append({"name": "available-configs", "mountPath": "/available-configs"})
    pod["containers"][0]["args"] = ["--config-file=/available-configs/config.yaml"]
    cms = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PLUGIN_CONFIG_MAP, "namespace": PLUGIN_NS},
            "data": {"config.yaml": PLUGIN_CONFIG}},
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": OTHER_CONFIG_MAP, "namespace": PLUGIN_NS},
            "data": {"note": "not referenced by the device plugin"}}]
    return cms + [ds]


def gpu_job(ns, name, gpus, labels):
    job = h.gpu_job(name, ns, gpus=gpus, outcome_=h.outcome("run"), node=TRAIN_NODE, labels=labels)
    job["metadata"]["labels"] = dict(labels)
    if ns == SECRET_NS:   # the team's private registry: the Secret is one a kept Job references
        job["spec"]["template"]["spec"]["imagePullSecrets"] = [{"name": SECRET_NAME}]
    return job


def build_state():
    """Everything a GPU cluster's admin would want back, created the way admins create it
    (kubectl create/label/taint, gpuctl cordon); returns once the PVCs are Bound and the Jobs run."""
    for ns in list(TEAMS) + [PLUGIN_NS]:
        h.kubectl("create", "namespace", ns)
    h.create(cluster_objects())
    for ns, spec in TEAMS.items():
        h.create(team_objects(ns, spec))
    h.create(plugin_objects())
    h.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET_NAME, "namespace": SECRET_NS},
              "type": "Opaque", "stringData": {"token": SECRET_VALUE}})
    for node, pool in POOLS.items():
        h.kubectl("label", "node", node, "%s=%s" % (POOL, pool))
    h.kubectl("annotate", "node", "br-a10g-1", RACK + "=r12-u07")
    h.kubectl("taint", "node", "br-a10g-0", "br-a10g-1", GPU_TAINT_KEY + "=present:NoSchedule")
    h.kubectl("taint", "node", "br-t4-0", "br-t4-1", "dedicated=inference:NoSchedule")
    for node, reason in REASONS.items():
        r = h.gpuctl("cordon", node, "--reason", reason)
        if r.rc != 0:
            raise h.HarnessError("gpuctl cordon %s: %s" % (node, r.stderr))
    wait_pvcs_bound(TEAMS)
    h.create([gpu_job(*j) for j in GPU_JOBS]
             + [h.gpu_job(CPU_JOB[1], CPU_JOB[0], gpus=0, outcome_=h.outcome("run"), node="br-cpu-0")])
    wait_jobs_active([(ns, n) for ns, n, _, _ in GPU_JOBS] + [CPU_JOB])
    h.daemonset_pod(PLUGIN_NS, "nvdp-nvidia-device-plugin", TRAIN_NODE)


def wait_pvcs_bound(namespaces, timeout=90):
    """Each team's claim Bound to its own PV, and the PV Bound to that claim (uid and all)."""
    def bound():
        for ns in namespaces:
            pvc = h.kubectl("get", "pvc", PVC, "-n", ns, "-o", "json")
            pv = h.kubectl("get", "pv", TEAMS[ns]["pv"], "-o", "json")
            if pvc["status"].get("phase") != "Bound" or pv["status"].get("phase") != "Bound" \
                    or pvc["spec"].get("volumeName") != TEAMS[ns]["pv"] \
                    or pv["spec"]["claimRef"].get("uid") != pvc["metadata"]["uid"]:
                return None
        return True
    try:
        h.wait_for(bound, timeout, "PVCs %s Bound to their PVs" % sorted(namespaces))
    except h.HarnessError as e:
        # Say how they are stuck: a claim recreated with pv.kubernetes.io/bind-completed while its
        # PV still names the old claim's uid goes Lost (ClaimMisbound) and stays Lost.
        state = []
        for ns in namespaces:
            pvc = h.kubectl("get", "pvc", PVC, "-n", ns, "-o", "json", check=False)
            pv = h.kubectl("get", "pv", TEAMS[ns]["pv"], "-o", "json")
            ev = [x["reason"] + ": " + x["message"] for x in h.events_for("PersistentVolumeClaim", PVC, ns)][-1:]
            state.append("%s/%s %s (annotations %s), PV %s %s claimRef.uid %s; %s" % (
                ns, PVC, pvc.json["status"].get("phase") if pvc.rc == 0 else "missing",
                pvc.json["metadata"].get("annotations") if pvc.rc == 0 else None, pv["metadata"]["name"],
                pv["status"].get("phase"), pv["spec"].get("claimRef", {}).get("uid"), ev))
        raise h.HarnessError("%s\n%s" % (e, "\n".join(state)))


def wait_jobs_active(jobs, timeout=90):
    def active():
        return all((h.kubectl("get", "job", n, "-n", ns, "-o", "json")["status"].get("active") or 0) >= 1
                   for ns, n in jobs)
    h.wait_for(active, timeout, "Jobs %s running" % jobs)


def wait_job_pods_gone(ns, job, timeout=90):
    h.wait_for(lambda: not h.kubectl("get", "pods", "-n", ns, "-l", "job-name=" + job, "-o", "json")["items"],
               timeout, "the pods of deleted Job %s/%s to go" % (ns, job))


def wait_pv_phase(name, phase, timeout=60):
    h.wait_for(lambda: h.kubectl("get", "pv", name, "-o", "json")["status"].get("phase") == phase, timeout,
               "PV %s %s" % (name, phase))


def damage():
    """What an operator, a bad script and a node replacement do to a cluster after its backup.
    Returns the plan restore must show: {(kind, namespace, name): action}."""
    # Node state removed: a label, an annotation and a taint from one node, a label from another,
    # one cordon lifted (its record cleared with it), one node gone from the fleet.
    h.kubectl("label", "node", "br-a10g-1", POOL + "-")
    h.kubectl("annotate", "node", "br-a10g-1", RACK + "-")
    h.kubectl("taint", "node", "br-a10g-1", GPU_TAINT_KEY + ":NoSchedule-")
    h.kubectl("label", "node", "br-t4-1", POOL + "-")
    r = h.gpuctl("uncordon", "br-t4-0")
    if r.rc != 0:
        raise h.HarnessError("gpuctl uncordon br-t4-0: %s" % r.stderr)
    h.kubectl("delete", "node", "br-gone")
    # Node state added after the backup: restore must never take it away.
    h.kubectl("label", "node", "br-cpu-0", "br.gpuctl.dev/added=after-backup")
    h.kubectl("taint", "node", "br-cpu-0", "br.gpuctl.dev/added=after-backup:NoSchedule")
    r = h.gpuctl("cordon", "br-cpu-0", "--reason", "cordoned after the backup")
    if r.rc != 0:
        raise h.HarnessError("gpuctl cordon br-cpu-0: %s" % r.stderr)
    # A quota deleted, another raised by someone else's tool (a different field manager).
    h.kubectl("delete", "resourcequota", QUOTA, "-n", "br-team-c")
    h.kubectl("patch", "resourcequota", QUOTA, "-n", "br-team-b", "--field-manager", TUNER, "--type", "merge",
              "-p", json.dumps({"spec": {"hard": {"requests.nvidia.com/gpu": "6"}}}))
    # GPU Jobs and PVCs deleted: the Retain PVs go Released, still naming the old claims.
    for ns, name in (("br-team-a", "train-a"), ("br-team-c", "train-c")):
        h.kubectl("delete", "job", name, "-n", ns)
    for ns in ("br-team-a", "br-team-c"):
        h.kubectl("delete", "pvc", PVC, "-n", ns)
    h.kubectl("delete", "priorityclass", PRIORITY_CLASS)
    for ns in ("br-team-a", "br-team-c"):
        wait_pv_phase(TEAMS[ns]["pv"], "Released")
    for ns, name in (("br-team-a", "train-a"), ("br-team-c", "train-c")):
        wait_job_pods_gone(ns, name)
    return {
        ("Node", "", "br-a10g-1"): "update", ("Node", "", "br-t4-0"): "update", ("Node", "", "br-t4-1"): "update",
        ("Node", "", "br-gone"): "skip",
        ("ResourceQuota", "br-team-b", QUOTA): "update", ("ResourceQuota", "br-team-c", QUOTA): "create",
        ("Job", "br-team-a", "train-a"): "create", ("Job", "br-team-c", "train-c"): "create",
        ("PersistentVolumeClaim", "br-team-a", PVC): "create", ("PersistentVolumeClaim", "br-team-c", PVC): "create",
        ("PriorityClass", "", PRIORITY_CLASS): "create",
    }


# PVs whose claim was deleted: a restore may re-point their claimRef at the recreated claim
# (that is how a Released PV is bound again), and nothing else.
REBIND_PVS = {("PersistentVolume", "", "br-pv-a"), ("PersistentVolume", "", "br-pv-c")}


# -- what the cluster holds, for "nothing was written" ---------------------------------------------

SNAP_RESOURCES = ",".join(r for r in RESOURCES if r != "nodes")


# Kinds whose status controllers keep writing (DaemonSet and Job counts, quota usage, PV/PVC
# phases): their resourceVersion moves without anyone touching what a restore writes.
STATUS_KINDS = {"DaemonSet", "Job", "ResourceQuota", "PersistentVolume", "PersistentVolumeClaim", "Namespace"}


def snapshot():
    """resourceVersion of every object of the archived kinds; for the kinds with a busy status,
    the object without its status (managedFields included, status writers' entries left out);
    and each node's restorable state (node resourceVersions move with kwok's heartbeats)."""
    snap = {}
    for o in h.kubectl("get", SNAP_RESOURCES, "-A", "-o", "json", "--show-managed-fields")["items"]:
        m = o["metadata"]
        key = (o["kind"], m.get("namespace", ""), m["name"])
        if o["kind"] in STATUS_KINDS:
            meta = dict(m, managedFields=[e for e in m.get("managedFields") or [] if e.get("subresource") != "status"])
            meta.pop("resourceVersion")
            snap[key] = json.dumps(dict(o, metadata=meta, status=None), sort_keys=True)
        else:
            snap[key] = m["resourceVersion"]
    for n in h.kubectl("get", "nodes", "-o", "json")["items"]:
        snap[("Node", "", n["metadata"]["name"])] = json.dumps(
            [n["metadata"].get("labels"), n["metadata"].get("annotations"), n["spec"].get("taints"),
             n["spec"].get("unschedulable")], sort_keys=True)
    return snap


def settled_snapshot(timeout=60):
    """A snapshot that holds still for 3 s (quota status and the PV binder catch up after a change)."""
    last = [snapshot()]

    def still():
        time.sleep(3)
        now = snapshot()
        same = now == last[0]
        last[0] = now
        return now if same else None
    return h.wait_for(still, timeout, "the cluster to settle", interval=0)


def node_state(name):
    n = h.kubectl("get", "node", name, "-o", "json")
    return n["metadata"].get("labels") or {}, n["metadata"].get("annotations") or {}, n["spec"].get("taints") or [], \
        bool(n["spec"].get("unschedulable"))
