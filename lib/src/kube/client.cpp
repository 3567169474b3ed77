#include "gpuctl/kube/client.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "gpuctl/kube/exec_credential.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/util/cancel.hpp"
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

namespace {

// 10,000 pages of 500 are 5 million objects: far beyond any cluster, short of forever.
constexpr int kMaxListPages = 10000;

bool is_idempotent(std::string_view method) { return method == "GET"; }

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

// `299 - "text"` -> `text`; anything else is passed on whole.
std::string warning_text(std::string_view header) {
  auto first = header.find('"');
  auto last = header.rfind('"');
  if (first != std::string_view::npos && last != std::string_view::npos && last > first) {
    std::string text;
    for (auto i = first + 1; i < last; ++i) {
      if (header[i] == '\\' && i + 1 < last) ++i;
      text.push_back(header[i]);
    }
    return text;
  }
  return std::string(header);
}

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

}  // namespace

Error decode_api_error(const HttpResponse& response, std::string_view method, std::string_view url) {
  Error e;
  e.code = Errc::api;
  e.http_status = response.status;
  if (auto ra = parse_retry_after(response.header("retry-after"))) e.retry_after_seconds = *ra;

  std::string server_message;
  bool decoded = false;
  if (response.header("content-type").find("json") != std::string_view::npos || response.body.starts_with("{")) {
    auto status = json::parse(response.body, nullptr, false);
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
  if (!decoded) server_message = collapse_whitespace(response.body.substr(0, 2048));

  std::string what = fmt::format("{} {}", method, path_of(url));
  switch (response.status) {
    case 401:
      e.message = fmt::format("unauthorized: the API server rejected these credentials ({}); log in again or refresh the token or certificate in your kubeconfig",
                              server_message.empty() ? "Unauthorized" : server_message);
      break;
    case 403:
      if (e.reason == "Forbidden" && server_message.find("cannot ") != std::string::npos) {
        // RBAC: 'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope'
        e.message = fmt::format("forbidden: {}; ask a cluster admin for the RBAC permission (check with: kubectl auth can-i)", server_message);
      } else {
        e.message = fmt::format("forbidden: {}", server_message.empty() ? what : server_message);
      }
      break;
    case 404:
      e.message = server_message.empty() ? fmt::format("not found: {}", what) : server_message;
      break;
    case 429:
      if (server_message.empty() || !decoded) {
        e.message = fmt::format("the API server is throttling requests ({}){}", server_message.empty() ? "429 Too Many Requests" : server_message,
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

struct Client::TokenFileCache {
  std::mutex mutex;
  std::string token;
  std::chrono::steady_clock::time_point read_at{};
  bool has_read = false;
};

Client::Client(RestConfig config, std::unique_ptr<Transport> transport, ClientOptions options)
    : config_(std::move(config)), transport_(std::move(transport)), options_(std::move(options)) {
  if (config_.exec) exec_ = std::make_unique<ExecCredentialSource>(config_, options_.stdin_is_terminal, ExecCredentialSource::Clock{}, options_.on_wait);
  if (!config_.token_file.empty()) token_file_ = std::make_unique<TokenFileCache>();
}

Client::~Client() = default;

void Client::sleep_for(std::chrono::milliseconds d) const {
  if (d.count() <= 0) return;
  if (options_.sleep) {
    options_.sleep(d);
  } else {
    util::sleep_unless_cancelled(d);  // Ctrl-C ends a retry wait at once (send_impl then stops)
  }
}

Result<std::string> Client::url_for(std::string_view method, std::string_view path, const Query& query) const {
  // Refused before anything is sent: "-n .." must never become a cluster-wide request.
  if (auto problem = paths::unsafe_path_problem(path); !problem.empty()) {
    return fail(Errc::invalid_argument,
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
  return fail(Errc::config, fmt::format("{}: {} contains a control character (a line break?); it cannot be sent as an HTTP header, fix the value",
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

Result<void> Client::authenticate(HttpRequest& request) {
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
  const char* token_field = token_file_ && token == token_file_->token && !token.empty() ? "tokenFile contents" : "token";
  if (exec_) {
    Result<ExecCredential> cred = exec_->get();
    if (!cred) return fail(cred.error());
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
    request.headers.emplace_back("Authorization", "Basic " + detail::base64_encode(config_.username + ":" + config_.password));
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

Result<HttpResponse> Client::send(HttpRequest request) { return send_impl(std::move(request), nullptr); }

Result<HttpResponse> Client::send_impl(HttpRequest request, const BodyChunkHandler* on_chunk) {
  if (request.timeout.count() == 0) request.timeout = options_.request_timeout;
  bool has_accept = std::any_of(request.headers.begin(), request.headers.end(),
                                [](const auto& h) { return h.first == "Accept"; });
  if (!has_accept) request.headers.emplace_back("Accept", "application/json");
  const auto base_headers = request.headers;
  thread_local std::mt19937 rng{std::random_device{}()};

  bool exec_refreshed = false;
  int transport_retries = 0;
  // Watches and streams (timeout 0) have no deadline; a request timeout bounds every retry.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (request.timeout.count() > 0) deadline = std::chrono::steady_clock::now() + request.timeout;
  for (int attempt = 1;; ++attempt) {
    // Interrupted (util/cancel.hpp): send nothing new, not even a retry.
    if (util::cancelled()) return fail(util::cancelled_error(request.method + " request not sent"));
    HttpRequest wire = request;
    wire.headers = base_headers;
    GPUCTL_TRY(authenticate(wire));
    if (deadline) {
      // A retry gets what is left of the call's deadline, never a fresh one.
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      wire.timeout = std::max<std::chrono::milliseconds>(left, 1ms);
    }
    auto started = std::chrono::steady_clock::now();
    Result<HttpResponse> sent = on_chunk ? transport_->send_streaming(wire, *on_chunk) : transport_->send(wire);
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    if (options_.on_request) {
      RequestLog log{wire.method, redact_url(wire.url), sent ? sent->status : 0, elapsed, attempt,
                     sent ? std::string() : redact_urls_in(sent.error().message), {}, false, {}};
      if (sent) {
        log.protocol = sent->protocol;
        log.new_connection = sent->new_connection;
        log.content_encoding = std::string(sent->header("content-encoding"));
      }
      options_.on_request(log);
    }
    if (!sent) {
      // Only reads are retried after a transport failure: a write may have been applied.
      if (sent.error().transient && is_idempotent(wire.method) && attempt <= options_.max_retries &&
          transport_retries < 5) {
        ++transport_retries;
        auto cap = std::min(options_.backoff_cap, options_.backoff_base * (1 << std::min(transport_retries, 10)));
        std::uniform_int_distribution<long long> jitter(cap.count() / 2, std::max<long long>(cap.count(), 1));
        std::chrono::milliseconds backoff(jitter(rng));
        if (deadline && std::chrono::steady_clock::now() + backoff > *deadline) return sent;
        sleep_for(backoff);
        continue;
      }
      return sent;
    }
    HttpResponse& response = *sent;
    if (options_.on_warning) {
      for (auto w : response.headers_named("warning")) options_.on_warning(warning_text(w));
    }
    if (response.status >= 200 && response.status < 300) return sent;

    if (response.status == 401 && exec_ && !exec_refreshed) {
      // Credentials from an exec plugin may have been revoked early: run it again, once.
      exec_refreshed = true;
      auto stale = exec_->get();
      if (stale) {
        auto fresh = exec_->refresh(*stale);
        if (!fresh) return fail(fresh.error());
      }
      continue;
    }
    Error error = decode_api_error(response, wire.method, wire.url);
    bool retryable = (response.status == 429 || response.status >= 500) && error.retry_after_seconds.has_value();
    // The eviction API's budget-exhausted 429 carries no Retry-After: callers loop on it themselves.
    if (retryable && attempt <= options_.max_retries) {
      auto wait = std::max<std::chrono::milliseconds>(
          std::min<std::chrono::milliseconds>(std::chrono::seconds(*error.retry_after_seconds), options_.retry_after_cap), 1ms);
      if (deadline && std::chrono::steady_clock::now() + wait > *deadline) {
        return fail(Errc::timeout, fmt::format("{} {}: the API server is throttling requests (HTTP {}, Retry-After {}s) and waiting would pass --request-timeout {}s; retry later or raise --request-timeout",
                                               wire.method, path_of(wire.url), response.status, *error.retry_after_seconds,
                                               fmt::format("{:g}", static_cast<double>(request.timeout.count()) / 1000.0)));
      }
      if (options_.on_wait && wait >= 1s) {
        options_.on_wait(fmt::format("waiting {}s: the API server is throttling requests ({}, Retry-After)",
                                     std::chrono::duration_cast<std::chrono::seconds>(wait).count(), response.status));
      }
      sleep_for(wait);
      continue;
    }
    return fail(std::move(error));
  }
}

namespace {
Result<json> parse_json_body(const HttpResponse& response, std::string_view what) {
  if (response.body.empty()) return json::object();
  auto parsed = json::parse(response.body, nullptr, false);
  if (parsed.is_discarded()) {
    return fail(Errc::parse, fmt::format("{}: the API server's answer is not valid JSON ({} bytes, starts with \"{}\")", what,
                                         response.body.size(), collapse_whitespace(response.body.substr(0, 60))));
  }
  return parsed;
}
}  // namespace

Result<json> Client::get(std::string_view path, const Query& query) {
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("GET", path, query));
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  // A 200 with no object (an empty body, null, [] from a broken proxy) is not "nothing there".
  if (resp.body.empty()) return fail(Errc::parse, fmt::format("GET {}: the API server answered 200 with an empty body (expected a JSON object)", path));
  GPUCTL_TRY_ASSIGN(json object, parse_json_body(resp, fmt::format("GET {}", path)));
  if (!object.is_object()) {
    return fail(Errc::parse, fmt::format("GET {}: the API server answered with a JSON {} (expected an object)", path, object.type_name()));
  }
  return object;
}

Result<std::string> Client::get_text(std::string_view path, const Query& query) {
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("GET", path, query));
  GPUCTL_TRY_ASSIGN(HttpResponse resp, send(std::move(req)));
  return std::move(resp.body);
}

namespace {
Query write_query_params(const WriteOptions& options, Query query = {}) {
  query.add_if(options.dry_run, "dryRun", "All");
  query.add_if(!options.field_validation.empty(), "fieldValidation", options.field_validation);
  query.add_if(!options.field_manager.empty(), "fieldManager", options.field_manager);
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
    case PatchType::strategic_merge: req.headers.emplace_back("Content-Type", "application/strategic-merge-patch+json"); break;
    case PatchType::json_patch: req.headers.emplace_back("Content-Type", "application/json-patch+json"); break;
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

Result<ListResult> Client::list(std::string_view path, const ListOptions& options) {
  ListResult result;
  std::string token;
  for (;;) {
    Query query;
    query.add_if(!options.label_selector.empty(), "labelSelector", options.label_selector);
    query.add_if(!options.field_selector.empty(), "fieldSelector", options.field_selector);
    query.add_if(options.limit > 0, "limit", std::to_string(options.limit));
    // resourceVersion must not accompany continue; the token pins the snapshot itself.
    query.add_if(options.from_cache && token.empty(), "resourceVersion", "0");
    query.add_if(!token.empty(), "continue", token);
    auto page = get(path, query);
    if (!page) {
      if (page.error().is_gone() && !token.empty()) {
        if (options.accept_inconsistent && !page.error().continue_token.empty()) {
          token = page.error().continue_token;
          continue;
        }
        if (result.restarts >= options.max_restarts) {
          return fail(page.error().with_context(fmt::format(
              "listing {} expired {} times in a row (the cluster changes faster than the list can be read); retry, or raise the page size",
              path, result.restarts + 1)));
        }
        ++result.restarts;
        result.items.clear();
        result.pages = 0;
        token.clear();
        continue;
      }
      return fail(page.error());
    }
    ++result.pages;
    auto items = page->find("items");
    if (items == page->end() || !items->is_array()) {
      return fail(Errc::parse, fmt::format("GET {}: the API server's list answer has {} (expected an \"items\" array); a proxy in between may be broken",
                                           path, items == page->end() ? "no \"items\"" : fmt::format("\"items\" as a JSON {}", items->type_name())));
    }
    for (auto& item : *items) result.items.push_back(std::move(item));
    // string_field: a resourceVersion or continue token that is not a string reads as absent
    // (json::value() would throw type_error.302 on it).
    const json& metadata = field(*page, "metadata");
    result.resource_version = string_field(metadata, "resourceVersion");
    std::string next = string_field(metadata, "continue");
    if (next.empty() || options.limit <= 0) break;
    // A server whose continue token never changes would page forever.
    if (next == token) {
      return fail(Errc::api, fmt::format("GET {}: the API server sent the same continue token twice; the list would never end", path));
    }
    if (result.pages >= kMaxListPages) {
      return fail(Errc::api, fmt::format("GET {}: the list did not end after {} pages (the limit); the API server keeps sending continue tokens", path, kMaxListPages));
    }
    token = std::move(next);
  }
  return result;
}

Result<void> Client::watch(std::string_view path, const WatchOptions& options,
                           const std::function<bool(const WatchEvent&)>& on_event) {
  Query query;
  query.add("watch", "1");
  query.add_if(!options.label_selector.empty(), "labelSelector", options.label_selector);
  query.add_if(!options.field_selector.empty(), "fieldSelector", options.field_selector);
  query.add_if(!options.resource_version.empty(), "resourceVersion", options.resource_version);
  query.add_if(options.allow_bookmarks, "allowWatchBookmarks", "true");
  query.add_if(options.timeout_seconds > 0, "timeoutSeconds", std::to_string(options.timeout_seconds));
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("WATCH", path, query));
  // The server ends the watch after timeoutSeconds; give it room before we give up ourselves.
  req.timeout = options.timeout_seconds > 0 ? std::chrono::seconds(options.timeout_seconds + 30) : std::chrono::milliseconds(0);

  std::string buffer;
  std::optional<Error> watch_error;
  bool stopped = false;
  BodyChunkHandler handler = [&](std::string_view chunk) {
    buffer.append(chunk);
    std::size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      if (line.empty()) continue;
      auto event = json::parse(line, nullptr, false);
      if (!event.is_object()) {
        watch_error = fail(Errc::parse, fmt::format("watch {}: the API server sent an event that is not JSON", path)).error();
        return false;
      }
      WatchEvent ev{string_field(event, "type"), event.value("object", json::object())};
      if (ev.type == "ERROR") {
        HttpResponse fake;
        const json& code = field(ev.object, "code");
        fake.status = code.is_number_integer() && code >= 100 && code <= 599 ? code.get<int>() : 500;
        fake.headers.emplace_back("content-type", "application/json");
        fake.body = ev.object.dump();
        watch_error = decode_api_error(fake, "WATCH", req.url);
        return false;
      }
      if (!on_event(ev)) {
        stopped = true;
        return false;
      }
    }
    return true;
  };
  auto resp = send_impl(std::move(req), &handler);
  if (watch_error) return fail(*watch_error);
  if (!resp) {
    if (stopped) return {};
    return fail(resp.error());
  }
  return {};
}

Result<void> Client::stream_text(std::string_view path, const Query& query,
                                 const std::function<bool(std::string_view)>& on_chunk) {
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("GET", path, query));
  req.timeout = std::chrono::milliseconds(0);
  BodyChunkHandler handler = [&](std::string_view chunk) { return on_chunk(chunk); };
  GPUCTL_TRY(send_impl(std::move(req), &handler));
  return {};
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
