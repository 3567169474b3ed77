"""gpuctl as a kubectl plugin, end to end: `cmake --install` into a temporary prefix, then the
local cluster's own kubectl, with a PATH that holds only the installed bin folder, finds
kubectl-gpu (`kubectl plugin list`), runs `kubectl gpu nodes` against the cluster, passes gpuctl's
exit codes through, and completes `kubectl gpu <TAB>` (subcommands, node names from the cluster)
through the installed kubectl_complete-gpu.

The build folder comes from GPUCTL_BUILD_DIR, else the folder of GPUCTL_BIN (build/gpuctl)."""
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import harness as h

FLEET = """
name: kubectl-plugin
nodes:
  - name: kplug-gpu-0
    gpus: 2
  - name: kplug-gpu-1
    gpus: 4
"""
SELECTOR = "e2e.gpuctl.dev/fleet=kubectl-plugin"
NODES = ["kplug-gpu-0", "kplug-gpu-1"]


def build_dir():
    d = os.environ.get("GPUCTL_BUILD_DIR") or str(Path(h.gpuctl_bin()).resolve().parent)
    if not (Path(d) / "cmake_install.cmake").is_file():
        raise h.HarnessError("%s is not a CMake build folder (no cmake_install.cmake): set GPUCTL_BUILD_DIR" % d)
    return Path(d)


def cmake_of(build):
    """The cmake that configured the build (its cache names it), so the install matches it."""
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith("CMAKE_COMMAND:"):
            return line.split("=", 1)[1]
    return shutil.which("cmake") or "cmake"


def help_commands(gpuctl):
    """gpuctl's commands as --help lists them (the sections that are not options)."""
    out = subprocess.run([gpuctl, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    commands, section = [], ""
    for line in out.splitlines():
        if re.match(r"^[A-Z][A-Za-z ]*:$", line):
            section = line
        elif "Options" not in section and re.match(r"^  [a-z]", line):
            commands.append(line.split()[0])
    return commands


class KubectlPluginTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet(FLEET, source="test_kubectl_plugin.py")
        cls.tmp = Path(tempfile.mkdtemp(prefix="gpuctl-kubectl-plugin-"))
        cls.prefix = cls.tmp / "prefix"
        build = build_dir()
        r = subprocess.run([cmake_of(build), "--install", str(build), "--strip", "--prefix", str(cls.prefix)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise h.HarnessError("cmake --install failed:\n" + r.stdout)
        cls.bin = cls.prefix / "bin"
        (cls.tmp / "home").mkdir()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kubectl(self, *args, context="admin"):
        """The cluster's kubectl with PATH = the installed bin folder only (kubectl is a static Go
        binary and needs nothing else; `gpuctl nodes` runs no other program) and its own HOME, so
        no plugin or cache of this machine's user takes part."""
        env = {"PATH": str(self.bin), "HOME": str(self.tmp / "home"),
               "KUBECONFIG": h.info()["kubeconfigs"][context]}
        p = subprocess.run([h.info()["kubectl"], *args], env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def test_install_puts_kubectl_gpu_beside_gpuctl(self):
        self.assertEqual(os.readlink(self.bin / "kubectl-gpu"), "gpuctl")
        self.assertTrue(os.access(self.bin / "gpuctl", os.X_OK))

    def test_plugin_list_shows_kubectl_gpu(self):
        rc, out, err = self.kubectl("plugin", "list")
        self.assertEqual(rc, 0, err)
        self.assertIn(str(self.bin / "kubectl-gpu"), out.splitlines())
        # No "overshadowed" or "not executable" warnings about it.
        self.assertNotIn("kubectl-gpu", err)

    def test_kubectl_gpu_nodes_lists_this_suites_nodes(self):
        rc, out, err = self.kubectl("gpu", "nodes", "-l", SELECTOR, "-o", "json")
        self.assertEqual(rc, 0, err)
        # The same answer as gpuctl's own, through kubectl.
        direct = h.gpuctl("nodes", "-l", SELECTOR, "-o", "json")
        self.assertEqual(direct.rc, 0, direct.stderr)
        def timeless(doc):  # the two runs may fall on either side of a second: ages differ
            for item in doc["items"]:
                item.pop("ageSeconds")
            return doc
        self.assertEqual(timeless(json.loads(out)), timeless(direct.json))
        names = sorted(n["name"] for n in json.loads(out)["items"])
        self.assertEqual(names, NODES)

        rc, out, err = self.kubectl("gpu", "nodes", "-l", SELECTOR, "--no-headers")
        self.assertEqual(rc, 0, err)
        self.assertEqual([line.split()[0] for line in out.splitlines()], NODES)

    def test_exit_codes_pass_through(self):
        rc, out, err = self.kubectl("gpu", "nodes", "--no-such-flag")
        self.assertEqual(rc, 2, out + err)  # gpuctl's usage error, not kubectl's 1
        self.assertEqual(out, "")
        self.assertIn("--no-such-flag", err)
        rc, out, err = self.kubectl("gpu", "nodes", "-l", SELECTOR, context="nobody")
        self.assertEqual(rc, 1, out + err)  # 403 on listing nodes: gpuctl's failure code
        self.assertIn("forbidden", err.lower())

    def test_kubectl_completes_gpu_subcommands(self):
        # kubectl (>= 1.26) runs kubectl_complete-gpu, installed beside kubectl-gpu, for `kubectl gpu <TAB>`.
        self.assertTrue((self.bin / "kubectl_complete-gpu").is_file())
        rc, out, err = self.kubectl("__complete", "gpu", "")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertRegex(lines[-1], r"^:\d+$")  # cobra's protocol: candidates, then :directive
        offered = {line.split("\t")[0] for line in lines[:-1]}
        expected = set(help_commands(str(self.bin / "gpuctl")))
        self.assertGreaterEqual(len(expected), 10)
        self.assertEqual(expected - offered, set())
        rc, out, err = self.kubectl("__complete", "gpu", "no")
        self.assertEqual(rc, 0, err)
        self.assertIn("nodes", [line.split("\t")[0] for line in out.splitlines()[:-1]])
        # Node names come from the cluster kubectl's KUBECONFIG points at.
        rc, out, err = self.kubectl("__complete", "gpu", "cordon", "kplug-")
        self.assertEqual(rc, 0, err)
        self.assertEqual({line.split("\t")[0] for line in out.splitlines()[:-1]}, set(NODES))


if __name__ == "__main__":
    h.main()
