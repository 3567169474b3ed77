// The pure fold of `--via prometheus`: the series of every family query joined to the nodes asked
// for and to their GPUs by the exporter's labels, with each node's freshness deciding ok or stale.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/common/gpu_vocabulary.hpp"
#include "gpuctl/util/time.hpp"
#include "prometheus_source_internal.hpp"

namespace gpuctl::ops {

using prometheus_detail::GpuSeries;

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string short_name(std::string_view name) { return lower(name.substr(0, name.find('.'))); }

std::string label(const PromSample& sample, const std::string& name) {
  auto it = sample.labels.find(name);
  return it == sample.labels.end() ? std::string() : it->second;
}

// Which of the asked-for nodes a node label value names: the node of that name (any case), else
// the one node whose short name (before the first dot) is the value's short name, so a FQDN
// Hostname finds its node and a FQDN node name its short Hostname.
class NodeMatcher {
 public:
  explicit NodeMatcher(const std::vector<std::string>& names) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      by_name_.emplace(lower(names[i]), i);
      by_short_[short_name(names[i])].push_back(i);
    }
  }
  std::optional<std::size_t> find(std::string_view value) const {
    if (auto it = by_name_.find(lower(value)); it != by_name_.end()) return it->second;
    auto it = by_short_.find(short_name(value));
    if (it != by_short_.end() && it->second.size() == 1) return it->second.front();
    return std::nullopt;
  }

 private:
  std::map<std::string, std::size_t> by_name_;
  std::map<std::string, std::vector<std::size_t>> by_short_;
};

// The node a series names: the first label of the mapping that it carries, with its value.
std::optional<std::size_t> node_of(const PromSample& sample, const DcgmLabelMapping& mapping,
                                   const NodeMatcher& matcher) {
  for (const auto& name : mapping.node) {
    std::string value = label(sample, name);
    if (!value.empty()) return matcher.find(value);
  }
  return std::nullopt;
}

struct NodeSeries {
  std::map<std::string, GpuSeries> gpus;  // by UUID, else by "index N"
  std::optional<std::int64_t> newest_unix_s;
};

void add_sample(NodeSeries& node, const PromSample& sample, const DcgmLabelMapping& mapping) {
  const std::string uuid = label(sample, mapping.uuid);
  const std::string index_text = label(sample, mapping.gpu_index);
  if (uuid.empty() && index_text.empty()) return;  // a series of no GPU (the exporter's own)
  GpuSeries& gpu = node.gpus[uuid.empty() ? "index " + index_text : uuid];
  if (!index_text.empty() && !gpu.index) {
    int index = 0;
    auto [end, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
    if (ec == std::errc() && end == index_text.data() + index_text.size()) gpu.index = index;
  }
  auto keep = [](std::string& field, std::string value) {
    if (field.empty()) field = std::move(value);
  };
  keep(gpu.uuid, uuid);
  keep(gpu.model, label(sample, mapping.model));
  keep(gpu.pci_bus_id, label(sample, mapping.pci_bus_id));
  keep(gpu.driver_version, label(sample, mapping.driver_version));
  keep(gpu.cuda_driver_version, label(sample, "DCGM_FI_CUDA_DRIVER_VERSION"));
  const std::string metric = label(sample, std::string(kMetricLabel));
  if (metric == "DCGM_EXP_GPU_HEALTH_STATUS") {
    gpu.health.push_back({label(sample, "health_watch"), label(sample, "health_error_code"), sample.value});
    return;
  }
  // A MIG GPU's device fields come once per GPU instance (with GPU_I_ID): the GPU's own series,
  // when there is one, wins; otherwise the first instance's stands for the GPU.
  const bool mig = !label(sample, "GPU_I_ID").empty();
  auto [it, inserted] = gpu.metrics.try_emplace(metric, GpuSeries::Value{sample.value, mig});
  if (!inserted && it->second.from_mig_instance && !mig) it->second = GpuSeries::Value{sample.value, false};
}

// "12010" (DCGM_FI_CUDA_DRIVER_VERSION) as nvidia-smi prints it: "12.1".
gpu::Reported<std::string> cuda_version(const std::string& dcgm) {
  int v = 0;
  auto [end, ec] = std::from_chars(dcgm.data(), dcgm.data() + dcgm.size(), v);
  if (dcgm.empty() || ec != std::errc() || end != dcgm.data() + dcgm.size() || v < 1000) return {};
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

gpu::NodeGpuReport report_of(const NodeSeries& series, std::int64_t sampled_at) {
  gpu::NodeGpuReport report;
  report.status = gpu::ProbeStatus::ok;
  report.kind = gpu::NvsmiErrorKind::ok;
  report.enumeration = "dcgm-exporter";
  report.facts.kernel_log_source = "dcgm-exporter";
  for (const auto& [key, gpu_series] : series.gpus) {
    report.gpus.push_back(prometheus_detail::gpu_info_from(gpu_series));
    if (!report.driver_version && !gpu_series.driver_version.empty()) {
      report.driver_version = gpu_series.driver_version;
    }
    if (!report.cuda_version) report.cuda_version = cuda_version(gpu_series.cuda_driver_version);
    if (auto xid = prometheus_detail::xid_event_from(gpu_series, sampled_at)) {
      report.facts.kernel_events.push_back(std::move(*xid));
    }
  }
  std::stable_sort(report.gpus.begin(), report.gpus.end(),
                   [](const gpu::GpuInfo& a, const gpu::GpuInfo& b) { return a.index < b.index; });
  return report;
}

std::string looked_for(const PrometheusOptions& options, const PrometheusWindow& window) {
  std::string labels;
  for (const auto& name : options.labels.node) labels += (labels.empty() ? "" : ", ") + name;
  return fmt::format(
      "no dcgm-exporter series name this node in the last {} (node labels looked for, first present wins: {}; "
      "the node's name or its short name); is dcgm-exporter running on it and scraped, or does --prometheus-label "
      "node=LABEL name the label your relabelling writes?",
      util::human_duration(window.lookback), labels);
}

}  // namespace

std::vector<NodeProbe> fold_dcgm_readings(const std::vector<nlohmann::json>& nodes, const DcgmReadings& readings,
                                          const PrometheusOptions& options) {
  std::vector<std::string> names;
  for (const auto& node : nodes) names.push_back(kube::name_of(node));
  const NodeMatcher matcher(names);
  std::vector<NodeSeries> series(nodes.size());
  for (const auto& sample : readings.samples) {
    if (auto i = node_of(sample, options.labels, matcher)) add_sample(series[*i], sample, options.labels);
  }
  for (const auto& sample : readings.freshness) {
    auto i = node_of(sample, options.labels, matcher);
    if (!i || prometheus_detail::is_dcgm_blank(sample.value)) continue;
    auto t = static_cast<std::int64_t>(sample.value);
    series[*i].newest_unix_s = std::max(series[*i].newest_unix_s.value_or(t), t);
  }
  const PrometheusWindow window = prometheus_window(options);
  std::vector<NodeProbe> probes;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeProbe probe;
    probe.node = names[i];
    probe.via = "prometheus";  // to_string(Via::prometheus)
    probe.sampled_at_unix_s = series[i].newest_unix_s;
    if (series[i].gpus.empty()) {
      probe.outcome = "no_exporter";
      probe.message = looked_for(options, window);
      probe.sampled_at_unix_s.reset();
      probes.push_back(std::move(probe));
      continue;
    }
    const std::int64_t sampled_at = series[i].newest_unix_s.value_or(readings.now_unix_s);
    probe.report = report_of(series[i], sampled_at);
    probe.exit_code = 0;
    const std::int64_t age_s = readings.now_unix_s - sampled_at;
    if (!series[i].newest_unix_s || age_s > options.stale_after.count()) {
      probe.outcome = "stale";
      probe.message =
          series[i].newest_unix_s
              ? fmt::format(
                    "dcgm-exporter's newest sample is {} old (--prometheus-stale-after {}); "
                    "its last numbers are shown",
                    util::human_duration(std::chrono::seconds(age_s)), util::human_duration(options.stale_after))
              : "the time of dcgm-exporter's samples is unknown; its last numbers are shown";
    } else {
      probe.outcome = "ok";
    }
    probes.push_back(std::move(probe));
  }
  return probes;
}

}  // namespace gpuctl::ops
