"""gpuctl's config file against the real cluster and sshd hosts: the ssh settings given only through
the file reach the nodes; the section of the kubeconfig context in use wins over the top level; a
GPUCTL_SSH_* variable wins over the file and a flag over the variable (seen in `config view` and in
a wrong port failing ssh); a bad file is one line naming the file and the key, exit 1, no request."""
import json
import os
import shutil
import tempfile

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=config-e2e"
NODES = ["cfg-v100-0", "cfg-v100-1"]
CLOSED_PORT = 1  # nothing listens there: ssh is refused at once


def ssh_section(port):
    """The cluster's ssh settings as the file's ssh section, with no ssh_config (-F) to lean on."""
    s = h.info()["ssh"]
    return {"user": s["user"], "port": port, "identity": s["identity_file"], "knownHosts": s["known_hosts_file"],
            "options": ["StrictHostKeyChecking=yes", "IdentitiesOnly=yes", "PasswordAuthentication=no"],
            "timeout": "20s", "connectTimeout": "3s"}


class ConfigTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("config")
        cls.dir = tempfile.mkdtemp(prefix="gpuctl-config-e2e-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.port = h.info()["ssh"]["port"]

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))  # JSON is YAML
        return path

    def run_gpuctl(self, config_path, *args, env=None):
        # Only the file: no GPUCTL_SSH_* from the shell running the suite, no ~/.ssh/config.
        e = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_SSH_")}
        e.update({"GPUCTL_CONFIG": config_path, "HOME": self.dir}, **(env or {}))
        e["KUBECONFIG"] = h.info()["kubeconfig"]
        return h._run([h.gpuctl_bin(), *map(str, args)], env=e, timeout=120)

    def outcomes(self, result):
        doc = json.loads(result.stdout)
        return {i["name"]: i["outcome"] for i in doc["items"]}

    def test_ssh_settings_only_from_the_file_reach_the_hosts(self):
        path = self.write("only-file.yaml", {"ssh": ssh_section(self.port), "output": "json"})
        r = self.run_gpuctl(path, "gpus", "-l", SELECTOR)  # -o json from the file
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(self.outcomes(r), {n: "ok" for n in NODES})
        view = json.loads(self.run_gpuctl(path, "config", "view").stdout)  # output: json applies here too
        self.assertEqual(view["file"], {"path": path, "namedBy": "GPUCTL_CONFIG", "found": True})
        sources = {s["key"]: s["source"] for s in view["settings"]}
        for key in ("ssh.user", "ssh.port", "ssh.identity", "ssh.knownHosts", "ssh.options", "output"):
            self.assertEqual(sources[key], "file", key)

    def test_the_context_section_wins_over_the_top_level(self):
        # Top level: a port nothing listens on; the current context (admin) has the right one.
        path = self.write("contexts.yaml", {"ssh": ssh_section(CLOSED_PORT),
                                            "contexts": {"admin": {"ssh": {"port": self.port}}}})
        r = self.run_gpuctl(path, "gpus", "-l", SELECTOR, "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(self.outcomes(r), {n: "ok" for n in NODES})
        view = json.loads(self.run_gpuctl(path, "config", "view", "-o", "json").stdout)
        self.assertEqual(view["context"], {"name": "admin", "from": "kubeconfig", "section": True})
        port = next(s for s in view["settings"] if s["key"] == "ssh.port")
        self.assertEqual((port["value"], port["source"], port["origin"]),
                         (self.port, "fileContext", "contexts.admin.ssh.port"))
        # Another context (viewer may list nodes and pods) has no section: the top level's port.
        r = self.run_gpuctl(path, "gpus", "-l", SELECTOR, "-o", "json", "--context", "viewer")
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(self.outcomes(r), {n: "unreachable" for n in NODES})

    def test_env_beats_the_file_and_a_flag_beats_env(self):
        path = self.write("env.yaml", {"ssh": ssh_section(self.port)})
        bad_env = {"GPUCTL_SSH_PORT": str(CLOSED_PORT)}
        r = self.run_gpuctl(path, "gpus", "-l", SELECTOR, "-o", "json", env=bad_env)
        self.assertEqual(r.rc, 1, r.stderr)
        self.assertEqual(self.outcomes(r), {n: "unreachable" for n in NODES})
        view = json.loads(self.run_gpuctl(path, "config", "view", "-o", "json", env=bad_env).stdout)
        port = next(s for s in view["settings"] if s["key"] == "ssh.port")
        self.assertEqual((port["value"], port["source"]), (CLOSED_PORT, "env"))

        r = self.run_gpuctl(path, "gpus", "-l", SELECTOR, "-o", "json", "--ssh-port", self.port, env=bad_env)
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(self.outcomes(r), {n: "ok" for n in NODES})
        view = json.loads(self.run_gpuctl(path, "config", "view", "-o", "json", "--ssh-port", self.port,
                                          env=bad_env).stdout)
        port = next(s for s in view["settings"] if s["key"] == "ssh.port")
        self.assertEqual((port["value"], port["source"]), (self.port, "flag"))

    def test_a_bad_file_is_one_line_naming_file_and_key_before_any_request(self):
        cases = [
            ("bad-yaml.yaml", "ssh: [\n", ": line 2, column 1: not valid YAML"),
            ("unknown-key.yaml", "ssh:\n  usr: root\n", ': ssh.usr: unknown key (did you mean "user"?)'),
            ("wrong-type.yaml", "contexts:\n  admin:\n    ssh:\n      port: [22]\n",
             ": contexts.admin.ssh.port: expected a single value, got a list"),
            ("out-of-range.yaml", "ssh:\n  fanout: 5000\n", ": ssh.fanout: Value 5000 not in range 1 to 1024"),
        ]
        for name, text, expected in cases:
            with self.subTest(name):
                path = self.write(name, text)
                # -v 1 would log every request on stderr: there must be none.
                r = self.run_gpuctl(path, "gpus", "-l", SELECTOR, "-v", "1")
                self.assertEqual(r.rc, 1, r.stderr)
                self.assertEqual(r.stdout, "")
                self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
                self.assertTrue(r.stderr.startswith("error: " + path + expected), r.stderr)
        r = self.run_gpuctl(os.path.join(self.dir, "missing.yaml"), "nodes")
        self.assertEqual(r.rc, 1)
        self.assertIn("missing.yaml: cannot read: No such file or directory (named by GPUCTL_CONFIG)", r.stderr)


if __name__ == "__main__":
    h.main()
