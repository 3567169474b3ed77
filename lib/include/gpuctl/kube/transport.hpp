#pragma once
// The seam between gpuctl and the network. Production uses libcurl (make_curl_transport);
// unit tests replay recorded API responses through a fake that implements this interface.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string url;             // absolute: server + path + query
  Headers headers;
  std::string body;
  // Client certificate for this request (PEM); empty for none. Set per request because exec
  // plugins may hand out new certificates while the process runs.
  std::string client_cert_pem;
  std::string client_key_pem;
  // Whole-request deadline; zero means the transport's default.
  std::chrono::milliseconds timeout{0};
};

struct HttpResponse {
  int status = 0;
  Headers headers;  // names lower-cased
  std::string body;
  // How the answer travelled, for -v: "HTTP/1.1", "HTTP/2"; and whether a new connection had
  // to be opened for it (false when a kept-alive one was reused).
  std::string protocol;
  bool new_connection = false;

  // The first header with this (lower-case) name, or "" when absent.
  std::string_view header(std::string_view name) const;
  // Every header with this name, in order (Warning may repeat).
  std::vector<std::string_view> headers_named(std::string_view name) const;
};

// Called with each piece of a streamed body as it arrives; return false to stop the stream.
using BodyChunkHandler = std::function<bool(std::string_view chunk)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends one request. Failing to get any HTTP answer (DNS, connect, TLS, timeout) is an
  // Errc::transport error; every HTTP status, 4xx and 5xx included, is a response.
  virtual Result<HttpResponse> send(const HttpRequest& request) = 0;
  // Like send(), but hands the body to `on_chunk` as it arrives (watches, log follows) when the
  // status is 2xx; error bodies are still returned whole in the response. Stopping the stream
  // from the handler is not an error.
  virtual Result<HttpResponse> send_streaming(const HttpRequest& request, const BodyChunkHandler& on_chunk) = 0;
};

// TLS and connection settings shared by every request of one transport.
struct TransportSettings {
  std::string ca_pem;  // empty: the system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // SNI and the name the certificate must match
  std::string proxy_url;
  bool disable_compression = false;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds request_timeout{0};  // 0: no limit (watches); callers set per request
  std::string user_agent;
};

// The libcurl transport: one reused connection (keep-alive, HTTP/2 when the server offers it),
// gzip, TLS verification on unless told otherwise, CA and client keys taken from memory.
std::unique_ptr<Transport> make_curl_transport(const TransportSettings& settings);

// The one redaction every message and log line that quotes a URL goes through: the userinfo
// of "scheme://user:password@host/..." (server and proxy URLs) becomes "***@", so neither a
// user name nor a password is ever printed. Text without userinfo comes back unchanged.
std::string redact_url(std::string_view url);

// Redacts every URL found in free text (libcurl's error messages quote the proxy URL).
std::string redact_urls_in(std::string_view text);

// The most a response body may grow to, counted after decompression: far above a list of
// 50,000 full pods, far below what exhausts memory (a gzip bomb).
inline constexpr std::size_t kMaxResponseBodyBytes = std::size_t{512} << 20;

}  // namespace gpuctl::kube
