#include "node_source_flags.hpp"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "app.hpp"
#include "gpuctl/build_info.hpp"

namespace gpuctl::cli {

void add_node_source_flags(CLI::App& cmd, HelpData& help, NodeSourceFlags& f) {
  with_choices(cmd.add_option("--via", f.via,
                              "Where the nodes' GPU data comes from: ssh (the probe over the system ssh), pod (the "
                              "same probe in a short-lived pod per node), prometheus (the DCGM exporter's metrics); "
                              "default: $GPUCTL_VIA, else ssh"),
               help, {"ssh", "pod", "prometheus"})
      ->group("Node data options");
  add_ssh_flags(cmd, help, f.ssh);
  add_probe_pod_flags(cmd, help, f.pod);
  add_prometheus_flags(cmd, help, f.prometheus);
}

Result<NodeSourceRequest> validate_node_source_flags(const NodeSourceFlags& flags) {
  return validate_node_source_flags(flags, [](const char* name) -> const char* { return std::getenv(name); });
}

Result<NodeSourceRequest> validate_node_source_flags(const NodeSourceFlags& flags, const EnvLookup& env) {
  NodeSourceRequest r;
  std::string via = flags.via;
  if (via.empty()) {
    const char* v = env("GPUCTL_VIA");
    if (v != nullptr && *v != '\0') {
      auto parsed = ops::parse_via(v);
      if (!parsed) {
        return fail(Errc::invalid_argument,
                    fmt::format("GPUCTL_VIA=\"{}\": not a node source (use ssh, pod or prometheus, or unset it)", v));
      }
      via = v;
    }
  }
  if (!via.empty()) {
    GPUCTL_TRY_ASSIGN(r.via, ops::parse_via(via));
  }
  GPUCTL_TRY_ASSIGN(r.ssh, validate_ssh_flags(flags.ssh, env));
  if (r.via == ops::Via::pod) {
    GPUCTL_TRY_ASSIGN(r.pod, validate_probe_pod_flags(flags.pod, flags.ssh.fanout, env));
  }
  if (r.via == ops::Via::prometheus) {
    GPUCTL_TRY_ASSIGN(r.prometheus, validate_prometheus_flags(flags.prometheus, env));
    r.prometheus_files = flags.prometheus;
    const char* token = env("GPUCTL_PROMETHEUS_BEARER_TOKEN_FILE");
    if (r.prometheus_files.bearer_token_file.empty() && token != nullptr) r.prometheus_files.bearer_token_file = token;
  }
  return r;
}

namespace {

// Who made a probe pod, for the admin who finds one left behind: "user@host pid=N".
std::string probe_owner() {
  const char* user = std::getenv("USER");
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return fmt::format("{}@{} pid={}", user != nullptr && *user != '\0' ? user : "unknown",
                     host[0] != '\0' ? host : "unknown", getpid());
}

// The ssh source with its runner: the runner must outlive the source, so both are held here.
struct OwningSshSource final : ops::NodeSource {
  std::unique_ptr<ssh::Runner> runner;
  std::unique_ptr<ops::NodeSource> inner;
  ops::Via via() const override { return inner->via(); }
  Result<std::vector<ops::NodeProbe>> read(const std::vector<nlohmann::json>& nodes,
                                           const ops::SourceProgress& progress) override {
    return inner->read(nodes, progress);
  }
};

Result<std::unique_ptr<ops::NodeSource>> make_prometheus_node_source(const NodeSourceRequest& request,
                                                                     AppContext& ctx) {
  auto no_env = [](const char*) -> const char* { return nullptr; };
  GPUCTL_TRY_ASSIGN(ops::PrometheusOptions options,
                    read_prometheus_credentials(request.prometheus, request.prometheus_files, no_env));
  kube::TransportSettings settings = ops::prometheus_transport_settings(options);
  settings.user_agent = fmt::format("gpuctl/{} ({})", build_version(), build_commit());
  auto transport = ctx.environment().make_transport(kube::RestConfig{}, settings);
  return ops::make_prometheus_source(std::move(options), std::move(transport));
}

}  // namespace

Result<std::unique_ptr<ops::NodeSource>> make_node_source(const NodeSourceRequest& request, AppContext& ctx) {
  switch (request.via) {
    case ops::Via::ssh: {
      auto owning = std::make_unique<OwningSshSource>();
      owning->runner = ctx.ssh_runner(request.ssh.settings);
      owning->inner = ops::make_ssh_source(*owning->runner, request.ssh.address_rule, request.ssh.probe);
      return std::unique_ptr<ops::NodeSource>(std::move(owning));
    }
    case ops::Via::pod: {
      GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
      ops::PodProbeOptions options = request.pod;
      if (options.owner.empty()) options.owner = probe_owner();
      return ops::make_pod_source(*client, std::move(options));
    }
    case ops::Via::prometheus: return make_prometheus_node_source(request, ctx);
  }
  return fail(Errc::internal, "no node source for this --via");
}

std::string_view via_words(ops::Via via) {
  switch (via) {
    case ops::Via::ssh: return "over ssh";
    case ops::Via::pod: return "through probe pods";
    case ops::Via::prometheus: return "from Prometheus";
  }
  return "";
}

}  // namespace gpuctl::cli
