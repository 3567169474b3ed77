// The scheduler's FailedScheduling verdict read back into counts, and said in plain words.
#include <cctype>
#include <charconv>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/util/scan.hpp"
#include "gpuctl/util/strings.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops {
namespace {

using util::contains;

constexpr std::string_view kAvailable = " nodes are available: ";
constexpr std::string_view kPredicates = "No nodes are available that match all of the following predicates:";
constexpr std::string_view kPreemption = ". preemption: ";

using util::is_digit;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Trailing full stops ("." and old servers' ".."), quotes and blanks a wrapper added.
std::string_view trim_end_marks(std::string_view s) {
  s = trim(s);
  while (!s.empty() && (s.back() == '.' || s.back() == '"' || s.back() == '\'')) s.remove_suffix(1);
  return trim(s);
}

// A count of nodes: digits only (from_chars alone would take "-6" from "0/-6 nodes").
std::optional<int> to_int(std::string_view s) {
  if (s.empty() || !is_digit(s.front())) return std::nullopt;
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Entries are "<count> <reason>" joined by ", "; a reason may itself hold ", " (the pre-1.25
// "had taint {k: }, that the pod didn't tolerate"), so only ", <digit>" starts a new entry.
std::vector<SchedulingReason> split_entries(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i + 2 < text.size(); ++i) {
    if (text[i] == ',' && text[i + 1] == ' ' && is_digit(text[i + 2])) {
      parts.push_back(text.substr(start, i - start));
      start = i + 2;
    }
  }
  parts.push_back(text.substr(start));
  std::vector<SchedulingReason> out;
  for (auto part : parts) {
    part = trim(part);
    if (part.empty()) continue;
    SchedulingReason r;
    std::size_t digits = 0;
    while (digits < part.size() && is_digit(part[digits])) ++digits;
    if (digits > 0 && digits < part.size() && part[digits] == ' ') {
      r.nodes = to_int(part.substr(0, digits)).value_or(0);
      part.remove_prefix(digits + 1);
    }
    r.reason = std::string(trim(part));
    out.push_back(std::move(r));
  }
  return out;
}

// The pre-1.8 format: "Insufficient cpu (9), MatchNodeSelector (18)."
std::vector<SchedulingReason> split_predicates(std::string_view text) {
  std::vector<SchedulingReason> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto close = text.find(')', start);
    if (close == std::string_view::npos) break;
    auto entry = trim(text.substr(start, close + 1 - start));
    if (!entry.empty() && entry.front() == ',') entry = trim(entry.substr(1));
    auto open = entry.rfind(" (");
    if (open != std::string_view::npos) {
      SchedulingReason r;
      r.reason = std::string(trim(entry.substr(0, open)));
      r.nodes = to_int(entry.substr(open + 2, entry.size() - open - 3)).value_or(0);
      out.push_back(std::move(r));
    }
    start = close + 1;
  }
  return out;
}

// The {key: value} of a taint entry: "key" or "key=value".
std::string taint_of(std::string_view reason) {
  auto open = reason.find('{');
  auto close = reason.find('}', open == std::string_view::npos ? 0 : open);
  if (open == std::string_view::npos || close == std::string_view::npos) return {};
  auto inner = reason.substr(open + 1, close - open - 1);
  auto colon = inner.find(':');
  auto key = trim(inner.substr(0, colon));
  auto value = colon == std::string_view::npos ? std::string_view{} : trim(inner.substr(colon + 1));
  return value.empty() ? std::string(key) : fmt::format("{}={}", key, value);
}

// "has ..."/"have ..." for the known reasons; nullopt for the ones gpuctl does not know.
std::optional<std::string> verb_phrase(std::string_view reason, bool one) {
  const char* has = one ? "has" : "have";
  const char* is = one ? "is" : "are";
  const char* does = one ? "does" : "do";
  if (reason.starts_with("Insufficient ")) {
    return fmt::format("{} too few free {}", has, trim(reason.substr(13)));
  }
  if (contains(reason, "untolerated taint(s)") || contains(reason, "had taints that the pod didn't tolerate")) {
    return fmt::format("{} taints it does not tolerate", has);
  }
  if (contains(reason, "untolerated taint") || contains(reason, "that the pod didn't tolerate")) {
    std::string taint = taint_of(reason);
    return taint.empty() ? fmt::format("{} a taint it does not tolerate", has)
                         : fmt::format("{} a taint it does not tolerate ({})", has, taint);
  }
  if (contains(reason, "node affinity/selector") || contains(reason, "didn't match node selector") ||
      reason == "MatchNodeSelector" || contains(reason, "didn't match Pod's node affinity")) {
    return fmt::format("{} not match its node selector or affinity", does);
  }
  if (contains(reason, "were unschedulable") || contains(reason, "unschedulable")) {
    return fmt::format("{} cordoned (unschedulable)", is);
  }
  if (contains(reason, "pod anti-affinity")) return fmt::format("{} not satisfy its pod anti-affinity", does);
  if (contains(reason, "pod affinity")) return fmt::format("{} not satisfy its pod affinity", does);
  if (reason == "Too many pods") return fmt::format("{} no room for more pods", has);
  if (contains(reason, "volume node affinity conflict")) return fmt::format("{} no access to its volumes", has);
  if (contains(reason, "free ports")) return fmt::format("{} no free host port it asks for", has);
  if (contains(reason, "unbound immediate PersistentVolumeClaims")) {
    return std::string("its PersistentVolumeClaims are not bound");
  }
  return std::nullopt;
}

}  // namespace

std::optional<SchedulingVerdict> parse_scheduling_message(std::string_view message) {
  SchedulingVerdict v;
  auto at = message.find(kAvailable);
  if (at != std::string_view::npos) {
    // "<available>/<total>" right before the marker.
    auto slash = message.rfind('/', at);
    if (slash == std::string_view::npos || slash + 1 > at) return std::nullopt;
    std::size_t begin = slash;
    while (begin > 0 && is_digit(message[begin - 1])) --begin;
    auto available = to_int(message.substr(begin, slash - begin));
    auto total = to_int(message.substr(slash + 1, at - slash - 1));
    if (!available || !total) return std::nullopt;
    v.available = *available;
    v.total = *total;
    auto rest = message.substr(at + kAvailable.size());
    rest = rest.substr(0, rest.find('\n'));
    // The filter verdict ends at the first ". " before "preemption: "; 1.36 puts more between
    // them ("... nvidia.com/gpu. no new claims to deallocate, preemption: 0/248 nodes ...").
    auto pre = rest.find(kPreemption.substr(2));
    if (pre != std::string_view::npos) {
      v.preemption = std::string(trim_end_marks(rest.substr(pre + kPreemption.size() - 2)));
      auto sentence_end = rest.substr(0, pre).find(". ");
      rest = rest.substr(0, sentence_end == std::string_view::npos ? pre : sentence_end);
    }
    v.reasons = split_entries(trim_end_marks(rest));
    return v;
  }
  at = message.find(kPredicates);
  if (at != std::string_view::npos) {
    auto rest = message.substr(at + kPredicates.size());
    while (!rest.empty() && rest.front() == ':') rest.remove_prefix(1);
    rest = rest.substr(0, rest.find('\n'));
    v.reasons = split_predicates(trim_end_marks(rest));
    return v;
  }
  return std::nullopt;
}

namespace {

// The verdict in plain words; `beside` gives what to put in parentheses after an entry ("" for nothing).
std::string explain(const SchedulingVerdict& verdict,
                    const std::function<std::string(const SchedulingReason&)>& beside) {
  std::vector<std::string> parts;
  for (const auto& r : verdict.reasons) {
    auto phrase = verb_phrase(r.reason, r.nodes == 1);
    std::string part;
    if (r.nodes == 0) {
      part = phrase ? *phrase : r.reason;
    } else if (phrase) {
      part = fmt::format("{} {}", r.nodes, *phrase);
    } else {
      part = fmt::format("{} {}: {}", r.nodes, r.nodes == 1 ? "node" : "nodes", r.reason);
    }
    if (beside) {
      if (std::string more = beside(r); !more.empty()) part += " (" + more + ")";
    }
    parts.push_back(std::move(part));
  }
  std::string head;
  if (verdict.available == 0) {
    head = verdict.total > 0
               ? fmt::format("no node can take it now ({} {})", verdict.total, verdict.total == 1 ? "node" : "nodes")
               : std::string("no node can take it now");
  } else {
    head = fmt::format("only {} of {} nodes could take it", verdict.available, verdict.total);
  }
  std::string text = parts.empty() ? head : fmt::format("{}: {}", head, fmt::join(parts, ", "));
  // "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, ..."
  if (verdict.preemption.starts_with("0/")) text += "; preempting lower-priority pods would not help";
  return text;
}

}  // namespace

namespace job_status_detail {

VerdictTopic verdict_topic(std::string_view reason) {
  if (contains(reason, "untolerated taint") || contains(reason, "that the pod didn't tolerate")) {
    return VerdictTopic::taint;
  }
  if (contains(reason, "node affinity/selector") || contains(reason, "didn't match node selector") ||
      reason == "MatchNodeSelector" || contains(reason, "didn't match Pod's node affinity")) {
    return VerdictTopic::selector;
  }
  // "pod has unbound immediate PersistentVolumeClaims", "persistentvolumeclaim \"data\" not found",
  // "didn't find available persistent volumes to bind"; then DRA's "cannot allocate all claims",
  // "resourceclaim not found".
  std::string lower;
  for (char c : reason) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (contains(lower, "persistentvolumeclaim") || contains(lower, "persistent volumes")) {
    return VerdictTopic::volume_claim;
  }
  if (contains(lower, "claim")) return VerdictTopic::resource_claim;
  return VerdictTopic::other;
}

}  // namespace job_status_detail

std::string explain_scheduling(const SchedulingVerdict& verdict) { return explain(verdict, nullptr); }

std::string explain_scheduling(const SchedulingVerdict& verdict, const PendingDetail& detail) {
  using namespace job_status_detail;
  std::set<VerdictTopic> mentioned;
  std::string text = explain(verdict, [&](const SchedulingReason& r) {
    VerdictTopic topic = verdict_topic(r.reason);
    // Said once, beside the first entry about it: the scheduler may name one taint per entry.
    if (topic != VerdictTopic::taint && !mentioned.insert(topic).second) return std::string();
    mentioned.insert(topic);
    return detail_words(detail, topic, topic == VerdictTopic::taint ? taint_of(r.reason) : std::string());
  });
  // What no entry is about is said after them: when every node has a taint it does not tolerate,
  // the scheduler never reaches the selector that would match none of them either.
  for (VerdictTopic topic :
       {VerdictTopic::taint, VerdictTopic::selector, VerdictTopic::resource_claim, VerdictTopic::volume_claim}) {
    if (mentioned.contains(topic)) continue;
    if (std::string words = detail_words(detail, topic); !words.empty()) text += "; " + words;
  }
  return text;
}

}  // namespace gpuctl::ops
