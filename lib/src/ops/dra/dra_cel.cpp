// PLACEHOLDER, replaced by the CEL evaluator (issue 19 work in progress): until it lands every
// selector is reported unsupported, so nothing is ever claimed to match.
#include "gpuctl/ops/dra/dra_cel.hpp"

namespace gpuctl::ops {

CelVerdict evaluate_device_selector(std::string_view, const DraDevice&) {
  return {CelVerdict::Kind::unsupported, "CEL evaluation is not built yet"};
}

CelVerdict evaluate_device_selectors(const std::vector<std::string>& expressions, const DraDevice& device) {
  if (expressions.empty()) return {CelVerdict::Kind::match, {}};
  return evaluate_device_selector(expressions.front(), device);
}

std::string product_selector_expression(std::string_view, std::string_view) { return {}; }

}  // namespace gpuctl::ops
