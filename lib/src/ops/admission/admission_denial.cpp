#include "gpuctl/ops/admission/admission_denial.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace gpuctl::ops {
namespace {

constexpr std::string_view kExceeded = "exceeded quota: ";
constexpr std::string_view kUnknown = "status unknown for quota: ";
constexpr std::string_view kFailedQuota = "failed quota: ";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The text from `from` up to (not including) `marker`, or nullopt when the marker is absent.
std::optional<std::string_view> until(std::string_view text, std::size_t from, std::string_view marker,
                                      std::size_t& next) {
  auto at = text.find(marker, from);
  if (at == std::string_view::npos) return std::nullopt;
  next = at + marker.size();
  return text.substr(from, at - from);
}

// The last list runs to the first blank; quotes or a full stop a wrapper added are not ours.
std::string_view trailing_token(std::string_view text, std::size_t from) {
  std::size_t end = from;
  // Quotes and backslashes end it too: the message may sit inside quoted or escaped text (a raw
  // Status body, a log line).
  while (end < text.size() && !is_space(text[end]) && text[end] != '"' && text[end] != '\\') ++end;
  auto token = text.substr(from, end - from);
  while (!token.empty() &&
         (token.back() == '"' || token.back() == '\'' || token.back() == '.' || token.back() == ')')) {
    token.remove_suffix(1);
  }
  return token;
}

// "requests.cpu=20,requests.memory=60Gi" -> {key: value}
std::map<std::string, std::string> parse_pairs(std::string_view text) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    auto part = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto eq = part.find('=');
    if (eq != std::string_view::npos && eq > 0)
      out.emplace(std::string(part.substr(0, eq)), std::string(part.substr(eq + 1)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto comma = text.find(',', start);
    auto part = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<AdmissionDenial> parse_exceeded(std::string_view m, std::size_t at) {
  std::size_t next = 0;
  auto name = until(m, at + kExceeded.size(), ", requested: ", next);
  if (!name) return std::nullopt;
  auto requested = until(m, next, ", used: ", next);
  if (!requested) return std::nullopt;
  auto used = until(m, next, ", limited: ", next);
  if (!used) return std::nullopt;
  auto limited = trailing_token(m, next);
  AdmissionDenial d;
  d.kind = AdmissionDenialKind::quota_exceeded;
  d.quota = std::string(*name);
  auto req = parse_pairs(*requested);
  auto use = parse_pairs(*used);
  for (auto& [key, limit] : parse_pairs(limited)) {
    QuotaDenialItem item{key, req.count(key) ? req[key] : "", use.count(key) ? use[key] : "", limit};
    d.items.push_back(std::move(item));
  }
  return d;
}

std::optional<AdmissionDenial> parse_unknown(std::string_view m, std::size_t at) {
  std::size_t next = 0;
  auto name = until(m, at + kUnknown.size(), ", resources: ", next);
  if (!name) return std::nullopt;
  AdmissionDenial d;
  d.kind = AdmissionDenialKind::quota_status_unknown;
  d.quota = std::string(*name);
  d.resources = split_commas(trailing_token(m, next));
  return d;
}

std::optional<AdmissionDenial> parse_must_specify(std::string_view m, std::size_t at) {
  std::size_t next = 0;
  auto name = until(m, at + kFailedQuota.size(), ": must specify ", next);
  if (!name) return std::nullopt;
  AdmissionDenial d;
  d.kind = AdmissionDenialKind::quota_must_specify;
  d.quota = std::string(*name);
  d.resources = split_commas(trailing_token(m, next));
  return d;
}

// LimitRanger: "maximum nvidia.com/gpu usage per Container is 4, but limit is 8" and its
// minimum / ratio / "No limit is specified" variants. Kept as the plugin's own sentence.
std::optional<AdmissionDenial> parse_limit_range(std::string_view m) {
  for (std::string_view lead : {"maximum ", "minimum "}) {
    auto at = m.find(lead);
    while (at != std::string_view::npos) {
      auto per = m.find(" usage per ", at);
      if (per != std::string_view::npos &&
          m.substr(at + lead.size(), per - at - lead.size()).find(' ') == std::string_view::npos) {
        auto end = m.find_first_of("\n", at);
        auto sentence = m.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
        while (!sentence.empty() && (is_space(sentence.back()) || sentence.back() == '"')) sentence.remove_suffix(1);
        AdmissionDenial d;
        d.kind = AdmissionDenialKind::limit_range;
        d.detail = std::string(sentence);
        return d;
      }
      at = m.find(lead, at + 1);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<AdmissionDenial> parse_admission_denial(std::string_view message) {
  if (auto at = message.find(kExceeded); at != std::string_view::npos) {
    if (auto d = parse_exceeded(message, at)) return d;
  }
  if (auto at = message.find(kUnknown); at != std::string_view::npos) {
    if (auto d = parse_unknown(message, at)) return d;
  }
  if (auto at = message.find(kFailedQuota); at != std::string_view::npos) {
    if (auto d = parse_must_specify(message, at)) return d;
  }
  return parse_limit_range(message);
}

std::string describe(const AdmissionDenial& d) {
  switch (d.kind) {
    case AdmissionDenialKind::quota_exceeded: {
      std::vector<std::string> sentences;
      for (const auto& i : d.items) {
        sentences.push_back(fmt::format("{} {} allowed, {} in use, {} requested", i.limited, i.resource,
                                        i.used.empty() ? "0" : i.used, i.requested.empty() ? "?" : i.requested));
      }
      return fmt::format("quota \"{}\" is full: {}", d.quota, fmt::join(sentences, "; "));
    }
    case AdmissionDenialKind::quota_status_unknown:
      return fmt::format(
          "quota \"{}\" has not been counted yet for {} (kube-controller-manager updates it; retry shortly)", d.quota,
          fmt::join(d.resources, ", "));
    case AdmissionDenialKind::quota_must_specify:
      return fmt::format("quota \"{}\" requires every container to set {}", d.quota, fmt::join(d.resources, ", "));
    case AdmissionDenialKind::limit_range: return "a LimitRange refuses it: " + d.detail;
  }
  return {};
}

}  // namespace gpuctl::ops
