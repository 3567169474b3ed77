#pragma once
// What every fuzz target shares: the input as text, and invariant checks that abort, so that
// libFuzzer saves the input as a crash and the corpus replay (replay_main.cpp) fails on it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuctl::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// An invariant of the code under test broke: say which, then abort (a crash for libFuzzer).
[[noreturn]] inline void invariant_failed(const char* what, std::string_view detail) {
  std::fprintf(stderr, "fuzz invariant failed: %s: %.*s\n", what, static_cast<int>(detail.size()), detail.data());
  std::abort();
}

#define GPUCTL_FUZZ_CHECK(condition, detail)                                  \
  do {                                                                        \
    if (!(condition)) ::gpuctl::fuzz::invariant_failed(#condition, (detail)); \
  } while (0)

// Splits the input at every '\f' (form feed), for targets whose function takes several texts;
// real captures hold no form feed, so a seed is one part. Missing parts are empty.
inline std::vector<std::string_view> split_parts(std::string_view text, std::size_t count) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < count) {
    auto cut = text.find('\f');
    if (cut == std::string_view::npos) break;
    parts.push_back(text.substr(0, cut));
    text.remove_prefix(cut + 1);
  }
  parts.push_back(text);
  parts.resize(count);
  return parts;
}

// The path ("/gpus/0/name") of the first string in `value` that a strict dump() refuses, so a
// failed invariant names the field that let invalid UTF-8 through.
inline std::string first_unprintable(const nlohmann::json& value, const std::string& path = "") {
  if (value.is_string()) {
    try {
      (void)value.dump();
      return {};
    } catch (const nlohmann::json::exception&) {
      return path.empty() ? "/" : path;
    }
  }
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (first_unprintable(nlohmann::json(key)) == "/") return path + "/" + key + " (the key)";
      if (auto found = first_unprintable(item, path + "/" + key); !found.empty()) return found;
    }
  }
  if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (auto found = first_unprintable(value[i], path + "/" + std::to_string(i)); !found.empty()) return found;
    }
  }
  return {};
}

// Serializes as the CLI's -o json must be able to: every value the library builds from outside
// input has to survive dump() (invalid UTF-8 makes a strict dump throw).
inline std::string dump_checked(const nlohmann::json& value, const char* what) {
  try {
    return value.dump();
  } catch (const nlohmann::json::exception& e) {
    invariant_failed(what, std::string(e.what()) + " at " + first_unprintable(value));
  }
}

}  // namespace gpuctl::fuzz
