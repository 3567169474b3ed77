#pragma once
// Reading the fixtures (tests/fixtures: real captures, see SOURCES.md there) and test data files.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpuctl::testing {

// tests/fixtures and tests/data of this checkout, as absolute paths (fakes/fixture_dirs.cpp).
const char* fixtures_dir();
const char* test_data_dir();

// Builds strings with append(): GCC 12 reports a false -Warray-bounds on some inlined
// `std::string&& + const char*` chains at -O2.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("test input missing: " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string fixture_path(std::string_view relative) { return cat(fixtures_dir(), "/", relative); }
inline std::string fixture(std::string_view relative) { return read_file(fixture_path(relative)); }
inline std::string read_fixture(std::string_view relative) { return fixture(relative); }
inline std::string test_data(std::string_view relative) { return read_file(cat(test_data_dir(), "/", relative)); }

}  // namespace gpuctl::testing

// The folders as expressions, for tests that build paths themselves.
#define GPUCTL_FIXTURES_DIR (::gpuctl::testing::fixtures_dir())
#define GPUCTL_TEST_DATA_DIR (::gpuctl::testing::test_data_dir())
