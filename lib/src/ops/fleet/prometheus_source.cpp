// `--via prometheus` as a NodeSource: the family queries and the freshness query, all evaluated at
// one instant, then the pure fold. The number of requests is fixed (one per family, plus one),
// whatever the number of nodes.
#include <chrono>

#include <iterator>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/util/cancel.hpp"
#include "prometheus_source_internal.hpp"

namespace gpuctl::ops {

namespace {

class PrometheusSource : public NodeSource {
 public:
  PrometheusSource(PrometheusOptions options, std::unique_ptr<kube::Transport> transport)
      : options_(std::move(options)), transport_(std::move(transport)) {}

  Via via() const override { return Via::prometheus; }

  Result<std::vector<NodeProbe>> read(const std::vector<nlohmann::json>& nodes,
                                      const SourceProgress& progress) override {
    const auto started = std::chrono::steady_clock::now();
    DcgmReadings readings;
    // One evaluation time for every query, so the families and the freshness agree.
    const auto now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
    readings.now_unix_s = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    const PrometheusWindow window = prometheus_window(options_);
    for (const auto& family : dcgm_families()) {
      if (util::cancelled()) return interrupted(nodes);
      auto samples = prometheus_query(*transport_, options_, dcgm_family_query(family, window, options_.labels), now);
      if (!samples) return std::unexpected(samples.error());
      std::move(samples->begin(), samples->end(), std::back_inserter(readings.samples));
    }
    if (util::cancelled()) return interrupted(nodes);
    auto freshness = prometheus_query(*transport_, options_, dcgm_freshness_query(options_.labels, window), now);
    if (!freshness) return std::unexpected(freshness.error());
    readings.freshness = std::move(*freshness);

    std::vector<NodeProbe> probes = fold_dcgm_readings(nodes, readings, options_);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    for (auto& probe : probes) probe.duration = took;
    if (progress) progress(probes.size(), probes.size());
    return probes;
  }

 private:
  static std::vector<NodeProbe> interrupted(const std::vector<nlohmann::json>& nodes) {
    std::vector<NodeProbe> probes;
    for (const auto& node : nodes) {
      NodeProbe probe;
      probe.node = kube::name_of(node);
      probe.via = "prometheus";
      probe.outcome = "interrupted";
      probe.message = "interrupted before Prometheus was read";
      probes.push_back(std::move(probe));
    }
    return probes;
  }

  PrometheusOptions options_;
  std::unique_ptr<kube::Transport> transport_;
};

}  // namespace

std::unique_ptr<NodeSource> make_prometheus_source(PrometheusOptions options,
                                                   std::unique_ptr<kube::Transport> transport) {
  return std::make_unique<PrometheusSource>(std::move(options), std::move(transport));
}

}  // namespace gpuctl::ops
