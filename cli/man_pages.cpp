#include "man_pages.hpp"

#include <fstream>

#include <fmt/format.h>

#include "app.hpp"
#include "exit_code.hpp"
#include "gpuctl/build_info.hpp"
#include "gpuctl/config/user_config.hpp"
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

std::string examples_section(const CommandDoc& doc) {
  if (doc.examples.empty()) return "";
  std::string text = ".SH EXAMPLES\n";
  for (const auto& example : doc.examples) {
    text +=
        fmt::format(".PP\n{}\n.PP\n.RS 4\n.nf\n\\fB{}\\fR\n.fi\n.RE\n", roff(example.comment), roff(example.command));
  }
  return text;
}

std::string exit_status_section() {
  std::string text = ".SH EXIT STATUS\n";
  for (const auto& row : exit_code_docs()) text += fmt::format(".TP\n.B {}\n{}\n", row.code, roff(row.meaning));
  return text;
}

std::string files_section() {
  return ".SH FILES\n"
         ".TP\n.I ~/.kube/config\nThe kubeconfig read when neither \\fB\\-\\-kubeconfig\\fR nor \\fBKUBECONFIG\\fR is "
         "given.\n"
         ".TP\n.I ~/.config/gpuctl/config.yaml\nDefaults an admin sets once: the ssh settings, timeouts, fan-out and "
         "the output format, optionally per kubeconfig context (under \\fBcontexts\\fR). A flag or its environment "
         "variable wins; \\fBgpuctl config view\\fR shows each setting and where it came from.\n"
         ".TP\n.I ~/.cache/gpuctl/completion/\nNames that shell completion read from the cluster, kept for 30 "
         "seconds (files of mode 0600).\n";
}

std::string environment_section() {
  struct Variable {
    const char* name;
    const char* meaning;
  };
  static const Variable variables[] = {
      {"KUBECONFIG", "The kubeconfig files to use when --kubeconfig is not given (':'-separated, merged)."},
      {"NO_COLOR", "When set, no colors are used."},
      {"GPUCTL_CONFIG", "gpuctl's configuration file, instead of the default one; it must exist."},
      {"XDG_CONFIG_HOME", "When set, the configuration file is $XDG_CONFIG_HOME/gpuctl/config.yaml."},
      {"XDG_CACHE_HOME", "Where completion keeps the names it read from the cluster (default ~/.cache)."},
  };
  std::string text = ".SH ENVIRONMENT\n";
  for (const auto& v : variables) text += fmt::format(".TP\n.B {}\n{}\n", v.name, roff(v.meaning));
  // The settings' variables, from the table the config file and `config view` use.
  for (const auto& spec : config::setting_specs()) {
    if (spec.env.empty()) continue;
    const std::string flag = spec.flag.empty() ? "" : fmt::format(", and loses to {}", spec.flag);
    text += fmt::format(".TP\n.B {}\n{}\n", spec.env,
                        roff(fmt::format("The default of the setting {} (see gpuctl config view): it wins over the "
                                         "configuration file{}.",
                                         spec.key, flag)));
  }
  return text;
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

std::string page(const CLI::App& app, const CLI::App& root, const HelpData& help) {
  const std::string name = page_name(app);
  std::string upper = name;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const CommandDoc none;
  const CommandDoc& doc = help.doc(&app) != nullptr ? *help.doc(&app) : none;
  std::string text = fmt::format(".TH {} 1 \"\" \"gpuctl {}\" \"gpuctl manual\"\n", roff(upper), build_version());
  text += fmt::format(".SH NAME\n{} \\- {}\n", roff(name), roff(app.get_description()));
  text += fmt::format(".SH SYNOPSIS\n.B {}\n[\\fIOPTIONS\\fR]", roff(command_path(&app)));
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional()) text += fmt::format(" [\\fI{}\\fR]", roff(opt->get_name()));
  }
  if (!visible_subcommands(app).empty()) text += " [\\fICOMMAND\\fR]";
  text += "\n.SH DESCRIPTION\n" + roff(app.get_description()) + ".\n";
  if (!doc.description.empty() && &app != &root) text += ".PP\n.nf\n" + roff(doc.description) + "\n.fi\n";
  if (auto subs = visible_subcommands(app); !subs.empty()) {
    text += ".SH COMMANDS\n";
    for (const CLI::App* sub : subs)
      text += fmt::format(".TP\n\\fB{}\\fR(1)\n{}\n", roff(page_name(*sub)), roff(sub->get_description()));
  }
  text += options_section(app, "OPTIONS");
  if (&app != &root) text += options_section(root, "GLOBAL OPTIONS");
  text += exit_status_section();
  text += examples_section(doc);
  text += environment_section();
  text += files_section();
  text += ".SH SEE ALSO\n";
  text += &app == &root ? "\\fBkubectl\\fR(1)\n" : "\\fBgpuctl\\fR(1), \\fBkubectl\\fR(1)\n";
  return text;
}

void collect(const CLI::App& app, const CLI::App& root, const HelpData& help,
             std::vector<std::pair<std::string, std::string>>& out) {
  out.emplace_back(page_name(app) + ".1", page(app, root, help));
  for (const CLI::App* sub : visible_subcommands(app)) collect(*sub, root, help, out);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> man_pages(const CLI::App& root, const HelpData& help) {
  std::vector<std::pair<std::string, std::string>> out;
  collect(root, root, help, out);
  return out;
}

void register_man(CLI::App& root, AppContext& ctx) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = root.add_subcommand("__man", "Write the man pages into DIR (build time)");
  cmd->group("");  // hidden
  cmd->add_option("DIR", *dir, "The folder to write into")->required();
  cmd->callback([dir, &root, &ctx] {
    ctx.run = [dir, &root, &ctx]() -> Result<ExitCode> {
      for (const auto& [file, text] : man_pages(root, ctx.help())) {
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
