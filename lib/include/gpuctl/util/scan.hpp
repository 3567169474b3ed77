#pragma once
// The pieces of gpuctl's hand-written linear scanners (YAML scalar typing for manifests and for
// output quoting): character classes and a skip loop, instead of std::regex on untrusted text.
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace gpuctl::util {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Moves `i` past the characters from s[i] on that `accept` holds for; returns how many.
template <class Accept>
std::size_t skip(std::string_view s, std::size_t& i, Accept accept) {
  std::size_t start = i;
  while (i < s.size() && accept(s[i])) ++i;
  return i - start;
}

inline bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words) {
    if (s == w) return true;
  }
  return false;
}

}  // namespace gpuctl::util
