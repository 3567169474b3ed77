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

std::string redact_url(std::string_view url) {
  auto scheme = url.find("://");
  std::size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  auto end = url.find_first_of("/?#", start);
  std::string_view authority = url.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  auto at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, start));
  out += "***@";
  out += url.substr(start + at + 1);
  return out;
}

std::string redact_urls_in(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto scheme = text.find("://", pos);
    if (scheme == std::string_view::npos) break;
    // The URL's end: the first space, quote or closing bracket after the scheme.
    auto end = text.find_first_of(" \t\r\n\"'<>()[]", scheme + 3);
    if (end == std::string_view::npos) end = text.size();
    auto begin = scheme;
    while (begin > pos && (std::isalnum(static_cast<unsigned char>(text[begin - 1])) || text[begin - 1] == '+' ||
                           text[begin - 1] == '-' || text[begin - 1] == '.')) {
      --begin;
    }
    out += text.substr(pos, begin - pos);
    out += redact_url(text.substr(begin, end - begin));
    pos = end;
  }
  out += text.substr(std::min(pos, text.size()));
  return out;
}

}  // namespace gpuctl::kube
