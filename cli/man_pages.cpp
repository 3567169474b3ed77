#include "man_pages.hpp"

#include <fstream>

#include <fmt/format.h>

#include "app.hpp"
#include "gpuctl/build_info.hpp"
#include "usage_errors.hpp"

namespace gpuctl::cli {
namespace {

// Text as roff reads it: backslashes escaped, hyphens as minus signs (so --flag can be searched
// and copied), and a line that would start with a control character made literal.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string page_name(const CLI::App& app) {
  std::string path = command_path(&app);
  for (auto& c : path) {
    if (c == ' ') c = '-';
  }
  return path;
}

std::vector<const CLI::App*> visible_subcommands(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }))
    out.push_back(sub);
  return out;
}

// The footer's prose goes to DESCRIPTION, its "Examples:" part to EXAMPLES.
std::pair<std::string, std::string> split_footer(const std::string& footer) {
  const auto at = footer.find("Examples:");
  if (at == std::string::npos) return {footer, ""};
  std::string examples = footer.substr(at + 9);
  while (!examples.empty() && examples.front() == '\n') examples.erase(0, 1);
  return {footer.substr(0, at), examples};
}

std::string option_entry(const CLI::Option& opt) {
  std::string names;
  for (const auto& s : opt.get_snames()) names += (names.empty() ? "" : ", ") + fmt::format("\\fB\\-{}\\fR", s);
  for (const auto& l : opt.get_lnames())
    names += (names.empty() ? "" : ", ") + fmt::format("\\fB\\-\\-{}\\fR", roff(l));
  if (opt.get_positional()) names = fmt::format("\\fI{}\\fR", roff(opt.get_name()));
  std::string value;
  if (!opt.get_option_text().empty()) {
    value = roff(opt.get_option_text());
  } else if (opt.get_type_size() != 0 && !opt.get_positional()) {
    value = fmt::format(" \\fI{}\\fR", roff(opt.get_type_name()));
  }
  return fmt::format(".TP\n{}{}\n{}\n", names, value, roff(opt.get_description()));
}

std::string options_section(const CLI::App& app, const std::string& title) {
  std::string body;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    body += option_entry(*opt);
  }
  return body.empty() ? "" : fmt::format(".SH {}\n{}", title, body);
}

std::string page(const CLI::App& app, const CLI::App& root) {
  const std::string name = page_name(app);
  std::string upper = name;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto [prose, examples] = split_footer(app.get_footer());
  std::string text = fmt::format(".TH {} 1 \"\" \"gpuctl {}\" \"gpuctl manual\"\n", roff(upper), build_version());
  text += fmt::format(".SH NAME\n{} \\- {}\n", roff(name), roff(app.get_description()));
  text += fmt::format(".SH SYNOPSIS\n.B {}\n[\\fIOPTIONS\\fR]", roff(command_path(&app)));
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional()) text += fmt::format(" [\\fI{}\\fR]", roff(opt->get_name()));
  }
  if (!visible_subcommands(app).empty()) text += " [\\fICOMMAND\\fR]";
  text += "\n.SH DESCRIPTION\n" + roff(app.get_description()) + ".\n";
  if (!prose.empty() && &app != &root) text += ".PP\n.nf\n" + roff(prose) + "\n.fi\n";
  if (auto subs = visible_subcommands(app); !subs.empty()) {
    text += ".SH COMMANDS\n";
    for (const CLI::App* sub : subs)
      text += fmt::format(".TP\n\\fB{}\\fR(1)\n{}\n", roff(page_name(*sub)), roff(sub->get_description()));
  }
  text += options_section(app, "OPTIONS");
  if (&app != &root) text += options_section(root, "GLOBAL OPTIONS");
  text += ".SH EXIT STATUS\n.nf\n" + roff(split_footer(root.get_footer()).first) + "\n.fi\n";
  if (!examples.empty()) text += ".SH EXAMPLES\n.nf\n" + roff(examples) + "\n.fi\n";
  text +=
      ".SH ENVIRONMENT\n.TP\n.B KUBECONFIG\nThe kubeconfig files to use when \\fB\\-\\-kubeconfig\\fR is not given.\n"
      ".TP\n.B NO_COLOR\nWhen set, no colors are used.\n";
  text +=
      ".SH FILES\n.TP\n.I ~/.kube/config\nThe kubeconfig read when neither \\fB\\-\\-kubeconfig\\fR nor "
      "\\fBKUBECONFIG\\fR is given.\n";
  text += ".SH SEE ALSO\n";
  text += &app == &root ? "\\fBkubectl\\fR(1)\n" : "\\fBgpuctl\\fR(1), \\fBkubectl\\fR(1)\n";
  return text;
}

void collect(const CLI::App& app, const CLI::App& root, std::vector<std::pair<std::string, std::string>>& out) {
  out.emplace_back(page_name(app) + ".1", page(app, root));
  for (const CLI::App* sub : visible_subcommands(app)) collect(*sub, root, out);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> man_pages(const CLI::App& root) {
  std::vector<std::pair<std::string, std::string>> out;
  collect(root, root, out);
  return out;
}

void register_man(CLI::App& root, AppContext& ctx) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = root.add_subcommand("__man", "Write the man pages into DIR (build time)");
  cmd->group("");  // hidden
  cmd->add_option("DIR", *dir, "The folder to write into")->required();
  cmd->callback([dir, &root, &ctx] {
    ctx.run = [dir, &root]() -> Result<ExitCode> {
      for (const auto& [file, text] : man_pages(root)) {
        const std::string path = *dir + "/" + file;
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out) return fail(Errc::io, fmt::format("cannot write {}", path));
      }
      return ExitCode::ok;
    };
  });
}

}  // namespace gpuctl::cli
