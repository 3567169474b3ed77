#pragma once
// `gpuctl diagnose --suppress FILE`: findings an admin has chosen not to act on (a node waiting
// for an RMA, a known-bad pool), written as a YAML list of rules. A suppressed finding is not
// lost: it is counted and listed apart (Report::suppressed), never decides the exit code, and a
// rule past its `until` date suppresses nothing and is reported, so a workaround cannot outlive
// its reason unnoticed.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/diagnose/diagnose.hpp"

namespace gpuctl::ops::diagnose {

// One rule. A finding matches when its check matches `check` and, of `object` and `node`, every
// one that is set matches (at least one is). Patterns are globs: `*` any run of characters ('/'
// included), `?` one character; everything else is literal and case-sensitive.
struct Suppression {
  std::string check;   // a check id, or a glob over check ids that matches at least one
  std::string object;  // over the finding's object as the table prints it: Kind/name for a
                       // cluster-scoped object (Node/gpu-7), Kind/namespace/name otherwise
                       // (Pod/ml/train-0); "" when the rule names only a node
  std::string node;    // over the finding's node name; "" when the rule names only an object
  std::string reason;  // why, for whoever reads the report; required
  std::string until;   // YYYY-MM-DD: the rule holds through that day (UTC); "" for no end
  std::string origin;  // "FILE: entry N (line L)", so a warning names the rule
};

// `*` and `?` globbing, iterative, O(pattern x text) at worst.
bool glob_match(std::string_view pattern, std::string_view text);

// The object as the table, JUnit and suppressions name it: Kind/name or Kind/namespace/name.
std::string object_path(const ObjectRef& object);

// Reads the rules from `yaml_text`: a list of maps with the keys check, object, node, reason and
// until. An empty document is no rules. Every mistake is one Errc::invalid_argument line naming
// `source_name`, the entry and its line, and the fix (an unknown key, a check no check matches,
// a date that is not YYYY-MM-DD, a rule naming neither object nor node, an empty reason, ...).
Result<std::vector<Suppression>> parse_suppressions(std::string_view yaml_text, std::string_view source_name);

// parse_suppressions over a file of at most kMaxSuppressionFileBytes; a file that cannot be read
// is Errc::io naming it.
inline constexpr std::size_t kMaxSuppressionFileBytes = 1 << 20;
Result<std::vector<Suppression>> read_suppressions(const std::string& path);

// Moves every finding a live rule matches (the first such rule gives the reason) from
// report.findings to report.suppressed, keeping their order; a check left with no finding
// passes, and the node verdicts are judged again from what remains, so the exit code, JUnit and
// Prometheus all say "nothing left to act on". A rule whose `until` is before the day of
// `snapshot.now` (UTC) suppresses nothing: one warning per such rule is returned.
std::vector<std::string> apply_suppressions(Report& report, const Snapshot& snapshot,
                                            const std::vector<Suppression>& rules);

}  // namespace gpuctl::ops::diagnose
