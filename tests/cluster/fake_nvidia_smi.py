#!/usr/bin/python3 -S
"""Fake `nvidia-smi` for the simulated SSH hosts of the gpuctl e2e cluster.

sshd runs every command of a simulated node through tests/cluster's dispatcher, which puts a
wrapper for this script first on PATH.  The script finds the node it serves from the local
address of the SSH connection (the dispatcher exports it as GPUCTL_SIM_HOST_IP, taken from
$SSH_CONNECTION) and reads that node's host file, GPUCTL_SIM_STATE/ssh/hosts/<ip>.json, at every
call, so `cluster.py ssh-mode` and `ssh-host` take effect on the next command.

It replays a real `nvidia-smi -q -x` capture (tests choose it in the fleet file), with the host's
settings written into it (sim_host.py, sim_gpu.py), and reproduces real failure messages and exit
codes (tests/fixtures/nvidia-smi-errors).  Like the real tool it writes its error messages to
stdout.  Supported invocations:

    nvidia-smi -q -x            [-i|--id ID[,ID...]]   (also --query --xml-format, --id=ID, -i=ID)
    nvidia-smi -L               [-i ID]                (also --list-gpus)
    nvidia-smi --query-gpu=FIELD[,FIELD...] --format=csv[,noheader][,nounits]   [-i ID]
    nvidia-smi nvlink -s        [-i ID]                (also --status)

ID is a GPU index, a UUID or a PCI bus id; FIELD one of sim_gpu.CSV_FIELDS.  Anything else answers
like the real tool does for an invalid command line: "Invalid combination of input arguments..."
and exit code 2 (an unknown FIELD: `Field "x" is not a valid field to query.`, exit 2).

Only the standard library is used, and it runs with `python3 -S` for a fast start.
"""
import hashlib
import os
import re
import select
import sys
import time

import sim_gpu
import sim_host

MSG_INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
MSG_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.")
MSG_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
MSG_PERMISSIONS = "Failed to initialize NVML: Insufficient Permissions"
MSG_NO_DEVICES = "No devices were found"

# Return codes from the nvidia-smi man page (fixtures/nvidia-smi-errors/...return-codes-manpage.txt);
# 18 (driver/library version mismatch) is what drivers since about 535 return (issue reports).
RC_INVALID, RC_PERMISSION, RC_NOT_FOUND, RC_DRIVER = 2, 4, 6, 9
RC_INFOROM, RC_GPU_LOST, RC_MISMATCH, RC_OTHER = 14, 15, 18, 255

HANG_LIMIT_S = 3600


def out(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def parse_args(argv):
    """Returns (action, ids, query): action 'xml', 'list', 'csv' or 'nvlink', query the CSV's
    (fields, header, units); raises sim_gpu.Usage otherwise."""
    if argv[:1] == ["nvlink"]:
        return sim_gpu.parse_nvlink(argv[1:])
    query = xml = listing = False
    ids = fields = fmt = None
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if a in ("-q", "--query"):
            query = True
        elif a in ("-x", "--xml-format"):
            xml = True
        elif a in ("-L", "--list-gpus"):
            listing = True
        elif name in ("-i", "--id", "--query-gpu", "--format"):
            if not eq:
                if i + 1 >= len(argv):
                    raise sim_gpu.Usage()
                i += 1
                val = argv[i]
            if name == "--query-gpu":
                fields = val
            elif name == "--format":
                fmt = val
            else:
                ids = val
        else:
            raise sim_gpu.Usage()
        i += 1
    if fields is not None and fmt is not None and not (query or xml or listing):
        return "csv", ids, sim_gpu.parse_query(fields, fmt)
    if fields is not None or fmt is not None:
        raise sim_gpu.Usage()
    if listing and not query and not xml:
        return "list", ids, None
    if query and xml and not listing:
        return "xml", ids, None
    raise sim_gpu.Usage()


class Capture:
    """A `nvidia-smi -q -x` capture split into header, per-GPU blocks and footer (raw text, so the
    output keeps the capture's exact formatting)."""

    def __init__(self, text):
        lines = text.splitlines(keepends=True)
        self.head, self.blocks, self.tail = [], [], []
        cur = None
        indent = None
        for line in lines:
            s = line.strip()
            if cur is None and s.startswith("<gpu id="):
                indent = line[: len(line) - len(line.lstrip())]
                cur = [line]
                continue
            if cur is not None:
                cur.append(line)
                if s == "</gpu>" and line.startswith(indent) and line[len(indent)] == "<":
                    self.blocks.append("".join(cur))
                    cur = None
                continue
            (self.tail if self.blocks else self.head).append(line)
        self.head = "".join(self.head)
        self.tail = "".join(self.tail)

    def render(self, blocks):
        head = re.sub(r"<attached_gpus>\s*\d+\s*</attached_gpus>",
                      "<attached_gpus>%d</attached_gpus>" % len(blocks), self.head, count=1)
        return head + "".join(blocks) + self.tail


def tag(block, name):
    m = re.search(r"<%s>([^<]*)</%s>" % (name, name), block)
    return m.group(1).strip() if m else ""


def gpu_id(block):
    m = re.search(r'<gpu id="([^"]*)"', block)
    return m.group(1) if m else ""


def clone_block(block, k, minor):
    """The k-th clone (k >= 1) of a GPU block: another bus id, UUID, minor number and serial."""
    old = gpu_id(block)
    m = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-9A-Fa-f])$", old)
    if m:
        bus = (int(m.group(2), 16) + 0x11 * k) & 0xFF
        new = "%s:%02X:%s.%s" % (m.group(1), bus, m.group(3), m.group(4))
        block = block.replace(old, new)
        block = re.sub(r"<pci_bus>[0-9A-Fa-f]+</pci_bus>", "<pci_bus>%02X</pci_bus>" % bus, block)

    def uuid_sub(mm):
        u = mm.group(1)
        last = u[-4:]
        try:
            nl = "%04x" % ((int(last, 16) + 0x1111 * k) & 0xFFFF)
        except ValueError:
            return mm.group(0)
        return "<uuid>%s</uuid>" % (u[:-4] + nl)

    block = re.sub(r"<uuid>([^<]+)</uuid>", uuid_sub, block, count=1)
    block = re.sub(r"<minor_number>\d+</minor_number>", "<minor_number>%d</minor_number>" % minor,
                   block, count=1)

    def serial_sub(mm):
        s = mm.group(1)
        if s.isdigit() and int(s) != 0:
            return "<serial>%0*d</serial>" % (len(s), int(s) + k)
        return mm.group(0)

    return re.sub(r"<serial>([^<]+)</serial>", serial_sub, block, count=1)


def reidentify(block, seed, i):
    """Gives GPU i of node `seed` its own UUID and serial (real UUIDs are unique fleet-wide)."""
    h = hashlib.md5(("%s/%d" % (seed, i)).encode()).hexdigest()
    block = re.sub(r"<uuid>GPU-[^<]+</uuid>", "<uuid>GPU-%s-%s-%s-%s-%s</uuid>" % (
        h[:8], h[8:12], h[12:16], h[16:20], h[20:32]), block, count=1)

    def serial_sub(mm):
        s = mm.group(1)
        if s.isdigit() and int(s) != 0:
            return "<serial>%s</serial>" % str(int(h, 16))[-len(s):].rjust(len(s), "1")
        return mm.group(0)
    return re.sub(r"<serial>([^<]+)</serial>", serial_sub, block, count=1)


def build_gpus(cap, count, seed=None):
    """The GPU blocks the host reports: the capture's, cloned (or cut) to `count` when set, with
    per-node UUIDs and serials when `seed` (the node name) is given."""
    blocks = list(cap.blocks)
    if count and count != len(blocks) and blocks:
        n = len(blocks)
        blocks = [blocks[i % n] if i < n else clone_block(blocks[i % n], i // n, i) for i in range(count)]
    if seed:
        blocks = [reidentify(b, seed, i) for i, b in enumerate(blocks)]
    return blocks


def short_bus(block):
    """'00000000:0B:00.0' -> '0000:0B:00.0', the form nvidia-smi uses in its messages."""
    g = gpu_id(block)
    dom, _, rest = g.partition(":")
    if len(dom) == 8:
        dom = dom[4:]
    return dom + ":" + rest if rest else g


def driver_major(cap):
    m = re.search(r"<driver_version>\s*(\d+)", cap.head)
    return int(m.group(1)) if m else 0


def lost_message(cap, block, unknown):
    # Drivers before ~535 print "GPU 0000:02:00.0", newer ones "GPU0000:17:00.0" (issue reports).
    sep = "" if driver_major(cap) >= 535 else " "
    reason = "Unknown Error" if unknown else "GPU is lost. Reboot the system to recover this GPU"
    return "Unable to determine the device handle for GPU%s%s: %s\n" % (sep, short_bus(block), reason)


def mig_uuid(gpu_uuid, j):
    h = hashlib.md5(("%s/%d" % (gpu_uuid, j)).encode()).hexdigest()
    return "MIG-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def select_gpus(blocks, ids):
    if ids is None:
        return list(range(len(blocks)))
    chosen = []
    for raw in ids.split(","):
        want = raw.strip()
        found = None
        if want.isdigit():
            if int(want) < len(blocks):
                found = int(want)
        else:
            for i, b in enumerate(blocks):
                bid = gpu_id(b).upper()
                if want.upper() in (bid, short_bus(b).upper()) or want == tag(b, "uuid"):
                    found = i
                    break
        if found is None:
            return None
        if found not in chosen:
            chosen.append(found)
    return chosen


def session_pid():
    """This SSH session's sshd process (the nearest ancestor named sshd or sshd-session): it exits
    when the client goes away, also while the session's commands live on."""
    pid = os.getppid()
    while pid > 1:
        try:
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
        except OSError:
            return None
        if stat[stat.index("(") + 1:stat.rindex(")")].startswith("sshd"):
            return pid
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return None


def hang():
    """Like a wedged driver: never answers.  Ends when the SSH client is gone (stdout closed, or the
    session's sshd gone: stdout may be a pipe inside the client's command, `nvidia-smi | sed`), when
    the session is killed, or after HANG_LIMIT_S."""
    deadline = time.time() + HANG_LIMIT_S
    poller = select.poll()
    poller.register(1, select.POLLERR | select.POLLHUP)
    parent = os.getppid()
    sshd = session_pid()
    while time.time() < deadline:
        try:
            if poller.poll(1000):
                return RC_OTHER
        except InterruptedError:
            pass
        if os.getppid() != parent or sshd and not os.path.exists("/proc/%d" % sshd):
            return RC_OTHER
    return RC_OTHER


def garbage(xml):
    """A truncated, corrupt capture: cut inside an element, as from a wedged or killed tool."""
    cut = max(1, int(len(xml) * 0.55))
    lt = xml.rfind("<", 0, cut)
    if lt > 0:
        cut = lt + 3
    return xml[:cut] + "\x00\x00</nvidia_smi_log\n"


def deep_xml(xml, depth=100000):
    """A capture with a bomb inside the first GPU: elements nested `depth` levels, as a
    compromised or broken node could send. The real tool never does; gpuctl must call that node's
    output malformed and go on with the others."""
    at = xml.find("<gpu ")
    if at < 0:
        at = xml.find("<gpu>")
    bomb = "<x>" * depth + "</x>" * depth
    return xml[:at] + bomb + xml[at:] if at >= 0 else bomb


def host_gpus(host):
    """The capture (its header with the host's driver and CUDA versions) and the host's GPU blocks
    with their overrides written in; SettingsError when the capture cannot take a setting."""
    settings = host.get("settings") or {}
    with open(host["fixture"], encoding="utf-8", errors="replace") as f:
        cap = Capture(f.read())
    cap.head = sim_gpu.apply_versions(cap.head, settings)
    blocks = build_gpus(cap, host.get("gpus"), host.get("uuid_seed"))
    sim_host.check_gpu_count(settings, len(blocks))
    overrides = settings.get("gpuOverrides") or {}
    for i, ov in sorted(overrides.items()):
        try:
            blocks[int(i)] = sim_gpu.apply_overrides(blocks[int(i)], ov)
        except sim_host.SettingsError as e:
            raise sim_host.SettingsError("gpuOverrides.%s.%s" % (i, e))
    return cap, blocks


def check_settings(settings, fixture, gpus):
    """What cluster.py stores for a host: the settings validated (sim_host.validate) and tried on the
    capture with the same edits as at every call, so a setting the capture cannot take (no such
    element, a GPU it does not have) fails there, not at the next call. SettingsError names it."""
    settings = sim_host.validate(settings)
    need = sorted(set(settings) & set(sim_host.GPU_SETTINGS))
    if need and not fixture:
        raise sim_host.SettingsError("%s: the node has no ssh.fixture" % ", ".join(need))
    if fixture:
        host_gpus({"fixture": fixture, "gpus": gpus, "settings": settings})
    return settings


def gpu_text(action, host, cap, i, block, query):
    """GPU i's part of the per-GPU answers (-L, --query-gpu, nvlink -s)."""
    if action == "csv":
        return sim_gpu.csv_row(query[0], i, block, cap.head, units=query[2]) + "\n"
    if action == "nvlink":
        return sim_gpu.nvlink_lines(i, block, host.get("settings") or {})
    text = "GPU %d: %s (UUID: %s)\n" % (i, tag(block, "product_name"), tag(block, "uuid"))
    for j, profile in enumerate(host.get("mig") or []):
        text += "  MIG %-12sDevice %2d: (UUID: %s)\n" % (profile, j, mig_uuid(tag(block, "uuid"), j))
    return text


def main(argv):
    host = sim_host.load_host("nvidia-smi")
    mode = host.get("mode", "ok")
    try:
        action, ids, query = parse_args(argv)
    except sim_gpu.Usage as e:
        out(str(e) or MSG_INVALID + "\n")
        return RC_INVALID
    if mode == "no-xml" and action == "xml":     # a build without XML output refuses -x
        out(MSG_INVALID + "\n")
        return RC_INVALID

    if mode == "hang":
        return hang()
    if mode == "driver-not-loaded":
        out(MSG_DRIVER + "\n")
        return RC_DRIVER
    if mode == "driver-mismatch":
        text = MSG_MISMATCH + "\n"
        if host.get("nvml_library_version"):
            text += "NVML library version: %s\n" % host["nvml_library_version"]
        out(text)
        return RC_MISMATCH
    if mode == "permissions":
        out(MSG_PERMISSIONS + "\n")
        return RC_PERMISSION
    if mode == "no-devices":
        out(MSG_NO_DEVICES + "\n")
        return RC_NOT_FOUND

    if not host.get("fixture"):
        out(MSG_NO_DEVICES + "\n")
        return RC_NOT_FOUND
    try:
        cap, blocks = host_gpus(host)
    except sim_host.SettingsError as e:
        sys.stderr.write("fake nvidia-smi: the host's settings do not fit its capture: %s\n" % e)
        return RC_OTHER
    chosen = select_gpus(blocks, ids)
    if not chosen:
        out(MSG_NO_DEVICES + "\n")
        return RC_NOT_FOUND

    bad = host.get("gpu_index", 0) or 0
    lost = mode in ("gpu-lost", "gpu-unknown-error")
    unknown = mode == "gpu-unknown-error"
    lost_rc = RC_OTHER if unknown else RC_GPU_LOST

    if action != "xml":
        text, rc = "", 0
        if action == "csv" and query[1]:
            text += sim_gpu.csv_header(query[0]) + "\n"
        for i in chosen:
            if lost and i == bad:
                text += lost_message(cap, blocks[i], unknown)
                rc = lost_rc
                continue
            text += gpu_text(action, host, cap, i, blocks[i], query)
        if mode == "inforom" and bad in chosen:
            text += "WARNING: infoROM is corrupted at gpu %s\n" % short_bus(blocks[bad])
            rc = rc or RC_INFOROM
        out(text)
        return rc

    if lost and bad in chosen:
        out(lost_message(cap, blocks[bad], unknown))
        return lost_rc
    xml = cap.render([blocks[i] for i in chosen])
    if mode == "garbage":
        out(garbage(xml))
        return 0
    if mode == "deep-xml":
        out(deep_xml(xml))
        return 0
    out(xml)
    if mode == "inforom" and bad in chosen:
        if not xml.endswith("\n"):
            out("\n")
        out("WARNING: infoROM is corrupted at gpu %s\n" % short_bus(blocks[bad]))
        return RC_INFOROM
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(RC_OTHER)
