#pragma once
// gpuctl's own configuration file (~/.config/gpuctl/config.yaml, or $GPUCTL_CONFIG): the
// defaults an admin sets once (how nodes are reached over ssh, timeouts, the default -o),
// optionally per kubeconfig context. This module reads and checks the file, and resolves every
// setting by precedence: the flag > its environment variable > the file's section for the
// current context > the file's top level > the built-in default. The command layer feeds the
// values that come from the file into its flags; `gpuctl config view` shows the resolution.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::config {

// Reads one environment variable: null when unset (an empty value counts as unset).
using EnvLookup = std::function<const char*(const char*)>;

// How a value in the file is checked before a flag ever sees it.
enum class ValueKind {
  text,       // any string
  path,       // a file: "~/" expanded, a relative path taken from the config file's folder
  port,       // 1-65535
  count,      // a positive integer (the flag may bound it further)
  duration,   // Go's duration grammar, as the flags take it ("60s", "1m30s", "0")
  host_rule,  // --ssh-host-from's grammar
  output,     // one of the -o formats some command accepts
  list,       // a list of strings (ssh -o KEY=VALUE options)
};

// One setting the file may hold.
struct SettingSpec {
  std::string_view key;   // within a section: "ssh.user", "requestTimeout"
  std::string_view flag;  // the flag that sets it; "" when none (ssh.knownHosts)
  std::string_view env;   // its environment variable; "" when none
  ValueKind kind = ValueKind::text;
  bool global = false;             // a global flag (every command) rather than the command's own
  std::string_view default_shown;  // the built-in default as `config view` shows it; "" when none
};
// Every setting, in the order `config view` lists them.
const std::vector<SettingSpec>& setting_specs();
const SettingSpec* find_setting(std::string_view key);

// A value as the flags take it: one string for a scalar setting, any number for a list.
using Value = std::vector<std::string>;

// The settings one part of the file gives (top level, or one context's section), by key.
using Section = std::map<std::string, Value, std::less<>>;

struct UserConfig {
  std::string path;  // the file, as errors name it
  Section top;
  std::map<std::string, Section, std::less<>> contexts;  // kubeconfig context name -> its overrides
};

// At most this much of a config file is read (it holds a few dozen lines).
inline constexpr std::size_t kMaxUserConfigBytes = 1 << 20;

// Parses and checks the file's text. Errors are Errc::config, one line "PATH: KEY: why" with the
// full key path (contexts.prod.ssh.port), unknown keys with the closest known one. `home`
// expands "~/" in paths; relative paths are taken from `path`'s folder, as kubeconfigs do.
Result<UserConfig> parse_user_config(std::string_view yaml, const std::string& path, const std::string& home);

// Which file: $GPUCTL_CONFIG (then it must exist), else $XDG_CONFIG_HOME/gpuctl/config.yaml,
// else $HOME/.config/gpuctl/config.yaml; nullopt when none of these is set.
struct ConfigLocation {
  std::string path;
  std::string named_by;  // "GPUCTL_CONFIG", "XDG_CONFIG_HOME" or "HOME"
  bool required = false;
};
std::optional<ConfigLocation> locate_user_config(const EnvLookup& env);

// Reads and parses the file; nullopt when an optional file does not exist.
Result<std::optional<UserConfig>> load_user_config(const ConfigLocation& location, const std::string& home);

enum class Source { flag, env, file_context, file, default_value };
std::string_view to_string(Source source);  // flag, env, fileContext, file, default

struct EffectiveSetting {
  const SettingSpec* spec = nullptr;
  // Empty: unset (ssh's own choice, or a default that is a description rather than a value).
  Value value;
  Source source = Source::default_value;
  // Where exactly: "--ssh-user", "GPUCTL_SSH_USER", "contexts.prod.ssh.user", "ssh.user"; "" for
  // the default.
  std::string origin;
};

struct ResolveInput {
  const UserConfig* file = nullptr;  // null: no file
  std::string context;               // the kubeconfig context in use; "" when unknown
  // What the command line gave, by flag name (only flags that were given).
  std::map<std::string, Value, std::less<>> flags;
  EnvLookup env;  // null: no variable is set
};

// The result of resolution, and what `config view -o json|yaml` shows.
struct EffectiveConfig {
  std::optional<ConfigLocation> location;  // the file looked for; nullopt: none could be named
  bool file_found = false;
  std::string context;
  std::string context_from;      // "--context" or "kubeconfig"; "" when no context is known
  bool context_section = false;  // the file has a section for this context
  std::vector<EffectiveSetting> settings;
};

// Resolves every setting of setting_specs() by precedence (flag > env > context section > file >
// default). Pure.
std::vector<EffectiveSetting> resolve_settings(const ResolveInput& input);

// kind: ConfigView (apiVersion gpuctl.io/v1alpha1): file{path, namedBy, found}, context{name, from,
// section}, settings[] of {key, value (null when unset; a number for port and fanout; a list for
// options), source, origin, flag, env, default}.
nlohmann::json to_json(const EffectiveConfig& view);

}  // namespace gpuctl::config
