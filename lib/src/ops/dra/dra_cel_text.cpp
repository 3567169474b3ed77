// What the CEL subset does with text: the regex subset behind `matches` (no std::regex on text
// from the cluster: a linear scan over literal segments), counted substring search, semantic
// versions as blang/semver reads them, and writing CEL string literals.
#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "dra_cel_internal.hpp"

namespace gpuctl::ops::cel_detail {
namespace {

constexpr std::string_view kRegexMeta = "\\.+*?()|[]{}^$";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// One position of a segment: a character, or `.` (any character but a newline).
struct RegexElement {
  char c = 0;
  bool any = false;
};
using Segment = std::vector<RegexElement>;

// The pattern as segments separated by `.*`: S0 .* S1 .* ... Sk.
struct ParsedRegex {
  bool anchored_start = false, anchored_end = false, ignore_case = false, has_single_any = false;
  std::vector<Segment> segments{1};
};

RegexOutcome unsupported_regex(std::string problem) { return {RegexOutcome::Kind::unsupported, std::move(problem)}; }

std::optional<RegexOutcome> parse_regex(std::string_view p, ParsedRegex& out) {
  if (p.starts_with("(?i)")) {
    out.ignore_case = true;
    p.remove_prefix(4);
  }
  if (p.starts_with('^')) {
    out.anchored_start = true;
    p.remove_prefix(1);
  }
  for (std::size_t i = 0; i < p.size();) {
    char c = p[i];
    if (c == '\\') {
      char next = i + 1 < p.size() ? p[i + 1] : '\0';
      bool punct = next > 0x20 && next < 0x7F && !std::isalnum(static_cast<unsigned char>(next));
      if (!punct) return unsupported_regex(fmt::format("the regex escape \\{} is not in the subset", next));
      out.segments.back().push_back({next, false});
      i += 2;
    } else if (c == '.') {
      char next = i + 1 < p.size() ? p[i + 1] : '\0';
      if (next == '*' || next == '+') {
        if (next == '+') out.segments.back().push_back({0, true});
        out.segments.emplace_back();
        i += 2;
        if (i < p.size() && p[i] == '?') ++i;  // lazy or greedy: the same yes or no
      } else {
        out.segments.back().push_back({0, true});
        out.has_single_any = true;
        ++i;
      }
    } else if (c == '$' && i + 1 == p.size()) {
      out.anchored_end = true;
      ++i;
    } else if (kRegexMeta.find(c) != std::string_view::npos) {
      return unsupported_regex(fmt::format("the regex operator '{}' is not in the subset", c));
    } else {
      out.segments.back().push_back({c, false});
      ++i;
    }
  }
  return std::nullopt;
}

bool element_matches(const RegexElement& e, char c, bool ignore_case) {
  if (e.any) return c != '\n';
  return ignore_case ? lower(e.c) == lower(c) : e.c == c;
}

bool matches_at(std::string_view text, std::size_t at, const Segment& segment, bool ignore_case, std::size_t& steps) {
  if (at + segment.size() > text.size()) return false;
  for (std::size_t k = 0; k < segment.size(); ++k) {
    ++steps;
    if (!element_matches(segment[k], text[at + k], ignore_case)) return false;
  }
  return true;
}

// The leftmost position from `from` where the segment matches; npos when none (or past the budget).
std::size_t find_segment(std::string_view text, std::size_t from, const Segment& segment, bool ignore_case,
                         std::size_t& steps) {
  for (std::size_t at = from; at + segment.size() <= text.size(); ++at) {
    if (steps > kMaxCelSteps) return std::string_view::npos;
    if (matches_at(text, at, segment, ignore_case, steps)) return at;
  }
  return std::string_view::npos;
}

bool run_regex(const ParsedRegex& re, std::string_view text, std::size_t& steps) {
  const auto& segs = re.segments;
  const bool ic = re.ignore_case;
  // No `.*`: one segment, placed by the anchors.
  if (segs.size() == 1) {
    const Segment& s = segs[0];
    if (re.anchored_start && re.anchored_end) return s.size() == text.size() && matches_at(text, 0, s, ic, steps);
    if (re.anchored_start) return matches_at(text, 0, s, ic, steps);
    if (re.anchored_end) return s.size() <= text.size() && matches_at(text, text.size() - s.size(), s, ic, steps);
    return find_segment(text, 0, s, ic, steps) != std::string_view::npos;
  }
  // S0 .* S1 ... .* Sk: each segment at its leftmost place after the one before (the `.*`
  // between them takes the rest), the first at 0 when anchored, the last at the end when anchored.
  std::size_t pos = 0;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    const Segment& s = segs[k];
    if (k == 0 && re.anchored_start) {
      if (!matches_at(text, 0, s, ic, steps)) return false;
      pos = s.size();
    } else if (k + 1 == segs.size() && re.anchored_end) {
      if (s.size() > text.size() - pos) return false;
      return matches_at(text, text.size() - s.size(), s, ic, steps);
    } else {
      std::size_t at = find_segment(text, pos, s, ic, steps);
      if (at == std::string_view::npos) return false;
      pos = at + s.size();
    }
  }
  return true;
}

bool numeric(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool identifier_chars(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

std::optional<std::uint64_t> version_number(std::string_view s) {
  if (!numeric(s) || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    auto cut = s.find(sep);
    parts.push_back(s.substr(0, cut));
    if (cut == std::string_view::npos) return parts;
    s.remove_prefix(cut + 1);
  }
}

int compare_identifiers(std::string_view a, std::string_view b) {
  bool an = numeric(a), bn = numeric(b);
  if (an && bn) {
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
    return a == b ? 0 : (a < b ? -1 : 1);
  }
  if (an != bn) return an ? -1 : 1;  // numeric identifiers sort before alphanumeric ones
  return a == b ? 0 : (a < b ? -1 : 1);
}

}  // namespace

RegexOutcome regex_search(std::string_view pattern, std::string_view text, std::size_t& steps) {
  ParsedRegex re;
  if (auto problem = parse_regex(pattern, re)) return *problem;
  bool wildcards = re.segments.size() > 1 || re.has_single_any;
  // `.` and `.*` stop at a newline, and `.` takes one code point, not one byte; (?i) folds
  // Unicode case. Rather than model those, such texts are left to the scheduler.
  if (wildcards && text.find('\n') != std::string_view::npos)
    return unsupported_regex("a wildcard over text with a newline is not in the subset");
  if (re.has_single_any && !is_ascii(text))
    return unsupported_regex("'.' over text that is not ASCII is not in the subset");
  if (re.ignore_case && (!is_ascii(text) || !is_ascii(pattern)))
    return unsupported_regex("(?i) over text that is not ASCII is not in the subset");
  bool found = run_regex(re, text, steps);
  if (steps > kMaxCelSteps) return unsupported_regex("matching costs more than gpuctl spends on one selector");
  return {found ? RegexOutcome::Kind::match : RegexOutcome::Kind::no_match, {}};
}

std::size_t find_counted(std::string_view haystack, std::string_view needle, std::size_t& steps, bool& over_budget) {
  Segment segment;
  for (char c : needle) segment.push_back({c, false});
  std::size_t at = find_segment(haystack, 0, segment, false, steps);
  over_budget = steps > kMaxCelSteps;
  return over_budget ? std::string_view::npos : at;
}

std::optional<Semver> parse_semver(std::string_view text) {
  Semver v;
  v.text = std::string(text);
  std::string_view rest = text;
  if (auto plus = rest.find('+'); plus != std::string_view::npos) {
    for (auto part : split(rest.substr(plus + 1), '.')) {
      if (!identifier_chars(part)) return std::nullopt;
    }
    rest = rest.substr(0, plus);
  }
  if (auto dash = rest.find('-'); dash != std::string_view::npos) {
    for (auto part : split(rest.substr(dash + 1), '.')) {
      if (!identifier_chars(part) || (numeric(part) && part.size() > 1 && part[0] == '0')) return std::nullopt;
      v.prerelease.emplace_back(part);
    }
    rest = rest.substr(0, dash);
  }
  auto core = split(rest, '.');
  if (core.size() != 3) return std::nullopt;
  auto major = version_number(core[0]), minor = version_number(core[1]), patch = version_number(core[2]);
  if (!major || !minor || !patch) return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  v.patch = *patch;
  return v;
}

int compare(const Semver& a, const Semver& b) {
  for (auto [x, y] : {std::pair{a.major, b.major}, std::pair{a.minor, b.minor}, std::pair{a.patch, b.patch}}) {
    if (x != y) return x < y ? -1 : 1;
  }
  // A release sorts after its pre-releases.
  if (a.prerelease.empty() != b.prerelease.empty()) return a.prerelease.empty() ? 1 : -1;
  for (std::size_t i = 0; i < std::min(a.prerelease.size(), b.prerelease.size()); ++i) {
    if (int c = compare_identifiers(a.prerelease[i], b.prerelease[i]); c != 0) return c;
  }
  if (a.prerelease.size() == b.prerelease.size()) return 0;
  return a.prerelease.size() < b.prerelease.size() ? -1 : 1;
}

std::string cel_string_literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string regex_literal(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (kRegexMeta.find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace gpuctl::ops::cel_detail
