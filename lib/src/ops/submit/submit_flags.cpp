// gpuctl submit's flags, validated without I/O, and the rules for names (DNS labels, qualified
// names, label values, variable names) that the -f manifest checks share (submit_flags_manifest.cpp).
#include <cctype>
#include <charconv>
#include <chrono>

#include <fmt/format.h>

#include "gpuctl/kube/label_selector.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/util/time.hpp"
#include "submit_flags_internal.hpp"

namespace gpuctl::ops {

namespace submit_flags_detail {

bool is_dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

bool is_qualified_name(std::string_view s) {
  auto slash = s.find('/');
  std::string_view name = slash == std::string_view::npos ? s : s.substr(slash + 1);
  if (slash != std::string_view::npos) {
    std::string_view prefix = s.substr(0, slash);
    if (prefix.empty() || prefix.size() > 253) return false;
    for (char c : prefix) {
      if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
            c == '.'))
        return false;
    }
  }
  if (name.empty() || name.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(name.front())) || !std::isalnum(static_cast<unsigned char>(name.back())))
    return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

bool is_label_value(std::string_view v) {
  if (v.empty()) return true;
  if (v.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(v.front())) || !std::isalnum(static_cast<unsigned char>(v.back())))
    return false;
  for (char c : v) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

bool is_env_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  }
  return true;
}

Result<std::int64_t> whole_number(std::string_view flag, std::string_view text, std::int64_t min, std::int64_t max) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < min || v > max) {
    return usage(fmt::format("{} {:?}: expected a whole number from {} to {}", flag, std::string(text), min, max));
  }
  return v;
}

}  // namespace submit_flags_detail

namespace {

using namespace submit_flags_detail;

Result<std::int64_t> non_negative_integer(std::string_view flag, std::string_view text, std::int64_t max) {
  return whole_number(flag, text, 0, max);
}

Result<std::int64_t> seconds_of(std::string_view flag, std::string_view text, bool allow_zero) {
  auto d = util::parse_duration(text);
  if (!d) return usage(fmt::format("{}: {}", flag, d.error().message));
  if (d->count() % 1000 != 0)
    return usage(fmt::format("{} {}: Kubernetes counts whole seconds; write e.g. 90s or 2h", flag, text));
  std::int64_t s = d->count() / 1000;
  if (!allow_zero && s == 0) return usage(fmt::format("{} {}: must be longer than 0s", flag, text));
  return s;
}

Result<std::string> quantity_flag(std::string_view flag, const std::string& text) {
  if (text.empty()) return text;
  auto q = kube::Quantity::parse(text);
  if (!q) return usage(fmt::format("{} {:?}: {}", flag, text, q.error().message));
  if (q->sign() <= 0) return usage(fmt::format("{} {}: must be more than zero", flag, text));
  return text;
}

// K=V pairs for --label / --annotation / --env.
Result<std::pair<std::string, std::string>> key_value(std::string_view flag, const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return usage(fmt::format("{} {:?}: expected KEY=VALUE", flag, text));
  return std::pair{text.substr(0, eq), text.substr(eq + 1)};
}

Result<VolumeSpec> parse_volume(const std::string& text) {
  auto bad = [&](std::string_view why) {
    return usage(fmt::format("--volume {:?}: {}; expected CLAIM:/path or CLAIM:/path:ro", text, why));
  };
  auto first = text.find(':');
  if (first == std::string::npos) return bad("no mount path");
  VolumeSpec v;
  v.claim = text.substr(0, first);
  std::string rest = text.substr(first + 1);
  if (rest.ends_with(":ro")) {
    v.read_only = true;
    rest.resize(rest.size() - 3);
  } else if (rest.ends_with(":rw")) {
    rest.resize(rest.size() - 3);
  }
  v.mount_path = rest;
  if (!is_dns_label(v.claim) &&
      !(v.claim.size() <= 253 && is_qualified_name(v.claim) && v.claim.find('/') == std::string::npos)) {
    return bad("the claim name is not a valid PersistentVolumeClaim name");
  }
  if (v.mount_path.empty() || v.mount_path.front() != '/') return bad("the mount path must be absolute");
  if (v.mount_path.find(':') != std::string::npos) return bad("the mount path holds a ':'");
  return v;
}

// ---- parse_submit_flags, one group of flags at a time ---------------------------------------------
// The steps run in a fixed order and stop at the first error, so a command line with several
// mistakes is always told about the same one first.

// -f and the flags describe the container in two ways: a manifest refuses the container flags
// (they would silently win over it), and without one NAME, --image and --gpus are required.
Result<void> check_mode(const SubmitFlags& f) {
  if (f.from_manifest) {
    std::vector<std::pair<std::string_view, bool>> container_flags = {
        {"--image", !f.image.empty()},
        {"--gpus", !f.gpus.empty()},
        {"--cpu", !f.cpu.empty()},
        {"--memory", !f.memory.empty()},
        {"--cpu-limit", !f.cpu_limit.empty()},
        {"--memory-limit", !f.memory_limit.empty()},
        {"--env", !f.env.empty()},
        {"--volume", !f.volumes.empty()},
        {"--gpu-resource", !f.gpu_resource.empty()},
        {"--device-class", !f.device_class.empty()},
        {"COMMAND", !f.command.empty()},
    };
    for (auto [flag, given] : container_flags) {
      if (given) return usage(fmt::format("{} cannot be combined with -f: set it in the manifest's container", flag));
    }
    std::vector<std::pair<std::string_view, bool>> job_flags = {
        {"--nodes", !f.nodes.empty()},
        {"--gpus-per-node", !f.gpus_per_node.empty()},
        {"--completions", !f.completions.empty()},
        {"--parallelism", !f.parallelism.empty()},
    };
    for (auto [flag, given] : job_flags) {
      if (given) return usage(fmt::format("{} cannot be combined with -f: set it in the manifest's Job spec", flag));
    }
    return {};
  }
  if (f.name.empty()) {
    return usage(
        "a job NAME is required before --, since every word after -- is the command: "
        "gpuctl submit NAME --image IMAGE --gpus N -- COMMAND (or -f job.yaml)");
  }
  if (f.image.empty()) return usage("--image is required (the container image to run), or give a manifest with -f");
  if (f.gpus.empty() && f.gpus_per_node.empty()) {
    return usage(
        "--gpus is required: how many GPUs each pod gets (0 for a job without GPUs); with --nodes, "
        "--gpus-per-node");
  }
  return {};
}

// --gpus, --gpu-resource and --gpu-type.
Result<void> parse_gpu_flags(const SubmitFlags& f, SubmitSpec& s) {
  if (!f.gpus.empty()) {
    GPUCTL_TRY_ASSIGN(s.gpus, non_negative_integer("--gpus", f.gpus, 1024));
  }
  // Below, "--gpus" in a message also stands for --gpus-per-node.
  if (!f.gpu_resource.empty()) {
    std::string r = f.gpu_resource;
    if (r.starts_with("requests.") || r.starts_with("limits.")) {
      return usage(fmt::format("--gpu-resource {}: name the resource itself, e.g. {}", r, r.substr(r.find('.') + 1)));
    }
    if (r.find('/') == std::string::npos || !is_qualified_name(r)) {
      return usage(
          fmt::format("--gpu-resource {:?}: expected an extended resource name such as nvidia.com/gpu or "
                      "nvidia.com/mig-1g.10gb",
                      r));
    }
    s.gpu_resource = r;
    s.gpu_resource_given = true;
  }
  if (!f.device_class.empty()) {
    if (!f.gpu_resource.empty()) {
      return usage(
          "--device-class and --gpu-resource both say how the GPUs are asked for; give one (--device-class claims "
          "DRA devices, --gpu-resource names an extended resource)");
    }
    if (auto problem = kube::paths::dns_subdomain_problem(f.device_class); !problem.empty())
      return usage(fmt::format("--device-class {:?} is not a DeviceClass name: {}", f.device_class, problem));
    if (s.gpus && *s.gpus == 0) return usage("--device-class needs --gpus of 1 or more: the devices each pod claims");
    s.device_class = f.device_class;
  }
  if (!f.gpu_type.empty()) {
    if (f.gpu_type.size() > 63) return usage("--gpu-type: a GPU product label value is at most 63 characters");
    if (s.gpus && *s.gpus == 0)
      return usage("--gpu-type needs --gpus of 1 or more: a job without GPUs has no GPU type");
  }
  s.gpu_type = f.gpu_type;
  return {};
}

// --cpu, --memory and their limits, each limit at least its request.
Result<void> parse_compute_flags(const SubmitFlags& f, SubmitSpec& s) {
  GPUCTL_TRY_ASSIGN(s.cpu, quantity_flag("--cpu", f.cpu));
  GPUCTL_TRY_ASSIGN(s.memory, quantity_flag("--memory", f.memory));
  GPUCTL_TRY_ASSIGN(s.cpu_limit, quantity_flag("--cpu-limit", f.cpu_limit));
  GPUCTL_TRY_ASSIGN(s.memory_limit, quantity_flag("--memory-limit", f.memory_limit));
  auto limit_below = [](const std::string& req, const std::string& lim) {
    return !req.empty() && !lim.empty() && *kube::Quantity::parse(lim) < *kube::Quantity::parse(req);
  };
  if (limit_below(s.cpu, s.cpu_limit)) {
    return usage(
        fmt::format("--cpu-limit {} is below --cpu {}: a limit must be at least the request", s.cpu_limit, s.cpu));
  }
  if (limit_below(s.memory, s.memory_limit)) {
    return usage(fmt::format("--memory-limit {} is below --memory {}: a limit must be at least the request",
                             s.memory_limit, s.memory));
  }
  return {};
}

// --env and --volume: what the container sees besides its resources.
Result<void> parse_env_and_volumes(const SubmitFlags& f, SubmitSpec& s) {
  for (const auto& e : f.env) {
    GPUCTL_TRY_ASSIGN(auto kv, key_value("--env", e));
    if (!is_env_name(kv.first)) return usage(fmt::format("--env {:?}: {:?} is not a valid variable name", e, kv.first));
    s.env.push_back(std::move(kv));
  }
  for (const auto& v : f.volumes) {
    GPUCTL_TRY_ASSIGN(VolumeSpec vol, parse_volume(v));
    for (const auto& other : s.volumes) {
      if (other.mount_path == vol.mount_path) {
        return usage(fmt::format("--volume: two volumes are mounted at {}", vol.mount_path));
      }
    }
    s.volumes.push_back(std::move(vol));
  }
  return {};
}

// --backoff-limit, --ttl-after-finished and --active-deadline: how long the Job lives and retries.
Result<void> parse_lifetime_flags(const SubmitFlags& f, SubmitSpec& s) {
  if (!f.backoff_limit.empty()) {
    GPUCTL_TRY_ASSIGN(s.backoff_limit, non_negative_integer("--backoff-limit", f.backoff_limit, 2147483647));
  }
  if (f.ttl_after_finished == "none") {
    s.ttl_disabled = true;
  } else if (!f.ttl_after_finished.empty()) {
    GPUCTL_TRY_ASSIGN(s.ttl_seconds, seconds_of("--ttl-after-finished", f.ttl_after_finished, true));
  }
  if (!f.active_deadline.empty()) {
    GPUCTL_TRY_ASSIGN(s.active_deadline_seconds, seconds_of("--active-deadline", f.active_deadline, false));
  }
  return {};
}

// --priority-class, --label and --annotation.
Result<void> parse_metadata_flags(const SubmitFlags& f, SubmitSpec& s) {
  if (!f.priority_class.empty() && !(f.priority_class.size() <= 253 && is_qualified_name(f.priority_class))) {
    return usage(fmt::format("--priority-class {:?} is not a valid PriorityClass name", f.priority_class));
  }
  s.priority_class = f.priority_class;
  for (const auto& l : f.labels) {
    GPUCTL_TRY_ASSIGN(auto kv, key_value("--label", l));
    if (!is_qualified_name(kv.first) || !is_label_value(kv.second)) {
      return usage(
          fmt::format("--label {:?}: not a valid label (key [prefix/]name, value at most 63 of A-Z a-z 0-9 - _ .)", l));
    }
    s.labels[kv.first] = kv.second;
  }
  for (const auto& a : f.annotations) {
    GPUCTL_TRY_ASSIGN(auto kv, key_value("--annotation", a));
    if (!is_qualified_name(kv.first)) {
      return usage(fmt::format("--annotation {:?}: {:?} is not a valid annotation key", a, kv.first));
    }
    s.annotations[kv.first] = kv.second;
  }
  return {};
}

// --colocate-with and --colocate-topology.
Result<void> parse_colocate_flags(const SubmitFlags& f, SubmitSpec& s) {
  if (!f.colocate_with.empty()) {
    auto sel = kube::parse_label_selector(f.colocate_with);
    if (!sel) return usage("--colocate-with: " + sel.error().message);
    s.colocate_selector = std::move(*sel);
  }
  if (!f.colocate_topology.empty()) {
    if (f.colocate_with.empty()) return usage("--colocate-topology needs --colocate-with (the pods to colocate with)");
    if (!is_qualified_name(f.colocate_topology)) {
      return usage(fmt::format("--colocate-topology {:?} is not a label key", f.colocate_topology));
    }
    s.colocate_topology = f.colocate_topology;
  }
  return {};
}

}  // namespace

Result<SubmitSpec> parse_submit_flags(const SubmitFlags& f) {
  SubmitSpec s;
  s.from_manifest = f.from_manifest;
  GPUCTL_TRY(check_mode(f));
  if (!f.name.empty() && !is_dns_label(f.name)) {
    return usage(
        fmt::format("job name {:?} is not valid: at most 63 lowercase letters, digits and '-', starting and ending "
                    "with a letter or digit (the Job controller puts it in a label)",
                    f.name));
  }
  s.name = f.name;
  s.image = f.image;
  s.command = f.command;
  GPUCTL_TRY(parse_parallel_flags(f, s));  // before --gpus: --gpus-per-node may give it
  GPUCTL_TRY(parse_gpu_flags(f, s));
  GPUCTL_TRY(parse_compute_flags(f, s));
  GPUCTL_TRY(parse_env_and_volumes(f, s));
  GPUCTL_TRY(parse_lifetime_flags(f, s));
  GPUCTL_TRY(parse_metadata_flags(f, s));
  GPUCTL_TRY(parse_colocate_flags(f, s));
  s.count_disruptions = f.count_disruptions;
  return s;
}

}  // namespace gpuctl::ops
