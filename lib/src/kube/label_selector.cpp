#include "gpuctl/kube/label_selector.hpp"

#include <cctype>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace gpuctl::kube {
namespace {

using json = nlohmann::json;

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Splits at commas outside parentheses: "a in (x,y),b" -> ["a in (x,y)", "b"].
std::vector<std::string> split_requirements(std::string_view text) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(trim(cur));
  return parts;
}

bool valid_key(std::string_view k) {
  if (k.empty() || k.size() > 316) return false;
  for (char c : k) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  }
  return true;
}

bool valid_value(std::string_view v) {
  if (v.size() > 63) return false;
  for (char c : v) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

Result<nlohmann::json> parse_label_selector(std::string_view text) {
  auto bad = [&](std::string_view part, std::string_view why) {
    return fail(Errc::invalid_argument,
                fmt::format("label selector \"{}\": \"{}\" {}; write it as key=value, key!=value, "
                            "key in (a,b), key notin (a,b), key or !key",
                            text, part, why));
  };
  if (trim(text).empty())
    return fail(Errc::invalid_argument, "label selector is empty; give at least one requirement such as app=trainer");
  json labels = json::object();
  json expressions = json::array();
  for (const std::string& part : split_requirements(text)) {
    if (part.empty()) return bad(part, "is empty (a stray comma?)");
    auto set_pos = [&](std::string_view op) -> std::size_t {
      auto p = part.find(op);
      return p;
    };
    std::size_t p;
    if (part.front() == '!') {
      std::string key = trim(std::string_view(part).substr(1));
      if (!valid_key(key)) return bad(part, "has an invalid key");
      expressions.push_back({{"key", key}, {"operator", "DoesNotExist"}});
    } else if ((p = set_pos("!=")) != std::string::npos) {
      std::string key = trim(std::string_view(part).substr(0, p)), value = trim(std::string_view(part).substr(p + 2));
      if (!valid_key(key) || !valid_value(value)) return bad(part, "has an invalid key or value");
      expressions.push_back({{"key", key}, {"operator", "NotIn"}, {"values", json::array({value})}});
    } else if ((p = set_pos("=")) != std::string::npos) {
      std::size_t vstart = (p + 1 < part.size() && part[p + 1] == '=') ? p + 2 : p + 1;
      std::string key = trim(std::string_view(part).substr(0, p)), value = trim(std::string_view(part).substr(vstart));
      if (!valid_key(key) || !valid_value(value)) return bad(part, "has an invalid key or value");
      labels[key] = value;
    } else if (part.find('(') != std::string::npos) {
      auto open = part.find('(');
      auto close = part.rfind(')');
      if (close == std::string::npos || close < open || trim(std::string_view(part).substr(close + 1)) != "") {
        return bad(part, "has unbalanced parentheses");
      }
      std::string head = trim(std::string_view(part).substr(0, open));
      auto space = head.find_last_of(" \t");
      if (space == std::string::npos) return bad(part, "needs `in` or `notin` before the list");
      std::string key = trim(std::string_view(head).substr(0, space)),
                  op = trim(std::string_view(head).substr(space + 1));
      if (op != "in" && op != "notin") return bad(part, "needs `in` or `notin` before the list");
      if (!valid_key(key)) return bad(part, "has an invalid key");
      json values = json::array();
      for (const std::string& v : split_requirements(std::string_view(part).substr(open + 1, close - open - 1))) {
        if (!valid_value(v)) return bad(part, "has an invalid value");
        if (!v.empty()) values.push_back(v);
      }
      if (values.empty()) return bad(part, "has an empty value list");
      expressions.push_back({{"key", key}, {"operator", op == "in" ? "In" : "NotIn"}, {"values", values}});
    } else {
      if (!valid_key(part)) return bad(part, "is not a label key");
      expressions.push_back({{"key", part}, {"operator", "Exists"}});
    }
  }
  json out = json::object();
  if (!labels.empty()) out["matchLabels"] = labels;
  if (!expressions.empty()) out["matchExpressions"] = expressions;
  return out;
}

}  // namespace gpuctl::kube
