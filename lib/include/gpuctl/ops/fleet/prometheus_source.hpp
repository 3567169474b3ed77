#pragma once
// `--via prometheus` (issue 21): the DCGM exporter's metrics read through the Prometheus HTTP API
// (GET /api/v1/query), one instant query per metric family whatever the number of nodes, joined
// to nodes and GPUs by the exporter's labels, into the same NodeGpuReport the probe script gives.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

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

// `transport` is the HTTP seam (make_curl_transport with options' TLS in production, a
// FakeTransport in tests).
std::unique_ptr<NodeSource> make_prometheus_source(PrometheusOptions options,
                                                   std::unique_ptr<kube::Transport> transport);

}  // namespace gpuctl::ops
