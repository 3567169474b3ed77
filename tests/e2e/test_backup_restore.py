"""gpuctl backup / restore (issue 17) against the real control plane, on a private cluster.

One flow, in stages that build on each other (a stage whose predecessor failed is skipped):

1. a realistic state (node labels, taints, cordons with their records, three team namespaces with
   GPU quotas and LimitRanges, static PVs with PVCs the PV binder bound to them, GPU Jobs, a device
   plugin DaemonSet with the ConfigMap it mounts, a Secret, a non-GPU Job), then `backup -f`: the
   archive (0600, manifest first, checksums, stripped objects, no Secret), `backup inspect`,
   `--include-secrets`, `backup -f -`, and a viewer that cannot list every kind (exit 1, nothing
   written; `--allow-partial` names the gaps);
2. the cluster damaged as an operator or a bad script damages it; refused archives (truncated, a
   byte changed, a newer format, another cluster's) exit 2 and send nothing; `restore --dry-run`
   (client and server) shows exactly the damage and writes nothing;
3. `restore` repairs everything but a quota another manager changed (a conflict naming it, exit 1),
   `--force-conflicts` takes that over, a second restore is all unchanged, `--verify` passes (the
   Released PVs bound again to their recreated PVCs), node state only ever added;
4. node state from a `kubectl get nodes -o yaml` export (and as multi-document YAML); scoping with
   --only, -n, -l, --nodes;
5. the API server crashes in the middle of a restore; the re-run completes, nothing duplicated.

Backup and restore are cluster-wide and stage 5 kills the API server, so the suite runs on its
own cluster (harness.private_cluster), never on the shared one. Node names: br-."""
import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

import harness as h
import faults_common as f

FLEET = (h.HERE / "fleets" / "backup.yaml").read_text()
_stop = None


def setUpModule():
    global _stop
    _stop = h.private_cluster("backup", FLEET)


def tearDownModule():
    if _stop:
        _stop()


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


# -- archives --------------------------------------------------------------------------------------

def read_members(data):
    """[(TarInfo, bytes or None)] of a gzip tar, in archive order."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        for m in t.getmembers():
            out.append((m, t.extractfile(m).read() if m.isfile() else None))
    return out


def write_members(path, members):
    """A gzip tar of `members` in that order, each header as it was but for the size (what a
    careful tamperer makes: a valid archive whose content no longer matches its manifest). Plain
    ustar, as gpuctl writes: its reader refuses pax and GNU extension headers, and a refusal for
    the format would let a tampering test pass for the wrong reason."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT) as t:
        for info, data in members:
            info = _copy_info(info)
            if data is None:
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    Path(path).write_bytes(buf.getvalue())
    os.chmod(path, 0o600)
    return Path(path)


def _copy_info(info):
    c = tarfile.TarInfo(info.name)
    for a in ("size", "mode", "mtime", "type", "linkname", "uid", "gid", "uname", "gname"):
        setattr(c, a, getattr(info, a))
    return c


def rewrite_member(src, dst, name, edit):
    """A copy of archive `src` with member `name`'s bytes replaced by edit(bytes), repacked."""
    members = read_members(Path(src).read_bytes())
    found = False
    out = []
    for info, data in members:
        if info.name == name:
            new = edit(data)
            if new == data:
                raise h.HarnessError("edit of %s changed nothing" % name)
            data, found = new, True
        out.append((info, data))
    if not found:
        raise h.HarnessError("no member %s in %s" % (name, src))
    return write_members(dst, out)


def replace_once(old, new):
    def edit(data):
        if data.count(old) < 1:
            raise h.HarnessError("%r not in the member" % old)
        return data.replace(old, new, 1)
    return edit


def bump_digit_after(key):
    """Changes one byte: the last digit on the first line holding `key` (a quota's value)."""
    def edit(data):
        lines = data.split(b"\n")
        for i, line in enumerate(lines):
            if key in line:
                m = list(re.finditer(rb"\d", line))
                if not m:
                    continue
                j = m[-1].start()
                lines[i] = line[:j] + bytes([ord("0") + (int(line[j:j + 1]) + 1) % 10]) + line[j + 1:]
                return b"\n".join(lines)
        raise h.HarnessError("no line with %r and a digit" % key)
    return edit


def truncated(src, dst, keep=0.6):
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[:int(len(data) * keep)])
    return Path(dst)


def flipped_byte(src, dst):
    """One byte of the compressed stream changed, in the middle of the deflate data."""
    data = bytearray(Path(src).read_bytes())
    i = len(data) // 2
    data[i] ^= 0x5A
    Path(dst).write_bytes(bytes(data))
    return Path(dst)


def archive_paths(manifest):
    return {fl["path"]: k["resource"] for k in manifest["kinds"] for fl in k["files"]}


def key_of(path):
    """(kind, namespace, name) of an archive path."""
    parts = path[:-len(".yaml")].split("/")
    kind = RESOURCES[parts[0]][0]
    return (kind, "", parts[1]) if len(parts) == 2 else (kind, parts[1], parts[2])


# -- running gpuctl --------------------------------------------------------------------------------

def gpuctl_bytes(*args, input=None, context=None, timeout=180):
    """gpuctl with binary stdin/stdout (backup -f -, restore -); returns (rc, stdout bytes, stderr text)."""
    i = h.info()
    env = dict(os.environ, KUBECONFIG=i["kubeconfigs"][context] if context else i["kubeconfig"])
    p = subprocess.run([h.gpuctl_bin(), *map(str, args)], input=input, env=env, timeout=timeout,
                       stdin=None if input is not None else subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def report_json(test, r):
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        test.fail("not a JSON report (exit %d):\nstdout: %s\nstderr: %s" % (r.rc, r.stdout[:3000], r.stderr[-3000:]))
    test.assertEqual(doc.get("apiVersion"), "gpuctl.io/v1alpha1", doc)
    return doc


def items_of(test, report):
    """{(kind, namespace, name): item}; no object twice."""
    out = {}
    for it in report["items"]:
        k = (it["kind"], it.get("namespace") or "", it["name"])
        test.assertNotIn(k, out, "object reported twice: %s" % (k,))
        out[k] = it
    return out


def fields(item):
    return {c["field"]: c for c in item.get("changes") or []}


class BackupRestoreTest(h.TestCase):
    """The stages share the cluster and the archive; each needs the one before it to have passed."""

    passed = set()
    tmp = None
    archive = None        # the backup of the built state
    manifest = None       # its manifest, as `backup -o json` printed it
    expected = None       # damage(): the plan restore must show

    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="gpuctl-br-"))
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        build_state()

    def need(self, stage):
        if stage not in self.passed:
            self.skipTest("needs %s, which did not pass" % stage)

    def done(self, stage):
        type(self).passed.add(stage)

    def restore(self, *args):
        return h.gpuctl("restore", *args, timeout=300)

    # -- 1 -------------------------------------------------------------------------------------
    def test_1_backup_archive(self):
        path = self.tmp / "cluster.tgz"
        r = h.gpuctl("backup", "-f", path, "-o", "json")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        manifest = report_json(self, r)
        self.assertEqual(stat.S_IMODE(path.stat().st_mode), 0o600, "the archive holds cluster state: mode 0600")

        # The manifest: what, from where, with which checksums.
        i = h.info()
        self.assertEqual(manifest["kind"], "BackupManifest")
        self.assertEqual(manifest["formatVersion"], 1)
        self.assertEqual(manifest["cluster"]["server"], i["api_server"])
        self.assertEqual(manifest["cluster"]["context"], i["current_context"])
        self.assertTrue(str(manifest["cluster"]["version"]).startswith(i["versions"]["kubernetes"][:5]),
                        manifest["cluster"])
        self.assertTrue(manifest["createdAt"] and manifest["gpuctlVersion"], manifest)
        self.assertEqual(manifest.get("gaps") or [], [])
        # Optional kinds (Kueue, the GPU Operator's ClusterPolicy...) may be listed as not served;
        # every kind of the contract is served here.
        self.assertEqual(set(manifest.get("notServed") or []) & set(RESOURCES), set())
        inspect = h.gpuctl("backup", "inspect", path, "-o", "json")
        self.assertEqual(inspect.rc, 0, inspect.stderr)
        self.assertEqual(report_json(self, inspect), manifest, "backup -o json and backup inspect print the same manifest")

        kinds = {k["resource"]: k for k in manifest["kinds"]}
        for res, k in kinds.items():
            if res in RESOURCES:
                self.assertEqual((k["kind"], k["apiVersion"]), RESOURCES[res], res)
            self.assertEqual(k["count"], len(k["files"]), res)
        names = {res: {fl["path"] for fl in k["files"]} for res, k in kinds.items()}

        def files(res):
            return names.get(res, set())
        # Exactly what was created, where the kind is ours alone.
        self.assertEqual(files("resourcequotas"), {"resourcequotas/%s/%s.yaml" % (ns, QUOTA) for ns in TEAMS})
        self.assertEqual(files("limitranges"), {"limitranges/%s/%s.yaml" % (ns, LIMITS) for ns in TEAMS})
        self.assertEqual(files("persistentvolumes"), {"persistentvolumes/%s.yaml" % t["pv"] for t in TEAMS.values()})
        self.assertEqual(files("persistentvolumeclaims"), {"persistentvolumeclaims/%s/%s.yaml" % (ns, PVC) for ns in TEAMS})
        self.assertEqual(files("jobs.batch"), {"jobs.batch/%s/%s.yaml" % (ns, n) for ns, n, _, _ in GPU_JOBS},
                         "GPU Jobs only (no --all-jobs)")
        self.assertEqual(files("configmaps"), {"configmaps/%s/%s.yaml" % (PLUGIN_NS, PLUGIN_CONFIG_MAP)},
                         "only the ConfigMap the device plugin mounts; never kube-root-ca.crt")
        self.assertEqual(files("daemonsets.apps"), {"daemonsets.apps/%s/nvdp-nvidia-device-plugin.yaml" % PLUGIN_NS})
        self.assertEqual(files("secrets"), set(), "no Secret without --include-secrets")
        # Cluster-wide kinds the cluster also has objects of: ours among them, nothing invented.
        for res, ours in (("nodes", {"nodes/%s.yaml" % n for n in POOLS}),
                          ("namespaces", {"namespaces/%s.yaml" % ns for ns in list(TEAMS) + [PLUGIN_NS]}),
                          ("storageclasses.storage.k8s.io", {"storageclasses.storage.k8s.io/%s.yaml" % STORAGE_CLASS}),
                          ("priorityclasses.scheduling.k8s.io", {"priorityclasses.scheduling.k8s.io/%s.yaml" % PRIORITY_CLASS}),
                          ("runtimeclasses.node.k8s.io", {"runtimeclasses.node.k8s.io/%s.yaml" % RUNTIME_CLASS}),
                          ("deviceclasses.resource.k8s.io", {"deviceclasses.resource.k8s.io/%s.yaml" % DEVICE_CLASS})):
            self.assertLessEqual(ours, files(res), res)
            live = {"%s/%s.yaml" % (res, o["metadata"]["name"]) for o in h.kubectl("get", res, "-o", "json")["items"]}
            self.assertLessEqual(files(res), live, res)

        # The archive itself: manifest.yaml first, one file per object, checksums that match.
        data = path.read_bytes()
        members = read_members(data)
        self.assertEqual(members[0][0].name, "manifest.yaml")
        self.assertEqual(yaml.safe_load(members[0][1])["kind"], "BackupManifest")
        content = {m.name: d for m, d in members[1:] if d is not None}
        want = archive_paths(manifest)
        self.assertEqual(set(content), set(want))
        sums = {fl["path"]: fl["sha256"] for k in manifest["kinds"] for fl in k["files"]}
        for p, d in content.items():
            self.assertEqual(hashlib.sha256(d).hexdigest(), sums[p], p)
            obj = yaml.safe_load(d)
            kind, ns, name = key_of(p)
            self.assertEqual((obj["kind"], obj["apiVersion"]), RESOURCES[want[p]], p)
            self.assertEqual((obj["metadata"].get("namespace") or "", obj["metadata"]["name"]), (ns, name), p)
            self.assertNotIn("status", obj, p)
            for key in STRIPPED_META:
                self.assertNotIn(key, obj["metadata"], p)
            if kind == "Node":
                self.assertLessEqual(set(obj["metadata"]), {"name", "labels", "annotations"}, p)
                self.assertLessEqual(set(obj.get("spec") or {}), {"taints", "unschedulable"}, p)
        # Node state as it was built.
        for node, pool in POOLS.items():
            n = yaml.safe_load(content["nodes/%s.yaml" % node])
            self.assertEqual(n["metadata"]["labels"][POOL], pool)
            if node in REASONS:
                self.assertTrue(n["spec"]["unschedulable"], node)
                self.assertEqual(n["metadata"]["annotations"][CORDON_REASON], REASONS[node])
        a10g1 = yaml.safe_load(content["nodes/br-a10g-1.yaml"])
        self.assertIn({"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"},
                      [{k: t.get(k) for k in ("key", "value", "effect")} for t in a10g1["spec"]["taints"]])
        self.assertEqual(a10g1["metadata"]["annotations"][RACK], "r12-u07")
        # No secret value anywhere, in any encoding, in any member (the manifest included).
        raw = gzip.decompress(data)
        for needle in (SECRET_VALUE.encode(), base64.b64encode(SECRET_VALUE.encode())):
            self.assertNotIn(needle, raw)
        self.assertFalse(any(m.name.startswith("secrets/") for m, _ in members))

        # --include-secrets: the Secret is there, and the command says so on stderr.
        spath = self.tmp / "with-secrets.tgz"
        s = h.gpuctl("backup", "-f", spath, "--include-secrets", "-o", "json")
        self.assertEqual(s.rc, 0, s.stderr)
        self.assertRegex(s.stderr.lower(), r"secret", "a warning that the archive holds secrets")
        self.assertEqual(stat.S_IMODE(spath.stat().st_mode), 0o600)
        smembers = {m.name: d for m, d in read_members(spath.read_bytes())}
        sfile = "secrets/%s/%s.yaml" % (SECRET_NS, SECRET_NAME)
        self.assertIn(sfile, smembers)
        sec = yaml.safe_load(smembers[sfile])
        self.assertEqual(base64.b64decode(sec["data"]["token"]).decode(), SECRET_VALUE)
        self.assertIn(sfile, archive_paths(report_json(self, s)))

        # backup -f -: the same archive on stdout (nothing else there), manifest first.
        rc, out, err = gpuctl_bytes("backup", "-f", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[:2], b"\x1f\x8b", "gzip on stdout")
        streamed = read_members(out)
        self.assertEqual(streamed[0][0].name, "manifest.yaml")
        self.assertEqual({m.name for m, d in streamed if d is not None} - {"manifest.yaml"}, set(want))

        # A user who may not list every kind: refused with nothing written, unless --allow-partial.
        vpath = self.tmp / "viewer.tgz"
        v = h.gpuctl("backup", "-f", vpath, context="viewer")
        self.assertEqual(v.rc, 1, v.stdout + v.stderr)
        self.assertRegex(v.stderr, r"persistentvolume|storageclasses|priorityclasses|runtimeclasses|deviceclasses",
                         "the error names a kind the viewer may not list")
        self.assertFalse(vpath.exists(), "nothing written when a kind could not be listed")
        v = h.gpuctl("backup", "-f", vpath, "--allow-partial", "-o", "json", context="viewer")
        self.assertEqual(v.rc, 0, v.stderr)
        vm = report_json(self, v)
        gaps = {g["resource"] for g in vm["gaps"]}
        self.assertLessEqual({"persistentvolumes", "persistentvolumeclaims", "storageclasses.storage.k8s.io",
                              "priorityclasses.scheduling.k8s.io"}, gaps, vm["gaps"])
        self.assertTrue(all(g.get("reason") for g in vm["gaps"]))
        self.assertEqual(gaps & {k["resource"] for k in vm["kinds"] if k["count"]}, set())
        self.assertIn("nodes", {k["resource"] for k in vm["kinds"]})
        self.assertEqual(stat.S_IMODE(vpath.stat().st_mode), 0o600)

        type(self).archive, type(self).manifest = path, manifest
        self.done("backup")

    # -- 2 -------------------------------------------------------------------------------------
    def test_2_damage_refusals_and_dry_run(self):
        self.need("backup")
        type(self).expected = damage()
        before = settled_snapshot()
        arch = self.archive

        # Refused archives: exit 2, one error, not a single write sent.
        bad = {
            "truncated": truncated(arch, self.tmp / "truncated.tgz"),
            "a byte flipped in the compressed stream": flipped_byte(arch, self.tmp / "flipped.tgz"),
            "a quota's value changed, archive repacked": rewrite_member(
                arch, self.tmp / "edited.tgz", "resourcequotas/br-team-c/%s.yaml" % QUOTA,
                bump_digit_after(b"requests.nvidia.com/gpu")),
            "a newer format version": rewrite_member(arch, self.tmp / "future.tgz", "manifest.yaml",
                                                     lambda d: re.sub(rb"(formatVersion:\s*)1\b", rb"\g<1>99", d)),
        }
        other = rewrite_member(arch, self.tmp / "other.tgz", "manifest.yaml",
                               replace_once(self.manifest["cluster"]["server"].encode(), b"https://gpu-prod.example.com:6443"))
        bad["another cluster's archive"] = other
        for why, p in bad.items():
            with self.subTest(why):
                r = self.restore(p, "-v", "1")
                self.assertEqual(r.rc, 2, "%s: %s%s" % (why, r.stdout, r.stderr))
                self.assertNotRegex(r.stderr, WRITE_LINE, why)
                f.one_line_error(self, r.stderr)
        r = self.restore(bad["a quota's value changed, archive repacked"])
        self.assertRegex(r.stderr.lower(), r"checksum|sha256|mismatch")
        r = self.restore(other)
        self.assertIn("gpu-prod.example.com", r.stderr, "the refusal names the archive's cluster")

        # Dry runs: exactly the damage, everything else unchanged, nothing written.
        for mode in ("client", "server"):
            with self.subTest(dry_run=mode):
                r = self.restore(arch, "--dry-run=" + mode, "-o", "json", "-v", "1")
                rep = report_json(self, r)
                self.assertEqual(rep["dryRun"], mode)
                self.assertNotRegex(r.stderr, r"(?m)^(POST|PUT|PATCH|DELETE) (?!.*dryRun=All)",
                                    "a dry run sends only dryRun=All requests")
                if mode == "client":
                    self.assertNotRegex(r.stderr, WRITE_LINE)
                self.check_damage_plan(rep, dry_run=mode)
                # The server knows the conflict (a client dry run may know it from managedFields):
                # exit 1 then, as for any conflict.
                conflicted = any(it["result"] in ("conflict", "failed") for it in rep["items"])
                self.assertEqual(r.rc, 1 if conflicted else 0, r.stderr)
        self.assertEqual(settled_snapshot(), before, "a dry run writes nothing")
        # Another cluster's archive, when the admin says so: the same plan.
        r = self.restore(other, "--to-other-cluster", "--dry-run", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.check_damage_plan(report_json(self, r), dry_run="client")
        self.assertEqual(settled_snapshot(), before)
        self.done("damage")

    def check_damage_plan(self, rep, dry_run):
        items = items_of(self, rep)
        self.assertEqual(set(items), {key_of(p) for p in archive_paths(self.manifest)}, "one item per archived object")
        for key, it in items.items():
            want = self.expected.get(key, "unchanged")
            if key in REBIND_PVS and it["action"] == "update":
                self.assertTrue(all(c.startswith("spec.claimRef") for c in fields(it)), it)
                continue
            self.assertEqual(it["action"], want, "%s: %s" % (key, it))
            result = {"create": "planned", "update": "planned", "unchanged": "unchanged", "skip": "skipped"}[want]
            if key == ("ResourceQuota", "br-team-b", QUOTA) and dry_run == "server":
                result = "conflict"
            if dry_run == "client" and key == ("ResourceQuota", "br-team-b", QUOTA):
                self.assertIn(it["result"], ("planned", "conflict"), it)
            else:
                self.assertEqual(it["result"], result, "%s: %s" % (key, it))
        gone = items[("Node", "", "br-gone")]
        self.assertRegex(gone["reason"].lower(), r"no longer exists|not found|does not exist")
        self.assertEqual(rep["missingNodes"], ["br-gone"])
        # The right fields, from what is there now to what the archive says.
        a = fields(items[("Node", "", "br-a10g-1")])
        self.assertEqual((a["metadata.labels[%s]" % POOL]["from"], a["metadata.labels[%s]" % POOL]["to"]), (None, "training"))
        self.assertEqual(a["metadata.annotations[%s]" % RACK]["to"], "r12-u07")
        self.assertTrue(any(k.startswith("spec.taints") and GPU_TAINT_KEY in json.dumps(c) for k, c in a.items()), a)
        self.assertLessEqual(set(a), {"metadata.labels[%s]" % POOL, "metadata.annotations[%s]" % RACK}
                             | {k for k in a if k.startswith("spec.taints")})
        t0 = fields(items[("Node", "", "br-t4-0")])
        self.assertIs(t0["spec.unschedulable"]["to"], True)
        self.assertEqual(t0["metadata.annotations[%s]" % CORDON_REASON]["to"], REASONS["br-t4-0"])
        for k, c in t0.items():   # the cordon, its record, and the taint the node controller keeps with it
            self.assertTrue(k == "spec.unschedulable" or k.startswith("metadata.annotations[gpuctl.io/cordon")
                            or (k.startswith("spec.taints") and "node.kubernetes.io/unschedulable" in json.dumps(c)), c)
        t1 = fields(items[("Node", "", "br-t4-1")])
        self.assertEqual(set(t1), {"metadata.labels[%s]" % POOL})
        self.assertEqual(t1["metadata.labels[%s]" % POOL]["to"], "inference")
        q = fields(items[("ResourceQuota", "br-team-b", QUOTA)])
        self.assertEqual(len(q), 1, q)
        (field, change), = q.items()
        self.assertTrue(field.startswith("spec.hard"), field)
        self.assertEqual((str(change["from"]), str(change["to"])), ("6", "4"))
        if dry_run == "server":
            self.assertEqual([c["manager"] for c in items[("ResourceQuota", "br-team-b", QUOTA)]["conflicts"]], [TUNER])
        s = rep["summary"]
        want = {a: sum(1 for v in self.expected.values() if v == a) for a in ("create", "skip")}
        self.assertEqual((s["create"], s["skip"]), (want["create"], want["skip"]), s)
        self.assertEqual(s["failed"], 0, s)

    # -- 3 -------------------------------------------------------------------------------------
    def test_3_restore_repairs(self):
        self.need("damage")
        arch = self.archive
        r = self.restore(arch, "-o", "json")
        rep = report_json(self, r)
        self.assertEqual(r.rc, 1, "the quota another manager changed is a conflict: " + r.stderr)
        items = items_of(self, rep)
        q = items[("ResourceQuota", "br-team-b", QUOTA)]
        self.assertEqual(q["result"], "conflict", q)
        self.assertEqual([c["manager"] for c in q["conflicts"]], [TUNER], q)
        self.assertTrue(all(c["field"].lstrip(".").startswith("spec.hard") for c in q["conflicts"]), q)
        for key, it in items.items():
            if key == ("ResourceQuota", "br-team-b", QUOTA):
                continue
            self.assertEqual(it["result"], {"create": "applied", "update": "applied", "unchanged": "unchanged",
                                            "skip": "skipped"}[it["action"]], "%s: %s" % (key, it))
            self.assertEqual(it["action"], self.expected.get(key, it["action"] if key in REBIND_PVS else "unchanged"), key)
        self.assertEqual((rep["summary"]["conflict"], rep["summary"]["failed"]), (1, 0), rep["summary"])
        self.assertEqual(h.kubectl("get", "resourcequota", QUOTA, "-n", "br-team-b", "-o", "json")["spec"]["hard"],
                         {"requests.nvidia.com/gpu": "6"}, "no force: the other manager's value stays")

        # Everything else is back.
        self.check_repaired(except_quota_b=True)

        # --force-conflicts takes the field over.
        r = self.restore(arch, "--force-conflicts", "-o", "json")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertEqual((items[("ResourceQuota", "br-team-b", QUOTA)]["action"],
                          items[("ResourceQuota", "br-team-b", QUOTA)]["result"]), ("update", "applied"))
        quota = h.kubectl("get", "resourcequota", QUOTA, "-n", "br-team-b", "-o", "json", "--show-managed-fields")
        self.assertEqual(quota["spec"]["hard"], {"requests.nvidia.com/gpu": "4"})
        owners = [m["manager"] for m in quota["metadata"]["managedFields"]
                  if "f:requests.nvidia.com/gpu" in json.dumps(m.get("fieldsV1", {}).get("f:spec", {}))]
        self.assertEqual(owners, ["gpuctl"], "gpuctl owns the field now, the tuner no longer")
        applied = [m for m in quota["metadata"]["managedFields"] if m["manager"] == "gpuctl"]
        self.assertEqual([m["operation"] for m in applied], ["Apply"], "server-side apply, field manager gpuctl")

        # A second restore: nothing left to do (text output: one line per object, then a summary).
        r = self.restore(arch)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        lines = [l for l in r.stdout.splitlines() if l.strip()]
        self.assertEqual(len(lines), len(archive_paths(self.manifest)) + 1, r.stdout)
        for line in lines[:-1]:
            self.assertRegex(line, r"(?i)^(unchanged|skip(ped)?)\s", line)
        self.assertRegex(lines[-1], r"\b0\b", "summary line")
        before = settled_snapshot()
        r = self.restore(arch, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        for key, it in items_of(self, report_json(self, r)).items():
            self.assertEqual(it["action"], "skip" if key == ("Node", "", "br-gone") else "unchanged", "%s: %s" % (key, it))
        self.assertEqual(settled_snapshot(), before, "an all-unchanged restore writes nothing")
        # The archive on stdin (restore -), as `backup -f - | ssh admin-host gpuctl restore -` uses it.
        rc, out, err = gpuctl_bytes("restore", "-", "--dry-run", "-o", "json", input=arch.read_bytes())
        self.assertEqual(rc, 0, err)
        self.assertEqual({it["action"] for it in json.loads(out)["items"]}, {"unchanged", "skip"})

        # --verify: claims bound, quotas enforced, node state and Jobs there.
        r = self.restore(arch, "--verify", "-o", "json")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        ver = report_json(self, r)["verify"]
        self.assertTrue(ver["passed"], ver)
        self.assertTrue(ver["checks"] and all(c["passed"] for c in ver["checks"]), ver)
        pvc_checks = {c["object"] for c in ver["checks"] if c["check"] == "pvc-bound"}
        self.assertEqual(pvc_checks, {"PersistentVolumeClaim %s/%s" % (ns, PVC) for ns in TEAMS})
        checked = " ".join(c["object"] for c in ver["checks"])
        for needle in ("ResourceQuota br-team-c/%s" % QUOTA, "br-a10g-1", "Job br-team-a/train-a"):
            self.assertIn(needle, checked)
        # The quota restore created is enforced: team-c runs 1 GPU of 2, a 2-GPU pod is refused.
        r = h.create(h.gpu_pod("over-quota", "br-team-c", node=TRAIN_NODE, gpus=2), check=False)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("exceeded quota: %s" % QUOTA, r.stderr)
        self.done("restore")

    def check_repaired(self, except_quota_b=False):
        for node, pool in POOLS.items():
            if node == "br-gone":
                continue
            labels, ann, taints, cordoned = node_state(node)
            self.assertEqual(labels.get(POOL), pool, node)
            if node in REASONS:
                self.assertTrue(cordoned, node)
                self.assertEqual(ann.get(CORDON_REASON), REASONS[node], node)
                self.assertTrue(ann.get(CORDONED_BY) and ann.get(CORDONED_AT), ann)
            keys = [(t["key"], t["effect"]) for t in taints]
            self.assertEqual(len(keys), len(set(keys)), "%s: a taint twice: %s" % (node, taints))
            if node.startswith("br-a10g-"):
                self.assertIn((GPU_TAINT_KEY, "NoSchedule"), keys, node)
            if node.startswith("br-t4-"):
                self.assertIn(("dedicated", "NoSchedule"), keys, node)
        self.assertEqual(node_state("br-a10g-1")[1].get(RACK), "r12-u07")
        self.assertFalse(node_state("br-t4-1")[3], "restore cordons only what the archive had cordoned")
        # What was added after the backup is still there: restore only ever adds node state.
        labels, ann, taints, cordoned = node_state("br-cpu-0")
        self.assertEqual(labels.get("br.gpuctl.dev/added"), "after-backup")
        self.assertIn("br.gpuctl.dev/added", [t["key"] for t in taints])
        self.assertTrue(cordoned)
        self.assertEqual(ann.get(CORDON_REASON), "cordoned after the backup")
        with self.assertRaises(h.HarnessError):
            h.kubectl("get", "node", "br-gone")
        # Quotas, limits, classes.
        for ns, spec in TEAMS.items():
            hard = h.kubectl("get", "resourcequota", QUOTA, "-n", ns, "-o", "json")["spec"]["hard"]
            if not (except_quota_b and ns == "br-team-b"):
                self.assertEqual(hard, {"requests.nvidia.com/gpu": str(spec["gpus"])}, ns)
            h.kubectl("get", "limitrange", LIMITS, "-n", ns)
        self.assertEqual(h.kubectl("get", "priorityclass", PRIORITY_CLASS, "-o", "json")["value"], 100000)
        # Jobs: one of each, running again; the non-GPU Job untouched, never duplicated.
        jobs = h.kubectl("get", "jobs", "-A", "-o", "json")["items"]
        names = sorted((j["metadata"]["namespace"], j["metadata"]["name"]) for j in jobs)
        self.assertEqual(names, sorted([(ns, n) for ns, n, _, _ in GPU_JOBS] + [CPU_JOB]))
        wait_jobs_active([(ns, n) for ns, n, _, _ in GPU_JOBS])
        # The claims bound again, the Released PVs to the recreated claims (new uids).
        wait_pvcs_bound(TEAMS)

    # -- 4 -------------------------------------------------------------------------------------
    def test_4_node_export_and_scoping(self):
        self.need("restore")
        # Node state from a kubectl export, after a label was removed.
        export = self.tmp / "nodes.yaml"
        export.write_text(h.kubectl("get", "nodes", "-o", "yaml"))
        h.kubectl("label", "node", "br-t4-1", POOL + "-")
        r = self.restore(export, "-o", "json")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertEqual({k[0] for k in items}, {"Node"})
        self.assertEqual(len(items), len(yaml.safe_load(export.read_text())["items"]))
        for key, it in items.items():
            self.assertEqual(it["action"], "update" if key[2] == "br-t4-1" else "unchanged", it)
        self.assertEqual(set(fields(items[("Node", "", "br-t4-1")])), {"metadata.labels[%s]" % POOL})
        self.assertEqual(node_state("br-t4-1")[0].get(POOL), "inference")
        # The same nodes as multi-document YAML: read the same, nothing to do.
        multi = self.tmp / "nodes-multi.yaml"
        multi.write_text(yaml.safe_dump_all(yaml.safe_load(export.read_text())["items"]))
        r = self.restore(multi, "--dry-run", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual({it["action"] for it in report_json(self, r)["items"]}, {"unchanged"})

        # Scoping: a quota, a labelled Job, an unlabelled Job and a node label lost.
        arch = self.archive
        h.kubectl("delete", "resourcequota", QUOTA, "-n", "br-team-a")
        h.kubectl("delete", "job", "train-b", "-n", "br-team-b")
        h.kubectl("delete", "job", "train-c", "-n", "br-team-c")
        h.kubectl("label", "node", "br-t4-1", POOL + "-")
        wait_job_pods_gone("br-team-b", "train-b")

        r = self.restore(arch, "--only", "ResourceQuota", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertEqual({k[0] for k in items}, {"ResourceQuota"})
        self.assertEqual({k for k, it in items.items() if it["action"] == "create"}, {("ResourceQuota", "br-team-a", QUOTA)})
        h.kubectl("get", "resourcequota", QUOTA, "-n", "br-team-a")
        self.assertEqual(h.kubectl("get", "job", "train-b", "-n", "br-team-b", check=False).rc, 1, "--only left Jobs alone")
        self.assertNotIn(POOL, node_state("br-t4-1")[0])

        r = self.restore(arch, "-l", PART_OF + "=br-training", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertEqual(set(items), {("Job", ns, n) for ns, n, _, lab in GPU_JOBS if lab})
        self.assertEqual(items[("Job", "br-team-b", "train-b")]["action"], "create")
        self.assertEqual(h.kubectl("get", "job", "train-c", "-n", "br-team-c", check=False).rc, 1, "-l: train-c unlabelled")

        r = self.restore(arch, "-n", "br-team-c", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertTrue(items)
        # The namespace itself and the volume its claim binds may come with it.
        outside = {k for k in items if k[1] != "br-team-c"} - {("Namespace", "", "br-team-c"),
                                                               ("PersistentVolume", "", TEAMS["br-team-c"]["pv"])}
        self.assertEqual(outside, set(), "-n: that namespace's objects only")
        self.assertEqual(items[("Job", "br-team-c", "train-c")]["action"], "create")
        self.assertNotIn(POOL, node_state("br-t4-1")[0])

        r = self.restore(arch, "--nodes", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertEqual({k[0] for k in items}, {"Node"})
        self.assertEqual({k for k, it in items.items() if it["action"] == "update"}, {("Node", "", "br-t4-1")})
        self.assertEqual(node_state("br-t4-1")[0].get(POOL), "inference")

        r = self.restore(arch, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual({it["action"] for it in report_json(self, r)["items"]}, {"unchanged", "skip"})
        self.done("scoping")

    # -- 5 -------------------------------------------------------------------------------------
    def test_5_apiserver_crash_during_restore(self):
        self.need("restore")
        arch = self.archive
        for ns in TEAMS:
            h.kubectl("delete", "resourcequota", QUOTA, "-n", ns)
        for ns, n, _, _ in GPU_JOBS:
            h.kubectl("delete", "job", n, "-n", ns)
        for node in ("br-a10g-0", "br-a10g-1", "br-t4-0", "br-t4-1"):
            h.kubectl("label", "node", node, POOL + "-")
        for ns, n, _, _ in GPU_JOBS:
            wait_job_pods_gone(ns, n)

        run = f.Background("restore", arch, "-o", "json", "-v", "1")
        self.addCleanup(run.kill)
        run.wait_line(r"^(POST|PATCH|PUT) \S+ 20[01] ", 120)
        # Held right after its first write (a restore is quick), then let go against a frozen API
        # server that is then killed and started again: the request in flight breaks, the next ones
        # are refused until the new server is up. So the crash lands in the middle, every time.
        run.proc.send_signal(signal.SIGSTOP)
        with run.cond:
            writes_before = len(WRITE_LINE.findall("".join(run.err)))
        c = h.cluster()
        c.pause_component("kube-apiserver")
        run.proc.send_signal(signal.SIGCONT)
        time.sleep(1)
        c.restart_apiserver(down_for=1.0, sig=signal.SIGKILL)
        first = run.finish(240)
        f.report("restore+restart", first_rc=first.rc, writes_before_crash=writes_before,
                 writes_in_all=len(WRITE_LINE.findall(first.stderr)), first_error=first.stderr.strip().splitlines()[-1:])
        self.assertIn(first.rc, (0, 1), first.stdout + first.stderr)
        self.assertNotIn("internal error", first.stderr)
        if first.rc == 1:
            try:   # objects that failed are named in the report, each with its error ...
                rep = json.loads(first.stdout)
            except ValueError:   # ... or gpuctl could not get that far: one error line
                f.one_line_error(self, first.stderr)
            else:
                failed = [it for it in rep["items"] if it["result"] == "failed"]
                self.assertTrue(failed and rep["summary"]["failed"] == len(failed), rep["summary"])
                self.assertTrue(all(it.get("error") for it in failed), failed)
        again = f.run_bounded("restore", arch, "-o", "json", bound=240)
        self.assertEqual(again.rc, 0, again.stdout + again.stderr)
        for key, it in items_of(self, report_json(self, again)).items():
            self.assertIn(it["result"], ("applied", "unchanged", "skipped"), "%s: %s" % (key, it))
        third = f.run_bounded("restore", arch, "-o", "json", bound=240)
        self.assertEqual(third.rc, 0, third.stderr)
        self.assertEqual({it["action"] for it in report_json(self, third)["items"]}, {"unchanged", "skip"})
        self.check_repaired()
        # No duplicates: one Job of each name with one pod each, no taint or label twice.
        for ns, n, _, _ in GPU_JOBS:
            pods = [p for p in h.kubectl("get", "pods", "-n", ns, "-l", "job-name=" + n, "-o", "json")["items"]
                    if not p["metadata"].get("deletionTimestamp")]
            self.assertEqual(len(pods), 1, "%s/%s: %s" % (ns, n, [p["metadata"]["name"] for p in pods]))
        self.done("restart")


if __name__ == "__main__":
    h.main()
