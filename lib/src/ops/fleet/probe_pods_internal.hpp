#pragma once
// What probe_pods_build.cpp, probe_pods_run.cpp and probe_pods_cleanup.cpp share.
#include <optional>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"
#include "gpuctl/ops/fleet/probe_pods.hpp"

namespace gpuctl::ops::detail {

// A Kubernetes label value (63 characters, alphanumeric at both ends, '-', '_', '.' inside).
bool is_label_value(std::string_view text);

// Text from a server or a node, made one line of at most `cap` characters for a message.
std::string one_line(std::string_view text, std::size_t cap = 300);

// "app.kubernetes.io/name=gpuctl-probe,app.kubernetes.io/managed-by=gpuctl" (and the run's id
// when given): what every probe pod carries, and what --cleanup and each poll select by.
std::string probe_pod_selector(std::string_view run_id = {});

// What a refused create of a probe pod means: the whole source cannot work (namespace missing,
// RBAC, the RuntimeClass missing, an invalid pod: the Error, with the fix), or this node's pod was
// refused (admission_refused, or probe_failed for a server or transport failure).
struct CreateRefusal {
  std::optional<Error> whole_source;
  std::string outcome;
  std::string message;
};
CreateRefusal classify_create_error(const Error& error, const PodProbeOptions& options);

// A read (list, log) refused with 403: the RBAC the source needs, as a whole-source Error.
Error forbidden_error(const Error& error, const PodProbeOptions& options, std::string_view verb);

}  // namespace gpuctl::ops::detail
