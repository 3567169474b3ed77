#pragma once
// `--via prometheus` (issue 21): the DCGM exporter's metrics read through the Prometheus HTTP API
// (GET /api/v1/query), one instant query per metric family whatever the number of nodes, joined
// to nodes and GPUs by the exporter's labels, into the same NodeGpuReport the probe script gives.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/transport.hpp"
#include "gpuctl/ops/fleet/node_source.hpp"

namespace gpuctl::ops {

// Which series labels name a metric's node and GPU. dcgm-exporter writes Hostname (the pod's or
// the host's name), gpu (index), UUID, modelName, pci_bus_id, DCGM_FI_DRIVER_VERSION; with
// kubernetes relabelling, a `node` label. Relabelled setups set their own.
struct DcgmLabelMapping {
  // Tried in order; the first label present on a series names its node.
  std::vector<std::string> node = {"node", "Hostname", "kubernetes_node", "nodename"};
  std::string gpu_index = "gpu";
  std::string uuid = "UUID";
  std::string model = "modelName";
  std::string pci_bus_id = "pci_bus_id";
  std::string driver_version = "DCGM_FI_DRIVER_VERSION";
};

struct PrometheusOptions {
  std::string url;  // the server's base URL, e.g. http://prometheus.monitoring:9090
  // Authentication, as Prometheus HTTP API clients take it: a bearer token, or basic auth.
  std::string bearer_token;
  std::string basic_user;
  std::string basic_password;
  // TLS: the CA (PEM text; empty: the system store), a client certificate and key (PEM text).
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  bool insecure_skip_tls_verify = false;
  DcgmLabelMapping labels;
  // A node whose newest sample is older than this is outcome "stale".
  std::chrono::seconds stale_after{120};
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};  // per query
};

// The settings of the transport that reaches Prometheus (kube::make_curl_transport in
// production): the options' CA and TLS verification, the per-query timeout.
kube::TransportSettings prometheus_transport_settings(const PrometheusOptions& options);

// --- The queries (prometheus_source_queries.cpp) ---

// What a query reads: the metric families, each read with one instant query whatever the number
// of nodes; a family with no series leaves its fields unreported, it is no error.
struct DcgmFamily {
  std::string_view name;  // "utilization", "memory", ...
  std::vector<std::string_view> metrics;
};
const std::vector<DcgmFamily>& dcgm_families();

// The label each family query adds to its series, saying which metric it is (functions such as
// last_over_time drop __name__).
inline constexpr std::string_view kMetricLabel = "gpuctl_metric";

// How far back the queries look. A family query takes each series' last value within `lookback`
// (so a node whose exporter stopped still shows its last numbers, as stale); the freshness query
// finds each node's newest sample time on a subquery grid of `step`.
struct PrometheusWindow {
  std::chrono::seconds lookback{600};
  std::chrono::seconds step{15};
};
// lookback: max(10m, 4 x stale_after); step: stale_after / 8, within 1s..1m.
PrometheusWindow prometheus_window(const PrometheusOptions& options);

// label_replace(M or (last_over_time(M[lookback]) unless on(<node labels>) M), "gpuctl_metric",
// "M", "", "") or ... for each M: a live node's current series only, a stopped exporter's last ones.
std::string dcgm_family_query(const DcgmFamily& family, const PrometheusWindow& window, const DcgmLabelMapping& labels);
// max by (<node labels>) ((timestamp(M1) or ...) or max_over_time((timestamp(M1) or ...)[lookback:step])):
// each node's newest sample time (unix seconds), one query for the whole fleet.
std::string dcgm_freshness_query(const DcgmLabelMapping& labels, const PrometheusWindow& window);

// --- The HTTP API client (prometheus_source_api.cpp) ---

// One series of an instant vector.
struct PromSample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Reads the body of GET /api/v1/query into its series; a body that is not the API's JSON, a
// status:"error" body or a result that is not an instant vector is an Error naming `url`.
Result<std::vector<PromSample>> parse_prometheus_vector(std::string_view body, std::string_view url);

// GET {url}/api/v1/query?query=...&time=... with the options' credentials. Errors name the fix:
// unreachable (--prometheus-url), 401/403 (the auth flags), a refused query (Prometheus' errorType
// and error), an answer that is not Prometheus' (wrong URL?). The evaluation time in milliseconds:
// a time cut to the second could precede a scrape that has already landed.
Result<std::vector<PromSample>> prometheus_query(kube::Transport& transport, const PrometheusOptions& options,
                                                 std::string_view promql, std::chrono::milliseconds time_unix);

// --- The fold (prometheus_source_fold*.cpp), pure ---

struct DcgmReadings {
  std::vector<PromSample> samples;    // every family query's series (each with kMetricLabel)
  std::vector<PromSample> freshness;  // the freshness query's: node labels -> newest sample time
  std::int64_t now_unix_s = 0;        // the queries' evaluation time
};

// One NodeProbe per node (Node objects), in order: its GPUs from the series whose node label
// (the first of options.labels.node present) names it (case-insensitively, or by the short name
// before the first dot on either side), via "prometheus", outcome ok, stale or no_exporter.
std::vector<NodeProbe> fold_dcgm_readings(const std::vector<nlohmann::json>& nodes, const DcgmReadings& readings,
                                          const PrometheusOptions& options);

// `transport` is the HTTP seam (make_curl_transport with options' TLS in production, a
// FakeTransport in tests).
std::unique_ptr<NodeSource> make_prometheus_source(PrometheusOptions options,
                                                   std::unique_ptr<kube::Transport> transport);

}  // namespace gpuctl::ops
