#pragma once
// Reads the API server's admission refusals for pods (ResourceQuota and LimitRanger) back into
// numbers, so gpuctl can say which quota blocks a job and by how much. The texts come from the
// resourcequota and limitranger admission plugins; they reach us in 403 Status messages on pod
// create and in the Job controller's FailedCreate events ("Error creating: pods ... is forbidden:
// exceeded quota: ...").
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuctl::ops {

struct QuotaDenialItem {
  std::string resource;   // the quota key, e.g. "requests.nvidia.com/gpu"
  std::string requested;  // quantities as the server printed them ("4", "1500m")
  std::string used;
  std::string limited;
};

enum class AdmissionDenialKind {
  quota_exceeded,        // "exceeded quota: Q, requested: ..., used: ..., limited: ..."
  quota_status_unknown,  // "status unknown for quota: Q, resources: ..." (controller has not counted yet)
  quota_must_specify,    // "failed quota: Q: must specify cpu,memory"
  limit_range,           // "maximum nvidia.com/gpu usage per Container is 4, but limit is 8"
};

struct AdmissionDenial {
  AdmissionDenialKind kind = AdmissionDenialKind::quota_exceeded;
  std::string quota;                   // the ResourceQuota's name (quota kinds)
  std::vector<QuotaDenialItem> items;  // quota_exceeded: one per refused key
  std::vector<std::string> resources;  // quota_status_unknown / quota_must_specify
  std::string detail;                  // limit_range: the plugin's sentence
};

// Finds a quota or LimitRange refusal anywhere in `message` (a Status message, an event note, a
// kubectl error line). nullopt when the text holds none.
std::optional<AdmissionDenial> parse_admission_denial(std::string_view message);

// One plain sentence, e.g. `quota "team-a" allows 8 requests.nvidia.com/gpu, 6 are in use and 4
// more were requested`.
std::string describe(const AdmissionDenial& denial);

}  // namespace gpuctl::ops
