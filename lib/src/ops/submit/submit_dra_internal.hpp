#pragma once
// Which DRA devices a claim request could be given, shared by the placement (submit_placement.cpp)
// and the pre-flight checks (submit_preflight_dra.cpp); not part of the library's interface.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/ops/dra/dra.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"

namespace gpuctl::ops::submit_dra_detail {

// One device the request's class does not rule out, with the verdict of the class's and the
// request's selectors together.
struct Candidate {
  const DraDevice* device = nullptr;
  CelVerdict verdict;
};

struct RequestDevices {
  bool class_found = false;
  std::vector<Candidate> candidates;  // class no_match left out
};

// The devices of the inventory the request (`device_class` and `selectors`) may be given: the
// class's selectors first, as the scheduler's allocator checks them, then the request's.
RequestDevices request_devices(const DraInventory& dra, std::string_view device_class,
                               const std::vector<std::string>& selectors);

// The one request of a template gpuctl builds, as it was built.
struct TemplateRequest {
  std::string device_class;
  std::int64_t count = 0;
  std::vector<std::string> selectors;  // CEL
};
// nullopt when `claim_template` is not one request of ExactCount devices.
std::optional<TemplateRequest> read_template_request(const nlohmann::json& claim_template);

// The selectors --gpu-type adds to a request: none without a type.
std::vector<std::string> gpu_type_selectors(std::string_view gpu_type);

}  // namespace gpuctl::ops::submit_dra_detail
