#include "common_flags.hpp"

#include <fmt/format.h>

namespace gpuctl::cli {

CLI::Option* add_dry_run_flag(CLI::App& app, HelpData& help, std::string& text) {
  text = "none";
  auto* option = app.add_flag(
      "--dry-run{client}", text,
      "Preview only: \"client\" prints what would be sent and sends nothing; \"server\" sends it with dryRun=All "
      "so the API server validates and admits it without persisting anything; \"none\" acts");
  return with_choices(option, help, {"none", "client", "server"})->option_text("[=MODE]");
}

Result<DryRun> parse_dry_run(const std::string& text) {
  if (text == "none" || text.empty()) return DryRun::none;
  if (text == "client") return DryRun::client;
  if (text == "server") return DryRun::server;
  return fail(Errc::invalid_argument, fmt::format("--dry-run: \"{}\" is not one of none, client, server", text));
}

std::string_view dry_run_suffix(DryRun dry_run) {
  switch (dry_run) {
    case DryRun::client: return " (dry run)";
    case DryRun::server: return " (server dry run)";
    case DryRun::none: break;
  }
  return "";
}

CLI::Option* add_selector_flag(CLI::App& app, HelpData& help, std::string& text, const std::string& what) {
  auto* option =
      app.add_option("-l,--selector", text,
                     fmt::format("Label selector for the {} (e.g. key1=value1,key2!=v,key3 in (a,b),!key4)", what));
  // Keys of the nodes' labels: what GPU selectors are written with (other objects' keys differ
  // little, and completion must stay one cheap list).
  return completes(option, help, ValueKind::label_key);
}

}  // namespace gpuctl::cli
