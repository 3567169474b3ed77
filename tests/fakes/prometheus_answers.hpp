#pragma once
// Turns a dcgm-exporter exposition (Prometheus text format, as captured) into the answers
// Prometheus' /api/v1/query gives to gpuctl's queries, so unit tests replay real captures through
// the FakeTransport. It reads what the exporter writes (comments, `name{labels} value`, label
// values with \" and \\ escapes), not the whole text format (no timestamps, no exemplars).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fake_transport.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/fleet/prometheus_source.hpp"

namespace gpuctl::testing {

struct ExpositionSeries {
  std::string metric;
  std::map<std::string, std::string> labels;
  std::string value;  // as written
};

inline std::vector<ExpositionSeries> parse_exposition(std::string_view text) {
  std::vector<ExpositionSeries> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    ExpositionSeries s;
    std::size_t i = line.find_first_of("{ ");
    s.metric = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        while (line[i] == ' ' || line[i] == ',') ++i;
        std::size_t eq = line.find('=', i);
        std::string name(line.substr(i, eq - i));
        i = eq + 2;  // past ="
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          value.push_back(line[i++]);
        }
        ++i;  // past the closing quote
        s.labels[name] = value;
        while (i < line.size() && line[i] == ',') ++i;
        while (i < line.size() && line[i] == ' ') ++i;
      }
      ++i;  // past }
    }
    std::string_view rest = line.substr(std::min(i, line.size()));
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    s.value = std::string(rest.substr(0, rest.find(' ')));
    out.push_back(std::move(s));
  }
  return out;
}

inline std::string vector_answer(const nlohmann::json& result) {
  return nlohmann::json{{"status", "success"}, {"data", {{"resultType", "vector"}, {"result", result}}}}.dump();
}

// The query_contains that tells one family's query from the others' (and from the freshness query,
// which names every metric too).
inline std::string family_query_key(const ops::DcgmFamily& family) {
  return kube::percent_encode(fmt::format("last_over_time({}[", family.metrics.front()));
}
inline std::string freshness_query_key() { return "max_over_time"; }

// What Prometheus answers gpuctl's queries when it has scraped `series`, each node's samples
// `age_s` old at `now`: one answer per family (the metric as kMetricLabel and as __name__, as
// label_replace(M or ...) leaves a live exporter's series) and the freshness answer (grouped by
// the mapping's node labels).
inline void serve_dcgm(FakeTransport& transport, const std::vector<ExpositionSeries>& series, std::int64_t now,
                       const std::map<std::string, std::int64_t>& age_s_by_node = {},
                       const ops::DcgmLabelMapping& mapping = {}) {
  for (const auto& family : ops::dcgm_families()) {
    nlohmann::json result = nlohmann::json::array();
    for (const auto& s : series) {
      if (std::find(family.metrics.begin(), family.metrics.end(), s.metric) == family.metrics.end()) continue;
      nlohmann::json metric = s.labels;
      metric[std::string(ops::kMetricLabel)] = s.metric;
      metric["__name__"] = s.metric;
      result.push_back({{"metric", metric}, {"value", {now, s.value}}});
    }
    transport.on("GET", "/api/v1/query", json_answer(200, vector_answer(result)), family_query_key(family));
  }
  std::map<std::map<std::string, std::string>, std::int64_t> newest;
  for (const auto& s : series) {
    std::map<std::string, std::string> key;
    for (const auto& name : mapping.node) {
      if (auto it = s.labels.find(name); it != s.labels.end()) key[name] = it->second;
    }
    std::int64_t age = 0;
    for (const auto& [name, value] : key) {
      if (auto it = age_s_by_node.find(value); it != age_s_by_node.end()) age = it->second;
    }
    newest[key] = now - age;
  }
  nlohmann::json fresh = nlohmann::json::array();
  for (const auto& [labels, t] : newest) fresh.push_back({{"metric", labels}, {"value", {now, std::to_string(t)}}});
  transport.on("GET", "/api/v1/query", json_answer(200, vector_answer(fresh)), freshness_query_key());
}

// The series with every node label's value `from` replaced by `to` (a capture's Hostname made the
// test's node name, as the e2e exposition server does).
inline std::vector<ExpositionSeries> renamed(std::vector<ExpositionSeries> series, const std::string& label,
                                             const std::string& from, const std::string& to) {
  for (auto& s : series) {
    if (auto it = s.labels.find(label); it != s.labels.end() && it->second == from) it->second = to;
  }
  return series;
}

}  // namespace gpuctl::testing
