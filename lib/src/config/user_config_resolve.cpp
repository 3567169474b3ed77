// The settings the configuration file may hold, as data, and their resolution by precedence;
// the `config view -o json|yaml` schema.
#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "gpuctl/config/user_config.hpp"
#include "gpuctl/ssh/ssh.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::config {

const std::vector<SettingSpec>& setting_specs() {
  // key, flag, environment variable, kind, global, the default as shown.
  static const std::vector<SettingSpec> specs = {
      {"ssh.user", "--ssh-user", "GPUCTL_SSH_USER", ValueKind::text, false, ""},
      {"ssh.config", "--ssh-config", "GPUCTL_SSH_CONFIG", ValueKind::path, false, ""},
      {"ssh.identity", "--ssh-identity", "GPUCTL_SSH_IDENTITY", ValueKind::path, false, ""},
      {"ssh.port", "--ssh-port", "GPUCTL_SSH_PORT", ValueKind::port, false, ""},
      // No flag of its own: on the command line it is --ssh-option UserKnownHostsFile=FILE.
      {"ssh.knownHosts", "", "GPUCTL_SSH_KNOWN_HOSTS", ValueKind::path, false, ""},
      {"ssh.options", "--ssh-option", "", ValueKind::list, false, ""},
      {"ssh.timeout", "--ssh-timeout", "", ValueKind::duration, false, "60s"},
      {"ssh.connectTimeout", "--connect-timeout", "", ValueKind::duration, false,
       "10s, or half of a shorter ssh.timeout"},
      {"ssh.fanout", "--fanout", "", ValueKind::count, false, "32"},
      {"ssh.hostFrom", "--ssh-host-from", "", ValueKind::host_rule, false, "internal-ip"},
      {"requestTimeout", "--request-timeout", "", ValueKind::duration, true, "0"},
      {"output", "--output", "", ValueKind::output, false, "each command's own"},
  };
  return specs;
}

const SettingSpec* find_setting(std::string_view key) {
  for (const auto& spec : setting_specs()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::string_view to_string(Source source) {
  switch (source) {
    case Source::flag: return "flag";
    case Source::env: return "env";
    case Source::file_context: return "fileContext";
    case Source::file: return "file";
    case Source::default_value: break;
  }
  return "default";
}

namespace {

constexpr std::string_view kKnownHostsOption = "UserKnownHostsFile=";

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

// The flag's value when the command line set this setting.
std::optional<Value> from_flags(const ResolveInput& in, const SettingSpec& spec) {
  if (spec.key == "ssh.knownHosts") {
    // Given as an --ssh-option; with_ssh_environment skips GPUCTL_SSH_KNOWN_HOSTS then too.
    auto options = in.flags.find("--ssh-option");
    if (options == in.flags.end()) return std::nullopt;
    for (const auto& o : options->second) {
      if (starts_with_nocase(o, kKnownHostsOption)) return Value{o.substr(kKnownHostsOption.size())};
    }
    return std::nullopt;
  }
  if (spec.flag.empty()) return std::nullopt;
  auto given = in.flags.find(spec.flag);
  if (given == in.flags.end()) return std::nullopt;
  return given->second;
}

const char* from_env(const ResolveInput& in, const SettingSpec& spec) {
  if (spec.env.empty() || !in.env) return nullptr;
  const char* value = in.env(std::string(spec.env).c_str());
  return value != nullptr && *value != '\0' ? value : nullptr;
}

nlohmann::json typed(const EffectiveSetting& s) {
  if (s.value.empty()) return nullptr;
  if (s.spec->kind == ValueKind::list) return s.value;
  const std::string& text = s.value.front();
  if (s.spec->kind == ValueKind::port || s.spec->kind == ValueKind::count) {
    // Numbers in JSON where they are numbers; an environment variable's bad text stays text.
    if (!text.empty() && text.size() < 10 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::stoi(text);
    }
  }
  return text;
}

// The default as a value when it is one ("60s", "32"), not a description ("each command's own").
Value default_value(const SettingSpec& spec) {
  const std::string text(spec.default_shown);
  bool usable = false;
  switch (spec.kind) {
    case ValueKind::duration: usable = util::parse_duration(text).has_value(); break;
    case ValueKind::count: usable = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos; break;
    case ValueKind::host_rule: usable = ssh::parse_address_rule(text).has_value(); break;
    default: break;
  }
  return usable ? Value{text} : Value{};
}

nlohmann::json or_null(std::string_view text) { return text.empty() ? nlohmann::json() : nlohmann::json(text); }

}  // namespace

std::vector<EffectiveSetting> resolve_settings(const ResolveInput& in) {
  const Section* context_section = nullptr;
  if (in.file != nullptr && !in.context.empty()) {
    auto found = in.file->contexts.find(in.context);
    if (found != in.file->contexts.end()) context_section = &found->second;
  }
  std::vector<EffectiveSetting> out;
  for (const auto& spec : setting_specs()) {
    EffectiveSetting e;
    e.spec = &spec;
    const std::string key(spec.key);
    if (auto flag = from_flags(in, spec)) {
      e.value = *flag;
      e.source = Source::flag;
      e.origin = spec.flag.empty() ? "--ssh-option" : std::string(spec.flag);
    } else if (const char* env = from_env(in, spec)) {
      e.value = {env};
      e.source = Source::env;
      e.origin = spec.env;
    } else if (auto c = context_section ? context_section->find(key) : Section::const_iterator();
               context_section != nullptr && c != context_section->end()) {
      e.value = c->second;
      e.source = Source::file_context;
      e.origin = "contexts." + in.context + "." + key;
    } else if (auto t = in.file ? in.file->top.find(key) : Section::const_iterator();
               in.file != nullptr && t != in.file->top.end()) {
      e.value = t->second;
      e.source = Source::file;
      e.origin = key;
    } else {
      e.value = default_value(spec);
    }
    out.push_back(std::move(e));
  }
  return out;
}

nlohmann::json to_json(const EffectiveConfig& view) {
  nlohmann::json file = nlohmann::json::object();
  file["path"] = view.location ? nlohmann::json(view.location->path) : nlohmann::json();
  file["namedBy"] = view.location ? nlohmann::json(view.location->named_by) : nlohmann::json();
  file["found"] = view.file_found;
  nlohmann::json context = nlohmann::json::object();
  context["name"] = or_null(view.context);
  context["from"] = or_null(view.context_from);
  context["section"] = view.context_section;
  nlohmann::json settings = nlohmann::json::array();
  for (const auto& s : view.settings) {
    nlohmann::json item = nlohmann::json::object();
    item["key"] = s.spec->key;
    item["value"] = typed(s);
    item["source"] = to_string(s.source);
    item["origin"] = or_null(s.origin);
    item["flag"] = or_null(s.spec->flag);
    item["env"] = or_null(s.spec->env);
    item["default"] = or_null(s.spec->default_shown);
    settings.push_back(std::move(item));
  }
  nlohmann::json doc = nlohmann::json::object();
  doc["apiVersion"] = "gpuctl.io/v1alpha1";
  doc["kind"] = "ConfigView";
  doc["file"] = std::move(file);
  doc["context"] = std::move(context);
  doc["settings"] = std::move(settings);
  return doc;
}

}  // namespace gpuctl::config
