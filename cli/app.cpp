#include "app.hpp"

#include "completion.hpp"
#include "man_pages.hpp"
#include "usage_errors.hpp"
#include "user_config.hpp"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "gpuctl/build_info.hpp"
#include "gpuctl/output/printable.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::cli {

Environment default_environment() {
  Environment env;
  env.load_config = [](const kube::LoadOptions& options) { return kube::load_rest_config(options); };
  env.make_transport = [](const kube::RestConfig&, const kube::TransportSettings& settings) {
    return kube::make_curl_transport(settings);
  };
  env.load_options_from_environment = [] { return kube::environment_load_options(); };
  env.make_ssh_runner = [](const ssh::SshSettings& settings) { return ssh::make_openssh_runner(settings); };
  const char* no_color = std::getenv("NO_COLOR");
  env.no_color_env = no_color != nullptr && no_color[0] != '\0';
  env.env_var = [](const char* name) -> const char* { return std::getenv(name); };
  return env;
}

AppContext::AppContext(Streams streams, Environment environment)
    : streams_(streams), environment_(std::move(environment)) {}

bool AppContext::color() const { return streams_.out_is_terminal && !globals_.no_color && !environment_.no_color_env; }

// Warnings quote the server (its Warning headers, messages of objects): escaped for the terminal.
void AppContext::warn(const std::string& message) { streams_.err << "Warning: " << output::printable(message) << '\n'; }

kube::LoadOptions AppContext::load_options() const {
  kube::LoadOptions options = environment_.load_options_from_environment();
  if (!globals_.kubeconfig.empty()) options.kubeconfig = globals_.kubeconfig;
  if (!globals_.context.empty()) options.context = globals_.context;
  if (!globals_.namespace_name.empty()) options.namespace_name = globals_.namespace_name;
  return options;
}

Result<kube::RestConfig> AppContext::load_config() {
  if (config_) return *config_;
  GPUCTL_TRY_ASSIGN(kube::RestConfig config, environment_.load_config(load_options()));
  config_ = config;
  return config;
}

Result<std::string> AppContext::namespace_name() {
  GPUCTL_TRY_ASSIGN(kube::RestConfig config, load_config());
  return config.namespace_name;
}

Result<kube::Client*> AppContext::client() {
  if (client_) return client_.get();
  GPUCTL_TRY_ASSIGN(auto timeout, util::parse_duration(globals_.request_timeout));
  GPUCTL_TRY_ASSIGN(kube::RestConfig config, load_config());

  kube::TransportSettings settings;
  settings.ca_pem = config.ca_pem;
  settings.insecure_skip_tls_verify = config.insecure_skip_tls_verify;
  settings.tls_server_name = config.tls_server_name;
  settings.proxy_url = config.proxy_url;
  settings.disable_compression = config.disable_compression;
  settings.user_agent = fmt::format("gpuctl/{} ({})", build_version(), build_commit());
  if (timeout.count() > 0) settings.connect_timeout = std::min(settings.connect_timeout, timeout);

  kube::ClientOptions options;
  options.request_timeout = timeout;
  options.stdin_is_terminal = streams_.stdin_is_terminal;
  std::ostream& err = streams_.err;
  // The server's Warning headers are its own text (admission webhooks write them): escaped.
  options.on_warning = [&err](std::string_view text) { err << "Warning: " << output::printable(text) << '\n'; };
  // Said at every verbosity: without it a throttled call looks like a hang.
  options.on_wait = [&err](std::string_view text) { err << text << '\n'; };
  if (globals_.verbosity >= 1) {
    int verbosity = globals_.verbosity;
    options.on_request = [&err, verbosity](const kube::RequestLog& log) {
      // Only method, URL, status and time: headers (credentials) are never logged.
      if (log.status == 0) {
        err << output::printable(fmt::format("{} {} failed after {} ms (attempt {}): {}", log.method, log.url,
                                             log.duration.count(), log.attempt, log.error))
            << '\n';
      } else {
        std::string detail;
        if (verbosity >= 2) {
          // Protobuf is named (gpuctl asks for it for the largest lists); JSON is the default.
          bool protobuf = log.content_type.starts_with("application/vnd.kubernetes.protobuf");
          detail = fmt::format(" [{}, {} connection{}{}]", log.protocol, log.new_connection ? "new" : "reused",
                               protobuf ? ", protobuf" : "",
                               log.content_encoding.empty() ? "" : ", " + log.content_encoding);
        }
        err << fmt::format("{} {} {} in {} ms{}{}\n", log.method, log.url, log.status, log.duration.count(),
                           log.attempt > 1 ? fmt::format(" (attempt {})", log.attempt) : "", detail);
      }
    };
  }
  auto transport = environment_.make_transport(config, settings);
  client_ = std::make_unique<kube::Client>(std::move(config), std::move(transport), std::move(options));
  return client_.get();
}

std::unique_ptr<ssh::Runner> AppContext::ssh_runner(const ssh::SshSettings& settings) {
  return environment_.make_ssh_runner(settings);
}

namespace {

void add_global_flags(CLI::App& app, GlobalOptions& g, HelpData& help) {
  auto* group = "Global options";
  completes(
      app.add_option("--kubeconfig", g.kubeconfig, "Path to the kubeconfig file to use (not merged with KUBECONFIG)"),
      help, ValueKind::file)
      ->group(group);
  completes(app.add_option("--context", g.context, "The kubeconfig context to use"), help, ValueKind::context)
      ->group(group);
  completes(app.add_option("-n,--namespace", g.namespace_name, "The namespace scope for this request"), help,
            ValueKind::namespace_)
      ->group(group);
  app.add_option("--request-timeout", g.request_timeout,
                 "How long to wait for a single server request (e.g. 1s, 2m); 0 waits forever")
      ->default_str("0")
      ->group(group);
  app.add_option("-v,--verbosity", g.verbosity,
                 "Log level: 1 logs every HTTP request (method, URL, status, duration) to stderr; 2 adds protocol, "
                 "connection reuse and compression")
      ->default_str("0")
      ->check(CLI::Range(0, 10))
      ->group(group);
  app.add_flag("--no-color", g.no_color, "Never use colors (also: the NO_COLOR environment variable)")->group(group);
}

CommandDoc root_doc() {
  std::string codes = "Exit codes:";
  for (const auto& row : exit_code_docs()) codes += fmt::format("\n  {:<6} {}", row.code, row.meaning);
  return {codes + "\n\nRun 'gpuctl COMMAND --help' for a command's flags and examples.", {}};
}

}  // namespace

void configure_app(CLI::App& app, AppContext& context, bool& show_version) {
  document(app, context.help(), root_doc());
  app.formatter(help_formatter());  // before the commands: each copies it when added
  app.fallthrough();                // global flags may follow the subcommand, as with kubectl
  app.require_subcommand(0, 1);
  app.add_flag("--version", show_version, "Print the version and the git commit gpuctl was built from");
  add_global_flags(app, context.globals(), context.help());
  for (const auto& spec : command_table()) {
    // The help lists commands by section; a spec may register several (cordon and uncordon).
    auto all = [](CLI::App*) { return true; };
    std::size_t before = app.get_subcommands(all).size();
    spec.register_command(app, context);
    auto subcommands = app.get_subcommands(all);
    for (std::size_t i = before; i < subcommands.size(); i++) subcommands[i]->group(spec.group);
  }
  register_complete_entry(app, context);  // hidden: the shells' scripts call it
  register_man(app, context);             // hidden; after the others, whose pages it writes
}

int run_cli(int argc, const char* const* argv, Streams streams, Environment environment) {
  AppContext context(streams, std::move(environment));
  CLI::App app{"gpuctl: GPU cluster administration for Kubernetes", "gpuctl"};
  bool show_version = false;
  configure_app(app, context, show_version);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // Help for the innermost selected subcommand, or the app.
    const CLI::App* target = selected_command(app);
    // The usage line names the whole command: "Usage: gpuctl jobs clean [OPTIONS]".
    streams.out << target->help(target->get_parent() == nullptr ? "" : command_path(target->get_parent()));
    return static_cast<int>(ExitCode::ok);
  } catch (const CLI::CallForAllHelp&) {
    streams.out << app.help("", CLI::AppFormatMode::All);
    return static_cast<int>(ExitCode::ok);
  } catch (const CLI::ParseError& e) {
    const CLI::App* target = selected_command(app);
    streams.err << fmt::format("error: {} (see '{} --help')\n", usage_error_message(*target, e), command_path(target));
    return static_cast<int>(ExitCode::usage);
  }

  if (show_version) {
    streams.out << fmt::format("gpuctl {} (commit {})\n", build_version(), build_commit());
    return static_cast<int>(ExitCode::ok);
  }
  if (!context.run) {
    streams.out << app.help();
    return static_cast<int>(ExitCode::ok);
  }
  // The config file fills in what neither a flag nor the environment set (cli/user_config).
  Result<void> configured = apply_user_config(app, context);
  Result<ExitCode> result = configured ? context.run() : fail(configured.error());
  streams.out.flush();
  if (!result) {
    // The one error line often quotes the server (a Status message, an object's field).
    streams.err << "error: " << output::printable(one_line(result.error().message)) << '\n';
    return static_cast<int>(exit_code_for(result.error()));
  }
  if (!streams.out) {
    streams.err << "error: writing the output failed (is the disk full or the pipe closed?)\n";
    return static_cast<int>(ExitCode::failure);
  }
  return static_cast<int>(*result);
}

}  // namespace gpuctl::cli
