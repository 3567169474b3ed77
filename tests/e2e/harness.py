"""Helpers for gpuctl's end-to-end tests (stdlib unittest, run by /usr/bin/python3).

The cluster is started by ctest's fixture test e2e.cluster.up (tests/cluster/cluster.py up); the tests
find it through environment variables that tests/e2e/CMakeLists.txt sets:

    GPUCTL_E2E_STATE   the cluster's state directory (holds cluster.json)
    GPUCTL_BIN         the gpuctl executable
    GPUCTL_FIXTURES    the fixtures folder, tests/fixtures (cluster.json's fixtures_dir without it)

Typical use:

    import harness as h
    class T(h.TestCase):
        def test_x(self):
            h.apply_fleet(FLEET_YAML)                  # this suite's own nodes (distinct name prefix)
            ns = self.namespace()                      # deleted again when the test passes
            h.create(h.gpu_pod("p", ns, node="x-0", gpus=1))
            rc, out, err = h.gpuctl("nodes", *h.ssh_flags())
"""
import functools
import json
import mmap
import os
import resource
import shlex
import subprocess
import sys
import threading
import time
import unittest
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLUSTER_DIR = HERE.parent / "cluster"
sys.path.insert(0, str(CLUSTER_DIR))
import cluster as _cluster  # noqa: E402  (tests/cluster/cluster.py)
import sim_logs as _sim_logs  # noqa: E402  (tests/cluster/sim_logs.py)
import sim_dra  # noqa: E402  (tests/cluster/sim_dra.py: GPUs as DRA devices; re-exported for suites)
import sim_prometheus as _sim_prometheus  # noqa: E402  (tests/cluster/sim_prometheus.py)
import sim_objects  # noqa: E402  (tests/e2e/sim_objects.py)
from sim_objects import device_plugin_daemonset  # noqa: E402,F401  (re-exported for suites)

OUTCOME_LABEL = "sim.gpuctl.dev/outcome"
EXIT_CODE_ANNOTATION = "sim.gpuctl.dev/exit-code"
REASON_ANNOTATION = "sim.gpuctl.dev/reason"
MESSAGE_ANNOTATION = "sim.gpuctl.dev/message"
DELAY_ANNOTATION = "sim.gpuctl.dev/delay"
RESTARTS_ANNOTATION = "sim.gpuctl.dev/restarts"
CONTAINER_ANNOTATION = "sim.gpuctl.dev/container"
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


class HarnessError(AssertionError):
    pass


def state_dir():
    d = os.environ.get("GPUCTL_E2E_STATE")
    if not d:
        raise HarnessError("GPUCTL_E2E_STATE is not set: run the e2e tests through ctest (-L e2e), or start a "
                           "cluster with `tests/cluster/cluster.py up --state-dir DIR` and export GPUCTL_E2E_STATE=DIR")
    return Path(d)


def info():
    """cluster.json, read afresh (apply_fleet, ssh_mode and cut change it)."""
    p = state_dir() / "cluster.json"
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise HarnessError("%s does not exist: is the cluster up? (ctest fixture e2e.cluster.up, or "
                           "`tests/cluster/cluster.py up --state-dir %s`)" % (p, state_dir()))


def cluster():
    return _cluster.Cluster(state_dir())


def fixtures_dir():
    return Path(os.environ.get("GPUCTL_FIXTURES") or info()["fixtures_dir"])


def gpuctl_bin():
    b = os.environ.get("GPUCTL_BIN")
    if not b:
        raise HarnessError("GPUCTL_BIN is not set (the gpuctl executable; ctest sets it)")
    if not os.access(b, os.X_OK):
        raise HarnessError("GPUCTL_BIN=%s is not an executable" % b)
    return b


@functools.lru_cache(maxsize=None)
def gpuctl_is_sanitized():
    """True for an AddressSanitizer build (the asan preset, scripts/test --asan)."""
    with open(gpuctl_bin(), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"__asan_init") != -1


def run_bounded(args, env, memory_bytes, timeout, input=None):
    """Runs gpuctl with at most `memory_bytes` of memory; returns (rc, stdout, stderr).

    A normal build gets an address-space limit (RLIMIT_AS). AddressSanitizer reserves terabytes
    of address space at start and cannot run under one, so a sanitized build is bounded by its
    resident memory instead (ASAN_OPTIONS hard_rss_limit_mb)."""
    preexec = None
    if gpuctl_is_sanitized():
        asan = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "hard_rss_limit_mb=%d" % (memory_bytes >> 20)) if x)
        env = dict(env, ASAN_OPTIONS=asan)
    else:
        def preexec():
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    p = subprocess.run([gpuctl_bin(), *map(str, args)], env=env, preexec_fn=preexec, input=input,
                       stdin=subprocess.DEVNULL if input is None else None,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class Result:
    def __init__(self, cmd, rc, stdout, stderr):
        self.cmd, self.rc, self.stdout, self.stderr = cmd, rc, stdout, stderr

    @property
    def json(self):
        return _parse_json(self.stdout)

    def __iter__(self):  # rc, out, err = result
        return iter((self.rc, self.stdout, self.stderr))

    def __repr__(self):
        return "Result(rc=%d, cmd=%s)" % (self.rc, " ".join(shlex.quote(c) for c in self.cmd))


def _run(cmd, env=None, input=None, timeout=120):
    try:
        p = subprocess.run(cmd, input=input, env=env, timeout=timeout, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired as e:
        raise HarnessError("timed out after %ss: %s\nstdout: %s\nstderr: %s" % (
            timeout, " ".join(shlex.quote(c) for c in cmd), e.stdout, e.stderr))
    return Result(cmd, p.returncode, p.stdout, p.stderr)


def _wants_json(args):
    a = list(args)
    for i, x in enumerate(a):
        if x in ("-ojson", "--output=json", "-o=json") or (x in ("-o", "--output") and i + 1 < len(a) and a[i + 1] == "json"):
            return True
    return False


def kubectl(*args, context="admin", input=None, check=True, timeout=120):
    """Runs the cluster's kubectl as `context` (admin, viewer, nobody, token, badtoken).

    check=True: returns stdout, parsed when the command asks for `-o json`; raises on failure.
    check=False: returns a Result (rc, stdout, stderr, .json), unpackable as rc, out, err."""
    i = info()
    if isinstance(input, (dict, list)):
        input = json.dumps(input)
    cmd = [i["kubectl"], "--kubeconfig", i["kubeconfig"], "--context", context, *map(str, args)]
    r = _run(cmd, input=input, timeout=timeout)
    if not check:
        return r
    if r.rc != 0:
        raise HarnessError("kubectl failed (exit %d): %s\nstderr: %s\nstdout: %s" % (
            r.rc, " ".join(shlex.quote(c) for c in cmd[3:]), r.stderr.strip(), r.stdout.strip()[:2000]))
    return _parse_json(r.stdout) if _wants_json(args) else r.stdout


def _parse_json(text):
    """One JSON document, or a list when kubectl printed several (create -f with a List)."""
    dec = json.JSONDecoder()
    docs, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        docs.append(obj)
    return docs[0] if len(docs) == 1 else docs


def gpuctl(*args, context=None, env=None, input=None, timeout=180):
    """Runs the real gpuctl with KUBECONFIG pointing at the cluster; returns a Result that unpacks
    as (rc, stdout, stderr).  context="viewer" etc. uses a kubeconfig holding only that context."""
    i = info()
    e = dict(os.environ)
    e["KUBECONFIG"] = i["kubeconfigs"][context] if context else i["kubeconfig"]
    e.update(env or {})
    return _run([gpuctl_bin(), *map(str, args)], env=e, input=input, timeout=timeout)


def gpuctl_at(kubeconfig, *args, env=None, input=None, timeout=180):
    """Runs the real gpuctl against any kubeconfig (a hostile server's, a broken one); needs no
    cluster. Returns a Result that unpacks as (rc, stdout, stderr)."""
    e = dict(os.environ)
    e["KUBECONFIG"] = str(kubeconfig)
    e.update(env or {})
    return _run([gpuctl_bin(), *map(str, args)], env=e, input=input, timeout=timeout)


def ssh_flags(minimal=False):
    """gpuctl's SSH flags for the simulated hosts.  minimal=True: only --ssh-config (the generated
    ssh_config sets user, port, identity, known_hosts and StrictHostKeyChecking yes)."""
    s = info()["ssh"]
    return ["--ssh-config", s["config_file"]] if minimal else list(s["gpuctl_flags"])


def ssh_command(node_or_ip, command, connect_timeout=5, extra=()):
    """argv of an OpenSSH client call to a simulated host (by node name or address)."""
    i = info()
    n = i["nodes"].get(node_or_ip)
    target = n["internal_ip"] if n else node_or_ip
    return ["ssh", "-F", i["ssh"]["config_file"], "-o", "ConnectTimeout=%d" % connect_timeout, *extra,
            target, command]


def ssh(node_or_ip, command, timeout=60, connect_timeout=5):
    return _run(ssh_command(node_or_ip, command, connect_timeout), timeout=timeout)


def apply_fleet(yaml_text, source="test fleet"):
    """Adds a fleet's nodes (idempotent for the same text); returns their cluster.json entries."""
    return cluster().apply_fleet_text(yaml_text, source=source)


def apply_fleet_file(name):
    """A fleet from tests/e2e/fleets/ (name with or without .yaml) or a path."""
    p = Path(name)
    if not p.is_file():
        p = HERE / "fleets" / (name if name.endswith(".yaml") else name + ".yaml")
    return cluster().apply_fleet_file(p)


def ssh_mode(node, mode, gpu_index=None):
    return cluster().set_ssh_mode(node, mode, gpu_index)


def ssh_host(node, clear=(), **settings):
    """Sets a simulated host's settings (nvlinks, gpuOverrides, kernelLog, ...: tests/cluster/README.md,
    "The fake nvidia-smi"); a value None or a key in `clear` removes one. The next ssh command sees
    them. Returns the node's state entry (its settings under ["ssh"]["settings"])."""
    return cluster().set_ssh_host(node, clear=clear, **settings)


def cut(node):
    return cluster().set_cut(node, True)


def uncut(node):
    return cluster().set_cut(node, False)


def node(name):
    n = info()["nodes"].get(name)
    if not n:
        raise HarnessError("no node %s in cluster.json (apply its fleet first)" % name)
    return n


def wait_for(predicate, timeout=60, what="condition", interval=0.5):
    """Polls predicate() until it returns a truthy value (returned).  Exceptions count as 'not yet'
    and the last one is reported on timeout."""
    deadline = time.time() + timeout
    last, err = None, None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - reported below
            err = e
        if time.time() >= deadline:
            raise HarnessError("timed out after %ss waiting for %s (last value: %r%s)" % (
                timeout, what, last, "; last error: %s" % err if err else ""))
        time.sleep(interval)


def unique_namespace(prefix="e2e"):
    """Creates a namespace with a unique name and waits for its default ServiceAccount."""
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:8])
    kubectl("create", "namespace", name)
    wait_for(lambda: kubectl("get", "serviceaccount", "default", "-n", name, check=False).rc == 0, 60,
             "the default ServiceAccount in namespace %s" % name)
    return name


def delete_namespace(name, wait=False):
    kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=%s" % ("true" if wait else "false"), check=False)


def create(obj, context="admin", check=True):
    """kubectl create -f - with a dict (or list of dicts); returns the created object(s) as JSON."""
    if isinstance(obj, list):
        obj = {"apiVersion": "v1", "kind": "List", "items": obj}
    return kubectl("create", "-f", "-", "-o", "json", input=obj, context=context, check=check)


def outcome(result="run", exit_code=None, reason=None, delay=None, restarts=None, message=None, container=None):
    """Labels and annotations that decide what a simulated pod does (see tests/cluster/README.md):
    run (Running until deleted; default for bare pods), succeed (exit 0; default for Job pods),
    fail (exit_code, default 1), crashloop (Running, CrashLoopBackOff after `restarts`, default 6),
    restarted (Running and Ready after `restarts`, default 1); exit_code, reason and message are
    the last termination's, container limits crashloop/restarted to one container."""
    labels = {OUTCOME_LABEL: result}
    ann = {}
    for key, value in ((EXIT_CODE_ANNOTATION, exit_code), (REASON_ANNOTATION, reason), (DELAY_ANNOTATION, delay),
                       (RESTARTS_ANNOTATION, restarts), (MESSAGE_ANNOTATION, message),
                       (CONTAINER_ANNOTATION, container)):
        if value is not None and value != "":
            ann[key] = str(value)
    return labels, ann


def pod_spec(node=None, gpus=1, tolerate_gpu_taint=True, resources=None, node_selector=None, restart="Never",
             tolerations=None, image="nvidia/cuda:12.4.1-base-ubuntu22.04", command=("sleep", "infinity")):
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    if resources:
        res = resources
    spec = {
        "restartPolicy": restart,
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "main", "image": image, "command": list(command), "resources": res}],
        "tolerations": list(tolerations or []) + ([GPU_TAINT] if tolerate_gpu_taint else []),
    }
    sel = dict(node_selector or {})
    if node:
        sel["kubernetes.io/hostname"] = node
    if sel:
        spec["nodeSelector"] = sel
    return spec


def gpu_pod(name, namespace, node=None, gpus=1, outcome_=None, labels=None, annotations=None, **kw):
    """A bare pod asking for `gpus` nvidia.com/gpu, pinned to `node` when given.  outcome_ is
    outcome(...)'s (labels, annotations)."""
    lab, ann = outcome_ or ({}, {})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {**lab, **(labels or {})},
                     "annotations": {**ann, **(annotations or {})}},
        "spec": pod_spec(node=node, gpus=gpus, **kw),
    }


def gpu_job(name, namespace, node=None, gpus=1, outcome_=None, completions=1, parallelism=1, backoff_limit=0,
            pod_failure_policy=None, labels=None, annotations=None, ttl=None, **kw):
    """A Job whose pods ask for `gpus` GPUs.  By default its pods succeed (kwok's pod-complete);
    pass outcome_=outcome("fail", exit_code=3) or outcome("run")."""
    lab, ann = outcome_ or ({}, {})
    spec = {
        "completions": completions, "parallelism": parallelism, "backoffLimit": backoff_limit,
        "template": {"metadata": {"labels": {**lab, **(labels or {})}, "annotations": {**ann, **(annotations or {})}},
                     "spec": pod_spec(node=node, gpus=gpus, **kw)},
    }
    if pod_failure_policy:
        spec["podFailurePolicy"] = pod_failure_policy
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def claim_template(name, namespace, device_class="gpu.nvidia.com", count=1, selectors=None):
    """A ResourceClaimTemplate asking for `count` devices of `device_class` (CEL `selectors`: strings)."""
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def claim_pod(name, namespace, template=None, claim=None, node=None, node_selector=None, **kw):
    """A bare pod whose container uses one ResourceClaim, `gpu`: made from ResourceClaimTemplate
    `template`, or the existing ResourceClaim `claim`. No nvidia.com/gpu request."""
    p = gpu_pod(name, namespace, node=node, gpus=0, node_selector=node_selector, **kw)
    ref = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    p["spec"]["resourceClaims"] = [{"name": "gpu", **ref}]
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return p


def pod_claims(name, namespace):
    """The ResourceClaims a pod uses (template-made, named in status.resourceClaimStatuses, and the
    scheduler's for extended resources, in status.extendedResourceClaimStatus)."""
    st = pod(name, namespace).get("status") or {}
    names = [c["resourceClaimName"] for c in st.get("resourceClaimStatuses") or [] if c.get("resourceClaimName")]
    ext = (st.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    names += [ext] if ext else []
    return [kubectl("get", "resourceclaim", n, "-n", namespace, "-o", "json") for n in names]


def dra_slice(node):
    """The node's ResourceSlice of driver gpu.nvidia.com (tests/cluster/sim_dra.py)."""
    return sim_dra.node_slice(cluster(), node)


def dra_publish(node, devices=None, generation=1, slice_count=1):
    """Publishes the node's slice afresh (devices: default what its host and fleet say)."""
    return sim_dra.publish(cluster(), node, devices, generation, slice_count)


def dra_taint(node, device, key=sim_dra.XID_TAINT, value="79", effect="NoSchedule"):
    """A device taint in the node's slice, as the driver's health check writes it (default: Xid 79)."""
    return sim_dra.set_device_taint(cluster(), node, device, key, value, effect)


def dra_untaint(node, device, key=None):
    return sim_dra.clear_device_taint(cluster(), node, device, key)


def dra_incomplete_pool(node):
    """The node's pool at generation N+1 with resourceSliceCount 2 and only one slice published."""
    return sim_dra.make_pool_incomplete(cluster(), node)


def pod(name, namespace):
    return kubectl("get", "pod", name, "-n", namespace, "-o", "json")


def wait_pod_phase(name, namespace, phases=("Running",), timeout=60):
    phases = (phases,) if isinstance(phases, str) else tuple(phases)
    return wait_for(lambda: (lambda p: p if p["status"].get("phase") in phases else None)(pod(name, namespace)),
                    timeout, "pod %s/%s to reach phase %s" % (namespace, name, "/".join(phases)))


def events_for(kind, name, namespace):
    out = kubectl("get", "events", "-n", namespace, "--field-selector",
                  "involvedObject.kind=%s,involvedObject.name=%s" % (kind, name), "-o", "json")
    return out["items"]


def api_curl(path, method="GET", identity="admin", data=None, content_type="application/json"):
    """curl against the apiserver with a client certificate (or token for token/badtoken); returns
    (http_status, body_text)."""
    i = info()
    cmd = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert", i["ca_file"], "-X", method]
    if identity in i["client_certs"]:
        cmd += ["--cert", i["client_certs"][identity]["cert"], "--key", i["client_certs"][identity]["key"]]
    elif identity in i["tokens"]:
        cmd += ["-H", "Authorization: Bearer " + i["tokens"][identity]]
    if data is not None:
        cmd += ["-H", "Content-Type: " + content_type, "--data-binary", "@-"]
        if not isinstance(data, str):
            data = json.dumps(data)
    r = _run(cmd + [i["api_server"] + path], input=data, timeout=60)
    if r.rc != 0:
        raise HarnessError("curl failed (exit %d): %s" % (r.rc, r.stderr))
    body, _, code = r.stdout.rpartition("\n")
    return int(code), body


# -- logs, restarts, events, DaemonSets (what a diagnose suite builds a broken node from) ---------


def fixture(relpath):
    """A file under tests/fixtures (e.g. "k8s-errors/deviceplugin__...log"), as a Path: the log
    helpers read a Path as a file and a str as the text itself."""
    p = fixtures_dir() / relpath
    if not p.is_file():
        raise HarnessError("no fixture %s" % p)
    return p


def set_pod_logs(namespace, pod, logs, previous=None, stream="stdout", at=None, wait=True):
    """Serves `logs` ({container: text | Path | [lines]}, container None: any other container) as
    the pod's container logs through the API server's pods/log (kubectl logs), and `previous` as
    the previous instance's (--previous). Plain text becomes CRI lines stamped from `at` (epoch
    seconds, default now) 1 ms apart, each line's text verbatim; a fixture already in CRI format
    is served as it is. stream: stdout or stderr (the device plugin logs to stderr). With wait
    (and the pod bound), returns once the API server serves them."""
    return _sim_logs.set_pod_logs(cluster(), namespace, pod, logs, previous, stream, at, wait=wait)


def set_namespace_logs(namespace, logs, previous=None, stream="stdout", at=None, names=None):
    """set_pod_logs for every pod of the namespace without logs of its own (optionally only those
    named in `names`): for a Job's or a DaemonSet's pods, whose names come later."""
    return _sim_logs.set_namespace_logs(cluster(), namespace, logs, previous, stream, at, names=names)


def append_pod_log(namespace, pod, container, text, stream="stdout", at=None):
    """More lines for a log set by set_pod_logs; a follow in progress prints them."""
    return _sim_logs.append_pod_log(cluster(), namespace, pod, container, text, stream, at)


def end_log_streams(node):
    """Ends the log streams (follows) the API server holds to a node's kubelet, as the kubelet does
    when a container stops (kwok never ends a follow by itself). Returns how many were open."""
    return _sim_logs.end_log_streams(cluster(), node)


def set_pod_outcome(namespace, pod, result, wait=True, timeout=60, **kw):
    """Gives a running pod an outcome now (kubectl annotate, then label): e.g. result="crashloop",
    restarts=6, exit_code=137, reason="OOMKilled" (keywords as outcome()). With wait, returns the
    pod once its status shows it (crashloop: CrashLoopBackOff; restarted: the restart count)."""
    labels, ann = outcome(result, **kw)
    if ann:
        kubectl("annotate", "--overwrite", "pod", pod, "-n", namespace, *("%s=%s" % kv for kv in ann.items()))
    kubectl("label", "--overwrite", "pod", pod, "-n", namespace, *("%s=%s" % kv for kv in labels.items()))
    if not wait:
        return None
    only = kw.get("container")

    def shown():
        p = kubectl("get", "pod", pod, "-n", namespace, "-o", "json")
        st = [c for c in p["status"].get("containerStatuses", []) if not only or c["name"] == only]
        if result == "crashloop":
            ok = st and all(c.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff" for c in st)
        elif result == "restarted":
            ok = st and all(c.get("lastState", {}).get("terminated") and c.get("state", {}).get("running")
                            for c in st)
        else:
            ok = p["status"].get("phase") == {"succeed": "Succeeded", "fail": "Failed"}.get(result, "Running")
        return p if ok else None
    return wait_for(shown, timeout, "pod %s/%s to show outcome %s" % (namespace, pod, result))


def record_event(namespace, involved_object, reason, message, type="Warning", component="kubelet", host=None,
                 count=1, first=None, last=None, field_path=None, action="Scheduling"):
    """Posts an Event as the component writes it: "default-scheduler" through events.k8s.io/v1
    (reportingController/Instance, action, eventTime, a series when count > 1); any other
    component (kubelet, daemonset-controller, ...) as core/v1 through client-go's legacy recorder
    (source {component, host}, reportingComponent/Instance, first/lastTimestamp, count).
    involved_object: the object (kubectl get -o json) or a reference dict; host: the node (kubelet)
    or the scheduler's hostname; first/last: epoch seconds, datetime or RFC 3339 (default now);
    field_path: e.g. "spec.containers{main}" as the kubelet sets it for container events.
    Node events go to namespace "default", as the kubelet writes them. Returns the created Event."""
    if component == "default-scheduler":
        ev = sim_objects.scheduler_event(namespace, involved_object, reason, message, type, component, host, count,
                                         first, last, action)
    else:
        ev = sim_objects.legacy_event(namespace, involved_object, reason, message, type, component, host, count,
                                      first, last, field_path)
    return create(ev)


def daemonset_pod(namespace, daemonset, node, phases=("Running",), timeout=90):
    """The DaemonSet's pod on `node` once it reaches one of `phases` (the DaemonSet controller
    creates it, the scheduler binds it, kwok runs it)."""
    def found():
        items = kubectl("get", "pods", "-n", namespace, "--field-selector", "spec.nodeName=" + node,
                        "-o", "json")["items"]
        for p in items:
            owners = p["metadata"].get("ownerReferences") or []
            if any(o["kind"] == "DaemonSet" and o["name"] == daemonset for o in owners) \
                    and p["status"].get("phase") in phases and not p["metadata"].get("deletionTimestamp"):
                return p
        return None
    return wait_for(found, timeout, "DaemonSet %s/%s's pod on %s" % (namespace, daemonset, node))


class Stream:
    """A command running in the background, its stdout collected as it comes (gpuctl_stream)."""

    def __init__(self, cmd, env):
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.chunks = []
        self.reader = threading.Thread(target=lambda: self.chunks.extend(iter(self.proc.stdout.readline, "")),
                                       daemon=True)
        self.reader.start()

    @property
    def stdout(self):
        return "".join(self.chunks)

    def wait_for(self, text, timeout=60):
        """Until stdout holds `text`; raises (and stops the command) if it exits or time runs out first."""
        deadline = time.time() + timeout
        while text not in self.stdout:
            if self.proc.poll() is not None:
                self.reader.join(5)
                if text in self.stdout:
                    break
                self._fail("exited (%s) before printing %r" % (self.proc.returncode, text))
            if time.time() > deadline:
                self._fail("did not print %r within %ss" % (text, timeout))
            time.sleep(0.1)

    def _fail(self, why):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        raise HarnessError("%s %s\nstdout: %s\nstderr: %s" % (" ".join(self.cmd[:3]), why, self.stdout,
                                                               self.proc.stderr.read()))

    def finish(self, timeout=60):
        """Waits for the command to end; returns a Result (killed and raised on timeout)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._fail("still running after %ss" % timeout)
        self.reader.join(5)
        return Result(self.cmd, self.proc.returncode, self.stdout, self.proc.stderr.read())


def gpuctl_stream(*args, context=None, env=None):
    """gpuctl started in the background (submit --follow): .wait_for(text), then .finish()."""
    i = info()
    e = dict(os.environ, KUBECONFIG=i["kubeconfigs"][context] if context else i["kubeconfig"], **(env or {}))
    return Stream([gpuctl_bin(), *map(str, args)], e)


# -- metrics.k8s.io (tests/cluster/sim_metrics.py: the real metrics-server, on request) ------------

METRICS_GROUP = "metrics.k8s.io"


def metrics_enabled():
    return bool((info().get("metrics") or {}).get("enabled"))


def enable_metrics():
    """metrics-server running and APIService v1beta1.metrics.k8s.io Available. Pair it with
    disable_metrics (addClassCleanup / addCleanup): other suites expect no metrics API, and one
    that is registered but not served breaks discovery (and namespace deletion) for everyone.
    Returns whether it was already enabled (then leave it so)."""
    was = metrics_enabled()
    cluster().enable_metrics()
    return was


def disable_metrics(was_enabled=False):
    if not was_enabled:
        cluster().disable_metrics()


def usage(cpu=None, memory=None):
    """Pod annotations for the resource usage kwok reports for each container (kwok's
    usage-from-annotation; default 1m and 1Mi): usage(cpu="1500m", memory="2Gi")."""
    ann = {}
    if cpu is not None:
        ann["kwok.x-k8s.io/usage-cpu"] = str(cpu)
    if memory is not None:
        ann["kwok.x-k8s.io/usage-memory"] = str(memory)
    return ann


def _metrics(path, what, timeout, ready):
    def got():
        code, body = api_curl("/apis/metrics.k8s.io/v1beta1/" + path)
        if code != 200:
            return None
        obj = json.loads(body)
        return obj if ready is None or ready(obj) else None
    return wait_for(got, timeout, what, interval=1)


def node_metrics(node, timeout=90, ready=None):
    """GET /apis/metrics.k8s.io/v1beta1/nodes/NODE once metrics-server has it (two scrapes, 10 s
    apart, give a CPU rate); `ready(obj)` may ask for more (a value reached). Returns the object."""
    return _metrics("nodes/" + node, "metrics of node %s from metrics-server" % node, timeout, ready)


def pod_metrics(namespace, pod, timeout=90, ready=None):
    """The pod's PodMetrics once metrics-server has it: a scrape or two after the node's (it wants
    two points of every container)."""
    return _metrics("namespaces/%s/pods/%s" % (namespace, pod), "metrics of pod %s/%s" % (namespace, pod),
                    timeout, ready)


# -- Prometheus scraping dcgm-exporter expositions (tests/cluster/sim_prometheus.py, on request) ------

def enable_prometheus():
    """The exposition server and both Prometheus servers running (idempotent, safe from parallel
    suites); returns cluster.json's "prometheus" (url, secure_url, username, password_file, ca_file).
    Nothing to pair it with: it serves only the nodes a suite gave an exposition."""
    cluster().enable_prometheus()
    return info()["prometheus"]


def dcgm_capture(relpath, hostnames):
    """A captured exposition (tests/fixtures/dcgm-exporter/...) with each Hostname label value
    relabelled as `hostnames` says ({"424773df46e0": "vprom-t4-0"}), as it would read on that node."""
    text = fixture(relpath).read_text()
    for old, new in hostnames.items():
        text = text.replace('Hostname="%s"' % old, 'Hostname="%s"' % new)
    return text


def render_dcgm_metrics(node):
    """What dcgm-exporter would serve on `node`: its GPUs as the node's fake nvidia-smi reports
    them, in the captured exporter's format (sim_prometheus.render_exposition)."""
    return _sim_prometheus.render_exposition(cluster(), node)


def prometheus_query(promql):
    """The plain Prometheus server's instant-query result (a list of series)."""
    return _sim_prometheus.query(cluster(), promql)


def _scraped_after(node, t0):
    """Whether a scrape of node's target that started after t0 read its exposition: up is 1, and
    its sample is stamped with that scrape's start (timestamp() of a plain selector is the
    sample's own time; of anything computed, the query's)."""
    selector = 'up{%s="%s"}' % (_sim_prometheus.TARGET_LABEL, node)
    up = prometheus_query(selector)
    stamp = prometheus_query("timestamp(%s)" % selector)
    return bool(up) and up[0]["value"][1] == "1" and bool(stamp) and float(stamp[0]["value"][1]) > t0


def serve_dcgm_metrics(node, text, target_labels=None, timeout=30):
    """`text` served as node's dcgm-exporter /metrics from now on; returns once Prometheus has
    scraped it (a sample of the node newer than the call). target_labels: labels Prometheus adds to
    every series of the node, as a relabelling would (e.g. {"node": name})."""
    _sim_prometheus.set_exposition(cluster(), node, text, target_labels)
    t0 = time.time()  # a scrape that starts later reads the new text
    wait_for(lambda: _scraped_after(node, t0), timeout, "Prometheus to scrape %s's exposition" % node)


def stop_dcgm_metrics(node, timeout=30):
    """node's exporter gone (404): returns once Prometheus has seen its target down (its series
    then stale: gone from instant selectors, still in range reads)."""
    _sim_prometheus.remove_exposition(cluster(), node)
    wait_for(lambda: any(r["value"][1] == "0" for r in prometheus_query(
        'up{%s="%s"}' % (_sim_prometheus.TARGET_LABEL, node))), timeout, "Prometheus to see %s's exporter down" % node)


def private_cluster(name, fleet_text=None):
    """Starts a cluster of the calling suite's own, in `<GPUCTL_E2E_STATE>-<name>` (ctest: next to
    the shared one, in the build directory), and points every helper here at it. For suites that
    disrupt the control plane (apiserver restarts, etcd paused), which must never hit the shared
    cluster. Ports, cluster id, addresses and network namespace are chosen per cluster, so it runs
    beside the shared one. Returns a function that stops it (logs kept in <dir>-logs) and points
    the helpers back."""
    shared = os.environ.get("GPUCTL_E2E_STATE")
    base = Path(shared) if shared else Path(os.environ.get("TMPDIR", "/tmp")) / "gpuctl-e2e"
    d = Path(str(base) + "-" + name)
    c = _cluster.Cluster(d)
    try:
        c.up()
        os.environ["GPUCTL_E2E_STATE"] = str(d)
        if fleet_text:
            apply_fleet(fleet_text, source=name + " fleet")
    except BaseException:
        c.down()
        raise

    def stop():
        try:
            c.down()
        finally:
            if shared is None:
                os.environ.pop("GPUCTL_E2E_STATE", None)
            else:
                os.environ["GPUCTL_E2E_STATE"] = shared
    return stop


class TestCase(unittest.TestCase):
    """unittest.TestCase with a namespace() helper that cleans up after passing tests (failed
    tests keep theirs for debugging; the cluster is thrown away at the end anyway)."""

    maxDiff = None

    def namespace(self, prefix=None):
        ns = unique_namespace(prefix or self.__class__.__name__.lower()[:20])
        self.addCleanup(self._cleanup_ns, ns)
        return ns

    def _cleanup_ns(self, ns):
        outcome = getattr(self, "_outcome", None)
        failed = False
        if outcome is not None:
            res = getattr(outcome, "result", None)
            errs = list(getattr(res, "errors", [])) + list(getattr(res, "failures", []))
            failed = any(t is self for t, _ in errs) or not getattr(outcome, "success", True)
        if not failed:
            delete_namespace(ns)


class _TimedResult(unittest.TextTestResult):
    def startTest(self, test):
        self._t0 = time.time()
        super().startTest(test)

    def stopTest(self, test):
        self.durations = getattr(self, "durations", [])
        self.durations.append((time.time() - self._t0, test.id()))
        super().stopTest(test)

    def printErrors(self):
        super().printErrors()
        slow = sorted(getattr(self, "durations", []), reverse=True)[:5]
        if slow:
            self.stream.writeln("slowest: " + ", ".join("%s %.1fs" % (t.rsplit(".", 1)[-1], d) for d, t in slow))


def main():
    """unittest.main with verbose output and the slowest tests listed (ctest shows it on failure)."""
    unittest.main(verbosity=2, testRunner=unittest.TextTestRunner(resultclass=_TimedResult, verbosity=2))
