"""What the fake nvidia-smi makes of a simulated host's settings (sim_host.py): per-GPU values
written into the capture's `nvidia-smi -q -x` XML (`apply_overrides`, `apply_versions`), and the
answers of `--query-gpu` (`csv_header`, `csv_row`) and `nvlink --status` (`nvlink_lines`), both read
from that same XML so every form agrees. The edits keep the capture's own schema and indentation: they set
the elements the capture has, and insert only what newer drivers print where the capture says N/A
or has nothing (<remapped_rows> children, <fabric>). Standard library only (`python3 -S`).
"""
import re

from sim_host import SettingsError

# What nvidia-smi writes where it has no value; --query-gpu prints it in brackets ("[N/A]").
NO_VALUES = ("N/A", "Not Supported", "Unknown Error", "Insufficient Permissions",
             "Requested functionality has been deprecated")


# -- the XML: direct children by depth, so a MIG device's <fb_memory_usage> never passes for the GPU's --

TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)[^>]*?(/?)>")


def children(text, start, end):
    """(name, content start, content end) of each element directly inside text[start:end]."""
    out, depth, name, at = [], 0, None, 0
    for m in TAG.finditer(text, start, end):
        if m.group(3):
            if depth == 0:
                out.append((m.group(2), m.end(), m.end()))
        elif not m.group(1):
            if depth == 0:
                name, at = m.group(2), m.end()
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                out.append((name, at, m.start()))
    return out


def find(block, path):
    """(start, end) of the content of <gpu>/path[0]/path[1]/... in a GPU block, or None."""
    span = (0, len(block))
    for name in ("gpu",) + tuple(path):
        span = next(((s, e) for n, s, e in children(block, *span) if n == name), None)
        if span is None:
            return None
    return span


def value(block, path):
    """The element's text, stripped; None when there is no such element (or it has children)."""
    span = find(block, path)
    if span is None or "<" in block[span[0]:span[1]]:
        return None
    return block[span[0]:span[1]].strip()


def put(block, path, text):
    span = find(block, path)
    if span is None:
        raise SettingsError("the capture has no <%s> in its <gpu>" % "/".join(path))
    return block[:span[0]] + text + block[span[1]:]


def indents(block, at):
    """(indent of the line holding `at`, one level of the capture's indentation)."""
    start = block.rfind("\n", 0, at) + 1
    line = block[start:block.find("\n", start)]
    first, second = block.split("\n", 2)[:2]
    unit = second[:len(second) - len(second.lstrip())][len(first) - len(first.lstrip()):]
    return line[:len(line) - len(line.lstrip())], unit or "\t"


def put_children(block, path, pairs):
    """Replaces the element's content ("N/A" in older captures) by child elements, indented as the
    capture is."""
    span = find(block, path)
    if span is None:
        raise SettingsError("the capture has no <%s> in its <gpu>" % "/".join(path))
    ind, unit = indents(block, span[0])
    inner = "".join("\n%s%s<%s>%s</%s>" % (ind, unit, k, v, k) for k, v in pairs)
    return block[:span[0]] + inner + "\n" + ind + block[span[1]:]


# -- overrides ---------------------------------------------------------------------------------------

def _set_ecc(block, section, kind, n):
    """Sets one ECC total (kind "correctable" or "uncorrectable") the way gpuctl's parser reads it:
    pre-Ampere schemas count in single_bit/double_bit with a <total>, newer ones split SRAM and DRAM
    (parity and SEC-DED in R570+): the DRAM counter gets n, the SRAM ones 0."""
    base = ("ecc_errors", section)
    if find(block, base) is None:
        raise SettingsError("the capture has no <ecc_errors>/<%s>" % section)
    if find(block, base + ("single_bit",)) is not None:
        part = base + ("single_bit" if kind == "correctable" else "double_bit",)
        block = put(block, part + ("device_memory",), str(n))
        block = put(block, part + ("total",), str(n))
    else:
        block = put(block, base + ("dram_" + kind,), str(n))
        for name, _, _ in children(block, *find(block, base)):
            if name.startswith("sram_" + kind):
                block = put(block, base + (name,), "0")
    if find(block, ("ecc_mode", "current_ecc")) is not None:   # counts come from a GPU with ECC on
        block = put(block, ("ecc_mode", "current_ecc"), "Enabled")
    return block


def _set_remapped(block, key, text):
    if find(block, ("remapped_rows", "remapped_row_corr")) is None:   # "N/A" before Ampere: as an A100 has it
        block = put_children(block, ("remapped_rows",), [
            ("remapped_row_corr", "0"), ("remapped_row_unc", "0"),
            ("remapped_row_pending", "No"), ("remapped_row_failure", "No")])
    return put(block, ("remapped_rows", key), text)


def _set_reasons(block, active):
    for section in ("clocks_event_reasons", "clocks_throttle_reasons"):
        span = find(block, (section,))
        if span is None:
            continue
        prefix = section[:-1] + "_"
        have = {n[len(prefix):]: n for n, _, _ in children(block, *span) if n.startswith(prefix)}
        missing = [r for r in active if r not in have]
        if missing:
            raise SettingsError("the capture's <%s> has no %s (it has %s)" % (section, missing, ", ".join(have)))
        for reason, name in have.items():
            block = put(block, (section, name), "Active" if reason in active else "Not Active")
        return block
    raise SettingsError("the capture has no <clocks_event_reasons> or <clocks_throttle_reasons>")


def _set_memory_used(block, used):
    total = _number(value(block, ("fb_memory_usage", "total")))
    reserved = _number(value(block, ("fb_memory_usage", "reserved"))) or 0
    if total is None:
        raise SettingsError("the capture has no <fb_memory_usage>/<total>")
    if used > total - reserved:
        raise SettingsError("%d MiB used, but the GPU has %d MiB (%d reserved)" % (used, total, reserved))
    block = put(block, ("fb_memory_usage", "used"), "%d MiB" % used)
    return put(block, ("fb_memory_usage", "free"), "%d MiB" % (total - reserved - used))


def _set_fabric(block, key, text):
    """<fabric>/<state> or <status>. A capture older than R535 has no <fabric>: it gets one as v12/v13
    print it, after <clock_policy>, with N/A in what is not set."""
    if find(block, ("fabric", key)) is None:
        pairs = [("state", "N/A"), ("status", "N/A")]
        if find(block, ("fabric",)) is not None:                    # <fabric>N/A</fabric>
            block = put_children(block, ("fabric",), pairs)
        else:
            ind, unit = indents(block, 0)
            ind += unit
            new = "%s<fabric>\n%s%s</fabric>\n" % (
                ind, "".join("%s%s<%s>%s</%s>\n" % (ind, unit, k, v, k) for k, v in pairs), ind)
            span = find(block, ("clock_policy",))
            at = block.index("\n", span[1]) + 1 if span else block.rindex("\n", 0, block.rindex("</gpu>")) + 1
            block = block[:at] + new + block[at:]
    return put(block, ("fabric", key), text)


def _number(text):
    """The number at the start of "24576 MiB"; None for N/A or no element."""
    m = re.match(r"\d+", text or "")
    return int(m.group(0)) if m else None


def yes_no(flag):
    return "Yes" if flag else "No"


def _set_retired(block, flag):
    if find(block, ("retired_pages", "pending_retirement")) is None:
        raise SettingsError("the capture has no <retired_pages>/<pending_retirement>")
    for name in ("pending_retirement", "pending_blacklist"):
        if find(block, ("retired_pages", name)) is not None:
            block = put(block, ("retired_pages", name), yes_no(flag))
    return block


def _set_pcie_gen(block, gen):
    block = put(block, LINK + ("pcie_gen", "current_link_gen"), str(gen))
    if find(block, LINK + ("pcie_gen", "device_current_link_gen")) is not None:   # R570+: the GPU's side
        block = put(block, LINK + ("pcie_gen", "device_current_link_gen"), str(gen))
    return block


def _putter(path, fmt):
    return lambda block, v: put(block, path, fmt(v))


LINK = ("pci", "pci_gpu_link_info")
# Each override: how it edits a GPU block.
EDITS = {
    "eccUncorrectedVolatile": lambda block, n: _set_ecc(block, "volatile", "uncorrectable", n),
    "eccUncorrectedAggregate": lambda block, n: _set_ecc(block, "aggregate", "uncorrectable", n),
    "eccCorrectedVolatile": lambda block, n: _set_ecc(block, "volatile", "correctable", n),
    "retiredPagesPending": _set_retired,
    "remappedRowsPending": lambda block, v: _set_remapped(block, "remapped_row_pending", yes_no(v)),
    "remappedRowsFailure": lambda block, v: _set_remapped(block, "remapped_row_failure", yes_no(v)),
    "remappedRowsUncorrectable": lambda block, v: _set_remapped(block, "remapped_row_unc", str(v)),
    "clocksEventReasons": _set_reasons,
    "temperatureC": _putter(("temperature", "gpu_temp"), "%d C".__mod__),
    "memoryUsedMib": _set_memory_used,
    "utilizationPercent": _putter(("utilization", "gpu_util"), "%d %%".__mod__),
    "persistenceMode": _putter(("persistence_mode",), lambda on: "Enabled" if on else "Disabled"),
    "pcieGenCurrent": _set_pcie_gen,
    "pcieWidthCurrent": _putter(LINK + ("link_widths", "current_link_width"), "%dx".__mod__),
    "fabricState": lambda block, v: _set_fabric(block, "state", v),
    "fabricStatus": lambda block, v: _set_fabric(block, "status", v),
}


def apply_overrides(block, ov):
    """The GPU block with one GPU's overrides (validated) written into it; SettingsError names the
    override the capture cannot take."""
    for key, v in ov.items():
        try:
            block = EDITS[key](block, v)
        except SettingsError as e:
            raise SettingsError("%s: %s" % (key, e))
    return block


def apply_versions(head, settings):
    """The capture's header with driverVersion / cudaVersion written into it."""
    for key, tag in (("driverVersion", "driver_version"), ("cudaVersion", "cuda_version")):
        if key in settings:
            head, n = re.subn(r"<%s>[^<]*</%s>" % (tag, tag), "<%s>%s</%s>" % (tag, settings[key], tag), head, count=1)
            if not n:
                raise SettingsError("%s: the capture has no <%s>" % (key, tag))
    return head


# -- nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -----------------------------------

class Usage(Exception):
    """A command line the real tool refuses; the message is what it prints (default, empty: the fake
    prints "Invalid combination of input arguments...")."""


def parse_query(fields, fmt):
    """(fields, header?, units?) of `--query-gpu=FIELDS --format=FMT`."""
    opts = fmt.split(",")
    if "csv" not in opts or set(opts) - {"csv", "noheader", "nounits"}:
        raise Usage()
    names = [f.strip() for f in fields.split(",")]
    for f in names:
        if f not in CSV_FIELDS:
            raise Usage('Field "%s" is not a valid field to query.\n\n' % f)
    return names, "noheader" not in opts, "nounits" not in opts


def _at(*path):
    return lambda i, block, head: value(block, path)


def _bus_id(i, block, head):
    return re.search(r'<gpu id="([^"]*)"', block).group(1)


def _driver(i, block, head):
    m = re.search(r"<driver_version>([^<]*)</driver_version>", head)
    return m.group(1).strip() if m else None


def _ecc_total(section, kind):
    """As gpuctl's parser and nvidia-smi count it: <total> of single_bit/double_bit, or the sum of the
    SRAM and DRAM counters (N/A when none is a number)."""
    def get(i, block, head):
        base = ("ecc_errors", section)
        if find(block, base + ("single_bit",)) is not None:
            return value(block, base + ("single_bit" if kind == "correctable" else "double_bit", "total"))
        span = find(block, base)
        parts = [block[s:e].strip() for n, s, e in (children(block, *span) if span else [])
                 if n == "dram_" + kind or n.startswith("sram_" + kind)]
        nums = [int(p) for p in parts if p.isdigit()]
        return str(sum(nums)) if nums else (parts[0] if parts else None)
    return get


# field: (header, value in the XML, the unit the XML puts after the number). The unit is printed
# after CSV values only where the header names it ("[MiB]", "[%]"), and not with "nounits".
CSV_FIELDS = {
    "index": ("index", lambda i, block, head: str(i), ""),
    "uuid": ("uuid", _at("uuid"), ""),
    "name": ("name", _at("product_name"), ""),
    "pci.bus_id": ("pci.bus_id", _bus_id, ""),
    "driver_version": ("driver_version", _driver, ""),
    "persistence_mode": ("persistence_mode", _at("persistence_mode"), ""),
    "memory.total": ("memory.total [MiB]", _at("fb_memory_usage", "total"), "MiB"),
    "memory.used": ("memory.used [MiB]", _at("fb_memory_usage", "used"), "MiB"),
    "memory.free": ("memory.free [MiB]", _at("fb_memory_usage", "free"), "MiB"),
    "utilization.gpu": ("utilization.gpu [%]", _at("utilization", "gpu_util"), "%"),
    "temperature.gpu": ("temperature.gpu", _at("temperature", "gpu_temp"), "C"),
    "ecc.errors.corrected.volatile.total": ("ecc.errors.corrected.volatile.total",
                                            _ecc_total("volatile", "correctable"), ""),
    "ecc.errors.uncorrected.volatile.total": ("ecc.errors.uncorrected.volatile.total",
                                              _ecc_total("volatile", "uncorrectable"), ""),
    "ecc.errors.uncorrected.aggregate.total": ("ecc.errors.uncorrected.aggregate.total",
                                               _ecc_total("aggregate", "uncorrectable"), ""),
    "retired_pages.pending": ("retired_pages.pending", _at("retired_pages", "pending_retirement"), ""),
    "remapped_rows.correctable": ("remapped_rows.correctable", _at("remapped_rows", "remapped_row_corr"), ""),
    "remapped_rows.uncorrectable": ("remapped_rows.uncorrectable", _at("remapped_rows", "remapped_row_unc"), ""),
    "remapped_rows.pending": ("remapped_rows.pending", _at("remapped_rows", "remapped_row_pending"), ""),
    "remapped_rows.failure": ("remapped_rows.failure", _at("remapped_rows", "remapped_row_failure"), ""),
    "pcie.link.gen.current": ("pcie.link.gen.current", _at(*LINK, "pcie_gen", "current_link_gen"), ""),
    "pcie.link.gen.max": ("pcie.link.gen.max", _at(*LINK, "pcie_gen", "max_link_gen"), ""),
    "pcie.link.width.current": ("pcie.link.width.current", _at(*LINK, "link_widths", "current_link_width"), "x"),
    "pcie.link.width.max": ("pcie.link.width.max", _at(*LINK, "link_widths", "max_link_width"), "x"),
}


def csv_value(raw, unit, printed, units):
    if raw is None or raw in NO_VALUES:
        return "[%s]" % (raw or "N/A")
    if unit and raw.endswith(unit):
        raw = raw[:-len(unit)].strip()
        if printed and units:
            return "%s %s" % (raw, unit)
    return raw


def csv_header(fields):
    return ", ".join(CSV_FIELDS[f][0] for f in fields)


def csv_row(fields, i, block, head, units=True):
    """GPU i's row, e.g. `0, GPU-..., NVIDIA A100-SXM4-40GB, 00000000:00:04.0, ..., 40960 MiB, 4, 16`."""
    out = []
    for f in fields:
        header, get, unit = CSV_FIELDS[f]
        out.append(csv_value(get(i, block, head), unit, "[" in header, units))
    return ", ".join(out)


# -- nvidia-smi nvlink --status ----------------------------------------------------------------------

# Per-link rates as the captures print them (tests/fixtures/nvidia-smi-text: V100 25.781, A100 25,
# H100 26.562 GB/s); other products: 25.
NVLINK_RATES = (("V100", "25.781"), ("H100", "26.562"), ("H200", "26.562"))


def parse_nvlink(argv):
    """`nvidia-smi nvlink` arguments: -s/--status, optionally -i ID."""
    status, ids, i = False, None, 0
    while i < len(argv):
        a = argv[i]
        if a in ("-s", "--status"):
            status = True
        elif a in ("-i", "--id") and i + 1 < len(argv):
            i += 1
            ids = argv[i]
        elif a.startswith("--id=") or a.startswith("-i="):
            ids = a.split("=", 1)[1]
        else:
            raise Usage()
        i += 1
    if not status:
        raise Usage()
    return "nvlink", ids, None


def nvlink_lines(i, block, settings):
    """GPU i's header (as `nvidia-smi -L` prints it) and its `\\t Link K: 25 GB/s` or
    `\\t Link K: <inactive>` lines, `nvlinks` of them."""
    name, uuid = value(block, ("product_name",)), value(block, ("uuid",))
    rate = next((r for p, r in NVLINK_RATES if p in name), "25")
    inactive = (settings.get("nvlinkInactive") or {}).get(str(i), [])
    return "".join(["GPU %d: %s (UUID: %s)\n" % (i, name, uuid)] +
                   ["\t Link %d: %s\n" % (k, "<inactive>" if k in inactive else rate + " GB/s")
                    for k in range(settings.get("nvlinks", 0))])
