// gpuctl config view: which config file was read, the kubeconfig context whose section applies,
// and every configurable setting's effective value with where it came from.
#include <fmt/format.h>

#include "commands.hpp"
#include "gpuctl/output/printable.hpp"
#include "gpuctl/output/table.hpp"
#include "output_format.hpp"
#include "ssh_flags.hpp"

namespace gpuctl::cli {
namespace {

struct ConfigViewOptions {
  std::string output;
  SshFlags ssh;  // accepted so that a flag's place in the precedence can be seen
};

std::string file_line(const config::EffectiveConfig& view) {
  if (!view.location) return "none (GPUCTL_CONFIG, XDG_CONFIG_HOME and HOME are not set)";
  return fmt::format("{} ({}{})", view.location->path,
                     view.location->named_by == "GPUCTL_CONFIG" ? "named by GPUCTL_CONFIG" : "the default place",
                     view.file_found ? "" : "; not found, nothing applied");
}

std::string context_line(const config::EffectiveConfig& view) {
  if (view.context.empty()) return "none known (no kubeconfig context): the file's top level applies";
  return fmt::format("{} (from {}; {})", view.context, view.context_from,
                     view.context_section ? "the file has a section for it" : "no section for it in the file");
}

std::string shown_value(const config::EffectiveSetting& s) {
  if (s.value.empty()) return s.spec->default_shown.empty() ? "-" : std::string(s.spec->default_shown);
  std::string joined;
  for (const auto& v : s.value) joined += (joined.empty() ? "" : ",") + v;
  return joined;
}

std::string shown_source(const config::EffectiveSetting& s) {
  switch (s.source) {
    case config::Source::flag: return "flag " + s.origin;
    case config::Source::env: return "env " + s.origin;
    case config::Source::file_context: return "file, context section: " + s.origin;
    case config::Source::file: return "file: " + s.origin;
    case config::Source::default_value: break;
  }
  return "default";
}

Result<ExitCode> run_config_view(const ConfigViewOptions& o, AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(auto structured, structured_output_format(o.output));
  const config::EffectiveConfig& view = ctx.user_config;
  auto& out = ctx.streams().out;
  if (structured) {
    out << render_structured(config::to_json(view), *structured);
    return ExitCode::ok;
  }
  // Paths and context names are the user's own, but escaped as any text gpuctl did not write.
  print_line(out, "File:     " + file_line(view));
  print_line(out, "Context:  " + context_line(view));
  out << "\n";
  output::Table table({"SETTING", "VALUE", "SOURCE"});
  for (const auto& s : view.settings) {
    table.add_row({std::string(s.spec->key), output::printable(shown_value(s)), output::printable(shown_source(s))});
  }
  out << table.render({true, ctx.color()});
  return ExitCode::ok;
}

}  // namespace

void register_config(CLI::App& app, AppContext& ctx) {
  auto* cmd = app.add_subcommand("config", "gpuctl's own configuration file: what it sets and what wins");
  cmd->require_subcommand(1);
  document(*cmd, ctx.help(),
           {R"(gpuctl reads $GPUCTL_CONFIG, else $XDG_CONFIG_HOME/gpuctl/config.yaml, else
~/.config/gpuctl/config.yaml, for the defaults of its ssh settings (ssh.user, config, identity,
port, knownHosts, options, timeout, connectTimeout, fanout, hostFrom), requestTimeout and output,
with a section per kubeconfig context under contexts. A flag or its environment variable wins.)",
            {{"Which file, which context, and where each setting comes from", "gpuctl config view"}}});
  auto o = std::make_shared<ConfigViewOptions>();
  auto* view =
      cmd->add_subcommand("view", "Show the config file read, the context used, and each setting's value and source");
  document(*view, ctx.help(),
           {R"(The file is $GPUCTL_CONFIG (which must exist), else $XDG_CONFIG_HOME/gpuctl/config.yaml, else
~/.config/gpuctl/config.yaml; without one nothing is applied. For each setting the first of these
wins: the flag on the command line, its environment variable (GPUCTL_SSH_*), the file's section
for the kubeconfig context in use (--context, else the current context), the file's top level,
gpuctl's default. Flags given here (--ssh-*, --request-timeout, --context) show their place.)",
            {{"Every setting and its source", "gpuctl config view"},
             {"Another context's view, as YAML", "gpuctl config view --context prod-east -o yaml"},
             {"Only what is not a default",
              "gpuctl config view -o json | jq '.settings[] | select(.source != \"default\")'"}}});
  add_output_flag(*view, ctx.help(), o->output, {"text", "json", "yaml"});
  add_ssh_flags(*view, ctx.help(), o->ssh);
  view->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_config_view(*o, ctx); }; });
}

}  // namespace gpuctl::cli
