// The linear scanners that replaced std::regex for plain YAML scalars (output quoting, manifest
// and kubeconfig typing): the same answers as the regular expressions they replace, on the
// known cases, on every short string over the characters those expressions look at, and on
// strings long enough to overflow the stack of std::regex's recursive matcher.
//
// std::regex appears here only as the reference, and only on strings of at most 6 characters.
#include <catch2/catch.hpp>

#include <random>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/kube/yaml_scalar.hpp"
#include "gpuctl/output/yaml.hpp"

using gpuctl::kube::kubeconfig_plain_scalar;
using gpuctl::kube::manifest_plain_scalar;
using gpuctl::output::yaml_needs_quotes;
using nlohmann::json;

namespace {

// The regular expressions as they stood in output/yaml.cpp, kube/manifest.cpp and
// kube/config_parse.cpp before the scanners.
bool regex_needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex special(
      "^(~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N|"
      "[-+]?(\\.[0-9]+|[0-9][0-9_]*(\\.[0-9_]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+|[-+]?\\.(inf|Inf|INF)|\\.("
      "nan|NaN|NAN)|"
      "[0-9]+(:[0-5]?[0-9])+(\\.[0-9]*)?|"
      "[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ]|[ \\t]+)?.*)$");
  return std::regex_match(s, special);
}

json regex_manifest_scalar(const std::string& s) {
  static const std::regex null_re("^(~|null|Null|NULL|)$");
  static const std::regex true_re("^(true|True|TRUE|yes|Yes|YES|on|On|ON|y|Y)$");
  static const std::regex false_re("^(false|False|FALSE|no|No|NO|off|Off|OFF|n|N)$");
  static const std::regex int_re("^[-+]?(0|[1-9][0-9_]*)$");
  static const std::regex hex_re("^0x[0-9a-fA-F_]+$");
  static const std::regex oct_re("^0o?[0-7_]+$");
  static const std::regex float_re(R"(^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(s, null_re)) return nullptr;
  if (std::regex_match(s, true_re)) return true;
  if (std::regex_match(s, false_re)) return false;
  std::string digits;
  for (char c : s) {
    if (c != '_') digits += c;
  }
  errno = 0;
  if (std::regex_match(s, int_re)) {
    char* end = nullptr;
    long long v = std::strtoll(digits.c_str(), &end, 10);
    if (errno == 0 && *end == '\0') return v;
  } else if (std::regex_match(s, hex_re)) {
    long long v = std::strtoll(digits.c_str() + 2, nullptr, 16);
    if (errno == 0) return v;
  } else if (std::regex_match(s, oct_re)) {
    long long v = std::strtoll(digits.c_str() + (digits.size() > 1 && digits[1] == 'o' ? 2 : 1), nullptr, 8);
    if (errno == 0) return v;
  }
  if (std::regex_match(s, float_re)) {
    double v = std::strtod(digits.c_str(), nullptr);
    if (errno == 0) return v;
  }
  return s;
}

bool regex_kubeconfig_int(const std::string& s) {
  static const std::regex kInt("[-+]?[0-9]+");
  return std::regex_match(s, kInt);
}
bool regex_kubeconfig_float(const std::string& s) {
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  return std::regex_match(s, kFloat);
}

// Every string of length 0..max_len over `alphabet`, passed to `check`.
template <class Check>
void for_each_string(const std::string& alphabet, std::size_t max_len, Check check) {
  std::string s;
  std::vector<std::size_t> digits;
  for (std::size_t len = 0; len <= max_len; ++len) {
    digits.assign(len, 0);
    for (;;) {
      s.resize(len);
      for (std::size_t i = 0; i < len; ++i) s[i] = alphabet[digits[i]];
      check(s);
      std::size_t k = 0;
      while (k < len && ++digits[k] == alphabet.size()) digits[k++] = 0;
      if (k == len) break;
    }
  }
}

// Random strings of up to max_len characters over `alphabet`, from a fixed seed.
template <class Check>
void for_random_strings(const std::string& alphabet, std::size_t max_len, int count, Check check) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<std::size_t> len_of(0, max_len);
  std::uniform_int_distribution<std::size_t> char_of(0, alphabet.size() - 1);
  for (int n = 0; n < count; ++n) {
    std::string s(len_of(rng), ' ');
    for (char& c : s) c = alphabet[char_of(rng)];
    check(s);
  }
}

}  // namespace

TEST_CASE("yaml scalars: output quoting agrees with the old regular expression", "[yaml_scalar][output]") {
  for (const char* s : {"",
                        "~",
                        "null",
                        "NULL",
                        "yes",
                        "No",
                        "y",
                        "N",
                        "on",
                        "OFF",
                        "1",
                        "-1",
                        "+1.5",
                        ".5",
                        "1.",
                        "1e3",
                        "1E-3",
                        "1_000",
                        "1_0.0_1",
                        "0x1F",
                        "0xg",
                        "0o17",
                        "0o8",
                        "-.inf",
                        ".Inf",
                        ".NaN",
                        "-.nan",
                        "1:30",
                        "1:60",
                        "1:5:09.5",
                        "190:20:30",
                        "2026-12-02",
                        "2026-12-02T15:13:45Z",
                        "2026-1-2 x",
                        "2026-12-02\nx",
                        "2026-123-4",
                        "20261-12-02",
                        "plain text",
                        "1 2",
                        "e3",
                        "+",
                        "-",
                        ".",
                        "0.",
                        "1e",
                        "1e+",
                        "12:3x",
                        "1:3.",
                        "True",
                        "tRUE"}) {
    INFO(s);
    CHECK(yaml_needs_quotes(s) == regex_needs_quotes(s));
  }
  std::size_t quoted = 0;
  // Every string of up to 4 characters over what the expression distinguishes, and random longer ones.
  const std::string alphabet = "0159_.eE+-x:aT \t\no";
  auto same = [&](const std::string& s) {
    bool ours = yaml_needs_quotes(s);
    if (ours != regex_needs_quotes(s)) FAIL_CHECK("differs on \"" << s << "\"");
    quoted += ours ? 1 : 0;
  };
  for_each_string(alphabet, 4, same);
  for_random_strings("0123456789-:._eEtT \n", 14, 20000, same);
  CHECK(quoted > 1000);  // the alphabets do reach the quoted forms
}

TEST_CASE("yaml scalars: manifest typing agrees with the old regular expressions", "[yaml_scalar][manifest]") {
  CHECK(manifest_plain_scalar("8") == json(8));
  CHECK(manifest_plain_scalar("1_000") == json(1000));
  CHECK(manifest_plain_scalar("0x1F") == json(31));
  CHECK(manifest_plain_scalar("0o17") == json(15));
  CHECK(manifest_plain_scalar("017") == json(15));
  CHECK(manifest_plain_scalar("1.5") == json(1.5));
  CHECK(manifest_plain_scalar("yes") == json(true));
  CHECK(manifest_plain_scalar("") == json(nullptr));
  CHECK(manifest_plain_scalar("500m") == json("500m"));
  CHECK(manifest_plain_scalar("99999999999999999999") == json("99999999999999999999"));  // too big: a string
  auto same = [](const std::string& s) {
    json ours = manifest_plain_scalar(s);
    json theirs = regex_manifest_scalar(s);
    if (ours != theirs) FAIL_CHECK("differs on \"" << s << "\": " << ours.dump() << " vs " << theirs.dump());
  };
  for_each_string("019_.eE+-xo", 4, same);
  for_random_strings("0178_.eE+-xoafnN~y", 10, 20000, same);
}

TEST_CASE("yaml scalars: kubeconfig typing agrees with the old regular expressions", "[yaml_scalar][kubeconfig]") {
  CHECK(kubeconfig_plain_scalar("007") == json(7));
  CHECK(kubeconfig_plain_scalar("+3") == json(3));
  CHECK(kubeconfig_plain_scalar("1_000") == json("1_000"));  // no underscores in kubeconfigs
  CHECK(kubeconfig_plain_scalar("2.5e1") == json(25.0));
  CHECK(kubeconfig_plain_scalar("true") == json(true));
  CHECK(kubeconfig_plain_scalar("~") == json(nullptr));
  auto same = [](const std::string& s) {
    CHECK(gpuctl::kube::is_yaml_float_syntax(s, false) == regex_kubeconfig_float(s));
    // An integer is what the float syntax accepts without '.', 'e' or 'E' there.
    json typed = kubeconfig_plain_scalar(s);
    if (regex_kubeconfig_int(s) && !typed.is_number_integer()) FAIL_CHECK("not an integer: \"" << s << "\"");
  };
  for_each_string("09.eE+-_", 4, same);
}

TEST_CASE("yaml scalars: a megabyte-long scalar is scanned, not recursed into", "[yaml_scalar][output][manifest]") {
  const std::string digits(1 << 20, '7');
  const std::string letters(1 << 20, 'a');
  const std::string date = "2026-12-02" + std::string(1 << 20, 'x');
  CHECK(yaml_needs_quotes(digits));
  CHECK_FALSE(yaml_needs_quotes(letters));
  CHECK(yaml_needs_quotes(date));
  CHECK_FALSE(yaml_needs_quotes(date + "\n"));
  CHECK(manifest_plain_scalar(digits) == json(digits));  // too large for int64 and a float: a string
  CHECK(manifest_plain_scalar(letters) == json(letters));
  CHECK(kubeconfig_plain_scalar("0." + digits).is_number_float());
  CHECK(kubeconfig_plain_scalar(letters) == json(letters));

  // End to end: `gpuctl nodes -o yaml` with a 40 KB (here 1 MB) cordon reason, and a manifest with one.
  json node = {{"metadata", {{"annotations", {{"gpuctl.io/cordon-reason", letters}}}}}};
  std::string y = gpuctl::output::to_yaml(node);
  CHECK(y.size() > letters.size());
  auto manifest = gpuctl::kube::parse_manifest("kind: Job\nnote: " + letters + "\nn: " + digits + "\n", "big.yaml");
  REQUIRE(manifest);
  CHECK(manifest->at("note") == json(letters));
}
