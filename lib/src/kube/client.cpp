// The client itself: query encoding, credentials on each request (token, tokenFile, exec plugin,
// basic auth, impersonation), and the single-object verbs. Requests and retries are in
// client_send.cpp, Status decoding in client_errors.cpp, lists in client_list.cpp, watches in
// client_watch.cpp.
#include "gpuctl/kube/client.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "gpuctl/kube/exec_credential.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "kube/client_internal.hpp"
#include "kube/config_internal.hpp"

namespace gpuctl::kube {

namespace {
using json = nlohmann::json;
}  // namespace

using namespace std::chrono_literals;

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string Query::encode() const {
  std::string out;
  for (const auto& [key, value] : params_) {
    out += out.empty() ? '?' : '&';
    out += percent_encode(key);
    out += '=';
    out += percent_encode(value);
  }
  return out;
}

struct Client::TokenFileCache {
  std::mutex mutex;
  std::string token;
  std::chrono::steady_clock::time_point read_at{};
  bool has_read = false;
};

namespace {
// The caller's callbacks, called one at a time: requests are sent from several threads at once
// (list_pages' prefetch, lists read side by side), and a callback writes to the caller's streams.
void serialize_callbacks(ClientOptions& options) {
  auto lock = std::make_shared<std::mutex>();
  auto guard = [&lock]<typename Arg>(std::function<void(Arg)>& callback) {
    if (!callback) return;
    callback = [lock, inner = std::move(callback)](Arg arg) {
      std::lock_guard held(*lock);
      inner(arg);
    };
  };
  guard(options.on_request);
  guard(options.on_warning);
  guard(options.on_wait);
}
}  // namespace

Client::Client(RestConfig config, std::unique_ptr<Transport> transport, ClientOptions options)
    : config_(std::move(config)), transport_(std::move(transport)), options_(std::move(options)) {
  serialize_callbacks(options_);
  if (config_.exec)
    exec_ = std::make_unique<ExecCredentialSource>(config_, options_.stdin_is_terminal, ExecCredentialSource::Clock{},
                                                   options_.on_wait);
  if (!config_.token_file.empty()) token_file_ = std::make_unique<TokenFileCache>();
}

Client::~Client() = default;

Result<std::string> Client::url_for(std::string_view method, std::string_view path, const Query& query) const {
  // Refused before anything is sent: "-n .." must never become a cluster-wide request.
  if (auto problem = paths::unsafe_path_problem(path); !problem.empty()) {
    return fail(
        Errc::invalid_argument,
        fmt::format("refusing to send {} {}: the path {}; a namespace or object name is not a valid Kubernetes name",
                    method, path, problem));
  }
  return config_.server + std::string(path) + query.encode();
}

namespace {
// A header value with CR, LF or another control character would add headers of its own
// (Impersonate-Group: system:masters); refused as client-go does. The value is never printed.
Result<void> check_header_value(std::string_view value, std::string_view field, std::string_view origin) {
  bool has_control = std::any_of(value.begin(), value.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
  if (!has_control) return {};
  return fail(
      Errc::config,
      fmt::format(
          "{}: {} contains a control character (a line break?); it cannot be sent as an HTTP header, fix the value",
          origin, field));
}

Result<void> check_impersonation(const RestConfig& config) {
  GPUCTL_TRY(check_header_value(config.impersonate_user, "as (impersonated user)", config.origin));
  GPUCTL_TRY(check_header_value(config.impersonate_uid, "as-uid", config.origin));
  for (const auto& g : config.impersonate_groups) GPUCTL_TRY(check_header_value(g, "as-groups", config.origin));
  for (const auto& [key, values] : config.impersonate_extra) {
    for (const auto& v : values) GPUCTL_TRY(check_header_value(v, "as-user-extra", config.origin));
  }
  return {};
}
}  // namespace

Result<void> Client::authenticate(HttpRequest& request, std::optional<ExecCredential>* sent_with) {
  request.client_cert_pem = config_.client_cert_pem;
  request.client_key_pem = config_.client_key_pem;
  std::string token = config_.bearer_token;
  if (token_file_) {
    std::lock_guard guard(token_file_->mutex);
    auto now = std::chrono::steady_clock::now();
    if (!token_file_->has_read || now - token_file_->read_at > 1min) {
      std::ifstream in(config_.token_file);
      if (in) {
        std::stringstream ss;
        ss << in.rdbuf();
        std::string text = ss.str();
        while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
        token_file_->token = text;
        token_file_->has_read = true;
        token_file_->read_at = now;
      } else if (!token_file_->has_read && token.empty()) {
        return fail(Errc::config, fmt::format("{}: tokenFile: cannot read {}", config_.origin, config_.token_file));
      }
    }
    if (!token_file_->token.empty()) token = token_file_->token;
  }
  const char* token_field =
      token_file_ && token == token_file_->token && !token.empty() ? "tokenFile contents" : "token";
  if (exec_) {
    Result<ExecCredential> cred = exec_->get();
    if (!cred) return fail(cred.error());
    if (sent_with != nullptr) *sent_with = *cred;
    if (!cred->token.empty()) {
      token = cred->token;
      token_field = "the exec credential plugin's token";
    }
    if (!cred->client_cert_pem.empty()) {
      request.client_cert_pem = cred->client_cert_pem;
      request.client_key_pem = cred->client_key_pem;
    }
  }
  GPUCTL_TRY(check_header_value(token, token_field, config_.origin));
  GPUCTL_TRY(check_header_value(config_.username, "username", config_.origin));
  GPUCTL_TRY(check_header_value(config_.password, "password", config_.origin));
  GPUCTL_TRY(check_impersonation(config_));
  if (!token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + token);
  } else if (!config_.username.empty() || !config_.password.empty()) {
    request.headers.emplace_back("Authorization",
                                 "Basic " + detail::base64_encode(config_.username + ":" + config_.password));
  }
  if (!config_.impersonate_user.empty()) {
    request.headers.emplace_back("Impersonate-User", config_.impersonate_user);
    if (!config_.impersonate_uid.empty()) request.headers.emplace_back("Impersonate-Uid", config_.impersonate_uid);
    for (const auto& g : config_.impersonate_groups) request.headers.emplace_back("Impersonate-Group", g);
    for (const auto& [key, values] : config_.impersonate_extra) {
      for (const auto& v : values) request.headers.emplace_back("Impersonate-Extra-" + percent_encode(key), v);
    }
  }
  return {};
}

namespace {
Result<json> parse_json_body(const HttpResponse& response, std::string_view what, const Projection& projection = {}) {
  if (response.body.empty()) return json::object();
  auto parsed = parse_projected(response.body, projection);
  if (!parsed) {
    return fail(Errc::parse,
                fmt::format("{}: the API server's answer is not valid JSON ({} bytes, starts with \"{}\"): {}", what,
                            response.body.size(), detail::collapse_whitespace(response.body.substr(0, 60)),
                            parsed.error().message));
  }
  return std::move(*parsed);
}
}  // namespace

Result<json> Client::get(std::string_view path, const Query& query) {
  GPUCTL_TRY_ASSIGN(HttpResponse resp, fetch(path, query));
  return decode_object(resp, path, {});
}

Result<HttpResponse> Client::fetch(std::string_view path, const Query& query, std::string_view accept) {
  HttpRequest req;
  req.method = "GET";
  if (!accept.empty()) req.headers.emplace_back("Accept", std::string(accept));
  GPUCTL_TRY_ASSIGN(req.url, url_for("GET", path, query));
  return send(std::move(req));
}

Result<json> decode_object(const HttpResponse& resp, std::string_view path, const Projection& projection) {
  // A 200 with no object (an empty body, null, [] from a broken proxy) is not "nothing there".
  if (resp.body.empty())
    return fail(Errc::parse,
                fmt::format("GET {}: the API server answered 200 with an empty body (expected a JSON object)", path));
  GPUCTL_TRY_ASSIGN(json object, parse_json_body(resp, fmt::format("GET {}", path), projection));
  if (!object.is_object()) {
    return fail(Errc::parse, fmt::format("GET {}: the API server answered with a JSON {} (expected an object)", path,
                                         object.type_name()));
  }
  return object;
}

Result<std::string> Client::get_text(std::string_view path, const Query& query) {
  GPUCTL_TRY_ASSIGN(HttpResponse resp, fetch(path, query));
  return std::move(resp.body);
}

Result<std::string> Client::get_text(std::string_view path, const Query& query, std::chrono::milliseconds timeout) {
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("GET", path, query));
  const auto global = options_.request_timeout;
  req.timeout = global.count() > 0 && global < timeout ? global : timeout;
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  return std::move(resp.body);
}

namespace {
Query write_query_params(const WriteOptions& options, Query query = {}) {
  query.add_if(options.dry_run, "dryRun", "All");
  query.add_if(!options.field_validation.empty(), "fieldValidation", options.field_validation);
  query.add_if(!options.field_manager.empty(), "fieldManager", options.field_manager);
  query.add_if(options.force, "force", "true");
  return query;
}
}  // namespace

Result<json> Client::create(std::string_view path, const json& body, const WriteOptions& options) {
  HttpRequest req;
  req.method = "POST";
  GPUCTL_TRY_ASSIGN(req.url, url_for("POST", path, write_query_params(options)));
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body.dump();
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  return parse_json_body(resp, fmt::format("POST {}", path));
}

Result<json> Client::replace(std::string_view path, const json& body, const WriteOptions& options) {
  HttpRequest req;
  req.method = "PUT";
  GPUCTL_TRY_ASSIGN(req.url, url_for("PUT", path, write_query_params(options)));
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body.dump();
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  return parse_json_body(resp, fmt::format("PUT {}", path));
}

Result<json> Client::patch(std::string_view path, PatchType type, const json& body, const WriteOptions& options) {
  HttpRequest req;
  req.method = "PATCH";
  GPUCTL_TRY_ASSIGN(req.url, url_for("PATCH", path, write_query_params(options)));
  switch (type) {
    case PatchType::merge: req.headers.emplace_back("Content-Type", "application/merge-patch+json"); break;
    case PatchType::strategic_merge:
      req.headers.emplace_back("Content-Type", "application/strategic-merge-patch+json");
      break;
    case PatchType::json_patch: req.headers.emplace_back("Content-Type", "application/json-patch+json"); break;
    case PatchType::apply: req.headers.emplace_back("Content-Type", "application/apply-patch+yaml"); break;
  }
  req.body = body.dump();
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  return parse_json_body(resp, fmt::format("PATCH {}", path));
}

Result<json> Client::remove(std::string_view path, const json& delete_options, const WriteOptions& options) {
  HttpRequest req;
  req.method = "DELETE";
  GPUCTL_TRY_ASSIGN(req.url, url_for("DELETE", path, write_query_params(options)));
  if (!delete_options.is_null()) {
    // With a DeleteOptions body the API server reads dryRun from the body only and ignores the
    // query parameter: without this a "dry-run" delete with a body really deletes.
    json body = delete_options;
    if (options.dry_run && body.is_object() && !body.contains("dryRun")) body["dryRun"] = json::array({"All"});
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = body.dump();
  }
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  return parse_json_body(resp, fmt::format("DELETE {}", path));
}

Result<std::string> Client::whoami() {
  json review = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}};
  auto answer = create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review);
  if (answer) {
    std::string name = string_field(field_at(*answer, {"status", "userInfo"}), "username");
    if (!name.empty()) return name;
  } else if (!answer.error().is_not_found() && answer.error().http_status != 403) {
    return fail(answer.error());
  }
  if (!config_.user.empty()) return config_.user;
  return std::string("unknown");
}

}  // namespace gpuctl::kube
