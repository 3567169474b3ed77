#pragma once
// Errors cross the library boundary as values: every fallible public function returns
// Result<T> (std::expected<T, Error>). Exceptions from nlohmann, yaml-cpp and the standard
// library are converted into an Error where they are caught, never thrown to callers.
#include <expected>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpuctl {

// What went wrong, coarsely; the CLI maps these to exit codes in one place.
enum class Errc {
  invalid_argument,  // the user's input is wrong (flags, specs, manifests): exit 2
  config,            // kubeconfig, credentials or local configuration is unusable
  transport,         // the server could not be reached (DNS, connect, TLS, timeout)
  api,               // the API server answered with an error Status
  io,                // a local file could not be read or written
  parse,             // data from the server or a node is malformed
  process,           // a child process (exec plugin, ssh) could not run or failed
  timeout,           // an operation ran past its deadline
  not_served,        // the cluster does not serve an API the request needs (an API version or feature gate off)
  cancelled,         // the caller asked to stop (signal)
  internal,          // a bug in gpuctl
};

// One entry of a Kubernetes Status' details.causes.
struct StatusCause {
  std::string type;  // e.g. "FieldValueInvalid", "DisruptionBudget"
  std::string message;
  std::string field;
};

struct Error {
  Errc code = Errc::internal;
  // One line, for a person: what was refused or failed, on which object, and the fix.
  std::string message;
  // Set for Errc::api (and for HTTP-level transport errors): the HTTP status code.
  int http_status = 0;
  // The Kubernetes Status reason ("Forbidden", "NotFound", "Conflict", "Expired", ...).
  std::string reason;
  std::vector<StatusCause> causes;
  // Seconds the server asked us to wait (Retry-After header or details.retryAfterSeconds).
  std::optional<int> retry_after_seconds;
  // For 410 Expired list errors: the continue token the server offered, if any.
  std::string continue_token;
  // Transport failures that a retry of an idempotent request may get past (connection reset,
  // EOF, a lost HTTP/2 stream), as opposed to refused connections, DNS or TLS errors.
  bool transient = false;

  bool is_not_found() const { return code == Errc::api && http_status == 404; }
  bool is_conflict() const { return code == Errc::api && http_status == 409; }
  bool is_already_exists() const { return code == Errc::api && http_status == 409 && reason == "AlreadyExists"; }
  bool is_gone() const { return code == Errc::api && http_status == 410; }
  bool is_forbidden() const { return code == Errc::api && http_status == 403; }
  bool is_unauthorized() const { return code == Errc::api && http_status == 401; }
  bool is_too_many_requests() const { return code == Errc::api && http_status == 429; }

  // Returns a copy whose message is "<prefix>: <message>".
  Error with_context(const std::string& prefix) const {
    Error e = *this;
    e.message = prefix + ": " + message;
    return e;
  }
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Errc code, std::string message) {
  Error e;
  e.code = code;
  e.message = std::move(message);
  return std::unexpected<Error>(std::move(e));
}
inline std::unexpected<Error> fail(Error error) { return std::unexpected<Error>(std::move(error)); }

}  // namespace gpuctl

#define GPUCTL_CONCAT_INNER(a, b) a##b
#define GPUCTL_CONCAT(a, b) GPUCTL_CONCAT_INNER(a, b)

// GPUCTL_TRY(expr): return the error of a failed Result from the enclosing function.
#define GPUCTL_TRY(expr)                                                                   \
  do {                                                                                     \
    auto&& gpuctl_try_result_ = (expr);                                                    \
    if (!gpuctl_try_result_) return ::gpuctl::fail(std::move(gpuctl_try_result_).error()); \
  } while (0)

// GPUCTL_TRY_ASSIGN(decl, expr): `decl = *expr`, or return expr's error.
#define GPUCTL_TRY_ASSIGN(decl, expr) GPUCTL_TRY_ASSIGN_IMPL(GPUCTL_CONCAT(gpuctl_try_, __LINE__), decl, expr)
#define GPUCTL_TRY_ASSIGN_IMPL(tmp, decl, expr)            \
  auto tmp = (expr);                                       \
  if (!tmp) return ::gpuctl::fail(std::move(tmp).error()); \
  decl = std::move(*tmp)
