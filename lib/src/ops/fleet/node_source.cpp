// The ssh node source, and the names of the three sources (--via).
#include "gpuctl/ops/fleet/node_source.hpp"

#include <fmt/format.h>

namespace gpuctl::ops {

std::string_view to_string(Via via) {
  switch (via) {
    case Via::ssh: return "ssh";
    case Via::pod: return "pod";
    case Via::prometheus: return "prometheus";
  }
  return "ssh";
}

Result<Via> parse_via(std::string_view text) {
  for (Via v : {Via::ssh, Via::pod, Via::prometheus}) {
    if (text == to_string(v)) return v;
  }
  return fail(Errc::invalid_argument,
              fmt::format("--via: \"{}\" is not a node source (use ssh, pod or prometheus)", text));
}

namespace {

class SshSource final : public NodeSource {
 public:
  SshSource(ssh::Runner& runner, ssh::AddressRule rule, ProbeOptions options)
      : runner_(runner), rule_(std::move(rule)), options_(std::move(options)) {}

  Via via() const override { return Via::ssh; }

  Result<std::vector<NodeProbe>> read(const std::vector<nlohmann::json>& nodes,
                                      const SourceProgress& progress) override {
    ProbeOptions options = options_;
    options.on_progress = progress;
    return probe_nodes(runner_, probe_targets(nodes, rule_), options);
  }

 private:
  ssh::Runner& runner_;
  ssh::AddressRule rule_;
  ProbeOptions options_;
};

}  // namespace

std::unique_ptr<NodeSource> make_ssh_source(ssh::Runner& runner, ssh::AddressRule rule, ProbeOptions options) {
  return std::make_unique<SshSource>(runner, std::move(rule), std::move(options));
}

}  // namespace gpuctl::ops
