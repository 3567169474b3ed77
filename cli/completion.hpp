#pragma once
// Shell completion. The shells' scripts (completion_scripts.cpp) call the hidden
// `gpuctl __complete WORD... CURRENT`, which answers in cobra's protocol, as kubectl and every
// cobra tool do (so kubectl's plugin completion, kubectl_complete-gpu, speaks it too): one
// candidate per line ("word" or "word<TAB>description"), then ":<directive>".
//
// Which words fit is read from the command tree itself (subcommands, flags) and from HelpData
// (each flag's and argument's ValueWords), so completion cannot drift from --help.
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_doc.hpp"

namespace gpuctl::cli {

// Cobra's ShellCompDirective bits.
enum CompletionDirective : int {
  directive_default = 0,       // no candidates: the shell completes file names
  directive_error = 1,         // something went wrong: complete nothing
  directive_no_space = 2,      // no space after the word (a flag's "=value" follows)
  directive_no_file = 4,       // no candidates means none, not file names
  directive_filter_dirs = 16,  // complete folder names only
  directive_keep_order = 32,   // the candidates are in order; do not sort
};

struct Candidate {
  std::string word;
  std::string description;
};

// What the words typed so far ask for: words known without the cluster, or a kind of name the
// cluster (or the kubeconfig) has to give.
struct CompletionAnalysis {
  std::vector<Candidate> words;           // already filtered by `current`
  std::optional<ValueKind> from_cluster;  // node, namespace_, context, job, label_key
  std::string current;                    // the word under the cursor, without `prefix`
  std::string prefix;                     // "--context=" when the value is typed in the same word
  int directive = directive_no_file;
  // The globals typed earlier on the line, which say where the cluster's names come from.
  std::string kubeconfig, context, namespace_name;
};

// `words`: what was typed after "gpuctl", the last one the (possibly empty) word being completed.
CompletionAnalysis analyse_completion(const CLI::App& root, const HelpData& help,
                                      const std::vector<std::string>& words);

// The lines of the answer: each candidate of `names` that starts with analysis.current (with the
// prefix put back), the analysis' own words, then the directive.
std::string completion_answer(const CompletionAnalysis& analysis, const std::vector<std::string>& names);

// Registers the hidden `gpuctl __complete WORD... CURRENT`.
void register_complete_entry(CLI::App& root, class AppContext& context);

// The script `gpuctl completion SHELL` prints; SHELL is bash, zsh or fish.
std::string completion_script(const std::string& shell);

}  // namespace gpuctl::cli
