"""Shared by the fault-matrix suites (test_faults_*.py): their private cluster, a gpuctl run in
the background whose stderr can be waited on, and the checks of "nothing lost" after a fault.

The fault suites crash the apiserver and pause etcd, so they never use the shared e2e cluster:
each starts its own with harness.private_cluster()."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import harness as h

CORDON_KEYS = ("gpuctl.io/cordon-reason", "gpuctl.io/cordoned-by", "gpuctl.io/cordoned-at")
GROUP_LABEL = "faults.gpuctl.dev/group"
T4 = "telegraf__tesla-t4__515.105.01__v11.xml"

# Every node the fault suites use: drains (d), rolling (r), parallel drain under APF (p), the
# GPU hosts that get cut off (g).
FLEET = """
name: faults
nodes:
  - {namePrefix: flt-d-, count: 4, labels: {%(g)s: drain}}
  - {namePrefix: flt-r-, count: 2, labels: {%(g)s: rolling}}
  - {namePrefix: flt-p-, count: 6, labels: {%(g)s: parallel}}
  - {namePrefix: flt-g-, count: 3, gpus: 4, labels: {%(g)s: gpus}, ssh: {fixture: %(t4)s, mode: ok}}
""" % {"g": GROUP_LABEL, "t4": T4}


def start_cluster(name):
    """setUpModule: a private cluster with the faults fleet; returns the function that stops it."""
    return h.private_cluster(name, FLEET)


def cluster():
    return h.cluster()


class Background:
    """gpuctl running in the background; stdout and stderr are collected line by line, so a test
    can wait for a progress line before it injects the fault."""

    def __init__(self, *args, kubeconfig=None, context=None):
        i = h.info()
        env = dict(os.environ)
        env["KUBECONFIG"] = str(kubeconfig or (i["kubeconfigs"][context] if context else i["kubeconfig"]))
        self.cmd = [h.gpuctl_bin(), *map(str, args)]
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.out, self.err = [], []
        self.cond = threading.Condition()
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True)]
        for t in self.readers:
            t.start()

    def _read(self, stream, into):
        for line in stream:
            with self.cond:
                into.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, pattern, timeout=60):
        """The first stderr line matching `pattern` (a regex); fails when gpuctl exits first."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.err:
                    if rx.search(line):
                        return line
                if self.proc.poll() is not None and not any(t.is_alive() for t in self.readers):
                    raise h.HarnessError("gpuctl exited (%s) before printing /%s/:\n%s%s" % (
                        self.proc.returncode, pattern, "".join(self.out), "".join(self.err)))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise h.HarnessError("no /%s/ from gpuctl within %ss; stderr so far:\n%s" % (
                        pattern, timeout, "".join(self.err[-30:])))
                self.cond.wait(min(left, 0.5))

    def finish(self, timeout):
        """Waits for the exit (killing gpuctl after `timeout` s: a hang is a failure); returns a
        harness.Result with .elapsed (seconds since the start)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            for t in self.readers:
                t.join(5)
            raise h.HarnessError("gpuctl hung: still running after %ss: %s\nstderr:\n%s" % (
                timeout, " ".join(self.cmd), "".join(self.err[-40:])))
        for t in self.readers:
            t.join(10)
        r = h.Result(self.cmd, self.proc.returncode, "".join(self.out), "".join(self.err))
        r.elapsed = time.monotonic() - self.t0
        return r

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def run_bounded(*args, bound, **kw):
    """gpuctl in the foreground with a hard bound; returns the Result with .elapsed."""
    b = Background(*args, **kw)
    return b.finish(bound)


def node_obj(name):
    return h.kubectl("get", "node", name, "-o", "json")


def reset_node(name):
    """Uncordoned, no cordon record (each test starts from a clean node)."""
    patch = {"spec": {"unschedulable": None}, "metadata": {"annotations": {k: None for k in CORDON_KEYS}}}
    h.kubectl("patch", "node", name, "--type", "merge", "-p", json.dumps(patch))


def cordon_state(name):
    n = node_obj(name)
    ann = n["metadata"].get("annotations") or {}
    return bool(n["spec"].get("unschedulable")), {k: ann.get(k) for k in CORDON_KEYS}


def bare_pod(name, ns, node, labels=None, finalizers=None):
    """A pod that runs until deleted, pinned to `node` (drained with --force)."""
    p = h.gpu_pod(name, ns, node=node, gpus=0, outcome_=h.outcome("run"), labels=labels)
    p["spec"]["terminationGracePeriodSeconds"] = 0
    if finalizers:
        p["metadata"]["finalizers"] = list(finalizers)
    return p


def live_pods(ns, node=None):
    """name -> uid of the pods not being deleted (on `node` when given)."""
    args = ["get", "pods", "-n", ns, "-o", "json"]
    if node:
        args += ["--field-selector", "spec.nodeName=" + node]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in h.kubectl(*args)["items"]
            if not p["metadata"].get("deletionTimestamp")}


def wait_running(ns, names, timeout=90):
    def ok():
        pods = h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"]
        running = {p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"}
        return set(names) <= running
    h.wait_for(ok, timeout, "pods %s running in %s" % (sorted(names), ns))


def one_line_error(test, stderr):
    """The last stderr line is the error: `error: ...`, one line, no internal error."""
    lines = [l for l in stderr.splitlines() if l.strip()]
    test.assertTrue(lines, "no error message at all")
    test.assertTrue(lines[-1].startswith("error: "), stderr)
    test.assertNotIn("internal error", stderr)
    return lines[-1]


def report(cell, **facts):
    """One line per cell of what was observed, for docs/reliability.md's fault matrix."""
    print("FAULT-MATRIX %s: %s" % (cell, ", ".join("%s=%s" % (k, v) for k, v in facts.items())), flush=True)
