#include "gpu/util.hpp"

#include <algorithm>
#include <cctype>

#include "gpuctl/gpu/reported.hpp"

namespace gpuctl::gpu::detail {

namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    std::size_t end = nl == std::string_view::npos ? s.size() : nl;
    std::string_view line = s.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

std::size_t ifind(std::string_view haystack, std::string_view needle, std::size_t from) {
  if (needle.empty()) return from <= haystack.size() ? from : std::string_view::npos;
  if (needle.size() > haystack.size()) return std::string_view::npos;
  for (std::size_t i = from; i + needle.size() <= haystack.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() && lower(haystack[i + k]) == lower(needle[k])) ++k;
    if (k == needle.size()) return i;
  }
  return std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string snake_key(std::string_view label) {
  std::string out;
  bool pending_sep = false;
  for (char c : trim(label)) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      if (pending_sep && !out.empty()) out.push_back('_');
      pending_sep = false;
      out.push_back(lower(c));
    } else {
      pending_sep = true;
    }
  }
  return out;
}

std::optional<std::string> find_pci_bus_id(std::string_view text) {
  // domain (4..8 hex) ':' bus (2 hex) ':' device (2 hex) [ '.' function (1 hex) ]
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!is_hex(text[i]) || (i > 0 && is_hex(text[i - 1]))) continue;
    std::size_t j = i;
    while (j < text.size() && is_hex(text[j])) ++j;
    std::size_t domain_len = j - i;
    if (domain_len < 4 || domain_len > 8) continue;
    if (j + 6 > text.size() || text[j] != ':' || !is_hex(text[j + 1]) || !is_hex(text[j + 2]) || text[j + 3] != ':' ||
        !is_hex(text[j + 4]) || !is_hex(text[j + 5])) {
      continue;
    }
    std::size_t end = j + 6;
    if (end < text.size() && is_hex(text[end])) continue;
    if (end + 1 < text.size() && text[end] == '.' && is_hex(text[end + 1]) &&
        (end + 2 >= text.size() || !is_hex(text[end + 2]))) {
      end += 2;
    }
    if (auto id = canonical_pci_bus_id(text.substr(i, end - i))) return id;
  }
  return std::nullopt;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c >= 0x20 || c == '\n' || c == '\t')
        out.push_back(static_cast<char>(c));
      else if (c != '\r')
        out.push_back('?');
      ++i;
      continue;
    }
    std::size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    }
    if (ok && len == 3) {  // no overlongs, no surrogates
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

std::string one_line(std::string_view s, std::size_t max) {
  std::string out;
  bool space = false;
  for (char c : trim(s)) {
    if (is_space(c)) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  if (out.size() > max) {
    out.resize(max);
    out += "...";
  }
  return sanitize(out);
}

std::string excerpt_around(const std::vector<std::string_view>& lines, std::size_t index, std::size_t max_lines,
                           std::size_t max_bytes) {
  if (lines.empty()) return {};
  index = std::min(index, lines.size() - 1);
  std::size_t first = index;
  std::size_t last = std::min(lines.size(), index + max_lines);
  std::string out;
  for (std::size_t i = first; i < last; ++i) {
    std::string_view line = lines[i];
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (i > first && trim(line).empty()) break;
    if (!out.empty()) out.push_back('\n');
    out.append(line);
  }
  if (out.size() > max_bytes) {
    out.resize(max_bytes);
    out += "...";
  }
  return sanitize(out);
}

}  // namespace gpuctl::gpu::detail
