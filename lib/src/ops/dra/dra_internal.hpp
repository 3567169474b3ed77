#pragma once
// What the DRA readers share between their files.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/ops/dra/dra.hpp"

namespace gpuctl::ops::dra_internal {

// What a slice says about itself and its pool.
struct SliceHead {
  std::string name;
  std::string driver;
  std::string node;
  std::string pool;
  std::int64_t generation = 0;
  std::int64_t slice_count = 0;
};

SliceHead read_slice_head(const nlohmann::json& slice);
DraDevice read_device(const nlohmann::json& device, const SliceHead& slice);
DraDeviceTaint read_taint(const nlohmann::json& taint);
DraDeviceType device_type_of(std::string_view type);
// A string or version attribute's text; "" when absent or of another type.
std::string attribute_text(const nlohmann::json& attributes, std::string_view name);
std::vector<std::string> cel_selectors(const nlohmann::json& selectors);

}  // namespace gpuctl::ops::dra_internal
