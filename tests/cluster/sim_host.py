"""What a simulated GPU host is set to beyond its nvidia-smi mode (tests/cluster).

A node's settings come from its fleet entry's `ssh:` block, `Cluster.set_ssh_host` or
`cluster.py ssh-host`; `validate` checks them (each error names the setting) and cluster.py writes
them into the host file, DIR/ssh/hosts/<ip>.json, which the fakes read at every call (`load_host`).
What they become: sim_gpu.py (the fake nvidia-smi's XML, CSV and NVLink answers) and
fake_kernel_log.py (journalctl, dmesg). Standard library only: the fakes run with `python3 -S`.
"""
import json
import os
import re
import sys

SETTINGS = ("nvlinks", "nvlinkInactive", "gpuOverrides", "driverVersion", "cudaVersion",
            "kernelLog", "kernelLogSource")
KERNEL_LOG_SOURCES = ("journal", "dmesg", "none")
# The children of <clocks_event_reasons> (R535+) or <clocks_throttle_reasons>, without the prefix.
REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
           "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown", "display_clocks_setting")
MAX_NVLINKS = 18                      # an H100 SXM has 18 links
PCIE_WIDTHS = (1, 2, 4, 8, 16, 32)


class SettingsError(ValueError):
    """A setting a simulated host cannot take; the message names it."""


def load_host(tool):
    """The host file of the node this SSH session reached (its address: GPUCTL_SIM_HOST_IP, set by the
    dispatcher from $SSH_CONNECTION); exits 255 with a message when there is none."""
    state = os.environ.get("GPUCTL_SIM_STATE", "")
    ip = os.environ.get("GPUCTL_SIM_HOST_IP", "")
    if not ip:
        conn = os.environ.get("SSH_CONNECTION", "").split()
        ip = conn[2] if len(conn) >= 4 else ""
    path = os.path.join(state, "ssh", "hosts", ip + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        sys.stderr.write("fake %s: no simulated host for address %r (%s)\n" % (tool, ip, e))
        sys.exit(255)


# -- validation ------------------------------------------------------------------------------------

def _int(where, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise SettingsError("%s: an integer from %d to %d, not %r" % (where, lo, hi, v))
    return v


def _bool(where, v):
    if not isinstance(v, bool):
        raise SettingsError("%s: true or false, not %r" % (where, v))
    return v


def _text(where, v):
    if not isinstance(v, str) or not v.strip() or re.search(r"[<>&\n\r]", v):
        raise SettingsError("%s: a non-empty one-line string without <, > or &, not %r" % (where, v))
    return v


def _version(where, v):
    if not isinstance(v, str) or not re.fullmatch(r"\d+(\.\d+){1,2}", v):
        raise SettingsError("%s: a version string such as \"535.104.05\" or \"12.2\", not %r" % (where, v))
    return v


def _reasons(where, v):
    if not isinstance(v, list) or any(r not in REASONS for r in v):
        raise SettingsError("%s: a list of clock event reasons from %s, not %r" % (where, ", ".join(REASONS), v))
    return v


def _width(where, v):
    if type(v) is not int or v not in PCIE_WIDTHS:
        raise SettingsError("%s: a PCIe link width, one of %s, not %r" % (where, ", ".join(map(str, PCIE_WIDTHS)), v))
    return v


def _gpu_index(where, k):
    """A GPU index as JSON keys it ("0"); YAML may give an int."""
    if isinstance(k, bool) or not re.fullmatch(r"\d{1,3}", str(k)):
        raise SettingsError("%s: GPU index %r is not a non-negative integer" % (where, k))
    return str(int(k))


OVERRIDES = {
    "eccUncorrectedVolatile": lambda w, v: _int(w, v, 0, 10 ** 9),
    "eccUncorrectedAggregate": lambda w, v: _int(w, v, 0, 10 ** 9),
    "eccCorrectedVolatile": lambda w, v: _int(w, v, 0, 10 ** 9),
    "retiredPagesPending": _bool,
    "remappedRowsPending": _bool,
    "remappedRowsFailure": _bool,
    "remappedRowsUncorrectable": lambda w, v: _int(w, v, 0, 10 ** 6),
    "clocksEventReasons": _reasons,
    "temperatureC": lambda w, v: _int(w, v, -40, 150),
    "memoryUsedMib": lambda w, v: _int(w, v, 0, 10 ** 7),
    "utilizationPercent": lambda w, v: _int(w, v, 0, 100),
    "persistenceMode": _bool,
    "pcieGenCurrent": lambda w, v: _int(w, v, 1, 6),
    "pcieWidthCurrent": _width,
    "fabricState": _text,
    "fabricStatus": _text,
}


def _overrides(where, v):
    if not isinstance(v, dict):
        raise SettingsError("%s: a mapping of GPU index to overrides, not %r" % (where, v))
    out = {}
    for k, ov in v.items():
        w = "%s.%s" % (where, k)
        i = _gpu_index(where, k)
        if not isinstance(ov, dict):
            raise SettingsError("%s: a mapping of overrides (%s), not %r" % (w, ", ".join(OVERRIDES), ov))
        bad = sorted(set(ov) - set(OVERRIDES))
        if bad:
            raise SettingsError("%s: unknown overrides %s (known: %s)" % (w, bad, ", ".join(OVERRIDES)))
        out[i] = {name: OVERRIDES[name]("%s.%s" % (w, name), x) for name, x in ov.items()}
    return out


def _inactive(where, v):
    if not isinstance(v, dict):
        raise SettingsError("%s: a mapping of GPU index to a list of link numbers, not %r" % (where, v))
    out = {}
    for k, links in v.items():
        w = "%s.%s" % (where, k)
        if not isinstance(links, list):
            raise SettingsError("%s: a list of link numbers, not %r" % (w, links))
        out[_gpu_index(where, k)] = sorted({_int(w, x, 0, MAX_NVLINKS - 1) for x in links})
    return out


def _kernel_log(where, v):
    if not isinstance(v, list):
        raise SettingsError("%s: a list of {ago: seconds, line: text}, not %r" % (where, v))
    for i, e in enumerate(v):
        w = "%s[%d]" % (where, i)
        if not isinstance(e, dict) or set(e) != {"ago", "line"}:
            raise SettingsError("%s: {ago: seconds, line: text} (exactly these keys), not %r" % (w, e))
        ago = e["ago"]
        if isinstance(ago, bool) or not isinstance(ago, (int, float)) or not 0 <= ago <= 10 ** 9:
            raise SettingsError("%s.ago: seconds before now (a number >= 0), not %r" % (w, ago))
        if not isinstance(e["line"], str) or not e["line"] or re.search(r"[\n\r]", e["line"]):
            raise SettingsError("%s.line: one line of text, not %r" % (w, e["line"]))
    return v


def _source(where, v):
    if v not in KERNEL_LOG_SOURCES:
        raise SettingsError("%s: one of %s, not %r" % (where, ", ".join(KERNEL_LOG_SOURCES), v))
    return v


VALIDATORS = {
    "nvlinks": lambda w, v: _int(w, v, 0, MAX_NVLINKS),
    "nvlinkInactive": _inactive,
    "gpuOverrides": _overrides,
    "driverVersion": _version,
    "cudaVersion": _version,
    "kernelLog": _kernel_log,
    "kernelLogSource": _source,
}
GPU_SETTINGS = ("nvlinks", "nvlinkInactive", "gpuOverrides", "driverVersion", "cudaVersion")


def validate(settings):
    """The settings checked and normalised (GPU indexes as strings); SettingsError names the first
    bad one."""
    if not isinstance(settings, dict):
        raise SettingsError("settings must be a mapping, not %r" % (settings,))
    bad = sorted(set(settings) - set(SETTINGS))
    if bad:
        raise SettingsError("unknown settings %s (known: %s)" % (bad, ", ".join(SETTINGS)))
    out = {k: VALIDATORS[k](k, v) for k, v in settings.items()}
    links = out.get("nvlinks", 0)
    for gpu, inactive in (out.get("nvlinkInactive") or {}).items():
        if inactive and inactive[-1] >= links:
            raise SettingsError("nvlinkInactive.%s: link %d, but the GPUs have %d links (nvlinks)"
                                % (gpu, inactive[-1], links))
    return out


def check_gpu_count(settings, count):
    """GPU indexes in the settings must name GPUs the host has."""
    for key in ("gpuOverrides", "nvlinkInactive"):
        for gpu in settings.get(key) or {}:
            if int(gpu) >= count:
                raise SettingsError("%s.%s: the host has %d GPU(s) (indexes 0 to %d)" % (key, gpu, count, count - 1))
