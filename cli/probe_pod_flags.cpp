#include "probe_pod_flags.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "gpuctl/kube/paths.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::cli {

void add_probe_pod_flags(CLI::App& cmd, HelpData& help, ProbePodFlags& f) {
  const char* group = "Probe pod options (--via pod)";
  completes(cmd.add_option("--probe-namespace", f.namespace_name,
                           "Namespace of the probe pods; default: $GPUCTL_PROBE_NAMESPACE, else gpuctl-system"),
            help, ValueKind::namespace_)
      ->group(group);
  cmd.add_option("--probe-image", f.image,
                 "Image of the probe pods, any with a POSIX sh (nvidia-smi comes from the host through the NVIDIA "
                 "runtime); default: $GPUCTL_PROBE_IMAGE, else busybox:1.36")
      ->group(group);
  with_choices(cmd.add_option("--probe-image-pull-policy", f.image_pull_policy,
                              "Pull policy of the probe image (default: the cluster's)"),
               help, {"Always", "IfNotPresent", "Never"})
      ->group(group);
  cmd.add_option("--probe-image-pull-secret", f.image_pull_secrets,
                 "A Secret in the probe namespace to pull the probe image with; repeatable")
      ->group(group);
  cmd.add_option("--probe-runtime-class", f.runtime_class,
                 "RuntimeClass of the probe pods (the NVIDIA container runtime's); \"\" for none, where NVIDIA's "
                 "runtime is the nodes' default")
      ->default_str("nvidia")
      ->group(group);
  cmd.add_option("--probe-env", f.env,
                 "KEY=VALUE in the probe container's environment; repeatable; given, it replaces the default "
                 "NVIDIA_VISIBLE_DEVICES=all and NVIDIA_DRIVER_CAPABILITIES=utility")
      ->group(group);
  cmd.add_flag("--probe-privileged", f.privileged,
               "Run the probe pods privileged with the host's PID namespace, so the probe also reads the kernel log "
               "(Xid errors) and checks Fabric Manager; without it those parts are skipped")
      ->group(group);
  cmd.add_option("--probe-timeout", f.timeout,
                 "Deadline per node from the pod's creation to its log: a probe pod not done by then is deleted and "
                 "the node reported timed_out (or not_started)")
      ->default_str("60s")
      ->group(group);
}

namespace {

// Kubernetes' rule for a container's environment variable name (C_IDENTIFIER relaxed:
// [-._a-zA-Z][-._a-zA-Z0-9]*).
bool env_name_ok(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

Result<std::vector<std::pair<std::string, std::string>>> parse_env(const std::vector<std::string>& entries) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& e : entries) {
    auto eq = e.find('=');
    std::string key = e.substr(0, eq);
    if (eq == std::string::npos || !env_name_ok(key)) {
      return fail(Errc::invalid_argument,
                  fmt::format("--probe-env \"{}\": expected KEY=VALUE with KEY made of letters, digits, '_', '-', "
                              "'.' (e.g. NVIDIA_VISIBLE_DEVICES=all)",
                              e));
    }
    if (key == ops::kProbeUnprivilegedEnv) {
      return fail(
          Errc::invalid_argument,
          fmt::format("--probe-env {}: gpuctl sets this one itself (it is what --probe-privileged changes)", key));
    }
    env.emplace_back(std::move(key), e.substr(eq + 1));
  }
  return env;
}

Result<void> check_names(const ops::PodProbeOptions& o) {
  if (auto problem = kube::paths::dns_label_problem(o.namespace_name); !problem.empty()) {
    return fail(Errc::invalid_argument, fmt::format("--probe-namespace \"{}\": {}", o.namespace_name, problem));
  }
  if (o.image.empty() || std::any_of(o.image.begin(), o.image.end(),
                                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    return fail(Errc::invalid_argument,
                fmt::format("--probe-image \"{}\": expected an image reference such as busybox:1.36 or "
                            "registry.example.com/tools/busybox:1.36",
                            o.image));
  }
  for (const auto& s : o.image_pull_secrets) {
    if (auto problem = kube::paths::dns_subdomain_problem(s); !problem.empty())
      return fail(Errc::invalid_argument, fmt::format("--probe-image-pull-secret \"{}\": {}", s, problem));
  }
  if (!o.runtime_class.empty()) {
    if (auto problem = kube::paths::dns_subdomain_problem(o.runtime_class); !problem.empty())
      return fail(Errc::invalid_argument,
                  fmt::format("--probe-runtime-class \"{}\": {} (\"\" for none)", o.runtime_class, problem));
  }
  return {};
}

}  // namespace

Result<ops::PodProbeOptions> validate_probe_pod_flags(const ProbePodFlags& f, int fanout, const EnvLookup& env) {
  ops::PodProbeOptions o;
  if (!f.namespace_name.empty()) {
    o.namespace_name = f.namespace_name;
  } else if (const char* v = non_empty(env, "GPUCTL_PROBE_NAMESPACE")) {
    o.namespace_name = v;
  }
  if (!f.image.empty()) {
    o.image = f.image;
  } else if (const char* v = non_empty(env, "GPUCTL_PROBE_IMAGE")) {
    o.image = v;
  }
  o.image_pull_policy = f.image_pull_policy;
  o.image_pull_secrets = f.image_pull_secrets;
  o.runtime_class = f.runtime_class;
  if (!f.env.empty()) {
    GPUCTL_TRY_ASSIGN(o.env, parse_env(f.env));
  }
  o.privileged = f.privileged;
  auto deadline = util::parse_duration(f.timeout);
  if (!deadline) return fail(deadline.error().with_context("--probe-timeout"));
  if (deadline->count() <= 0) {
    return fail(Errc::invalid_argument, fmt::format("--probe-timeout {}: must be more than 0 (e.g. 60s)", f.timeout));
  }
  o.deadline = *deadline;
  if (fanout < 1) return fail(Errc::invalid_argument, fmt::format("--fanout {}: must be 1 or more", fanout));
  o.fanout = fanout;
  GPUCTL_TRY(check_names(o));
  return o;
}

}  // namespace gpuctl::cli
