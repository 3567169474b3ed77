// The kernel-log reader for Xid, SXid and the NVRM bus/init failures. A linear scan per line (no
// std::regex on node output): find the marker, read what follows it by position, and read the
// time from whatever prefix the tool printed before it.
#include <charconv>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "gpu/util.hpp"
#include "gpuctl/gpu/xid.hpp"
#include "gpuctl/util/scan.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::gpu {

using detail::find_pci_bus_id;
using detail::icontains;
using detail::trim;

namespace {

// A verbatim line is kept up to this many bytes: enough for any Xid line, bounded for hostile input.
constexpr std::size_t kMaxLineBytes = 512;

std::optional<double> parse_seconds(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (!util::is_digit(c) && c != '.') return std::nullopt;
  }
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// "2025-01-21T04:41:44,283302+00:00" (dmesg iso), "2025-01-21T04:41:44+0000" (journalctl
// short-iso), "2026-04-22T21:30:51.870495804Z" (talosctl): the token, and its instant when it
// carries a zone. RFC 3339 wants '.' and "+00:00", so those two spellings are normalised first.
bool read_iso_time(std::string_view prefix, KernelLogEvent& ev) {
  for (std::size_t i = 0; i + 19 <= prefix.size(); ++i) {
    std::string_view c = prefix.substr(i, 19);
    if (!(util::is_digit(c[0]) && c[4] == '-' && c[7] == '-' && c[10] == 'T' && c[13] == ':' && c[16] == ':')) {
      continue;
    }
    std::size_t end = i + 19;
    while (end < prefix.size() &&
           (util::is_digit(prefix[end]) || util::one_of(prefix.substr(end, 1), {".", ",", "+", "-", ":", "Z"}))) {
      ++end;
    }
    ev.time_text = detail::sanitize(prefix.substr(i, end - i));
    std::string norm = ev.time_text;
    if (auto comma = norm.find(','); comma != std::string::npos) norm[comma] = '.';
    if (norm.size() > 5) {
      std::string_view tail = std::string_view(norm).substr(norm.size() - 5);
      if ((tail[0] == '+' || tail[0] == '-') && tail.find(':') == std::string_view::npos)
        norm.insert(norm.size() - 2, ":");
    }
    if (auto t = util::parse_rfc3339(norm)) {
      ev.unix_time_s = std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
    }
    return true;
  }
  return false;
}

// The time from the text before the marker: "[  123.456789]" (seconds since boot), "[Sun Feb 23
// 16:24:18 2025]" (dmesg -T: local time, kept as printed), an ISO form, or the syslog/journalctl
// "Feb 14 05:03:41[.123456]" (no year: kept as printed).
void read_time(std::string_view prefix, KernelLogEvent& ev) {
  if (read_iso_time(prefix, ev)) return;
  std::size_t open = prefix.find('[');
  std::size_t close = open == std::string_view::npos ? open : prefix.find(']', open);
  if (close != std::string_view::npos) {
    std::string_view inside = trim(prefix.substr(open + 1, close - open - 1));
    ev.time_text = detail::sanitize(inside);
    ev.monotonic_s = parse_seconds(inside);
    return;
  }
  std::string_view p = trim(prefix);
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  if (p.size() >= 15 && kMonths.find(p.substr(0, 3)) % 3 == 0 &&
      kMonths.find(p.substr(0, 3)) != std::string_view::npos && p[9] == ':' && p[12] == ':') {
    std::size_t end = 15;
    while (end < p.size() && (util::is_digit(p[end]) || p[end] == '.')) ++end;
    ev.time_text = detail::sanitize(p.substr(0, end));
  }
}

// Reads "<code>" then ", " from `rest`; false when no number starts it.
bool take_code(std::string_view& rest, int& code) {
  rest = trim(rest);
  if (!rest.empty() && rest.front() == ':') rest = trim(rest.substr(1));
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), code);
  if (ec != std::errc{}) return false;
  rest = rest.substr(static_cast<std::size_t>(p - rest.data()));
  if (!rest.empty() && rest.front() == ',') rest = rest.substr(1);
  rest = trim(rest);
  return true;
}

// Strips "key=value, " from the start of `rest` and returns the value.
std::optional<std::string_view> take_field(std::string_view& rest, std::string_view key) {
  if (rest.substr(0, key.size()) != key) return std::nullopt;
  std::size_t comma = rest.find(", ");
  std::string_view value =
      rest.substr(key.size(), comma == std::string_view::npos ? std::string_view::npos : comma - key.size());
  rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 2);
  return value;
}

// "(PCI:0000:3b:00): 79, ..." after "Xid " / "SXid ": the bus id, the code and the rest.
bool read_bus_and_code(std::string_view after, KernelLogEvent& ev, std::string_view& rest) {
  if (after.empty() || after.front() != '(') return false;
  std::size_t close = after.find(')');
  if (close == std::string_view::npos) return false;
  ev.pci_bus_id = find_pci_bus_id(after.substr(1, close - 1));
  rest = after.substr(close + 1);
  int code = 0;
  if (!take_code(rest, code)) return false;
  ev.code = code;
  return true;
}

void read_xid_fields(std::string_view rest, KernelLogEvent& ev) {
  if (auto pid = take_field(rest, "pid=")) {
    long v = 0;
    if (std::from_chars(pid->data(), pid->data() + pid->size(), v).ec == std::errc{}) ev.pid = v;
  }
  if (auto name = take_field(rest, "name=")) {
    if (*name != "<unknown>") ev.process_name = detail::sanitize(*name);
  }
  ev.message = detail::sanitize(rest.substr(0, kMaxLineBytes));
  if (ev.code == 154) ev.recovery_action = parse_recovery_action(rest);
}

std::optional<KernelLogEvent> read_event(std::string_view line) {
  KernelLogEvent ev;
  std::string_view rest;
  std::size_t at = line.find("NVRM: Xid ");
  if (at != std::string_view::npos) {
    if (!read_bus_and_code(line.substr(at + 10), ev, rest)) return std::nullopt;
    ev.kind = KernelLogEventKind::xid;
    read_xid_fields(rest, ev);
  } else if ((at = line.find(": SXid ")) != std::string_view::npos) {
    if (!read_bus_and_code(line.substr(at + 7), ev, rest)) return std::nullopt;
    ev.kind = KernelLogEventKind::sxid;
    std::size_t dev = line.rfind(' ', at);
    ev.device = detail::sanitize(
        line.substr(dev == std::string_view::npos ? 0 : dev + 1, at - (dev == std::string_view::npos ? 0 : dev + 1)));
    if (rest.starts_with("Fatal")) ev.sxid_fatal = true;
    if (rest.starts_with("Non-fatal")) ev.sxid_fatal = false;
    ev.message = detail::sanitize(rest.substr(0, kMaxLineBytes));
    at = dev == std::string_view::npos ? 0 : dev + 1;
  } else if ((at = line.find("NVRM: ")) != std::string_view::npos) {
    std::string_view text = line.substr(at + 6);
    if (icontains(text, "fallen off the bus")) {
      ev.kind = KernelLogEventKind::fallen_off_bus;
    } else if (text.find("RmInitAdapter failed") != std::string_view::npos) {
      ev.kind = KernelLogEventKind::rm_init_adapter_failed;
    } else {
      return std::nullopt;
    }
    ev.pci_bus_id = find_pci_bus_id(text);
    ev.message = detail::sanitize(trim(text).substr(0, kMaxLineBytes));
  } else {
    return std::nullopt;
  }
  read_time(line.substr(0, at), ev);
  ev.line = detail::sanitize(line.substr(0, kMaxLineBytes));
  return ev;
}

}  // namespace

std::optional<GpuRecoveryAction> parse_recovery_action(std::string_view text) {
  std::size_t to = text.rfind(" to 0x");
  if (to == std::string_view::npos) return std::nullopt;
  std::string_view tail = text.substr(to + 6);
  // The label is the driver's word; only without one does the number decide.
  std::size_t open = tail.find('(');
  std::size_t close = open == std::string_view::npos ? open : tail.find(')', open);
  if (close != std::string_view::npos) {
    std::string_view label = tail.substr(open + 1, close - open - 1);
    if (icontains(label, "reboot")) return GpuRecoveryAction::node_reboot;
    if (icontains(label, "drain and reset")) return GpuRecoveryAction::drain_and_reset;
    if (icontains(label, "drain p2p")) return GpuRecoveryAction::drain_p2p;
    if (icontains(label, "reset") || icontains(label, "flr")) return GpuRecoveryAction::gpu_reset;
    if (icontains(label, "none")) return GpuRecoveryAction::none;
  }
  unsigned value = 0;
  auto [p, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), value, 16);
  if (ec != std::errc{} || value > 4) return std::nullopt;
  return static_cast<GpuRecoveryAction>(value);
}

std::string_view to_string(KernelLogEventKind kind) {
  switch (kind) {
    case KernelLogEventKind::xid: return "xid";
    case KernelLogEventKind::sxid: return "sxid";
    case KernelLogEventKind::fallen_off_bus: return "fallen_off_bus";
    case KernelLogEventKind::rm_init_adapter_failed: return "rm_init_adapter_failed";
  }
  return "xid";
}

std::vector<KernelLogEvent> parse_kernel_log(std::string_view text) {
  std::vector<KernelLogEvent> out;
  std::vector<std::string_view> lines = detail::split_lines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto ev = read_event(lines[i]);
    if (!ev) continue;
    ev->line_number = static_cast<int>(i) + 1;
    // The multi-line form ("NVRM: The NVIDIA GPU 0000:b3:00.0 / (PCI ID: ...) installed in this
    // system has / fallen off the bus ...") names the GPU up to two lines earlier.
    for (std::size_t back = 1; !ev->pci_bus_id && back <= 2 && back <= i; ++back) {
      if (lines[i - back].find("NVRM:") == std::string_view::npos) break;
      ev->pci_bus_id = find_pci_bus_id(lines[i - back]);
    }
    out.push_back(std::move(*ev));
    // Keep the newest events: drop the oldest in batches, so a flood stays linear.
    if (out.size() >= 2 * kMaxKernelLogEvents) out.erase(out.begin(), out.begin() + kMaxKernelLogEvents);
  }
  if (out.size() > kMaxKernelLogEvents) {
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(out.size() - kMaxKernelLogEvents));
  }
  return out;
}

void to_json(nlohmann::json& j, const KernelLogEvent& v) {
  auto opt = [](const auto& o) { return o ? nlohmann::json(*o) : nlohmann::json(nullptr); };
  j = nlohmann::json{
      {"kind", to_string(v.kind)},
      {"code", opt(v.code)},
      {"pciBusId", opt(v.pci_bus_id)},
      {"device", opt(v.device)},
      {"pid", opt(v.pid)},
      {"processName", opt(v.process_name)},
      {"fatal", opt(v.sxid_fatal)},
      {"recoveryAction", v.recovery_action ? nlohmann::json(to_string(*v.recovery_action)) : nlohmann::json(nullptr)},
      {"time", v.time_text},
      {"monotonicSeconds", opt(v.monotonic_s)},
      {"unixTime", opt(v.unix_time_s)},
      {"message", v.message},
      {"line", v.line},
      {"lineNumber", v.line_number}};
}

}  // namespace gpuctl::gpu
