"""gpuctl backup / restore (issue 17) against the real control plane, on a private cluster.

One flow, in stages that build on each other (a stage whose predecessor failed is skipped):

1. a realistic state (backup_ground.build_state), then `backup -f`: the archive (0600, manifest
   first, checksums, stripped objects, no Secret), `backup inspect`, `--include-secrets`,
   `backup -f -`, and a viewer that cannot list every kind (exit 1, nothing written;
   `--allow-partial` names the gaps);
2. the cluster damaged as an operator or a bad script damages it (backup_ground.damage); refused
   archives (truncated, a byte changed, a newer format, another cluster's) exit 2 and send
   nothing; `restore --dry-run` (client and server) shows exactly the damage and writes nothing;
3. `restore` repairs everything but a quota another manager changed (a conflict naming it, exit 1),
   `--force-conflicts` takes that over, a second restore is all unchanged, `--verify` passes (the
   Released PVs bound again to their recreated PVCs), node state only ever added;
4. node state from a `kubectl get nodes -o yaml` export (and as multi-document YAML); scoping with
   --only, -n, -l, --nodes;
5. the API server crashes in the middle of a restore; the re-run completes, nothing duplicated;
6. Ctrl-C in the middle of a restore (held at a quota write by a webhook, backup_interrupt.py):
   exit 130, the kinds before it applied, none after it; the re-run completes, nothing duplicated;
7. Ctrl-C during `backup -f FILE` (held at its first stderr line): exit 130, no FILE and no
   temporary beside it, an archive already there left as it was.

What each stage must find is in backup_checks.py, the state and the damage in backup_ground.py,
archive handling in backup_archive.py. Backup and restore are cluster-wide and stage 5 kills the
API server, so the suite runs on its own cluster (harness.private_cluster), never on the shared
one. Node names: br-."""
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import yaml

import harness as h
import faults_common as f
from backup_archive import (archive_paths, bump_digit_after, fields, flipped_byte, items_of, replace_once,
                            report_json, rewrite_member, truncated)
from backup_checks import BackupChecks
from backup_ground import (GPU_JOBS, POOL, PRIORITY_CLASS, QUOTA, REBIND_PVS, TEAMS, TUNER, WRITE_LINE, build_state,
                           damage, node_state, settled_snapshot, wait_job_pods_gone)
from backup_interrupt import BlockedStderr, HeldWrites

FLEET = (h.HERE / "fleets" / "backup.yaml").read_text()
# The kinds a restore applies before ResourceQuotas (backup_kinds' order), as the archive has them.
KINDS_BEFORE_QUOTAS = {"Namespace", "PriorityClass", "RuntimeClass", "StorageClass", "DeviceClass",
                       "PersistentVolume", "PersistentVolumeClaim"}
_stop = None


def setUpModule():
    global _stop
    _stop = h.private_cluster("backup", FLEET)


def tearDownModule():
    if _stop:
        _stop()


class BackupRestoreTest(BackupChecks, h.TestCase):
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
        self.check_manifest(manifest)
        inspect = h.gpuctl("backup", "inspect", path, "-o", "json")
        self.assertEqual(inspect.rc, 0, inspect.stderr)
        self.assertEqual(report_json(self, inspect), manifest, "backup -o json and backup inspect print the same manifest")
        self.check_listing(manifest)
        self.check_members(path.read_bytes(), manifest)
        self.check_other_backups(archive_paths(manifest))
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
            if key in REBIND_PVS:   # re-pointed at the recreated claim, or already bound to it
                self.assertIn(it["action"], ("update", "unchanged"), "%s: %s" % (key, it))
            else:
                self.assertEqual(it["action"], self.expected.get(key, "unchanged"), key)
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

        self.check_nothing_left_to_do(arch)
        self.check_verify(arch)
        self.done("restore")

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
        self.check_scoping(self.archive)
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
        self.check_repaired()   # (no taint or label twice, one Job of each name)
        self.check_one_pod_per_job()
        self.done("restart")

    # -- 6 -------------------------------------------------------------------------------------
    def test_6_sigint_in_the_middle_of_a_restore(self):
        self.need("restore")
        arch = self.archive
        # Damage across the kinds in restore's order: a class (before quotas), every team's quota,
        # the GPU Jobs and two nodes' pool labels (after them).
        h.kubectl("delete", "priorityclass", PRIORITY_CLASS)
        for ns in TEAMS:
            h.kubectl("delete", "resourcequota", QUOTA, "-n", ns)
        for ns, n, _, _ in GPU_JOBS:
            h.kubectl("delete", "job", n, "-n", ns)
        unlabelled = ("br-a10g-0", "br-t4-1")
        for node in unlabelled:
            h.kubectl("label", "node", node, POOL + "-")
        for ns, n, _, _ in GPU_JOBS:
            wait_job_pods_gone(ns, n)

        # The quotas' writes are held at the webhook: Ctrl-C lands while one is in flight.
        with HeldWrites("br-hold-quotas", "resourcequotas", TEAMS) as hold:
            run = f.Background("restore", arch, "-v", "1")
            self.addCleanup(run.kill)
            h.wait_for(lambda: hold.held.is_set() or run.proc.poll() is not None, 120, "a quota write at the webhook")
            self.assertTrue(hold.held.is_set(), "gpuctl ended before writing a quota: %s" % "".join(run.err))
            run.proc.send_signal(signal.SIGINT)
            run.wait_line(r"^gpuctl: interrupted: stopping cleanly", 30)
            hold.release()
            first = run.finish(60)
            held = hold.writes()
        f.report("restore+sigint", rc=first.rc, held_writes=held, printed=len(first.stdout.splitlines()),
                 last_error=first.stderr.strip().splitlines()[-1:])
        self.assertEqual(first.rc, 130, first.stdout + first.stderr)
        left = re.search(r"error: restore interrupted \((\d+) object\(s\) not started\); what was applied stays, "
                         r"run the same restore again to complete it", first.stderr)
        self.assertTrue(left, first.stderr)
        # At least the GPU Jobs and the unlabelled nodes, which come after the quotas, were never reached.
        self.assertGreaterEqual(int(left.group(1)), len(GPU_JOBS) + len(unlabelled), first.stderr)
        self.assertNotIn("internal error", first.stderr)
        # Every kind before the quotas was applied and printed, none after them was started.
        printed = {l.split()[1] for l in first.stdout.splitlines()[:-1] if l.strip()}
        self.assertEqual(printed, KINDS_BEFORE_QUOTAS | {"ResourceQuota"}, first.stdout)
        self.assertRegex(first.stdout, r"(?m)^created\s+PriorityClass %s$" % PRIORITY_CLASS)
        self.assertRegex(first.stdout.splitlines()[-1], r"^restore: \d+ create, ")
        self.assertNotRegex(first.stderr, r"(?m)^(POST|PUT|PATCH|DELETE) \S*/(jobs|nodes)/", "nothing after the quotas")
        h.kubectl("get", "priorityclass", PRIORITY_CLASS)
        self.assertTrue(held and all(op == "CREATE" and name == QUOTA for op, _, name in held), held)
        for _, ns, _ in held:   # a write in flight is finished, never abandoned half-way
            h.kubectl("get", "resourcequota", QUOTA, "-n", ns)
        for ns, n, _, _ in GPU_JOBS:
            self.assertAbsent("job", n, ns, "the Jobs come after the quotas")
        for node in unlabelled:
            self.assertNotIn(POOL, node_state(node)[0], node)

        # The same restore again completes it: what was applied is unchanged now, the rest done.
        again = self.restore(arch, "-o", "json")
        self.assertEqual(again.rc, 0, again.stdout + again.stderr)
        items = items_of(self, report_json(self, again))
        want = {("PriorityClass", "", PRIORITY_CLASS): "unchanged"}
        want.update({("ResourceQuota", ns, QUOTA): "unchanged" for _, ns, _ in held})
        want.update({("Job", ns, n): "create" for ns, n, _, _ in GPU_JOBS})
        want.update({("Node", "", node): "update" for node in unlabelled})
        self.assertEqual({k: items[k]["action"] for k in want}, want)
        for key, it in items.items():
            self.assertIn(it["result"], ("applied", "unchanged", "skipped"), "%s: %s" % (key, it))
        self.check_repaired()
        self.check_one_pod_per_job()
        third = self.restore(arch, "-o", "json")
        self.assertEqual(third.rc, 0, third.stderr)
        self.assertEqual({it["action"] for it in report_json(self, third)["items"]}, {"unchanged", "skip"})
        self.done("interrupted restore")

    # -- 7 -------------------------------------------------------------------------------------
    def test_7_sigint_during_backup_leaves_no_file(self):
        self.need("backup")
        folder = self.tmp / "interrupted"
        folder.mkdir()
        target = folder / "cluster.tgz"
        # Held at its first -v line, so still collecting when Ctrl-C comes: never past the write.
        rc, out, err = BlockedStderr("backup", "-f", target, "-v", "1").interrupt()
        f.report("backup+sigint", rc=rc, stderr=err.strip().splitlines())
        self.assertEqual(rc, 130, out + err)
        self.assertIn("gpuctl: interrupted: stopping cleanly", err)
        self.assertIn("interrupted", f.one_line_error(self, err))
        self.assertEqual(out, "", "no 'backup written' summary")
        self.assertEqual(os.listdir(folder), [], "no archive, no .cluster.tgz.tmp-*")
        # Over an archive already there: it stays as it was, byte for byte, nothing beside it.
        shutil.copyfile(self.archive, target)
        before = target.read_bytes()
        rc, out, err = BlockedStderr("backup", "-f", target, "-v", "1").interrupt()
        self.assertEqual(rc, 130, out + err)
        self.assertEqual(os.listdir(folder), ["cluster.tgz"])
        self.assertEqual(target.read_bytes(), before)


if __name__ == "__main__":
    h.main()
