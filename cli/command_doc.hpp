#pragma once
// The one source of gpuctl's help. Each command's description and examples, and the words each
// flag and argument takes, are data recorded here when the command registers itself (its summary
// and every flag's help are CLI11's own record). `--help`, the man pages (man_pages.cpp) and the
// completion words (completion.cpp) are all made from it, and the tests check that they agree and
// that every example parses.
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpuctl::cli {

struct Example {
  std::string comment;  // what it does, one line
  std::string command;  // "gpuctl ..." as typed; long ones continue with " \\\n      "
};

struct CommandDoc {
  std::string description;  // paragraphs, after the summary
  std::vector<Example> examples;
};

// Where the words of a flag's value or of an argument come from, for completion.
enum class ValueKind {
  choice,         // a fixed list (output formats, taint effects, ...)
  node,           // node names, from the cluster
  node_or_taint,  // taint's NODE... KEY[=VALUE]:EFFECT: node names, or the effects after a ':'
  namespace_,     // namespace names, from the cluster
  context,        // context names, from the kubeconfig
  job,            // GPU job names in the namespace, from the cluster
  label_key,      // label keys of the nodes (-l), from the cluster
  file,           // the shell's file names
  directory,      // the shell's folder names
};

struct ValueWords {
  ValueKind kind = ValueKind::choice;
  std::vector<std::string> choices;  // for ValueKind::choice
  // The parser refuses any other value (with_choices); false where the command itself judges
  // the value and says more than the parser could (diagnose --check: "unknown check ...").
  bool enforced = true;
};

// Held by AppContext for the life of the command tree; keyed by the tree's own objects.
class HelpData {
 public:
  void document(const CLI::App* command, CommandDoc doc) { docs_[command] = std::move(doc); }
  void values(const CLI::Option* option, ValueWords words) { words_[option] = std::move(words); }
  const CommandDoc* doc(const CLI::App* command) const;
  const ValueWords* words(const CLI::Option* option) const;

 private:
  std::map<const CLI::App*, CommandDoc> docs_;
  std::map<const CLI::Option*, ValueWords> words_;
};

// Records `doc` for `command` and makes --help show it after the flags.
void document(CLI::App& command, HelpData& help, CommandDoc doc);

// The text --help prints after the flags: the description, then "Examples:" with each example.
std::string render_footer(const CommandDoc& doc);

// Checks the value against `choices` (CLI11's IsMember) and records them as its words.
CLI::Option* with_choices(CLI::Option* option, HelpData& help, std::vector<std::string> choices);
// Records where the option's or argument's words come from (not ValueKind::choice).
CLI::Option* completes(CLI::Option* option, HelpData& help, ValueKind kind);

// Each gpuctl command in an example, as the words a shell would pass it (quotes and
// backslash-newlines resolved), "gpuctl" first: `job=$(gpuctl submit ...) && gpuctl jobs` has two.
std::vector<std::vector<std::string>> gpuctl_invocations(const std::string& command);

}  // namespace gpuctl::cli
