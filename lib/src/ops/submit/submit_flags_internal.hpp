#pragma once
// Helpers shared by the submit_flags*.cpp files; not part of the library's interface. The flags
// and a -f manifest's values are held to the same rules, so both files check names with these.
#include <cstdint>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

namespace gpuctl::ops {
struct SubmitFlags;
struct SubmitSpec;
}  // namespace gpuctl::ops

namespace gpuctl::ops::submit_flags_detail {

// A mistake on the command line or in the manifest: invalid_argument (exit 2).
inline auto usage(std::string message) { return fail(Errc::invalid_argument, std::move(message)); }

// A DNS label: at most 63 of a-z 0-9 '-', starting and ending with a letter or digit.
bool is_dns_label(std::string_view s);
// A qualified name as labels, annotations and resources use: [prefix/]name, name <= 63 of
// [A-Za-z0-9-_.] starting and ending alphanumeric; the prefix a DNS subdomain.
bool is_qualified_name(std::string_view s);
// A label value: empty, or at most 63 of [A-Za-z0-9-_.] starting and ending alphanumeric.
bool is_label_value(std::string_view v);
// An environment variable name as the API server accepts it: [A-Za-z0-9_.-], not starting with a digit.
bool is_env_name(std::string_view s);

// `text` as a whole number from min to max; the error names the flag and the range.
Result<std::int64_t> whole_number(std::string_view flag, std::string_view text, std::int64_t min, std::int64_t max);

// --nodes, --gpus-per-node (into spec.gpus), --completions, --parallelism, --queue and
// --avoid-failed-nodes (submit_flags_parallel.cpp).
Result<void> parse_parallel_flags(const SubmitFlags& flags, SubmitSpec& spec);

}  // namespace gpuctl::ops::submit_flags_detail
