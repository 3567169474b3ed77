#include "completion.hpp"

#include <fmt/format.h>

namespace gpuctl::cli {
namespace {

bool visible(const CLI::App* app) { return !app->get_group().empty(); }
bool visible(const CLI::Option* option) { return !option->get_group().empty(); }

// A flag of `app` or, since global flags may follow the subcommand, of a command above it.
const CLI::Option* find_flag(const CLI::App* app, const std::string& name) {
  for (; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* option = app->get_option_no_throw(name); option != nullptr && !option->get_positional())
      return option;
  }
  return nullptr;
}

// Whether the flag's value is the next word (--context prod); --dry-run's is optional and can
// only be attached (--dry-run=server), as with kubectl.
bool takes_next_word(const CLI::Option* option) { return option->get_items_expected_min() > 0; }

const CLI::App* find_subcommand(const CLI::App* app, const std::string& name) {
  auto found = app->get_subcommands([&](const CLI::App* s) { return visible(s) && s->check_name(name); });
  return found.empty() ? nullptr : found.front();
}

// The n-th positional argument of `app` (the last one takes the rest: NODE...).
const CLI::Option* positional(const CLI::App* app, std::size_t n) {
  std::vector<const CLI::Option*> positionals;
  for (const CLI::Option* option : app->get_options()) {
    if (option->get_positional()) positionals.push_back(option);
  }
  if (positionals.empty()) return nullptr;
  return positionals[std::min(n, positionals.size() - 1)];
}

std::string first_sentence(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (auto dot = line.find(". "); dot != std::string::npos) line.resize(dot);
  if (auto paren = line.find(" ("); paren != std::string::npos && paren > 20) line.resize(paren);
  return line;
}

void add_if_matches(std::vector<Candidate>& out, const std::string& current, std::string word,
                    std::string description) {
  if (word.starts_with(current)) out.push_back({std::move(word), std::move(description)});
}

// The words of an option's value, or of a positional argument.
void complete_value(const CLI::Option* option, const HelpData& help, CompletionAnalysis& a) {
  const ValueWords* words = option == nullptr ? nullptr : help.words(option);
  if (words == nullptr) {
    a.directive = directive_no_file;  // a free value (--image, --timeout): nothing to offer
    return;
  }
  switch (words->kind) {
    case ValueKind::choice:
      for (const auto& choice : words->choices) {
        if (!choice.empty()) add_if_matches(a.words, a.current, choice, "");
      }
      a.directive = directive_no_file;
      return;
    case ValueKind::node_or_taint:
      if (auto colon = a.current.rfind(':'); colon != std::string::npos) {
        // KEY[=VALUE]:EFFECT, and its removal KEY[=VALUE]:EFFECT-
        for (const char* effect : {"NoSchedule", "PreferNoSchedule", "NoExecute"}) {
          add_if_matches(a.words, a.current, a.current.substr(0, colon + 1) + effect, "");
        }
        a.directive = directive_no_file;
        return;
      }
      a.from_cluster = ValueKind::node;
      a.directive = directive_no_file;
      return;
    case ValueKind::file: a.directive = directive_default; return;
    case ValueKind::directory: a.directive = directive_filter_dirs; return;
    default:
      a.from_cluster = words->kind;
      a.directive = directive_no_file;
      return;
  }
}

// The value typed in the word under the cursor: a list's (--check ID,...) item after the last
// delimiter is completed, the items before it stay in the word (a.prefix, with any "--flag=").
void complete_value_in_word(const CLI::Option* option, const HelpData& help, CompletionAnalysis& a) {
  const char delimiter = option == nullptr ? '\0' : option->get_delimiter();
  if (const auto at = a.current.rfind(delimiter); delimiter != '\0' && at != std::string::npos) {
    a.prefix += a.current.substr(0, at + 1);
    a.current.erase(0, at + 1);
  }
  complete_value(option, help, a);
  for (auto& c : a.words) c.word = a.prefix + c.word;
}

// Remembers the globals that say which cluster and namespace the names come from.
void note_global(CompletionAnalysis& a, const CLI::Option* option, const std::string& value) {
  if (option->check_lname("kubeconfig")) a.kubeconfig = value;
  if (option->check_lname("context")) a.context = value;
  if (option->check_lname("namespace")) a.namespace_name = value;
}

void complete_flag_names(const CLI::App* app, CompletionAnalysis& a) {
  for (const CLI::App* at = app; at != nullptr; at = at->get_parent()) {
    for (const CLI::Option* option : at->get_options()) {
      if (option->get_positional() || !visible(option)) continue;
      for (const auto& name : option->get_lnames()) {
        add_if_matches(a.words, a.current, "--" + name, first_sentence(option->get_description()));
      }
    }
  }
  a.directive = directive_no_file;
}

}  // namespace

CompletionAnalysis analyse_completion(const CLI::App& root, const HelpData& help,
                                      const std::vector<std::string>& words) {
  CompletionAnalysis a;
  const CLI::App* app = &root;
  std::size_t positionals = 0;
  const CLI::Option* value_of = nullptr;  // the flag whose value is the next word
  bool after_separator = false;
  for (std::size_t i = 0; i + 1 < words.size(); i++) {
    const std::string& word = words[i];
    if (value_of != nullptr) {
      note_global(a, value_of, word);
      value_of = nullptr;
    } else if (after_separator) {
      continue;
    } else if (word == "--") {
      after_separator = true;
    } else if (word.size() > 1 && word[0] == '-') {
      const auto eq = word.find('=');
      const CLI::Option* option = find_flag(app, word.substr(0, eq));
      if (option == nullptr) continue;
      if (eq != std::string::npos) {
        note_global(a, option, word.substr(eq + 1));
      } else if (takes_next_word(option)) {
        value_of = option;
      }
    } else if (const CLI::App* sub = positionals == 0 ? find_subcommand(app, word) : nullptr; sub != nullptr) {
      app = sub;
    } else {
      positionals++;
    }
  }
  a.current = words.empty() ? "" : words.back();
  if (value_of != nullptr) {
    complete_value_in_word(value_of, help, a);
  } else if (after_separator) {
    a.directive = directive_default;  // the container's command and its arguments
  } else if (a.current.starts_with("-")) {
    const auto eq = a.current.find('=');
    if (eq == std::string::npos) {
      complete_flag_names(app, a);
    } else {
      a.prefix = a.current.substr(0, eq + 1);
      a.current = a.current.substr(eq + 1);
      complete_value_in_word(find_flag(app, a.prefix.substr(0, eq)), help, a);
    }
  } else {
    if (positionals == 0) {
      for (const CLI::App* sub : app->get_subcommands([](const CLI::App* s) { return visible(s); })) {
        add_if_matches(a.words, a.current, sub->get_name(), sub->get_description());
      }
    }
    const CLI::Option* argument = positional(app, positionals);
    if (argument != nullptr) {
      complete_value(argument, help, a);
    } else {
      a.directive = directive_no_file;
    }
  }
  return a;
}

std::string completion_answer(const CompletionAnalysis& analysis, const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    if (name.starts_with(analysis.current)) out += analysis.prefix + name + "\n";
  }
  for (const auto& c : analysis.words) {
    out += c.description.empty() ? c.word + "\n" : fmt::format("{}\t{}\n", c.word, c.description);
  }
  return out + fmt::format(":{}\n", analysis.directive);
}

}  // namespace gpuctl::cli
