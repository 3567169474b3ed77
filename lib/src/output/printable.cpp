#include "gpuctl/output/printable.hpp"

#include <fmt/format.h>

namespace gpuctl::output {
namespace {

// The length of the well-formed UTF-8 sequence at `text[i]` and its code point, or 0 when the
// bytes there are not one (a stray continuation byte, an overlong form, a surrogate, a
// truncated sequence).
std::size_t utf8_sequence(std::string_view text, std::size_t i, char32_t& code_point) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  char32_t cp = length == 1 ? lead : length == 2 ? (lead & 0x1F) : length == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  code_point = cp;
  return length;
}

bool is_control(char32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    std::size_t length = utf8_sequence(text, i, cp);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    if (!is_control(cp)) {
      out.append(text.substr(i, length));
    } else if (cp < 0x80) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    }
    i += length;
  }
  return out;
}

bool is_printable(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    std::size_t length = utf8_sequence(text, i, cp);
    if (length == 0 || is_control(cp)) return false;
    i += length;
  }
  return true;
}

}  // namespace gpuctl::output
