// The probe pod as it is sent, and what a probe pod's status or a refused create means: pure.
#include <algorithm>
#include <cctype>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/gpu/probe.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/util/strings.hpp"
#include "probe_pods_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace detail {

bool is_label_value(std::string_view text) {
  if (text.empty()) return true;
  if (text.size() > 63) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(text.front()) || !alnum(text.back())) return false;
  return std::all_of(text.begin(), text.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::string one_line(std::string_view text, std::size_t cap) {
  std::string out;
  bool blank = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') {
      blank = !out.empty();
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) continue;
    if (blank) out.push_back(' ');
    blank = false;
    out.push_back(c);
    if (out.size() >= cap) {
      out += "...";
      break;
    }
  }
  return out;
}

std::string probe_pod_selector(std::string_view run_id) {
  std::string s = fmt::format("{}={},{}=gpuctl", kProbePodAppLabel, kProbePodAppValue, kProbePodManagedBy);
  if (!run_id.empty()) s += fmt::format(",{}={}", kProbePodRunLabel, run_id);
  return s;
}

Error forbidden_error(const Error& error, const PodProbeOptions& options, std::string_view verb) {
  Error e = error;
  e.message = fmt::format(
      "--via pod may not {} in namespace \"{}\" ({}): it needs a Role there that allows create, get, list and "
      "delete on pods and get on pods/log, bound to this user (or choose another namespace with --probe-namespace)",
      verb, options.namespace_name, one_line(error.message, 200));
  return e;
}

namespace {

bool names_admission(std::string_view message) {
  return util::contains(message, "PodSecurity") || util::contains(message, "admission webhook") ||
         util::contains(message, "ValidatingAdmissionPolicy") || util::contains(message, "denied the request") ||
         util::contains(message, "exceeded quota") || util::contains(message, "LimitRange") ||
         util::contains(message, "usage per Container") || util::contains(message, "usage per Pod");
}

}  // namespace

CreateRefusal classify_create_error(const Error& error, const PodProbeOptions& options) {
  CreateRefusal r;
  const std::string& ns = options.namespace_name;
  const std::string text = one_line(error.message);
  if (error.is_not_found()) {
    Error e = error;
    e.message = fmt::format(
        "the probe namespace \"{}\" does not exist: create it (kubectl create namespace {}) or choose another with "
        "--probe-namespace",
        ns, ns);
    r.whole_source = e;
  } else if (error.code == Errc::api && util::contains(error.message, "RuntimeClass") &&
             util::contains(error.message, "not found")) {
    Error e = error;
    e.message = fmt::format(
        "the probe pod's RuntimeClass \"{}\" does not exist ({}): install the NVIDIA container toolkit's RuntimeClass, "
        "name the cluster's with --probe-runtime-class, or --probe-runtime-class \"\" where NVIDIA's runtime is the "
        "default",
        options.runtime_class, text);
    r.whole_source = e;
  } else if (error.is_forbidden() && util::contains(error.message, "cannot create resource")) {
    r.whole_source = forbidden_error(error, options, "create pods");
  } else if (error.code == Errc::api && (error.is_forbidden() || names_admission(error.message))) {
    r.outcome = "admission_refused";
    r.message = fmt::format("admission refused the probe pod: {}", text);
    if (util::contains(error.message, "PodSecurity")) {
      r.message += options.privileged ? fmt::format(
                                            " (a privileged probe needs namespace {} to allow privileged pods: "
                                            "pod-security.kubernetes.io/enforce=privileged)",
                                            ns)
                                      : fmt::format(" (namespace {} must allow the baseline level)", ns);
    }
  } else if (error.code == Errc::api && (error.http_status == 422 || error.http_status == 400)) {
    Error e = error;
    e.message = fmt::format("the API server refused the probe pod as invalid: {}", text);
    r.whole_source = e;
  } else {
    r.outcome = "probe_failed";
    r.message = fmt::format("creating the probe pod failed: {}", text);
  }
  return r;
}

}  // namespace detail

namespace {

json probe_container(const PodProbeOptions& options) {
  json env = json::array();
  for (const auto& [key, value] : options.env) env.push_back({{"name", key}, {"value", value}});
  json security = {{"allowPrivilegeEscalation", false},
                   {"capabilities", {{"drop", json::array({"ALL"})}}},
                   {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  if (options.privileged) {
    security = {{"privileged", true}};
  } else {
    env.push_back({{"name", std::string(kProbeUnprivilegedEnv)}, {"value", "1"}});
  }
  json c = {{"name", std::string(kProbeContainerName)},
            {"image", options.image},
            {"command", json::array({"sh", "-c", std::string(gpu::probe_script())})},
            {"env", env},
            // nvidia-smi -q -x on eight GPUs peaks near 60 MiB; the limit keeps a runaway probe
            // from pressing on the node's workloads.
            {"resources", {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}, {"limits", {{"memory", "256Mi"}}}}},
            {"securityContext", security},
            {"terminationMessagePolicy", "File"}};
  if (!options.image_pull_policy.empty()) c["imagePullPolicy"] = options.image_pull_policy;
  return c;
}

}  // namespace

json build_probe_pod(const std::string& node, const PodProbeOptions& options) {
  json labels = {{std::string(kProbePodAppLabel), std::string(kProbePodAppValue)},
                 {std::string(kProbePodManagedBy), "gpuctl"}};
  if (detail::is_label_value(node)) labels[std::string(kProbePodNodeLabel)] = node;
  if (!options.run_id.empty()) labels[std::string(kProbePodRunLabel)] = options.run_id;
  json annotations = {{std::string(kProbePodNodeAnnotation), node}};
  if (!options.owner.empty()) annotations[std::string(kProbePodOwnerAnnotation)] = options.owner;
  const auto deadline_s = std::chrono::ceil<std::chrono::seconds>(options.deadline) + kProbePodDeadlineSlack;
  json spec = {{"nodeName", node},
               {"restartPolicy", "Never"},
               // Every taint: the probe is how an admin looks at a node, also a tainted, cordoned one.
               {"tolerations", json::array({{{"operator", "Exists"}}})},
               {"automountServiceAccountToken", false},
               {"enableServiceLinks", false},
               {"terminationGracePeriodSeconds", 0},
               {"activeDeadlineSeconds", deadline_s.count()},
               {"containers", json::array({probe_container(options)})}};
  if (!options.runtime_class.empty()) spec["runtimeClassName"] = options.runtime_class;
  if (options.privileged) spec["hostPID"] = true;  // pgrep nv-fabricmanager sees the host's processes
  if (!options.image_pull_secrets.empty()) {
    json secrets = json::array();
    for (const auto& s : options.image_pull_secrets) secrets.push_back({{"name", s}});
    spec["imagePullSecrets"] = secrets;
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", "gpuctl-probe-"},
            {"namespace", options.namespace_name},
            {"labels", labels},
            {"annotations", annotations}}},
          {"spec", spec}};
}

namespace {

// The probe container's status (or null).
const json& probe_status(const json& pod) {
  for (const auto& c : kube::array_field(kube::field(pod, "status"), "containerStatuses")) {
    if (kube::string_field(c, "name") == kProbeContainerName) return c;
  }
  static const json none;
  return none;
}

std::string reason_and_message(const json& state) {
  std::string reason = kube::string_field(state, "reason");
  std::string message = detail::one_line(kube::string_field(state, "message"), 240);
  if (message.empty()) return reason;
  return reason.empty() ? message : fmt::format("{}: {}", reason, message);
}

// A pod the kubelet turned away at admission (spec.nodeName skips the scheduler, so the kubelet
// is the one that says the node is full): status.reason OutOfpods, OutOfcpu, NodeAffinity, ...
ProbePodVerdict kubelet_rejection(const json& status) {
  const std::string reason = kube::string_field(status, "reason");
  const std::string message = detail::one_line(kube::string_field(status, "message"), 240);
  ProbePodVerdict v;
  v.stage = ProbePodStage::stuck;
  v.outcome = "unschedulable";
  if (reason == "OutOfpods") {
    v.message = fmt::format("the node is full of pods: its kubelet refused the probe pod ({})", message);
  } else if (reason.starts_with("OutOf")) {
    v.message = fmt::format("the node has no room for the probe pod's requests: its kubelet refused it ({}: {})",
                            reason, message);
  } else if (reason == "DeadlineExceeded") {
    v.outcome = "timed_out";
    v.message = fmt::format("the probe pod ran past its activeDeadlineSeconds ({})", message);
  } else {
    v.message = fmt::format("the node's kubelet refused the probe pod ({})",
                            reason.empty() ? message : fmt::format("{}: {}", reason, message));
  }
  return v;
}

// Pending: why, from the container's waiting state, else the pod's conditions.
std::string waiting_for(const json& pod, const json& waiting) {
  if (!waiting.is_null()) return reason_and_message(waiting);
  for (const auto& c : kube::array_field(kube::field(pod, "status"), "conditions")) {
    if (kube::string_field(c, "status") == "False" && !kube::string_field(c, "message").empty())
      return fmt::format("{}: {}", kube::string_field(c, "type"), reason_and_message(c));
  }
  return "Pending";
}

}  // namespace

ProbePodVerdict classify_probe_pod(const json& pod) {
  const json& status = kube::field(pod, "status");
  const std::string phase = kube::string_field(status, "phase");
  const json& container = probe_status(pod);
  const json& state = kube::field(container, "state");
  const json& terminated = kube::field(state, "terminated");
  const json& waiting = kube::field(state, "waiting");
  ProbePodVerdict v;
  if (!terminated.is_null()) {
    v.stage = ProbePodStage::finished;
    v.exit_code = static_cast<int>(kube::integer_field(terminated, "exitCode").value_or(-1));
    if (v.exit_code != 0) v.message = reason_and_message(terminated);
    return v;
  }
  if (phase == "Succeeded") {
    v.stage = ProbePodStage::finished;
    v.exit_code = 0;
    return v;
  }
  if (phase == "Failed") return kubelet_rejection(status);
  const std::string reason = kube::string_field(waiting, "reason");
  if (reason == "ErrImagePull" || reason == "ImagePullBackOff" || reason == "InvalidImageName" ||
      reason == "ErrImageNeverPull") {
    v.stage = ProbePodStage::stuck;
    v.outcome = "image_pull_failed";
    v.message = fmt::format(
        "the probe image could not be pulled ({}): check --probe-image, --probe-image-pull-secret and the node's "
        "access to the registry",
        reason_and_message(waiting));
    return v;
  }
  if (reason == "CreateContainerError" || reason == "CreateContainerConfigError" || reason == "RunContainerError" ||
      reason == "StartError") {
    v.stage = ProbePodStage::stuck;
    v.outcome = "probe_failed";
    v.message = fmt::format("the probe container could not start ({})", reason_and_message(waiting));
    return v;
  }
  if (phase == "Running" || !kube::field(state, "running").is_null()) {
    v.stage = ProbePodStage::running;
    return v;
  }
  v.message = waiting_for(pod, waiting);
  return v;
}

}  // namespace gpuctl::ops
