#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app.hpp"
#include "fakes/cli_harness.hpp"
#include "gpuctl/util/strings.hpp"
#include "usage_errors.hpp"

using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;
using nlohmann::json;

namespace {

std::string list_of(json items) {
  return json{{"metadata", {{"continue", ""}, {"resourceVersion", "7"}}}, {"items", items}}.dump();
}

json node(const std::string& name, int gpus, const std::string& product) {
  return {{"metadata",
           {{"name", name},
            {"labels", {{"nvidia.com/gpu.product", product}}},
            {"creationTimestamp", "2026-01-01T00:00:00Z"}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

void script_inventory(CliHarness& h) {
  h.fake().serves_no_dra(1);
  h.fake().on(
      "GET", "/api/v1/nodes",
      json_answer(200,
                  list_of(json::array({node("b-node", 4, "Tesla-T4"), node("a-node", 8, "NVIDIA-H100-80GB-HBM3")}))));
  json pod = {
      {"metadata", {{"name", "p"}}},
      {"spec",
       {{"nodeName", "a-node"},
        {"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "3"}}}}}}})}}},
      {"status", {{"phase", "Running"}}}};
  h.fake().on("GET", "/api/v1/pods", json_answer(200, list_of(json::array({pod}))));
}

}  // namespace

TEST_CASE("cli::run_cli nodes renders the table and the product summary", "[cli]") {
  CliHarness h;
  script_inventory(h);
  auto r = h.run({"nodes"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  // a-node sorts first; 8 capacity, 3 used, 5 free
  CHECK(r.out.find("NAME     STATUS   PRODUCT                 SOURCE   RESOURCE   CAPACITY   ALLOCATABLE   USED   "
                   "FREE   UNHEALTHY   TAINTS   AGE") == 0);
  CHECK(
      r.out.find("a-node   Ready    NVIDIA-H100-80GB-HBM3   plugin   gpu        8          8             3      5      "
                 "0           <none>") != std::string::npos);
  CHECK(r.out.find("PRODUCT                 RESOURCE   SOURCE   NODES   CAPACITY   ALLOCATABLE   USED   FREE") !=
        std::string::npos);
  CHECK(r.out.find("Tesla-T4                gpu        plugin   1       4          4             0      4") !=
        std::string::npos);
  CHECK(h.fake().unexpected().empty());
}

TEST_CASE("cli::run_cli nodes -o json prints the documented schema only", "[cli]") {
  CliHarness h;
  script_inventory(h);
  auto r = h.run({"nodes", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["kind"] == "GPUNodeList");
  CHECK(doc["items"].size() == 2);
  CHECK(doc["items"][0]["gpus"]["used"] == 3);
  CHECK(doc["summary"].size() == 2);
}

TEST_CASE("cli::run_cli nodes -o yaml and -o name", "[cli]") {
  CliHarness h;
  script_inventory(h);
  script_inventory(h);
  auto y = h.run({"nodes", "-o", "yaml"});
  REQUIRE(y.exit_code == 0);
  CHECK(y.out.find("apiVersion: gpuctl.io/v1alpha1\n") == 0);
  CHECK(y.out.find("\nkind: GPUNodeList\n") != std::string::npos);
  CHECK(y.out.find("    product: NVIDIA-H100-80GB-HBM3\n") != std::string::npos);
  auto n = h.run({"nodes", "-o", "name", "--sort-by", "capacity"});
  REQUIRE(n.exit_code == 0);
  CHECK(n.out == "node/b-node\nnode/a-node\n");
}

TEST_CASE("cli::run_cli maps usage errors to exit 2 with one line on stderr and nothing on stdout", "[cli]") {
  CliHarness h;
  SECTION("unknown flag") {
    auto r = h.run({"nodes", "--bogus"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "error: unknown flag --bogus for \"gpuctl nodes\" (see 'gpuctl nodes --help')\n");
  }
  SECTION("bad output format") {
    auto r = h.run({"nodes", "-o", "xml"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("error: --output: xml not in {table,wide,json,yaml,name}") == 0);
  }
  SECTION("bad --request-timeout") {
    auto r = h.run({"nodes", "--request-timeout", "5"});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "error: invalid duration \"5\": missing unit (use a number with a unit, e.g. 30s, 5m, 1h30m, 7d)\n");
  }
  SECTION("unknown command") {
    auto r = h.run({"nodez"});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "error: unknown command \"nodez\" for \"gpuctl\"; did you mean \"nodes\"? (see 'gpuctl --help')\n");
  }
  CHECK(h.fake().requests().empty());
}

TEST_CASE("cli::run_cli reports cluster failures as exit 1 without stdout", "[cli]") {
  CliHarness h;
  h.fake().on(
      "GET", "/api/v1/nodes",
      json_answer(
          403,
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes is forbidden: User \"nobody\" cannot list resource \"nodes\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"nodes"},"code":403})"));
  auto r = h.run({"nodes"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "error: forbidden: nodes is forbidden: User \"nobody\" cannot list resource \"nodes\" in API group \"\" at the "
        "cluster scope; "
        "ask a cluster admin for the RBAC permission (check with: kubectl auth can-i)\n");
}

TEST_CASE("cli::run_cli passes global flags, before or after the subcommand, to configuration loading", "[cli]") {
  CliHarness h;
  script_inventory(h);
  auto r = h.run({"--context", "prod", "nodes", "--kubeconfig", "/x/config", "-n", "team-a", "-o", "name"});
  REQUIRE(r.exit_code == 0);
  CHECK(h.last_load_options().context == "prod");
  CHECK(h.last_load_options().kubeconfig == "/x/config");
  CHECK(h.last_load_options().namespace_name == "team-a");
}

TEST_CASE("cli::run_cli -v 1 logs requests on stderr without credentials", "[cli]") {
  CliHarness h;
  script_inventory(h);
  auto r = h.run({"nodes", "-v", "1", "-o", "name"});
  REQUIRE(r.exit_code == 0);
  // The node and pod lists are read side by side: each request is one whole line, in either order.
  auto starts_a_line = [&](std::string_view text) {
    auto at = r.err.find(text);
    return at != std::string::npos && (at == 0 || r.err[at - 1] == '\n');
  };
  CHECK(starts_a_line("GET https://k8s.test:6443/api/v1/nodes?limit=500 200 in "));
  CHECK(starts_a_line("GET https://k8s.test:6443/api/v1/pods?fieldSelector="));
  CHECK(r.err.find("secret-token") == std::string::npos);
  CHECK(r.out == "node/a-node\nnode/b-node\n");
}

TEST_CASE("cli::run_cli --version names the commit", "[cli]") {
  CliHarness h;
  auto r = h.run({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.starts_with("gpuctl "));
  CHECK(r.out.find("(commit ") != std::string::npos);
}

TEST_CASE("cli: every command has a description and examples in its help", "[cli]") {
  std::ostringstream out, err;
  gpuctl::cli::AppContext ctx({out, err}, gpuctl::cli::Environment{});
  CLI::App app{"gpuctl", "gpuctl"};
  bool version = false;
  gpuctl::cli::configure_app(app, ctx, version);
  auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  REQUIRE_FALSE(subs.empty());
  std::vector<const CLI::App*> all(subs.begin(), subs.end());
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (const CLI::App* nested : all[i]->get_subcommands([](const CLI::App*) { return true; })) all.push_back(nested);
  }
  for (const CLI::App* sub : all) {
    if (sub->get_group().empty()) continue;  // hidden: __man, run by the build
    INFO("command: " << sub->get_name());
    CHECK_FALSE(sub->get_description().empty());
    CHECK(sub->get_footer().find("Examples:") != std::string::npos);
  }
}

TEST_CASE("cli: gpuctl --help lists the commands by section", "[cli]") {
  CliHarness h;
  auto r = h.run({"--help"});
  CHECK(r.exit_code == 0);
  auto at = [&](const char* text) { return r.out.find(text); };
  for (const char* section : {"Inventory:", "Node administration:", "GPU workloads:"}) {
    INFO(section);
    CHECK(at(section) != std::string::npos);
  }
  // Each command under its own section, uncordon with cordon.
  CHECK(at("Inventory:") < at("  gpus"));
  CHECK(at("Node administration:") < at("  uncordon"));
  CHECK(at("  uncordon") < at("GPU workloads:"));
  CHECK(at("GPU workloads:") < at("  quota"));
}

TEST_CASE("cli: a mistyped command or flag gets the closest one, a missing argument is named", "[cli]") {
  CliHarness h;
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const Case cases[] = {
      {{"nodse"}, "error: unknown command \"nodse\" for \"gpuctl\"; did you mean \"nodes\"? (see 'gpuctl --help')\n"},
      {{"quota", "sett", "a"},
       "error: unknown command \"sett\" for \"gpuctl quota\"; did you mean \"set\"? (see 'gpuctl quota --help')\n"},
      {{"drain", "n1", "--dry-rn"},
       "error: unknown flag --dry-rn for \"gpuctl drain\"; did you mean --dry-run? (see 'gpuctl drain --help')\n"},
      // global flags may follow the command, so they are candidates too
      {{"nodes", "--kubeconfg", "x"},
       "error: unknown flag --kubeconfg for \"gpuctl nodes\"; did you mean --kubeconfig? (see 'gpuctl nodes "
       "--help')\n"},
      {{"frobnicate"}, "error: unknown command \"frobnicate\" for \"gpuctl\" (see 'gpuctl --help')\n"},
      {{"taint"}, "error: missing arguments: NODE... then KEY[=VALUE]:EFFECT[-] or KEY- (see 'gpuctl taint --help')\n"},
  };
  for (const auto& c : cases) {
    auto r = h.run(c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == c.err);
  }
  CHECK(h.fake().requests().empty());
}

TEST_CASE("cli: help names the whole command and shows optional values as kubectl does", "[cli]") {
  CliHarness h;
  auto r = h.run({"jobs", "clean", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("Usage: gpuctl jobs clean [OPTIONS]") != std::string::npos);
  auto q = h.run({"quota", "set", "--help"});
  CHECK(q.out.find("--dry-run[=MODE]") != std::string::npos);
  CHECK(q.out.find("{client}") == std::string::npos);
  CHECK(q.out.find(":{none,client,server}") == std::string::npos);
}

TEST_CASE("cli: closest_word takes typos, not other words", "[cli]") {
  using gpuctl::util::closest_word;
  const std::vector<std::string> commands = {"nodes", "gpus", "drain", "jobs", "quota", "backup", "restore"};
  CHECK(closest_word("nodse", commands) == "nodes");
  CHECK(closest_word("gpu", commands) == "gpus");
  CHECK(closest_word("restor", commands) == "restore");
  CHECK(closest_word("jbos", commands) == "jobs");
  CHECK(closest_word("xyz", commands).empty());
  CHECK(closest_word("no", commands).empty());  // two letters are not enough to guess from
}

TEST_CASE("cli: every command has a man page naming every flag its --help shows", "[cli][man]") {
  CliHarness h;
  auto root = h.run({"--help"});
  std::vector<std::string> commands;
  std::istringstream lines(root.out);
  bool in_commands = false;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == ':') in_commands = line.find("ptions") == std::string::npos;
    if (in_commands && line.starts_with("  ") && line.size() > 2 && std::islower(static_cast<unsigned char>(line[2])))
      commands.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  REQUIRE(commands.size() >= 10);
  const auto dir = std::filesystem::temp_directory_path() / ("gpuctl-man-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto written = h.run({"__man", dir.string()});
  REQUIRE(written.exit_code == 0);
  for (const auto& command : commands) {
    auto help = h.run({command, "--help"});
    std::ifstream file(dir / ("gpuctl-" + command + ".1"));
    const std::string page((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    INFO(command);
    REQUIRE_FALSE(page.empty());
    std::size_t flags = 0;
    for (std::size_t at = help.out.find("--"); at != std::string::npos; at = help.out.find("--", at + 2)) {
      std::size_t end = at + 2;
      while (end < help.out.size() && (std::isalnum(static_cast<unsigned char>(help.out[end])) || help.out[end] == '-'))
        ++end;
      if (end == at + 2 || help.out[at - 1] != ' ') continue;
      std::string roff_flag;
      for (char c : help.out.substr(at, end - at)) roff_flag += c == '-' ? std::string("\\-") : std::string(1, c);
      CHECK(page.find(roff_flag) != std::string::npos);
      ++flags;
    }
    // `config` only groups its subcommand (`config view` has the flags).
    if (command != "config") CHECK(flags > 0);
  }
  std::filesystem::remove_all(dir);
}
