// CEL device selectors (DeviceClass, ResourceClaim and DeviceTaintRule selectors read from the
// cluster), evaluated against a device whose productName is fuzzed too. Input: the expression,
// then after a form feed the product name. Invariants: every verdict that is not a match says
// nothing or says why in printable text; the selector `submit --gpu-type` writes for a product
// is never unsupported and always finds that product in a device named exactly so.
#include "fuzz_support.hpp"
#include "gpuctl/ops/dra/dra_cel.hpp"

namespace {

gpuctl::ops::DraDevice device_named(std::string_view product) {
  gpuctl::ops::DraDevice d;
  d.driver = "gpu.nvidia.com";
  d.pool = d.node = "node-a";
  d.name = "gpu-0";
  d.type = gpuctl::ops::DraDeviceType::gpu;
  d.product = std::string(product);
  d.attributes = {{"type", {{"string", "gpu"}}},
                  {"productName", {{"string", d.product}}},
                  {"driverVersion", {{"version", "580.126.20"}}},
                  {"index", {{"int", 0}}},
                  {"resource.kubernetes.io/pciBusID", {{"string", "0000:65:00.0"}}}};
  d.capacity = {{"memory", {{"value", "80Gi"}}}};
  return d;
}

void check_verdict(const gpuctl::ops::CelVerdict& v, std::string_view input) {
  using Kind = gpuctl::ops::CelVerdict::Kind;
  GPUCTL_FUZZ_CHECK(v.kind == Kind::match || v.kind == Kind::no_match || v.kind == Kind::unsupported, input);
  if (v.kind == Kind::unsupported) GPUCTL_FUZZ_CHECK(!v.problem.empty(), input);
  if (v.kind == Kind::match) GPUCTL_FUZZ_CHECK(v.problem.empty(), input);
  gpuctl::fuzz::dump_checked(nlohmann::json(v.problem), "CEL verdict problem");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto parts = gpuctl::fuzz::split_parts(text, 2);
  const std::string_view expression = parts[0], product = parts[1];
  // Attribute values from the API are valid UTF-8 (JSON); the fuzzed name is kept to ASCII bytes.
  std::string ascii_product;
  for (char c : product) ascii_product += static_cast<char>(static_cast<unsigned char>(c) & 0x7F);
  const auto device = device_named(ascii_product);
  check_verdict(gpuctl::ops::evaluate_device_selector(expression, device), text);
  check_verdict(gpuctl::ops::evaluate_device_selectors({std::string(expression), std::string(expression)}, device),
                text);

  // The selector gpuctl writes: a literal, whatever the product holds. A name without newlines
  // and separators needs no wildcard, so the device of that very name always matches.
  if (ascii_product.size() <= 1000) {
    std::string selector = gpuctl::ops::product_selector_expression("gpu.nvidia.com", ascii_product);
    auto verdict = gpuctl::ops::evaluate_device_selector(selector, device);
    check_verdict(verdict, selector);
    bool wildcard = ascii_product.find_first_of(" -_") != std::string::npos;
    bool newline = ascii_product.find('\n') != std::string::npos;
    if (!wildcard || !newline) {
      GPUCTL_FUZZ_CHECK(verdict.kind == gpuctl::ops::CelVerdict::Kind::match, selector);
    }
  }
  return 0;
}
