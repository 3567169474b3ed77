#include "input_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

namespace gpuctl::cli {

Result<std::string> read_input_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) return fail(Errc::io, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    in = &file;
  }
  std::string text;
  char buffer[65536];
  while (in->read(buffer, sizeof buffer) || in->gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in->gcount()));
    if (text.size() > max_bytes) {
      return fail(Errc::invalid_argument,
                  fmt::format("{} is larger than {} MiB; gpuctl does not read inputs that large", input_name(path),
                              max_bytes >> 20));
    }
  }
  if (in->bad()) return fail(Errc::io, fmt::format("cannot read {}: {}", input_name(path), std::strerror(errno)));
  return text;
}

}  // namespace gpuctl::cli
