// The fixed GPU probe script, the reader of its framed transcript, and the report's JSON. See
// probe.hpp for the framing; the report is built from the transcript in probe_report.cpp.
#include "gpuctl/gpu/probe.hpp"

#include <charconv>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpu/util.hpp"

namespace gpuctl::gpu {

using detail::trim;

namespace {

// One line of POSIX sh, written to run under dash and busybox ash, and to survive being wrapped in
// single quotes for any login shell: no newline, no single quote, no '!', no backslash.
//
//  s NAME CMD...  runs CMD with stdin from /dev/null. Its stdout streams through sed as "o " lines.
//                 Its stderr, then a "<marker> rc=N" line, are collected in $e (the rc comes
//                 through stderr because a pipeline's status is sed's); after the pipeline has
//                 finished, $e is printed as "e " lines, so stdout and stderr never interleave.
//                 The extra echo ends a last stdout line that had no newline. Sets $r.
//  K, kj, kd, kr  the kernel log's NVIDIA lines (NVRM: Xid and driver messages, SXid: NVSwitch),
//                 the last 2,000, from the journal, dmesg with ISO times, or plain dmesg. The
//                 window is the current boot; gpuctl keeps the lines within --since by their time.
//  GPUCTL_PROBE_UNPRIVILEGED=1, set by `--via pod` in a pod that is not privileged: the kernel log
//                 and the host's processes are out of its sight, so the kernel step is skipped
//                 ("kernel-source skipped") and so is the Fabric Manager check (a pgrep inside the
//                 pod would say "not running" on every node). Read from the environment, so the
//                 script stays one constant; over ssh nobody sets it.
//  g              the GPU queries: whole query; -L (unless nvidia-smi is missing); NVLink status
//                 when the whole query answered (exit 0, or 14 = infoROM warning); else the
//                 indices from -L (else one per /dev/nvidiaN), a query per index, the CSV when
//                 no index answered in XML, and the -q text when the CSV failed too.
constexpr std::string_view kScript =
    "P=@@gpuctl-probe-v1@@; export LC_ALL=C; PATH=\"$PATH:/usr/bin:/bin:/usr/sbin:/sbin\"; "
    "s() { n=$1; shift; echo \"$P begin $n\"; "
    "{ e=$( { { \"$@\" </dev/null 3>&-; echo \"$P rc=$?\" >&2; echo; } | sed \"s/^/o /\" >&3; } 2>&1 ); } 3>&1; "
    "r=${e##*\"$P rc=\"}; e=${e%\"$P rc=\"*}; [ \"$r\" -ge 0 ] 2>/dev/null || r=255; "
    "[ -z \"$e\" ] || { printf \"%s\" \"$e\"; echo; } | sed \"s/^/e /\"; "
    "echo \"$P end $n rc=$r\"; return $r; }; "
    "K() { grep -e NVRM -e SXid | tail -n 2000; }; "
    "kj() { journalctl -k -b -q --no-pager -o short-iso | K; }; "
    "kd() { dmesg --time-format iso | K; }; "
    "kr() { dmesg | K; }; "
    "g() { s all nvidia-smi -q -x; a=$r; "
    "if [ $a = 127 ]; then return 0; fi; "
    "s list nvidia-smi -L; "
    "case $a in 0|14) s nvlink nvidia-smi nvlink -s; return 0;; esac; "
    "I=$(nvidia-smi -L 2>/dev/null </dev/null | while read -r g i x; do [ \"$g\" = GPU ] && echo \"${i%:}\"; done); "
    "w=list; if [ -z \"$I\" ]; then w=dev; "
    "I=$(k=0; for f in /dev/nvidia[0-9]*; do [ -e \"$f\" ] && echo $k && k=$((k+1)); done); fi; "
    "[ -n \"$I\" ] || w=none; echo \"$P indices $w\" $I; "
    "k=0; for i in $I; do s gpu-$i nvidia-smi -q -x -i $i; case $r in 0|14) k=1;; esac; done; "
    "[ $k = 1 ] || s csv nvidia-smi --query-gpu="
    "index,uuid,name,pci.bus_id,driver_version,persistence_mode,memory.total,memory.used,utilization.gpu,"
    "temperature.gpu,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.pending,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max "
    "--format=csv; [ $r = 0 ] || s text nvidia-smi -q; return 0; }; "
    "echo \"$P start\"; "
    "if [ \"${GPUCTL_PROBE_UNPRIVILEGED:-}\" = 1 ]; then echo \"$P kernel-source skipped\"; else "
    "w=none; if [ -n \"$(journalctl -k -b -q --no-pager -n 1 2>/dev/null </dev/null)\" ]; then w=journal; "
    "elif dmesg --time-format iso >/dev/null 2>&1 </dev/null; then w=dmesg-iso; "
    "elif dmesg >/dev/null 2>&1 </dev/null; then w=dmesg; fi; "
    "echo \"$P kernel-source $w\"; "
    "case $w in journal) s kernel kj;; dmesg-iso) s kernel kd;; *) s kernel kr;; esac; fi; "
    "echo \"$P clock $(date +%s) $(cut -d\" \" -f1 /proc/uptime 2>/dev/null)\"; "
    "n=0; for f in /dev/nvidia-nvswitch[0-9]*; do [ -e \"$f\" ] && n=$((n+1)); done; "
    "echo \"$P nvswitches $n\"; "
    "[ $n = 0 ] || [ \"${GPUCTL_PROBE_UNPRIVILEGED:-}\" = 1 ] || s fabricmanager pgrep -x nv-fabricmanager; "
    "g; "
    "echo \"$P done\"";

static_assert(kScript.find('\'') == std::string_view::npos, "the probe is wrapped in single quotes");
static_assert(kScript.find('!') == std::string_view::npos, "csh history expansion");
static_assert(kScript.find('\\') == std::string_view::npos, "fish and csh treat backslashes differently");
static_assert(kScript.find('\n') == std::string_view::npos, "csh rejects newlines inside quotes");

// "clock <unix seconds> <uptime seconds>": either may be missing on an odd node.
void read_clock(std::string_view rest, ProbeTranscript& t) {
  std::size_t sp = rest.find(' ');
  std::string_view unix_text = rest.substr(0, sp);
  std::int64_t unix_s = 0;
  if (std::from_chars(unix_text.data(), unix_text.data() + unix_text.size(), unix_s).ec == std::errc{}) {
    t.clock_unix_s = unix_s;
  }
  if (sp == std::string_view::npos) return;
  std::string_view up = trim(rest.substr(sp + 1));
  double uptime = 0;
  auto [p, ec] = std::from_chars(up.data(), up.data() + up.size(), uptime);
  if (ec == std::errc{} && p == up.data() + up.size() && uptime >= 0) t.uptime_s = uptime;
}

}  // namespace

std::string_view probe_script() { return kScript; }

std::string probe_remote_command() { return fmt::format("sh -c '{}'", kScript); }

std::string_view to_string(ProbeStatus status) {
  switch (status) {
    case ProbeStatus::ok: return "ok";
    case ProbeStatus::partial: return "partial";
    case ProbeStatus::failed: return "failed";
  }
  return "failed";
}

std::string node_classification(const NodeGpuReport& report) {
  if (report.status == ProbeStatus::ok) return "ok";
  if (report.status == ProbeStatus::partial) return "partial";
  return std::string(to_string(report.kind));
}

ProbeTranscript parse_probe_transcript(std::string_view stdout_text) {
  ProbeTranscript t;
  const std::size_t marker_len = kProbeMarker.size() + 1;  // the marker and one space
  std::optional<ProbeStep> open;
  auto close_open = [&] {
    if (open) t.steps.push_back(std::move(*open));
    open.reset();
  };
  auto append = [](std::string& to, std::string_view line) {
    to.append(line);
    to.push_back('\n');
  };
  for (std::string_view line : detail::split_lines(stdout_text)) {
    if (line.size() >= marker_len && line.starts_with(kProbeMarker) && line[kProbeMarker.size()] == ' ') {
      std::string_view ctl = trim(line.substr(marker_len));
      if (ctl == "start") {
        t.started = true;
      } else if (ctl == "done") {
        close_open();
        t.finished = true;
      } else if (ctl.substr(0, 6) == "begin ") {
        close_open();  // a step that never ended: cut off
        open = ProbeStep{std::string(trim(ctl.substr(6))), {}, {}, std::nullopt};
      } else if (ctl.substr(0, 4) == "end ") {
        std::string_view rest = trim(ctl.substr(4));
        std::size_t rc_at = rest.rfind(" rc=");
        std::string_view name = rc_at == std::string_view::npos ? rest : rest.substr(0, rc_at);
        if (open && open->name == name) {
          int rc = 255;
          if (rc_at != std::string_view::npos) {
            std::string_view num = rest.substr(rc_at + 4);
            std::from_chars(num.data(), num.data() + num.size(), rc);
          }
          open->exit_code = rc;
          close_open();
        } else {
          t.stray_lines.push_back(detail::one_line(line));
        }
      } else if (ctl.starts_with("kernel-source ")) {
        t.kernel_source = std::string(trim(ctl.substr(14)));
      } else if (ctl.starts_with("clock ")) {
        read_clock(trim(ctl.substr(6)), t);
      } else if (ctl.starts_with("nvswitches ")) {
        std::string_view num = trim(ctl.substr(11));
        int v = 0;
        if (std::from_chars(num.data(), num.data() + num.size(), v).ec == std::errc{} && v >= 0) t.nvswitches = v;
      } else if (ctl.substr(0, 8) == "indices ") {
        std::string_view rest = trim(ctl.substr(8));
        std::size_t sp = rest.find(' ');
        t.indices_source = std::string(rest.substr(0, sp));
        rest = sp == std::string_view::npos ? std::string_view{} : trim(rest.substr(sp));
        while (!rest.empty()) {
          int v = 0;
          auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
          if (ec != std::errc{}) break;
          t.indices.push_back(v);
          rest = trim(rest.substr(static_cast<std::size_t>(p - rest.data())));
        }
      } else {
        t.stray_lines.push_back(detail::one_line(line));
      }
      continue;
    }
    if (open && (line == "o" || line.substr(0, 2) == "o ")) {
      append(open->stdout_text, line.size() > 2 ? line.substr(2) : std::string_view{});
    } else if (open && (line == "e" || line.substr(0, 2) == "e ")) {
      append(open->stderr_text, line.size() > 2 ? line.substr(2) : std::string_view{});
    } else if (!trim(line).empty()) {
      t.stray_lines.push_back(detail::one_line(line));
    }
  }
  close_open();
  // The script ends every stdout with one extra newline, and stderr with at least one.
  for (ProbeStep& s : t.steps) {
    if (s.stdout_text.size() >= 2 && s.stdout_text.ends_with("\n\n"))
      s.stdout_text.pop_back();
    else if (s.stdout_text == "\n")
      s.stdout_text.clear();
    while (s.stderr_text.ends_with("\n\n")) s.stderr_text.pop_back();
    if (s.stderr_text == "\n") s.stderr_text.clear();
  }
  return t;
}

void to_json(nlohmann::json& j, const FailedGpu& v) {
  j = nlohmann::json{
      {"index", v.index >= 0 ? nlohmann::json(v.index) : nlohmann::json(nullptr)},
      {"pciBusId", v.pci_bus_id ? nlohmann::json(detail::sanitize(*v.pci_bus_id)) : nlohmann::json(nullptr)},
      {"uuid", v.uuid ? nlohmann::json(detail::sanitize(*v.uuid)) : nlohmann::json(nullptr)},
      {"productName", v.product_name ? nlohmann::json(detail::sanitize(*v.product_name)) : nlohmann::json(nullptr)},
      {"failure", v.failure}};
}

void to_json(nlohmann::json& j, const NvlinkGpuStatus& v) {
  j = nlohmann::json{{"index", v.index},
                     {"uuid", v.uuid ? nlohmann::json(detail::sanitize(*v.uuid)) : nlohmann::json(nullptr)},
                     {"activeLinks", v.active_links},
                     {"inactiveLinks", v.inactive_links}};
}

void to_json(nlohmann::json& j, const NodeFacts& v) {
  auto opt = [](const auto& o) { return o ? nlohmann::json(*o) : nlohmann::json(nullptr); };
  // The newest events only: a node may hold thousands; diagnose quotes what matters per GPU.
  constexpr std::size_t kEventsShown = 50;
  nlohmann::json events = nlohmann::json::array();
  std::size_t from = v.kernel_events.size() > kEventsShown ? v.kernel_events.size() - kEventsShown : 0;
  for (std::size_t i = from; i < v.kernel_events.size(); ++i) events.push_back(v.kernel_events[i]);
  j = nlohmann::json{
      {"kernelLog",
       {{"source", v.kernel_log_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.kernel_log_source)},
        {"error", v.kernel_log_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.kernel_log_error)},
        {"eventCount", v.kernel_events.size()},
        {"events", events}}},
      {"clockUnixSeconds", opt(v.clock_unix_s)},
      {"nvswitches", opt(v.nvswitches)},
      {"fabricManagerRunning", opt(v.fabric_manager_running)},
      {"nvlinks", v.nvlinks ? nlohmann::json(*v.nvlinks) : nlohmann::json(nullptr)}};
}

void to_json(nlohmann::json& j, const NodeGpuReport& v) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : v.gpus) gpus.push_back(g);
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& f : v.failed_gpus) failed.push_back(f);
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : v.step_failures) steps.push_back(s);
  nlohmann::json warnings = nlohmann::json::array();
  for (const auto& w : v.warnings) warnings.push_back(detail::sanitize(w));
  j = nlohmann::json{
      {"status", to_string(v.status)},
      {"classification", node_classification(v)},
      {"kind", to_string(v.kind)},
      {"message", detail::sanitize(v.message)},
      {"driverVersion",
       v.driver_version ? nlohmann::json(detail::sanitize(*v.driver_version)) : nlohmann::json(nullptr)},
      {"cudaVersion", v.cuda_version ? nlohmann::json(detail::sanitize(*v.cuda_version)) : nlohmann::json(nullptr)},
      {"gpus", gpus},
      {"failedGpus", failed},
      {"stepFailures", steps},
      {"warnings", warnings},
      {"truncated", v.truncated},
      {"enumeration", detail::sanitize(v.enumeration)},
      {"node", v.facts},
  };
}

}  // namespace gpuctl::gpu
