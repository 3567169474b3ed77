"""Hostile input to gpuctl's parsers, end to end (issue 12, classes 2, 3, 4 and 13): long strings,
deep nesting, YAML alias bombs and very large kubeconfigs, through the real binary against the
real control plane and real sshd hosts. Each case asserts the exit code, a bounded run (a
subprocess deadline and an address-space limit, so a blow-up fails the test instead of the
machine), the one-line error, and that nothing was written where nothing belongs.

The recursion and regex crashes these guard against were SIGSEGVs: a negative return code."""
import json
import os
import tempfile

import yaml

import harness as h

FLEET = """
name: hostile-parsers
nodes:
  - name: hp-ok-0
    cpu: "64"
    memory: 512Gi
    gpus: 4
    ssh: {fixture: datakit__tesla-v100-pcie-32gb__460.39__v11.xml}
  - name: hp-deep-0
    cpu: "64"
    memory: 512Gi
    gpus: 4
    ssh: {fixture: datakit__tesla-v100-pcie-32gb__460.39__v11.xml, mode: deep-xml}
"""

MEMORY_LIMIT = 2 << 30   # bytes of address space gpuctl may take in these tests
DEADLINE_S = 90          # a hang guard, not a speed assertion
ONE_NODE = "kubernetes.io/hostname=hp-ok-0"


def bounded(kubeconfig, *args, timeout=DEADLINE_S, stdin=None):
    """Runs gpuctl with a memory bound; returns (rc, stdout, stderr)."""
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    return h.run_bounded(args, env, MEMORY_LIMIT, timeout, input=stdin)


def one_error_line(test, err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    test.assertEqual(len(lines), 1, err[:2000])
    test.assertTrue(lines[0].startswith("error:"), lines[0][:300])
    test.assertLess(len(lines[0]), 400, "the error quotes the hostile value instead of naming it")
    return lines[0]


class HostileParsersTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET, source="test_hostile_parsers")
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpuctl-hostile-")
        cls.addClassCleanup(cls.tmp.cleanup)
        cls.kubeconfig = h.info()["kubeconfig"]

    def path(self, name, text):
        p = os.path.join(self.tmp.name, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    # Class 2: long strings.

    def test_a_40kb_cordon_reason_is_written_and_shown_in_every_format(self):
        reason = "ECC errors on GPU 3; " + "x" * 40000
        try:
            rc, _, err = bounded(self.kubeconfig, "cordon", "hp-ok-0", "--reason", reason)
            self.assertEqual(rc, 0, err[:500])
            rc, out, err = bounded(self.kubeconfig, "nodes", "-l", ONE_NODE, "-o", "yaml")
            self.assertEqual(rc, 0, err[:500])
            self.assertEqual(yaml.safe_load(out)["items"][0]["cordon"]["reason"], reason)
            rc, out, err = bounded(self.kubeconfig, "nodes", "-l", ONE_NODE, "-o", "json")
            self.assertEqual(rc, 0, err[:500])
            self.assertEqual(json.loads(out)["items"][0]["cordon"]["reason"], reason)
            rc, out, err = bounded(self.kubeconfig, "nodes", "-l", ONE_NODE, "-o", "wide")
            self.assertEqual(rc, 0, err[:500])
            self.assertIn("hp-ok-0", out)
        finally:
            h.gpuctl("uncordon", "hp-ok-0")

    def test_long_scalars_in_a_manifest_reach_the_printed_job_intact(self):
        ns = self.namespace("hp")
        note = "n" * 200000  # under the API's 256 KiB annotation budget
        manifest = self.path("long.yaml", yaml.safe_dump({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "long", "annotations": {"example.com/note": note}},
            "spec": {"template": {"spec": {"containers": [{
                "name": "main", "image": "busybox:" + "1" * 100,
                "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}))
        rc, out, err = bounded(self.kubeconfig, "submit", "-n", ns, "-f", manifest,
                               "--dry-run=client", "-o", "yaml", "--force")
        self.assertEqual(rc, 0, err[:500])
        job = yaml.safe_load(out)
        self.assertEqual(job["metadata"]["annotations"]["example.com/note"], note)
        self.assertEqual(h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"], [])

    def test_a_one_megabyte_scalar_in_an_unused_kubeconfig_entry_is_harmless(self):
        cfg = yaml.safe_load(open(self.kubeconfig))
        cfg["users"].append({"name": "huge", "user": {"token": "t" * (1 << 20)}})
        rc, out, err = bounded(self.path("huge-scalar.kubeconfig", yaml.safe_dump(cfg)), "nodes", "-l", ONE_NODE)
        self.assertEqual(rc, 0, err[:500])
        self.assertIn("hp-ok-0", out)

    # Class 3: deep nesting.

    def test_one_node_answering_a_nesting_bomb_does_not_take_down_the_others(self):
        rc, out, err = bounded(self.kubeconfig, "gpus", "hp-ok-0", "hp-deep-0", "-o", "json",
                               *h.ssh_flags(), "--ssh-timeout", "30s", "--connect-timeout", "5s")
        self.assertEqual(rc, 1, err[:1000])  # one node failed: exit 1, and no crash
        items = {i["name"]: i for i in json.loads(out)["items"]}
        self.assertEqual(items["hp-ok-0"]["outcome"], "ok", items["hp-ok-0"])
        self.assertEqual(len(items["hp-ok-0"]["gpus"]), 4)
        deep = items["hp-deep-0"]
        self.assertNotEqual(deep["outcome"], "ok", deep)
        self.assertEqual(deep.get("gpus") or [], [], "GPUs read from a malformed answer")
        # The table says the same, on a terminal-free stdout.
        rc, out, err = bounded(self.kubeconfig, "gpus", "hp-ok-0", "hp-deep-0", *h.ssh_flags(),
                               "--ssh-timeout", "30s", "--connect-timeout", "5s")
        self.assertEqual(rc, 1, err[:1000])
        self.assertIn("hp-ok-0", out)
        self.assertIn("hp-deep-0", out + err)

    def test_a_deeply_nested_json_manifest_is_a_usage_error(self):
        ns = self.namespace("hp")
        manifest = self.path("deep.json", '{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"deep"},"x":'
                             + "[" * 100000 + "]" * 100000 + "}")
        rc, out, err = bounded(self.kubeconfig, "submit", "-n", ns, "-f", manifest, "--force")
        self.assertEqual(rc, 2, err[:500])
        self.assertEqual(out, "")
        self.assertIn("deep.json", one_error_line(self, err))
        self.assertEqual(h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"], [])

    def test_a_deeply_nested_yaml_manifest_is_a_usage_error(self):
        ns = self.namespace("hp")
        manifest = self.path("deep.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: deep}\nx: "
                             + "[" * 50000 + "]" * 50000 + "\n")
        rc, out, err = bounded(self.kubeconfig, "submit", "-n", ns, "-f", manifest, "--force")
        self.assertEqual(rc, 2, err[:500])
        self.assertEqual(out, "")
        self.assertIn("deep.yaml", one_error_line(self, err))
        self.assertEqual(h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"], [])

    def test_a_deeply_nested_kubeconfig_is_a_config_error(self):
        cfg = self.path("deep.kubeconfig", "apiVersion: v1\nkind: Config\npreferences: "
                        + "[" * 50000 + "]" * 50000 + "\n")
        rc, out, err = bounded(cfg, "nodes")
        self.assertEqual(rc, 1, err[:500])
        self.assertEqual(out, "")
        self.assertIn("deep.kubeconfig", one_error_line(self, err))

    # Class 4: YAML alias bombs.

    BOMB = "".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"] +
                   ["a%d: &a%d [%s]\n" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10)) for i in range(1, 10)])

    def test_an_alias_bomb_in_a_manifest_is_refused_within_bounds(self):
        ns = self.namespace("hp")
        manifest = self.path("bomb.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: bomb}\n" + self.BOMB)
        rc, out, err = bounded(self.kubeconfig, "submit", "-n", ns, "-f", manifest, "--force")
        self.assertEqual(rc, 2, err[:500])
        self.assertEqual(out, "")
        line = one_error_line(self, err)
        self.assertIn("bomb.yaml", line)
        self.assertIn("alias", line.lower())
        self.assertEqual(h.kubectl("get", "jobs", "-n", ns, "-o", "json")["items"], [])

    def test_an_alias_bomb_in_a_kubeconfig_is_a_config_error_within_bounds(self):
        cfg = self.path("bomb.kubeconfig", "apiVersion: v1\nkind: Config\n" + self.BOMB)
        rc, out, err = bounded(cfg, "nodes")
        self.assertEqual(rc, 1, err[:500])
        self.assertEqual(out, "")
        line = one_error_line(self, err)
        self.assertIn("bomb.kubeconfig", line)
        self.assertIn("alias", line.lower())

    # Class 13: a very large kubeconfig loads (it was quadratic: 11 s for 40,000 clusters).

    def test_a_kubeconfig_with_40000_clusters_users_and_contexts_works(self):
        cfg = yaml.safe_load(open(self.kubeconfig))
        for i in range(40000):
            cfg["clusters"].append({"name": "c%d" % i, "cluster": {"server": "https://192.0.2.1:%d" % (1 + i % 60000)}})
            cfg["users"].append({"name": "u%d" % i, "user": {"token": "tok%d" % i}})
            cfg["contexts"].append({"name": "x%d" % i, "context": {"cluster": "c%d" % i, "user": "u%d" % i}})
        path = self.path("big.kubeconfig", json.dumps(cfg))
        rc, out, err = bounded(path, "nodes", "-l", ONE_NODE)
        self.assertEqual(rc, 0, err[:500])
        self.assertIn("hp-ok-0", out)


if __name__ == "__main__":
    h.main()
