#pragma once
// Where the live GPU data of nodes comes from (issue 21): the fixed probe script over the system
// ssh, the same script in a short-lived pod pinned to each node and read from its log, or the
// DCGM exporter's metrics read from Prometheus. Every source gives one NodeProbe per node with
// the same outcomes and GPU model, so `gpus`, `nodes --live` and diagnose's node checks read them
// alike; NodeProbe::via says where each node's data came from.
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ssh/runner.hpp"
#include "gpuctl/ssh/ssh.hpp"

namespace gpuctl::ops {

enum class Via { ssh, pod, prometheus };
std::string_view to_string(Via via);
// "ssh", "pod" or "prometheus"; anything else is an invalid_argument naming the three.
Result<Via> parse_via(std::string_view text);

// Called as each node's data is in: (done, total).
using SourceProgress = std::function<void(std::size_t, std::size_t)>;

class NodeSource {
 public:
  virtual ~NodeSource() = default;
  virtual Via via() const = 0;
  // One NodeProbe per node, in the order of `nodes` (Node objects as the inventory reads them),
  // each with `via` set. A node that cannot be read is a NodeProbe with its outcome and a one-line
  // message, never an error of the whole read. An Error only when the source as a whole cannot
  // work (the probe namespace refused, Prometheus unreachable or refusing the query), with a
  // message that names the fix. When gpuctl is interrupted (util::cancelled()) nothing new
  // starts, nodes not read are outcome "interrupted", and whatever the source made is removed.
  virtual Result<std::vector<NodeProbe>> read(const std::vector<nlohmann::json>& nodes,
                                              const SourceProgress& progress) = 0;
};

// The probe script over the system ssh (probe_targets + probe_nodes); options.on_progress is
// replaced by read()'s progress.
std::unique_ptr<NodeSource> make_ssh_source(ssh::Runner& runner, ssh::AddressRule rule, ProbeOptions options);

}  // namespace gpuctl::ops
