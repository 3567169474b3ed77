#include "gpuctl/gpu/reported.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>

#include "gpu/util.hpp"

namespace gpuctl::gpu {

using detail::iequals;
using detail::trim;

std::string_view to_string(Absence absence) {
  switch (absence) {
    case Absence::missing: return "missing";
    case Absence::not_available: return "not_available";
    case Absence::not_supported: return "not_supported";
    case Absence::deprecated: return "deprecated";
    case Absence::error: return "error";
    case Absence::invalid: return "invalid";
  }
  return "missing";
}

std::optional<Absence> absence_of(std::string_view text) {
  std::string_view t = trim(text);
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = trim(t.substr(1, t.size() - 2));
  if (t.empty() || iequals(t, "N/A") || iequals(t, "NA")) return Absence::not_available;
  // "Not available in WDDM driver model" (used GPU memory per process on Windows).
  if (t.size() >= 13 && iequals(t.substr(0, 13), "Not available")) return Absence::not_available;
  if (iequals(t, "Not Supported") || iequals(t, "Function Not Found")) return Absence::not_supported;
  if (iequals(t, "Requested functionality has been deprecated")) return Absence::deprecated;
  if (iequals(t, "Unknown Error") || iequals(t, "GPU is lost") || iequals(t, "ERR!") ||
      iequals(t, "Insufficient Permissions") || iequals(t, "Error")) {
    return Absence::error;
  }
  return std::nullopt;
}

Reported<std::string> parse_text(std::string_view text) {
  if (auto why = absence_of(text)) return Reported<std::string>::absent(*why);
  return std::string(trim(text));
}

namespace {

// Splits "  139.62 W " into number text "139.62" and rest "W".
void split_number(std::string_view t, std::string_view& number, std::string_view& rest) {
  std::size_t i = 0;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) != 0 || t[i] == '.')) ++i;
  number = t.substr(0, i);
  rest = trim(t.substr(i));
}

bool unit_ok(std::string_view rest, std::string_view unit) { return rest.empty() || (!unit.empty() && rest == unit); }

}  // namespace

Reported<std::int64_t> parse_integer(std::string_view text, std::string_view unit) {
  if (auto why = absence_of(text)) return Reported<std::int64_t>::absent(*why);
  std::string_view t = trim(text);
  std::int64_t value = 0;
  if (unit.empty() && t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    auto [p, ec] = std::from_chars(t.data() + 2, t.data() + t.size(), value, 16);
    if (ec != std::errc{} || p != t.data() + t.size()) return Reported<std::int64_t>::absent(Absence::invalid);
    return value;
  }
  std::string_view number;
  std::string_view rest;
  split_number(t, number, rest);
  if (!number.empty() && number.front() == '+') number.remove_prefix(1);
  if (number.empty() || !unit_ok(rest, unit)) return Reported<std::int64_t>::absent(Absence::invalid);
  auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc{} || p != number.data() + number.size()) {
    return Reported<std::int64_t>::absent(Absence::invalid);
  }
  return value;
}

Reported<double> parse_number(std::string_view text, std::string_view unit) {
  if (auto why = absence_of(text)) return Reported<double>::absent(*why);
  std::string_view number;
  std::string_view rest;
  split_number(trim(text), number, rest);
  if (!number.empty() && number.front() == '+') number.remove_prefix(1);
  if (number.empty() || !unit_ok(rest, unit)) return Reported<double>::absent(Absence::invalid);
  double value = 0;
  auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc{} || p != number.data() + number.size()) return Reported<double>::absent(Absence::invalid);
  return value;
}

Reported<bool> parse_flag(std::string_view text) {
  if (auto why = absence_of(text)) return Reported<bool>::absent(*why);
  std::string_view t = trim(text);
  for (std::string_view yes : {"Enabled", "Yes", "On", "Active", "True", "Enable"}) {
    if (iequals(t, yes)) return true;
  }
  for (std::string_view no : {"Disabled", "No", "Off", "Not Active", "False", "Disable"}) {
    if (iequals(t, no)) return false;
  }
  return Reported<bool>::absent(Absence::invalid);
}

std::optional<std::string> canonical_pci_bus_id(std::string_view text) {
  std::string_view t = trim(text);
  if (t.size() >= 4 && iequals(t.substr(0, 4), "PCI:")) t.remove_prefix(4);
  std::size_t c1 = t.find(':');
  if (c1 == std::string_view::npos) return std::nullopt;
  std::size_t c2 = t.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  std::string_view dom = t.substr(0, c1);
  std::string_view bus = t.substr(c1 + 1, c2 - c1 - 1);
  std::string_view rest = t.substr(c2 + 1);
  std::string_view dev = rest;
  std::string_view fn = "0";
  if (std::size_t dot = rest.find('.'); dot != std::string_view::npos) {
    dev = rest.substr(0, dot);
    fn = rest.substr(dot + 1);
  }
  auto hex = [](std::string_view s, std::size_t min_len, std::size_t max_len, unsigned long& out) {
    if (s.size() < min_len || s.size() > max_len) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc{} && p == s.data() + s.size();
  };
  unsigned long d = 0;
  unsigned long b = 0;
  unsigned long v = 0;
  unsigned long f = 0;
  if (!hex(dom, 1, 8, d) || !hex(bus, 1, 2, b) || !hex(dev, 1, 2, v) || !hex(fn, 1, 1, f)) return std::nullopt;
  char buf[32];
  if (d <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "%04lX:%02lX:%02lX.%lX", d, b, v, f);
  } else {
    std::snprintf(buf, sizeof buf, "%08lX:%02lX:%02lX.%lX", d, b, v, f);
  }
  return std::string(buf);
}

}  // namespace gpuctl::gpu
