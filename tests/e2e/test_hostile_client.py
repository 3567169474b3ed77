"""Hostile input to gpuctl's Kubernetes client, end to end (issue 12, the client classes): names
that would change the request path, a gzip bomb, a continue token that never changes, malformed
list answers, header injection through credentials, secrets in messages, and Retry-After beyond
--request-timeout. The real binary runs against tests/e2e/hostile_server.py, because a real API
server never answers this way; each case asserts the exit code, a bounded run (a subprocess
deadline and an address-space limit), the one-line error and what the server received."""
import json
import os
import tempfile
import time
import unittest
import zlib

import hostile_server as hs
import harness as h

MEMORY_LIMIT = 2 << 30   # bytes of address space gpuctl may take here
DEADLINE_S = 60          # a hang guard, not a speed assertion
SECRETS = ("SECRETPW", "PROXYPW", "SECRET-TOKEN")


def bounded(kubeconfig, *args, timeout=DEADLINE_S):
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["KUBECONFIG"] = str(kubeconfig)
    return h.run_bounded(args, env, MEMORY_LIMIT, timeout)


def one_error_line(test, err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    test.assertEqual(len(lines), 1, err[:2000])
    test.assertTrue(lines[0].startswith("error:"), lines[0][:300])
    return lines[0]


def gzip_bomb_chunks(total_bytes, chunk=1 << 20):
    """A gzip stream of `total_bytes` zeros, compressed a chunk at a time (small in memory)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * chunk
    out = [z.compress(b'{"kind":"NodeList","items":[],"x":"')]
    for _ in range(total_bytes // chunk):
        part = z.compress(zeros)
        if part:
            out.append(part)
    out.append(z.flush())
    return out


class HostileClientTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gpuctl-hostile-client-")
        self.srv = hs.HostileServer().__enter__()

    def tearDown(self):
        self.srv.__exit__(None, None, None)
        self.tmp.cleanup()

    def kubeconfig(self, **kw):
        return self.srv.kubeconfig(self.tmp.name, **kw)

    # 1. data loss through the namespace
    def test_dot_namespaces_are_refused_before_any_request(self):
        kc = self.kubeconfig()
        for ns in ("..", ".", "a/b", "A"):
            with self.subTest(ns=ns):
                started = time.monotonic()
                rc, out, err = bounded(kc, "jobs", "clean", "-n", ns, "--all")
                self.assertEqual(rc, 2, err)
                line = one_error_line(self, err)
                self.assertIn("-n/--namespace", line)
                self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(self.srv.requests, [])

    def test_a_kubeconfig_namespace_with_dots_is_a_config_error(self):
        kc = self.kubeconfig(namespace="..")
        rc, _, err = bounded(kc, "jobs", "clean", "--all")
        self.assertEqual(rc, 1, err)
        self.assertIn('context "hostile"', one_error_line(self, err))
        self.assertEqual(self.srv.requests, [])

    # 5. unbounded reads
    def test_a_gzip_bomb_ends_with_exit_1_in_bounded_memory(self):
        chunks = gzip_bomb_chunks(700 << 20)
        resp = hs.Response(status=200, chunks=chunks,
                           headers=[("Content-Type", "application/json"), ("Content-Encoding", "gzip")])
        self.srv.route("GET", "/api/v1/nodes", lambda _r: resp)
        rc, _, err = bounded(self.kubeconfig(), "nodes")
        self.assertEqual(rc, 1, err[:2000])
        self.assertIn("MiB after decompression", one_error_line(self, err))

    def test_a_continue_token_that_repeats_ends_the_list(self):
        page = hs.node_list([hs.gpu_node("hc-0")], cont="same")
        self.srv.route("GET", "/api/v1/nodes", hs.json_body(page))
        rc, _, err = bounded(self.kubeconfig(), "nodes")
        self.assertEqual(rc, 1, err)
        self.assertIn("same continue token twice", one_error_line(self, err))
        self.assertEqual(len(self.srv.requests_to("/api/v1/nodes")), 2)

    # 6. malformed answers read as empty
    def test_a_list_without_items_is_an_error_not_an_empty_list(self):
        for body in (b"", b"null", b"{}", b"[]", b'{"items":{}}'):
            with self.subTest(body=body):
                self.srv.route("GET", "/api/v1/nodes", hs.raw(body))
                rc, out, err = bounded(self.kubeconfig(), "nodes")
                self.assertEqual(rc, 1, out + err)
                self.assertIn("/api/v1/nodes", one_error_line(self, err))
                self.assertNotIn("No GPU nodes", out + err)

    # 7. header injection
    def test_control_characters_in_credentials_send_nothing(self):
        # hostile_server speaks plain http, where (as in clientcmd) tokens are never sent at all;
        # impersonation is. Tokens, tokenFile and exec tokens are covered by the unit tests.
        users = {
            "as-groups": {"token": "t", "as": "alice", "as-groups": ["dev\nImpersonate-Group: system:masters"]},
            "as (impersonated user)": {"token": "t", "as": "alice\r\nImpersonate-Group: system:masters"},
        }
        for field, user in users.items():
            with self.subTest(field=field):
                kc = self.kubeconfig(user=user)
                rc, _, err = bounded(kc, "nodes")
                self.assertEqual(rc, 1, err)
                line = one_error_line(self, err)
                self.assertIn(field + " contains a control character", line)
                self.assertNotIn("system:masters", line)
        self.assertEqual(self.srv.requests, [])

    # 8. secrets in errors
    def _secret_kubeconfig(self, server):
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server, "proxy-url": "http://proxyuser:PROXYPW@127.0.0.1:9"}}],
            "users": [{"name": "u", "user": {"token": "SECRET-TOKEN"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }
        p = os.path.join(self.tmp.name, "secret.kubeconfig")
        with open(p, "w") as f:
            json.dump(cfg, f)
        return p

    def test_no_secret_is_printed_at_any_verbosity(self):
        # The proxy port is refused: every request fails in transport, quoting server and proxy.
        kc = self._secret_kubeconfig("http://user:SECRETPW@127.0.0.1:%d" % self.srv.port)
        for v in range(0, 10):
            with self.subTest(v=v):
                rc, out, err = bounded(kc, "nodes", "-v", str(v), "--request-timeout", "5s")
                self.assertEqual(rc, 1, err)
                for s in SECRETS:
                    self.assertNotIn(s, out + err)

    def test_no_secret_in_401_and_500_answers(self):
        self.srv.route("GET", "/api/v1/nodes", hs.status_body(401, "Unauthorized", "Unauthorized"))
        self.srv.route("GET", "/api/v1/pods", hs.raw(b"boom", status=500, content_type="text/plain"))
        cfg = self.kubeconfig(server="http://user:SECRETPW@127.0.0.1:%d" % self.srv.port,
                              user={"token": "SECRET-TOKEN"})
        for v in (0, 1, 2, 9):
            with self.subTest(v=v):
                rc, out, err = bounded(cfg, "nodes", "-v", str(v))
                self.assertEqual(rc, 1, err)
                for s in SECRETS:
                    self.assertNotIn(s, out + err)

    # 10. retries beyond the deadline
    def test_retry_after_beyond_the_request_timeout_fails_fast_and_says_so(self):
        self.srv.route("GET", "/api/v1/nodes", hs.status_body(429, "TooManyRequests", "slow down",
                                                              headers=[("Retry-After", "60")]))
        started = time.monotonic()
        rc, _, err = bounded(self.kubeconfig(), "nodes", "--request-timeout", "3s")
        self.assertEqual(rc, 1, err)
        self.assertLess(time.monotonic() - started, 20)
        self.assertIn("throttling", one_error_line(self, err))

    def test_a_short_throttle_is_announced_on_stderr(self):
        calls = []

        def answer(req):
            calls.append(req)
            if len(calls) == 1:
                return hs.status_body(429, "TooManyRequests", "slow down", headers=[("Retry-After", "1")])(req)
            return hs.json_body(hs.node_list([]))(req)
        self.srv.route("GET", "/api/v1/nodes", answer)
        rc, out, err = bounded(self.kubeconfig(), "nodes", "--request-timeout", "10s")
        self.assertIn("waiting 1s: the API server is throttling requests (429, Retry-After)", err)

    # 13. duration grammar
    def test_a_malformed_request_timeout_is_a_usage_error(self):
        for bad in ("1.2.3s", "s", "1", "5x"):
            with self.subTest(bad=bad):
                rc, _, err = bounded(self.kubeconfig(), "nodes", "--request-timeout", bad)
                self.assertEqual(rc, 2, err)
                self.assertIn("invalid duration", one_error_line(self, err))
        self.assertEqual(self.srv.requests, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
