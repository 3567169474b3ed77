"""The checks of the backup/restore suite (test_backup_restore.py) that read an archive, a plan
or the cluster and assert on them: a mixin for its h.TestCase, so the suite's file keeps the flow
(what runs, in which order) and this one what each stage must find."""
import base64
import gzip
import hashlib
import json
import stat

import yaml

import harness as h
from backup_archive import archive_paths, fields, gpuctl_bytes, items_of, key_of, read_members, report_json
from backup_ground import (CLUSTER_SCOPED, CORDON_REASON, CORDONED_AT, CORDONED_BY, CPU_JOB, DEVICE_CLASS, GPU_JOBS,
                           GPU_TAINT_KEY, LIMITS, PART_OF, PLUGIN_CONFIG_MAP, PLUGIN_NS, POOL, POOLS, PRIORITY_CLASS,
                           PVC, QUOTA, RACK, REASONS, REBIND_PVS, RESOURCES, RUNTIME_CLASS, SECRET_NAME, SECRET_NS,
                           SECRET_VALUE, STORAGE_CLASS, STRIPPED_META, TEAMS, TRAIN_NODE, TUNER, node_state,
                           settled_snapshot, wait_job_pods_gone, wait_jobs_active, wait_pvcs_bound)


class BackupChecks:
    """Mixed into the suite's TestCase (self.assert*, self.manifest, self.expected)."""

    # -- stage 1: the archive ------------------------------------------------------------------
    def check_manifest(self, manifest):
        """What, from where: the manifest's header."""

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

    def check_listing(self, manifest):
        """The manifest's files, kind by kind: exactly what was built where the kind is ours alone."""
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

    def check_members(self, data, manifest):
        """The archive itself: manifest.yaml first, one file per object, checksums that match,
        objects stripped, node state as it was built, no Secret value in any encoding."""
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
            self.assertEqual(ns == "", want[p] in CLUSTER_SCOPED, "%s: a folder per namespace, none for the others" % p)
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

    def check_other_backups(self, want):
        """--include-secrets, -f - and a viewer's backup, beside the one of `want`'s paths."""
        # --include-secrets: the Secret is there, and the command says so on stderr.
        spath = self.tmp / "with-secrets.tgz"
        s = h.gpuctl("backup", "-f", spath, "--include-secrets", "-o", "json")
        self.assertEqual(s.rc, 0, s.stderr)
        self.assertRegex(s.stderr, r"holds [1-9]\d* Secret", "a warning that the archive holds secrets")
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
        self.assertEqual([p.name for p in self.tmp.iterdir() if p.name.startswith(".viewer.tgz")], [],
                         "no temporary left beside it either")
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

    # -- stage 2: the plan of the damage -------------------------------------------------------
    def check_damage_plan(self, rep, dry_run):
        """A dry run's report against damage(): exactly the damage, field by field; the rest unchanged."""
        items = items_of(self, rep)
        self.assertEqual(set(items), {key_of(p) for p in archive_paths(self.manifest)}, "one item per archived object")
        for key, it in items.items():
            want = self.expected.get(key, "unchanged")
            if key in REBIND_PVS and it["action"] == "update":
                # (all() of no changes is True: an update that names no field must fail here too)
                self.assertTrue(fields(it) and all(c.startswith("spec.claimRef") for c in fields(it)), it)
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


    # -- stage 3 and after: the cluster repaired -----------------------------------------------
    def check_repaired(self, except_quota_b=False):
        """The built state is back (but for team-b's quota when another manager keeps it)."""
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

    def check_nothing_left_to_do(self, arch):
        """A second restore: all unchanged (text and JSON), nothing written, the same from stdin."""
        r = self.restore(arch)
        self.assertEqual(r.rc, 0, r.stdout + r.stderr)
        lines = [l for l in r.stdout.splitlines() if l.strip()]
        n = len(archive_paths(self.manifest))
        self.assertEqual(len(lines), n + 1, "one line per object, then the summary: " + r.stdout)
        for line in lines[:-1]:
            self.assertRegex(line, r"(?i)^(unchanged|skip(ped)?)\s", line)
        # (br-gone, deleted after the backup, is the one skipped)
        self.assertEqual(lines[-1], "restore: 0 create, 0 update, %d unchanged, 1 skipped, 0 conflict, 0 failed" % (n - 1))
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

    def check_verify(self, arch):
        """--verify: claims bound, quotas enforced, node state and Jobs there."""
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

    def check_scoping(self, arch):
        """--only, -l, -n and --nodes each restore their part of a damage and nothing else."""
        # Scoping: a quota, a labelled Job, an unlabelled Job and a node label lost.
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
        self.assertAbsent("job", "train-b", "br-team-b", "--only left Jobs alone")
        self.assertNotIn(POOL, node_state("br-t4-1")[0])

        r = self.restore(arch, "-l", PART_OF + "=br-training", "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        items = items_of(self, report_json(self, r))
        self.assertEqual(set(items), {("Job", ns, n) for ns, n, _, lab in GPU_JOBS if lab})
        self.assertEqual(items[("Job", "br-team-b", "train-b")]["action"], "create")
        self.assertAbsent("job", "train-c", "br-team-c", "-l: train-c unlabelled")

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

    def check_one_pod_per_job(self):
        """No duplicates: each GPU Job once, with one live pod."""
        for ns, n, _, _ in GPU_JOBS:
            pods = [p for p in h.kubectl("get", "pods", "-n", ns, "-l", "job-name=" + n, "-o", "json")["items"]
                    if not p["metadata"].get("deletionTimestamp")]
            self.assertEqual(len(pods), 1, "%s/%s: %s" % (ns, n, [p["metadata"]["name"] for p in pods]))

    def assertAbsent(self, kind, name, namespace, msg=None):
        """kubectl get says NotFound (not any error: a refused connection is not an absence)."""
        r = h.kubectl("get", kind, name, "-n", namespace, check=False)
        self.assertEqual(r.rc, 1, msg or r.stdout)
        self.assertIn("(NotFound)", r.stderr, msg)
