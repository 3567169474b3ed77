#!/usr/bin/python3
"""Proves the simulated hosts' settings beyond the nvidia-smi mode (tests/cluster/sim_host.py) over
real ssh with the cluster's ssh config, as gpuctl's node probe will see them: `nvidia-smi nvlink -s`,
`--query-gpu` CSV, per-GPU overrides in the XML, the no-xml mode, and the fake journalctl and dmesg.
No gpuctl.

Applies fleets/node-faults.yaml (nodes tg-*); tests that change a node's settings put them back."""
import calendar
import re
import subprocess
import sys
import time
import xml.dom.minidom

import harness as h

FLEET = "node-faults"
MSG_INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
FIELDS = ("index,uuid,name,pci.bus_id,driver_version,persistence_mode,memory.total,memory.used,utilization.gpu,"
          "temperature.gpu,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,"
          "retired_pages.pending,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max")
XID79 = "NVRM: Xid (PCI:0000:00:1e): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
OFF_BUS = "NVRM: GPU 0000:00:1e.0: GPU has fallen off the bus."


def setUpModule():
    h.apply_fleet_file(FLEET)


def ssh(node, command, rc=0):
    r = h.ssh(node, command)
    if rc is not None and r.rc != rc:
        raise AssertionError("%s on %s: exit %d, want %d\nstdout: %s\nstderr: %s" % (command, node, r.rc, rc, r.stdout, r.stderr))
    return r


def gpus_xml(node, gpu=None):
    out = ssh(node, "nvidia-smi -q -x" + ("" if gpu is None else " -i %d" % gpu)).stdout
    root = xml.dom.minidom.parseString(out).documentElement
    return root, [c for c in root.childNodes if c.nodeType == c.ELEMENT_NODE and c.tagName == "gpu"]


def child(el, name):
    found = [c for c in el.childNodes if c.nodeType == c.ELEMENT_NODE and c.tagName == name]
    if len(found) != 1:
        raise AssertionError("<%s> has %d <%s> children" % (el.tagName, len(found), name))
    return found[0]


def text(el, path):
    """The text of a direct-child path ("ecc_errors/volatile/dram_uncorrectable")."""
    for name in path.split("/"):
        el = child(el, name)
    return "".join(t.data for t in el.childNodes if t.nodeType == t.TEXT_NODE).strip()


def utc(stamp):
    """Epoch seconds of "2026-12-06T14:05:01" in UTC."""
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def settings(node):
    return dict(h.node(node)["ssh"].get("settings") or {})


class Settings(h.TestCase):
    """Sets a node's settings for one test and puts the node's own back afterwards."""

    def set_host(self, node, **values):
        before = settings(node)
        self.addCleanup(h.ssh_host, node, clear=[k for k in values if k not in before],
                        **{k: before[k] for k in values if k in before})
        return h.ssh_host(node, **values)

    def override(self, node, gpu, **values):
        ov = dict(settings(node).get("gpuOverrides") or {})
        ov[str(gpu)] = values
        return self.set_host(node, gpuOverrides=ov)


class NvLink(Settings):
    def test_links_per_gpu_with_inactive_ones(self):
        listed = ssh("tg-a100-0", "nvidia-smi -L").stdout.splitlines()
        self.assertEqual(len(listed), 4)
        want = []
        for g in range(4):
            want.append(listed[g])
            want += ["\t Link %d: %s" % (k, "<inactive>" if g == 1 and k in (3, 5) else "25 GB/s") for k in range(12)]
        self.assertEqual(ssh("tg-a100-0", "nvidia-smi nvlink -s").stdout.splitlines(), want)
        self.assertEqual(ssh("tg-a100-0", "nvidia-smi nvlink --status -i 1").stdout.splitlines(), want[13:26])

    def test_no_links_headers_only_and_runtime_links(self):
        listed = ssh("tg-v100-0", "nvidia-smi -L").stdout
        self.assertEqual(ssh("tg-v100-0", "nvidia-smi nvlink -s").stdout, listed)
        self.set_host("tg-v100-0", nvlinks=6, nvlinkInactive={"0": [0]})
        lines = ssh("tg-v100-0", "nvidia-smi nvlink --status").stdout.splitlines()
        self.assertEqual(len(lines), 14)
        self.assertEqual(lines[1:3], ["\t Link 0: <inactive>", "\t Link 1: 25.781 GB/s"])   # V100's rate
        self.assertEqual(lines[8:], ["\t Link %d: 25.781 GB/s" % k for k in range(6)])


class Csv(Settings):
    def test_query_reads_the_xml_with_overrides(self):
        self.override("tg-a100-0", 3, temperatureC=88, memoryUsedMib=1234, utilizationPercent=97, persistenceMode=True,
                      pcieGenCurrent=3, pcieWidthCurrent=8, retiredPagesPending=True, eccUncorrectedAggregate=4)
        r = ssh("tg-a100-0", "nvidia-smi --query-gpu=%s --format=csv" % FIELDS)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "index, uuid, name, pci.bus_id, driver_version, persistence_mode, memory.total [MiB], "
                                   "memory.used [MiB], utilization.gpu [%], temperature.gpu, "
                                   "ecc.errors.uncorrected.volatile.total, ecc.errors.uncorrected.aggregate.total, "
                                   "retired_pages.pending, pcie.link.gen.current, pcie.link.gen.max, "
                                   "pcie.link.width.current, pcie.link.width.max")
        root, gpus = gpus_xml("tg-a100-0")
        self.assertEqual(len(lines), 5)
        for i, g in enumerate(gpus):
            with self.subTest(gpu=i):
                self.assertEqual(lines[1 + i].split(", ")[:8], [
                    str(i), text(g, "uuid"), "NVIDIA A100-SXM4-40GB", g.getAttribute("id"), "535.104.05",
                    text(g, "persistence_mode"), "40960 MiB", text(g, "fb_memory_usage/used")])
        self.assertEqual(lines[1].split(", ")[8:], ["[N/A]", "36", "[N/A]", "0", "[N/A]", "4", "4", "16", "16"])
        self.assertEqual(lines[3].split(", ")[10], "2")             # the fleet's eccUncorrectedVolatile on GPU 2
        self.assertEqual(lines[4].split(", ")[5:], ["Enabled", "40960 MiB", "1234 MiB", "97 %", "88", "[N/A]", "4", "Yes",
                                                     "3", "4", "8", "16"])
        self.assertEqual(text(root, "driver_version"), "535.104.05")
        self.assertEqual(text(root, "cuda_version"), "12.2")

    def test_noheader_nounits_and_ids(self):
        q = "--query-gpu=index,memory.used,utilization.gpu,temperature.gpu,pcie.link.width.current"
        self.assertEqual(ssh("tg-v100-0", "nvidia-smi %s --format=csv,noheader,nounits -i 0" % q).stdout,
                         "0, 12311, 91, 66, 16\n")
        self.assertEqual(ssh("tg-v100-0", "nvidia-smi %s --format=csv,noheader" % q).stdout,
                         "0, 12311 MiB, 91 %, 66, 16\n1, 12311 MiB, 91 %, 66, 16\n")

    def test_refusals_as_the_real_tool(self):
        r = ssh("tg-v100-0", "nvidia-smi --query-gpu=index,gpu_temp --format=csv", rc=2)
        self.assertEqual(r.stdout, 'Field "gpu_temp" is not a valid field to query.\n\n')
        self.assertEqual(ssh("tg-v100-0", "nvidia-smi --format=csv", rc=2).stdout, MSG_INVALID)
        self.assertEqual(ssh("tg-v100-0", "nvidia-smi --query-gpu=index --format=json", rc=2).stdout, MSG_INVALID)


class Overrides(Settings):
    def test_ampere_v11(self):
        self.override("tg-a100-0", 0, clocksEventReasons=["hw_slowdown", "hw_thermal_slowdown"])
        _, gpus = gpus_xml("tg-a100-0")
        reasons = child(gpus[0], "clocks_throttle_reasons")
        active = sorted(c.tagName for c in reasons.childNodes if c.nodeType == c.ELEMENT_NODE
                        and text(reasons, c.tagName) == "Active")
        self.assertEqual(active, ["clocks_throttle_reason_hw_slowdown", "clocks_throttle_reason_hw_thermal_slowdown"])
        g = gpus[2]                                                  # the fleet's overrides
        self.assertEqual([text(g, "ecc_errors/volatile/" + k) for k in ("sram_uncorrectable", "dram_uncorrectable")],
                         ["0", "2"])
        self.assertEqual([text(g, "remapped_rows/" + k) for k in ("remapped_row_pending", "remapped_row_failure")],
                         ["Yes", "No"])
        self.assertEqual((text(g, "fabric/state"), text(g, "fabric/status")), ("Completed", "Success"))
        self.assertEqual(text(gpus[1], "remapped_rows"), "N/A")      # untouched GPUs keep the capture's values

    def test_pre_ampere_ecc_and_retired_pages(self):
        self.override("tg-v100-0", 1, eccUncorrectedVolatile=3, eccCorrectedVolatile=5, eccUncorrectedAggregate=7,
                      retiredPagesPending=True, remappedRowsFailure=True, remappedRowsUncorrectable=1)
        _, gpus = gpus_xml("tg-v100-0", 1)
        g = gpus[0]
        self.assertEqual([text(g, "ecc_errors/" + p + "/total") for p in
                          ("volatile/double_bit", "volatile/single_bit", "aggregate/double_bit")], ["3", "5", "7"])
        self.assertEqual([text(g, "retired_pages/" + k) for k in ("pending_retirement", "pending_blacklist")], ["Yes", "Yes"])
        self.assertEqual([text(g, "remapped_rows/" + k) for k in ("remapped_row_unc", "remapped_row_failure")], ["1", "Yes"])
        r = ssh("tg-v100-0", "nvidia-smi --query-gpu=ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,"
                             "ecc.errors.uncorrected.aggregate.total,retired_pages.pending,remapped_rows.failure "
                             "--format=csv,noheader")
        self.assertEqual(r.stdout, "0, 0, 0, No, [N/A]\n5, 3, 7, Yes, Yes\n")

    def test_r590_v13(self):
        self.override("tg-3090-0", 0, eccUncorrectedVolatile=2, clocksEventReasons=["hw_power_brake_slowdown"],
                      fabricState="Completed", fabricStatus="Success", persistenceMode=False, pcieGenCurrent=2,
                      pcieWidthCurrent=4, memoryUsedMib=10000)
        self.set_host("tg-3090-0", cudaVersion="13.0")
        root, (g,) = gpus_xml("tg-3090-0")
        self.assertEqual([text(g, "ecc_errors/volatile/" + k) for k in
                          ("sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable")], ["0", "0", "2"])
        self.assertEqual(text(g, "ecc_mode/current_ecc"), "Enabled")
        self.assertEqual(text(g, "clocks_event_reasons/clocks_event_reason_hw_power_brake_slowdown"), "Active")
        self.assertEqual(text(g, "clocks_event_reasons/clocks_event_reason_sw_power_cap"), "Not Active")
        self.assertEqual((text(g, "fabric/state"), text(g, "fabric/status")), ("Completed", "Success"))
        self.assertEqual(text(g, "persistence_mode"), "Disabled")
        link = "pci/pci_gpu_link_info/"
        self.assertEqual([text(g, link + p) for p in ("pcie_gen/current_link_gen", "pcie_gen/device_current_link_gen",
                                                      "link_widths/current_link_width")], ["2", "2", "4x"])
        self.assertEqual([text(g, "fb_memory_usage/" + k) for k in ("used", "free")], ["10000 MiB", "14126 MiB"])
        self.assertEqual((text(root, "driver_version"), text(root, "cuda_version")), ("590.44.01", "13.0"))

    def test_bad_settings_are_refused_and_change_nothing(self):
        before = ssh("tg-3090-0", "nvidia-smi -q -x").stdout
        for values, message in (
                ({"gpuOverrides": {"1": {"temperatureC": 90}}}, "gpuOverrides.1: the host has 1 GPU(s)"),
                ({"gpuOverrides": {"0": {"temperature": 90}}}, "unknown overrides ['temperature']"),
                ({"gpuOverrides": {"0": {"memoryUsedMib": 30000}}}, "30000 MiB used, but the GPU has 24576 MiB"),
                ({"nvlinks": 2, "nvlinkInactive": {"0": [2]}}, "nvlinkInactive.0: link 2, but the GPUs have 2 links"),
                ({"kernelLogSource": "syslog"}, "kernelLogSource: one of journal, dmesg, none"),
                ({"kernelLog": [{"ago": 1}]}, "kernelLog[0]: {ago: seconds, line: text}"),
                ({"driverVersion": 535}, "driverVersion: a version string")):
            with self.subTest(values=values), self.assertRaises(h._cluster.ClusterError) as e:
                h.ssh_host("tg-3090-0", **values)
            self.assertIn(message, str(e.exception))
        with self.assertRaisesRegex(h._cluster.ClusterError, "has no ssh.fixture"):
            h.ssh_host("tg-nosmi-0", nvlinks=4)
        with self.assertRaisesRegex(h._cluster.ClusterError, r"cannot clear \['nvlink'\]"):
            h.ssh_host("tg-3090-0", clear=["nvlink"])
        self.assertEqual(ssh("tg-3090-0", "nvidia-smi -q -x").stdout, before)

    def test_command_line(self):
        cmd = [sys.executable, str(h.HERE.parent / "cluster" / "cluster.py"), "ssh-host", "--state-dir", str(h.state_dir())]
        self.addCleanup(h.ssh_host, "tg-v100-0", clear=["nvlinks", "kernelLogSource"])
        r = subprocess.run(cmd + ["tg-v100-0", "--set", "nvlinks=2", "--set", 'kernelLogSource="dmesg"'],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, 'tg-v100-0: {"kernelLogSource": "dmesg", "nvlinks": 2}\n'), r.stderr)
        self.assertEqual(len(ssh("tg-v100-0", "nvidia-smi nvlink -s -i 0").stdout.splitlines()), 3)
        r = subprocess.run(cmd + ["tg-v100-0", "--set", "kernelLogSource=dmesg"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--set kernelLogSource=dmesg: the value is not JSON", r.stderr)
        r = subprocess.run(cmd + ["tg-v100-0", "--clear", "nvlinks", "--clear", "kernelLogSource"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, "tg-v100-0: {}\n"), r.stderr)


class NoXml(h.TestCase):
    def test_xml_refused_the_rest_answers(self):
        for cmd in ("nvidia-smi -q -x", "nvidia-smi -q -x -i 0"):
            self.assertEqual(ssh("tg-noxml-0", cmd, rc=2).stdout, MSG_INVALID)
        listed = ssh("tg-noxml-0", "nvidia-smi -L").stdout
        self.assertRegex(listed, r"^GPU 0: Tesla T4 \(UUID: GPU-[0-9a-f-]{36}\)\nGPU 1: Tesla T4 ")
        self.assertEqual(ssh("tg-noxml-0", "nvidia-smi nvlink -s").stdout, listed)
        self.assertEqual(ssh("tg-noxml-0", "nvidia-smi --query-gpu=index,name --format=csv,noheader").stdout,
                         "0, Tesla T4\n1, Tesla T4\n")


class KernelLog(Settings):
    SCRIPT = ("date +%s.%N; cat /proc/uptime; echo ==; journalctl -k -b -q --no-pager -o short-iso; echo ==; "
              "dmesg --time-format iso; echo ==; dmesg; echo ==; journalctl -k -b -q --no-pager -n 1; echo ==; date +%s.%N")

    def test_three_forms_at_the_right_times(self):
        out = ssh("tg-klog-0", self.SCRIPT).stdout.split("==\n")
        t0, uptime = float(out[0].split()[0]), float(out[0].split()[1])
        t1 = float(out[5])

        def entries(section, pattern):
            """(ago, time) of the two entries, after the two boot lines."""
            lines = out[section].splitlines()
            self.assertEqual(len(lines), 4, out[section])
            self.assertFalse(any("NVRM" in line for line in lines[:2]), lines)
            found = [re.fullmatch(pattern, line) for line in lines[2:]]
            self.assertTrue(all(found), lines)
            self.assertEqual([m.group(2) for m in found], [XID79, OFF_BUS])
            return zip((120, 30.5), (m.group(1) for m in found))

        # journalctl -o short-iso: whole seconds, zone "+0000"
        for ago, stamp in entries(1, r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\+0000 tg-klog-0 kernel: (.*)"):
            self.assertTrue(int(t0 - ago) <= utc(stamp) <= t1 - ago, (stamp, t0, t1, ago))
        # dmesg --time-format iso: microseconds after a comma, zone "+00:00"
        for ago, stamp in entries(2, r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),\d{6}\+00:00 (.*)"):
            self.assertTrue(t0 - ago - 1 <= utc(stamp) <= t1 - ago, (stamp, t0, t1, ago))
        # dmesg: seconds since boot, this machine's uptime (its /proc/uptime has hundredths)
        for ago, mono in entries(3, r"\[\s*(\d+\.\d{6})\] (.*)"):
            self.assertTrue(uptime - ago - 0.01 <= float(mono) <= uptime + (t1 - t0) - ago + 0.01, (mono, uptime, ago))
        self.assertEqual(out[3][:15], "[    0.000000] ")
        self.assertRegex(out[4], r"^[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d tg-klog-0 kernel: %s\n$" % re.escape(OFF_BUS))

    def test_boot_lines_only_without_a_kernel_log(self):
        r = ssh("tg-v100-0", "journalctl -k -b -q --no-pager -o short-iso; dmesg")
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(all("NVRM" not in line and "Xid" not in line for line in lines), lines)
        self.assertRegex(lines[2], r"^\[    0\.000000\] Linux version ")

    def test_sources(self):
        self.set_host("tg-klog-0", kernelLogSource="dmesg")
        r = ssh("tg-klog-0", "journalctl -k -b -q --no-pager -n 1")
        self.assertEqual((r.stdout, r.stderr), ("", ""))
        r = ssh("tg-klog-0", "journalctl -k -b --no-pager -o short-iso")
        self.assertEqual((r.stdout, r.stderr), ("-- No entries --\n", "No journal files were found.\n"))
        self.assertIn("] " + XID79 + "\n", ssh("tg-klog-0", "dmesg").stdout)
        self.set_host("tg-klog-0", kernelLogSource="none")
        for cmd in ("dmesg", "dmesg --time-format iso"):
            r = ssh("tg-klog-0", cmd, rc=1)
            self.assertEqual((r.stdout, r.stderr), ("", "dmesg: read kernel buffer failed: Operation not permitted\n"))
        self.assertEqual(ssh("tg-klog-0", "journalctl -k -b -q --no-pager -o short-iso").stdout, "")

    def test_answers_without_nvidia_smi_and_while_it_hangs(self):
        r = ssh("tg-nosmi-0", "command -v nvidia-smi; journalctl -k -b -q --no-pager -n 1", rc=0)
        self.assertRegex(r.stdout, r"^[A-Z][a-z]{2} .* tg-nosmi-0 kernel: NVRM: The NVIDIA probe routine was not "
                                   r"called for 1 device\(s\)\.\n$")
        t = time.time()
        r = ssh("tg-hang-0", "dmesg --time-format iso | tail -n 1")
        self.assertLess(time.time() - t, 20)
        self.assertIn("+00:00 NVRM: Xid (PCI:0000:00:1e): 119, pid=2211, name=nvidia-smi, Timeout after 6s", r.stdout)

    def test_set_at_runtime_and_unsupported_arguments(self):
        line = "NVRM: Xid (PCI:0000:21:01): 48, pid=4242, name=python3, Ch 00000001"
        self.set_host("tg-v100-0", kernelLog=[{"ago": 5, "line": line}])
        self.assertTrue(ssh("tg-v100-0", "journalctl -k -b -q --no-pager -n 1").stdout.endswith(" kernel: %s\n" % line))
        r = ssh("tg-v100-0", "dmesg -T", rc=1)
        self.assertIn("fake dmesg: arguments not simulated: -T", r.stderr)


if __name__ == "__main__":
    h.main()
