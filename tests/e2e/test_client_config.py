"""The foundation against the real API server: every way a kubeconfig can say "which server, as
whom" (client certificates in three key formats, static and file tokens, exec credential
plugins with rotation after a 401, TLS options, HTTP and SOCKS5 proxies, merged KUBECONFIG files),
and the errors an admin sees when one of them is wrong."""
import base64
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

import harness as h


def b64(path):
    return base64.b64encode(Path(path).read_bytes()).decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    h.wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, timeout,
               "a listener on 127.0.0.1:%d" % port)


class ClientConfigTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.info = h.info()
        cls.tmp = Path(tempfile.mkdtemp(prefix="gpuctl-e2e-kubeconfig-"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------

    def kubeconfig(self, name, cluster=None, user=None, extra=None):
        """Writes a one-context kubeconfig; cluster/user are merged over admin's defaults."""
        c = {"server": self.info["api_server"], "certificate-authority-data": b64(self.info["ca_file"])}
        c.update(cluster or {})
        c = {k: v for k, v in c.items() if v is not None}
        admin = self.info["client_certs"]["admin"]
        u = {"client-certificate-data": b64(admin["cert"]), "client-key-data": b64(admin["key"])} if user is None else user
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
               "clusters": [{"name": "c", "cluster": c}], "users": [{"name": "u", "user": u}],
               "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]}
        doc.update(extra or {})
        p = self.tmp / (name + ".yaml")
        p.write_text(yaml.safe_dump(doc))
        return p

    def nodes(self, kubeconfig, *args, env=None):
        e = {"KUBECONFIG": str(kubeconfig)}
        e.update(env or {})
        return h.gpuctl("nodes", "-o", "name", "--all", *args, env=e)

    def assert_works(self, r):
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertIn("node/", r.stdout)

    def assert_one_line_error(self, r, *fragments, rc=1):
        self.assertEqual(r.rc, rc, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("error: "), r.stderr)
        for f in fragments:
            self.assertIn(f, r.stderr)

    def plugin(self, name, body):
        p = self.tmp / name
        p.write_text("#!/bin/sh\nset -eu\n" + body)
        p.chmod(0o755)
        return p

    # -- credentials ------------------------------------------------------------------------

    def test_client_certificates_in_every_key_format(self):
        # admin: PKCS#1 RSA, viewer: PKCS#8 RSA, nobody: EC (nobody may authenticate, then is forbidden)
        for identity in ("admin", "viewer"):
            cert = self.info["client_certs"][identity]
            self.assert_works(self.nodes(self.kubeconfig("cert-" + identity, user={
                "client-certificate-data": b64(cert["cert"]), "client-key-data": b64(cert["key"])})))
        nobody = self.info["client_certs"]["nobody"]
        r = self.nodes(self.kubeconfig("cert-nobody", user={"client-certificate": nobody["cert"], "client-key": nobody["key"]}))
        self.assert_one_line_error(r, 'User "nobody" cannot list resource "nodes"')

    def test_static_token_and_token_file(self):
        self.assert_works(self.nodes(self.kubeconfig("token", user={"token": self.info["tokens"]["token"]})))
        tf = self.tmp / "token-file"
        tf.write_text(self.info["tokens"]["token"] + "\n")
        self.assert_works(self.nodes(self.kubeconfig("token-file", user={"tokenFile": str(tf)})))
        self.assert_one_line_error(self.nodes(self.kubeconfig("bad-token", user={"token": "not-a-token"})), "unauthorized")

    def test_exec_plugin_token_v1(self):
        info_file = self.tmp / "exec-info.json"
        plugin = self.plugin("token-plugin.sh", """
printf '%%s' "$KUBERNETES_EXEC_INFO" > "%s"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}'
""" % (info_file, self.info["tokens"]["token"]))
        kc = self.kubeconfig("exec-v1", user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never",
            "provideClusterInfo": True}})
        self.assert_works(self.nodes(kc))
        import json
        exec_info = json.loads(info_file.read_text())
        self.assertEqual(exec_info["kind"], "ExecCredential")
        self.assertEqual(exec_info["spec"]["cluster"]["server"], self.info["api_server"])
        self.assertEqual(exec_info["spec"]["cluster"]["certificate-authority-data"], b64(self.info["ca_file"]))
        self.assertFalse(exec_info["spec"]["interactive"])

    def test_exec_plugin_client_certificate_v1beta1(self):
        admin = self.info["client_certs"]["admin"]
        plugin = self.plugin("cert-plugin.sh", """
cert=$(sed ':a;N;$!ba;s/\\n/\\\\n/g' "%s")
key=$(sed ':a;N;$!ba;s/\\n/\\\\n/g' "%s")
printf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"clientCertificateData":"%%s","clientKeyData":"%%s"}}' "$cert" "$key"
""" % (admin["cert"], admin["key"]))
        kc = self.kubeconfig("exec-cert", user={"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}})
        self.assert_works(self.nodes(kc))

    def test_exec_plugin_rerun_once_after_401(self):
        count = self.tmp / "rotation-count"
        count.write_text("")
        # First run hands out a token the server rejects (revoked early), later runs the good one.
        plugin = self.plugin("rotating-plugin.sh", """
echo run >> "%s"
if [ "$(wc -l < "%s")" -eq 1 ]; then token=revoked-token; else token=%s; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%%s","expirationTimestamp":"2099-01-01T00:00:00Z"}}' "$token"
""" % (count, count, self.info["tokens"]["token"]))
        kc = self.kubeconfig("exec-rotate", user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}})
        r = self.nodes(kc, "-v", "1")
        self.assert_works(r)
        self.assertEqual(len(count.read_text().splitlines()), 2, "the plugin runs once more after the 401, not per request")
        sent = [l.split()[1:3] for l in r.stderr.splitlines() if l.startswith("GET ")]
        # The reads run at once (nodes, pods, DRA discovery): some carried the revoked token, and
        # each refused request was sent again once, with the one new credential, and then read.
        by_url = {}
        for url, status in sent:
            by_url.setdefault(url, []).append(status)
        self.assertIn(["401", "200"], by_url.values(), r.stderr)
        for url, statuses in by_url.items():
            self.assertIn(statuses, (["200"], ["401", "200"]), url + "\n" + r.stderr)

    def test_exec_plugin_failures_are_clear(self):
        failing = self.plugin("failing-plugin.sh", 'echo "token expired, run: login" >&2\nexit 3\n')
        r = self.nodes(self.kubeconfig("exec-fail", user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(failing), "interactiveMode": "Never"}}))
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stdout, "")
        self.assertIn("token expired, run: login", r.stderr, "the plugin's own stderr reaches the user")
        self.assertIn("exit", r.stderr.splitlines()[-1])
        missing = self.nodes(self.kubeconfig("exec-missing", user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "gke-gcloud-auth-plugin-not-installed",
            "interactiveMode": "Never", "installHint": "Install it with: gcloud components install gke-gcloud-auth-plugin"}}))
        self.assert_one_line_error(missing, "gke-gcloud-auth-plugin-not-installed", "gcloud components install")

    def test_exec_plugin_that_floods_stdout_is_stopped(self):
        # A broken plugin writing without end: stopped at the limit instead of filling memory.
        flood = self.plugin("flood-plugin.sh", 'exec yes "{}"\n')
        r = self.nodes(self.kubeconfig("exec-flood", user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(flood), "interactiveMode": "Never"}}))
        self.assert_one_line_error(r, "wrote more than 4 MiB to stdout", "flood-plugin.sh")

    def test_slow_exec_plugin_is_announced_and_still_awaited(self):
        # Like kubectl, gpuctl waits for a plugin (it may wait for a browser login), but says so.
        slow = self.plugin("slow-plugin.sh", """sleep 7
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}'
""" % self.info["tokens"]["token"])
        r = self.nodes(self.kubeconfig("exec-slow", user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(slow), "interactiveMode": "Never"}}))
        self.assert_works(r)
        self.assertIn("still waiting for the exec credential plugin " + str(slow), r.stderr)
        self.assertIn("Ctrl-C stops it", r.stderr)

    # -- TLS --------------------------------------------------------------------------------

    def test_tls_server_name(self):
        self.assert_works(self.nodes(self.kubeconfig("sni-ok", cluster={"tls-server-name": "localhost"})))
        r = self.nodes(self.kubeconfig("sni-bad", cluster={"tls-server-name": "wrong.example.invalid"}))
        self.assert_one_line_error(r, "certificate", "tls-server-name")

    def test_insecure_skip_tls_verify(self):
        self.assert_works(self.nodes(self.kubeconfig("insecure", cluster={
            "certificate-authority-data": None, "insecure-skip-tls-verify": True})))
        r = self.nodes(self.kubeconfig("insecure-and-ca", cluster={"insecure-skip-tls-verify": True}))
        self.assert_one_line_error(r, "specifying a root certificates file with the insecure flag is not allowed")

    def test_unknown_ca_is_refused(self):
        other_ca = self.tmp / "other-ca"
        other_ca.mkdir(exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=other-ca", "-days", "1",
                        "-keyout", str(other_ca / "k.pem"), "-out", str(other_ca / "c.pem")], check=True, capture_output=True)
        r = self.nodes(self.kubeconfig("wrong-ca", cluster={"certificate-authority-data": b64(other_ca / "c.pem")}))
        self.assert_one_line_error(r, "could not be verified", "certificate-authority")

    # -- proxies ----------------------------------------------------------------------------

    def test_http_proxy(self):
        port = free_port()
        conf = self.tmp / "tinyproxy.conf"
        log = self.tmp / "tinyproxy.log"
        # No ConnectPort lines: CONNECT to any port (the API server's is random).
        conf.write_text("Port %d\nListen 127.0.0.1\nAllow 127.0.0.1\nLogFile \"%s\"\nLogLevel Connect\nMaxClients 10\n" % (port, log))
        proxy = subprocess.Popen(["tinyproxy", "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proxy.kill)
        wait_port(port)
        self.assert_works(self.nodes(self.kubeconfig("http-proxy", cluster={"proxy-url": "http://127.0.0.1:%d" % port})))
        api_port = self.info["api_server"].rsplit(":", 1)[1]
        self.assertIn("CONNECT 127.0.0.1:%s" % api_port, log.read_text(), "the request went through the proxy")

    def test_socks5_proxy(self):
        port = free_port()
        log = (self.tmp / "microsocks.log").open("w")
        proxy = subprocess.Popen(["microsocks", "-i", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: proxy.poll() is not None or proxy.kill())
        wait_port(port)
        kc = self.kubeconfig("socks5", cluster={"proxy-url": "socks5://127.0.0.1:%d" % port})
        self.assert_works(self.nodes(kc))
        # Proof the request used the proxy: with the proxy gone, the same kubeconfig cannot connect.
        proxy.kill()
        proxy.wait(10)
        r = self.nodes(kc)
        self.assert_one_line_error(r, "through the proxy socks5://127.0.0.1:%d" % port, "proxy-url")

    def test_unsupported_proxy_scheme(self):
        r = self.nodes(self.kubeconfig("ftp-proxy", cluster={"proxy-url": "ftp://127.0.0.1:21"}))
        self.assert_one_line_error(r, "proxy-url", "ftp")

    # -- files, contexts, errors --------------------------------------------------------------

    def test_kubeconfig_list_merges_first_wins(self):
        # File one: current-context and a context whose user lives in file two; a later
        # definition of the same user (bad token) must not win over the first.
        admin = self.info["client_certs"]["admin"]
        one = self.tmp / "merge-one.yaml"
        two = self.tmp / "merge-two.yaml"
        one.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "merged",
                                       "contexts": [{"name": "merged", "context": {"cluster": "c", "user": "u"}}],
                                       "users": [{"name": "u", "user": {"client-certificate": admin["cert"], "client-key": admin["key"]}}]}))
        two.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "other",
                                       "clusters": [{"name": "c", "cluster": {"server": self.info["api_server"],
                                                                              "certificate-authority": self.info["ca_file"]}}],
                                       "users": [{"name": "u", "user": {"token": "wrong"}}]}))
        missing = self.tmp / "does-not-exist.yaml"
        self.assert_works(self.nodes("%s:%s:%s" % (missing, one, two)))

    def test_explicit_kubeconfig_and_context_errors(self):
        r = h.gpuctl("nodes", "--kubeconfig", str(self.tmp / "nope.yaml"))
        self.assert_one_line_error(r, str(self.tmp / "nope.yaml"))
        r = h.gpuctl("nodes", "--context", "no-such-context")
        self.assert_one_line_error(r, "no-such-context")
        self.assert_works(h.gpuctl("nodes", "-o", "name", "--all", "--context", "viewer"))

    def test_unreachable_server_and_timeouts(self):
        closed = free_port()
        r = self.nodes(self.kubeconfig("closed", cluster={"server": "https://127.0.0.1:%d" % closed}))
        self.assert_one_line_error(r, "cannot connect to the API server https://127.0.0.1:%d" % closed)
        # A listener that never answers: the request deadline ends it.
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        self.addCleanup(silent.close)
        port = silent.getsockname()[1]
        started = time.time()
        r = self.nodes(self.kubeconfig("silent", cluster={"server": "https://127.0.0.1:%d" % port}), "--request-timeout", "2s")
        self.assert_one_line_error(r, "timed out", "--request-timeout")
        self.assertLess(time.time() - started, 30)


if __name__ == "__main__":
    h.main()
