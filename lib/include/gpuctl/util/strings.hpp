#pragma once
// Small string helpers every module needs and none owns.
#include <string>
#include <string_view>
#include <vector>

namespace gpuctl::util {

// "a, b, c" from {"a", "b", "c"} and ", ".
std::string join(const std::vector<std::string>& parts, std::string_view separator);

// The candidate within two edits of `typed` (optimal string alignment: a swapped pair of letters
// is one edit) and closer than half its length, for "did you mean"; "" when none is.
std::string closest_word(const std::string& typed, const std::vector<std::string>& candidates);

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace gpuctl::util
