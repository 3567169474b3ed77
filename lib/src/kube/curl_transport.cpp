// libcurl behind the Transport interface. Private to the library: no public header includes
// curl. Easy handles are pooled so several threads (parallel drains) can send at once, and a
// share handle lets them reuse connections, TLS sessions and DNS answers. libcurl itself is
// loaded on the first request (curl_library.hpp), so commands that send none never load it.

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "curl_library.hpp"
#include "gpuctl/kube/transport.hpp"
#include "gpuctl/util/cancel.hpp"

namespace gpuctl::kube {
namespace {

struct EasyDeleter {
  const CurlLibrary* curl = nullptr;
  void operator()(CURL* h) const { curl->easy_cleanup(h); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;

struct SlistDeleter {
  const CurlLibrary* curl = nullptr;
  void operator()(curl_slist* l) const {
    if (l != nullptr) curl->slist_free_all(l);
  }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Splits "https://host:port/path" into its parts; enough for rewriting the host for
// tls-server-name. Returns false when the URL has no scheme.
struct UrlParts {
  std::string scheme, host, port, rest;
};
bool split_url(const std::string& url, UrlParts& out) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return false;
  out.scheme = url.substr(0, scheme_end);
  auto host_start = scheme_end + 3;
  auto path_start = url.find('/', host_start);
  std::string authority =
      url.substr(host_start, path_start == std::string::npos ? std::string::npos : path_start - host_start);
  out.rest = path_start == std::string::npos ? "" : url.substr(path_start);
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    auto close = authority.find(']');
    out.host = authority.substr(0, close + 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') out.port = authority.substr(close + 2);
  } else {
    auto colon = authority.rfind(':');
    out.host = colon == std::string::npos ? authority : authority.substr(0, colon);
    out.port = colon == std::string::npos ? "" : authority.substr(colon + 1);
  }
  if (out.port.empty()) out.port = out.scheme == "https" ? "443" : "80";
  return true;
}

struct Exchange {
  HttpResponse response;
  const BodyChunkHandler* on_chunk = nullptr;
  bool stopped_by_handler = false;
  bool body_too_large = false;
  bool status_seen = false;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    // A new response (after a redirect or a 100 Continue): start over.
    ex->response.headers.clear();
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      ex->response.status = std::atoi(std::string(line.substr(sp + 1, 3)).c_str());
    }
    ex->status_seen = true;
    return size * count;
  }
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    ex->response.headers.emplace_back(lower(std::string(line.substr(0, colon))), trim(line.substr(colon + 1)));
  }
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  std::string_view chunk(data, size * count);
  bool success = ex->response.status >= 200 && ex->response.status < 300;
  if (ex->on_chunk != nullptr && success) {
    if (!(*ex->on_chunk)(chunk)) {
      ex->stopped_by_handler = true;
      return 0;  // makes curl stop with CURLE_WRITE_ERROR, which we treat as a clean stop
    }
    return chunk.size();
  }
  // Counted after decompression (curl hands us decoded bytes): a 1 MB gzip bomb stops here.
  if (ex->response.body.size() + chunk.size() > kMaxResponseBodyBytes) {
    ex->body_too_large = true;
    return 0;
  }
  ex->response.body.append(chunk);
  return chunk.size();
}

// What one request's curl options point at: it outlives curl_easy_perform.
struct RequestState {
  explicit RequestState(const CurlLibrary* curl) : headers(nullptr, {curl}), connect_to_list(nullptr, {curl}) {}
  Exchange ex;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  std::string url;
  Slist headers;
  std::string connect_to;
  Slist connect_to_list;
  curl_blob ca_blob{};
  curl_blob cert_blob{};
  curl_blob key_blob{};
};

// Ctrl-C or SIGTERM (util/cancel.hpp) abandons a read or a watch within about a second; a write
// in flight is left to finish, so the server has applied it whole or not at all and we know which.
int abandon_when_cancelled(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) { return util::cancelled() ? 1 : 0; }

class CurlTransport final : public Transport {
 public:
  explicit CurlTransport(TransportSettings settings) : settings_(std::move(settings)) {}
  ~CurlTransport() override {
    pool_.clear();  // easy handles must go before the share handle
    if (share_ != nullptr) curl_->share_cleanup(share_);
  }
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<HttpResponse> send(const HttpRequest& request) override {
    GPUCTL_TRY(ready());
    return perform(request, nullptr);
  }
  Result<HttpResponse> send_streaming(const HttpRequest& request, const BodyChunkHandler& on_chunk) override {
    GPUCTL_TRY(ready());
    return perform(request, &on_chunk);
  }

 private:
  // libcurl and the share handle, on the first request (from whichever thread sends it first).
  Result<void> ready() {
    std::lock_guard guard(pool_mutex_);
    if (curl_ != nullptr) return {};
    GPUCTL_TRY_ASSIGN(const CurlLibrary* curl, curl_library());
    share_ = curl->share_init();
    if (share_ == nullptr) return fail(Errc::internal, "libcurl could not create a share handle");
    curl->share_setopt(share_, CURLSHOPT_LOCKFUNC, &CurlTransport::lock);
    curl->share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &CurlTransport::unlock);
    curl->share_setopt(share_, CURLSHOPT_USERDATA, this);
    curl->share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl->share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl->share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_ = curl;
    return {};
  }

  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<CurlTransport*>(user)->share_locks_[static_cast<size_t>(data) % kLocks].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* user) {
    static_cast<CurlTransport*>(user)->share_locks_[static_cast<size_t>(data) % kLocks].unlock();
  }

  EasyHandle acquire() {
    std::lock_guard guard(pool_mutex_);
    if (!pool_.empty()) {
      EasyHandle h = std::move(pool_.back());
      pool_.pop_back();
      return h;
    }
    return EasyHandle(curl_->easy_init(), EasyDeleter{curl_});
  }
  void release(EasyHandle h) {
    std::lock_guard guard(pool_mutex_);
    pool_.push_back(std::move(h));
  }

  // The URL, and for tls-server-name the connect-to rule and Host header that keep the configured
  // address while TLS verifies (and SNI names) the TLS name; then the request's own headers.
  void set_target(CURL* h, const HttpRequest& request, RequestState& st) const {
    st.url = request.url;
    auto add_header = [this, &st](const std::string& line) {
      st.headers.reset(curl_->slist_append(st.headers.release(), line.c_str()));
    };
    if (!settings_.tls_server_name.empty()) {
      // Verify (and send SNI for) tls-server-name while connecting to the configured address:
      // address the URL to the TLS name and tell curl where that name really lives.
      UrlParts parts;
      if (split_url(st.url, parts)) {
        st.connect_to = fmt::format("{}:{}:{}:{}", settings_.tls_server_name, parts.port, parts.host, parts.port);
        st.connect_to_list.reset(curl_->slist_append(nullptr, st.connect_to.c_str()));
        add_header(fmt::format("Host: {}:{}", parts.host, parts.port));
        st.url = fmt::format("{}://{}:{}{}", parts.scheme, settings_.tls_server_name, parts.port, parts.rest);
        curl_->setopt(h, CURLOPT_CONNECT_TO, st.connect_to_list.get());
      }
    }
    for (const auto& [name, value] : request.headers) add_header(name + ": " + value);
    add_header("Expect:");  // no 100-continue round trip for request bodies
  }

  void set_connection_options(CURL* h, const HttpRequest& request, RequestState& st) const {
    curl_->setopt(h, CURLOPT_URL, st.url.c_str());
    curl_->setopt(h, CURLOPT_SHARE, share_);
    curl_->setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_->setopt(h, CURLOPT_ERRORBUFFER, st.error_buffer);
    curl_->setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    curl_->setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_->setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    // Never resolve "." or ".." segments: the path sent is the path the client checked.
    curl_->setopt(h, CURLOPT_PATH_AS_IS, 1L);
    if (!settings_.disable_compression) curl_->setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    if (!settings_.user_agent.empty()) curl_->setopt(h, CURLOPT_USERAGENT, settings_.user_agent.c_str());
    curl_->setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings_.connect_timeout.count()));
    auto timeout = request.timeout.count() > 0 ? request.timeout : settings_.request_timeout;
    curl_->setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  }

  // Verification, the CA, the client certificate (the request's: an exec plugin may supply it) and
  // the proxy.
  void set_tls_options(CURL* h, const HttpRequest& request, RequestState& st) const {
    if (settings_.insecure_skip_tls_verify) {
      curl_->setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_->setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
      curl_->setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
      curl_->setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    }
    if (!settings_.ca_pem.empty()) {
      st.ca_blob = curl_blob{const_cast<char*>(settings_.ca_pem.data()), settings_.ca_pem.size(), CURL_BLOB_NOCOPY};
      curl_->setopt(h, CURLOPT_CAINFO_BLOB, &st.ca_blob);
    }
    if (!request.client_cert_pem.empty()) {
      st.cert_blob = curl_blob{const_cast<char*>(request.client_cert_pem.data()), request.client_cert_pem.size(),
                               CURL_BLOB_NOCOPY};
      st.key_blob =
          curl_blob{const_cast<char*>(request.client_key_pem.data()), request.client_key_pem.size(), CURL_BLOB_NOCOPY};
      curl_->setopt(h, CURLOPT_SSLCERT_BLOB, &st.cert_blob);
      curl_->setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
      curl_->setopt(h, CURLOPT_SSLKEY_BLOB, &st.key_blob);
      curl_->setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (!settings_.proxy_url.empty()) curl_->setopt(h, CURLOPT_PROXY, settings_.proxy_url.c_str());
  }

  // The method, the body, the header list, the callbacks that fill `st.ex`, and for reads the
  // progress callback that abandons them on Ctrl-C.
  void set_method_and_body(CURL* h, const HttpRequest& request, RequestState& st) const {
    if (request.method == "GET") {
      curl_->setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (request.method == "POST") {
      curl_->setopt(h, CURLOPT_POST, 1L);
    } else {
      curl_->setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    if (request.method != "GET") {
      curl_->setopt(h, CURLOPT_POSTFIELDS, request.body.c_str());
      curl_->setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    }
    curl_->setopt(h, CURLOPT_HTTPHEADER, st.headers.get());
    curl_->setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
    curl_->setopt(h, CURLOPT_HEADERDATA, &st.ex);
    curl_->setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
    curl_->setopt(h, CURLOPT_WRITEDATA, &st.ex);
    if (request.method == "GET") {
      curl_->setopt(h, CURLOPT_XFERINFOFUNCTION, &abandon_when_cancelled);
      curl_->setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
  }

  // The protocol spoken and whether a new connection was opened, for the -v request log.
  void read_connection_info(CURL* h, HttpResponse& response) const {
    long http_version = 0;
    long new_connections = 0;
    curl_->easy_getinfo(h, CURLINFO_HTTP_VERSION, &http_version);
    curl_->easy_getinfo(h, CURLINFO_NUM_CONNECTS, &new_connections);
    response.protocol = http_version == CURL_HTTP_VERSION_2_0   ? "HTTP/2"
                        : http_version == CURL_HTTP_VERSION_3   ? "HTTP/3"
                        : http_version == CURL_HTTP_VERSION_1_0 ? "HTTP/1.0"
                                                                : "HTTP/1.1";
    response.new_connection = new_connections > 0;
  }

  Result<HttpResponse> perform(const HttpRequest& request, const BodyChunkHandler* on_chunk) {
    EasyHandle handle = acquire();
    if (!handle) return fail(Errc::internal, "libcurl could not create a handle");
    CURL* h = handle.get();
    curl_->easy_reset(h);

    RequestState st(curl_);
    st.ex.on_chunk = on_chunk;
    set_target(h, request, st);
    set_connection_options(h, request, st);
    set_tls_options(h, request, st);
    set_method_and_body(h, request, st);

    CURLcode rc = curl_->easy_perform(h);
    read_connection_info(h, st.ex.response);
    // Options that point at our stack must not outlive this call in the pooled handle.
    curl_->setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_->setopt(h, CURLOPT_CONNECT_TO, nullptr);
    curl_->setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    release(std::move(handle));

    if (rc == CURLE_WRITE_ERROR && st.ex.stopped_by_handler) return std::move(st.ex.response);
    if (rc == CURLE_WRITE_ERROR && st.ex.body_too_large) {
      return fail(Errc::io, fmt::format("{} {}: the API server's answer is larger than {} MiB after decompression (the "
                                        "limit); refusing to read more",
                                        request.method, server_of(request.url), kMaxResponseBodyBytes >> 20));
    }
    if (rc != CURLE_OK) return fail(describe_failure(rc, st.error_buffer, request));
    return std::move(st.ex.response);
  }

  Error describe_failure(CURLcode rc, const char* detail, const HttpRequest& request) const {
    std::string why = redact_urls_in(detail[0] != '\0' ? detail : curl_->easy_strerror(rc));
    std::string where = server_of(request.url);
    Error e;
    e.code = Errc::transport;
    switch (rc) {
      case CURLE_ABORTED_BY_CALLBACK:
        return util::cancelled_error(fmt::format("{} request to {} abandoned", request.method, where));
      case CURLE_OPERATION_TIMEDOUT:
        e.code = Errc::timeout;
        e.message =
            fmt::format("request to {} timed out ({}); raise --request-timeout or check that the API server is healthy",
                        where, why);
        break;
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
        e.message = fmt::format(
            "cannot resolve the API server {} ({}); check the server field of the cluster in your kubeconfig", where,
            why);
        break;
      case CURLE_COULDNT_CONNECT:
        if (!settings_.proxy_url.empty()) {
          e.message = fmt::format(
              "cannot connect to the API server {} through the proxy {} ({}); is the proxy running, and is the "
              "kubeconfig's proxy-url right?",
              where, redact_url(settings_.proxy_url), why);
        } else {
          e.message = fmt::format(
              "cannot connect to the API server {} ({}); is it running and is the kubeconfig's server address right?",
              where, why);
        }
        break;
      case CURLE_PROXY:
        e.message = fmt::format(
            "the proxy {} refused to connect to the API server {} ({}); check the kubeconfig's proxy-url and the "
            "proxy's rules",
            redact_url(settings_.proxy_url), where, why);
        break;
      case CURLE_PEER_FAILED_VERIFICATION:
        e.message = fmt::format(
            "the API server {} presented a certificate that could not be verified ({}); check "
            "certificate-authority(-data) or tls-server-name in your kubeconfig",
            where, why);
        break;
      case CURLE_SSL_CONNECT_ERROR:
        // A reset or EOF in the handshake is the server going away, not bad credentials.
        if (why.find("reset") != std::string::npos || why.find("EOF") != std::string::npos ||
            why.find("Connection closed") != std::string::npos || why.find("unexpected eof") != std::string::npos) {
          e.transient = true;
          e.message = fmt::format(
              "the API server {} closed the connection during the TLS handshake ({}); retry, or check that it is "
              "healthy",
              where, why);
          break;
        }
        [[fallthrough]];
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CIPHER:
      case CURLE_SSL_CACERT_BADFILE:
        e.message = fmt::format(
            "TLS handshake with {} failed ({}); check the client certificate, key and CA in your kubeconfig", where,
            why);
        break;
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_PARTIAL_FILE:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        // The connection broke mid-exchange (reset, EOF, HTTP/2 GOAWAY): worth a retry for reads.
        e.transient = true;
        e.message = fmt::format("the connection to {} broke ({}); retry, or check the API server and any proxy between",
                                where, why);
        break;
      default: e.message = fmt::format("request to {} failed: {}", where, why); break;
    }
    return e;
  }

  static std::string server_of(const std::string& url) {
    UrlParts parts;
    if (!split_url(url, parts)) return redact_url(url);
    return redact_url(parts.scheme + "://" + parts.host + ":" + parts.port);
  }

  static constexpr size_t kLocks = 8;
  TransportSettings settings_;
  const CurlLibrary* curl_ = nullptr;  // set by ready()
  CURLSH* share_ = nullptr;
  std::mutex share_locks_[kLocks];
  std::mutex pool_mutex_;
  std::vector<EasyHandle> pool_;
};

}  // namespace

std::unique_ptr<Transport> make_curl_transport(const TransportSettings& settings) {
  return std::make_unique<CurlTransport>(settings);
}

}  // namespace gpuctl::kube
