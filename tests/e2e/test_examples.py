"""examples/ run as an admin would run them, against the real control plane and sshd hosts, so
none of them rots: the nightly health check's JUnit report and its exit codes 0, 4, 5, 1 and 2, a rolling driver
upgrade whose command reaches each node over ssh (and a node whose driver the upgrade broke stays
cordoned), team onboarding run twice, the training Job submitted with `submit -f` and run, and
the backup crontab line's command run with sh -c in a cron-like environment. The examples find
gpuctl and kubectl on PATH, as installed; cron-like runs get no KUBECONFIG (~/.kube/config).
Nodes: ex- (this file's fleet); namespaces: one per test."""
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import harness as h
import examples_support as es

EXAMPLES = h.HERE.parent.parent / "examples"
FLEET_LABEL = "e2e.gpuctl.dev/examples"
FLEET = """
name: examples
defaults: {cpu: "64", memory: 512Gi, gpus: 4}
nodes:
  - namePrefix: ex-health-        # nightly-gpu-health.sh: ex-health-1's driver is not loaded
    count: 2
    labels: {e2e.gpuctl.dev/examples: health}
    ssh: {fixture: telegraf__a10g__515.105.01__v11.xml}
    overrides:
      ex-health-1: {ssh: {mode: driver-not-loaded}}
  - namePrefix: ex-roll-          # rolling-driver-upgrade.sh
    count: 3
    labels: {e2e.gpuctl.dev/examples: roll}
    ssh: {fixture: telegraf__a10g__515.105.01__v11.xml}
  - namePrefix: ex-train-         # training-job.yaml: a product and a pool taint no other suite has
    count: 2
    product: NVIDIA H200
    labels: {e2e.gpuctl.dev/examples: train}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
    ssh: {enabled: false}
"""
ROLL = ["ex-roll-0", "ex-roll-1", "ex-roll-2"]


class ExamplesTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET, source="examples fleet")
        cls.tmp = Path(tempfile.mkdtemp(prefix="gpuctl-e2e-examples-"))
        cls.bin = es.install_bin(cls.tmp / "bin", {"gpuctl": h.gpuctl_bin(), "kubectl": h.info()["kubectl"],
                                                   "nightly-backup.sh": EXAMPLES / "nightly-backup.sh"})

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_example(self, name, *args, env=None, timeout=300):
        """The example as a program (its shebang and mode), gpuctl and kubectl on PATH, the
        cluster's kubeconfig and ssh configuration in the environment an admin's shell has."""
        i = h.info()
        e = dict(os.environ, PATH="%s:%s" % (self.bin, os.environ["PATH"]), KUBECONFIG=i["kubeconfig"],
                 GPUCTL_SSH_CONFIG=i["ssh"]["config_file"])
        e.update(env or {})
        p = subprocess.run([str(EXAMPLES / name), *map(str, args)], env=e, cwd=self.tmp, timeout=timeout,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        return h.Result([name, *map(str, args)], p.returncode, p.stdout, p.stderr)

    # -- nightly-gpu-health.sh ---------------------------------------------------------------------

    def test_nightly_health_check_writes_junit_and_keeps_diagnose_exit_codes(self):
        report = self.tmp / "health" / "gpu-health.xml"
        report.parent.mkdir()
        env = {"GPU_HEALTH_REPORT": str(report)}
        r = self.run_example("nightly-gpu-health.sh", "-l", FLEET_LABEL + "=health", env=env)
        self.assertEqual(r.rc, 4, r.stderr)
        self.assertIn("GPU problems found; see the failures in %s" % report, r.stderr)
        self.assertEqual(r.stdout, "")
        root = es.valid_junit(self, report.read_text())
        failed = es.junit_failures(root)
        self.assertIn("driver-broken", failed, failed)
        self.assertTrue(any("ex-health-1" in name for name in failed["driver-broken"]), failed)
        self.assertFalse(any("ex-health-0" in name for name in failed["driver-broken"]), failed)
        self.assertEqual(oct(report.stat().st_mode & 0o777), "0o644")

        # The healthy node alone: exit 0 and a report without failures, replacing the last one.
        r = self.run_example("nightly-gpu-health.sh", "-l", "kubernetes.io/hostname=ex-health-0",
                             "--check", "node-not-ready,gpu-unhealthy-devices,driver-broken", env=env)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("healthy; report in %s" % report, r.stderr)
        root = es.valid_junit(self, report.read_text())
        self.assertEqual(es.junit_failures(root), {})
        self.assertEqual({s.get("name") for s in root.iter("testsuite")},
                         {"node-not-ready", "gpu-unhealthy-devices", "driver-broken"})

        # A user who may not list claims (the e2e viewer): nothing found, a check skipped: exit 5,
        # and the report says which check and why.
        r = self.run_example("nightly-gpu-health.sh", "-l", "kubernetes.io/hostname=ex-health-0",
                             "--check", "node-not-ready,pvc-unbound",
                             env=dict(env, KUBECONFIG=h.info()["kubeconfigs"]["viewer"]))
        self.assertEqual(r.rc, 5, r.stderr)
        self.assertIn("some checks could not run; see %s" % report, r.stderr)
        root = es.valid_junit(self, report.read_text())
        self.assertEqual(es.junit_failures(root), {})
        skipped = [s.get("name") for s in root.iter("testsuite") if s.find("testcase/skipped") is not None]
        self.assertEqual(skipped, ["pvc-unbound"])

        # The cluster unreachable: exit 1 and the last report left as it was, no temporary beside it.
        before = report.read_bytes()
        r = self.run_example("nightly-gpu-health.sh", env=dict(env, KUBECONFIG=str(self.tmp / "no-such-kubeconfig")))
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertIn("no report written", r.stderr)
        self.assertEqual(report.read_bytes(), before)
        self.assertEqual(os.listdir(report.parent), [report.name])

        # A bad flag is diagnose's usage error, passed through.
        r = self.run_example("nightly-gpu-health.sh", "--check", "no-such-check", env=env)
        self.assertEqual(r.rc, 2, r.stderr)
        self.assertEqual(os.listdir(report.parent), [report.name])

    # -- rolling-driver-upgrade.sh -----------------------------------------------------------------

    def test_rolling_driver_upgrade_runs_the_command_on_each_node_over_ssh(self):
        for n in ROLL:
            es.reset_node(n)
        ns = self.namespace("ex-roll")
        uids = es.pod_per_node(ns, ROLL)
        log = self.tmp / "upgrade.log"
        # Over ssh to the node's own sshd: the remote shell records the address it was reached at.
        cfg = h.info()["ssh"]["config_file"]
        upgrade = 'ssh -F %s -- "$1" "echo $1 \\$SSH_CONNECTION >> %s"' % (cfg, log)
        env = {"UPGRADE_COMMAND": upgrade, "MAX_UNAVAILABLE": "2", "DRAIN_TIMEOUT": "60s", "WAIT_READY": "60s"}
        r = self.run_example("rolling-driver-upgrade.sh", FLEET_LABEL + "=roll", "--grace-period", "0", env=env)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        reached = {line.split()[0]: line.split()[3] for line in log.read_text().splitlines()}
        self.assertEqual(reached, {n: h.node(n)["internal_ip"] for n in ROLL})
        for n in ROLL:
            # EVICTED counts every pod on the node (a failed earlier run keeps its namespace).
            self.assertRegex(r.stdout, n + r"\s+done\s+drained\s+[1-9]\d*\s+ok\s+ready\s+uncordoned\s+passed")
            obj = h.kubectl("get", "node", n, "-o", "json")
            self.assertFalse(obj["spec"].get("unschedulable"), n)
            self.assertNotIn("gpuctl.io/cordon-reason", obj["metadata"].get("annotations", {}))
            self.assertNotIn(uids[n], {p["metadata"]["uid"] for p in es.pods_on(n, ns)}, "evicted from " + n)

        # The upgrade leaves ex-roll-1 without a loaded driver: it stays cordoned with the finding
        # as its reason, ex-roll-2 is never started, and the script fails.
        h.ssh_mode("ex-roll-1", "driver-not-loaded")
        self.addCleanup(h.ssh_mode, "ex-roll-1", "ok")
        log.unlink()
        env["MAX_UNAVAILABLE"] = "1"
        r = self.run_example("rolling-driver-upgrade.sh", FLEET_LABEL + "=roll", "--grace-period", "0", env=env)
        self.assertEqual(r.rc, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"ex-roll-0\s+done")
        self.assertRegex(r.stdout, r"ex-roll-1\s+failed")
        self.assertRegex(r.stdout, r"ex-roll-2\s+not_started")
        self.assertEqual(sorted(line.split()[0] for line in log.read_text().splitlines()), ROLL[:2])
        broken = h.kubectl("get", "node", "ex-roll-1", "-o", "json")
        self.assertTrue(broken["spec"].get("unschedulable"))
        self.assertTrue(broken["metadata"]["annotations"]["gpuctl.io/cordon-reason"].startswith("driver-broken: "),
                        broken["metadata"]["annotations"])
        for n in ("ex-roll-0", "ex-roll-2"):
            self.assertFalse(h.kubectl("get", "node", n, "-o", "json")["spec"].get("unschedulable"), n)
        es.reset_node("ex-roll-1")

    # -- onboard-team.sh ---------------------------------------------------------------------------

    def test_onboarding_writes_namespace_quota_and_limit_and_a_second_run_changes_nothing(self):
        ns = "ex-team-" + uuid.uuid4().hex[:8]
        self.addCleanup(h.delete_namespace, ns)

        r = self.run_example("onboard-team.sh", "--dry-run", ns, "8", "4")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("namespace/%s created (dry run)" % ns, r.stdout)
        self.assertEqual(h.kubectl("get", "namespace", ns, check=False).rc, 1, "a dry run wrote the namespace")

        r = self.run_example("onboard-team.sh", ns, "8", "4")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["namespace/%s created" % ns, "resourcequota/gpuctl-gpu-quota created",
                                                 "limitrange/gpuctl-gpu-limits created"])
        self.assertEqual(es.gpu_limits(ns), {"quota": {"requests.nvidia.com/gpu": "8"},
                                             "max": {"Pod": "4", "Container": "4"}})
        versions = es.resource_versions(ns)

        r = self.run_example("onboard-team.sh", ns, "8", "4")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["namespace/%s unchanged" % ns,
                                                 "resourcequota/gpuctl-gpu-quota unchanged",
                                                 "limitrange/gpuctl-gpu-limits unchanged"])
        self.assertEqual(es.resource_versions(ns), versions)

        # A server dry run: the API server answers for the new size, nothing is stored.
        r = self.run_example("onboard-team.sh", "--dry-run=server", ns, "2")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("resourcequota/gpuctl-gpu-quota configured: requests.nvidia.com/gpu 8 -> 2 (server dry run)",
                      r.stdout)
        self.assertEqual(es.resource_versions(ns), versions)

        # The limit is the API server's: a pod asking for 5 GPUs is refused at admission.
        code, body = h.api_curl("/api/v1/namespaces/%s/pods" % ns, method="POST",
                                data=h.gpu_pod("too-big", ns, gpus=5))
        self.assertEqual(code, 403, body)
        self.assertIn("maximum", body)

        # A new size resizes in place; MAX_PER_POD defaults to GPUS.
        r = self.run_example("onboard-team.sh", ns, "16")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("resourcequota/gpuctl-gpu-quota configured: requests.nvidia.com/gpu 8 -> 16", r.stdout)
        self.assertEqual(es.gpu_limits(ns), {"quota": {"requests.nvidia.com/gpu": "16"},
                                             "max": {"Pod": "16", "Container": "16"}})

    # -- training-job.yaml -------------------------------------------------------------------------

    def test_training_job_is_submitted_with_submit_f_and_runs_on_the_pool(self):
        ns = self.namespace("ex-train")
        for claim, mode in (("datasets", "ReadOnlyMany"), ("checkpoints", "ReadWriteOnce")):
            self.addCleanup(h.kubectl, "delete", "pv", "%s-%s" % (ns, claim), "--ignore-not-found", "--wait=false")
            es.bound_claim(ns, claim, mode)
        r = h.gpuctl("submit", "-f", EXAMPLES / "training-job.yaml", "-n", ns, "--gpu-type", "H200",
                     "--wait", "--timeout", "2m")
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        self.assertIn("job %s/resnet50-imagenet succeeded" % ns, r.stdout + r.stderr)
        job = h.kubectl("get", "job", "resnet50-imagenet", "-n", ns, "-o", "json")
        spec = job["spec"]["template"]["spec"]
        self.assertEqual(spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "4")
        self.assertEqual(spec["nodeSelector"], {"nvidia.com/gpu.product": "NVIDIA-H200"})
        self.assertIn("nvidia.com/gpu", [t["key"] for t in spec["tolerations"]])
        self.assertEqual(job["spec"]["backoffLimit"], 2)
        pods = h.kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=resnet50-imagenet",
                         "-o", "json")["items"]
        self.assertTrue(pods and all(p["spec"]["nodeName"].startswith("ex-train-") for p in pods), pods)
        self.assertTrue(all(p["status"]["phase"] == "Succeeded" for p in pods), [p["status"] for p in pods])

    # -- backup-cron + nightly-backup.sh -----------------------------------------------------------

    def test_backup_cron_line_writes_an_archive_inspect_accepts_and_keeps_the_newest(self):
        env, line = es.read_crontab(self, (EXAMPLES / "backup-cron").read_text())
        keep = 14
        self.assertIn(" %d " % keep, line.command)
        # cron's environment: HOME, LOGNAME, SHELL, the crontab's PATH (gpuctl and the script
        # installed in a folder on it) and no KUBECONFIG: gpuctl reads ~/.kube/config.
        home = self.tmp / "cron-home"
        (home / ".kube").mkdir(parents=True)
        shutil.copy(h.info()["kubeconfig"], home / ".kube" / "config")
        backups = home / "gpuctl-backups"
        backups.mkdir()
        old = ["gpuctl-backup-202001%02dT023000Z.tar.gz" % d for d in range(1, keep + 2)]  # keep + 1 of them
        for name in old:
            (backups / name).write_text("an older night's archive\n")
        cron_env = {"HOME": str(home), "LOGNAME": "root", "SHELL": "/bin/sh",
                    "PATH": "%s:%s" % (self.bin, env["PATH"])}
        p = subprocess.run(["/bin/sh", "-c", line.command], env=cron_env, cwd=home, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300)
        log = (home / "gpuctl-backups.log").read_text()
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""), log)
        left = sorted(os.listdir(backups))
        new = [n for n in left if n not in old]
        self.assertEqual(len(new), 1, left)
        self.assertEqual(left, old[2:] + new, "the newest %d kept" % keep)
        self.assertIn("%s written and checked" % (backups / new[0]), log)
        self.assertEqual(oct((backups / new[0]).stat().st_mode & 0o777), "0o600")
        r = h.gpuctl("backup", "inspect", backups / new[0], "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        manifest = r.json
        self.assertEqual(manifest["kind"], "BackupManifest")
        self.assertIn("ex-train-0", json.dumps(manifest), "the archive holds this cluster's nodes")

        # The cluster unreachable: the command fails and no archive is removed.
        (home / ".kube" / "config").unlink()
        p = subprocess.run(["/bin/sh", "-c", line.command], env=cron_env, cwd=home, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, (home / "gpuctl-backups.log").read_text())
        self.assertEqual(sorted(os.listdir(backups)), left)


if __name__ == "__main__":
    h.main()
