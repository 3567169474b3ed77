"""GPUs as DRA devices on the local cluster, published the way NVIDIA's DRA driver does it
(kubernetes-sigs/dra-driver-nvidia-gpu, its GPU kubelet plugin and Helm chart), for nodes a fleet
marks `dra:` (cluster.py) and for e2e tests that change what a node publishes.

What the driver does and what we do instead:
  - its kubelet plugin enumerates the GPUs through NVML and publishes one ResourceSlice per node
    (cluster-scoped, generateName `<node>-gpu.nvidia.com-`, owned by the Node, driver
    `gpu.nvidia.com`, pool = the node's name, generation 1, resourceSliceCount 1). We read the GPUs
    from the node's simulated host: the same capture, UUIDs, minor numbers, bus ids and versions
    that the fake nvidia-smi answers over ssh (fake_nvidia_smi.host_gpus), so a client can join
    `nvidia-smi` output with DRA devices by UUID;
  - a full GPU is device `gpu-<minor>` (deviceinfo.go GpuInfo.CanonicalName) with attributes type=gpu,
    uuid, productName, brand, architecture, cudaComputeCapability, driverVersion,
    cudaDriverVersion (versions as semver, GpuInfo.Attributes), resource.kubernetes.io/pciBusID,
    and capacity memory in bytes;
  - a GPU in MIG mode publishes its MIG devices only (an A100 cannot be used whole without a reset),
    named as mig.go's MigSpecTuple.ToCanonicalName: `gpu-<parent minor>-mig-<profile without
    dots>-<GI profile id>-<placement start>`, e.g. `gpu-0-mig-1g5gb-19-0`. Device names must be
    DNS labels, so `gpu-0-mig-1g.5gb-0` would be refused by the API server. Attributes
    (CommonAttributesMig): type=mig, parentUUID, profile, uuid (the `nvidia-smi -L` MIG UUID),
    the parent's productName, brand, architecture, versions and pciBusID; capacity memory,
    multiprocessors and memorySlice<i> for each memory slice it holds (CommonCapacitiesMig);
  - its health check (NVMLDeviceHealthCheck) writes device taints into the slice, e.g.
    `gpu.nvidia.com/xid=79` NoSchedule; `set_device_taint` writes the same;
  - its Helm chart creates the DeviceClasses `gpu.nvidia.com` (with extendedResourceName
    nvidia.com/gpu on resource.k8s.io/v1, so plain `nvidia.com/gpu` requests are served by DRA on
    nodes without that resource) and `mig.nvidia.com`: `ensure_device_classes` at `up`.

The functions take a cluster.Cluster (harness.cluster() in a test) and a node name.
"""
import json
import re
import time

import fake_nvidia_smi  # noqa: E402  (tests/cluster: the simulated host's GPUs, as nvidia-smi reports them)
import sim_host  # noqa: E402  (tests/cluster: its SettingsError)

DRIVER = "gpu.nvidia.com"
API = "/apis/resource.k8s.io/v1"
XID_TAINT = "gpu.nvidia.com/xid"
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
MIB = 1024 * 1024

DEVICE_CLASSES = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
     "spec": {"selectors": [{"cel": {"expression":
                                     "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
              "extendedResourceName": "nvidia.com/gpu"}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.nvidia.com"},
     "spec": {"selectors": [{"cel": {"expression":
                                     "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}},
]

# (substring of the product name) -> (CUDA compute capability, architecture) as NVML reports them:
# the driver's cudaComputeCapability (nvidia-smi -q -x does not print it) and its architecture where
# the capture has no <product_architecture> (drivers before ~470). Most specific first.
PRODUCTS = [("H200", "9.0", "Hopper"), ("H100", "9.0", "Hopper"), ("A100", "8.0", "Ampere"),
            ("A30", "8.0", "Ampere"), ("A10G", "8.6", "Ampere"), ("A10", "8.6", "Ampere"),
            ("L40", "8.9", "Ada Lovelace"), ("L4", "8.9", "Ada Lovelace"), ("RTX 40", "8.9", "Ada Lovelace"),
            ("RTX 30", "8.6", "Ampere"), ("T4", "7.5", "Turing"),
            ("RTX 20", "7.5", "Turing"), ("GTX 16", "7.5", "Turing"), ("V100", "7.0", "Volta"),
            ("P100", "6.0", "Pascal"), ("P40", "6.1", "Pascal"), ("P4", "6.1", "Pascal"),
            ("GTX 10", "6.1", "Pascal"), ("GT 1030", "6.1", "Pascal"), ("Quadro P", "6.1", "Pascal")]

# MIG GPU instance profiles (NVML GpuInstanceProfileInfo, as `nvidia-smi mig -lgip` lists them):
# profile id -> (memory slices, possible placement starts). Names differ by GPU memory size.
MIG_PROFILE_IDS_40GB = {"1g.5gb": 19, "1g.10gb": 15, "2g.10gb": 14, "3g.20gb": 9, "4g.20gb": 5, "7g.40gb": 0}
MIG_PROFILE_IDS_80GB = {"1g.10gb": 19, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0}
MIG_PLACEMENTS = {19: (1, range(0, 7)), 15: (2, (0, 2, 4, 6)), 14: (2, (0, 2, 4)), 9: (4, (0, 4)), 5: (4, (0,)),
                  0: (8, (0,))}
# multiprocessors per slice count ("1g" .. "7g"): A100 14 per slice, H100 16 (7g: 98 / 132)
MIG_SMS = {"Ampere": {1: 14, 2: 28, 3: 42, 4: 56, 7: 98}, "Hopper": {1: 16, 2: 32, 3: 60, 4: 64, 7: 132}}
# memory in MiB (NVML's memorySizeMB), as cluster.MIG_MEMORY
MIG_MEMORY = {"1g.5gb": 4864, "1g.10gb": 9856, "2g.10gb": 9856, "3g.20gb": 19968, "4g.20gb": 19968,
              "7g.40gb": 40192, "1g.20gb": 19968, "2g.20gb": 20096, "3g.40gb": 40320, "4g.40gb": 40320,
              "7g.80gb": 80896}


class DraError(Exception):
    """What a DRA node cannot publish, or a change its slice cannot take; the message names it."""


# -- the devices -----------------------------------------------------------------------------------

def semver(text):
    """'510.47.03' -> '510.47.3', '11.6' -> '11.6.0': the driver parses versions with
    Masterminds/semver and publishes String(), which drops leading zeros and fills in the patch."""
    parts = [int(p) for p in str(text).strip().split(".")[:3] if p.isdigit()]
    if not parts:
        raise DraError("version %r is not numeric" % text)
    return ".".join(map(str, (parts + [0, 0])[:3]))


def product_traits(product):
    """(compute capability as semver, architecture) of a product name."""
    for key, cc, arch in PRODUCTS:
        if key in product:
            return semver(cc), arch
    raise DraError("no CUDA compute capability known for %r (sim_dra.PRODUCTS)" % product)


def pci_bus_id(gpu_id):
    """nvidia-smi's '00000000:00:04.0' -> '0000:00:04.0', the sysfs form the driver publishes."""
    dom, _, rest = gpu_id.partition(":")
    return ("%s:%s" % (dom[-4:], rest)).lower()


def _string(v):
    return {"string": v}


def _version(v):
    return {"version": v}


def _quantity(n):
    """A DeviceCapacity as the driver's resource.NewQuantity(n, BinarySI) serializes: the largest
    binary suffix that divides n exactly (16106127360 -> 15Gi, 5100273664 -> 4864Mi, 14 -> 14)."""
    for suffix, unit in (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20),
                         ("Ki", 1 << 10)):
        if n >= unit and n % unit == 0:
            return {"value": "%d%s" % (n // unit, suffix)}
    return {"value": str(n)}


def mig_placements(profiles, memory_mib, gpu_label):
    """(profile, GI profile id, placement start, slices) for a GPU's MIG devices in `profiles`
    order, each at the lowest free start its profile allows (as nvidia-smi mig -cgi places them)."""
    ids = MIG_PROFILE_IDS_80GB if memory_mib > 50000 else MIG_PROFILE_IDS_40GB
    used, out = set(), []
    for prof in profiles:
        if prof not in ids:
            raise DraError("%s: MIG profile %s does not exist on a %d MiB GPU (one of %s)"
                           % (gpu_label, prof, memory_mib, ", ".join(ids)))
        pid = ids[prof]
        size, starts = MIG_PLACEMENTS[pid]
        start = next((s for s in starts if not used & set(range(s, s + size))), None)
        if start is None:
            raise DraError("%s: MIG devices %s do not fit on one GPU (8 memory slices)" % (gpu_label, profiles))
        used |= set(range(start, start + size))
        out.append((prof, pid, start, size))
    return out


def _gpu_attributes(tag, block, head):
    product = tag(block, "product_name")
    cc, known_arch = product_traits(product)
    arch = tag(block, "product_architecture")
    return {
        "productName": _string(product), "brand": _string(tag(block, "product_brand") or "NVIDIA"),
        "architecture": _string(arch if arch and arch != "N/A" else known_arch),
        "cudaComputeCapability": _version(cc),
        "driverVersion": _version(semver(tag(head, "driver_version"))),
        "cudaDriverVersion": _version(semver(tag(head, "cuda_version"))),
        "resource.kubernetes.io/pciBusID": _string(pci_bus_id(fake_nvidia_smi.gpu_id(block))),
    }


def _memory_mib(block):
    m = re.search(r"<fb_memory_usage>\s*<total>\s*(\d+)\s*MiB", block)
    return int(m.group(1)) if m else 0


def host_devices(host, mig_profiles=None):
    """The devices the driver publishes for a simulated host (cluster.Cluster.host_record's dict):
    one per GPU, or per MIG device when `mig_profiles` (one GPU's, as the fleet's mig.devices) is set."""
    if not host.get("fixture"):
        raise DraError("a DRA node needs ssh.fixture: its devices are the GPUs its nvidia-smi reports")
    try:
        cap, blocks = fake_nvidia_smi.host_gpus(host)
    except sim_host.SettingsError as e:
        raise DraError(str(e))
    tag = fake_nvidia_smi.tag
    devices = []
    for block in blocks:
        minor = int(tag(block, "minor_number") or 0)
        uuid = tag(block, "uuid")
        common = _gpu_attributes(tag, block, cap.head)
        mem = _memory_mib(block)
        if not mig_profiles:
            attrs = {"type": _string("gpu"), "uuid": _string(uuid), **common}
            devices.append({"name": "gpu-%d" % minor, "attributes": attrs, "capacity": {"memory": _quantity(mem * MIB)}})
            continue
        sms = MIG_SMS.get(common["architecture"]["string"], MIG_SMS["Ampere"])
        for j, (prof, pid, start, size) in enumerate(mig_placements(mig_profiles, mem, "GPU %d" % minor)):
            attrs = {"type": _string("mig"), "parentUUID": _string(uuid), "profile": _string(prof),
                     "uuid": _string(fake_nvidia_smi.mig_uuid(uuid, j)), **common}
            capacity = {"memory": _quantity(MIG_MEMORY.get(prof, 0) * MIB),
                        "multiprocessors": _quantity(sms.get(int(prof.split("g.")[0]), 0))}
            capacity.update({"memorySlice%d" % i: _quantity(1) for i in range(start, start + size)})
            devices.append({"name": "gpu-%d-mig-%s-%d-%d" % (minor, prof.replace(".", ""), pid, start),
                            "attributes": attrs, "capacity": capacity})
    return devices


def apply_taints(devices, taints, where="dra.deviceTaints"):
    """Adds {device name: [taint, ...]} to the devices (fleet `dra.deviceTaints`); unknown names fail."""
    names = {d["name"] for d in devices}
    for name, lst in (taints or {}).items():
        if name not in names:
            raise DraError("%s: no device %s (devices: %s)" % (where, name, ", ".join(sorted(names))))
        for d in devices:
            if d["name"] == name:
                d["taints"] = [checked_taint(t, "%s.%s" % (where, name)) for t in lst]
    return devices


def checked_taint(t, where):
    if not isinstance(t, dict) or not t.get("key") or set(t) - {"key", "value", "effect", "timeAdded"}:
        raise DraError("%s: a taint is {key, value, effect}, not %r" % (where, t))
    effect = t.get("effect", "NoSchedule")
    if effect not in TAINT_EFFECTS:
        raise DraError("%s: effect %r is not one of %s" % (where, effect, ", ".join(TAINT_EFFECTS)))
    out = {"key": str(t["key"]), "effect": effect}
    if t.get("value") not in (None, ""):
        out["value"] = str(t["value"])
    if t.get("timeAdded"):
        out["timeAdded"] = t["timeAdded"]
    return out


def describe(devices):
    """What cluster.json lists per DRA node: each device's name, type, uuid (and MIG parent/profile)."""
    out = []
    for d in devices:
        a = d["attributes"]
        e = {"name": d["name"], "type": a["type"]["string"], "uuid": a["uuid"]["string"]}
        if "parentUUID" in a:
            e.update(parent_uuid=a["parentUUID"]["string"], profile=a["profile"]["string"])
        if d.get("taints"):
            e["taints"] = d["taints"]
        out.append(e)
    return out


# -- the API ---------------------------------------------------------------------------------------

def _api(c, method, path, body=None, ok=(200, 201)):
    if c.state is None:
        c.require_running()
    return c.api(method, API + path, body, ok=ok)


def slice_object(node, node_uid, devices, generation=1, slice_count=1):
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"generateName": "%s-%s-" % (node, DRIVER),
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                          "controller": True}]},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": slice_count},
                 "devices": devices},
    }


def node_slices(c, node):
    """The node's ResourceSlices of driver gpu.nvidia.com, oldest first."""
    _, lst = _api(c, "GET", "/resourceslices?fieldSelector=spec.nodeName%%3D%s,spec.driver%%3D%s" % (node, DRIVER))
    return sorted(lst["items"], key=lambda s: (s["metadata"]["creationTimestamp"], s["metadata"]["name"]))


def node_slice(c, node):
    """The node's one slice (DraError when it has none)."""
    slices = node_slices(c, node)
    if not slices:
        raise DraError("node %s has no ResourceSlice of driver %s" % (node, DRIVER))
    return slices[0]


def node_devices(c, node):
    """The devices node `node` publishes now (its host's GPUs, its fleet's MIG devices and taints)."""
    if c.state is None:
        c.require_running()
    n = c.node(node)
    if not n.get("dra"):
        raise DraError("node %s is not a DRA node (fleet: dra: true)" % node)
    devices = host_devices(c.host_record(n), n.get("mig_devices"))
    return apply_taints(devices, n["dra"].get("deviceTaints"), "node %s dra.deviceTaints" % node)


def publish(c, node, devices=None, generation=1, slice_count=1):
    """Replaces the node's slices by one slice with `devices` (default: node_devices), as the kubelet
    plugin does when it starts; returns it."""
    if c.state is None:
        c.require_running()
    if devices is None:
        devices = node_devices(c, node)
    _, nobj = c.api("GET", "/api/v1/nodes/" + node)
    for s in node_slices(c, node):
        _api(c, "DELETE", "/resourceslices/" + s["metadata"]["name"], ok=(200, 404))
    _, created = _api(c, "POST", "/resourceslices", slice_object(node, nobj["metadata"]["uid"], devices,
                                                                  generation, slice_count))
    return created


def update_slice(c, node, change, tries=5):
    """Applies change(slice) to the node's slice and writes it (retried on a conflict); returns it."""
    for _ in range(tries):
        s = node_slice(c, node)
        change(s)
        code, got = _api(c, "PUT", "/resourceslices/" + s["metadata"]["name"], s, ok=None)
        if code == 200:
            return got
        if code != 409:
            raise DraError("updating the slice of node %s: HTTP %d: %s" % (node, code, got))
        time.sleep(0.1)
    raise DraError("updating the slice of node %s: still conflicting after %d tries" % (node, tries))


def _device(s, device):
    for d in s["spec"].get("devices") or []:
        if d["name"] == device:
            return d
    raise DraError("node %s publishes no device %s (devices: %s)" % (
        s["spec"]["nodeName"], device, ", ".join(d["name"] for d in s["spec"].get("devices") or [])))


def set_device_taint(c, node, device, key=XID_TAINT, value="79", effect="NoSchedule", time_added=None):
    """Sets (or replaces, by key) a taint on one device in the node's slice, as the driver's health
    check does for an Xid (`gpu.nvidia.com/xid=79` NoSchedule: fallen off the bus). timeAdded: the
    API server's clock unless given (RFC 3339)."""
    taint = checked_taint({"key": key, "value": value, "effect": effect, "timeAdded": time_added}, "taint")

    def change(s):
        d = _device(s, device)
        d["taints"] = [t for t in d.get("taints") or [] if t["key"] != key] + [taint]
    return update_slice(c, node, change)


def clear_device_taint(c, node, device, key=None):
    """Removes the device's taints with `key` (all its taints when None)."""
    def change(s):
        d = _device(s, device)
        d["taints"] = [t for t in d.get("taints") or [] if key is not None and t["key"] != key]
        if not d["taints"]:
            del d["taints"]
    return update_slice(c, node, change)


def make_pool_incomplete(c, node):
    """The node's pool in the middle of an update: generation 2 of 2 slices, only one published.
    The scheduler (and a careful reader) uses no device of an incomplete pool."""
    def change(s):
        s["spec"]["pool"]["generation"] = s["spec"]["pool"]["generation"] + 1
        s["spec"]["pool"]["resourceSliceCount"] = 2
    return update_slice(c, node, change)


def ensure_device_classes(c):
    """Creates the chart's DeviceClasses, or puts back their spec where it differs (idempotent)."""
    for cls in DEVICE_CLASSES:
        name = cls["metadata"]["name"]
        code, got = _api(c, "POST", "/deviceclasses", cls, ok=None)
        if code in (200, 201):
            continue
        if code != 409:
            raise DraError("creating DeviceClass %s: HTTP %d: %s" % (name, code, got))
        _, cur = _api(c, "GET", "/deviceclasses/" + name)
        if cur.get("spec") != cls["spec"]:
            cur["spec"] = json.loads(json.dumps(cls["spec"]))
            _api(c, "PUT", "/deviceclasses/" + name, cur)
