// One request through the whole pipeline: credentials, the -v log, Warning headers, and retries
// as client-go does them (Retry-After on 429/5xx, backoff with jitter for reads that failed in
// transport, one exec-plugin refresh on 401), all within the call's deadline.
#include "gpuctl/kube/client.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "gpuctl/kube/exec_credential.hpp"
#include "gpuctl/util/cancel.hpp"
#include "kube/client_internal.hpp"

namespace gpuctl::kube {

using namespace std::chrono_literals;

namespace {

bool is_idempotent(std::string_view method) { return method == "GET"; }

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

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// The -v log of one attempt; never carries credentials.
void report_request(const ClientOptions& options, const HttpRequest& wire, const Result<HttpResponse>& sent,
                    std::chrono::milliseconds elapsed, int attempt) {
  if (!options.on_request) return;
  RequestLog log{wire.method,
                 redact_url(wire.url),
                 sent ? sent->status : 0,
                 elapsed,
                 attempt,
                 sent ? std::string() : redact_urls_in(sent.error().message),
                 {},
                 false,
                 {},
                 {}};
  if (sent) {
    log.protocol = sent->protocol;
    log.new_connection = sent->new_connection;
    log.content_encoding = std::string(sent->header("content-encoding"));
    std::string_view type = sent->header("content-type");
    log.content_type = std::string(type.substr(0, std::min(type.find(';'), type.size())));
  }
  options.on_request(log);
}

// The wait before retrying a transport failure: only reads are retried (a write may have been
// applied), at most 5 times, with exponential backoff and jitter. Counts the retry.
std::optional<std::chrono::milliseconds> transport_backoff(const ClientOptions& options, const Error& failure,
                                                           std::string_view method, int attempt, int& transport_retries,
                                                           std::mt19937& rng) {
  if (!failure.transient || !is_idempotent(method) || attempt > options.max_retries || transport_retries >= 5) {
    return std::nullopt;
  }
  ++transport_retries;
  auto cap = std::min(options.backoff_cap, options.backoff_base * (1 << std::min(transport_retries, 10)));
  std::uniform_int_distribution<long long> jitter(cap.count() / 2, std::max<long long>(cap.count(), 1));
  return std::chrono::milliseconds(jitter(rng));
}

// The wait before retrying a throttled or failing answer that carries Retry-After (clamped to the
// cap), announced through on_wait when it is a second or more; nullopt when the answer is not
// retried; an error when waiting would pass the call's deadline. The eviction API's
// budget-exhausted 429 carries no Retry-After: callers loop on it themselves.
Result<std::optional<std::chrono::milliseconds>> throttle_wait(const ClientOptions& options, const HttpRequest& request,
                                                               const HttpRequest& wire, const HttpResponse& response,
                                                               const Error& error, int attempt,
                                                               const Deadline& deadline) {
  bool retryable = (response.status == 429 || response.status >= 500) && error.retry_after_seconds.has_value();
  if (!retryable || attempt > options.max_retries) return std::nullopt;
  auto wait = std::max<std::chrono::milliseconds>(
      std::min<std::chrono::milliseconds>(std::chrono::seconds(*error.retry_after_seconds), options.retry_after_cap),
      1ms);
  if (deadline && std::chrono::steady_clock::now() + wait > *deadline) {
    return fail(Errc::timeout,
                fmt::format("{} {}: the API server is throttling requests (HTTP {}, Retry-After {}s) and waiting would "
                            "pass --request-timeout {}s; retry later or raise --request-timeout",
                            wire.method, detail::path_of(wire.url), response.status, *error.retry_after_seconds,
                            fmt::format("{:g}", static_cast<double>(request.timeout.count()) / 1000.0)));
  }
  if (options.on_wait && wait >= 1s) {
    options.on_wait(fmt::format("waiting {}s: the API server is throttling requests ({}, Retry-After)",
                                std::chrono::duration_cast<std::chrono::seconds>(wait).count(), response.status));
  }
  return wait;
}

}  // namespace

void Client::sleep_for(std::chrono::milliseconds d) const {
  if (d.count() <= 0) return;
  if (options_.sleep) {
    options_.sleep(d);
  } else {
    util::sleep_unless_cancelled(d);  // Ctrl-C ends a retry wait at once (send_impl then stops)
  }
}

Result<HttpResponse> Client::send(HttpRequest request) { return send_impl(std::move(request), nullptr); }

Result<HttpResponse> Client::send_impl(HttpRequest request, const BodyChunkHandler* on_chunk) {
  if (request.timeout.count() == 0) request.timeout = options_.request_timeout;
  bool has_accept =
      std::any_of(request.headers.begin(), request.headers.end(), [](const auto& h) { return h.first == "Accept"; });
  if (!has_accept) request.headers.emplace_back("Accept", "application/json");
  const auto base_headers = request.headers;
  thread_local std::mt19937 rng{std::random_device{}()};

  bool exec_refreshed = false;
  int transport_retries = 0;
  // Watches and streams (timeout 0) have no deadline; a request timeout bounds every retry.
  Deadline deadline;
  if (request.timeout.count() > 0) deadline = std::chrono::steady_clock::now() + request.timeout;
  for (int attempt = 1;; ++attempt) {
    // Interrupted (util/cancel.hpp): send nothing new, not even a retry, except the clean-up the
    // interrupted operation owes (util::CleanupScope).
    if (util::cancelled() && !util::in_cleanup_scope())
      return fail(util::cancelled_error(request.method + " request not sent"));
    HttpRequest wire = request;
    wire.headers = base_headers;
    std::optional<ExecCredential> sent_with;
    GPUCTL_TRY(authenticate(wire, &sent_with));
    if (deadline) {
      // A retry gets what is left of the call's deadline, never a fresh one.
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      wire.timeout = std::max<std::chrono::milliseconds>(left, 1ms);
    }
    auto started = std::chrono::steady_clock::now();
    Result<HttpResponse> sent = on_chunk ? transport_->send_streaming(wire, *on_chunk) : transport_->send(wire);
    report_request(options_, wire, sent,
                   std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started),
                   attempt);
    if (!sent) {
      auto backoff = transport_backoff(options_, sent.error(), wire.method, attempt, transport_retries, rng);
      if (!backoff || (deadline && std::chrono::steady_clock::now() + *backoff > *deadline)) return sent;
      sleep_for(*backoff);
      continue;
    }
    HttpResponse& response = *sent;
    if (options_.on_warning) {
      for (auto w : response.headers_named("warning")) options_.on_warning(warning_text(w));
    }
    if (response.status >= 200 && response.status < 300) return sent;

    if (response.status == 401 && exec_ && !exec_refreshed) {
      // Credentials from an exec plugin may have been revoked early: run it again, once.
      // The credential this request carried: when another thread's 401 already replaced it,
      // refresh() hands out the new one instead of running the plugin again.
      exec_refreshed = true;
      if (sent_with) {
        auto fresh = exec_->refresh(*sent_with);
        if (!fresh) return fail(fresh.error());
      }
      continue;
    }
    Error error = decode_api_error(response, wire.method, wire.url);
    GPUCTL_TRY_ASSIGN(auto wait, throttle_wait(options_, request, wire, response, error, attempt, deadline));
    if (!wait) return fail(std::move(error));
    sleep_for(*wait);
  }
}

}  // namespace gpuctl::kube
