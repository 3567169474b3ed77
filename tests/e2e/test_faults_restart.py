"""Fault matrix, part 1: kube-apiserver crashes (SIGKILL, then started again with the same
flags) in the middle of a PDB-blocked drain, a rolling maintenance, a `quota set` and a
`jobs clean`. Each cell: gpuctl completes, or fails with one error line and exit 1 and a re-run
completes; afterwards nothing is half-done (cordon with its record, no pod or job lost that should
stay, quota and LimitRange both there). Runs on a private cluster (the crashes would disturb
every other suite)."""
import json
import re
import signal

import harness as h
import faults_common as f

_stop = None


def setUpModule():
    global _stop
    _stop = f.start_cluster("faults-restart")


def tearDownModule():
    if _stop:
        _stop()


def crash_apiserver(down_for=1.0):
    """Freeze the apiserver first (a request in flight stays unanswered), then kill it and start
    it again: gpuctl sees a connection that breaks mid-request, then refusals, then a new server."""
    c = f.cluster()
    c.pause_component("kube-apiserver")
    c.restart_apiserver(down_for=down_for, sig=signal.SIGKILL)


class ApiserverRestartTest(h.TestCase):
    def test_drain_blocked_by_pdb_survives_a_crash(self):
        node, bystander_node = "flt-d-0", "flt-d-1"
        f.reset_node(node)
        ns = self.namespace("flt-drain")
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "held", "namespace": ns},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}}}
        h.create([f.bare_pod("held", ns, node, labels={"app": "held"}), f.bare_pod("free", ns, node),
                  f.bare_pod("bystander", ns, bystander_node), pdb])
        f.wait_running(ns, {"held", "free", "bystander"})
        h.wait_for(lambda: h.kubectl("get", "pdb", "held", "-n", ns, "-o", "json")["status"].get("currentHealthy") == 1,
                   60, "the PDB to count its pod")
        bystander = f.live_pods(ns, bystander_node)

        args = ("drain", node, "--force", "--grace-period", "0", "--timeout", "90s", "--reason", "faults: drain")
        run = f.Background(*args)
        self.addCleanup(run.kill)
        run.wait_line(r"eviction refused", 60)
        crash_apiserver()
        h.kubectl("delete", "pdb", "held", "-n", ns)
        first = run.finish(120)
        f.report("drain+restart", first_rc=first.rc, first_error=first.stderr.strip().splitlines()[-1:])
        self.assertIn(first.rc, (0, 1), first.stdout + first.stderr)
        if first.rc == 1:
            self.assertRegex(f.one_line_error(self, first.stderr), r"not fully drained: flt-d-0")
            again = f.run_bounded(*args, bound=120)
            f.report("drain+restart", rerun_rc=again.rc)
            self.assertEqual(again.rc, 0, again.stdout + again.stderr)
            self.assertRegex(again.stdout, r"flt-d-0\s+drained\s+already cordoned")

        cordoned, record = f.cordon_state(node)
        self.assertTrue(cordoned)
        self.assertEqual(record["gpuctl.io/cordon-reason"], "faults: drain")
        self.assertTrue(record["gpuctl.io/cordoned-by"] and record["gpuctl.io/cordoned-at"], record)
        self.assertEqual(f.live_pods(ns, node), {})
        self.assertEqual(f.live_pods(ns, bystander_node), bystander)
        self.assertFalse(f.cordon_state(bystander_node)[0])

    def test_rolling_maintenance_survives_a_crash_during_the_command(self):
        nodes = ["flt-r-0", "flt-r-1"]
        for n in nodes:
            f.reset_node(n)
        ns = self.namespace("flt-rolling")
        h.create([f.bare_pod("r0", ns, nodes[0]), f.bare_pod("r1", ns, nodes[1])])
        f.wait_running(ns, {"r0", "r1"})

        args = ("drain", "-l", f.GROUP_LABEL + "=rolling", "--rolling", "--max-unavailable", "1", "--force",
                "--grace-period", "0", "--timeout", "60s", "--exec", 'echo "maintained $1"; sleep 3',
                "--exec-timeout", "30s", "--wait-ready", "60s", "--uncordon", "--no-verify", "--reason", "faults: rolling")
        run = f.Background(*args)
        self.addCleanup(run.kill)
        first_node = re.search(r"(flt-r-\d): running the maintenance command",
                               run.wait_line(r"flt-r-\d: running the maintenance command", 60)).group(1)
        crash_apiserver()
        first = run.finish(180)
        f.report("rolling+restart", first_rc=first.rc, crashed_during=first_node,
                 first_error=first.stderr.strip().splitlines()[-1:])
        self.assertIn(first.rc, (0, 1), first.stdout + first.stderr)
        if first.rc == 1:
            f.one_line_error(self, first.stderr)
            again = f.run_bounded(*args, bound=180)
            f.report("rolling+restart", rerun_rc=again.rc)
            self.assertEqual(again.rc, 0, again.stdout + again.stderr)
            first = again
        for n in nodes:
            self.assertRegex(first.stdout, r"%s\s+done" % n)
            self.assertIn("%s: exec: maintained %s" % (n, n), first.stderr)
            # Back in service: uncordoned and the record cleared, its pod evicted.
            cordoned, record = f.cordon_state(n)
            self.assertFalse(cordoned, n)
            self.assertEqual(record, {k: None for k in f.CORDON_KEYS})
            self.assertEqual(f.live_pods(ns, n), {})

    def test_quota_set_survives_a_crash_between_its_writes(self):
        ns = self.namespace("flt-quota")
        args = ("quota", "set", ns, "--gpus", "8", "--max-per-pod", "4", "-v", "1")
        run = f.Background(*args)
        self.addCleanup(run.kill)
        run.wait_line(r"^(POST|PUT) \S+/(resourcequotas|limitranges)\S* 20[01] ", 60)
        crash_apiserver()
        first = run.finish(120)
        f.report("quota-set+restart", first_rc=first.rc, first_error=first.stderr.strip().splitlines()[-1:])
        self.assertIn(first.rc, (0, 1), first.stdout + first.stderr)
        if first.rc == 1:
            f.one_line_error(self, first.stderr)
            again = f.run_bounded(*args[:-2], bound=60)
            f.report("quota-set+restart", rerun_rc=again.rc, rerun_out=again.stdout.strip().replace("\n", " | "))
            self.assertEqual(again.rc, 0, again.stdout + again.stderr)
        quota = h.kubectl("get", "resourcequota", "gpuctl-gpu-quota", "-n", ns, "-o", "json")
        limits = h.kubectl("get", "limitrange", "gpuctl-gpu-limits", "-n", ns, "-o", "json")
        self.assertEqual(quota["spec"]["hard"], {"requests.nvidia.com/gpu": "8"})
        self.assertEqual(quota["metadata"]["labels"].get("app.kubernetes.io/managed-by"), "gpuctl")
        self.assertEqual(limits["metadata"]["labels"].get("app.kubernetes.io/managed-by"), "gpuctl")
        maxes = {l["type"]: l.get("max", {}).get("nvidia.com/gpu") for l in limits["spec"]["limits"]}
        self.assertEqual(maxes.get("Pod"), "4")
        self.assertEqual(maxes.get("Container"), "4")
        # Idempotent afterwards: nothing left to change.
        third = f.run_bounded("quota", "set", ns, "--gpus", "8", "--max-per-pod", "4", bound=60)
        self.assertEqual(third.rc, 0, third.stderr)
        self.assertIn("unchanged", third.stdout + third.stderr)

    def test_jobs_clean_survives_a_crash_between_deletes(self):
        ns = self.namespace("flt-jobs")
        sel = {"kubernetes.io/hostname": "flt-d-2"}
        finished = ["done-%d" % i for i in range(6)] + ["failed-0"]
        keep = ["running-0", "running-1"]
        jobs = [h.gpu_job(n, ns, gpus=0, outcome_=h.outcome("succeed"), node_selector=sel) for n in finished[:6]]
        jobs.append(h.gpu_job("failed-0", ns, gpus=0, outcome_=h.outcome("fail", exit_code=2), node_selector=sel))
        jobs += [h.gpu_job(n, ns, gpus=0, outcome_=h.outcome("run"), node_selector=sel) for n in keep]
        f.reset_node("flt-d-2")
        h.create(jobs)

        def settled():
            items = h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"]
            done = {j["metadata"]["name"] for j in items
                    if any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
                           for c in j["status"].get("conditions") or [])}
            active = {j["metadata"]["name"] for j in items if j["status"].get("active")}
            return done == set(finished) and active == set(keep)
        h.wait_for(settled, 120, "7 finished and 2 running jobs")
        running_pods = {n: u for n, u in f.live_pods(ns).items() if n.startswith("running-")}
        self.assertEqual(len(running_pods), 2)

        run = f.Background("jobs", "clean", "-n", ns, "--all", "-v", "1")
        self.addCleanup(run.kill)
        run.wait_line(r"^DELETE \S+/jobs/\S+ 200 ", 60)
        crash_apiserver()
        first = run.finish(120)
        deleted_first = len(re.findall(r"^DELETE \S+/jobs/\S+ 200 ", first.stderr, re.M))
        f.report("jobs-clean+restart", first_rc=first.rc, deleted_before_crash=deleted_first,
                 first_error=first.stderr.strip().splitlines()[-1:])
        self.assertIn(first.rc, (0, 1), first.stdout + first.stderr)
        if first.rc == 1:
            f.one_line_error(self, first.stderr)
            again = f.run_bounded("jobs", "clean", "-n", ns, "--all", bound=60)
            f.report("jobs-clean+restart", rerun_rc=again.rc)
            self.assertEqual(again.rc, 0, again.stdout + again.stderr)
        names = {j["metadata"]["name"] for j in h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"]}
        self.assertEqual(names, set(keep))
        # The running jobs' pods are the same pods; the finished jobs' pods go with their jobs.
        self.assertEqual({n: u for n, u in f.live_pods(ns).items() if n.startswith("running-")}, running_pods)
        h.wait_for(lambda: all(n.startswith("running-") for n in f.live_pods(ns)), 60,
                   "the garbage collector to remove the finished jobs' pods")


if __name__ == "__main__":
    h.main()
