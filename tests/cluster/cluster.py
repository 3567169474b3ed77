#!/usr/bin/python3
"""Local Kubernetes control plane with simulated GPU nodes and real SSH hosts, for gpuctl's e2e tests.

Runs a real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (built from Go
modules by build.sh, cached under ~/.cache/gpuctl-cp) on 127.0.0.1, creates kwok-managed GPU nodes
from fleet files, and answers SSH for every node at the node's InternalIP with Debian's OpenSSH sshd,
whose ForceCommand puts a fake nvidia-smi (fake_nvidia_smi.py), journalctl and dmesg
(fake_kernel_log.py) first on PATH, set per node (sim_host.py). kwok also serves the
nodes' kubelet port (container logs, sim_logs.py), reached at each node's InternalIP through
kubelet_relay.py; sim_pods.py adds crash-looping and restarted containers.

    cluster.py up          --state-dir DIR [--fleet FILE]
    cluster.py down        --state-dir DIR
    cluster.py apply-fleet --state-dir DIR FILE
    cluster.py ssh-mode    --state-dir DIR NODE MODE [--gpu-index N]
    cluster.py ssh-host    --state-dir DIR NODE [--set KEY=JSON ...] [--clear KEY ...]
    cluster.py cut|uncut   --state-dir DIR NODE
    cluster.py env         --state-dir DIR
    cluster.py restart-apiserver --state-dir DIR [--down-for SECONDS]
    cluster.py pause|resume --state-dir DIR COMPONENT
    cluster.py mint-cert   --state-dir DIR NAME [--subject S] [--not-before D] [--not-after D]
    cluster.py status      --state-dir DIR
    cluster.py enable-metrics|disable-metrics --state-dir DIR   (metrics.k8s.io: sim_metrics.py)
    cluster.py enable-prometheus --state-dir DIR   (dcgm-exporter metrics in Prometheus: sim_prometheus.py)

Importable too: `cluster.Cluster(state_dir).apply_fleet_text(yaml_text)` and so on.  See README.md
for the fleet schema, cluster.json, the identities and the pod outcome labels.
"""
import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import random
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - reported when used
    yaml = None

import sim_logs  # noqa: E402  (tests/cluster: container logs through the real pods/log path)
import sim_pods  # noqa: E402  (tests/cluster: crash-looping and restarted containers)
import sim_metrics  # noqa: E402  (tests/cluster: metrics.k8s.io from metrics-server, on request)
import sim_prometheus  # noqa: E402  (tests/cluster: Prometheus scraping dcgm-exporter expositions, on request)
import sim_host  # noqa: E402  (tests/cluster: a simulated host's settings beyond its mode)
import sim_dra  # noqa: E402  (tests/cluster: GPUs as DRA devices, published as NVIDIA's DRA driver does)
import sim_probe_pods  # noqa: E402  (tests/cluster: the kubelet of gpuctl's probe pods, --via pod)
import fake_nvidia_smi  # noqa: E402  (tests/cluster: checks those settings against the host's capture)

HERE = Path(__file__).resolve().parent
KUBELET_RELAY = HERE / "kubelet_relay.py"
BUILD_SH = HERE / "build.sh"
# What runs on the simulated hosts, copied into DIR/ssh: the fakes and the modules they import.
HOST_TOOLS = ("fake_nvidia_smi.py", "fake_kernel_log.py", "sim_host.py", "sim_gpu.py")
DEFAULT_FLEET = HERE / "default-fleet.yaml"

K8S_VERSION = os.environ.get("K8S_VERSION", "v1.36.3")
KWOK_VERSION = os.environ.get("KWOK_VERSION", "v0.8.0")
ETCD_VERSION = os.environ.get("ETCD_VERSION", "v3.6.14")

SIM_LABEL = "sim.gpuctl.dev"            # prefix of our pod outcome labels/annotations
FLEET_LABEL = "e2e.gpuctl.dev/fleet"    # every node carries the name of the fleet that made it
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
CHAOS_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"

SSH_MODES = ("ok", "driver-not-loaded", "driver-mismatch", "gpu-lost", "gpu-unknown-error",
             "no-devices", "no-nvidia-smi", "permissions", "hang", "garbage", "inforom",
             "hostkey-mismatch", "deep-xml", "no-xml")
# Modes that answer from the capture, so they need a fixture.
FIXTURE_MODES = ("ok", "gpu-lost", "gpu-unknown-error", "garbage", "inforom", "deep-xml", "no-xml")
SSHD_SHARD = 16          # OpenSSH's MAX_LISTEN_SOCKS: one sshd listens on at most 16 addresses
CONTEXTS = ("admin", "viewer", "nobody", "token", "badtoken")
PROC_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# What GPUs as DRA devices need beyond the GA core (resource.k8s.io/v1), per component: the gate
# names as v1.36.3's pkg/features/kube_features.go defines them; why each: README.md, "DRA".
_DRA_GATES = ("DRAExtendedResource", "DRADeviceTaints", "DRADeviceTaintRules")
DRA_FEATURE_GATES = {"kube-apiserver": _DRA_GATES, "kube-controller-manager": _DRA_GATES, "kube-scheduler": _DRA_GATES}
# DeviceTaintRule is served only by resource.k8s.io/v1beta2 in 1.36 (beta APIs are off by default).
DRA_RUNTIME_CONFIG = "resource.k8s.io/v1beta2/devicetaintrules=true"


def feature_gates_flag(component):
    return "--feature-gates=%s" % ",".join("%s=true" % g for g in DRA_FEATURE_GATES[component])


class ClusterError(Exception):
    """A failure with a message meant for the person running the tests."""


def log(msg):
    print("[cluster %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def need_yaml():
    if yaml is None:
        raise ClusterError("python3-yaml is missing: run scripts/install-deps.sh (Debian package python3-yaml)")
    return yaml


def run(cmd, check=True, capture=True, input=None, env=None, timeout=None):
    try:
        p = subprocess.run(cmd, input=input, env=env, timeout=timeout, text=True,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.PIPE if capture else None)
    except FileNotFoundError:
        raise ClusterError("%s is not installed (run scripts/install-deps.sh)" % cmd[0])
    if check and p.returncode != 0:
        raise ClusterError("command failed (exit %d): %s\n%s" % (
            p.returncode, " ".join(shlex.quote(c) for c in cmd), (p.stderr or "").strip()))
    return p


def write_file(path, text, mode=0o644):
    """Atomic write (readers such as the fake nvidia-smi and ssh never see half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name + ".")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def deep_merge(a, b):
    out = dict(a)
    for k, v in (b or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def port_is_free(port, host="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_ports(n, taken=()):
    """Free TCP ports below the ephemeral range, so that no outgoing connection grabs one between
    our choice and the component's bind."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    lo, hi = 10000, max(10100, low - 1)
    ports = []
    for _ in range(20000):
        p = random.randint(lo, hi)
        if p in ports or p in taken:
            continue
        # 0.0.0.0 checks every local address at once (bind only, nothing listens or connects).
        if port_is_free(p, "127.0.0.1") and port_is_free(p, "0.0.0.0"):
            ports.append(p)
            if len(ports) == n:
                return ports
    raise ClusterError("could not find %d free TCP ports" % n)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def proc_cmdline(pid):
    try:
        return Path("/proc/%d/cmdline" % pid).read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def proc_children():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path("/proc/%s/stat" % d).read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(pid, kids=None):
    kids = proc_children() if kids is None else kids
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_pids(pids, grace=5.0):
    pids = [p for p in pids if p and pid_alive(p)]
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    for p in pids:
        if pid_alive(p):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)


# ----------------------------------------------------------------------------------------------
# Fixtures and GPU metadata


def fixtures_dir():
    env = os.environ.get("GPUCTL_FIXTURES")
    if env:
        return Path(env).resolve()
    # tests/cluster -> tests/fixtures: the captures live in the repository, never beside it.
    return (HERE.parent / "fixtures").resolve()


def check_fleet_file(path):
    """Raises ClusterError unless the fleet file exists, parses and names fixtures that exist."""
    if not path.is_file():
        raise ClusterError("fleet file %s not found" % path)
    try:
        doc = need_yaml().safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ClusterError("fleet file %s is not YAML: %s" % (path, e))
    expand_fleet(doc, str(path))


def resolve_fixture(name):
    p = Path(name)
    cands = [p] if p.is_absolute() else [fixtures_dir() / p, fixtures_dir() / "nvidia-smi-xml" / p]
    for c in cands:
        if c.is_file():
            return c.resolve()
    raise ClusterError("nvidia-smi fixture %r not found (looked in %s)" % (name, ", ".join(map(str, cands))))


def xml_tag(text, name):
    m = re.search(r"<%s>([^<]*)</%s>" % (name, name), text)
    return m.group(1).strip() if m else ""


def fixture_info(path):
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    gpus = re.findall(r"<gpu id=", text)
    m = re.search(r"<fb_memory_usage>\s*<total>\s*(\d+)\s*MiB", text)
    return {
        "product_name": xml_tag(text, "product_name"),
        "driver_version": xml_tag(text, "driver_version"),
        "cuda_version": xml_tag(text, "cuda_version"),
        "architecture": xml_tag(text, "product_architecture"),
        "memory_mib": int(m.group(1)) if m else 0,
        "gpu_count": len(gpus),
    }


# (substring of product name) -> (family, compute capability major, minor, gke accelerator name)
GPU_TABLE = [
    ("H100", "hopper", 9, 0, "nvidia-h100-80gb"),
    ("A100", "ampere", 8, 0, "nvidia-tesla-a100"),
    ("A10G", "ampere", 8, 6, "nvidia-a10g"),
    ("A10", "ampere", 8, 6, "nvidia-a10"),
    ("L4", "ada-lovelace", 8, 9, "nvidia-l4"),
    ("RTX 4", "ada-lovelace", 8, 9, "nvidia-rtx-4000"),
    ("RTX 30", "ampere", 8, 6, "nvidia-rtx-3000"),
    ("T4", "turing", 7, 5, "nvidia-tesla-t4"),
    ("RTX 20", "turing", 7, 5, "nvidia-rtx-2000"),
    ("V100", "volta", 7, 0, "nvidia-tesla-v100"),
    ("P100", "pascal", 6, 0, "nvidia-tesla-p100"),
    ("P4", "pascal", 6, 1, "nvidia-tesla-p4"),
]

# MIG profile -> memory in MiB as GPU Feature Discovery reports it (A100/H100 values).
MIG_MEMORY = {"1g.5gb": 4864, "2g.10gb": 9856, "3g.20gb": 19968, "4g.20gb": 19968, "7g.40gb": 40192,
              "1g.10gb": 9984, "1g.20gb": 19968, "2g.20gb": 20096, "3g.40gb": 40320,
              "4g.40gb": 40320, "7g.80gb": 80896}


def gpu_traits(product):
    for key, family, ma, mi, gke in GPU_TABLE:
        if key in product:
            return family, ma, mi, gke
    return "", 0, 0, "nvidia-" + product.lower().replace("nvidia ", "").replace(" ", "-")


def gfd_product(name):
    return name.strip().replace(" ", "-")


# ----------------------------------------------------------------------------------------------
# Fleet files

NODE_KEYS = {"name", "namePrefix", "count", "startIndex", "cpu", "memory", "pods", "ephemeralStorage",
             "gpus", "unhealthyGpus", "product", "labelScheme", "accelerator", "mig", "labels",
             "annotations", "taints", "unschedulable", "ssh", "cut", "ready", "overrides",
             "extraResources", "nodeInfo", "dra"}
SSH_KEYS = {"fixture", "mode", "gpuIndex", "enabled", "nvmlLibraryVersion", "gpus", "keepUuids", *sim_host.SETTINGS}
LABEL_SCHEMES = ("gfd", "gke", "accelerator", "none")


def expand_fleet(doc, source="fleet"):
    """Fleet document -> list of per-node specs (dicts), validated, overrides applied."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise ClusterError("%s: a fleet file needs a top-level 'nodes:' list" % source)
    unknown = set(doc) - {"name", "defaults", "nodes"}
    if unknown:
        raise ClusterError("%s: unknown top-level keys %s (allowed: name, defaults, nodes)" % (source, sorted(unknown)))
    fleet_name = str(doc.get("name") or Path(str(source)).stem)
    defaults = doc.get("defaults") or {}
    specs = []
    for gi, group in enumerate(doc["nodes"]):
        g = deep_merge(defaults, group)
        bad = set(g) - NODE_KEYS
        if bad:
            raise ClusterError("%s: nodes[%d]: unknown keys %s (allowed: %s)" % (source, gi, sorted(bad), sorted(NODE_KEYS)))
        overrides = g.pop("overrides", None) or {}
        if "name" in g:
            names = [str(g.pop("name"))]
            g.pop("namePrefix", None)
        elif "namePrefix" in g:
            start = int(g.pop("startIndex", 0))
            prefix = str(g.pop("namePrefix"))
            names = ["%s%d" % (prefix, i) for i in range(start, start + int(g.pop("count", 1)))]
        else:
            raise ClusterError("%s: nodes[%d] needs 'name' or 'namePrefix'" % (source, gi))
        g.pop("count", None)
        g.pop("startIndex", None)
        for on in overrides:
            if on not in names:
                raise ClusterError("%s: nodes[%d]: override for %r, which is not a node of this group %s" % (source, gi, on, names))
        for name in names:
            spec = deep_merge(g, overrides.get(name))
            bad = set(spec) - NODE_KEYS
            if bad:
                raise ClusterError("%s: override %s: unknown keys %s" % (source, name, sorted(bad)))
            spec["name"] = name
            spec["fleet"] = fleet_name
            specs.append(normalise_spec(spec, source))
    seen = set()
    for s in specs:
        if s["name"] in seen:
            raise ClusterError("%s: node %s is defined twice" % (source, s["name"]))
        seen.add(s["name"])
    return fleet_name, specs


def normalise_spec(spec, source):
    name = spec["name"]
    ssh = dict(spec.get("ssh") or {})
    bad = set(ssh) - SSH_KEYS
    if bad:
        raise ClusterError("%s: node %s: unknown ssh keys %s (allowed: %s)" % (source, name, sorted(bad), sorted(SSH_KEYS)))
    gpus = int(spec.get("gpus", 0) or 0)
    ssh.setdefault("enabled", True)
    ssh.setdefault("mode", "ok" if ssh.get("fixture") else "no-nvidia-smi")
    ssh.setdefault("gpuIndex", 0)
    if ssh["mode"] not in SSH_MODES:
        raise ClusterError("%s: node %s: unknown ssh mode %r (one of %s)" % (source, name, ssh["mode"], ", ".join(SSH_MODES)))
    fx = None
    if ssh.get("fixture"):
        fx = resolve_fixture(ssh["fixture"])
        ssh["fixturePath"] = str(fx)
    elif gpus and ssh["enabled"] and ssh["mode"] not in ("no-nvidia-smi", "driver-not-loaded", "driver-mismatch",
                                                          "permissions", "no-devices", "hang"):
        raise ClusterError("%s: node %s has GPUs and ssh mode %s but no ssh.fixture" % (source, name, ssh["mode"]))
    settings = {k: ssh[k] for k in sim_host.SETTINGS if k in ssh}
    try:
        ssh.update(checked_settings(settings, ssh.get("fixturePath"), ssh.get("gpus") or gpus or None))
    except ClusterError as e:
        raise ClusterError("%s: node %s: ssh.%s" % (source, name, e))
    spec["ssh"] = ssh
    scheme = spec.get("labelScheme", "gfd")
    if scheme not in LABEL_SCHEMES:
        raise ClusterError("%s: node %s: labelScheme must be one of %s" % (source, name, LABEL_SCHEMES))
    if int(spec.get("unhealthyGpus", 0) or 0) < 0:
        raise ClusterError("%s: node %s: unhealthyGpus must not be negative" % (source, name))
    spec["gpus"] = gpus
    spec["fixtureInfo"] = fixture_info(fx) if fx else None
    spec["dra"] = normalise_dra(spec, source)
    return spec


DRA_KEYS = {"deviceTaints"}


def normalise_dra(spec, source):
    """`dra: true` (or `dra: {deviceTaints: {gpu-1: [{key, value, effect}]}}`): the node's GPUs are DRA
    devices (sim_dra.py). Checked here, before anything starts: the devices are computed from the
    host's capture as they will be published."""
    dra = spec.get("dra")
    if dra in (None, False):
        return None
    where = "%s: node %s: dra" % (source, spec["name"])
    if dra is True:
        dra = {}
    if not isinstance(dra, dict) or set(dra) - DRA_KEYS:
        raise ClusterError("%s: true, or a mapping with %s" % (where, ", ".join(sorted(DRA_KEYS))))
    if not spec["gpus"]:
        raise ClusterError("%s: a DRA node needs gpus" % where)
    if spec.get("unhealthyGpus"):
        raise ClusterError("%s: unhealthyGpus is for the device plugin's allocatable; a DRA node marks a GPU "
                           "unhealthy with a device taint (dra.deviceTaints)" % where)
    ssh = spec["ssh"]
    host = {"fixture": ssh.get("fixturePath"), "gpus": ssh.get("gpus") or spec["gpus"],
            "uuid_seed": None if ssh.get("keepUuids") else spec["name"],
            "settings": {k: ssh[k] for k in sim_host.SETTINGS if k in ssh}}
    try:
        devices = sim_dra.host_devices(host, mig_profiles(spec))
        sim_dra.apply_taints(devices, dra.get("deviceTaints"), "deviceTaints")
    except sim_dra.DraError as e:
        raise ClusterError("%s: %s" % (where, e))
    return {"deviceTaints": dra.get("deviceTaints") or {}}


def mig_profiles(spec):
    """The MIG devices of one GPU (fleet `mig.devices`), as a list of profiles."""
    out = []
    if spec["gpus"] and spec.get("mig"):
        for prof, n in (spec["mig"].get("devices") or {}).items():
            out += [prof] * int(n)
    return out


def checked_settings(settings, fixture_path, gpus):
    """A host's settings validated and tried on its capture (fake_nvidia_smi.check_settings)."""
    try:
        return fake_nvidia_smi.check_settings(settings, fixture_path, gpus)
    except sim_host.SettingsError as e:
        raise ClusterError(str(e))


def node_object(spec, internal_ip):
    """The Node we POST (status included: the apiserver keeps a Node's status on create)."""
    name = spec["name"]
    gpus = spec["gpus"]
    info = spec.get("fixtureInfo") or {}
    product_name = spec.get("product") or info.get("product_name") or ""
    family, cmaj, cmin, gke = gpu_traits(product_name)
    if info.get("architecture"):
        family = info["architecture"].lower().replace(" ", "-")
    mig = spec.get("mig") or None
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "type": "kwok", FLEET_LABEL: spec["fleet"],
    }
    cap = {"cpu": str(spec.get("cpu", "32")), "memory": str(spec.get("memory", "256Gi")),
           "pods": str(spec.get("pods", "110")), "ephemeral-storage": str(spec.get("ephemeralStorage", "500Gi")),
           "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    alloc = dict(cap)
    unhealthy = int(spec.get("unhealthyGpus", 0) or 0)
    mig_devices = mig_profiles(spec)   # MIG profiles of one GPU
    # A DRA node's GPUs are ResourceSlice devices: the DRA driver replaces the device plugin, so no
    # nvidia.com/* extended resource in capacity (GPU Feature Discovery's labels stay).
    if gpus and not spec.get("dra"):
        strategy = (mig or {}).get("strategy", "none") if mig else "none"
        if strategy == "mixed":
            for prof in sorted(set(mig_devices)):
                n = mig_devices.count(prof) * gpus
                cap["nvidia.com/mig-" + prof] = str(n)
                alloc["nvidia.com/mig-" + prof] = str(max(0, n - (unhealthy if prof == mig_devices[0] else 0)))
        elif strategy == "single":
            n = len(mig_devices) * gpus
            cap["nvidia.com/gpu"] = str(n)
            alloc["nvidia.com/gpu"] = str(max(0, n - unhealthy))
        else:
            cap["nvidia.com/gpu"] = str(gpus)
            alloc["nvidia.com/gpu"] = str(max(0, gpus - unhealthy))
    for res, n in (spec.get("extraResources") or {}).items():
        cap[res] = str(n)
        alloc[res] = str(n)

    scheme = spec.get("labelScheme", "gfd")
    if gpus and scheme == "gfd":
        labels.update(gfd_labels(spec, info, product_name, family, cmaj, cmin, mig, mig_devices))
    elif gpus and scheme == "gke":
        labels["cloud.google.com/gke-accelerator"] = spec.get("accelerator") or gke
        labels["cloud.google.com/gke-accelerator-count"] = str(gpus)
    elif gpus and scheme == "accelerator":
        labels["accelerator"] = spec.get("accelerator") or gke
    labels.update({k: str(v) for k, v in (spec.get("labels") or {}).items()})

    annotations = {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1], "node.alpha.kubernetes.io/ttl": "0",
                   # where metrics-server scrapes the node's /metrics/resource (kwokctl's node template)
                   sim_metrics.PATH_ANNOTATION: sim_metrics.node_metrics_path(name)}
    if spec.get("ready") is False:
        del annotations[KWOK_ANNOTATION[0]]  # kwok leaves it alone: no heartbeat, the node goes NotReady
    annotations.update({k: str(v) for k, v in (spec.get("annotations") or {}).items()})
    h = hashlib.sha256(name.encode()).hexdigest()
    node_info = {
        "architecture": "amd64", "operatingSystem": "linux", "osImage": "Ubuntu 22.04.5 LTS",
        "kernelVersion": "5.15.0-1071-nvidia", "containerRuntimeVersion": "containerd://1.7.27",
        "kubeletVersion": K8S_VERSION, "kubeProxyVersion": K8S_VERSION,
        "machineID": h[:32], "systemUUID": "%s-%s-%s-%s-%s" % (h[32:40], h[40:44], h[44:48], h[48:52], h[52:64]),
        "bootID": hashlib.md5(name.encode()).hexdigest(),
    }
    node_info.update(spec.get("nodeInfo") or {})
    status = {
        "capacity": cap, "allocatable": alloc, "nodeInfo": node_info,
        "addresses": [{"type": "InternalIP", "address": internal_ip}, {"type": "Hostname", "address": name}],
    }
    if spec.get("ready") is False:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                 "message": "container runtime network not ready: NetworkReady=false",
                                 "lastHeartbeatTime": now, "lastTransitionTime": now}]
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": "kwok://" + name},
        "status": status,
    }
    if spec.get("taints"):
        node["spec"]["taints"] = [dict(t) for t in spec["taints"]]
    if spec.get("unschedulable"):
        node["spec"]["unschedulable"] = True
    return node, mig_devices


def sim_dra_entry(n):
    """cluster.json's view of a DRA node: driver, pool and the devices published at apply time."""
    if not n.get("dra"):
        return None
    return {"driver": sim_dra.DRIVER, "pool": n["name"], "device_taints": n["dra"].get("deviceTaints") or {},
            "devices": n["dra"].get("devices") or []}


def gfd_labels(spec, info, product_name, family, cmaj, cmin, mig, mig_devices):
    """Labels in the scheme NVIDIA GPU Feature Discovery writes (see fixtures/k8s-nodes)."""
    gpus = spec["gpus"]
    product = gfd_product(product_name)
    lab = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gfd.timestamp": str(int(time.time())),
        "nvidia.com/mig.capable": "true" if ("A100" in product_name or "H100" in product_name or "A30" in product_name) else "false",
        "nvidia.com/mps.capable": "false",
    }
    if info.get("memory_mib"):
        lab["nvidia.com/gpu.memory"] = str(info["memory_mib"])
    if family:
        lab["nvidia.com/gpu.family"] = family
    if cmaj:
        lab["nvidia.com/gpu.compute.major"] = str(cmaj)
        lab["nvidia.com/gpu.compute.minor"] = str(cmin)
    drv = (info.get("driver_version") or "").split(".")
    if len(drv) >= 2:
        rev = drv[2] if len(drv) > 2 else ""
        lab.update({
            "nvidia.com/cuda.driver.major": drv[0], "nvidia.com/cuda.driver.minor": drv[1],
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.driver-version.full": info["driver_version"],
            "nvidia.com/cuda.driver-version.major": drv[0], "nvidia.com/cuda.driver-version.minor": drv[1],
            "nvidia.com/cuda.driver-version.revision": rev,
        })
    cuda = (info.get("cuda_version") or "").split(".")
    if len(cuda) >= 2:
        lab.update({
            "nvidia.com/cuda.runtime.major": cuda[0], "nvidia.com/cuda.runtime.minor": cuda[1],
            "nvidia.com/cuda.runtime-version.full": info["cuda_version"],
            "nvidia.com/cuda.runtime-version.major": cuda[0], "nvidia.com/cuda.runtime-version.minor": cuda[1],
        })
    if mig:
        strategy = mig.get("strategy", "single")
        lab["nvidia.com/mig.strategy"] = strategy
        lab["nvidia.com/mig.config"] = "all-balanced"
        lab["nvidia.com/mig.config.state"] = "success"
        if strategy == "single" and mig_devices:
            prof = mig_devices[0]
            lab["nvidia.com/gpu.product"] = "%s-MIG-%s" % (product, prof)
            lab["nvidia.com/gpu.count"] = str(len(mig_devices) * gpus)
            lab["nvidia.com/gpu.memory"] = str(MIG_MEMORY.get(prof, 0))
            lab["nvidia.com/gpu.slices.gi"] = prof.split("g.")[0]
            lab["nvidia.com/gpu.slices.ci"] = prof.split("g.")[0]
        elif strategy == "mixed":
            for prof in sorted(set(mig_devices)):
                pre = "nvidia.com/mig-%s." % prof
                lab[pre + "count"] = str(mig_devices.count(prof) * gpus)
                lab[pre + "memory"] = str(MIG_MEMORY.get(prof, 0))
                lab[pre + "product"] = "%s-MIG-%s" % (product, prof)
                lab[pre + "replicas"] = "1"
                lab[pre + "sharing-strategy"] = "none"
                lab[pre + "slices.gi"] = prof.split("g.")[0]
                lab[pre + "slices.ci"] = prof.split("g.")[0]
    elif lab["nvidia.com/mig.capable"] == "true":
        lab["nvidia.com/mig.strategy"] = "single"
    return lab


# ----------------------------------------------------------------------------------------------
# kwok stages


def modcache_dirs():
    cands = []
    try:
        modcache = run(["go", "env", "GOMODCACHE"], check=False).stdout.strip()
        if modcache:
            cands.append(Path(modcache))
    except ClusterError:
        pass
    cands.append(Path.home() / "go" / "pkg" / "mod")
    return cands


def kwok_module_dir():
    cands = modcache_dirs()
    for c in cands:
        d = c / "sigs.k8s.io" / ("kwok@" + KWOK_VERSION)
        if (d / "kustomize" / "stage").is_dir():
            return d
    try:
        out = run(["go", "mod", "download", "-json", "sigs.k8s.io/kwok@" + KWOK_VERSION], check=False)
        d = Path(json.loads(out.stdout).get("Dir", ""))
        if (d / "kustomize" / "stage").is_dir():
            return d
    except (ClusterError, ValueError):
        pass
    raise ClusterError("kwok %s's stage files are not in the Go module cache (looked in %s); "
                       "run tests/cluster/build.sh, which downloads the module" % (KWOK_VERSION, ", ".join(map(str, cands))))


def own_stages():
    """Our own Stages (not copies of kwok's): pod outcomes chosen by label, and Job pods that are
    deleted or evicted reaching phase Failed as under a real kubelet (control-plane.md §2.7)."""
    def terminated(code, reason, message=""):
        msg = "{{ with %s }}\n            message: {{ . | Quote }}{{ end }}" % message if message else ""
        return (
            "      containerStatuses:\n"
            "      {{ range .spec.containers }}\n"
            "      - image: {{ .image | Quote }}\n"
            "        name: {{ .name | Quote }}\n"
            "        ready: false\n"
            "        restartCount: 0\n"
            "        started: false\n"
            "        state:\n"
            "          terminated:\n"
            "            exitCode: %s\n"
            "            reason: %s%s\n"
            "            startedAt: {{ $now | Quote }}\n"
            "            finishedAt: {{ $now | Quote }}\n"
            "      {{ end }}\n" % (code, reason, msg))

    def outcome_stage(name, value, phase, cond_reason, body_vars, code, reason, message=""):
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {"matchExpressions": [
                    {"key": '.metadata.labels["%s/outcome"]' % SIM_LABEL, "operator": "In", "values": [value]},
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                ]},
                "delay": {"durationMilliseconds": 1000,
                          "durationFrom": {"expressionFrom": '.metadata.annotations["%s/delay"]' % SIM_LABEL}},
                "next": {"statusTemplate": (
                    "      {{ $now := Now }}\n"
                    "      {{ $annotations := or .metadata.annotations dict }}\n" + body_vars +
                    "      conditions:\n"
                    "      - lastTransitionTime: {{ $now | Quote }}\n"
                    "        reason: %s\n        status: \"False\"\n        type: Ready\n"
                    "      - lastTransitionTime: {{ $now | Quote }}\n"
                    "        reason: %s\n        status: \"False\"\n        type: ContainersReady\n"
                    % (cond_reason, cond_reason) + terminated(code, reason, message) +
                    "      phase: %s\n" % phase)},
            },
        }

    fail_vars = (
        '      {{ $code := or ( index $annotations "%s/exit-code" ) "1" }}\n'
        '      {{ $reason := or ( index $annotations "%s/reason" ) "Error" }}\n'
        '      {{ $message := or ( index $annotations "%s/message" ) "" }}\n' % (SIM_LABEL, SIM_LABEL, SIM_LABEL))
    fail = outcome_stage("gpuctl-pod-fail", "fail", "Failed", "PodFailed", fail_vars,
                         "{{ $code }}", "{{ $reason | Quote }}", "$message")
    succeed = outcome_stage("gpuctl-pod-succeed", "succeed", "Succeeded", "PodCompleted", "", "0", "Completed")
    terminating = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "gpuctl-job-pod-terminating-failed"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]},
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
            ]},
            # Outweighs kwok's pod-delete (weight 0), which runs once the phase is terminal.
            "weight": 10000,
            "next": {"statusTemplate": "      {{ $now := Now }}\n" + terminated("137", "Error") + "      phase: Failed\n"},
        },
    }
    return [fail, succeed, terminating] + sim_pods.stages()


def kwok_stages():
    y = need_yaml()
    root = kwok_module_dir() / "kustomize" / "stage"
    files = [root / "node/fast/node-initialize.yaml",
             root / "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
             root / "pod/fast/pod-ready.yaml", root / "pod/fast/pod-complete.yaml",
             root / "pod/fast/pod-delete.yaml", root / "pod/chaos/pod-container-running-failed.yaml"]
    docs = []
    for f in files:
        for d in y.safe_load_all(f.read_text()):
            if not d:
                continue
            if d["metadata"]["name"] == "pod-ready":
                # gpuctl's probe pods run on sim_probe_pods.py, which sets their status itself.
                d["spec"]["selector"]["matchExpressions"].append(sim_probe_pods.kwok_stage_selector())
            if d["metadata"]["name"] == "pod-complete":
                # Job pods labelled with an outcome (or kwok's chaos label) are left to those stages.
                d["spec"]["selector"]["matchExpressions"] += [
                    {"key": '.metadata.labels["%s/outcome"]' % SIM_LABEL, "operator": "NotIn",
                     "values": ["run", "fail", "succeed", *sim_pods.OUTCOMES]},
                    {"key": '.metadata.labels["%s"]' % CHAOS_LABEL, "operator": "NotIn", "values": ["true"]},
                ]
            docs.append(d)
    docs += own_stages()
    docs += sim_metrics.kwok_config(kwok_module_dir())
    return "".join("---\n" + y.safe_dump(d, sort_keys=False, width=1000) for d in docs)


# ----------------------------------------------------------------------------------------------
# The cluster


class Cluster:
    def __init__(self, state_dir):
        self.dir = Path(state_dir).resolve()
        self.pki = self.dir / "pki"
        self.ssh_dir = self.dir / "ssh"
        self.logs = self.dir / "logs"
        self.state_file = self.dir / "state.json"
        self.cluster_json = self.dir / "cluster.json"
        self.kubeconfig = self.dir / "kubeconfig"
        self.kept_logs = Path(str(self.dir) + "-logs")
        self.state = None

    # -- state ---------------------------------------------------------------------------------

    def load(self):
        try:
            self.state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            self.state = None
        return self.state

    def save(self):
        write_file(self.state_file, json.dumps(self.state, indent=1, sort_keys=True))
        self.write_cluster_json()

    @contextlib.contextmanager
    def locked(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                self.load()
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def require_running(self):
        if not self.load():
            raise ClusterError("no cluster in %s: run `cluster.py up --state-dir %s` first" % (self.dir, self.dir))

    # -- HTTP to the apiserver ---------------------------------------------------------------------

    def ssl_ctx(self, identity="admin"):
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if identity:
            ctx.load_cert_chain(str(self.pki / (identity + ".crt")), str(self.pki / (identity + ".key")))
        return ctx

    def api(self, method, path, body=None, ctype="application/json", ok=(200, 201), timeout=30):
        url = "https://127.0.0.1:%d%s" % (self.state["ports"]["apiserver"], path)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": ctype, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ssl_ctx(), timeout=timeout) as r:
                code, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            code, raw = e.code, e.read()
        try:
            obj = json.loads(raw) if raw else None
        except ValueError:
            obj = raw.decode(errors="replace")
        if ok and code not in ok:
            raise ClusterError("%s %s -> HTTP %d: %s" % (method, path, code, obj))
        return code, obj

    def wait(self, what, fn, timeout, interval=0.5, logs=()):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                v = fn()
                if v:
                    return v
            except (OSError, ClusterError, ssl.SSLError, ValueError) as e:
                last = e
            time.sleep(interval)
        tails = "".join("\n--- last lines of %s ---\n%s" % (l, self.tail(l)) for l in logs)
        raise ClusterError("timed out after %ds waiting for %s%s%s" % (
            timeout, what, " (last error: %s)" % last if last else "", tails))

    def tail(self, name, n=25):
        try:
            return "".join(Path(self.logs / name).read_text(errors="replace").splitlines(True)[-n:])
        except OSError as e:
            return str(e)

    # -- processes ---------------------------------------------------------------------------------

    def spawn(self, name, cmd, logname=None):
        """Starts a daemon detached from us (new session, reparented to init: no zombies, and
        ctest's output pipes are not held open), logging to logs/<name>.log; returns its pid."""
        self.logs.mkdir(parents=True, exist_ok=True)
        if not os.access(cmd[0], os.X_OK):
            raise ClusterError("cannot start %s: %s is not an executable" % (name, cmd[0]))
        # The marker in the environment lets `down` find every process of this cluster (sshd's
        # per-connection children included) even where a process rewrites its title.
        env = dict(os.environ, GPUCTL_SIM_OWNER=str(self.dir), GPUCTL_SIM_LOG=str(self.logs / (logname or name + ".log")))
        p = subprocess.run(["/bin/sh", "-c", 'exec </dev/null; "$@" >>"$GPUCTL_SIM_LOG" 2>&1 & echo $!', "sh", *cmd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(self.dir),
                           start_new_session=True)
        try:
            return int(p.stdout.strip())
        except ValueError:
            raise ClusterError("cannot start %s: %s" % (name, p.stderr.strip()))

    def markers(self):
        return (("GPUCTL_SIM_OWNER=%s" % self.dir).encode(), ("GPUCTL_SIM_STATE=%s" % self.dir).encode())

    def ours(self, pid):
        """A pid of this cluster: alive, and marked in its environment (see spawn and SetEnv) or
        naming our state directory on its command line (sshd's process title overwrites its
        environment block)."""
        if not pid or not pid_alive(pid):
            return False
        try:
            env = Path("/proc/%d/environ" % pid).read_bytes().split(b"\0")
        except OSError:
            return False
        return any(m in env for m in self.markers()) or (str(self.dir) + "/") in proc_cmdline(pid)

    def alive(self):
        st = self.state
        if not st or st.get("phase") != "ready":
            return False
        if not all(self.ours(st["procs"].get(n)) for n in PROC_ORDER):
            return False
        if st.get("relay") and not self.ours(st["relay"].get("pid")):
            return False
        try:
            code, _ = self.api("GET", "/readyz", ok=None, timeout=5)
            return code == 200
        except (OSError, ssl.SSLError):
            return False

    # -- up ----------------------------------------------------------------------------------------

    def up(self, fleet_file=None):
        """Starts the cluster (or reuses a running one) and applies the fleet. Everything it needs
        is checked before anything starts, and a failure stops whatever this call started: a
        half-started control plane would otherwise be reported as running and reused."""
        t0 = time.time()
        need_yaml()
        for tool in ("openssl", "ssh-keygen", "/usr/sbin/sshd", "ssh"):
            if not shutil.which(tool):
                raise ClusterError("%s is missing: run scripts/install-deps.sh" % tool)
        check_fleet_file(Path(fleet_file) if fleet_file else DEFAULT_FLEET)
        with self.locked():
            if self.state and self.alive():
                log("cluster in %s is already running; reusing it" % self.dir)
                self.install_host_tools()
                reused = True
            else:
                reused = False
                if self.state or self.dir.exists() and any(p.name != ".lock" for p in self.dir.iterdir()):
                    log("stale state in %s (processes gone or never ready); cleaning it up first" % self.dir)
                    self._teardown(keep_lock=True)
                bin_dir = self.build()
                try:
                    self._start(bin_dir)
                except BaseException:
                    self._stop_failed_up(locked=True)
                    raise
        fleet = Path(fleet_file) if fleet_file else (None if reused else DEFAULT_FLEET)
        try:
            if fleet:
                self.apply_fleet_file(fleet)
            if not reused:
                with self.locked():
                    self.state["phase"] = "ready"   # only now: a cluster without its fleet is not ready
                    self.save()
        except BaseException:
            if not reused:
                self._stop_failed_up(locked=False)
            raise
        log("cluster ready in %.1fs: export KUBECONFIG=%s  (cluster.json: %s)" % (time.time() - t0, self.kubeconfig, self.cluster_json))
        return self.cluster_json

    def _stop_failed_up(self, locked):
        log("up failed: stopping what it started (logs kept in %s)" % self.kept_logs)
        if locked:
            self._teardown(keep_lock=True)
        else:
            with self.locked():
                self._teardown(keep_lock=True)

    def build(self):
        log("building or reusing the control-plane binaries (tests/cluster/build.sh)")
        p = subprocess.run(["bash", str(BUILD_SH)], stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise ClusterError("tests/cluster/build.sh failed (exit %d); its messages are above" % p.returncode)
        bin_dir = Path(p.stdout.strip().splitlines()[-1])
        for b in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"):
            if not os.access(bin_dir / b, os.X_OK):
                raise ClusterError("build.sh printed %s but %s is not there" % (bin_dir, b))
        return bin_dir

    def _start(self, bin_dir):
        self.dir.mkdir(parents=True, exist_ok=True)
        for sub in (self.pki, self.ssh_dir / "hosts", self.ssh_dir / "bin", self.logs, self.dir / "fleets"):
            sub.mkdir(parents=True, exist_ok=True)
        cid = "%08x" % random.getrandbits(32)
        ports = dict(zip(("etcd", "etcd_peer", "apiserver", "kcm", "scheduler", "kwok", "ssh", "kubelet"),
                         pick_ports(8)))
        user = pwd.getpwuid(os.getuid()).pw_name
        self.state = {
            "schema": 1, "id": cid, "phase": "starting", "created": time.time(), "bin_dir": str(bin_dir),
            "ports": ports, "procs": {}, "sshd": [], "user": user,
            "ip_base": random.randint(16, 250), "next_ip": 0, "next_cut": 0,
            "netns": {"ok": False, "error": "not set up yet"}, "nodes": {}, "fleets": {},
            "tokens": {"token": hashlib.sha256(os.urandom(32)).hexdigest()[:40],
                       "badtoken": hashlib.sha256(os.urandom(32)).hexdigest()[:40]},
        }
        self.save()
        log("state dir %s (cluster id %s); ports %s" % (self.dir, cid, ports))
        self.make_pki()
        self.make_ssh()
        self.setup_netns()
        write_file(self.dir / "kwok-stages.yaml", kwok_stages())
        self.save()
        self.start_control_plane(Path(bin_dir))
        self.state["phase"] = "control-plane-started"   # "ready" once up() has applied the fleet
        self.save()

    def start_control_plane(self, b):
        P, D, ports = self.pki, self.dir, self.state["ports"]
        procs = self.state["procs"]
        t = time.time()
        procs["etcd"] = self.spawn("etcd", [
            str(b / "etcd"), "--name=node0", "--data-dir=%s" % (D / "etcd"),
            "--listen-client-urls=http://127.0.0.1:%d" % ports["etcd"],
            "--advertise-client-urls=http://127.0.0.1:%d" % ports["etcd"],
            "--listen-peer-urls=http://127.0.0.1:%d" % ports["etcd_peer"],
            "--initial-advertise-peer-urls=http://127.0.0.1:%d" % ports["etcd_peer"],
            "--initial-cluster=node0=http://127.0.0.1:%d" % ports["etcd_peer"],
            "--auto-compaction-retention=1", "--quota-backend-bytes=%d" % (2 * 1024 ** 3),
            "--unsafe-no-fsync", "--log-level=warn"])
        self.save()

        def etcd_ok():
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % ports["etcd"], timeout=2) as r:
                return json.loads(r.read()).get("health") == "true"
        self.wait("etcd /health", etcd_ok, 60, logs=["etcd.log"])
        log("etcd healthy (%.1fs)" % (time.time() - t))

        procs["kube-apiserver"] = self.spawn("kube-apiserver", [
            str(b / "kube-apiserver"),
            "--etcd-servers=http://127.0.0.1:%d" % ports["etcd"],
            "--bind-address=127.0.0.1", "--secure-port=%d" % ports["apiserver"],
            "--advertise-address=127.0.0.1",
            "--tls-cert-file=%s" % (P / "apiserver.crt"), "--tls-private-key-file=%s" % (P / "apiserver.key"),
            "--client-ca-file=%s" % (P / "ca.crt"), "--token-auth-file=%s" % (P / "tokens.csv"),
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file=%s" % (P / "sa.pub"),
            "--service-account-signing-key-file=%s" % (P / "sa.key"),
            "--service-cluster-ip-range=10.96.0.0/16",
            "--endpoint-reconciler-type=none", "--allow-privileged=true",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            # As a hardened cluster: the kubelet's serving certificate is checked against the
            # cluster CA and the node's address, and the apiserver shows a client certificate.
            "--kubelet-certificate-authority=%s" % (P / "ca.crt"),
            "--kubelet-client-certificate=%s" % (P / "apiserver-kubelet-client.crt"),
            "--kubelet-client-key=%s" % (P / "apiserver-kubelet-client.key"),
            *sim_metrics.apiserver_flags(P),
            feature_gates_flag("kube-apiserver"), "--runtime-config=%s" % DRA_RUNTIME_CONFIG,
            "--profiling=false"])
        self.save()

        def readyz():
            code, _ = self.api("GET", "/readyz", ok=None, timeout=5)
            return code == 200
        self.wait("kube-apiserver /readyz", readyz, 120, logs=["kube-apiserver.log"])
        log("kube-apiserver ready (%.1fs)" % (time.time() - t))

        common = ["--kubeconfig=%s" % (P / "admin.kubeconfig"), "--leader-elect=false", "--bind-address=127.0.0.1",
                  "--authentication-kubeconfig=%s" % (P / "admin.kubeconfig"),
                  "--authorization-kubeconfig=%s" % (P / "admin.kubeconfig"),
                  "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"]
        procs["kube-controller-manager"] = self.spawn("kube-controller-manager", [
            str(b / "kube-controller-manager"), *common, "--secure-port=%d" % ports["kcm"],
            "--service-account-private-key-file=%s" % (P / "sa.key"), "--root-ca-file=%s" % (P / "ca.crt"),
            "--controllers=*", "--use-service-account-credentials=false", feature_gates_flag("kube-controller-manager")])
        procs["kube-scheduler"] = self.spawn("kube-scheduler", [
            str(b / "kube-scheduler"), *common, "--secure-port=%d" % ports["scheduler"],
            feature_gates_flag("kube-scheduler")])
        self.install_kwok_crds()
        self.start_kubelet_relay()
        # kwok is every node's kubelet: its server (127.0.0.1 only) answers pods/log, reached
        # through kubelet_relay.py at each node's InternalIP and the port the node stage writes
        # into status.daemonEndpoints (--node-port); Logs/ClusterLogs are read from the API.
        procs["kwok"] = self.spawn("kwok", [
            str(b / "kwok"), "--kubeconfig=%s" % (P / "admin.kubeconfig"), "--config=%s" % (D / "kwok-stages.yaml"),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=%s=%s" % KWOK_ANNOTATION,
            "--node-lease-duration-seconds=40", "--cidr=10.244.0.0/16",
            "--server-address=127.0.0.1:%d" % ports["kwok"], "--node-port=%d" % ports["kubelet"],
            "--enable-crds=%s" % ",".join(sim_logs.CRDS),
            "--tls-cert-file=%s" % (P / "kubelet.crt"), "--tls-private-key-file=%s" % (P / "kubelet.key")])
        self.save()

        # The kubelet of gpuctl's probe pods (--via pod): runs their command on the node's sshd host.
        procs_extra = self.state.setdefault("extra_procs", {})
        procs_extra["probe-pods"] = self.spawn("probe-pods", sim_probe_pods.command(self.dir))
        self.save()
        self.bootstrap_rbac()
        self.ensure_device_classes()

        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def healthz(port):
            def f():
                with urllib.request.urlopen("https://127.0.0.1:%d/healthz" % port, context=insecure, timeout=3) as r:
                    return r.status == 200
            return f
        self.wait("kube-controller-manager /healthz", healthz(ports["kcm"]), 90, logs=["kube-controller-manager.log"])
        self.wait("kube-scheduler /healthz", healthz(ports["scheduler"]), 90, logs=["kube-scheduler.log"])

        def default_sa():
            code, _ = self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default", ok=None)
            return code == 200
        self.wait("the default ServiceAccount (kube-controller-manager's serviceaccount controller)", default_sa, 90,
                  logs=["kube-controller-manager.log"])
        for n in ("kube-controller-manager", "kube-scheduler", "kwok"):
            if not pid_alive(procs[n]):
                raise ClusterError("%s exited during start-up:\n%s" % (n, self.tail(n + ".log")))
        log("control plane ready (%.1fs)" % (time.time() - t))

    def ensure_device_classes(self):
        """The DRA driver chart's DeviceClasses (sim_dra.py): cluster-wide, present from the start."""
        try:
            sim_dra.ensure_device_classes(self)
        except sim_dra.DraError as e:
            raise ClusterError(str(e))

    def install_kwok_crds(self):
        """kwok's Logs and ClusterLogs CRDs, from the Go module cache as the stages are."""
        root = kwok_module_dir() / "kustomize" / "crd" / "bases"
        for f in sim_logs.CRD_FILES:
            crd = need_yaml().safe_load((root / f).read_text())
            code, body = self.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, ok=None)
            if code not in (200, 201, 409):
                raise ClusterError("creating CRD %s failed: HTTP %d: %s" % (crd["metadata"]["name"], code, body))

            def established(name=crd["metadata"]["name"]):
                _, got = self.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
                return any(c["type"] == "Established" and c["status"] == "True"
                           for c in (got.get("status") or {}).get("conditions") or [])
            self.wait("CRD %s established" % crd["metadata"]["name"], established, 60)

    def start_kubelet_relay(self):
        """The nodes' kubelet port on their loopback addresses, passed to kwok (kubelet_relay.py:
        why not 0.0.0.0). Nodes are added to it by apply_fleet_text."""
        ctl = self.dir / "kubelet-relay.sock"
        if len(str(ctl)) > 100:
            raise ClusterError("state dir path too long for a UNIX socket (%s); use a shorter --state-dir" % ctl)
        ports = self.state["ports"]
        pid = self.spawn("kubelet-relay", sim_logs.relay_command(
            sys.executable or "/usr/bin/python3", KUBELET_RELAY, ports["kubelet"], ports["kwok"], ctl))
        self.state["relay"] = {"pid": pid, "control": str(ctl), "port": ports["kubelet"]}
        self.save()
        self.wait("kubelet relay", lambda: sim_logs.relay_send(ctl, "ping", timeout=2) == "pong", 30,
                  interval=0.2, logs=["kubelet-relay.log"])

    def relay_listen(self, addrs):
        relay = (self.state or {}).get("relay")
        if relay and addrs:   # (bench/fleet_hosts.py's host-only clusters have none)
            try:
                sim_logs.relay_send(relay["control"], "listen " + " ".join(addrs))
            except (OSError, sim_logs.LogsError) as e:
                raise ClusterError("kubelet relay: cannot listen on %s: %s" % (", ".join(addrs), e))

    def bootstrap_rbac(self):
        viewer_rules = [
            {"apiGroups": [""], "resources": ["nodes", "pods", "namespaces", "events", "resourcequotas",
                                              "limitranges", "pods/log", "services", "configmaps"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "daemonsets", "statefulsets"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
        ]
        objs = [
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": "gpuctl-e2e-viewer"}, "rules": viewer_rules}),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
              "metadata": {"name": "gpuctl-e2e-viewer"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuctl-e2e-viewer"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}]}),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
              "metadata": {"name": "gpuctl-e2e-token-user"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "token-user"}]}),
        ]
        for path, obj in objs:
            def create(path=path, obj=obj):
                code, body = self.api("POST", path, obj, ok=None)
                if code in (200, 201, 409):
                    return True
                raise ClusterError("HTTP %d: %s" % (code, body))
            self.wait("RBAC object %s" % obj["metadata"]["name"], create, 60)

    # -- PKI and kubeconfigs -----------------------------------------------------------------------

    def make_pki(self):
        P = self.pki
        t = time.time()
        (P / "req.cnf").write_text("[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n")
        (P / "ca.cnf").write_text(
            "[req]\ndistinguished_name = dn\nx509_extensions = v3_ca\nprompt = no\n[dn]\nCN = gpuctl-e2e-ca\n"
            "[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign,digitalSignature\n"
            "subjectKeyIdentifier = hash\n")
        self.genkey(P / "ca.key", "rsa")
        run(["openssl", "req", "-x509", "-new", "-key", str(P / "ca.key"), "-config", str(P / "ca.cnf"),
             "-days", "3650", "-sha256", "-out", str(P / "ca.crt")])
        certs = [
            # name, subject, key type (varied on purpose: gpuctl must read every common PEM form)
            ("apiserver", "/CN=kube-apiserver", "rsa-pkcs8", "serverAuth", "IP:127.0.0.1,DNS:localhost"),
            ("admin", "/O=system:masters/CN=admin", "rsa-pkcs1", "clientAuth", None),
            ("viewer", "/O=gpuctl-e2e:viewers/CN=viewer", "rsa-pkcs8", "clientAuth", None),
            ("nobody", "/CN=nobody", "ec", "clientAuth", None),
        ]
        for name, subj, ktype, eku, sans in certs:
            ext = "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = %s\n" % eku
            if sans:
                ext += "subjectAltName = %s\n" % sans
            self.sign_cert(name, subj, ktype, ext)
        # The kubelet side of pods/log: kwok's serving certificate names every node address the
        # apiserver dials, and the apiserver's client certificate (as kubeadm's apiserver-kubelet-client).
        self.sign_cert("kubelet", "/CN=kwok-kubelet", "rsa-pkcs8", sim_logs.kubelet_serving_sans(self.state["ip_base"]))
        self.sign_cert("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client", "rsa-pkcs8",
                       "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\n"
                       "extendedKeyUsage = clientAuth\n")
        sim_metrics.make_front_proxy_pki(self)
        self.genkey(P / "sa.key", "rsa-pkcs8")
        run(["openssl", "pkey", "-in", str(P / "sa.key"), "-pubout", "-out", str(P / "sa.pub")])
        tok = self.state["tokens"]["token"]
        (P / "tokens.csv").write_text('%s,token-user,uid-gpuctl-token-user,"gpuctl-e2e:token-users"\n' % tok)
        for f in P.iterdir():
            if f.suffix == ".key":
                os.chmod(f, 0o600)
        self.write_admin_kubeconfig()
        log("PKI generated (%.1fs)" % (time.time() - t))

    def sign_cert(self, name, subj, ktype, ext):
        P = self.pki
        self.genkey(P / (name + ".key"), ktype)
        (P / (name + ".ext")).write_text(ext)
        run(["openssl", "req", "-new", "-key", str(P / (name + ".key")), "-subj", subj, "-config", str(P / "req.cnf"),
             "-out", str(P / (name + ".csr"))])
        run(["openssl", "x509", "-req", "-in", str(P / (name + ".csr")), "-CA", str(P / "ca.crt"),
             "-CAkey", str(P / "ca.key"), "-CAcreateserial", "-days", "3650", "-sha256",
             "-extfile", str(P / (name + ".ext")), "-out", str(P / (name + ".crt"))])

    def genkey(self, path, ktype):
        if ktype == "ec":
            run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path)])
        elif ktype == "rsa-pkcs1":
            p = run(["openssl", "genrsa", "-traditional", "-out", str(path), "2048"], check=False)
            if p.returncode != 0:  # OpenSSL 1.1 writes PKCS#1 by default and has no -traditional
                run(["openssl", "genrsa", "-out", str(path), "2048"])
        else:
            run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(path)])

    def write_admin_kubeconfig(self):
        """File-path kubeconfig for the control-plane components themselves."""
        P = self.pki
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "admin",
            "clusters": [{"name": "gpuctl-e2e", "cluster": {
                "server": "https://127.0.0.1:%d" % self.state["ports"]["apiserver"],
                "certificate-authority": str(P / "ca.crt")}}],
            "users": [{"name": "admin", "user": {"client-certificate": str(P / "admin.crt"),
                                                 "client-key": str(P / "admin.key")}}],
            "contexts": [{"name": "admin", "context": {"cluster": "gpuctl-e2e", "user": "admin"}}],
        }
        write_file(P / "admin.kubeconfig", need_yaml().safe_dump(cfg, sort_keys=False), 0o600)

    def write_kubeconfigs(self):
        import base64

        def b64(name):
            return base64.b64encode((self.pki / name).read_bytes()).decode()
        y = need_yaml()
        server = "https://127.0.0.1:%d" % self.state["ports"]["apiserver"]
        users = {
            "admin": {"client-certificate-data": b64("admin.crt"), "client-key-data": b64("admin.key")},
            "viewer": {"client-certificate-data": b64("viewer.crt"), "client-key-data": b64("viewer.key")},
            "nobody": {"client-certificate-data": b64("nobody.crt"), "client-key-data": b64("nobody.key")},
            "token": {"token": self.state["tokens"]["token"]},
            "badtoken": {"token": self.state["tokens"]["badtoken"]},
        }

        def config(ctxs, current):
            return {
                "apiVersion": "v1", "kind": "Config", "preferences": {},
                "clusters": [{"name": "gpuctl-e2e", "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")}}],
                "users": [{"name": c, "user": users[c]} for c in ctxs],
                "contexts": [{"name": c, "context": {"cluster": "gpuctl-e2e", "user": c, "namespace": "default"}} for c in ctxs],
                "current-context": current,
            }
        write_file(self.kubeconfig, y.safe_dump(config(CONTEXTS, "admin"), sort_keys=False), 0o600)
        for c in CONTEXTS:
            write_file(self.dir / "kubeconfigs" / (c + ".yaml"), y.safe_dump(config([c], c), sort_keys=False), 0o600)

    # -- SSH ---------------------------------------------------------------------------------------

    def make_ssh(self):
        S = self.ssh_dir
        t = time.time()
        for key in ("ssh_host_ed25519_key", "wrong_host_ed25519_key", "id_ed25519"):
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuctl-e2e-" + key, "-f", str(S / key)])
        shutil.copyfile(S / "id_ed25519.pub", S / "authorized_keys")
        self.install_host_tools()
        # With UsePAM no, OpenSSH refuses accounts whose password is locked ("!..."); PAM does not.
        pam = False
        try:
            for line in Path("/etc/shadow").read_text().splitlines():
                f = line.split(":")
                if f[0] == self.state["user"] and f[1].startswith("!"):
                    pam = True
        except OSError:
            pass
        self.state["ssh_pam"] = pam
        self.state["penalties"] = self.sshd_supports("PerSourcePenalties no")
        if os.getuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege separation directory
        self.write_ssh_client_files()
        log("ssh keys generated (%.1fs)" % (time.time() - t))

    def install_host_tools(self):
        """The fakes and the dispatcher into DIR/ssh (atomic writes: a running session never reads half
        a file). Also on `up` of a running cluster, so it serves the fakes of this checkout."""
        S = self.ssh_dir
        for tool in HOST_TOOLS:
            write_file(S / tool, (HERE / tool).read_text())
        wrapper = "#!/bin/sh\nexec /usr/bin/python3 -S %s \"$@\"\n"
        write_file(S / "bin" / "nvidia-smi", wrapper % shlex.quote(str(S / "fake_nvidia_smi.py")), 0o755)
        for tool in ("journalctl", "dmesg"):   # bin-klog: on PATH in mode no-nvidia-smi too
            write_file(S / "bin-klog" / tool, wrapper % (shlex.quote(str(S / "fake_kernel_log.py")) + " " + tool), 0o755)
        clean_path = ":".join(d for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
                              if not os.path.exists(os.path.join(d, "nvidia-smi")))
        write_file(S / "dispatch.sh", DISPATCH % {"ssh": shlex.quote(str(S)), "clean": shlex.quote(clean_path)}, 0o755)

    def sshd_supports(self, line):
        with tempfile.TemporaryDirectory() as td:
            cfg = Path(td) / "c"
            cfg.write_text("HostKey %s\n%s\n" % (self.ssh_dir / "ssh_host_ed25519_key", line))
            return run(["/usr/sbin/sshd", "-t", "-f", str(cfg)], check=False).returncode == 0

    def sshd_config(self, addrs):
        st = self.state
        S = self.ssh_dir
        lines = ["# generated by tests/cluster/cluster.py for the gpuctl e2e cluster %s" % st["id"]]
        lines += ["ListenAddress %s:%d" % (a, st["ports"]["ssh"]) for a in addrs]
        lines += [
            "HostKey %s" % (S / "ssh_host_ed25519_key"),
            "PidFile none",
            "AuthorizedKeysFile %s" % (S / "authorized_keys"),
            "StrictModes no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM %s" % ("yes" if st.get("ssh_pam") else "no"),
            "AllowUsers %s" % st["user"],
            "ForceCommand %s" % (S / "dispatch.sh"),
            "SetEnv GPUCTL_SIM_STATE=%s" % self.dir,
            "MaxStartups 1000:100:2000",
            "MaxSessions 100",
            "MaxAuthTries 6",
            "LoginGraceTime 300",   # hundreds of concurrent handshakes on 2 busy cores take a while
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowTcpForwarding no",
            "AllowAgentForwarding no",
            "PermitTunnel no",
            "PermitUserEnvironment no",
            "LogLevel INFO",
        ]
        if st.get("penalties"):
            lines.append("PerSourcePenalties no")   # OpenSSH >= 9.8 would throttle our many failing tests
        return "\n".join(lines) + "\n"

    def start_sshd_shards(self, addrs):
        """One sshd per 16 new addresses; shards already running are never reloaded, so concurrent
        tests never see a listener restart."""
        st = self.state
        for i in range(0, len(addrs), SSHD_SHARD):
            chunk = addrs[i:i + SSHD_SHARD]
            sid = len(st["sshd"])
            conf = self.ssh_dir / ("sshd-%d.conf" % sid)
            write_file(conf, self.sshd_config(chunk), 0o600)
            t = run(["/usr/sbin/sshd", "-t", "-f", str(conf)], check=False)
            if t.returncode != 0:
                raise ClusterError("sshd rejects its generated config %s: %s" % (conf, t.stderr.strip()))
            pid = self.spawn("sshd-%d" % sid, ["/usr/sbin/sshd", "-D", "-e", "-f", str(conf)])
            st["sshd"].append({"id": sid, "conf": str(conf), "pid": pid, "addrs": chunk})
            self.save()

            def listening(a=chunk[-1]):
                if not pid_alive(pid):
                    raise ClusterError("sshd exited:\n" + self.tail("sshd-%d.log" % sid))
                with socket.create_connection((a, st["ports"]["ssh"]), timeout=2):
                    return True
            self.wait("sshd shard %d on %s" % (sid, chunk[-1]), listening, 30, interval=0.2, logs=["sshd-%d.log" % sid])

    def write_ssh_client_files(self):
        st = self.state
        S = self.ssh_dir
        port = st["ports"]["ssh"]
        good = (S / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        wrong = (S / "wrong_host_ed25519_key.pub").read_text().split()[:2]
        kh = []
        for n in st["nodes"].values():
            if not n["ssh"]["enabled"]:
                continue
            key = wrong if n["ssh"]["mode"] == "hostkey-mismatch" else good
            for a in (n["ssh_address"], n.get("cut_address")):
                if a:
                    kh.append("[%s]:%d %s %s\n" % (a, port, key[0], key[1]))
        write_file(S / "known_hosts", "".join(kh), 0o644)
        cfg = ["# ssh -F %s <node-ip-or-name> nvidia-smi -L" % (S / "ssh_config")]
        for n in sorted(st["nodes"].values(), key=lambda n: n["name"]):
            cfg += ["Host %s" % n["name"], "  HostName %s" % n["internal_ip"]]
        cfg += [
            "Host *",
            "  User %s" % st["user"],
            "  Port %d" % port,
            "  IdentityFile %s" % (S / "id_ed25519"),
            "  IdentitiesOnly yes",
            "  UserKnownHostsFile %s" % (S / "known_hosts"),
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes",
            "  CheckHostIP no",
            "  UpdateHostKeys no",
            "  BatchMode yes",
            "  PasswordAuthentication no",
            "  KbdInteractiveAuthentication no",
            "  PreferredAuthentications publickey",
            "  ConnectTimeout 10",
            "  LogLevel ERROR",
        ]
        write_file(S / "ssh_config", "\n".join(cfg) + "\n", 0o644)

    def host_record(self, n):
        """The node's simulated host as the fakes read it (and sim_dra publishes its GPUs from)."""
        return {"node": n["name"], "ip": n["ssh_address"], "mode": n["ssh"]["mode"], "gpu_index": n["ssh"]["gpu_index"],
                "fixture": n["ssh"].get("fixture_path"), "gpus": n["ssh"].get("gpus") or n["physical_gpus"] or None,
                "mig": n.get("mig_devices") or None, "nvml_library_version": n["ssh"].get("nvml_library_version"),
                "uuid_seed": None if n["ssh"].get("keep_uuids") else n["name"],
                "settings": n["ssh"].get("settings") or {}}

    def write_host_file(self, n):
        """What the fake nvidia-smi reads at each call, keyed by the address sshd answered on."""
        if not n["ssh"]["enabled"]:
            return
        S = self.ssh_dir
        a = n["ssh_address"]
        write_file(S / "hosts" / (a + ".json"), json.dumps(self.host_record(n), indent=1))
        marker = S / "hosts" / (a + ".no-nvidia-smi")
        if n["ssh"]["mode"] == "no-nvidia-smi":
            marker.touch()
        elif marker.exists():
            marker.unlink()

    # -- network namespace for cut-off nodes -------------------------------------------------------

    def setup_netns(self):
        st = self.state
        cid = st["id"]
        ns = "gpuctl-" + cid
        host_if, ns_if = "gc%sh" % cid[:6], "gc%sn" % cid[:6]
        err = None
        st["netns"] = {"ok": False, "error": None}
        if os.environ.get("GPUCTL_E2E_NO_NETNS"):
            err = "disabled by GPUCTL_E2E_NO_NETNS"
        elif os.getuid() != 0:
            err = "not root: creating a network namespace needs root (CAP_NET_ADMIN)"
        elif not shutil.which("ip"):
            err = "the `ip` command (iproute2) is missing"
        subnet = None
        if not err:
            used = run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
            for _ in range(50):
                third = random.randint(0, 255)
                cand = "198.18.%d." % third
                if cand not in used:
                    subnet = cand
                    break
            steps = [
                ["ip", "netns", "add", ns],
                ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns],
                ["ip", "addr", "add", subnet + "1/24", "dev", host_if],
                ["ip", "link", "set", host_if, "up"],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                ["ip", "-n", ns, "link", "set", ns_if, "up"],
                # Should the veth vanish, the subnet must never fall back to the default route.
                ["ip", "route", "add", "unreachable", subnet + "0/24", "metric", "9999"],
            ]
            st["netns"] = {"ok": False, "name": ns, "host_if": host_if, "ns_if": ns_if, "subnet": subnet + "0/24",
                           "prefix": subnet, "error": None}
            self.save()
            for cmd in steps:
                p = run(cmd, check=False)
                if p.returncode != 0:
                    err = "`%s` failed: %s" % (" ".join(cmd), p.stderr.strip())
                    break
        if err:
            st["netns"].update({"ok": False, "error": "network namespaces unavailable, so nodes cannot be cut off "
                                                      "from the network: " + err})
            log("WARNING: " + st["netns"]["error"])
        else:
            st["netns"]["ok"] = True
            log("network namespace %s ready (%s via %s)" % (ns, st["netns"]["subnet"], host_if))

    def cut_address_for(self, n):
        st = self.state
        if not st["netns"].get("ok"):
            raise ClusterError("cannot cut node %s off: %s" % (n["name"], st["netns"].get("error")))
        if not n.get("cut_address"):
            j = st["next_cut"]
            if j >= 240:
                raise ClusterError("too many cut-off nodes (240 at most)")
            st["next_cut"] = j + 1
            n["cut_address"] = "%s%d" % (st["netns"]["prefix"], 10 + j)
            # SYNs to the address leave through the veth towards a MAC that nobody has: the peer in
            # the namespace drops them, so connects hang until the client's timeout.
            run(["ip", "neigh", "replace", n["cut_address"], "lladdr", "02:00:5e:00:53:%02x" % (j % 256),
                 "dev", st["netns"]["host_if"], "nud", "permanent"])
        return n["cut_address"]

    # -- fleets ------------------------------------------------------------------------------------

    def apply_fleet_file(self, path):
        path = Path(path)
        if not path.is_file():
            raise ClusterError("fleet file %s not found" % path)
        return self.apply_fleet_text(path.read_text(), source=str(path))

    def apply_fleet_text(self, text, source="fleet", wait=True):
        """Creates the fleet's nodes and SSH hosts; returns their cluster.json entries."""
        doc = need_yaml().safe_load(text)
        fleet_name, specs = expand_fleet(doc, source)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        t = time.time()
        with self.locked():
            self.require_running()
            st = self.state
            new = []
            for spec in specs:
                old = st["nodes"].get(spec["name"])
                if old:
                    if old.get("fleet_digest") == digest:
                        continue
                    raise ClusterError("%s: node %s already exists (from fleet %s); use distinct name prefixes per suite"
                                       % (source, spec["name"], old.get("fleet")))
                new.append(spec)
            created = []
            addrs = []
            kubelet_addrs = []
            for spec in new:
                k = st["next_ip"]
                st["next_ip"] = k + 1
                a = "127.%d.%d.%d" % (st["ip_base"], k // 250, 2 + k % 250)
                ssh = spec["ssh"]
                n = {
                    "name": spec["name"], "fleet": fleet_name, "fleet_digest": digest, "ssh_address": a,
                    "internal_ip": a, "cut": False, "cut_address": None, "ready": spec.get("ready", True) is not False,
                    "physical_gpus": spec["gpus"], "product": spec.get("product") or (spec.get("fixtureInfo") or {}).get("product_name"),
                    "label_scheme": spec.get("labelScheme", "gfd"),
                    "ssh": {"enabled": bool(ssh["enabled"]), "mode": ssh["mode"], "gpu_index": int(ssh.get("gpuIndex", 0)),
                            "fixture": ssh.get("fixture"), "fixture_path": ssh.get("fixturePath"),
                            "gpus": ssh.get("gpus"), "nvml_library_version": ssh.get("nvmlLibraryVersion"),
                            "keep_uuids": bool(ssh.get("keepUuids", False)),
                            "settings": {k: ssh[k] for k in sim_host.SETTINGS if k in ssh}},
                }
                if spec.get("cut"):
                    n["internal_ip"] = self.cut_address_for(n)
                    n["cut"] = True
                obj, mig_devices = node_object(spec, n["internal_ip"])
                n["mig_devices"] = mig_devices
                n["dra"] = spec["dra"]
                n["capacity"] = obj["status"]["capacity"]
                n["allocatable"] = obj["status"]["allocatable"]
                n["labels"] = obj["metadata"]["labels"]
                st["nodes"][n["name"]] = n
                self.write_host_file(n)
                if n["ssh"]["enabled"]:
                    addrs.append(a)
                kubelet_addrs.append(a)
                created.append((n, obj))
            st["fleets"][fleet_name] = {"digest": digest, "source": source, "nodes": [s["name"] for s in specs]}
            write_file(self.dir / "fleets" / ("%s-%s.yaml" % (fleet_name, digest)), text)
            self.write_ssh_client_files()
            self.save()
            if addrs:
                self.start_sshd_shards(addrs)
            self.relay_listen(kubelet_addrs)
            if any(n["dra"] for n, _ in created):
                self.require_dra_flags(source)
            for n, obj in created:
                self.create_node(obj)
                if n["dra"]:
                    self.publish_dra(n)
            self.save()
        if created and wait:
            self.wait_nodes([n["name"] for n, _ in created if n["ready"]])
            log("fleet %s: %d node(s) ready (%.1fs)" % (fleet_name, len(created), time.time() - t))
        elif not created:
            log("fleet %s: already applied" % fleet_name)
        self.load()
        return [self.state["nodes"][s["name"]] for s in specs]

    def create_node(self, obj):
        name = obj["metadata"]["name"]
        code, got = self.api("POST", "/api/v1/nodes", obj, ok=None)
        if code == 409:
            raise ClusterError("node %s already exists in the cluster" % name)
        if code not in (200, 201):
            raise ClusterError("creating node %s failed: HTTP %d: %s" % (name, code, got))
        want = obj["status"]
        have = got.get("status") or {}
        if have.get("capacity") != want["capacity"] or have.get("addresses") != want["addresses"]:
            # Not kept on create: set it through the status subresource.
            patch = {"status": {k: want[k] for k in ("capacity", "allocatable", "addresses", "nodeInfo")}}
            self.api("PATCH", "/api/v1/nodes/%s/status" % name, patch, ctype="application/merge-patch+json")

    def publish_dra(self, n):
        """The node's ResourceSlice, as the DRA driver's kubelet plugin publishes it on start."""
        try:
            devices = sim_dra.node_devices(self, n["name"])
            sim_dra.publish(self, n["name"], devices)
        except sim_dra.DraError as e:
            raise ClusterError("node %s: %s" % (n["name"], e))
        n["dra"]["devices"] = sim_dra.describe(devices)

    def require_dra_flags(self, source):
        argv = " ".join(self.component_argv("kube-apiserver"))
        if feature_gates_flag("kube-apiserver") not in argv:
            raise ClusterError("%s declares DRA nodes, but this cluster's kube-apiserver runs without the DRA feature "
                               "gates (it was started by an older cluster.py): `down`, then `up` again" % source)

    def wait_nodes(self, names, timeout=120):
        names = set(names)

        def ready():
            _, lst = self.api("GET", "/api/v1/nodes")
            pending = set(names)
            for node in lst["items"]:
                n = node["metadata"]["name"]
                if n not in names:
                    continue
                conds = {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []}
                taints = {t["key"] for t in node.get("spec", {}).get("taints", []) or []}
                ip = [a["address"] for a in node["status"].get("addresses", []) if a["type"] == "InternalIP"]
                want_ip = self.state["nodes"][n]["internal_ip"]
                if conds.get("Ready") == "True" and "node.kubernetes.io/not-ready" not in taints and ip == [want_ip]:
                    pending.discard(n)
            if pending:
                raise ClusterError("not ready yet: %s" % ", ".join(sorted(pending)))
            return True
        self.wait("nodes Ready without the not-ready taint and with their InternalIP", ready, timeout,
                  logs=["kwok.log", "kube-controller-manager.log"])

    # -- runtime switches --------------------------------------------------------------------------

    def node(self, name):
        n = self.state["nodes"].get(name)
        if not n:
            raise ClusterError("no node %s in this cluster (known: %s)" % (name, ", ".join(sorted(self.state["nodes"]))))
        return n

    def set_ssh_mode(self, name, mode, gpu_index=None):
        if mode not in SSH_MODES:
            raise ClusterError("unknown ssh mode %r (one of %s)" % (mode, ", ".join(SSH_MODES)))
        with self.locked():
            self.require_running()
            n = self.node(name)
            if not n["ssh"]["enabled"]:
                raise ClusterError("node %s has no SSH host (ssh.enabled: false)" % name)
            if mode in FIXTURE_MODES and not n["ssh"].get("fixture_path"):
                raise ClusterError("node %s has no nvidia-smi fixture, so mode %s cannot be simulated" % (name, mode))
            n["ssh"]["mode"] = mode
            if gpu_index is not None:
                n["ssh"]["gpu_index"] = int(gpu_index)
            self.write_host_file(n)
            self.write_ssh_client_files()
            self.save()
        return n

    def set_ssh_host(self, name, clear=(), **settings):
        """Merges settings (sim_host.SETTINGS; a value None, or a key in `clear`, removes one) into the
        node's simulated host; the next command on it sees them. Returns the node's entry."""
        unknown = sorted(set(clear) - set(sim_host.SETTINGS))
        if unknown:
            raise ClusterError("cannot clear %s: unknown settings (known: %s)" % (unknown, ", ".join(sim_host.SETTINGS)))
        with self.locked():
            self.require_running()
            n = self.node(name)
            if not n["ssh"]["enabled"]:
                raise ClusterError("node %s has no SSH host (ssh.enabled: false)" % name)
            merged = {k: v for k, v in dict(n["ssh"].get("settings") or {}, **settings).items()
                      if v is not None and k not in clear}
            try:
                n["ssh"]["settings"] = checked_settings(merged, n["ssh"].get("fixture_path"),
                                                        n["ssh"].get("gpus") or n["physical_gpus"] or None)
            except ClusterError as e:
                raise ClusterError("node %s: %s" % (name, e))
            self.write_host_file(n)
            self.save()
        return n

    def set_cut(self, name, cut):
        with self.locked():
            self.require_running()
            n = self.node(name)
            ip = self.cut_address_for(n) if cut else n["ssh_address"]
            n["cut"] = bool(cut)
            n["internal_ip"] = ip
            _, cur = self.api("GET", "/api/v1/nodes/" + name)
            addrs = [a for a in cur["status"].get("addresses", []) if a["type"] != "InternalIP"]
            patch = {"status": {"addresses": [{"type": "InternalIP", "address": ip}] + addrs}}
            self.api("PATCH", "/api/v1/nodes/%s/status" % name, patch, ctype="application/merge-patch+json")
            self.write_ssh_client_files()
            self.save()
        return n

    # -- faults (tests/e2e/test_faults.py) ---------------------------------------------------------

    def component_argv(self, name):
        """The argv a control-plane component runs with, remembered in the state so that a stopped
        one can be started again exactly as before."""
        cmds = self.state.setdefault("cmds", {})
        pid = self.state["procs"].get(name)
        if self.ours(pid):
            raw = Path("/proc/%d/cmdline" % pid).read_bytes()
            cmds[name] = [a.decode() for a in raw.split(b"\0")[:-1]]
        if name not in cmds:
            raise ClusterError("%s is not running and its command line was never recorded" % name)
        return cmds[name]

    def stop_component(self, name, sig=signal.SIGKILL):
        """Stops one component (SIGKILL: a crash; SIGTERM: a clean shutdown). Other suites' clusters
        are not touched: only the pid recorded in this state dir."""
        if name not in PROC_ORDER:
            raise ClusterError("unknown component %r (one of %s)" % (name, ", ".join(PROC_ORDER)))
        with self.locked():
            self.require_running()
            self.component_argv(name)
            pid = self.state["procs"].get(name)
            if self.ours(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)   # a paused process would never handle SIGTERM
                    os.kill(pid, sig)
                deadline = time.time() + 15
                while pid_alive(pid) and time.time() < deadline:
                    time.sleep(0.05)
                if pid_alive(pid):
                    kill_pids([pid], grace=0)
            self.state["procs"][name] = None
            self.save()
        log("%s stopped (signal %d)" % (name, sig))

    def start_component(self, name, timeout=240):
        """Starts a stopped component again with its recorded argv; for the apiserver, waits for
        /readyz (the kubeconfigs stay valid: same port, same certificates). A new apiserver that
        exits before it is ready (say its port was taken while it was down) is started again,
        up to three times within `timeout`; a failure shows only the new processes' log lines."""
        t = time.time()
        log_name = name + ".log"
        marker = self.mark_log(log_name, "%s started again by cluster.py" % name)
        pid = self.spawn_again(name)
        if name == "kube-apiserver":
            starts = [pid]

            def readyz():
                with contextlib.suppress(OSError, ClusterError, ssl.SSLError, ValueError):
                    if self.api("GET", "/readyz", ok=None, timeout=5)[0] == 200:
                        return True
                if not pid_alive(starts[-1]) and len(starts) < 3:
                    log("%s (pid %d) exited before it was ready; starting it again" % (name, starts[-1]))
                    with self.locked():
                        self.state["procs"][name] = None
                    time.sleep(1)
                    starts.append(self.spawn_again(name))
                return False

            try:
                self.wait("kube-apiserver /readyz after a restart", readyz, timeout, interval=0.2)
            except ClusterError as e:
                alive = "running" if pid_alive(starts[-1]) else "exited"
                raise ClusterError("%s (%d start(s), the last %s)\n--- %s since the restart ---\n%s" % (
                    e, len(starts), alive, log_name, self.log_since(log_name, marker)))
        log("%s started again (%.1fs)" % (name, time.time() - t))

    def spawn_again(self, name):
        with self.locked():
            self.require_running()
            if self.ours(self.state["procs"].get(name)):
                raise ClusterError("%s is already running (pid %d)" % (name, self.state["procs"][name]))
            argv = self.component_argv(name)
            pid = self.state["procs"][name] = self.spawn(name, argv)
            self.save()
        return pid

    def mark_log(self, name, what):
        """Appends a marker line to a component's log; returns it for log_since."""
        marker = "---- %s at %s ----" % (what, time.strftime("%H:%M:%S"))
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / name, "a") as f:
            f.write(marker + "\n")
        return marker

    def log_since(self, name, marker, n=40):
        """The last n lines written to a log after marker (the output of the process started then)."""
        try:
            text = Path(self.logs / name).read_text(errors="replace")
        except OSError as e:
            return str(e)
        lines = text[text.rfind(marker) + len(marker):].splitlines(True) if marker in text else []
        return "".join(lines[-n:]) or "(nothing written)\n"

    def restart_apiserver(self, down_for=0.0, sig=signal.SIGKILL, timeout=240):
        """kube-apiserver killed (a crash by default) and started again after `down_for` seconds;
        returns once /readyz answers 200 again."""
        self.stop_component("kube-apiserver", sig)
        time.sleep(down_for)
        self.start_component("kube-apiserver", timeout)

    def pause_component(self, name, paused=True):
        """SIGSTOP / SIGCONT: the process keeps its sockets but answers nothing (etcd paused: the
        apiserver's requests to it hang)."""
        with self.locked():
            self.require_running()
            pid = self.state["procs"].get(name)
            if not self.ours(pid):
                raise ClusterError("%s is not running" % name)
            os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)
        log("%s %s" % (name, "paused" if paused else "resumed"))

    def set_extra_tokens(self, entries):
        """Static bearer tokens besides the `token` context's: entries of (token, user, uid, groups).
        The apiserver reads tokens.csv only when it starts: restart it to apply (a token removed
        here is then revoked, which is how tests rotate credentials)."""
        with self.locked():
            self.require_running()
            self.state["extra_tokens"] = [list(e) for e in entries]
            lines = ['%s,token-user,uid-gpuctl-token-user,"gpuctl-e2e:token-users"' % self.state["tokens"]["token"]]
            for token, user, uid, groups in entries:
                lines.append('%s,%s,%s,"%s"' % (token, user, uid, ",".join(groups)))
            write_file(self.pki / "tokens.csv", "\n".join(lines) + "\n", 0o600)
            self.save()

    def mint_client_cert(self, name, subject, not_before, not_after):
        """A client certificate signed by the cluster's CA with the given validity (openssl ca
        dates, YYYYMMDDHHMMSSZ: already expired, not yet valid...), and a kubeconfig using it;
        returns the kubeconfig's path."""
        with self.locked():
            self.require_running()
            M = self.pki / "minted"
            M.mkdir(exist_ok=True)
            if not (M / "serial").exists():
                (M / "serial").write_text("%016x\n" % random.getrandbits(63))
                (M / "index.txt").write_text("")
            (M / "ca.cnf").write_text(
                "[ca]\ndefault_ca = minted\n[minted]\ndatabase = %s\nnew_certs_dir = %s\nserial = %s\n"
                "default_md = sha256\npolicy = any\nunique_subject = no\ncopy_extensions = none\n"
                "[any]\ncommonName = supplied\norganizationName = optional\n"
                "[client]\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage = clientAuth\n" % (M / "index.txt", M, M / "serial"))
            key, csr, crt = M / (name + ".key"), M / (name + ".csr"), M / (name + ".crt")
            self.genkey(key, "rsa-pkcs8")
            os.chmod(key, 0o600)
            run(["openssl", "req", "-new", "-key", str(key), "-subj", subject, "-config", str(self.pki / "req.cnf"),
                 "-out", str(csr)])
            run(["openssl", "ca", "-batch", "-notext", "-config", str(M / "ca.cnf"), "-cert", str(self.pki / "ca.crt"),
                 "-keyfile", str(self.pki / "ca.key"), "-extensions", "client", "-startdate", not_before,
                 "-enddate", not_after, "-in", str(csr), "-out", str(crt)])
            return self.write_cert_kubeconfig(name, crt, key)

    def write_cert_kubeconfig(self, name, crt, key):
        import base64
        b64 = lambda p: base64.b64encode(Path(p).read_bytes()).decode()  # noqa: E731
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": "gpuctl-e2e", "cluster": {
                "server": "https://127.0.0.1:%d" % self.state["ports"]["apiserver"],
                "certificate-authority-data": b64(self.pki / "ca.crt")}}],
            "users": [{"name": name, "user": {"client-certificate-data": b64(crt), "client-key-data": b64(key)}}],
            "contexts": [{"name": name, "context": {"cluster": "gpuctl-e2e", "user": name, "namespace": "default"}}],
        }
        path = self.dir / "kubeconfigs" / ("minted-%s.yaml" % name)
        write_file(path, need_yaml().safe_dump(cfg, sort_keys=False), 0o600)
        return path

    # -- metrics.k8s.io (sim_metrics.py) -------------------------------------------------------------

    def enable_metrics(self, timeout=120):
        """metrics-server started and APIService v1beta1.metrics.k8s.io Available (idempotent)."""
        def pick():
            return pick_ports(1, taken=set(self.state["ports"].values()))[0]
        try:
            m = sim_metrics.enable(self, pick, modcache_dirs(), timeout=timeout)
        except BaseException:
            # Never leave an APIService nobody serves (discovery errors for every client).
            log("enable-metrics failed: removing the APIService and stopping metrics-server")
            with contextlib.suppress(Exception):
                sim_metrics.disable(self)
            raise
        log("metrics.k8s.io available through metrics-server %s on 127.0.0.1:%d (%.1fs)"
            % (m["version"], m["port"], m["seconds"]))
        return m

    def disable_metrics(self):
        """APIService removed (gone from discovery), then metrics-server stopped (idempotent)."""
        log("metrics.k8s.io removed, metrics-server stopped (%.1fs)" % sim_metrics.disable(self))

    # -- Prometheus with dcgm-exporter expositions (sim_prometheus.py) --------------------------------

    def enable_prometheus(self, timeout=60):
        """The exposition server and both Prometheus servers started (idempotent)."""
        def pick():
            return pick_ports(1, taken=set(self.state["ports"].values()))[0]
        p = sim_prometheus.enable(self, pick, timeout=timeout)
        log("Prometheus at %s (TLS and basic auth: %s), scraping every %s (%.1fs)"
            % (p["url"], p["secure_url"], p["scrape_interval"], p["seconds"]))
        return p

    # -- down --------------------------------------------------------------------------------------

    def down(self):
        t = time.time()
        if not self.dir.exists():
            log("nothing to do: %s does not exist" % self.dir)
            return
        with self.locked():
            self._teardown(keep_lock=False)
        log("cluster down in %.1fs; logs kept in %s" % (time.time() - t, self.kept_logs))

    def marked_pids(self):
        """Every process of this cluster: the ones we spawned (and sshd's per-connection children)
        carry GPUCTL_SIM_OWNER, SSH sessions carry GPUCTL_SIM_STATE (sshd's SetEnv)."""
        return [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != os.getpid() and self.ours(int(d))]

    def _teardown(self, keep_lock):
        st = self.state or {}
        # SSH first (listeners, connections, sessions such as hung nvidia-smi), then the control
        # plane from the top down, then anything else still marked as ours.
        kids = proc_children()
        victims = []
        for shard in st.get("sshd", []):
            if self.ours(shard.get("pid")):
                victims += [shard["pid"]] + descendants(shard["pid"], kids)
        procs = st.get("procs") or {}
        cp = {procs.get(n) for n in PROC_ORDER}
        victims += [p for p in self.marked_pids() if p not in cp]
        kill_pids(sorted(set(victims)), grace=2)
        for name in reversed(PROC_ORDER):
            if self.ours(procs.get(name)):
                kill_pids([procs[name]], grace=10)
        kill_pids(self.marked_pids(), grace=2)
        ns = st.get("netns") or {}
        if ns.get("name"):
            run(["ip", "link", "del", ns.get("host_if", "")], check=False)
            run(["ip", "netns", "del", ns["name"]], check=False)
            if ns.get("subnet"):
                run(["ip", "route", "del", "unreachable", ns["subnet"], "metric", "9999"], check=False)
        if self.logs.is_dir():
            if self.kept_logs.exists():
                shutil.rmtree(self.kept_logs, ignore_errors=True)
            shutil.copytree(self.logs, self.kept_logs)
            for f in (self.cluster_json, self.state_file, self.dir / "kwok-stages.yaml"):
                if f.exists():
                    shutil.copy(f, self.kept_logs / f.name)
        for child in list(self.dir.iterdir()) if self.dir.exists() else []:
            if keep_lock and child.name == ".lock":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        if not keep_lock:
            with contextlib.suppress(OSError):
                (self.dir / ".lock").unlink(missing_ok=True)
                self.dir.rmdir()
        self.state = None

    # -- descriptions ------------------------------------------------------------------------------

    def ssh_info(self):
        st = self.state
        S = self.ssh_dir
        return {
            "user": st["user"], "port": st["ports"]["ssh"],
            "identity_file": str(S / "id_ed25519"), "known_hosts_file": str(S / "known_hosts"),
            "config_file": str(S / "ssh_config"),
            "gpuctl_flags": ["--ssh-config", str(S / "ssh_config"), "--ssh-identity", str(S / "id_ed25519"),
                             "--ssh-port", str(st["ports"]["ssh"]), "--ssh-user", st["user"],
                             "--ssh-option", "UserKnownHostsFile=%s" % (S / "known_hosts"),
                             "--ssh-option", "StrictHostKeyChecking=yes"],
        }

    def write_cluster_json(self):
        st = self.state
        if not st:
            return
        if (self.pki / "ca.crt").exists():
            self.write_kubeconfigs()
        b = Path(st["bin_dir"])
        data = {
            "schema": 1, "id": st["id"], "phase": st["phase"], "state_dir": str(self.dir),
            "logs_dir": str(self.logs), "kept_logs_dir": str(self.kept_logs),
            "kubeconfig": str(self.kubeconfig),
            "kubeconfigs": {c: str(self.dir / "kubeconfigs" / (c + ".yaml")) for c in CONTEXTS},
            "contexts": {
                "admin": {"user": "admin", "groups": ["system:masters"], "auth": "client certificate (RSA, PKCS#1 key)", "expect": "everything allowed"},
                "viewer": {"user": "viewer", "groups": ["gpuctl-e2e:viewers"], "auth": "client certificate (RSA, PKCS#8 key)",
                           "expect": "get/list/watch on nodes, pods, namespaces, events, jobs, quotas, limitranges, pdbs; writes 403"},
                "nobody": {"user": "nobody", "groups": [], "auth": "client certificate (EC P-256 key)", "expect": "403 on everything, even listing nodes"},
                "token": {"user": "token-user", "groups": ["gpuctl-e2e:token-users"], "auth": "static bearer token (tokens.csv)",
                          "expect": "cluster-admin through ClusterRoleBinding gpuctl-e2e-token-user (not system:masters, so API priority and fairness applies)"},
                "badtoken": {"user": None, "auth": "bearer token unknown to the server", "expect": "401 on everything"},
            },
            "current_context": "admin",
            "api_server": "https://127.0.0.1:%d" % st["ports"]["apiserver"],
            "ca_file": str(self.pki / "ca.crt"),
            "client_certs": {c: {"cert": str(self.pki / (c + ".crt")), "key": str(self.pki / (c + ".key"))}
                             for c in ("admin", "viewer", "nobody")},
            "tokens": dict(st["tokens"]),
            "bin_dir": str(b), "kubectl": str(b / "kubectl"),
            "versions": {"kubernetes": K8S_VERSION, "etcd": ETCD_VERSION, "kwok": KWOK_VERSION},
            "ports": dict(st["ports"]),
            "metrics": sim_metrics.describe(st),
            "prometheus": sim_prometheus.describe(st),
            "fixtures_dir": str(fixtures_dir()),
            "ssh": self.ssh_info(),
            "netns": {k: st["netns"].get(k) for k in ("ok", "name", "subnet", "error")},
            "pod_outcome": {
                "label": SIM_LABEL + "/outcome", "values": ["succeed", "fail", "run", *sim_pods.OUTCOMES],
                "exit_code_annotation": SIM_LABEL + "/exit-code", "reason_annotation": SIM_LABEL + "/reason",
                "message_annotation": SIM_LABEL + "/message", "delay_annotation": SIM_LABEL + "/delay",
                "restarts_annotation": SIM_LABEL + "/restarts", "container_annotation": SIM_LABEL + "/container",
            },
            "logs": {
                "dir": str(sim_logs.logs_root(self)), "kubelet_port": st["ports"].get("kubelet"),
                "crds": ["%s.%s" % (k.lower(), sim_logs.KWOK_GROUP) for k in sim_logs.CRDS],
                "relay_control": (st.get("relay") or {}).get("control"),
                "cert_node_addresses": sim_logs.CERT_NODE_ADDRESSES,
            },
            "fleets": st["fleets"],
            "nodes": {name: {
                "name": name, "fleet": n["fleet"], "internal_ip": n["internal_ip"], "ssh_address": n["ssh_address"],
                "cut": n["cut"], "cut_address": n.get("cut_address"), "ready": n["ready"],
                "gpus": n["physical_gpus"], "product": n["product"], "label_scheme": n["label_scheme"],
                "capacity": n.get("capacity"), "allocatable": n.get("allocatable"), "labels": n.get("labels"),
                "mig_devices": n.get("mig_devices"),
                "dra": sim_dra_entry(n),
                "ssh": {"enabled": n["ssh"]["enabled"], "mode": n["ssh"]["mode"], "gpu_index": n["ssh"]["gpu_index"],
                        "fixture": n["ssh"]["fixture"], "fixture_path": n["ssh"]["fixture_path"],
                        "settings": n["ssh"].get("settings") or {}},
            } for name, n in sorted(st["nodes"].items())},
        }
        write_file(self.cluster_json, json.dumps(data, indent=1, sort_keys=False))

    def env_lines(self):
        self.require_running()
        ssh = self.ssh_info()
        q = shlex.quote
        return "\n".join([
            "export GPUCTL_E2E_STATE=%s" % q(str(self.dir)),
            "export KUBECONFIG=%s" % q(str(self.kubeconfig)),
            "export GPUCTL_SSH_CONFIG=%s" % q(ssh["config_file"]),
            "export GPUCTL_SSH_IDENTITY=%s" % q(ssh["identity_file"]),
            "export GPUCTL_SSH_KNOWN_HOSTS=%s" % q(ssh["known_hosts_file"]),
            "export GPUCTL_SSH_PORT=%d" % ssh["port"],
            "export GPUCTL_SSH_USER=%s" % q(ssh["user"]),
            "export PATH=%s:\"$PATH\"" % q(self.state["bin_dir"]),
        ] + (["export GPUCTL_PROMETHEUS_URL=%s" % q(self.state["prometheus"]["url"])]
             if self.state.get("prometheus") else [])) + "\n"


DISPATCH = r"""#!/bin/sh
# ForceCommand of the simulated GPU hosts (generated by tests/cluster/cluster.py). Runs the client's
# command with the fake nvidia-smi (bin), journalctl and dmesg (bin-klog) first on PATH; the fakes
# find their node from the local address.
set -f
S=%(ssh)s
set -- $SSH_CONNECTION
GPUCTL_SIM_HOST_IP=$3
export GPUCTL_SIM_HOST_IP
if [ -e "$S/hosts/$GPUCTL_SIM_HOST_IP.no-nvidia-smi" ]; then
  PATH="$S/bin-klog:"%(clean)s
else
  PATH="$S/bin:$S/bin-klog:"%(clean)s
fi
export PATH
if [ -z "$SSH_ORIGINAL_COMMAND" ]; then
  echo "gpuctl simulated host: interactive logins are not supported; pass a command" >&2
  exit 1
fi
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


def parse_settings(pairs):
    """`--set KEY=JSON` arguments -> {KEY: value}."""
    out = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq:
            raise ClusterError("--set %s: want KEY=JSON" % pair)
        try:
            out[key] = json.loads(raw)
        except ValueError as e:
            raise ClusterError("--set %s: the value is not JSON (%s); strings need quotes: %s='\"...\"'" % (pair, e, key))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cluster.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def add(name, help):
        p = sub.add_parser(name, help=help)
        p.add_argument("--state-dir", required=True, help="directory holding this cluster's state")
        return p
    p = add("up", "start (or reuse) the cluster")
    p.add_argument("--fleet", help="fleet file to apply (default: tests/cluster/default-fleet.yaml on a fresh cluster)")
    p.add_argument("--metrics", action="store_true", help="then enable-metrics")
    add("down", "stop everything and remove the state (logs are kept in STATE_DIR-logs)")
    p = add("apply-fleet", "add the nodes and SSH hosts of a fleet file")
    p.add_argument("fleet")
    p = add("ssh-mode", "switch a node's simulated nvidia-smi behaviour")
    p.add_argument("node")
    p.add_argument("mode", choices=SSH_MODES)
    p.add_argument("--gpu-index", type=int)
    p = add("ssh-host", "set or clear a node's simulated-host settings (README: \"Host settings\")")
    p.add_argument("node")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="a setting, its value in JSON (strings quoted: --set 'kernelLogSource=\"dmesg\"')")
    p.add_argument("--clear", action="append", default=[], metavar="KEY", help="remove a setting")
    p = add("cut", "cut a node off the network (its InternalIP moves into a network namespace; connects hang)")
    p.add_argument("node")
    p = add("uncut", "undo cut")
    p.add_argument("node")
    p = add("restart-apiserver", "kill kube-apiserver (a crash) and start it again with the same flags")
    p.add_argument("--down-for", type=float, default=0.0, help="seconds to stay down (default 0)")
    p = add("pause", "SIGSTOP a control-plane component (etcd paused: apiserver requests hang)")
    p.add_argument("component", choices=PROC_ORDER)
    p = add("resume", "SIGCONT a paused component")
    p.add_argument("component", choices=PROC_ORDER)
    p = add("mint-cert", "a client certificate from the cluster's CA with chosen dates, in a kubeconfig of its own")
    p.add_argument("name")
    p.add_argument("--subject", default="/O=system:masters/CN=minted")
    p.add_argument("--not-before", default="20200101000000Z", help="openssl ca date (default: 2020-01-01)")
    p.add_argument("--not-after", default="20200102000000Z", help="openssl ca date (default: 2020-01-02, expired)")
    add("enable-metrics", "start metrics-server and register metrics.k8s.io (kubectl top); waits until Available")
    add("disable-metrics", "unregister metrics.k8s.io and stop metrics-server")
    p = add("enable-prometheus", "start Prometheus (plain, and TLS with basic auth) scraping each node's "
            "dcgm-exporter exposition (sim_prometheus.py); waits until ready")
    p.add_argument("--render-fleet", action="store_true",
                   help="also serve every node's exposition rendered from its nvidia-smi capture (the sandbox)")
    add("env", "print shell export lines")
    add("status", "print whether the cluster runs, and cluster.json's path")
    a = ap.parse_args(argv)
    c = Cluster(a.state_dir)
    try:
        if a.cmd == "up":
            path = c.up(a.fleet)
            if a.metrics:
                c.enable_metrics()
            print(path)
        elif a.cmd == "enable-metrics":
            c.enable_metrics()
        elif a.cmd == "disable-metrics":
            c.disable_metrics()
        elif a.cmd == "enable-prometheus":
            c.enable_prometheus()
            if a.render_fleet:
                log("dcgm-exporter expositions served for %d node(s)" % len(sim_prometheus.serve_rendered_fleet(c)))
            print(json.dumps(sim_prometheus.describe(c.load()), indent=1))
        elif a.cmd == "down":
            c.down()
        elif a.cmd == "apply-fleet":
            for n in c.apply_fleet_file(a.fleet):
                print("%-24s %-16s ssh:%s" % (n["name"], n["internal_ip"], n["ssh"]["mode"]))
        elif a.cmd == "ssh-mode":
            n = c.set_ssh_mode(a.node, a.mode, a.gpu_index)
            print("%s: ssh mode %s (gpu index %d)" % (n["name"], n["ssh"]["mode"], n["ssh"]["gpu_index"]))
        elif a.cmd == "ssh-host":
            n = c.set_ssh_host(a.node, clear=a.clear, **parse_settings(a.set))
            print("%s: %s" % (n["name"], json.dumps(n["ssh"]["settings"], sort_keys=True)))
        elif a.cmd in ("cut", "uncut"):
            n = c.set_cut(a.node, a.cmd == "cut")
            print("%s: InternalIP %s (%s)" % (n["name"], n["internal_ip"], "cut off" if n["cut"] else "reachable"))
        elif a.cmd == "restart-apiserver":
            c.restart_apiserver(a.down_for)
        elif a.cmd in ("pause", "resume"):
            c.pause_component(a.component, a.cmd == "pause")
        elif a.cmd == "mint-cert":
            print(c.mint_client_cert(a.name, a.subject, a.not_before, a.not_after))
        elif a.cmd == "env":
            sys.stdout.write(c.env_lines())
        elif a.cmd == "status":
            st = c.load()
            running = bool(st) and c.alive()
            if running:
                print("%s: running\n%s" % (c.dir, c.cluster_json))
            elif st and st.get("phase") != "ready":
                print("%s: not ready (phase %s: an `up` failed or is still running; if none runs, "
                      "`cluster.py down --state-dir %s`, then `up`)" % (c.dir, st.get("phase"), c.dir))
            else:
                print("%s: not running" % c.dir)
            return 0 if running else 1
    except (ClusterError, sim_metrics.MetricsError, sim_prometheus.PrometheusError) as e:
        print("cluster.py %s: error: %s" % (a.cmd, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
