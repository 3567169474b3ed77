#include "command_doc.hpp"

#include <fmt/format.h>

namespace gpuctl::cli {

const CommandDoc* HelpData::doc(const CLI::App* command) const {
  auto it = docs_.find(command);
  return it == docs_.end() ? nullptr : &it->second;
}

const ValueWords* HelpData::words(const CLI::Option* option) const {
  auto it = words_.find(option);
  return it == words_.end() ? nullptr : &it->second;
}

std::string render_footer(const CommandDoc& doc) {
  std::string text = doc.description;
  if (doc.examples.empty()) return text;
  if (!text.empty()) text += "\n\n";
  text += "Examples:";
  for (const auto& example : doc.examples) {
    text += fmt::format("\n  # {}\n  {}\n", example.comment, example.command);
  }
  text.pop_back();
  return text;
}

void document(CLI::App& command, HelpData& help, CommandDoc doc) {
  // CLI11 prints the footer after the flags; rendering it from the record keeps one copy.
  command.footer(render_footer(doc));
  help.document(&command, std::move(doc));
}

CLI::Option* with_choices(CLI::Option* option, HelpData& help, std::vector<std::string> choices) {
  option->check(CLI::IsMember(choices));
  help.values(option, ValueWords{ValueKind::choice, std::move(choices)});
  return option;
}

CLI::Option* completes(CLI::Option* option, HelpData& help, ValueKind kind) {
  help.values(option, ValueWords{kind, {}});
  return option;
}

namespace {

// Splits a shell command line into words and operators ("|", ">", "<", ";", "&", ")", and "$("
// or "<(" as "("), with
// quotes and backslash-newlines resolved. Operators come back as words starting with '\0'.
std::vector<std::string> shell_tokens(const std::string& line) {
  std::vector<std::string> tokens;
  std::string word;
  bool in_word = false;
  char quote = 0;
  auto end_word = [&] {
    if (in_word) tokens.push_back(word);
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < line.size(); i++) {
    char c = line[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (quote == '"' && c == '\\' && i + 1 < line.size()) {
        word += line[++i];
      } else {
        word += c;
      }
    } else if (c == '\\' && i + 1 < line.size()) {
      if (line[i + 1] != '\n') word += line[i + 1], in_word = true;
      i++;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      end_word();
    } else if (c == '|' || c == '>' || c == '<' || c == ';' || c == '&' || c == ')' ||
               (c == '$' && i + 1 < line.size() && line[i + 1] == '(')) {
      end_word();
      // "$(" and "<(" start a command; ">" and "<" are followed by a file name.
      const bool substitution = (c == '$' || c == '<') && i + 1 < line.size() && line[i + 1] == '(';
      tokens.push_back(std::string(1, '\0') + (substitution ? '(' : c));
      if (substitution) i++;
    } else {
      word += c;
      in_word = true;
    }
  }
  end_word();
  return tokens;
}

}  // namespace

std::vector<std::vector<std::string>> gpuctl_invocations(const std::string& command) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> current;
  bool at_command_start = true;
  bool in_gpuctl = false;
  for (const auto& token : shell_tokens(command)) {
    if (!token.empty() && token[0] == '\0') {
      // A redirection's target is not a command; anything else starts the next command.
      if (in_gpuctl) out.push_back(current);
      current.clear();
      in_gpuctl = false;
      at_command_start = token[1] != '>' && token[1] != '<';
      continue;
    }
    // VAR=value before a command, and the openers of a group: the command is still to come.
    if (at_command_start && (token.find('=') != std::string::npos || token == "{" || token == "(")) continue;
    if (at_command_start) in_gpuctl = token == "gpuctl";
    at_command_start = false;
    if (in_gpuctl) current.push_back(token);
  }
  if (in_gpuctl) out.push_back(current);
  return out;
}

}  // namespace gpuctl::cli
