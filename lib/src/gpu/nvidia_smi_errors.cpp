#include "gpuctl/gpu/nvidia_smi_errors.hpp"

#include <array>
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpu/util.hpp"
#include "gpuctl/gpu/reported.hpp"

namespace gpuctl::gpu {

using detail::icontains;
using detail::trim;

std::string_view to_string(NvsmiErrorKind kind) {
  switch (kind) {
    case NvsmiErrorKind::ok: return "ok";
    case NvsmiErrorKind::driver_not_loaded: return "driver_not_loaded";
    case NvsmiErrorKind::driver_library_mismatch: return "driver_library_mismatch";
    case NvsmiErrorKind::gpu_lost: return "gpu_lost";
    case NvsmiErrorKind::no_devices: return "no_devices";
    case NvsmiErrorKind::insufficient_permissions: return "insufficient_permissions";
    case NvsmiErrorKind::inforom_corrupted: return "inforom_corrupted";
    case NvsmiErrorKind::nvml_unknown_error: return "nvml_unknown_error";
    case NvsmiErrorKind::nvidia_smi_missing: return "nvidia_smi_missing";
    case NvsmiErrorKind::garbage: return "garbage";
    case NvsmiErrorKind::truncated: return "truncated";
    case NvsmiErrorKind::unknown_error: return "unknown_error";
  }
  return "unknown_error";
}

std::string_view to_string(KernelGpuEventKind kind) {
  switch (kind) {
    case KernelGpuEventKind::xid: return "xid";
    case KernelGpuEventKind::fallen_off_bus: return "fallen_off_bus";
    case KernelGpuEventKind::rm_init_adapter_failed: return "rm_init_adapter_failed";
    case KernelGpuEventKind::probe_failed: return "probe_failed";
  }
  return "xid";
}

std::string_view nvidia_smi_exit_code_meaning(int exit_code) {
  // nvidia-smi(1), RETURN VALUE.
  switch (exit_code) {
    case 0: return "Success";
    case 2: return "A supplied argument or flag is invalid";
    case 3: return "The requested operation is not available on target device";
    case 4: return "The current user does not have permission to access this device or perform this operation";
    case 6: return "A query to find an object was unsuccessful";
    case 8: return "A device's external power cables are not properly attached";
    case 9: return "NVIDIA driver is not loaded";
    case 10: return "NVIDIA Kernel detected an interrupt issue with a GPU";
    case 12: return "NVML Shared Library couldn't be found or loaded";
    case 13: return "Local version of NVML doesn't implement this function";
    case 14: return "infoROM is corrupted";
    case 15: return "The GPU has fallen off the bus or has otherwise become inaccessible";
    case 255: return "Other error or internal driver error occurred";
    default: return {};
  }
}

namespace {

struct Rule {
  NvsmiErrorKind kind;
  std::vector<std::string_view> needles;  // any of them, case-insensitive
  std::string_view summary;
};

// Ordered: the first rule with a matching line decides. Device-handle errors come before the NVML
// ones because their text ends in "Unknown Error" too.
constexpr std::string_view kDeviceHandle = "Unable to determine the device handle";

const std::vector<Rule>& rules() {
  static const std::vector<Rule> kRules = {
      {NvsmiErrorKind::driver_library_mismatch,
       {"Driver/library version mismatch"},
       "the NVIDIA kernel module and user-space driver versions differ (reboot, or reload the nvidia module)"},
      {NvsmiErrorKind::driver_not_loaded,
       {"couldn't communicate with the NVIDIA driver", "NVIDIA driver is not loaded", "Driver Not Loaded",
        "couldn't find libnvidia-ml.so", "NVML Shared Library Not Found", "libnvidia-ml.so.1: cannot open"},
       "nvidia-smi cannot reach the NVIDIA driver (kernel module not loaded, or driver not installed)"},
      {NvsmiErrorKind::gpu_lost, {kDeviceHandle}, "a GPU does not answer"},
      {NvsmiErrorKind::gpu_lost,
       {"GPU is lost", "fallen off the bus"},
       "a GPU is lost (fell off the bus or stopped answering; reset the GPU or reboot the node)"},
      {NvsmiErrorKind::no_devices, {"No devices were found", "No devices found"}, "nvidia-smi found no NVIDIA GPU"},
      {NvsmiErrorKind::insufficient_permissions,
       {"Insufficient Permissions", "GPU access blocked by the operating system", "Permission denied"},
       "nvidia-smi is not allowed to access the GPU devices"},
      {NvsmiErrorKind::inforom_corrupted,
       {"infoROM is corrupted"},
       "a GPU's infoROM is corrupted (nvidia-smi still reports it; the GPU needs service)"},
      {NvsmiErrorKind::nvml_unknown_error,
       {"Failed to initialize NVML: Unknown Error"},
       "NVML failed with an unknown error (in a container: it lost access to its GPU devices)"},
      {NvsmiErrorKind::unknown_error, {"Failed to initialize NVML"}, "NVML could not be initialized"},
  };
  return kRules;
}

bool is_missing_command(std::string_view line) {
  return icontains(line, "nvidia-smi") &&
         (icontains(line, "not found") || icontains(line, "No such file or directory"));
}

// Kind for an exit code when no message says more.
NvsmiErrorKind kind_for_exit_code(int rc) {
  switch (rc) {
    case 0: return NvsmiErrorKind::ok;
    case 4: return NvsmiErrorKind::insufficient_permissions;
    case 6: return NvsmiErrorKind::no_devices;
    case 9:
    case 12: return NvsmiErrorKind::driver_not_loaded;
    case 14: return NvsmiErrorKind::inforom_corrupted;
    case 15: return NvsmiErrorKind::gpu_lost;
    case 126:
    case 127: return NvsmiErrorKind::nvidia_smi_missing;
    default: return NvsmiErrorKind::unknown_error;
  }
}

std::string exit_suffix(std::optional<int> rc) {
  if (!rc || *rc == 0) return {};
  std::string_view meaning = nvidia_smi_exit_code_meaning(*rc);
  if (*rc == 127) meaning = "command not found";
  if (*rc == 126) meaning = "command not executable";
  return meaning.empty() ? fmt::format(" (exit {})", *rc) : fmt::format(" (exit {}: {})", *rc, meaning);
}

// The lines to search, stderr first: that is where nvidia-smi and the shell put errors.
using Sources = std::array<const std::vector<std::string_view>*, 2>;

// The diagnosis from line `i` of `lines`: the kind, the summary quoting the line, the excerpt
// around it and the bus id it names.
void diagnose_line(NvsmiDiagnosis& d, NvsmiErrorKind kind, std::string_view summary,
                   const std::vector<std::string_view>& lines, std::size_t i) {
  d.kind = kind;
  std::string_view line = trim(lines[i]);
  d.excerpt = detail::excerpt_around(lines, i);
  d.pci_bus_id = detail::find_pci_bus_id(line);
  d.warning_only = kind == NvsmiErrorKind::inforom_corrupted;
  d.message = fmt::format("{}: \"{}\"{}", summary, detail::one_line(line, 160), exit_suffix(d.exit_code));
}

// nvidia-smi missing: the shell's message, which names the command.
bool diagnose_missing_command(NvsmiDiagnosis& d, const Sources& sources) {
  for (const auto* lines : sources) {
    for (std::size_t i = 0; i < lines->size(); ++i) {
      if (is_missing_command((*lines)[i])) {
        diagnose_line(d, NvsmiErrorKind::nvidia_smi_missing, "nvidia-smi is not installed or not on PATH", *lines, i);
        return true;
      }
    }
  }
  return false;
}

// "Unable to determine the device handle for GPU 0000:0B:00.0: <reason>"
void diagnose_device_handle(NvsmiDiagnosis& d, const std::vector<std::string_view>& lines, std::size_t i) {
  std::string_view line = lines[i];
  std::optional<std::string> bus = detail::find_pci_bus_id(line);
  std::string bus_text = bus ? *bus : std::string("?");
  if (icontains(line, "Insufficient Permissions")) {
    diagnose_line(d, NvsmiErrorKind::insufficient_permissions,
                  fmt::format("nvidia-smi is not allowed to access GPU {}", bus_text), lines, i);
  } else {
    diagnose_line(d, NvsmiErrorKind::gpu_lost,
                  fmt::format("GPU {} does not answer (lost, fallen off the bus, or wedged: reset it or reboot "
                              "the node)",
                              bus_text),
                  lines, i);
  }
}

// The first rule, in order, whose needle a line contains; false when none does.
bool diagnose_by_rules(NvsmiDiagnosis& d, const Sources& sources) {
  for (const Rule& rule : rules()) {
    for (const auto* lines : sources) {
      for (std::size_t i = 0; i < lines->size(); ++i) {
        std::string_view line = (*lines)[i];
        bool hit = false;
        for (std::string_view needle : rule.needles) hit = hit || icontains(line, needle);
        if (!hit) continue;
        if (rule.needles.front() == kDeviceHandle) {
          diagnose_device_handle(d, *lines, i);
          return true;
        }
        diagnose_line(d, rule.kind, rule.summary, *lines, i);
        if (rule.kind == NvsmiErrorKind::driver_library_mismatch) {
          // The CI-log form adds "NVML library version: 550.144" on the next line.
          for (std::string_view l : *lines) {
            if (icontains(l, "NVML library version")) d.message += fmt::format(" [{}]", detail::one_line(l, 60));
          }
        }
        return true;
      }
    }
  }
  return false;
}

// No known message: the exit code's kind, quoting the first non-empty line, if any, and the man
// page's meaning.
void diagnose_by_exit_code(NvsmiDiagnosis& d, const Sources& sources, int exit_code) {
  d.kind = kind_for_exit_code(exit_code);
  if (d.kind == NvsmiErrorKind::ok) return;
  d.warning_only = d.kind == NvsmiErrorKind::inforom_corrupted;
  std::string first;
  for (const auto* lines : sources) {
    for (std::size_t i = 0; i < lines->size() && first.empty(); ++i) {
      if (!trim((*lines)[i]).empty()) {
        first = detail::one_line((*lines)[i], 160);
        d.excerpt = detail::excerpt_around(*lines, i);
      }
    }
    if (!first.empty()) break;
  }
  std::string_view summary =
      d.kind == NvsmiErrorKind::nvidia_smi_missing ? "nvidia-smi could not be run" : "nvidia-smi failed";
  d.message = first.empty() ? fmt::format("{}{}", summary, exit_suffix(d.exit_code))
                            : fmt::format("{}: \"{}\"{}", summary, first, exit_suffix(d.exit_code));
}

}  // namespace

NvsmiDiagnosis classify_nvidia_smi_run(std::optional<int> exit_code, std::string_view stdout_text,
                                       std::string_view stderr_text) {
  NvsmiDiagnosis d;
  d.exit_code = exit_code;
  std::vector<std::string_view> err_lines = detail::split_lines(stderr_text);
  std::vector<std::string_view> out_lines = detail::split_lines(stdout_text);
  const Sources sources = {&err_lines, &out_lines};
  if (exit_code == 127 || exit_code == 126 || !exit_code) {
    if (diagnose_missing_command(d, sources)) return d;
  }
  if (diagnose_by_rules(d, sources)) return d;
  if (!exit_code) return d;  // nothing known, nothing decisive
  diagnose_by_exit_code(d, sources, *exit_code);
  return d;
}

// --- Kernel log ---

namespace {

// The text after "NVRM:" on a line, and what came before it (the timestamp / record prefix).
bool split_nvrm(std::string_view line, std::string_view& prefix, std::string_view& text) {
  std::size_t p = line.find("NVRM:");
  if (p == std::string_view::npos) return false;
  prefix = trim(line.substr(0, p));
  if (!prefix.empty() && prefix.back() == ':') prefix = trim(prefix.substr(0, prefix.size() - 1));
  text = trim(line.substr(p + 5));
  return true;
}

// Strips the prefix and value of "key=value, " at the start of `rest`.
std::optional<std::string> take_field(std::string_view& rest, std::string_view key) {
  if (rest.substr(0, key.size()) != key) return std::nullopt;
  std::size_t comma = rest.find(", ");
  std::string_view value =
      rest.substr(key.size(), comma == std::string_view::npos ? std::string_view::npos : comma - key.size());
  rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 2);
  return std::string(value);
}

std::optional<KernelGpuEvent> parse_xid(std::string_view line) {
  std::string_view prefix;
  std::string_view text;
  if (!split_nvrm(line, prefix, text)) return std::nullopt;
  constexpr std::string_view kXid = "Xid (";
  if (text.substr(0, kXid.size()) != kXid) return std::nullopt;
  std::size_t close = text.find(')');
  if (close == std::string_view::npos) return std::nullopt;
  KernelGpuEvent ev;
  ev.kind = KernelGpuEventKind::xid;
  ev.timestamp = detail::sanitize(prefix);
  ev.pci_bus_id = detail::find_pci_bus_id(text.substr(kXid.size(), close - kXid.size()));
  std::string_view rest = trim(text.substr(close + 1));
  if (!rest.empty() && rest.front() == ':') rest = trim(rest.substr(1));
  int xid = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), xid);
  if (ec != std::errc{}) return std::nullopt;
  ev.xid = xid;
  rest = rest.substr(static_cast<std::size_t>(p - rest.data()));
  if (!rest.empty() && rest.front() == ',') rest = trim(rest.substr(1));
  if (auto pid = take_field(rest, "pid=")) {
    long v = 0;
    std::string_view s = *pid;
    if (!s.empty() && s.front() == '\'') s = s.substr(1, s.size() >= 2 ? s.size() - 2 : 0);
    if (std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc{}) ev.pid = v;
  }
  if (auto name = take_field(rest, "name=")) {
    if (*name != "<unknown>") ev.process_name = detail::sanitize(*name);
  }
  ev.message = detail::one_line(rest, 400);
  return ev;
}

}  // namespace

std::vector<KernelGpuEvent> parse_kernel_gpu_events(std::string_view log_text) {
  std::vector<KernelGpuEvent> out;
  std::vector<std::string_view> lines = detail::split_lines(log_text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    const int line_number = static_cast<int>(i) + 1;
    if (auto xid = parse_xid(line)) {
      xid->line_number = line_number;
      out.push_back(std::move(*xid));
      continue;
    }
    std::string_view prefix;
    std::string_view text;
    if (!split_nvrm(line, prefix, text)) continue;
    KernelGpuEvent ev;
    ev.line_number = line_number;
    ev.timestamp = detail::sanitize(prefix);
    if (icontains(text, "fallen off the bus")) {
      // "NVRM: The NVIDIA GPU 0000:b3:00.0 / NVRM: (PCI ID: ...) installed in this system has /
      //  NVRM: fallen off the bus and is not responding to commands." spans up to three lines.
      ev.kind = KernelGpuEventKind::fallen_off_bus;
      std::size_t first = i;
      ev.pci_bus_id = detail::find_pci_bus_id(text);
      for (std::size_t back = 1; !ev.pci_bus_id && back <= 2 && back <= i; ++back) {
        std::string_view p2;
        std::string_view t2;
        if (!split_nvrm(lines[i - back], p2, t2)) break;
        if ((ev.pci_bus_id = detail::find_pci_bus_id(t2))) first = i - back;
      }
      std::string joined;
      for (std::size_t k = first; k <= i; ++k) {
        std::string_view p2;
        std::string_view t2;
        split_nvrm(lines[k], p2, t2);
        if (k == first) ev.timestamp = detail::sanitize(p2);
        joined += std::string(t2) + " ";
      }
      ev.message = detail::one_line(joined, 400);
      ev.line_number = static_cast<int>(first) + 1;
    } else if (text.find("RmInitAdapter failed") != std::string_view::npos) {
      ev.kind = KernelGpuEventKind::rm_init_adapter_failed;
      ev.pci_bus_id = detail::find_pci_bus_id(text);
      ev.message = detail::one_line(text, 400);
    } else if (icontains(text, "probe routine was not called") || icontains(text, "probe routine failed")) {
      ev.kind = KernelGpuEventKind::probe_failed;
      ev.message = detail::one_line(text, 400);
    } else {
      continue;
    }
    out.push_back(std::move(ev));
  }
  return out;
}

void to_json(nlohmann::json& j, const NvsmiDiagnosis& v) {
  j = nlohmann::json{
      {"kind", to_string(v.kind)},
      {"message", detail::sanitize(v.message)},
      {"excerpt", detail::sanitize(v.excerpt)},
      {"pciBusId", v.pci_bus_id ? nlohmann::json(detail::sanitize(*v.pci_bus_id)) : nlohmann::json(nullptr)},
      {"exitCode", v.exit_code ? nlohmann::json(*v.exit_code) : nlohmann::json(nullptr)},
      {"warningOnly", v.warning_only}};
}

void to_json(nlohmann::json& j, const KernelGpuEvent& v) {
  j = nlohmann::json{
      {"kind", to_string(v.kind)},
      {"xid", v.xid ? nlohmann::json(*v.xid) : nlohmann::json(nullptr)},
      {"pciBusId", v.pci_bus_id ? nlohmann::json(detail::sanitize(*v.pci_bus_id)) : nlohmann::json(nullptr)},
      {"pid", v.pid ? nlohmann::json(*v.pid) : nlohmann::json(nullptr)},
      {"processName", v.process_name ? nlohmann::json(detail::sanitize(*v.process_name)) : nlohmann::json(nullptr)},
      {"message", detail::sanitize(v.message)},
      {"timestamp", detail::sanitize(v.timestamp)},
      {"lineNumber", v.line_number}};
}

}  // namespace gpuctl::gpu
