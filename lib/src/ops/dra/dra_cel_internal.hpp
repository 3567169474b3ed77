#pragma once
// The pieces of the CEL subset evaluator (dra_cel*.cpp); not part of the library's interface.
// dra_cel_lex.cpp and dra_cel_parse.cpp turn the text into a tree, dra_cel.cpp evaluates the
// tree against one device (with dra_cel_functions.cpp), dra_cel_text.cpp holds what works on
// strings (the regex subset, semantic versions, CEL string literals). Everything is bounded: the
// text by kMaxCelLength, the tree's depth by kMaxCelDepth, and the character work of one
// evaluation by kMaxCelSteps, so a hostile selector or a hostile attribute value costs
// milliseconds and never the stack.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/error.hpp"

namespace gpuctl::ops::cel_detail {

// Deeper trees are refused as unsupported. Real selectors nest a handful of levels; cel-go's own
// parser stops at 250, and gpuctl would rather say "cannot tell" than recurse that far.
inline constexpr std::size_t kMaxCelDepth = 64;
// Character comparisons and copies one evaluation may spend (contains, matches, lowerAscii on
// long attribute values); past it the verdict is unsupported.
inline constexpr std::size_t kMaxCelSteps = 10'000'000;

struct Token {
  enum class Kind { end, identifier, integer, string, punct };
  Kind kind = Kind::end;
  std::string text;  // identifier, decoded string, operator
  std::uint64_t magnitude = 0;
  std::size_t pos = 0;
};

// The tokens, the last one `end`; invalid_argument naming what is outside the subset (floats,
// uints, bytes, triple-quoted strings, operators the subset lacks) or malformed.
Result<std::vector<Token>> lex_cel(std::string_view expression);

struct Node {
  enum class Kind {
    boolean,
    integer,
    string,
    identifier,  // text: the name
    list,        // args: the elements
    select,      // args[0].text (a field)
    index,       // args[0][args[1]]
    call,        // text: the function; args: the arguments, the receiver first when `method`
    logical_not,
    negate,
    relation,  // text: == != < <= > >= in; args: left, right
    all_of,    // && over args (a chain is one node, so long chains cost no depth)
    any_of,    // || over args
  };
  Kind kind = Kind::boolean;
  std::string text;
  std::int64_t number = 0;
  bool truth = false;
  bool method = false;
  std::size_t depth = 1;
  std::vector<std::size_t> args;  // indices into Ast::nodes
};

struct Ast {
  std::vector<Node> nodes;
  std::size_t root = 0;
};

// The tree, or invalid_argument whose message says what is outside the subset (one line).
Result<Ast> parse_cel(std::string_view expression);

// What the regex subset can say: RE2's partial match (CEL `matches`) for patterns made of
// literal characters, escaped punctuation, `.`, `.*`, `.+`, a leading `^`, a trailing `$` and a
// leading `(?i)`. Anything else (classes, groups, alternation, counted repeats) is unsupported.
struct RegexOutcome {
  enum class Kind { match, no_match, unsupported };
  Kind kind = Kind::unsupported;
  std::string problem;
};
// `steps` is charged for every character compared; past kMaxCelSteps the outcome is unsupported.
RegexOutcome regex_search(std::string_view pattern, std::string_view text, std::size_t& steps);

// Finds `needle` in `haystack` from `from`, charging `steps`; npos when absent or over budget
// (`over_budget` says which).
std::size_t find_counted(std::string_view haystack, std::string_view needle, std::size_t& steps, bool& over_budget);

// A semantic version as Kubernetes' CEL library reads it (blang/semver's strict Parse).
struct Semver {
  std::uint64_t major = 0, minor = 0, patch = 0;
  std::vector<std::string> prerelease;
  std::string text;
};
std::optional<Semver> parse_semver(std::string_view text);
int compare(const Semver& a, const Semver& b);  // -1, 0, 1; build metadata ignored

// A CEL single-quoted string literal holding `text` exactly (quotes, backslashes and control
// characters escaped).
std::string cel_string_literal(std::string_view text);
// `text` as a regex matching itself literally (every metacharacter escaped).
std::string regex_literal(std::string_view text);

}  // namespace gpuctl::ops::cel_detail
