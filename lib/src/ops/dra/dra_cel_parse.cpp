// The CEL subset's recursive-descent parser: tokens (dra_cel_lex.cpp) in, a tree out, in one
// pass. Only the grammar device selectors use is accepted (no arithmetic, no ternary, no macros
// but has()); anything else is an error naming what was not understood, which the caller reports
// as "unsupported".
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "dra_cel_internal.hpp"

namespace gpuctl::ops::cel_detail {
namespace {

auto unsupported(std::string message) { return fail(Errc::invalid_argument, std::move(message)); }

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
  GPUCTL_TRY_ASSIGN(std::vector<Token> tokens, lex_cel(expression));
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
