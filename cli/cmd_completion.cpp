// gpuctl completion bash|zsh|fish, and the hidden __complete the scripts call on every TAB.
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "commands.hpp"
#include "completion.hpp"
#include "gpuctl/kube/config.hpp"
#include "gpuctl/ops/completion/names.hpp"

namespace gpuctl::cli {
namespace {

// The shell waits for the answer: past this the names are given up, never the terminal.
constexpr auto kClusterDeadline = std::chrono::milliseconds(1000);

ops::NameSource source_of(ValueKind kind) {
  switch (kind) {
    case ValueKind::namespace_: return ops::NameSource::namespaces;
    case ValueKind::job: return ops::NameSource::jobs;
    case ValueKind::label_key: return ops::NameSource::node_label_keys;
    default: return ops::NameSource::nodes;
  }
}

// ~/.cache/gpuctl/completion, or under $XDG_CACHE_HOME; empty when neither is known.
std::string cache_dir(const AppContext& ctx) {
  const auto& env = ctx.environment().env_var;
  const char* xdg = env ? env("XDG_CACHE_HOME") : nullptr;
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/gpuctl/completion";
  const char* home = env ? env("HOME") : nullptr;
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.cache/gpuctl/completion";
  return "";
}

// The names from the cluster, through the cache. Any failure (no kubeconfig, unreachable,
// forbidden) is no names: completion never prints an error into the user's command line.
std::vector<std::string> names_from_cluster(AppContext& ctx, ValueKind kind) {
  ctx.globals().request_timeout = "1s";  // each request; the whole lookup has kClusterDeadline
  auto client = ctx.client();
  if (!client) return {};
  auto namespace_name = ctx.namespace_name();
  if (!namespace_name) return {};
  const ops::NameSource source = source_of(kind);
  const ops::NameCache cache{cache_dir(ctx)};
  const std::string key = ops::name_cache_key((*client)->config(), source, *namespace_name);
  if (!cache.dir.empty()) {
    if (auto cached = ops::read_cached_names(cache, key, std::chrono::system_clock::now())) return *cached;
  }
  auto names = ops::list_names(**client, source, *namespace_name);
  if (!names) return {};
  if (!cache.dir.empty())
    (void)ops::write_cached_names(cache, key, *names);  // a cache that cannot be written is no cache
  return *names;
}

Result<ExitCode> run_complete(AppContext& ctx, const CLI::App& root, const std::vector<std::string>& words) {
  CompletionAnalysis analysis = analyse_completion(root, ctx.help(), words);
  if (!analysis.kubeconfig.empty()) ctx.globals().kubeconfig = analysis.kubeconfig;
  if (!analysis.context.empty()) ctx.globals().context = analysis.context;
  if (!analysis.namespace_name.empty()) ctx.globals().namespace_name = analysis.namespace_name;
  std::vector<std::string> names;
  if (analysis.from_cluster == ValueKind::context) {
    // From the kubeconfig alone: no request, and it works when the cluster is down.
    if (auto contexts = kube::kubeconfig_contexts(ctx.load_options())) names = contexts->names;
  } else if (analysis.from_cluster) {
    auto lookup =
        std::async(std::launch::async, [&ctx, kind = *analysis.from_cluster] { return names_from_cluster(ctx, kind); });
    if (lookup.wait_for(kClusterDeadline) != std::future_status::ready) {
      // Still waiting (a slow exec credential plugin, a server that accepts and never answers):
      // answer without the names and leave at once; joining the lookup could block the shell.
      ctx.streams().out << completion_answer(analysis, {}) << std::flush;
      std::fflush(nullptr);
      std::_Exit(0);
    }
    names = lookup.get();
  }
  ctx.streams().out << completion_answer(analysis, names);
  return ExitCode::ok;
}

}  // namespace

void register_complete_entry(CLI::App& root, AppContext& ctx) {
  auto* cmd = root.add_subcommand("__complete", "Complete a command line (called by the shells' completion scripts)");
  cmd->group("");  // hidden
  // Every word after it is the line's, flags included: none is parsed, none falls through.
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->fallthrough(false);
  cmd->callback([cmd, &root, &ctx] {
    std::vector<std::string> words = cmd->remaining();
    ctx.run = [words, &root, &ctx] { return run_complete(ctx, root, words); };
  });
}

void register_completion(CLI::App& app, AppContext& ctx) {
  auto shell = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("completion", "Print the shell completion script for bash, zsh or fish");
  document(*cmd, ctx.help(),
           {R"(Completes commands, flags and their values (output formats, taint effects, check ids, dry-run
modes) without the cluster, and node names, namespaces, job names and node label keys from it,
honouring --kubeconfig, --context and -n typed earlier on the line. Contexts come from the
kubeconfig. Names are read as metadata only, with a deadline of about a second, and kept for 30 s
under $XDG_CACHE_HOME/gpuctl/completion (default ~/.cache; files 0600), so TAB never hangs on a
slow or unreachable cluster: it then offers no names and prints nothing.

Installed packages put the scripts where the shells look (share/bash-completion/completions/gpuctl,
share/zsh/site-functions/_gpuctl); kubectl_complete-gpu makes 'kubectl gpu' complete too.)",
            {{"Completion in the current bash session", "source <(gpuctl completion bash)"},
             {"For every zsh session of this user (the folder must be on $fpath before compinit)",
              "gpuctl completion zsh > ~/.zfunc/_gpuctl"},
             {"For fish", "gpuctl completion fish > ~/.config/fish/completions/gpuctl.fish"}}});
  with_choices(cmd->add_option("SHELL", *shell, "bash, zsh or fish")->required(), ctx.help(), {"bash", "zsh", "fish"});
  cmd->callback([shell, &ctx] {
    ctx.run = [shell, &ctx]() -> Result<ExitCode> {
      ctx.streams().out << completion_script(*shell);
      return ExitCode::ok;
    };
  });
}

}  // namespace gpuctl::cli
