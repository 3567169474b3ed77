// Shell completion's words (cli/completion.cpp): what each position on a command line offers,
// and `gpuctl __complete` end to end in-process, names from the (fake) API server and the cache.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <sstream>

#include "app.hpp"
#include "completion.hpp"
#include "fakes/cli_harness.hpp"
#include "fakes/cli_tree.hpp"

using namespace gpuctl::cli;
using gpuctl::testing::CliHarness;
using gpuctl::testing::json_answer;

namespace {

struct Tree : gpuctl::testing::CliTree {
  CompletionAnalysis analyse(const std::vector<std::string>& words) {
    return analyse_completion(app, context.help(), words);
  }
};

std::set<std::string> words_of(const CompletionAnalysis& a) {
  std::set<std::string> out;
  for (const auto& c : a.words) out.insert(c.word);
  return out;
}

// The words of a __complete answer, and its directive.
std::pair<std::set<std::string>, std::string> parse_answer(const std::string& text) {
  std::set<std::string> words;
  std::string directive;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(":")) {
      directive = line.substr(1);
    } else {
      words.insert(line.substr(0, line.find('\t')));
    }
  }
  return {words, directive};
}

}  // namespace

TEST_CASE("completion: subcommands, flags and fixed values without the cluster", "[completion]") {
  Tree t;
  CHECK(words_of(t.analyse({"dr"})) == std::set<std::string>{"drain"});
  CHECK(words_of(t.analyse({"jobs", ""})) == std::set<std::string>{"clean"});
  // Flags of the command and the global ones (they may follow the subcommand), with descriptions.
  auto flags = t.analyse({"drain", "--max"});
  CHECK(words_of(flags) == std::set<std::string>{"--max-concurrent", "--max-evictions-in-flight", "--max-unavailable"});
  CHECK_FALSE(flags.words.front().description.empty());
  CHECK(words_of(t.analyse({"drain", "--cont"})) == std::set<std::string>{"--context", "--continue-on-error"});
  // A value as the next word, or attached with '='.
  CHECK(words_of(t.analyse({"nodes", "-o", ""})) == std::set<std::string>{"table", "wide", "json", "yaml", "name"});
  CHECK(words_of(t.analyse({"nodes", "--output=j"})) == std::set<std::string>{"--output=json"});
  CHECK(words_of(t.analyse({"quota", "set", "--dry-run=s"})) == std::set<std::string>{"--dry-run=server"});
  CHECK(words_of(t.analyse({"diagnose", "--fail-on", "w"})) == std::set<std::string>{"warning"});
  CHECK(words_of(t.analyse({"diagnose", "--check", "node-not"})) == std::set<std::string>{"node-not-ready"});
  CHECK(words_of(t.analyse({"taint", "gpu-7", "dedicated=ml:No"})) ==
        std::set<std::string>{"dedicated=ml:NoSchedule", "dedicated=ml:NoExecute"});
  CHECK(words_of(t.analyse({"completion", ""})) == std::set<std::string>{"bash", "zsh", "fish"});
  // Nothing offered where nothing fits: not file names either.
  auto free_value = t.analyse({"submit", "--image", ""});
  CHECK(free_value.words.empty());
  CHECK(free_value.directive == directive_no_file);
}

TEST_CASE("completion: what needs the cluster, the kubeconfig or the file system", "[completion]") {
  Tree t;
  auto nodes = t.analyse({"cordon", "gpu-"});
  CHECK(nodes.from_cluster == ValueKind::node);
  CHECK(nodes.current == "gpu-");
  // Every word after the node names is one too (NODE...), and the -l value is a label key.
  CHECK(t.analyse({"drain", "gpu-1", "--ignore-daemonsets", ""}).from_cluster == ValueKind::node);
  CHECK(t.analyse({"gpus", "-l", ""}).from_cluster == ValueKind::label_key);
  // taint --device NODE/DEVICE starts with the node's name.
  CHECK(t.analyse({"taint", "--device", "gpu-"}).from_cluster == ValueKind::node);
  CHECK(t.analyse({"quota", "set", ""}).from_cluster == ValueKind::namespace_);
  CHECK(t.analyse({"-n", ""}).from_cluster == ValueKind::namespace_);
  CHECK(t.analyse({"--context", ""}).from_cluster == ValueKind::context);
  auto attached = t.analyse({"nodes", "--context=pr"});
  CHECK(attached.from_cluster == ValueKind::context);
  CHECK(attached.prefix == "--context=");
  CHECK(attached.current == "pr");
  // The globals typed on the line say where the names come from, before or after the command.
  auto where = t.analyse({"--kubeconfig", "/k", "cordon", "--context=prod", "-n", "ml", ""});
  CHECK(where.kubeconfig == "/k");
  CHECK(where.context == "prod");
  CHECK(where.namespace_name == "ml");
  // Files: the shell's own completion (directive 0); after `--`, the container's command.
  CHECK(t.analyse({"restore", ""}).directive == directive_default);
  CHECK(t.analyse({"submit", "-f", ""}).directive == directive_default);
  CHECK(t.analyse({"submit", "x", "--image", "i", "--", "py"}).directive == directive_default);
}

TEST_CASE("completion: the answer puts the prefix back and ends with the directive", "[completion]") {
  Tree t;
  auto a = t.analyse({"nodes", "--context=pr"});
  CHECK(completion_answer(a, {"prod", "staging", "prod-east"}) == "--context=prod\n--context=prod-east\n:4\n");
  CHECK(completion_answer(t.analyse({"completion", "z"}), {}) == "zsh\n:4\n");
}

TEST_CASE("completion: __complete reads node names as metadata and caches them 0600", "[completion]") {
  const auto home = std::filesystem::temp_directory_path() / ("gpuctl-completion-" + std::to_string(::getpid()));
  std::filesystem::remove_all(home);
  CliHarness h;
  h.set_env("XDG_CACHE_HOME", (home / "cache").string());
  h.config().server = "https://10.0.0.1:6443";
  h.config().context = "prod";
  const std::string nodes =
      R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5"},)"
      R"("items":[{"metadata":{"name":"gpu-b"}},{"metadata":{"name":"gpu-a"}},{"metadata":{"name":"cpu-1"}}]})";
  h.fake().on("GET", "/api/v1/nodes", json_answer(200, nodes));

  auto first = h.run({"__complete", "cordon", "gpu-"});
  REQUIRE(first.exit_code == 0);
  CHECK(first.err.empty());
  CHECK(parse_answer(first.out) == std::pair<std::set<std::string>, std::string>{{"gpu-a", "gpu-b"}, "4"});
  REQUIRE(h.fake().requests().size() == 1);
  const auto& request = h.fake().requests().front();
  bool metadata_only = false;
  for (const auto& [name, value] : request.headers) {
    metadata_only =
        metadata_only || (name == "Accept" && value.find("as=PartialObjectMetadataList") != std::string::npos);
  }
  CHECK(metadata_only);

  // The cache answers the next TAB: no second request, the same names.
  const auto dir = home / "cache" / "gpuctl" / "completion";
  REQUIRE(std::filesystem::is_directory(dir));
  struct stat st{};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    REQUIRE(::stat(entry.path().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  auto second = h.run({"__complete", "drain", ""});
  CHECK(parse_answer(second.out).first == std::set<std::string>{"cpu-1", "gpu-a", "gpu-b"});
  CHECK(h.fake().requests().size() == 1);

  // Another context is another cache entry: it asks the server.
  h.config().context = "staging";
  h.fake().on("GET", "/api/v1/nodes", json_answer(200, nodes));
  (void)h.run({"__complete", "cordon", ""});
  CHECK(h.fake().requests().size() == 2);
  std::filesystem::remove_all(home);
}

TEST_CASE("completion: a failing cluster gives no names and no error text", "[completion]") {
  CliHarness h;
  h.set_env("XDG_CACHE_HOME", "/nonexistent-gpuctl-test/cache");
  h.fake().on("GET", "/api/v1/nodes", json_answer(403, R"({"kind":"Status","reason":"Forbidden","code":403})"));
  auto r = h.run({"__complete", "cordon", ""});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == ":4\n");
  gpuctl::Error no_kubeconfig;
  no_kubeconfig.code = gpuctl::Errc::config;
  no_kubeconfig.message = "no configuration";
  h.fail_config(no_kubeconfig);
  auto no_config = h.run({"__complete", "cordon", ""});
  CHECK(no_config.exit_code == 0);
  CHECK(no_config.err.empty());
  CHECK(no_config.out == ":4\n");
}

TEST_CASE("completion: the scripts ask __complete and nothing else", "[completion]") {
  CliHarness h;
  for (const char* shell : {"bash", "zsh", "fish"}) {
    auto r = h.run({"completion", shell});
    INFO(shell);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("__complete") != std::string::npos);
  }
  CHECK(h.run({"completion", "bash"}).out.find("complete -o default -F __gpuctl_complete gpuctl") != std::string::npos);
  CHECK(h.run({"completion", "zsh"}).out.starts_with("#compdef gpuctl\n"));
  CHECK(h.run({"completion", "tcsh"}).exit_code == 2);
}
