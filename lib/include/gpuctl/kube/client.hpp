#pragma once
// The Kubernetes REST client: authentication, retries as client-go does them, Status bodies
// decoded into typed errors, paginated lists that survive 410 Expired, and watches.
// Callers pass API paths built by gpuctl/kube/paths.hpp; nothing here knows about GPUs.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/config.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/kube/transport.hpp"

namespace gpuctl::kube {

namespace proto {
struct Message;  // protobuf.hpp
}

// Query parameters, percent-encoded when rendered.
class Query {
 public:
  Query() = default;
  Query& add(std::string key, std::string value) {
    params_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  Query& add_if(bool condition, std::string key, std::string value) {
    if (condition) add(std::move(key), std::move(value));
    return *this;
  }
  bool empty() const { return params_.empty(); }
  // "?a=b&c=d" or "" when empty.
  std::string encode() const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

std::string percent_encode(std::string_view text);

enum class PatchType {
  merge,            // application/merge-patch+json (RFC 7386)
  strategic_merge,  // application/strategic-merge-patch+json (built-in types only)
  json_patch,       // application/json-patch+json (RFC 6902)
  apply,            // application/apply-patch+yaml: server-side apply (JSON is YAML); needs field_manager
};

struct WriteOptions {
  bool dry_run = false;          // dryRun=All: full admission and validation, nothing persisted
  std::string field_validation;  // "Strict", "Warn" or "Ignore"; empty: the server's default
  std::string field_manager;     // fieldManager=...
  bool force = false;            // force=true: a server-side apply takes over conflicting fields
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  // Page size (limit=); 0 turns pagination off.
  int limit = 500;
  // Serve from the API server's watch cache (resourceVersion=0): cheaper, possibly stale.
  bool from_cache = false;
  // On 410 Expired mid-list, continue with the token the server offers (no longer one
  // consistent snapshot) instead of restarting the list from the beginning.
  bool accept_inconsistent = false;
  // How many times a list may restart after 410 Expired before giving up.
  int max_restarts = 3;
  // The fields of each item to decode (projection.hpp); the rest is never built. Default: all.
  Projection fields;
  // The items' protobuf schema (protobuf.hpp, e.g. proto::pod()): the list is asked for in
  // protobuf, with JSON as the server's fallback, when the schema covers `fields`; the items
  // are the same JSON either way. nullptr: JSON.
  const proto::Message* protobuf = nullptr;
  // Ask for the items' metadata only (a meta.k8s.io/v1 PartialObjectMetadataList; JSON when the
  // server cannot): a node's name without its 5-10 KiB of status. Wins over `protobuf`.
  bool metadata_only = false;
};

// Where list_pages hands each page as soon as it is decoded; the page is freed after.
struct ListPageSink {
  // The page's items, projected as ListOptions::fields says; the callee may move from them.
  // An error stops the list and is returned by list_pages.
  std::function<Result<void>(std::vector<nlohmann::json>& items)> on_items;
  // The list restarted from its beginning after 410 Expired: forget every page handed so far.
  std::function<void()> on_restart;
};

struct ListSummary {
  std::string resource_version;  // of the (last) list, for a following watch
  int pages = 0;
  int restarts = 0;  // restarts after 410 Expired
};

struct ListResult : ListSummary {
  std::vector<nlohmann::json> items;
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  nlohmann::json object;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version; empty: from "now" (with ADDED for existing)
  int timeout_seconds = 0;       // server-side timeoutSeconds; 0: the server's default
  bool allow_bookmarks = true;
};

// One finished HTTP exchange, reported for -v. Never contains credentials.
struct RequestLog {
  std::string method;
  std::string url;
  int status = 0;  // 0 when no answer came
  std::chrono::milliseconds duration{0};
  int attempt = 1;
  std::string error;             // transport failure, if any
  std::string protocol;          // "HTTP/2", "HTTP/1.1"
  bool new_connection = false;   // false: a kept-alive connection was reused
  std::string content_encoding;  // "gzip" when the server compressed the answer
  std::string content_type;      // the answer's media type, e.g. "application/json"
};

struct ClientOptions {
  // Per-request deadline (--request-timeout); zero: none. Watches use their own. It also bounds
  // the whole call: retries and Retry-After waits that would pass it are not started.
  std::chrono::milliseconds request_timeout{0};
  // Retries of 429/5xx answers that carry Retry-After, and of GETs that failed in transport.
  int max_retries = 10;
  // Backoff for transport retries of GETs: base * 2^attempt with jitter, capped.
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_cap{10000};
  // Longest Retry-After we honour per attempt; larger values are clamped.
  std::chrono::milliseconds retry_after_cap{60000};
  // Injected so tests do not sleep; defaults to std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<void(const RequestLog&)> on_request;  // -v
  std::function<void(std::string_view)> on_warning;   // text of each Warning: header
  // Said before each wait of 1 s or more for a throttling server (429/5xx with Retry-After),
  // e.g. "waiting 5s: the API server is throttling requests (429, Retry-After)", and when an
  // exec credential plugin is still running after a few seconds: what gpuctl is waiting for.
  std::function<void(std::string_view)> on_wait;
  bool stdin_is_terminal = false;  // exec plugins may prompt only then
};

class ExecCredentialSource;
struct ExecCredential;

class Client {
 public:
  Client(RestConfig config, std::unique_ptr<Transport> transport, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const RestConfig& config() const { return config_; }

  // The full pipeline for one request: credentials, retries, warnings, and any non-2xx answer
  // turned into an Error (Errc::api) with the server's Status decoded.
  Result<HttpResponse> send(HttpRequest request);

  Result<nlohmann::json> get(std::string_view path, const Query& query = {});
  Result<std::string> get_text(std::string_view path, const Query& query = {});
  // The same within a deadline of its own, retries included (the shorter of it and
  // ClientOptions::request_timeout): reads that are worth less than waiting, such as a pod log
  // proxied to a kubelet that may be gone.
  Result<std::string> get_text(std::string_view path, const Query& query, std::chrono::milliseconds timeout);
  // All pages of a list (limit/continue), restarting on 410 Expired as ListOptions says.
  Result<ListResult> list(std::string_view path, const ListOptions& options = {});
  // The same list, page by page: memory holds one page, not the whole list. Readers that fold
  // items into a summary (counts per node) use this with a projection.
  Result<ListSummary> list_pages(std::string_view path, const ListOptions& options, const ListPageSink& sink);
  Result<nlohmann::json> create(std::string_view path, const nlohmann::json& body, const WriteOptions& options = {});
  Result<nlohmann::json> replace(std::string_view path, const nlohmann::json& body, const WriteOptions& options = {});
  Result<nlohmann::json> patch(std::string_view path, PatchType type, const nlohmann::json& body,
                               const WriteOptions& options = {});
  // DELETE with an optional DeleteOptions body (e.g. {"propagationPolicy":"Background"}).
  Result<nlohmann::json> remove(std::string_view path, const nlohmann::json& delete_options = nullptr,
                                const WriteOptions& options = {});

  // Streams watch events to `on_event` until it returns false, the server ends the watch, or
  // an ERROR event arrives (returned as an Error; 410 means: list again and re-watch).
  Result<void> watch(std::string_view path, const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& on_event);
  // Streams a text body (pod logs with follow=true) chunk by chunk.
  Result<void> stream_text(std::string_view path, const Query& query,
                           const std::function<bool(std::string_view)>& on_chunk);

  // The user name the API server knows these credentials as (SelfSubjectReview); falls back
  // to the kubeconfig's user name when the server does not offer the API.
  Result<std::string> whoami();

 private:
  // GET path?query, the answer undecoded (non-2xx already turned into an Error); `accept`: the
  // Accept header (default JSON).
  Result<HttpResponse> fetch(std::string_view path, const Query& query, std::string_view accept = {});
  Result<HttpResponse> send_impl(HttpRequest request, const BodyChunkHandler* on_chunk);
  // Sets the request's credentials; `sent_with` (when given) receives the exec plugin's
  // credential it used, so a 401 refreshes exactly that one.
  Result<void> authenticate(HttpRequest& request, std::optional<ExecCredential>* sent_with = nullptr);
  Result<std::string> url_for(std::string_view method, std::string_view path, const Query& query) const;
  void sleep_for(std::chrono::milliseconds d) const;

  RestConfig config_;
  std::unique_ptr<Transport> transport_;
  ClientOptions options_;
  std::unique_ptr<ExecCredentialSource> exec_;
  // tokenFile contents, re-read at most once a minute.
  struct TokenFileCache;
  std::unique_ptr<TokenFileCache> token_file_;
};

// The JSON object of a GET answer, decoded through `projection`; an empty body, malformed JSON
// or anything but an object is an Errc::parse error that names `path`.
Result<nlohmann::json> decode_object(const HttpResponse& response, std::string_view path, const Projection& projection);

// Decodes a non-2xx answer into an Error: a Kubernetes Status body when there is one, the
// plain text otherwise (APF 429s, some 500s), with a message that says what to do.
Error decode_api_error(const HttpResponse& response, std::string_view method, std::string_view url);

}  // namespace gpuctl::kube
