"""Ctrl-C and SIGTERM against the real binary and the real control plane: a drain blocked by a
PodDisruptionBudget, a rolling maintenance in the middle of its --exec command, `gpus` waiting
on hung hosts, and `submit --follow` waiting on a running job. Each run is started in its own session (as a shell starts a foreground job) and
signalled through its process group, as a terminal's Ctrl-C is. Checked: the exit code (130 for
SIGINT, 143 for SIGTERM), the usual summary with the unfinished work named as interrupted, the
node left cordoned with its whole cordon record (never half-patched), and that no process of the
run's session is left (ssh, --exec commands)."""
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

import harness as h

FLEET = """
name: interrupts
defaults: {cpu: "32", memory: 256Gi, gpus: 4, product: NVIDIA A100-SXM4-80GB}
nodes:
  - namePrefix: in-d-
    count: 4
    labels: {e2e.gpuctl.dev/interrupts: drain}
  - namePrefix: in-r-
    count: 2
    labels: {e2e.gpuctl.dev/interrupts: rolling}
  - namePrefix: in-g-
    count: 4
    gpus: 1
    labels: {e2e.gpuctl.dev/interrupts: gpus}
    ssh: {fixture: telegraf__tesla-t4__515.105.01__v11.xml}
"""
CORDON_ANNOTATIONS = ("gpuctl.io/cordon-reason", "gpuctl.io/cordoned-by", "gpuctl.io/cordoned-at")
# From the signal to gpuctl's exit: the 2 s grace for children, a second for curl to notice, and
# room for a loaded 2-core machine.
STOP_WITHIN = 20


def node_obj(name):
    return h.kubectl("get", "node", name, "-o", "json")


def reset_node(name):
    patch = {"spec": {"unschedulable": None},
             "metadata": {"annotations": {k: None for k in CORDON_ANNOTATIONS}}}
    h.kubectl("patch", "node", name, "--type", "merge", "-p", json.dumps(patch))


def pods_on(node, ns):
    items = h.kubectl("get", "pods", "-n", ns, "--field-selector", "spec.nodeName=" + node, "-o", "json")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def session_processes(sid):
    """Live (not zombie) processes of session `sid`, as (pid, comm), from /proc. The children
    gpuctl starts lead their own process groups but stay in its session."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state not in ("Z", "X"):
            found.append((int(entry), comm))
    return found


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Run:
    """gpuctl started as a shell starts a foreground job: its own session and process group,
    stderr read line by line as it comes."""

    def __init__(self, *args):
        env = dict(os.environ, KUBECONFIG=h.info()["kubeconfig"])
        self.proc = subprocess.Popen([h.gpuctl_bin(), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True)
        self.err_lines = []
        self.out = ""
        self._out_reader = threading.Thread(target=self._read_out)
        self._err_reader = threading.Thread(target=self._read_err)
        self._out_reader.start()
        self._err_reader.start()

    def _read_out(self):
        self.out = self.proc.stdout.read()

    def _read_err(self):
        for line in self.proc.stderr:
            self.err_lines.append(line)

    @property
    def err(self):
        return "".join(self.err_lines)

    def wait_for_err(self, text, timeout=90):
        h.wait_for(lambda: text in self.err or self.proc.poll() is not None, timeout, "%r on gpuctl's stderr" % text,
                   interval=0.2)
        if text not in self.err:
            raise AssertionError("gpuctl ended (exit %s) before printing %r:\n%s%s" % (self.proc.returncode, text,
                                                                                        self.out, self.err))

    def interrupt(self, sig=signal.SIGINT):
        """Signals the process group, as the terminal does on Ctrl-C; returns (rc, seconds to exit)."""
        t0 = time.monotonic()
        os.killpg(self.proc.pid, sig)
        try:
            rc = self.proc.wait(STOP_WITHIN + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("gpuctl did not stop within %ds of %s:\n%s" % (STOP_WITHIN + 30, sig.name, self.err))
        self._out_reader.join()
        self._err_reader.join()
        return rc, time.monotonic() - t0


class InterruptTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET, source="test_interrupts")

    def assertNothingLeft(self, run, remembered=()):
        """No process of the run's session is alive (killed ones get a moment to be torn down),
        and none of the pids seen while it ran."""
        deadline = time.monotonic() + 10
        while session_processes(run.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(session_processes(run.proc.pid), [])
        for pid in remembered:
            self.assertTrue(self._zombie(pid), "pid %d (%s) is still alive" % (pid, cmdline(pid)))

    @staticmethod
    def _zombie(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except OSError:
            return True

    def assertCordonedWhole(self, node, reason):
        """Cordoned by gpuctl with the whole record of its one patch: unschedulable, the reason,
        who and when."""
        n = node_obj(node)
        self.assertTrue(n["spec"].get("unschedulable"), node)
        annotations = n["metadata"].get("annotations", {})
        for key in CORDON_ANNOTATIONS:
            self.assertIn(key, annotations, "%s: %s missing" % (node, key))
        self.assertEqual(annotations["gpuctl.io/cordon-reason"], reason)

    def assertUntouched(self, node):
        n = node_obj(node)
        self.assertFalse(n["spec"].get("unschedulable"), node)
        annotations = n["metadata"].get("annotations", {})
        for key in CORDON_ANNOTATIONS:
            self.assertNotIn(key, annotations, node)

    def blocked_workload(self, node, spare, name="ddp"):
        """Two replicas on `node` under a PDB that allows no disruption; `spare` (cordoned for now)
        is the only other place they may go. Returns the namespace."""
        reset_node(node)
        reset_node(spare)
        h.kubectl("cordon", spare)
        ns = self.namespace("interrupts")
        spec = h.pod_spec(gpus=0)
        spec["terminationGracePeriodSeconds"] = 1
        spec["restartPolicy"] = "Always"
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                         "values": [node, spare]}]}]}}}
        dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name + "-pdb", "namespace": ns},
               "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": name}}}}
        h.create([dep, pdb])
        h.wait_for(lambda: len([p for p in pods_on(node, ns) if p["status"].get("phase") == "Running"]) == 2, 90,
                   "2 %s pods on %s" % (name, node))
        h.wait_for(lambda: h.kubectl("get", "pdb", name + "-pdb", "-n", ns, "-o", "json")["status"].get("currentHealthy") == 2,
                   60, "the PDB to count 2 healthy")
        return ns

    def test_sigint_stops_a_pdb_blocked_drain_which_a_rerun_finishes(self):
        node, spare = "in-d-0", "in-d-1"
        ns = self.blocked_workload(node, spare)
        run = Run("drain", node, "--grace-period", "0", "--reason", "ECC errors")
        run.wait_for_err("eviction refused")
        rc, took = run.interrupt(signal.SIGINT)
        self.assertEqual(rc, 130, run.out + run.err)
        self.assertLess(took, STOP_WITHIN, run.err)
        # The summary of a normal end, the node named as interrupted; the notice on stderr.
        self.assertRegex(run.out, r"in-d-0\s+interrupted\s+cordoned\s+0\s+\d+\s+2\s")
        self.assertIn("interrupted by SIGINT with 2 pod(s) still on the node; it stays cordoned (re-run to continue)",
                      run.out)
        self.assertIn("gpuctl: interrupted: stopping cleanly", run.err)
        self.assertIn("error: 1 node(s) not fully drained (interrupted by SIGINT; re-run to continue): in-d-0", run.err)
        self.assertNothingLeft(run)
        self.assertCordonedWhole(node, "ECC errors")
        self.assertEqual(len(pods_on(node, ns)), 2)

        # Re-running continues where it stopped: once the budget allows it, the drain completes.
        h.kubectl("uncordon", spare)
        h.kubectl("scale", "deployment", "ddp", "-n", ns, "--replicas", "4")
        r = h.gpuctl("drain", node, "--grace-period", "0", "--timeout", "120s", "--reason", "ECC errors", timeout=200)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"in-d-0\s+drained\s+already cordoned\s+2\s")
        self.assertEqual(pods_on(node, ns), [])
        reset_node(node)
        reset_node(spare)

    def test_sigterm_stops_a_drain_and_starts_no_further_node(self):
        node, spare, later = "in-d-2", "in-d-3", "in-d-1"
        reset_node(later)
        ns = self.blocked_workload(node, spare, name="held")
        run = Run("drain", node, later, "--grace-period", "0", "--reason", "maintenance", "-o", "json")
        run.wait_for_err("eviction refused")
        rc, took = run.interrupt(signal.SIGTERM)
        self.assertEqual(rc, 143, run.out + run.err)
        self.assertLess(took, STOP_WITHIN, run.err)
        items = {i["node"]: i for i in json.loads(run.out)["items"]}
        self.assertEqual(items[node]["result"], "interrupted")
        self.assertEqual(items[node]["cordon"], "cordoned")
        # (A failed earlier run may have left its own namespace's pods there too.)
        ours = sorted(k for k in items[node]["remaining"] if k.startswith(ns + "/"))
        self.assertEqual(ours, sorted("%s/%s" % (ns, p["metadata"]["name"]) for p in pods_on(node, ns)))
        self.assertEqual(len(ours), 2)
        self.assertEqual(items[later]["result"], "interrupted")
        self.assertEqual(items[later]["cordon"], "-")
        self.assertIn("not started: interrupted by SIGTERM", items[later]["message"])
        self.assertNothingLeft(run)
        self.assertCordonedWhole(node, "maintenance")
        self.assertUntouched(later)  # never started: not even cordoned
        reset_node(node)
        reset_node(spare)

    def test_sigint_stops_a_rolling_maintenance_and_its_exec_command(self):
        first, second = "in-r-0", "in-r-1"
        for n in (first, second):
            reset_node(n)
        pid_file = tempfile.NamedTemporaryFile(delete=False, suffix=".pid").name
        os.unlink(pid_file)
        self.addCleanup(lambda: os.path.exists(pid_file) and os.unlink(pid_file))
        run = Run("drain", first, second, "--rolling", "--grace-period", "0", "--uncordon", "--no-verify", "--reason", "driver upgrade",
                  "--exec", 'echo $$ > %s; sleep 300; echo never' % pid_file)
        h.wait_for(lambda: os.path.exists(pid_file) and open(pid_file).read().strip(), 90, "the --exec command to start")
        command_pid = int(open(pid_file).read())
        sleepers = [pid for pid, comm in session_processes(run.proc.pid) if comm == "sleep"]
        self.assertTrue(sleepers, session_processes(run.proc.pid))
        rc, took = run.interrupt(signal.SIGINT)
        self.assertEqual(rc, 130, run.out + run.err)
        self.assertLess(took, STOP_WITHIN, run.err)
        self.assertRegex(run.out, first + r"\s+interrupted\s+drained\s+\d+\s+interrupted\s+-\s+-\s")
        self.assertRegex(run.out, second + r"\s+not_started\s")
        self.assertIn("not started: interrupted by SIGINT", run.out)
        self.assertNotIn("never", run.out + run.err)
        self.assertNothingLeft(run, remembered=[command_pid, *sleepers])
        self.assertCordonedWhole(first, "driver upgrade")  # drained, its maintenance cut short: stays cordoned
        self.assertUntouched(second)
        for n in (first, second):
            reset_node(n)

    def test_sigint_stops_gpus_waiting_on_hung_hosts(self):
        nodes = ["in-g-%d" % i for i in range(4)]
        hung = nodes[1:]
        for n in hung:
            h.ssh_mode(n, "hang")
            self.addCleanup(h.ssh_mode, n, "ok")
        address = {n: h.node(n)["internal_ip"] for n in nodes}
        # --fanout 2: in-g-0 answers, in-g-1 and in-g-2 hang, in-g-3 waits for a free slot.
        run = Run("gpus", *nodes, *h.ssh_flags(), "--fanout", "2", "--ssh-timeout", "300s", "--connect-timeout", "60s")

        def hung_sessions():
            ssh = {pid: cmdline(pid) for pid, comm in session_processes(run.proc.pid) if comm == "ssh"}
            on = {n for n in hung if any(address[n] in c.split() for c in ssh.values())}
            return ssh if on == {"in-g-1", "in-g-2"} else None
        ssh = h.wait_for(hung_sessions, 90, "ssh sessions to in-g-1 and in-g-2", interval=0.1)
        time.sleep(1)
        rc, took = run.interrupt(signal.SIGINT)
        self.assertEqual(rc, 130, run.out + run.err)
        self.assertLess(took, STOP_WITHIN, run.err)
        self.assertRegex(run.out, r"in-g-0\s+ok\s")
        for n in hung:
            self.assertRegex(run.out, n + r"\s+interrupted\s")
        self.assertIn("3 of 4 node(s) did not fully answer:", run.out)
        self.assertRegex(run.out, r"interrupted \(3\): gpuctl was interrupted by SIGINT before the node answered"
                                  r" \(re-run to probe it\)\s+in-g-1,in-g-2,in-g-3")
        self.assertNothingLeft(run, remembered=list(ssh))

    def test_sigint_stops_submit_follow_and_the_job_keeps_running(self):
        h.apply_fleet_file("submit")
        ns = self.namespace("interrupts-submit")
        run = Run("submit", "forever", "-n", ns, "--image", "busybox", "--gpus", "1", "--gpu-type", "RTX-4090",
                  "--label", "%s=run" % h.OUTCOME_LABEL, "--follow")
        run.wait_for_err("job %s/forever: Running" % ns)
        rc, took = run.interrupt(signal.SIGINT)
        self.assertEqual(rc, 130, run.out + run.err)
        self.assertLess(took, STOP_WITHIN, run.err)
        self.assertIn("error: stopped waiting for job %s/forever (still Running, interrupted by SIGINT): it keeps "
                      "running; see 'gpuctl jobs -n %s'" % (ns, ns), run.err)
        self.assertNotIn("abandoned", run.err)  # no notice about the log stream it gave up
        self.assertNothingLeft(run)
        job = h.kubectl("get", "job", "forever", "-n", ns, "-o", "json")
        self.assertFalse(job["status"].get("succeeded") or job["status"].get("failed"), job["status"])


if __name__ == "__main__":
    h.main()
