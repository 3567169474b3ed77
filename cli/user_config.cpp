#include "user_config.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ssh_flags.hpp"
#include "usage_errors.hpp"

namespace gpuctl::cli {
namespace {

using config::EffectiveSetting;
using config::Source;

CLI::Option* option_for(CLI::App& app, CLI::App& command, const config::SettingSpec& spec) {
  if (spec.flag.empty()) return nullptr;
  return (spec.global ? app : command).get_option_no_throw(std::string(spec.flag));
}

// CLI11 writes "--fanout: Value 5000 not in range 1 to 1024": the file names the key instead.
std::string reason_of(const CLI::Error& e) {
  std::string what = e.what();
  auto colon = what.find(": ");
  return what.starts_with("-") && colon != std::string::npos ? what.substr(colon + 2) : what;
}

// The kubeconfig context whose section applies: --context, else the kubeconfig's current one.
// Only read when it can matter; a kubeconfig that cannot be read leaves the top level alone.
void find_context(AppContext& ctx, bool wanted, config::EffectiveConfig& view) {
  if (!ctx.globals().context.empty()) {
    view.context = ctx.globals().context;
    view.context_from = "--context";
  } else if (wanted) {
    if (auto rest = ctx.rest_config(); rest && !rest->context.empty()) {
      view.context = rest->context;
      view.context_from = "kubeconfig";
    }
  }
}

// Feeds one value from the file into its flag; the flag's own checks judge it.
Result<void> feed(CLI::Option& option, const EffectiveSetting& s, const std::string& file) {
  try {
    option.add_result(s.value);
    option.run_callback();
  } catch (const CLI::Error& e) {
    if (s.spec->kind == config::ValueKind::output) {
      // This command's -o has no such format: the default is for the commands that have it.
      option.clear();
      return {};
    }
    return fail(Errc::config, fmt::format("{}: {}: {}", file, s.origin, reason_of(e)));
  }
  return {};
}

}  // namespace

Result<void> apply_user_config(CLI::App& app, AppContext& ctx) {
  CLI::App& command = *selected_command(app);
  if (command.get_name().starts_with("__")) return {};
  const config::EnvLookup& env = ctx.environment().env_var;
  config::EffectiveConfig& view = ctx.user_config;
  view.location = config::locate_user_config(env);
  std::optional<config::UserConfig> file;
  if (view.location) {
    const char* home = env ? env("HOME") : nullptr;
    GPUCTL_TRY_ASSIGN(file, config::load_user_config(*view.location, home ? home : ""));
    view.file_found = file.has_value();
  }
  const bool is_view =
      command.get_name() == "view" && command.get_parent() != nullptr && command.get_parent()->get_name() == "config";
  find_context(ctx, is_view || (file && !file->contexts.empty()), view);
  view.context_section = file && !view.context.empty() && file->contexts.contains(view.context);

  config::ResolveInput input;
  input.file = file ? &*file : nullptr;
  input.context = view.context;
  input.env = env;
  for (const auto& spec : config::setting_specs()) {
    if (CLI::Option* o = option_for(app, command, spec); o != nullptr && o->count() > 0) {
      input.flags[std::string(spec.flag)] = o->results();
    }
  }
  view.settings = config::resolve_settings(input);

  const EffectiveSetting* known_hosts = nullptr;
  for (const auto& s : view.settings) {
    if (s.source != Source::file && s.source != Source::file_context) continue;
    if (s.spec->key == "ssh.knownHosts") {
      known_hosts = &s;  // after ssh.options, which may name a known_hosts file of their own
    } else if (CLI::Option* o = option_for(app, command, *s.spec)) {
      GPUCTL_TRY(feed(*o, s, view.location->path));
    }
  }
  CLI::Option* options = command.get_option_no_throw("--ssh-option");
  if (known_hosts != nullptr && options != nullptr && !has_ssh_option(options->results(), "UserKnownHostsFile")) {
    EffectiveSetting as_option = *known_hosts;
    as_option.value = {known_hosts_option(known_hosts->value.front())};
    GPUCTL_TRY(feed(*options, as_option, view.location->path));
  }
  return {};
}

}  // namespace gpuctl::cli
