// The CEL subset's lexer and recursive-descent parser: text in, a tree out, in one pass over the
// tokens. Only the grammar device selectors use is accepted (no arithmetic, no ternary, no
// macros but has(), no floats, uints, bytes or triple-quoted strings); anything else is an
// error naming what was not understood, which the caller reports as "unsupported".
#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "dra_cel_internal.hpp"

namespace gpuctl::ops::cel_detail {
namespace {

struct Token {
  enum class Kind { end, identifier, integer, string, punct };
  Kind kind = Kind::end;
  std::string text;  // identifier, decoded string, operator
  std::uint64_t magnitude = 0;
  std::size_t pos = 0;
};

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

Result<std::vector<Token>> lex(std::string_view s) {
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

Node node_of(Node::Kind kind, std::string text = {}) {
  Node node;
  node.kind = kind;
  node.text = std::move(text);
  return node;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Result<Ast> run() {
    GPUCTL_TRY_ASSIGN(std::size_t root, expression());
    if (peek().kind != Token::Kind::end) return unexpected("after the end of the expression");
    ast_.root = root;
    return std::move(ast_);
  }

 private:
  const Token& peek() const { return tokens_[pos_]; }
  bool at(std::string_view punct) const { return peek().kind == Token::Kind::punct && peek().text == punct; }
  bool accept(std::string_view punct) {
    if (!at(punct)) return false;
    ++pos_;
    return true;
  }
  std::unexpected<Error> unexpected(std::string_view where) const {
    const Token& t = peek();
    if (t.kind == Token::Kind::end) return unsupported(fmt::format("the expression ends too early {}", where));
    std::string what = t.kind == Token::Kind::string    ? "a string"
                       : t.kind == Token::Kind::integer ? "a number"
                                                        : t.text;
    return unsupported(fmt::format("unexpected {} at offset {} {}", what, t.pos, where));
  }
  Result<void> expect(std::string_view punct, std::string_view where) {
    if (accept(punct)) return {};
    return unexpected(fmt::format("(expected '{}' {})", punct, where));
  }

  Result<std::size_t> add(Node node) {
    for (auto a : node.args) node.depth = std::max(node.depth, ast_.nodes[a].depth + 1);
    if (node.depth > kMaxCelDepth) {
      return unsupported(fmt::format("the expression nests deeper than {} levels", kMaxCelDepth));
    }
    ast_.nodes.push_back(std::move(node));
    return ast_.nodes.size() - 1;
  }

  // Every recursion into a sub-expression passes here, so parentheses cannot nest past the limit.
  Result<std::size_t> expression() {
    if (++recursion_ > kMaxCelDepth) {
      return unsupported(fmt::format("the expression nests deeper than {} levels", kMaxCelDepth));
    }
    auto result = chain("||", Node::Kind::any_of, &Parser::conjunction);
    --recursion_;
    return result;
  }

  Result<std::size_t> conjunction() { return chain("&&", Node::Kind::all_of, &Parser::relation); }

  // a OP b OP c as one node of `kind` with every operand as an argument.
  Result<std::size_t> chain(std::string_view op, Node::Kind kind, Result<std::size_t> (Parser::*operand)()) {
    GPUCTL_TRY_ASSIGN(std::size_t first, (this->*operand)());
    if (!at(op)) return first;
    Node node = node_of(kind);
    node.args.push_back(first);
    while (accept(op)) {
      GPUCTL_TRY_ASSIGN(std::size_t next, (this->*operand)());
      node.args.push_back(next);
    }
    return add(std::move(node));
  }

  Result<std::size_t> relation() {
    GPUCTL_TRY_ASSIGN(std::size_t left, unary());
    while (true) {
      std::string op;
      for (std::string_view candidate : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (at(candidate)) op = candidate;
      }
      if (op.empty() && peek().kind == Token::Kind::identifier && peek().text == "in") op = "in";
      if (op.empty()) return left;
      ++pos_;
      GPUCTL_TRY_ASSIGN(std::size_t right, unary());
      Node node = node_of(Node::Kind::relation, op);
      node.args = {left, right};
      GPUCTL_TRY_ASSIGN(left, add(std::move(node)));
    }
  }

  Result<std::size_t> unary() {
    if (at("!") || at("-")) {
      bool is_not = at("!");
      ++pos_;
      if (++recursion_ > kMaxCelDepth) {
        return unsupported(fmt::format("the expression nests deeper than {} levels", kMaxCelDepth));
      }
      auto operand = unary();
      --recursion_;
      if (!operand) return operand;
      // -N is a literal, so the smallest int64 can be written.
      Node& inner = ast_.nodes[*operand];
      if (!is_not && inner.kind == Node::Kind::integer && inner.number == 0 && !inner.text.empty()) {
        inner.text.clear();
        inner.number = std::numeric_limits<std::int64_t>::min();
        return *operand;
      }
      Node node = node_of(is_not ? Node::Kind::logical_not : Node::Kind::negate);
      node.args = {*operand};
      return add(std::move(node));
    }
    return member();
  }

  Result<std::size_t> member() {
    GPUCTL_TRY_ASSIGN(std::size_t target, primary());
    while (true) {
      if (accept(".")) {
        if (peek().kind != Token::Kind::identifier) return unexpected("(expected a field or function name after '.')");
        std::string name = tokens_[pos_++].text;
        if (at("(")) {
          Node call = node_of(Node::Kind::call, name);
          call.method = true;
          call.args.push_back(target);
          GPUCTL_TRY(arguments(call.args));
          GPUCTL_TRY_ASSIGN(target, add(std::move(call)));
        } else {
          Node select = node_of(Node::Kind::select, name);
          select.args.push_back(target);
          GPUCTL_TRY_ASSIGN(target, add(std::move(select)));
        }
      } else if (accept("[")) {
        GPUCTL_TRY_ASSIGN(std::size_t key, expression());
        GPUCTL_TRY(expect("]", "to close an index"));
        Node index = node_of(Node::Kind::index);
        index.args = {target, key};
        GPUCTL_TRY_ASSIGN(target, add(std::move(index)));
      } else {
        return target;
      }
    }
  }

  // "(a, b, ...)" after a function name; a trailing comma is allowed, as CEL allows it.
  Result<void> arguments(std::vector<std::size_t>& args) {
    GPUCTL_TRY(expect("(", "to start the arguments"));
    while (!accept(")")) {
      GPUCTL_TRY_ASSIGN(std::size_t arg, expression());
      args.push_back(arg);
      if (!accept(",")) {
        GPUCTL_TRY(expect(")", "to close the arguments"));
        break;
      }
    }
    return {};
  }

  Result<std::size_t> primary() {
    const Token t = peek();
    if (t.kind == Token::Kind::integer) {
      ++pos_;
      Node node = node_of(Node::Kind::integer);
      if (t.magnitude == std::uint64_t{1} << 63) {
        node.text = "min";  // only valid right after a unary minus (see unary())
      } else if (t.magnitude > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return unsupported(fmt::format("the integer at offset {} is out of range", t.pos));
      }
      node.number = node.text.empty() ? static_cast<std::int64_t>(t.magnitude) : 0;
      return add(std::move(node));
    }
    if (t.kind == Token::Kind::string) {
      ++pos_;
      return add(node_of(Node::Kind::string, t.text));
    }
    if (t.kind == Token::Kind::identifier) {
      ++pos_;
      if (t.text == "true" || t.text == "false") {
        Node node = node_of(Node::Kind::boolean);
        node.truth = t.text == "true";
        return add(std::move(node));
      }
      if (!at("(")) return add(node_of(Node::Kind::identifier, t.text));
      Node call = node_of(Node::Kind::call, t.text);
      GPUCTL_TRY(arguments(call.args));
      return add(std::move(call));
    }
    if (accept("(")) {
      GPUCTL_TRY_ASSIGN(std::size_t inner, expression());
      GPUCTL_TRY(expect(")", "to close a parenthesis"));
      return inner;
    }
    if (accept("[")) {
      Node list = node_of(Node::Kind::list);
      while (!accept("]")) {
        GPUCTL_TRY_ASSIGN(std::size_t item, expression());
        list.args.push_back(item);
        if (!accept(",")) {
          GPUCTL_TRY(expect("]", "to close a list"));
          break;
        }
      }
      return add(std::move(list));
    }
    return unexpected("(expected a value)");
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::size_t recursion_ = 0;
  Ast ast_;
};

}  // namespace

Result<Ast> parse_cel(std::string_view expression) {
  GPUCTL_TRY_ASSIGN(std::vector<Token> tokens, lex(expression));
  Parser parser(std::move(tokens));
  auto ast = parser.run();
  if (!ast) return ast;
  // A bare 9223372036854775808 (no minus before it) is out of range.
  for (const auto& node : ast->nodes) {
    if (node.kind == Node::Kind::integer && !node.text.empty()) return unsupported("an integer is out of range");
  }
  return ast;
}

}  // namespace gpuctl::ops::cel_detail
