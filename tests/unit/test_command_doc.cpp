// The one source of help (cli/command_doc.hpp): every command is documented, every example
// parses as gpuctl parses a command line, and the words completion offers for a flag are the
// values its check accepts.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "app.hpp"
#include "command_doc.hpp"
#include "exit_code.hpp"
#include "fakes/cli_tree.hpp"
#include "fakes/fixtures.hpp"
#include "usage_errors.hpp"

using namespace gpuctl::cli;

namespace {

using Tree = gpuctl::testing::CliTree;

void visit(const CLI::App* app, std::vector<const CLI::App*>& out) {
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); })) {
    out.push_back(sub);
    visit(sub, out);
  }
}

std::vector<const CLI::App*> commands(const CLI::App& root) {
  std::vector<const CLI::App*> out;
  visit(&root, out);
  return out;
}

// The usage error a fresh tree gives for these words ("" when they parse). A fresh tree per line:
// CLI11 keeps the values of a parse in the bound variables.
std::string parse_error(const std::vector<std::string>& words) {
  Tree tree;
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  try {
    tree.app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("help: every command has a description and examples, and every example parses", "[cli][help]") {
  Tree tree;
  std::size_t examples = 0;
  for (const CLI::App* command : commands(tree.app)) {
    INFO(command_path(command));
    const CommandDoc* doc = tree.context.help().doc(command);
    REQUIRE(doc != nullptr);
    CHECK_FALSE(doc->description.empty());
    // A group (quota, jobs) may leave the examples to its subcommands; a command may not.
    if (command->get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }).empty()) {
      CHECK_FALSE(doc->examples.empty());
    }
    for (const auto& example : doc->examples) {
      INFO(example.command);
      auto invocations = gpuctl_invocations(example.command);
      CHECK_FALSE(invocations.empty());
      for (const auto& words : invocations) {
        CHECK(parse_error(words).empty());
        // The example runs the command it documents (or, in a script, says so by name).
        examples++;
      }
    }
  }
  CHECK(examples >= 30);
}

TEST_CASE("help: a broken example would be caught", "[cli][help]") {
  CHECK_FALSE(parse_error({"gpuctl", "drain", "gpu-7", "--ignore-daemonset"}).empty());
  CHECK_FALSE(parse_error({"gpuctl", "taint"}).empty());
  CHECK(parse_error({"gpuctl", "taint", "gpu-7", "a=b:NoSchedule"}).empty());
}

TEST_CASE("help: --help prints the recorded description and examples", "[cli][help]") {
  Tree tree;
  const CLI::App* drain = tree.app.get_subcommand("drain");
  const CommandDoc* doc = tree.context.help().doc(drain);
  REQUIRE(doc != nullptr);
  const std::string help = drain->help();
  CHECK(help.find(doc->description.substr(0, 60)) != std::string::npos);
  for (const auto& example : doc->examples) {
    CHECK(help.find("  # " + example.comment + "\n  " + example.command) != std::string::npos);
  }
}

TEST_CASE("help: examples are split into gpuctl's words as a shell would", "[cli][help]") {
  using Words = std::vector<std::vector<std::string>>;
  CHECK(gpuctl_invocations(R"(gpuctl drain gpu-7 --reason "ECC errors" \
      --timeout 10m)") == Words{{"gpuctl", "drain", "gpu-7", "--reason", "ECC errors", "--timeout", "10m"}});
  CHECK(gpuctl_invocations("gpuctl jobs -o json | jq '.items[]' > jobs.json") ==
        Words{{"gpuctl", "jobs", "-o", "json"}});
  CHECK(gpuctl_invocations(R"(job=$(gpuctl submit -f job.yaml --parsable) && gpuctl jobs -n "${job%/*}")") ==
        Words{{"gpuctl", "submit", "-f", "job.yaml", "--parsable"}, {"gpuctl", "jobs", "-n", "${job%/*}"}});
  CHECK(gpuctl_invocations("kubectl get nodes -o yaml > nodes.yaml").empty());
}

TEST_CASE("help: the words completion offers for a flag are exactly the values it accepts", "[cli][help]") {
  Tree tree;
  std::size_t checked = 0;
  std::vector<const CLI::App*> all = commands(tree.app);
  all.push_back(&tree.app);
  for (const CLI::App* command : all) {
    for (const CLI::Option* option : command->get_options()) {
      const ValueWords* words = tree.context.help().words(option);
      if (words == nullptr || words->kind != ValueKind::choice || option->get_lnames().empty()) continue;
      INFO(command_path(command) << " --" << option->get_lnames().front());
      std::vector<std::string> base;
      for (const CLI::App* a = command; a->get_parent() != nullptr; a = a->get_parent()) {
        base.insert(base.begin(), a->get_name());
      }
      base.insert(base.begin(), "gpuctl");
      for (const auto& choice : words->choices) {
        auto line = base;
        line.push_back("--" + option->get_lnames().front() + "=" + choice);
        std::string error = parse_error(line);
        // Only the value is judged: a missing positional argument may still be refused.
        CHECK(error.find(choice.empty() ? std::string("\x01") : choice) == std::string::npos);
        checked++;
      }
      if (!words->enforced) continue;
      auto line = base;
      line.push_back("--" + option->get_lnames().front() + "=no-such-value");
      CHECK(parse_error(line).find("no-such-value") != std::string::npos);
    }
  }
  CHECK(checked >= 30);
}

TEST_CASE("help: README's exit-code table lists the codes --help and the man pages list", "[cli][help]") {
  std::ifstream file(std::string(gpuctl::testing::test_data_dir()) + "/../../README.md");
  REQUIRE(file);
  std::vector<std::string> readme;
  bool in_table = false;
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("## ")) in_table = line == "## Exit codes";
    // "| 124 | ..." rows; the header and the separator are not codes.
    if (in_table && line.starts_with("| ") && line.size() > 2 && std::isdigit(static_cast<unsigned char>(line[2]))) {
      readme.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  std::vector<std::string> documented;
  for (const auto& row : exit_code_docs()) documented.emplace_back(row.code);
  CHECK(readme == documented);
}
