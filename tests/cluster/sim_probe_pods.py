#!/usr/bin/python3
"""The kubelet of gpuctl's probe pods on the simulated nodes (`--via pod`, issue 21).

kwok runs pods but never their commands. For pods labelled app.kubernetes.io/name=gpuctl-probe
this daemon does what a kubelet with the NVIDIA container runtime would: it runs the pod's own
command (`sh -c SCRIPT` from its spec, with the container's env) on the node's sshd host, where the
fake nvidia-smi replays the node's fixture, attaches the output as the container's log through
kwok's Logs objects (sim_logs.set_pod_logs) and ends the pod with the command's exit code
(Succeeded for 0, else Failed, the container terminated with that code). kwok's pod-ready stage
leaves probe pods alone (kwok_stage_selector below): their status is this daemon's alone.

Per-node modes, set by a test as the node's annotation sim.gpuctl.dev/probe-pod:
    never-start   the container waits in ErrImagePull for ever (a registry that refuses the image)
    hang          the pod runs; its log holds the probe's output up to the first nvidia-smi step
                  (the kernel log), and it never ends (a hung nvidia-smi)
    (anything else, or none: the probe runs)

It also makes the RuntimeClass "nvidia" (handler nvidia), as the GPU Operator does, so the probe
pod's runtimeClassName is admitted. Stats for tests, per run (label probe.gpuctl.io/run), in
DIR/probe-pods.json: {"runs": {RUN: {"namespace", "pods", "max_in_flight", "nodes"}}}, where
max_in_flight is the most pods of the run that existed at once (sampled every poll).

    sim_probe_pods.py --state-dir DIR      (started by cluster.py up; logs to logs/probe-pods.log)
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sim_logs  # noqa: E402

SELECTOR = "app.kubernetes.io/name=gpuctl-probe"
MODE_ANNOTATION = "sim.gpuctl.dev/probe-pod"
RUN_LABEL = "probe.gpuctl.io/run"
CONTAINER = "probe"
POLL_S = 0.1
SSH_TIMEOUT_S = 120
MARKER = "@@gpuctl-probe-v1@@"
PULL_MESSAGE = ('failed to pull and unpack image "docker.io/library/%s": failed to resolve reference '
                '"docker.io/library/%s": pull access denied, repository does not exist or may require '
                'authorization: server message: insufficient_scope: authorization failed')


def kwok_stage_selector():
    """The matchExpression cluster.py adds to kwok's pod-ready stage: probe pods are this daemon's."""
    return {"key": '.metadata.labels["app.kubernetes.io/name"]', "operator": "NotIn", "values": ["gpuctl-probe"]}


def command(state_dir):
    return [sys.executable or "/usr/bin/python3", str(Path(__file__).resolve()), "--state-dir", str(state_dir)]


def log(msg):
    print("%s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Daemon:
    def __init__(self, c):
        self.c = c
        self.seen = set()          # pod uids handled
        self.runs = {}             # run id -> stats
        self.lock = threading.Lock()
        self.stats_file = c.dir / "probe-pods.json"

    # -- the API ---------------------------------------------------------------------------------

    def patch_status(self, ns, name, status):
        code, _ = self.c.api("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (ns, name), {"status": status},
                             ctype="application/merge-patch+json", ok=None)
        return code == 200

    def ensure_runtime_class(self):
        body = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                "handler": "nvidia"}
        code, got = self.c.api("POST", "/apis/node.k8s.io/v1/runtimeclasses", body, ok=None)
        if code not in (200, 201, 409):
            log("cannot create RuntimeClass nvidia: HTTP %d %s" % (code, got))

    # -- pods ------------------------------------------------------------------------------------

    def container_status(self, pod, state, ready=False):
        image = next((c.get("image", "") for c in pod["spec"]["containers"] if c["name"] == CONTAINER), "")
        return [{"name": CONTAINER, "image": image, "imageID": "", "ready": ready, "started": ready,
                 "restartCount": 0, "state": state}]

    def never_start(self, pod):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        image = next((c.get("image", "") for c in pod["spec"]["containers"] if c["name"] == CONTAINER), "")
        t = now_rfc3339()
        self.patch_status(ns, name, {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
                           {"type": "Initialized", "status": "True", "lastTransitionTime": t},
                           {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                            "message": "containers with unready status: [probe]", "lastTransitionTime": t},
                           {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
                            "message": "containers with unready status: [probe]", "lastTransitionTime": t}],
            "containerStatuses": self.container_status(pod, {"waiting": {
                "reason": "ErrImagePull", "message": PULL_MESSAGE % (image, image)}})})

    def start(self, pod):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        t = now_rfc3339()
        return self.patch_status(ns, name, {
            "phase": "Running", "startTime": t,
            "conditions": [{"type": c, "status": "True", "lastTransitionTime": t}
                           for c in ("PodScheduled", "Initialized", "Ready", "ContainersReady")],
            "containerStatuses": self.container_status(pod, {"running": {"startedAt": t}}, ready=True)})

    def finish(self, pod, code):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        t = now_rfc3339()
        reason = "Completed" if code == 0 else "Error"
        self.patch_status(ns, name, {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": [{"type": c, "status": "False", "reason": "PodCompleted" if code == 0 else "PodFailed",
                            "lastTransitionTime": t} for c in ("Ready", "ContainersReady")],
            "containerStatuses": self.container_status(pod, {"terminated": {
                "exitCode": code, "reason": reason, "startedAt": t, "finishedAt": t}})})

    def remote_command(self, pod):
        c = next(c for c in pod["spec"]["containers"] if c["name"] == CONTAINER)
        env = ["%s=%s" % (e["name"], e.get("value", "")) for e in c.get("env") or []]
        return shlex.join(["env", *env, *(c.get("command") or []), *(c.get("args") or [])])

    def run_probe(self, pod, mode):
        ns, name, node = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"]["nodeName"]
        info = json.loads(self.c.cluster_json.read_text())
        n = info["nodes"].get(node) or {}
        # The kubelet runs on the node: the admin's view of it (a host key that changed) is not its
        # concern, so the host's key is not checked here.
        argv = ["ssh", "-F", info["ssh"]["config_file"], "-o", "ConnectTimeout=10", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", n.get("internal_ip", node),
                self.remote_command(pod)]
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=SSH_TIMEOUT_S)
            out, code = p.stdout + p.stderr, p.returncode
        except subprocess.TimeoutExpired:
            out, code = b"", 137
        if mode == "hang":   # up to the first nvidia-smi step, then never an end
            cut = out.find(("%s begin all" % MARKER).encode())
            out = out[:cut] if cut >= 0 else out
        try:
            sim_logs.set_pod_logs(self.c, ns, name, {CONTAINER: out or b"\n"}, wait=True)
        except Exception as e:  # the pod may be gone: gpuctl deleted it at its deadline
            log("%s/%s: logs not set: %s" % (ns, name, e))
            return
        if mode != "hang":
            self.finish(pod, code)
        log("%s/%s on %s: probe ran, exit %d, %d bytes%s" % (ns, name, node, code, len(out),
                                                            " (hang: left running)" if mode == "hang" else ""))

    def handle(self, pod, modes):
        node = pod["spec"].get("nodeName")
        mode = modes.get(node, "")
        if mode == "never-start":
            self.never_start(pod)
            log("%s/%s on %s: never-start (ErrImagePull)" % (pod["metadata"]["namespace"], pod["metadata"]["name"],
                                                             node))
            return
        if self.start(pod):
            threading.Thread(target=self.guarded, args=(self.run_probe, pod, mode), daemon=True).start()

    def guarded(self, fn, *args):
        try:
            fn(*args)
        except Exception:
            log("error: %s" % traceback.format_exc())

    # -- the loop --------------------------------------------------------------------------------

    def record(self, pods):
        alive = {}
        for p in pods:
            if p["metadata"].get("deletionTimestamp"):
                continue
            run = (p["metadata"].get("labels") or {}).get(RUN_LABEL, "")
            alive.setdefault(run, []).append(p)
        changed = False
        for run, ps in alive.items():
            r = self.runs.setdefault(run, {"namespace": ps[0]["metadata"]["namespace"], "pods": 0,
                                           "max_in_flight": 0, "nodes": []})
            for p in ps:
                if p["metadata"]["uid"] not in self.seen:
                    r["pods"] += 1
                    r["nodes"].append(p["spec"].get("nodeName"))
                    changed = True
            if len(ps) > r["max_in_flight"]:
                r["max_in_flight"] = len(ps)
                changed = True
        if changed:
            tmp = self.stats_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"runs": self.runs}, indent=1, sort_keys=True))
            os.replace(tmp, self.stats_file)

    def poll(self):
        code, got = self.c.api("GET", "/api/v1/pods?labelSelector=" + SELECTOR.replace("/", "%2F"), ok=None)
        if code != 200:
            return
        pods = [p for p in got.get("items") or [] if (p.get("spec") or {}).get("nodeName")]
        self.record(pods)
        fresh = [p for p in pods if p["metadata"]["uid"] not in self.seen and not p["metadata"].get("deletionTimestamp")]
        for p in pods:
            self.seen.add(p["metadata"]["uid"])
        if not fresh:
            return
        _, nodes = self.c.api("GET", "/api/v1/nodes")
        modes = {n["metadata"]["name"]: (n["metadata"].get("annotations") or {}).get(MODE_ANNOTATION, "")
                 for n in nodes.get("items") or []}
        for p in fresh:
            self.guarded(self.handle, p, modes)

    def run(self):
        self.ensure_runtime_class()
        log("watching pods labelled %s" % SELECTOR)
        while True:
            try:
                self.poll()
            except Exception:
                log("error: %s" % traceback.format_exc())
                time.sleep(1)
            time.sleep(POLL_S)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state-dir", required=True)
    a = ap.parse_args()
    import cluster
    c = cluster.Cluster(a.state_dir)
    if not c.load():
        sys.exit("no cluster state in %s" % a.state_dir)
    Daemon(c).run()


if __name__ == "__main__":
    main()
