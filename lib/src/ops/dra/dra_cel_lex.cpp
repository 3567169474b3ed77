// The CEL subset's lexer: identifiers, decimal and hex integers, string literals ('..', "..",
// raw r'..', with CEL's escapes), comments, and the operators of the subset; anything else is an
// error naming it, which the caller reports as "unsupported".
#include <charconv>

#include <fmt/format.h>

#include "dra_cel_internal.hpp"

namespace gpuctl::ops::cel_detail {
namespace {

auto unsupported(std::string message) { return fail(Errc::invalid_argument, std::move(message)); }

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// One escape sequence after the backslash at s[i]; moves i past it.
Result<void> decode_escape(std::string_view s, std::size_t& i, std::string& out) {
  if (i + 1 >= s.size()) return unsupported("a string ends in a lone backslash");
  char c = s[i + 1];
  i += 2;
  switch (c) {
    case '\\': out += '\\'; return {};
    case '\'': out += '\''; return {};
    case '"': out += '"'; return {};
    case '`': out += '`'; return {};
    case '?': out += '?'; return {};
    case 'a': out += '\a'; return {};
    case 'b': out += '\b'; return {};
    case 'f': out += '\f'; return {};
    case 'n': out += '\n'; return {};
    case 'r': out += '\r'; return {};
    case 't': out += '\t'; return {};
    case 'v': out += '\v'; return {};
    default: break;
  }
  std::size_t digits = c == 'x' || c == 'X' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (digits > 0) {
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < digits; ++k, ++i) {
      int v = i < s.size() ? hex_value(s[i]) : -1;
      if (v < 0) return unsupported(fmt::format("a \\{} escape needs {} hex digits", c, digits));
      cp = cp * 16 + static_cast<std::uint32_t>(v);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return unsupported("a string escape names no Unicode character");
    append_utf8(out, cp);  // in a string literal (not bytes) every escape is a code point
    return {};
  }
  if (c >= '0' && c <= '3' && i + 1 < s.size() && s[i] >= '0' && s[i] <= '7' && s[i + 1] >= '0' && s[i + 1] <= '7') {
    append_utf8(out, static_cast<std::uint32_t>((c - '0') * 64 + (s[i] - '0') * 8 + (s[i + 1] - '0')));
    i += 2;
    return {};
  }
  return unsupported(fmt::format("unknown string escape \\{}", c));
}

Result<Token> lex_string(std::string_view s, std::size_t& i, bool raw) {
  Token t{Token::Kind::string, {}, 0, i};
  char quote = s[i];
  if (s.substr(i, 3) == std::string(3, quote)) return unsupported("triple-quoted strings are not in the subset");
  ++i;
  while (true) {
    if (i >= s.size() || s[i] == '\n' || s[i] == '\r') return unsupported("a string literal is not terminated");
    if (s[i] == quote) {
      ++i;
      return t;
    }
    if (s[i] == '\\' && !raw) {
      GPUCTL_TRY(decode_escape(s, i, t.text));
    } else {
      t.text += s[i++];
    }
  }
}

Result<Token> lex_number(std::string_view s, std::size_t& i) {
  Token t{Token::Kind::integer, {}, 0, i};
  int base = 10;
  if (s.substr(i, 2) == "0x" || s.substr(i, 2) == "0X") {
    base = 16;
    i += 2;
  }
  std::size_t start = i;
  while (i < s.size() && (base == 16 ? hex_value(s[i]) >= 0 : (s[i] >= '0' && s[i] <= '9'))) ++i;
  auto [ptr, ec] = std::from_chars(s.data() + start, s.data() + i, t.magnitude, base);
  if (start == i || ec != std::errc() || ptr != s.data() + i) return unsupported("an integer is out of range");
  if (i < s.size() && (s[i] == 'u' || s[i] == 'U')) return unsupported("unsigned integers are not in the subset");
  if (i < s.size() && (s[i] == '.' || s[i] == 'e' || s[i] == 'E'))
    return unsupported("floating-point numbers are not in the subset");
  return t;
}

}  // namespace

Result<std::vector<Token>> lex_cel(std::string_view s) {
  static constexpr std::string_view kTwoChar[] = {"==", "!=", "<=", ">=", "&&", "||"};
  static constexpr std::string_view kOneChar = "<>!()[],.-";
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
      ++i;
    } else if (s.substr(i, 2) == "//") {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '\'' || c == '"') {
      GPUCTL_TRY_ASSIGN(Token t, lex_string(s, i, false));
      tokens.push_back(std::move(t));
    } else if ((c == 'r' || c == 'R') && i + 1 < s.size() && (s[i + 1] == '\'' || s[i + 1] == '"')) {
      ++i;
      GPUCTL_TRY_ASSIGN(Token t, lex_string(s, i, true));
      tokens.push_back(std::move(t));
    } else if ((c == 'b' || c == 'B') && i + 1 < s.size() && (s[i + 1] == '\'' || s[i + 1] == '"')) {
      return unsupported("bytes literals are not in the subset");
    } else if (c >= '0' && c <= '9') {
      GPUCTL_TRY_ASSIGN(Token t, lex_number(s, i));
      tokens.push_back(std::move(t));
    } else if (ident_start(c)) {
      std::size_t start = i;
      while (i < s.size() && ident_char(s[i])) ++i;
      tokens.push_back({Token::Kind::identifier, std::string(s.substr(start, i - start)), 0, start});
    } else {
      std::string_view two = s.substr(i, 2);
      bool matched = false;
      for (auto op : kTwoChar) {
        if (two == op) {
          tokens.push_back({Token::Kind::punct, std::string(op), 0, i});
          i += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (kOneChar.find(c) == std::string_view::npos) {
        unsigned char u = static_cast<unsigned char>(c);
        return unsupported(u >= 0x21 && u < 0x7F
                               ? fmt::format("'{}' at offset {} is not in the subset", c, i)
                               : fmt::format("byte 0x{:02x} at offset {} is not in the subset", u, i));
      }
      tokens.push_back({Token::Kind::punct, std::string(1, c), 0, i});
      ++i;
    }
  }
  tokens.push_back({Token::Kind::end, {}, 0, s.size()});
  return tokens;
}

}  // namespace gpuctl::ops::cel_detail
