// Non-2xx answers decoded into an Error: a Kubernetes Status body when there is one, the plain
// text otherwise, with a message that says what to do.
#include "gpuctl/kube/client.hpp"

#include <cctype>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/protobuf.hpp"
#include "kube/client_internal.hpp"

namespace gpuctl::kube {

namespace {

using json = nlohmann::json;

std::optional<int> parse_retry_after(std::string_view value) {
  if (value.empty()) return std::nullopt;
  int seconds = 0;
  for (char c : value) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;  // HTTP-dates are not sent by the API server
    seconds = seconds * 10 + (c - '0');
    if (seconds > 86400) return 86400;
  }
  return seconds;
}

}  // namespace

namespace detail {

std::string collapse_whitespace(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string path_of(std::string_view url) {
  auto scheme = url.find("://");
  auto slash = url.find('/', scheme == std::string_view::npos ? 0 : scheme + 3);
  if (slash == std::string_view::npos) return "/";
  auto q = url.find('?', slash);
  return std::string(url.substr(slash, q == std::string_view::npos ? std::string_view::npos : q - slash));
}

}  // namespace detail

Error decode_api_error(const HttpResponse& response, std::string_view method, std::string_view url) {
  Error e;
  e.code = Errc::api;
  e.http_status = response.status;
  if (auto ra = parse_retry_after(response.header("retry-after"))) e.retry_after_seconds = *ra;

  std::string server_message;
  bool decoded = false;
  // An answer to a protobuf request (a list, client_list.cpp) carries its Status in protobuf.
  std::string body = response.body;
  if (response.header("content-type").starts_with(proto::kMediaType)) {
    if (auto text = proto::status_as_json(response.body)) body = std::move(*text);
  }
  if (response.header("content-type").find("json") != std::string_view::npos || body.starts_with("{")) {
    auto status = json::parse(body, nullptr, false);
    if (status.is_object() && string_field(status, "kind") == "Status") {
      decoded = true;
      server_message = string_field(status, "message");
      e.reason = string_field(status, "reason");
      if (auto d = status.find("details"); d != status.end() && d->is_object()) {
        if (auto ra = d->find("retryAfterSeconds"); ra != d->end() && ra->is_number_integer() && ra->get<int>() > 0) {
          e.retry_after_seconds = ra->get<int>();
        }
        if (auto causes = d->find("causes"); causes != d->end() && causes->is_array()) {
          for (const auto& c : *causes) {
            if (!c.is_object()) continue;
            e.causes.push_back({string_field(c, "reason"), string_field(c, "message"), string_field(c, "field")});
          }
        }
      }
      if (auto md = status.find("metadata"); md != status.end() && md->is_object()) {
        e.continue_token = string_field(*md, "continue");
      }
    }
  }
  if (!decoded) server_message = detail::collapse_whitespace(body.substr(0, 2048));

  std::string what = fmt::format("{} {}", method, detail::path_of(url));
  switch (response.status) {
    case 401:
      e.message = fmt::format(
          "unauthorized: the API server rejected these credentials ({}); log in again or refresh the token or "
          "certificate in your kubeconfig",
          server_message.empty() ? "Unauthorized" : server_message);
      break;
    case 403:
      if (e.reason == "Forbidden" && server_message.find("cannot ") != std::string::npos) {
        // RBAC: 'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope'
        e.message =
            fmt::format("forbidden: {}; ask a cluster admin for the RBAC permission (check with: kubectl auth can-i)",
                        server_message);
      } else {
        e.message = fmt::format("forbidden: {}", server_message.empty() ? what : server_message);
      }
      break;
    case 404: e.message = server_message.empty() ? fmt::format("not found: {}", what) : server_message; break;
    case 429:
      if (server_message.empty() || !decoded) {
        e.message = fmt::format(
            "the API server is throttling requests ({}){}",
            server_message.empty() ? "429 Too Many Requests" : server_message,
            e.retry_after_seconds ? fmt::format("; it asked to retry after {}s", *e.retry_after_seconds) : "");
      } else {
        e.message = server_message;
      }
      break;
    default:
      if (!server_message.empty()) {
        e.message = server_message;
      } else {
        e.message = fmt::format("{} answered HTTP {} with no explanation", what, response.status);
      }
      break;
  }
  if (e.reason.empty() && !decoded) {
    switch (response.status) {
      case 429: e.reason = "TooManyRequests"; break;
      case 500: e.reason = "InternalError"; break;
      case 503: e.reason = "ServiceUnavailable"; break;
      case 504: e.reason = "Timeout"; break;
      default: break;
    }
  }
  return e;
}

}  // namespace gpuctl::kube
