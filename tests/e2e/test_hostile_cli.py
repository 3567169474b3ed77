"""Hostile input to gpuctl's commands and object decoding, end to end (issue 12, the command
classes): submit without NAME, terminal escapes in text from the cluster, wrongly typed fields in
server objects and manifests, node names that are not node names reaching drain --exec.

What a real API server can produce (an annotation holding escape characters) runs against the
real control plane; answers no real server gives (a number where a string belongs, a node named
'-oProxyCommand=...') come from tests/e2e/hostile_server.py. Each case asserts the exit code, a
bounded run, the message, and that nothing was written where nothing belongs."""
import json
import os
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import hostile_server as hs
import harness as h

DEADLINE_S = 60  # a hang guard, not a speed assertion
ESCAPES = "\x1b[2J\x1b[H\u202eFORGED\x07\r\nhc-x   Ready"


def bounded(kubeconfig, *args, cwd=None, timeout=DEADLINE_S):
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["KUBECONFIG"] = str(kubeconfig)
    started = time.monotonic()
    p = subprocess.run([h.gpuctl_bin(), *map(str, args)], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - started


def no_raw_controls(test, text):
    for ch in ("\x1b", "\x07", "\r", "\u202e"):
        test.assertNotIn(ch, text, repr(text[:500]))


def pod_list(items=()):
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": list(items)}


class HostileServerCases(unittest.TestCase):
    """Answers no real API server gives; gpuctl runs against hostile_server.py."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gpuctl-hostile-cli-")
        self.srv = hs.HostileServer().__enter__()
        self.kc = self.srv.kubeconfig(self.tmp.name)

    def tearDown(self):
        self.srv.__exit__(None, None, None)
        self.tmp.cleanup()

    def writes(self):
        """Requests that could change something (a SelfSubjectReview only asks who we are)."""
        return [r for r in self.srv.requests
                if r.method != "GET" and not r.bare_path.startswith("/apis/authentication.k8s.io/")]

    # 11. submit without NAME
    def test_submit_without_name_never_takes_the_command_as_the_name(self):
        for args, message in ((("--image", "x", "--gpus", "1", "--", "python", "train.py"), "a job NAME is required before --"),
                              (("--image", "x", "--gpus", "1", "--", "python"), "a job NAME is required before --")):
            with self.subTest(args=args):
                rc, out, err, took = bounded(self.kc, "submit", *args)
                self.assertEqual(rc, 2, err)
                self.assertEqual(out, "")
                lines = err.splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertTrue(lines[0].startswith("error: ") and message in lines[0], lines[0])
                self.assertIn("gpuctl submit NAME", lines[0])
                self.assertLess(took, DEADLINE_S)
        self.assertEqual(self.srv.requests, [])

    # 9. wrongly typed fields in server objects
    def test_nodes_skips_and_names_wrongly_typed_nodes_and_lists_the_rest(self):
        bad_status = hs.gpu_node("hc-bad-status", status="Ready")
        bad_capacity = hs.gpu_node("hc-bad-capacity")
        bad_capacity["status"]["capacity"] = ["nvidia.com/gpu"]
        bad_name = hs.gpu_node("x")
        bad_name["metadata"]["name"] = 42
        null_status = hs.gpu_node("hc-null-status", status=None)  # null is absent, as Go decodes it
        self.srv.route("GET", "/api/v1/nodes", hs.json_body(hs.node_list(
            [hs.gpu_node("hc-good"), bad_status, bad_capacity, bad_name, null_status])))
        self.srv.route("GET", "/api/v1/pods", hs.json_body(pod_list([{"metadata": {"name": "p", "namespace": "ml"},
                                                                       "spec": {"nodeName": "hc-good",
                                                                                "containers": {"name": "main"}}}])))
        for fmt in ("table", "json"):
            with self.subTest(output=fmt):
                rc, out, err, took = bounded(self.kc, "nodes", "-o", fmt)
                self.assertEqual(rc, 1, err)
                self.assertLess(took, DEADLINE_S)
                self.assertNotIn("internal error", err)
                self.assertIn("Warning: node/hc-bad-status skipped: status is a string, expected an object", err)
                self.assertIn("Warning: node/hc-bad-capacity skipped: status.capacity is a list, expected a map of quantities", err)
                self.assertIn("Warning: node #4 (no name) skipped: metadata.name is an integer, expected a string", err)
                self.assertIn("Warning: pod ml/p not counted: spec.containers is an object, expected a list", err)
                if fmt == "json":
                    names = [i["name"] for i in json.loads(out)["items"]]
                    self.assertEqual(names, ["hc-good", "hc-null-status"])
                else:
                    self.assertIn("hc-good", out)
                    self.assertNotIn("hc-bad", out)
        self.assertEqual(self.writes(), [])

    def test_jobs_and_jobs_clean_skip_a_wrongly_typed_job_and_never_delete_it(self):
        def job(name, **spec_extra):
            return {"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": name, "namespace": "ml", "uid": "u-" + name,
                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"template": {"spec": {"containers": [{"name": "main", "resources": {
                        "limits": {"nvidia.com/gpu": "1"}}}]}}, **spec_extra},
                    "status": {"conditions": [{"type": "Complete", "status": "True",
                                               "lastTransitionTime": "2026-01-01T00:10:00Z"}],
                               "completionTime": "2026-01-01T00:10:00Z"}}
        broken = job("broken", parallelism="2")
        self.srv.route("GET", "/apis/batch/v1/namespaces/ml/jobs", hs.json_body(
            {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": [job("done"), broken]}))
        self.srv.route("GET", "/api/v1/namespaces/ml/pods", hs.json_body(pod_list()))
        self.srv.route("GET", "/api/v1/namespaces/ml/events", hs.json_body(hs.empty_list("EventList")))
        self.srv.route("DELETE", "/apis/batch/v1/namespaces/ml/jobs/*", hs.json_body({"kind": "Status", "status": "Success"}))
        rc, out, err, _ = bounded(self.kc, "jobs", "-n", "ml")
        self.assertEqual(rc, 1, err)
        self.assertIn("done", out)
        self.assertNotIn("broken", out)
        self.assertIn("Warning: job ml/broken skipped: spec.parallelism is a string, expected an integer", err)
        rc, out, err, _ = bounded(self.kc, "jobs", "clean", "-n", "ml")
        self.assertEqual(rc, 1, err)
        self.assertIn("job ml/broken skipped: spec.parallelism is a string, expected an integer; not deleted", err)
        deleted = [r.bare_path for r in self.srv.requests if r.method == "DELETE"]
        self.assertEqual(deleted, ["/apis/batch/v1/namespaces/ml/jobs/done"])

    def test_escapes_in_server_text_are_shown_escaped_in_tables_and_exact_in_json(self):
        forged = hs.gpu_node("hc-0")
        forged["metadata"]["labels"]["nvidia.com/gpu.product"] = "H100" + ESCAPES
        self.srv.route("GET", "/api/v1/nodes", hs.json_body(hs.node_list([forged])))
        self.srv.route("GET", "/api/v1/pods", hs.json_body(pod_list()))
        rc, out, err, _ = bounded(self.kc, "nodes")
        self.assertEqual(rc, 0, err)
        no_raw_controls(self, out + err)
        self.assertIn("H100\\x1b[2J\\x1b[H\\u202eFORGED\\x07\\x0d\\x0ahc-x   Ready", out)
        self.assertEqual(len(out.splitlines()), 1 + 1 + 3, out)  # header, the node, the product summary
        rc, out, err, _ = bounded(self.kc, "nodes", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["items"][0]["product"], "H100" + ESCAPES)

    # 13. node names that are not node names
    def test_drain_exec_never_runs_for_a_node_whose_name_is_not_a_node_name(self):
        marker = Path(self.tmp.name) / "ran"
        evil = hs.gpu_node("-oProxyCommand=touch-pwned")
        self.srv.route("GET", "/api/v1/nodes", hs.json_body(hs.node_list([evil])))
        rc, out, err, took = bounded(self.kc, "drain", "-l", "pool=a", "--rolling", "--max-unavailable", "1",
                                     "--exec", f'echo "$1" >> {marker}', "--force", cwd=self.tmp.name)
        self.assertEqual(rc, 1, err)
        self.assertLess(took, DEADLINE_S)
        self.assertFalse(marker.exists(), marker.read_text() if marker.exists() else "")
        self.assertIn("not a node name", err)
        self.assertIn("-oProxyCommand=touch-pwned", err)
        self.assertNotIn("internal error", err)
        self.assertEqual(self.writes(), [])

    # 9. manifests
    def test_manifest_values_and_types_are_usage_errors_before_any_request(self):
        base = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "m"},
                "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}
        cases = [
            ({"resources": {"limits": {"nvidia.com/gpu": "-4"}}},
             'job.json: spec.template.spec.containers[0].resources.limits.nvidia.com/gpu "-4": expected a whole number of GPUs from 0 to 1024 (as --gpus)'),
            ({"resources": ["nvidia.com/gpu"]}, "job.json: spec.template.spec.containers[0].resources is a list, expected an object"),
            ({"env": [{"name": "1BAD", "value": "x"}]},
             'job.json: spec.template.spec.containers[0].env: "1BAD" is not a valid variable name (as --env)'),
        ]
        for extra, message in cases:
            with self.subTest(message=message):
                doc = json.loads(json.dumps(base))
                doc["spec"]["template"]["spec"]["containers"][0].update(extra)
                path = Path(self.tmp.name) / "job.json"
                path.write_text(json.dumps(doc))
                rc, out, err, _ = bounded(self.kc, "submit", "-f", "job.json", cwd=self.tmp.name)
                self.assertEqual(rc, 2, err)
                self.assertEqual(out, "")
                self.assertEqual(err.strip(), "error: " + message)
        self.assertEqual(self.srv.requests, [])


class RealClusterCases(h.TestCase):
    """What the real API server accepts and hands back: an annotation is free text."""

    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("hostile-cli")

    def test_a_cordon_reason_with_escapes_is_shown_escaped_and_kept_exact(self):
        h.kubectl("annotate", "node", "hc-0", "--overwrite", "gpuctl.io/cordon-reason=" + ESCAPES)
        try:
            rc, out, err = h.gpuctl("nodes", "-o", "wide", "-l", "e2e.gpuctl.dev/fleet=hostile-cli")
            self.assertEqual(rc, 0, err)
            no_raw_controls(self, out + err)
            self.assertIn("\\x1b[2J\\x1b[H\\u202eFORGED\\x07\\x0d\\x0ahc-x   Ready", out)
            self.assertEqual(sum(1 for line in out.splitlines() if line.startswith("hc-")), 1, out)
            rc, out, err = h.gpuctl("nodes", "-o", "json", "-l", "e2e.gpuctl.dev/fleet=hostile-cli")
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.count("\x1b"), 0)  # JSON escapes C0 itself ...
            self.assertEqual(json.loads(out)["items"][0]["cordon"]["reason"], ESCAPES)  # ... and keeps it exact
            # The cordon record printed by drain's progress and by cordon itself
            rc, out, err = h.gpuctl("cordon", "hc-0", "--reason", "x\x1b]0;owned\x07")
            self.assertEqual(rc, 0, err)
            no_raw_controls(self, out + err)
            rc, out, err = h.gpuctl("uncordon", "hc-0")
            self.assertEqual(rc, 0, err)
        finally:
            h.kubectl("annotate", "node", "hc-0", "gpuctl.io/cordon-reason-")
            h.kubectl("uncordon", "hc-0", check=False)


if __name__ == "__main__":
    h.main()
