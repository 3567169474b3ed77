// Small text and file helpers for kubeconfig loading: base64 as Go decodes it, whole-file
// reads with errno text, path resolution and message formatting.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "kube/config_internal.hpp"

namespace gpuctl::kube::detail {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int, 256> make_decode_map() {
  std::array<int, 256> map{};
  for (auto& v : map) v = -1;
  for (std::size_t i = 0; i < kAlphabet.size(); ++i)
    map[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
  return map;
}
constexpr std::array<int, 256> kDecodeMap = make_decode_map();

std::unexpected<Error> corrupt(std::size_t at) {
  return fail(Errc::config, fmt::format("illegal base64 data at input byte {}", at));
}

bool is_newline(char c) { return c == '\n' || c == '\r'; }

}  // namespace

// A transcription of the behaviour of Go's encoding/base64 (StdEncoding) decoder, so that
// the error positions match what kubectl reports for the same kubeconfig.
Result<std::string> base64_decode(std::string_view src) {
  std::string out;
  out.reserve(src.size() / 4 * 3);
  std::size_t si = 0;
  while (si < src.size()) {
    int quantum[4] = {0, 0, 0, 0};
    int filled = 4;
    bool finished = false;
    for (int j = 0; j < 4; ++j) {
      if (si == src.size()) {
        if (j == 0) {
          filled = 0;
          finished = true;
          break;
        }
        return corrupt(si - static_cast<std::size_t>(j));  // a partial quantum without padding
      }
      char in = src[si++];
      int value = kDecodeMap[static_cast<unsigned char>(in)];
      if (value >= 0) {
        quantum[j] = value;
        continue;
      }
      if (is_newline(in)) {
        --j;  // newlines are skipped
        continue;
      }
      if (in != '=') return corrupt(si - 1);
      // Padding: only after two or three symbols.
      if (j < 2) return corrupt(si - 1);
      if (j == 2) {
        while (si < src.size() && is_newline(src[si])) ++si;
        if (si == src.size()) return corrupt(src.size());
        if (src[si] != '=') return corrupt(si - 1);
        ++si;
      }
      while (si < src.size() && is_newline(src[si])) ++si;
      if (si < src.size()) return corrupt(si);  // data after the padding
      filled = j;
      finished = true;
      break;
    }
    unsigned value = (static_cast<unsigned>(quantum[0]) << 18) | (static_cast<unsigned>(quantum[1]) << 12) |
                     (static_cast<unsigned>(quantum[2]) << 6) | static_cast<unsigned>(quantum[3]);
    if (filled >= 2) out.push_back(static_cast<char>((value >> 16) & 0xff));
    if (filled >= 3) out.push_back(static_cast<char>((value >> 8) & 0xff));
    if (filled >= 4) out.push_back(static_cast<char>(value & 0xff));
    if (finished) break;
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                 static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<std::string> read_text_file(const std::string& path, int* error_number) {
  if (error_number != nullptr) *error_number = 0;
  auto problem = [&](int err) {
    if (error_number != nullptr) *error_number = err;
    return fail(Errc::config, fmt::format("cannot read {}: {}", path, std::strerror(err)));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return problem(errno);
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return problem(EISDIR);
  }
  std::string content;
  char buffer[8192];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      content.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      int err = errno;
      ::close(fd);
      return problem(err);
    }
  }
  ::close(fd);
  return content;
}

std::optional<std::string> open_problem(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string(std::strerror(errno));
  ::close(fd);
  return std::nullopt;
}

std::string absolute_dir_of(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) abs = path;
  return abs.lexically_normal().parent_path().string();
}

std::string resolve_against(const std::string& path, const std::string& base) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(base) / path).lexically_normal().string();
}

std::string clean_control_characters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && !(c >= 0x09 && c <= 0x0d)) || c == 0x7f) {
      out += fmt::format("U+{:04X}", c);
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      out += fmt::format("U+{:04X}", static_cast<unsigned char>(text[i + 1]));  // C1 controls
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  auto begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  auto end = text.find_last_not_of(kSpace);
  return std::string(text.substr(begin, end - begin + 1));
}

bool looks_like_pem(std::string_view text) { return text.find("-----BEGIN ") != std::string_view::npos; }

}  // namespace gpuctl::kube::detail
