#pragma once
// Time as Kubernetes writes it (RFC 3339) and as people read it (kubectl's short ages, Go
// durations on the command line).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

namespace gpuctl::util {

using TimePoint = std::chrono::system_clock::time_point;

// "2026-12-02T14:00:00Z" or with a fraction / numeric offset; nullopt when malformed or outside
// what TimePoint holds (years 1678..2261).
std::optional<TimePoint> parse_rfc3339(std::string_view text);
// UTC, second precision: "2026-12-02T14:00:00Z".
std::string format_rfc3339(TimePoint t);

// kubectl's age notation (k8s.io/apimachinery duration.HumanDuration): 45s, 5m30s, 3h, 2d4h, 1y30d.
std::string human_duration(std::chrono::seconds d);

// Go's time.ParseDuration subset used by kubectl flags: "90s", "5m", "1h30m", "2h45m10s",
// "500ms", plus "d" for days as admins expect ("7d"). A bare "0" is zero. Negative values are
// refused. Errors are Errc::invalid_argument naming the text.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace gpuctl::util
