#pragma once
// Reading a file the user names on the command line (`-f job.yaml`, `restore backup.tar.gz`),
// or stdin for "-": the library never reads either.
#include <string>

#include "gpuctl/error.hpp"

namespace gpuctl::cli {

// The whole file, at most `max_bytes` (Errc::invalid_argument past it, naming the file);
// Errc::io naming the path and the reason when it cannot be read.
Result<std::string> read_input_file(const std::string& path, std::size_t max_bytes = std::size_t{1} << 30);

// "stdin" for "-", else the path: how messages name the input.
inline std::string input_name(const std::string& path) { return path == "-" ? "stdin" : path; }

}  // namespace gpuctl::cli
