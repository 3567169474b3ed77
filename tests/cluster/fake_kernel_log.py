#!/usr/bin/python3 -S
"""Fake `journalctl` and `dmesg` for the simulated SSH hosts of the gpuctl e2e cluster.

The dispatcher puts wrappers for both (DIR/ssh/bin-klog) first on PATH, in every mode, so a node's
kernel log is what its host file says (sim_host.py): `kernelLog`, a list of {ago: seconds, line:
text} (the message after the kernel's prefix, e.g. "NVRM: Xid (PCI:0000:07:00): 79, ..."), and
`kernelLogSource`. Each line is stamped now minus `ago`. The node booted this machine's
/proc/uptime seconds ago, or earlier when an entry is older (a kernel log holds nothing from before
boot), and two boot lines (the kernel version, a root filesystem mount) come first, as on any node.

    journalctl -k [-b] [-q] [--no-pager] [-n N] [-o short|short-iso]
        short (default)  Dec 06 14:05:01 <node> kernel: <line>
        short-iso        2026-12-06T14:05:01+0000 <node> kernel: <line>   (journald's zone form, no colon)
    dmesg [--time-format iso]
        (plain)          [ 1234.567890] <line>                           (seconds since boot)
        iso              2026-12-06T14:05:01,123456+00:00 <line>

Times are UTC. kernelLogSource `journal` (default): both answer. `dmesg`: no journal files (journald
not persistent, or not running): journalctl prints nothing with -q, else `No journal files were
found.` on stderr and `-- No entries --` on stdout, exit 0, as systemd 252 does. `none`: no journal
either, and dmesg is refused as for a user under kernel.dmesg_restrict=1: `dmesg: read kernel
buffer failed: Operation not permitted` on stderr, exit 1. Arguments beyond these are refused with a
message naming them (exit 1): the fake covers what gpuctl runs. Standard library only (`python3 -S`).
"""
import sys
import time

import sim_host

# On every node the log starts with these (seconds after boot), before any driver message.
BOOT_LINES = (
    (0.0, "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) "
          "12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"),
    (4.871243, "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Quota mode: none."),
)
# An entry older than this machine's uptime moves the simulated boot this far before it.
BOOT_MARGIN_S = 60


class Unsupported(Exception):
    pass


def uptime_s():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def records(settings, now):
    """(boot time, [(time, line)] oldest first), times in epoch seconds."""
    entries = settings.get("kernelLog") or []
    uptime = max([uptime_s()] + [e["ago"] + BOOT_MARGIN_S for e in entries])
    boot = now - uptime
    logged = sorted(((now - e["ago"], e["line"]) for e in entries), key=lambda r: r[0])
    return boot, [(boot + off, line) for off, line in BOOT_LINES] + logged


def split_us(t):
    """(whole seconds, microseconds) of a time in seconds."""
    return divmod(int(round(t * 1e6)), 10 ** 6)


def journalctl(argv, host):
    kernel = quiet = False
    lines, fmt = None, "short"
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-k", "--dmesg"):
            kernel = True
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-b", "--boot", "--no-pager"):
            pass
        elif a in ("-n", "--lines") and i + 1 < len(argv):
            i += 1
            lines = argv[i]
        elif a in ("-o", "--output") and i + 1 < len(argv):
            i += 1
            fmt = argv[i]
        elif a.startswith("--lines=") or a.startswith("-n") and len(a) > 2:
            lines = a.split("=", 1)[1] if a.startswith("--") else a[2:]
        elif a.startswith("--output=") or a.startswith("-o") and len(a) > 2:
            fmt = a.split("=", 1)[1] if a.startswith("--") else a[2:]
        else:
            raise Unsupported(a)
        i += 1
    if not kernel:
        raise Unsupported("(without -k: only the kernel log is simulated)")
    if fmt not in ("short", "short-iso") or lines is not None and not lines.isdigit():
        raise Unsupported("-n %s -o %s" % (lines, fmt))

    settings = host.get("settings") or {}
    if settings.get("kernelLogSource", "journal") != "journal":
        if not quiet:
            sys.stderr.write("No journal files were found.\n")
            sys.stdout.write("-- No entries --\n")
        return 0
    _, recs = records(settings, time.time())
    if lines is not None:
        recs = recs[len(recs) - int(lines):] if int(lines) else []
    stamp = "%b %d %H:%M:%S" if fmt == "short" else "%Y-%m-%dT%H:%M:%S+0000"
    sys.stdout.write("".join("%s %s kernel: %s\n" % (time.strftime(stamp, time.gmtime(split_us(t)[0])),
                                                      host.get("node", "localhost"), line) for t, line in recs))
    return 0


def dmesg(argv, host):
    if argv not in ([], ["--time-format", "iso"], ["--time-format=iso"]):
        raise Unsupported(" ".join(argv))
    settings = host.get("settings") or {}
    if settings.get("kernelLogSource", "journal") == "none":
        sys.stderr.write("dmesg: read kernel buffer failed: Operation not permitted\n")
        return 1
    boot, recs = records(settings, time.time())
    out = []
    for t, line in recs:
        if argv:
            s, us = split_us(t)
            out.append("%s,%06d+00:00 %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)), us, line))
        else:
            out.append("[%5d.%06d] %s\n" % (split_us(t - boot) + (line,)))
    sys.stdout.write("".join(out))
    return 0


def main(argv):
    tool = argv[0] if argv else ""
    if tool not in ("journalctl", "dmesg"):
        sys.stderr.write("usage: fake_kernel_log.py journalctl|dmesg ARGS...\n")
        return 2
    host = sim_host.load_host(tool)
    try:
        return (journalctl if tool == "journalctl" else dmesg)(argv[1:], host)
    except Unsupported as e:
        sys.stderr.write("fake %s: arguments not simulated: %s (tests/cluster/fake_kernel_log.py)\n" % (tool, e))
        return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(1)
