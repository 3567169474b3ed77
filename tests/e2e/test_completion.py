"""gpuctl's shell completion in real shells against the real cluster: bash with bash-completion
and without it, zsh's compinit and fish, each driven through its own tmux server with a private
HOME (completion_shells.py). Asserted is what the terminal shows after TAB: subcommands, flag
values, node names and namespaces from the cluster, contexts from the kubeconfig, file names; an
unreachable API server costs at most the deadline and puts no error text on the screen; names are
cached per user in private files for the ttl.

Own names: nodes cmpl-* (fleet "completion"), namespaces cmpl-ns-*."""
import os
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import harness as h
from completion_shells import Shell

# CPU-only nodes: completion offers every node, and suites that visit every GPU node over ssh
# (gpus, nodes --live) running beside this one never meet a GPU node without a host.
FLEET = """
name: completion
nodes:
  - name: cmpl-alpha-0
  - name: cmpl-beta-0
"""
NODES = ["cmpl-alpha-0", "cmpl-beta-0"]
CACHE_TTL = 30  # seconds, as in gpuctl (cli/cmd_completion.cpp)
ERROR_WORDS = ("error", "warning", "unable", "refused", "timed out", "timeout")


class Unanswering:
    """A TCP port that accepts connections (the kernel completes the handshake) and never sends
    a byte: a TLS handshake to it waits forever."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)  # kept open, never answered

    def close(self):
        self.stop = True
        for c in self.held:
            c.close()
        self.sock.close()


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connect() is refused
    return port


def kubeconfig_for(path, port):
    Path(path).write_text("""apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}
users:
- name: someone
  user: {token: not-a-real-token}
contexts:
- name: gone
  context: {cluster: gone, user: someone}
current-context: gone
""" % port)
    return str(path)


class CompletionTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET, source="test_completion")

    def shell(self, kind, kubeconfig=None, **kw):
        sh = Shell(kind, h.gpuctl_bin(), env={"KUBECONFIG": kubeconfig or h.info()["kubeconfig"]}, **kw)
        self.addCleanup(sh.close)
        return sh

    def assert_listed(self, screen, words):
        for w in words:
            self.assertIn(w, screen.split(), "%s is not listed:\n%s" % (w, screen))

    def assert_no_error_text(self, screen):
        low = screen.lower()
        for w in ERROR_WORDS:
            self.assertNotIn(w, low, "error text on the terminal:\n%s" % screen)

    # --- bash with bash-completion --------------------------------------------------------------

    def test_bash_subcommands_and_flag_values(self):
        sh = self.shell("bash")
        line, _ = sh.complete("gpuctl dr", tabs=1)
        self.assertEqual(line, "gpuctl drain ")
        line, screen = sh.complete("gpuctl nodes -o ", tabs=2)
        self.assertEqual(line, "gpuctl nodes -o ")
        self.assert_listed(screen, ["json", "yaml", "wide"])
        line, _ = sh.complete("gpuctl nodes --output=js", tabs=1)
        self.assertEqual(line, "gpuctl nodes --output=json ")
        line, screen = sh.complete("gpuctl nodes --", tabs=2)
        self.assert_listed(screen, ["--output", "--selector"])
        # a list's next item, after the comma (diagnose --check ID,...)
        line, _ = sh.complete("gpuctl diagnose --check node-unreachable,driver-b", tabs=1)
        self.assertEqual(line, "gpuctl diagnose --check node-unreachable,driver-broken ")
        line, _ = sh.complete("gpuctl diagnose --skip=node-unreachable,driver-b", tabs=1)
        self.assertEqual(line, "gpuctl diagnose --skip=node-unreachable,driver-broken ")

    def test_bash_node_names_from_the_cluster(self):
        sh = self.shell("bash")
        line, screen = sh.complete("gpuctl cordon cmpl-", tabs=2)
        self.assertEqual(line, "gpuctl cordon cmpl-")
        self.assert_listed(screen, NODES)
        line, _ = sh.complete("gpuctl cordon cmpl-al", tabs=1)
        self.assertEqual(line, "gpuctl cordon cmpl-alpha-0 ")
        # NODE... takes more than one: the second is completed as well
        line, _ = sh.complete("gpuctl uncordon cmpl-alpha-0 cmpl-be", tabs=1)
        self.assertEqual(line, "gpuctl uncordon cmpl-alpha-0 cmpl-beta-0 ")

    def test_bash_contexts_namespaces_and_files(self):
        ns = self.namespace("cmpl-ns")
        sh = self.shell("bash")
        line, screen = sh.complete("gpuctl --context ", tabs=2)
        self.assertEqual(line, "gpuctl --context ")
        self.assert_listed(screen, list(h.info()["contexts"]))
        line, _ = sh.complete("gpuctl --context=ad", tabs=1)
        self.assertEqual(line, "gpuctl --context=admin ")
        line, _ = sh.complete("gpuctl quota set " + ns[:-3], tabs=1)
        self.assertEqual(line, "gpuctl quota set %s " % ns)
        line, _ = sh.complete("gpuctl jobs -n " + ns[:-3], tabs=1)
        self.assertEqual(line, "gpuctl jobs -n %s " % ns)
        line, _ = sh.complete("gpuctl nodes --namespace=" + ns[:-3], tabs=1)
        self.assertEqual(line, "gpuctl nodes --namespace=%s " % ns)
        # label keys of the nodes (the fleet's label is on every node the suite made)
        line, _ = sh.complete("gpuctl nodes -l e2e.gpuctl.dev/fl", tabs=1)
        self.assertEqual(line, "gpuctl nodes -l e2e.gpuctl.dev/fleet ")
        (sh.cwd / "cmpl-archive.tar.gz").write_text("")
        line, _ = sh.complete("gpuctl restore cmpl-ar", tabs=1)
        self.assertEqual(line, "gpuctl restore cmpl-archive.tar.gz ")

    def test_bash_context_and_kubeconfig_typed_on_the_line(self):
        """Names come from the cluster the line names, not from $KUBECONFIG."""
        gone = kubeconfig_for(Path(self.tmp()) / "gone.yaml", closed_port())
        sh = self.shell("bash", kubeconfig=gone)
        line, _ = sh.complete("gpuctl cordon cmpl-al", tabs=1)
        self.assertEqual(line, "gpuctl cordon cmpl-al")  # $KUBECONFIG's server is not there
        line, _ = sh.complete("gpuctl --kubeconfig %s cordon cmpl-al" % h.info()["kubeconfig"], tabs=1)
        self.assertEqual(line, "gpuctl --kubeconfig %s cordon cmpl-alpha-0 " % h.info()["kubeconfig"])

    # --- bash without bash-completion, zsh, fish ------------------------------------------------

    def test_bash_without_bash_completion(self):
        sh = self.shell("bash-plain")
        line, _ = sh.complete("gpuctl dr", tabs=1)
        self.assertEqual(line, "gpuctl drain ")
        line, screen = sh.complete("gpuctl cordon cmpl-", tabs=2)
        self.assert_listed(screen, NODES)
        line, _ = sh.complete("gpuctl cordon cmpl-be", tabs=1)
        self.assertEqual(line, "gpuctl cordon cmpl-beta-0 ")
        line, _ = sh.complete("gpuctl nodes --output=js", tabs=1)
        self.assertEqual(line, "gpuctl nodes --output=json ")

    def test_zsh(self):
        for kind in ("zsh", "zsh-fpath"):
            with self.subTest(shell=kind):
                sh = self.shell(kind)
                line, _ = sh.complete("gpuctl dr", tabs=1)
                self.assertEqual(line, "gpuctl drain ")
                line, screen = sh.complete("gpuctl d", tabs=1)  # listed with their descriptions
                self.assertRegex(screen, r"(?m)^drain +-- Cordon nodes")
                line, _ = sh.complete("gpuctl cordon cmpl-al", tabs=1)
                self.assertEqual(line, "gpuctl cordon cmpl-alpha-0 ")
                line, screen = sh.complete("gpuctl cordon cmpl-", tabs=1)
                self.assert_listed(screen, NODES)
                self.assert_values_contexts_and_files(sh)

    def assert_values_contexts_and_files(self, sh):
        """An attached flag value, a context from the kubeconfig, and a file name of the cwd."""
        line, _ = sh.complete("gpuctl nodes --output=js", tabs=1)
        self.assertEqual(line, "gpuctl nodes --output=json ")
        line, _ = sh.complete("gpuctl --context=ad", tabs=1)
        self.assertEqual(line, "gpuctl --context=admin ")
        (sh.cwd / "cmpl-archive.tar.gz").write_text("")
        line, _ = sh.complete("gpuctl restore cmpl-ar", tabs=1)
        self.assertEqual(line, "gpuctl restore cmpl-archive.tar.gz ")

    def test_fish(self):
        sh = self.shell("fish")
        sh.clear()  # fish's pager lists the names under the line, with no marker typed
        sh.type("gpuctl cordon cmpl-")
        sh.keys("Tab")
        sh.wait_screen(lambda s: all(n in s.split() for n in NODES), 10, "the nodes in fish's pager")
        line, _ = sh.complete("gpuctl dr", tabs=1)
        self.assertEqual(line, "gpuctl drain ")
        line, _ = sh.complete("gpuctl cordon cmpl-be", tabs=1)
        self.assertEqual(line, "gpuctl cordon cmpl-beta-0 ")
        self.assert_values_contexts_and_files(sh)

    # --- an unreachable API server ----------------------------------------------------------------

    def tmp(self):
        d = tempfile.mkdtemp(prefix="gpuctl-cmpl-test-")
        self.addCleanup(subprocess.run, ["rm", "-rf", d])
        return d

    def timed_complete(self, kubeconfig, *words):
        cache = self.tmp()
        env = dict(os.environ, KUBECONFIG=kubeconfig, XDG_CACHE_HOME=cache)
        t0 = time.monotonic()
        p = subprocess.run([h.gpuctl_bin(), "__complete", *words], env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        return time.monotonic() - t0, p

    def check_unreachable(self, port):
        kubeconfig = kubeconfig_for(Path(self.tmp()) / "kubeconfig", port)
        took, p = self.timed_complete(kubeconfig, "cordon", "")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(took, 2.0)
        self.assertEqual(p.stdout, ":4\n")
        self.assertEqual(p.stderr, "")
        for kind in ("bash", "bash-plain", "zsh", "zsh-fpath", "fish"):
            with self.subTest(shell=kind):
                sh = self.shell(kind, kubeconfig=kubeconfig)
                # One TAB: bash asks again on the second, and each ask may take the deadline
                line, screen = sh.complete("gpuctl cordon ", tabs=1)
                self.assertEqual(line, "gpuctl cordon ")
                self.assertLess(sh.last_tab_seconds, 2.5, "TAB took %.1fs" % sh.last_tab_seconds)
                self.assert_no_error_text(screen)

    def test_server_that_never_answers(self):
        server = Unanswering()
        self.addCleanup(server.close)
        self.check_unreachable(server.port)
        self.assertTrue(server.held, "gpuctl never connected to the unanswering server")

    def test_closed_port(self):
        self.check_unreachable(closed_port())

    # --- the cache -------------------------------------------------------------------------------

    def test_cache_is_private_and_expires(self):
        sh = self.shell("bash")
        line, screen = sh.complete("gpuctl cordon cmpl-", tabs=2)
        self.assert_listed(screen, NODES)
        folder = sh.cache / "gpuctl" / "completion"
        self.assertEqual(stat.S_IMODE(folder.stat().st_mode), 0o700)
        self.assertEqual(stat.S_IMODE((sh.cache / "gpuctl").stat().st_mode), 0o700)
        entries = list(folder.iterdir())
        self.assertEqual(len(entries), 1, entries)
        self.assertEqual(stat.S_IMODE(entries[0].stat().st_mode), 0o600)
        self.assertTrue(set(NODES) <= set(entries[0].read_text().splitlines()), entries[0].read_text())

        # A node made after the first TAB: the cached names are offered for the ttl ...
        late = "cmpl-late-%s" % uuid.uuid4().hex[:6]
        h.apply_fleet("name: completion-%s\nnodes:\n  - name: %s\n" % (late, late), source="test_completion")
        h.wait_for(lambda: h.kubectl("get", "node", late, check=False).rc == 0, 60, "node " + late)
        line, _ = sh.complete("gpuctl cordon " + late[:-2], tabs=1)
        self.assertEqual(line, "gpuctl cordon " + late[:-2])
        # ... and the server's once the entry is older than that
        old = time.time() - CACHE_TTL - 5
        os.utime(entries[0], (old, old))
        line, _ = sh.complete("gpuctl cordon " + late[:-2], tabs=1)
        self.assertEqual(line, "gpuctl cordon %s " % late)
        self.assertGreater(entries[0].stat().st_mtime, old + CACHE_TTL)  # written afresh
        self.assertIn(late, entries[0].read_text().splitlines())

if __name__ == "__main__":
    h.main()
