#include "gpuctl/kube/transport.hpp"

#include <algorithm>
#include <cctype>

namespace gpuctl::kube {

std::string_view HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

std::vector<std::string_view> HttpResponse::headers_named(std::string_view name) const {
  std::vector<std::string_view> values;
  for (const auto& [key, value] : headers) {
    if (key == name) values.push_back(value);
  }
  return values;
}

}  // namespace gpuctl::kube
