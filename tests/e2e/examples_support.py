"""What test_examples.py needs besides harness: the installed-tools folder, JUnit reading, the
drain ground, the objects onboarding writes, bound claims and a crontab reader."""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import namedtuple
from pathlib import Path

import harness as h
from faults_common import reset_node  # noqa: F401 (the examples' tests reset nodes as the drain suites do)

XSD = h.HERE.parent / "fixtures" / "junit" / "jenkins-xunit__junit-10.xsd"


def install_bin(folder, tools):
    """A folder of symlinks {name: target}, put first on PATH as tools installed there would be."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    for name, target in tools.items():
        os.symlink(os.path.abspath(target), folder / name)
    return folder


# -- JUnit -----------------------------------------------------------------------------------------


def valid_junit(test, xml_text):
    """The report parsed, after xmllint validated it against junit-10.xsd (Jenkins' xunit schema)."""
    xmllint = shutil.which("xmllint")
    test.assertTrue(xmllint, "xmllint is missing: apt-get install libxml2-utils (scripts/install-deps.sh)")
    p = subprocess.run([xmllint, "--noout", "--schema", str(XSD), "-"], input=xml_text, capture_output=True,
                       text=True)
    test.assertEqual(p.returncode, 0, "junit-10.xsd refuses the report:\n%s\n%s" % (p.stderr, xml_text[:4000]))
    return ET.fromstring(xml_text.encode())


def junit_failures(root):
    """{testsuite name: [names of its failing testcases]} for the suites with a failure."""
    failed = {}
    for suite in root.iter("testsuite"):
        names = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
        if names:
            failed[suite.get("name")] = names
    return failed


# -- drain ground ----------------------------------------------------------------------------------


def pods_on(node, ns):
    items = h.kubectl("get", "pods", "-n", ns, "--field-selector", "spec.nodeName=" + node, "-o", "json")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def pod_per_node(ns, nodes):
    """A one-replica Deployment pinned to each node; {node: its running pod's uid}."""
    objs = []
    for i, node in enumerate(nodes):
        spec = h.pod_spec(gpus=1, node=node)
        spec["terminationGracePeriodSeconds"] = 1
        spec["restartPolicy"] = "Always"
        objs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w%d" % i, "namespace": ns},
                     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "w%d" % i}},
                              "template": {"metadata": {"labels": {"app": "w%d" % i}}, "spec": spec}}})
    h.create(objs)

    def running():
        found = {}
        for node in nodes:
            pods = [p for p in pods_on(node, ns) if p["status"].get("phase") == "Running"]
            if len(pods) != 1:
                return None
            found[node] = pods[0]["metadata"]["uid"]
        return found
    return h.wait_for(running, 90, "a running pod on each of %s" % ", ".join(nodes))


# -- onboarding ------------------------------------------------------------------------------------


def gpu_limits(ns):
    """The quota's hard limits and the LimitRange's nvidia.com/gpu max per type."""
    q = h.kubectl("get", "resourcequota", "gpuctl-gpu-quota", "-n", ns, "-o", "json")
    lr = h.kubectl("get", "limitrange", "gpuctl-gpu-limits", "-n", ns, "-o", "json")
    return {"quota": q["spec"]["hard"],
            "max": {l["type"]: l["max"]["nvidia.com/gpu"] for l in lr["spec"]["limits"] if "nvidia.com/gpu" in
                    l.get("max", {})}}


def resource_versions(ns):
    return [h.kubectl("get", kind, name, "-n", ns, "-o", "json")["metadata"]["resourceVersion"]
            for kind, name in (("namespace", ns), ("resourcequota", "gpuctl-gpu-quota"),
                               ("limitrange", "gpuctl-gpu-limits"))]


# -- claims ----------------------------------------------------------------------------------------


def bound_claim(ns, claim, mode, size="100Gi"):
    """A claim bound to a PersistentVolume of its own (named NS-CLAIM), as a pre-provisioned
    dataset or checkpoint volume is; returns once the claim is Bound."""
    pv = "%s-%s" % (ns, claim)
    h.create([{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
               "spec": {"capacity": {"storage": size}, "accessModes": [mode], "storageClassName": "",
                        "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/mnt/" + pv},
                        "claimRef": {"namespace": ns, "name": claim}}},
              {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": ns},
               "spec": {"accessModes": [mode], "storageClassName": "", "volumeName": pv,
                        "resources": {"requests": {"storage": size}}}}])
    h.wait_for(lambda: h.kubectl("get", "pvc", claim, "-n", ns, "-o", "json")["status"].get("phase") == "Bound",
               60, "claim %s/%s to be Bound" % (ns, claim))


# -- crontab ---------------------------------------------------------------------------------------

CronLine = namedtuple("CronLine", "fields command")
_CRON_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
_CRON_NAMES = [None, None, None, "jan feb mar apr may jun jul aug sep oct nov dec".split(),
               "sun mon tue wed thu fri sat".split()]
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def _cron_value(text, i):
    names = _CRON_NAMES[i]
    if names and text.lower() in names:
        return names.index(text.lower()) + (1 if i == 3 else 0)
    if not text.isdigit():
        raise ValueError("%r is not a number" % text)
    v = int(text)
    lo, hi = _CRON_RANGES[i]
    if not lo <= v <= hi:
        raise ValueError("%d is outside %d-%d" % (v, lo, hi))
    return v


def _check_cron_field(text, i):
    """One of the five time fields as Vixie cron/cronie read them: lists of *, N, N-M, each
    optionally /STEP."""
    for part in text.split(","):
        base, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            raise ValueError("bad step in %r" % part)
        if base != "*":
            lo, dash, hi = base.partition("-")
            a = _cron_value(lo, i)
            if dash and _cron_value(hi, i) < a:
                raise ValueError("range %r runs backwards" % base)
            if step and not dash:
                raise ValueError("a step needs * or a range: %r" % part)


def read_crontab(test, text):
    """({NAME: value} of the environment lines, the one job line) of a user crontab, each time
    field checked; the command may hold no unescaped % (cron would cut it into stdin there)."""
    env, jobs = {}, []
    for raw in text.splitlines():
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        m = _ENV_LINE.match(s)
        if m:
            env[m.group(1)] = m.group(2).strip("\"'")
            continue
        parts = s.split(None, 5)
        test.assertEqual(len(parts), 6, "not five time fields and a command: %r" % s)
        for i, f in enumerate(parts[:5]):
            try:
                _check_cron_field(f, i)
            except ValueError as e:
                test.fail("time field %d of %r: %s" % (i + 1, s, e))
        test.assertIsNone(re.search(r"(?<!\\)%", parts[5]), "an unescaped %% in the command: %r" % s)
        jobs.append(CronLine(parts[:5], parts[5]))
    test.assertEqual(len(jobs), 1, "one job line: %r" % jobs)
    test.assertIn("PATH", env, "cron's PATH is /usr/bin:/bin: the crontab must set one that has gpuctl")
    return env, jobs[0]
