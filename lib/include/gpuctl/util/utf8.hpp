#pragma once
// UTF-8 validity, for text that must become JSON: nlohmann's dump() throws on invalid UTF-8, so
// what gpuctl sends or prints is checked (or made valid) where it enters.
#include <cstddef>
#include <string_view>

namespace gpuctl::util {

// The length of the longest prefix of `text` that is valid UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing past U+10FFFF); text.size() when all of it is.
std::size_t valid_utf8_prefix(std::string_view text);

}  // namespace gpuctl::util
