// Hostile structure in manifests and kubeconfigs: nesting past util::kMaxNestingDepth and YAML
// aliases that expand past kMaxYamlNodes are refused with one line naming the file and the
// limit (manifests: Errc::invalid_argument, exit 2; kubeconfigs: Errc::config), never a crash
// or an exhausted memory. A large but honest kubeconfig (40,000 clusters) loads correctly.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/output/yaml.hpp"
#include "gpuctl/util/nesting.hpp"
#include "test_kubeconfig_support.hpp"

using Catch::Contains;
using gpuctl::Errc;
using gpuctl::kube::parse_manifest;
using gpuctl_test::expect_error;
using gpuctl_test::expect_loads;
using gpuctl_test::only_file;
using gpuctl_test::TempDir;
using nlohmann::json;

namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// A YAML block mapping nested `levels` deep: "a:\n  a:\n    a: 1".
std::string block_nesting(int levels) {
  std::string out;
  for (int i = 0; i < levels; ++i) out += std::string(static_cast<std::size_t>(2 * i), ' ') + "a:\n";
  out += std::string(static_cast<std::size_t>(2 * levels), ' ') + "1\n";
  return out;
}

// "Billion laughs": ten anchors, each a list of ten aliases of the one before: 10^10 nodes.
std::string alias_bomb(const std::string& prefix) {
  std::string out = prefix + "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    out += fmt::format("l{}: &l{} [", i, i);
    for (int k = 0; k < 10; ++k) out += fmt::format("{}*l{}", k == 0 ? "" : ", ", i - 1);
    out += "]\n";
  }
  return out;
}

void expect_manifest_error(const std::string& text, const std::string& expected) {
  auto r = parse_manifest(text, "job.yaml");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message == expected);
  CHECK(r.error().message.find('\n') == std::string::npos);
}

}  // namespace

TEST_CASE("manifest limits: nesting deeper than 200 levels is refused in one line", "[manifest][limits]") {
  const std::string too_deep = "job.yaml: YAML nests deeper than 200 levels; refusing to read it";
  // 200 levels are fine (the top mapping is the first of them), 201 are not.
  auto ok = parse_manifest("kind: Job\n" + block_nesting(200), "job.yaml");
  REQUIRE(ok);
  CHECK(ok->contains("a"));
  expect_manifest_error("kind: Job\n" + block_nesting(201), too_deep);
  // Flow style past yaml-cpp's own guard (2000 levels): its DeepRecursion, in our words.
  expect_manifest_error("kind: Job\nx: " + repeat("[", 100000) + repeat("]", 100000) + "\n", too_deep);
  // JSON: refused by the linear scan before yaml-cpp sees it.
  expect_manifest_error(R"({"kind":"Job","x":)" + repeat("[", 100000) + repeat("]", 100000) + "}", too_deep);
  expect_manifest_error(R"({"kind":"Job","x":)" + repeat("[", 300) + repeat("]", 300) + "}", too_deep);
  auto json_ok = parse_manifest(R"({"kind":"Job","x":)" + repeat("[", 150) + repeat("]", 150) + "}", "job.json");
  REQUIRE(json_ok);
}

TEST_CASE("manifest limits: YAML aliases are expanded within a node budget", "[manifest][limits]") {
  expect_manifest_error(alias_bomb("kind: Job\n"),
                        "job.yaml: YAML aliases expand to more than 1000000 nodes (alias bomb?); refusing to read it");
  // A few aliases are fine, and expand to copies.
  auto ok = parse_manifest("kind: Job\nbase: &b {cpu: 1}\nx: *b\ny: [*b, *b]\n", "job.yaml");
  REQUIRE(ok);
  CHECK(ok->at("y") == json::array({{{"cpu", 1}}, {{"cpu", 1}}}));
}

TEST_CASE("kubeconfig limits: nesting and alias bombs are config errors naming the file", "[kubeconfig][limits]") {
  TempDir dir;
  const std::string deep = dir.write("deep.yaml", block_nesting(300));
  CHECK(expect_error(only_file(deep)) ==
        "kubeconfig " + deep + ": YAML nests deeper than 200 levels; refusing to read it");

  const std::string flow = dir.write("flow.yaml", "clusters: " + repeat("[", 100000) + repeat("]", 100000) + "\n");
  CHECK(expect_error(only_file(flow)) ==
        "kubeconfig " + flow + ": YAML nests deeper than 200 levels; refusing to read it");

  const std::string bomb = dir.write("bomb.yaml", alias_bomb("apiVersion: v1\nkind: Config\n"));
  CHECK(expect_error(only_file(bomb)) ==
        "kubeconfig " + bomb + ": YAML aliases expand to more than 1000000 nodes (alias bomb?); refusing to read it");

  // The bomb where the decoder would expand it: every user's as-groups is the same big list.
  std::string users = "apiVersion: v1\nkind: Config\ngroups: &g [" + repeat("g, ", 2000) + "g]\nusers:\n";
  for (int i = 0; i < 1000; ++i) users += fmt::format("- name: u{}\n  user: {{token: t, as-groups: *g}}\n", i);
  const std::string groups = dir.write("groups.yaml", users);
  CHECK_THAT(expect_error(only_file(groups)), Contains("expand to more than 1000000 nodes"));
}

TEST_CASE("kubeconfig: 40,000 clusters, users and contexts load, each entry found by name", "[kubeconfig][limits]") {
  constexpr int kEntries = 40000;
  std::string text = "apiVersion: v1\nkind: Config\nclusters:\n";
  for (int i = 0; i < kEntries; ++i)
    text += fmt::format("- name: c{}\n  cluster:\n    server: https://c{}.example:6443\n", i, i);
  text += "users:\n";
  for (int i = 0; i < kEntries; ++i) text += fmt::format("- name: u{}\n  user:\n    token: token-{}\n", i, i);
  text += "contexts:\n";
  for (int i = 0; i < kEntries; ++i)
    text += fmt::format("- name: x{}\n  context:\n    cluster: c{}\n    user: u{}\n", i, i, i);
  text += "current-context: x0\n";
  TempDir dir;
  const std::string path = dir.write("big.yaml", text);
  for (int i : {20000, kEntries - 1}) {
    auto rc = expect_loads(only_file(path, fmt::format("x{}", i)));
    CHECK(rc.server == fmt::format("https://c{}.example:6443", i));
    CHECK(rc.bearer_token == fmt::format("token-{}", i));
  }
  // Merged with a second file that redefines one cluster: the first file still wins.
  const std::string second =
      dir.write("second.yaml", "clusters:\n- name: c7\n  cluster: {server: https://other:6443}\n");
  gpuctl::kube::LoadOptions both = gpuctl_test::kubeconfig_env(path + ":" + second, "x7");
  CHECK(expect_loads(both).server == "https://c7.example:6443");
}

TEST_CASE("manifest and kubeconfig errors quote hostile values on one short line", "[manifest][kubeconfig][limits]") {
  const std::string huge(1 << 20, 'k');
  // Explicit keys ("? key"): a plain implicit key may not pass 1024 characters in YAML.
  auto dup = parse_manifest("kind: Job\n? " + huge + "\n: 1\n? " + huge + "\n: 2\n", "job.yaml");
  REQUIRE_FALSE(dup);
  CHECK(dup.error().message.size() < 200);
  CHECK_THAT(dup.error().message, Contains("... (1048576 bytes)\" appears twice"));

  TempDir dir;
  const std::string named = dir.write("named.yaml", "clusters:\n- name: \"a\\nb\"\n  cluster: {server: [x]}\n");
  CHECK(expect_error(only_file(named)) ==
        "kubeconfig " + named + ": cluster \"a\\x0ab\": server: expected a string, got a list");
  const std::string flag =
      dir.write("flag.yaml", "clusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: " + huge + "}\n");
  std::string message = expect_error(only_file(flag));
  CHECK(message.size() < 300);
  CHECK_THAT(message, Contains("expected true or false, got \"kkkk"));
}

TEST_CASE("output::to_yaml bounds the nesting it writes", "[output][limits]") {
  json deep = 1;
  for (int i = 0; i < 5000; ++i) deep = json::array({std::move(deep)});
  std::string y = gpuctl::output::to_yaml(deep);
  CHECK(y.find("<nested deeper than 200 levels: not shown>") != std::string::npos);
  CHECK(y.find("- 1\n") == std::string::npos);
  json ok = 1;
  for (int i = 0; i < 200; ++i) ok = json::object({{"a", std::move(ok)}});
  std::string fine = gpuctl::output::to_yaml(ok);
  CHECK(fine.find("not shown") == std::string::npos);
  CHECK(fine.find("a: 1\n") != std::string::npos);
}
