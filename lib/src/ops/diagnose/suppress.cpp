// --suppress FILE: the rules read from YAML, and the findings they set apart (suppress.hpp).
#include "gpuctl/ops/diagnose/suppress.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "gpuctl/output/printable.hpp"
#include "kube/yaml_tree.hpp"

namespace gpuctl::ops::diagnose {
namespace {

constexpr std::string_view kKeys = "check, object, node, reason, until";

// A value from the file as an error quotes it: one line, short, whatever the file holds.
std::string shown(std::string_view text) {
  std::string shown = output::printable(text.substr(0, 64));
  return fmt::format("\"{}\"{}", shown, text.size() > 64 ? "..." : "");
}

bool has_glob(std::string_view pattern) { return pattern.find_first_of("*?") != std::string_view::npos; }

// YYYY-MM-DD naming a real day.
std::optional<std::chrono::sys_days> parse_date(std::string_view text) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return std::nullopt;
  auto number = [&](std::size_t from, std::size_t length) {
    int value = 0;
    for (std::size_t i = from; i < from + length; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  int y = number(0, 4), m = number(5, 2), d = number(8, 2);
  if (y < 0 || m < 0 || d < 0) return std::nullopt;
  std::chrono::year_month_day day{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(m)),
                                  std::chrono::day(static_cast<unsigned>(d))};
  if (!day.ok()) return std::nullopt;
  return std::chrono::sys_days(day);
}

// Checks one rule's values once its keys are read; `where` is "FILE:LINE: entry N".
Result<void> validate(const Suppression& rule, const std::string& where) {
  auto bad = [&](std::string what) { return fail(Errc::invalid_argument, fmt::format("{}: {}", where, what)); };
  if (rule.check.empty()) return bad("has no check; add `check: ID` (list them with: gpuctl diagnose --list-checks)");
  bool known = std::any_of(checks().begin(), checks().end(), [&](const Check& c) {
    return has_glob(rule.check) ? glob_match(rule.check, c.id) : rule.check == c.id;
  });
  if (!known) {
    return bad(fmt::format("no check {} {} (list them with: gpuctl diagnose --list-checks)",
                           has_glob(rule.check) ? "matches" : "is named", shown(rule.check)));
  }
  if (rule.object.empty() && rule.node.empty()) {
    return bad(
        "names neither object nor node; add `node: NAME` or `object: Kind/name` (globs allowed, "
        "`node: \"*\"` for every node)");
  }
  if (!rule.object.empty() && rule.object != "*" && rule.object.find('/') == std::string::npos) {
    return bad(
        fmt::format("object {} names no kind; write it as the OBJECT column prints it: Kind/name or "
                    "Kind/namespace/name (Node/gpu-7, Pod/ml/train-*)",
                    shown(rule.object)));
  }
  if (rule.reason.find_first_not_of(" \t") == std::string::npos) {
    return bad("has no reason; add `reason: ...` saying why (a ticket, an RMA): the report shows it");
  }
  if (!rule.until.empty() && !parse_date(rule.until)) {
    return bad(fmt::format("until {} is not a date; write YYYY-MM-DD (the rule holds through that day, UTC)",
                           shown(rule.until)));
  }
  return {};
}

Result<Suppression> read_entry(const YAML::Node& entry, std::size_t index, std::string_view source) {
  const std::string where = fmt::format("{}:{}: entry {}", source, entry.Mark().line + 1, index + 1);
  if (!entry.IsMap()) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: is not a map; write each entry as `- check: ID` with {}", where, kKeys));
  }
  Suppression rule;
  rule.origin = fmt::format("{}: entry {} (line {})", source, index + 1, entry.Mark().line + 1);
  std::vector<std::string> seen;
  for (const auto& kv : entry) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    std::string* field = key == "check"    ? &rule.check
                         : key == "object" ? &rule.object
                         : key == "node"   ? &rule.node
                         : key == "reason" ? &rule.reason
                         : key == "until"  ? &rule.until
                                           : nullptr;
    if (field == nullptr) {
      return fail(Errc::invalid_argument, fmt::format("{}: unknown key {}; the keys are {}", where, shown(key), kKeys));
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return fail(Errc::invalid_argument, fmt::format("{}: key {} appears twice; keep one", where, key));
    }
    seen.push_back(key);
    if (!kv.second.IsScalar()) {
      return fail(Errc::invalid_argument,
                  fmt::format("{}: {} must be one text value; write one entry per {}", where, key, key));
    }
    *field = kv.second.Scalar();
  }
  GPUCTL_TRY(validate(rule, where));
  return rule;
}

// Whether `rule` is past its last day at `now`.
bool expired(const Suppression& rule, std::chrono::system_clock::time_point now) {
  auto last_day = parse_date(rule.until);
  return last_day && now >= *last_day + std::chrono::days(1);
}

bool matches(const Suppression& rule, const Finding& finding) {
  if (has_glob(rule.check) ? !glob_match(rule.check, finding.check) : rule.check != finding.check) return false;
  if (!rule.object.empty() && !glob_match(rule.object, object_path(finding.object))) return false;
  return rule.node.empty() || glob_match(rule.node, finding.node);
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  // The classic two-pointer match: on a mismatch after a `*`, retry with that star eating one
  // more character. Only the last star needs remembering, so no recursion and no blow-up.
  std::size_t p = 0, t = 0;
  std::size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_t = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string object_path(const ObjectRef& object) {
  if (object.namespace_name.empty()) return fmt::format("{}/{}", object.kind, object.name);
  return fmt::format("{}/{}/{}", object.kind, object.namespace_name, object.name);
}

Result<std::vector<Suppression>> parse_suppressions(std::string_view yaml_text, std::string_view source_name) {
  YAML::Node root;
  try {
    const std::string owned(yaml_text);
    if (kube::detail::count_yaml_documents(owned, 1) > 1) {
      return fail(Errc::invalid_argument,
                  fmt::format("{}: holds more than one YAML document; put every rule in one list", source_name));
    }
    root = YAML::Load(owned);
  } catch (const YAML::DeepRecursion&) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: nests too deep; a suppression file is a flat list of rules", source_name));
  } catch (const YAML::Exception& e) {
    return fail(Errc::invalid_argument, fmt::format("{}:{}: not valid YAML: {}", source_name, e.mark.line + 1, e.msg));
  }
  std::vector<Suppression> rules;
  if (root.IsNull()) return rules;
  if (!root.IsSequence()) {
    return fail(Errc::invalid_argument,
                fmt::format("{}: is not a list; write one `- check: ID` entry per rule, with {}", source_name, kKeys));
  }
  for (std::size_t i = 0; i < root.size(); ++i) {
    GPUCTL_TRY_ASSIGN(Suppression rule, read_entry(root[i], i, source_name));
    rules.push_back(std::move(rule));
  }
  return rules;
}

Result<std::vector<Suppression>> read_suppressions(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Errc::io, fmt::format("--suppress: cannot read {}: {}", path, std::strerror(errno)));
  std::string text(kMaxSuppressionFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return fail(Errc::io, fmt::format("--suppress: cannot read {}: {}", path, std::strerror(errno)));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxSuppressionFileBytes) {
    return fail(
        Errc::invalid_argument,
        fmt::format("--suppress: {} is larger than 1 MiB (the limit); a suppression file is a short list", path));
  }
  return parse_suppressions(text, path);
}

std::vector<std::string> apply_suppressions(Report& report, const Snapshot& snapshot,
                                            const std::vector<Suppression>& rules) {
  std::vector<std::string> warnings;
  std::vector<const Suppression*> live;
  for (const auto& rule : rules) {
    if (!expired(rule, snapshot.now)) {
      live.push_back(&rule);
      continue;
    }
    warnings.push_back(
        fmt::format("suppression {} expired after {}: it suppresses nothing; extend `until` or "
                    "remove the rule ({})",
                    rule.origin, rule.until, rule.reason));
  }
  std::vector<Finding> kept;
  for (auto& finding : report.findings) {
    auto rule = std::find_if(live.begin(), live.end(), [&](const Suppression* r) { return matches(*r, finding); });
    if (rule == live.end()) {
      kept.push_back(std::move(finding));
    } else {
      report.suppressed.push_back({std::move(finding), (*rule)->reason, (*rule)->until});
    }
  }
  report.findings = std::move(kept);
  // A check whose every finding was set apart has nothing left to act on: it passes.
  for (auto& run : report.checks) {
    if (run.status != CheckStatus::fail) continue;
    bool left = std::any_of(report.findings.begin(), report.findings.end(),
                            [&](const Finding& f) { return f.check == run.id; });
    if (!left) run.status = CheckStatus::pass;
  }
  report.verdicts = node_verdicts(snapshot, report.findings);
  return warnings;
}

}  // namespace gpuctl::ops::diagnose
