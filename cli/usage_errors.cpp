#include "usage_errors.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/util/strings.hpp"

namespace gpuctl::cli {
namespace {

// The words CLI11 did not expect: "The following argument(s) was/were not expected: a b".
std::vector<std::string> unexpected_words(const std::string& message) {
  std::vector<std::string> words;
  const auto colon = message.find(": ");
  if (colon == std::string::npos) return words;
  std::string rest = message.substr(colon + 2);
  std::size_t start = 0;
  while (start < rest.size()) {
    const std::size_t end = std::min(rest.find(' ', start), rest.size());
    if (end > start) words.push_back(rest.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// Every long and short flag of `app` and of its parents (global flags may follow a command).
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
      for (const auto& s : opt->get_snames()) names.push_back("-" + s);
    }
  }
  return names;
}

std::string unexpected_message(const CLI::App& target, const std::string& word) {
  const std::string where = command_path(&target);
  if (word.starts_with("-")) {
    const std::string flag = word.substr(0, word.find('='));
    const std::string near = util::closest_word(flag, flag_names(target));
    if (near.empty()) return fmt::format("unknown flag {} for \"{}\"", flag, where);
    return fmt::format("unknown flag {} for \"{}\"; did you mean {}?", flag, where, near);
  }
  const auto commands = subcommand_names(target);
  if (commands.empty()) return fmt::format("unexpected argument \"{}\" for \"{}\"", word, where);
  const std::string near = util::closest_word(word, commands);
  if (near.empty()) return fmt::format("unknown command \"{}\" for \"{}\"", word, where);
  return fmt::format("unknown command \"{}\" for \"{}\"; did you mean \"{}\"?", word, where, near);
}

class Formatter : public CLI::Formatter {
 public:
  // A flag with an optional value registers as "--dry-run{client}": shown as kubectl writes it.
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    for (auto open = name.find('{'); open != std::string::npos; open = name.find('{')) {
      const auto close = name.find('}', open);
      if (close == std::string::npos) break;
      name.erase(open, close - open + 1);
    }
    return name;
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string opts = CLI::Formatter::make_option_opts(opt);
    if (opts.starts_with(" [=")) opts.erase(0, 1);  // --dry-run[=MODE], no space
    return opts;
  }
};

}  // namespace

std::string one_line(std::string text) {
  std::ranges::replace(text, '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

CLI::App* selected_command(CLI::App& root) {
  CLI::App* target = &root;
  while (!target->get_subcommands().empty()) target = target->get_subcommands().front();
  return target;
}

std::string command_path(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    path = path.empty() ? a->get_name() : a->get_name() + " " + path;
  }
  return path;
}

std::string usage_error_message(const CLI::App& target, const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    // CLI11 does not list the words in the order typed: the one with a suggestion is the typo;
    // else a flag; else any.
    const auto words = unexpected_words(one_line(error.what()));
    std::string chosen;
    for (const auto& w : words) {
      std::string message = unexpected_message(target, w);
      if (message.find("did you mean") != std::string::npos) return message;
      if (chosen.empty() || w.starts_with("-")) chosen = std::move(message);
    }
    if (!chosen.empty()) return chosen;
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    for (const CLI::Option* opt : target.get_options()) {
      if (opt->get_positional() && opt->get_required() && opt->count() == 0)
        return fmt::format("missing arguments: {}", opt->get_description());
    }
  }
  return one_line(error.what());
}

std::shared_ptr<CLI::Formatter> help_formatter() { return std::make_shared<Formatter>(); }

}  // namespace gpuctl::cli
