// Reading gpuctl's configuration file: which file, YAML -> UserConfig, each value checked by
// its kind so a bad one is named with the file and the key before any flag sees it.
// yaml-cpp stays inside this file.
#include "gpuctl/config/user_config.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "gpuctl/ssh/ssh.hpp"
#include "gpuctl/util/strings.hpp"
#include "gpuctl/util/time.hpp"
#include "kube/yaml_tree.hpp"

namespace gpuctl::config {
namespace {

using YAML::Node;

// Every -o format some command accepts; a value no command knows is a typo, refused here.
const std::vector<std::string> kOutputFormats = {"table", "wide", "json",  "yaml",
                                                 "name",  "text", "junit", "prometheus"};

struct Reader {
  const std::string& path;
  std::string folder;  // relative paths are taken from here
  const std::string& home;

  std::unexpected<Error> bad(std::string_view key, std::string_view why) const {
    return fail(Errc::config, fmt::format("{}: {}: {}", path, kube::detail::shown_in_error(key), why));
  }
};

std::string kind_of(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return fmt::format("\"{}\"", kube::detail::shown_in_error(n.Scalar()));
    default: return "nothing";
  }
}

// " (did you mean "user"?)" when one known word is close to `word`, else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& known) {
  std::string near = util::closest_word(word, known);
  return near.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", near);
}

// The text after "--flag \"value\": " in a message written for the flag.
std::string without_flag_prefix(const std::string& message) {
  auto at = message.find("\": ");
  return message.starts_with("--") && at != std::string::npos ? message.substr(at + 3) : message;
}

Result<std::string> expand_path(const Reader& r, std::string_view key, std::string text) {
  if (text.empty()) return r.bad(key, "is empty; name a file or remove the key");
  if (text == "~" || text.starts_with("~/")) {
    if (r.home.empty()) return r.bad(key, "starts with ~ but HOME is not set; write the whole path");
    return r.home + text.substr(1);
  }
  if (text.front() == '~') return r.bad(key, "~user is not expanded; write ~/... or the whole path");
  if (text.front() != '/') return (std::filesystem::path(r.folder) / text).lexically_normal().string();
  return text;
}

Result<int> integer(const Reader& r, std::string_view key, const Node& n, int low, int high, std::string_view what) {
  const std::string& s = n.Scalar();
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < low || value > high) {
    return r.bad(key, fmt::format("expected {}, got {}", what, kind_of(n)));
  }
  return value;
}

Result<Value> read_list(const Reader& r, std::string_view key, const Node& n) {
  if (!n.IsSequence()) return r.bad(key, "expected a list of KEY=VALUE strings, got " + kind_of(n));
  Value out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const Node item = n[i];
    const std::string where = fmt::format("{}[{}]", key, i);
    if (!item.IsScalar()) return r.bad(where, "expected a KEY=VALUE string, got " + kind_of(item));
    auto eq = item.Scalar().find('=');
    if (eq == std::string::npos || eq == 0) {
      return r.bad(where, fmt::format("{} is not KEY=VALUE (an ssh -o option, e.g. ProxyJump=bastion)", kind_of(item)));
    }
    out.push_back(item.Scalar());
  }
  return out;
}

// One value, checked by its kind. A null (`user:` with nothing after it) is refused: it would
// read as "unset" in one place and as "" in another.
Result<Value> read_value(const Reader& r, const SettingSpec& spec, std::string_view key, const Node& n) {
  if (spec.kind == ValueKind::list) return read_list(r, key, n);
  if (!n.IsScalar()) return r.bad(key, "expected a single value, got " + kind_of(n));
  const std::string& s = n.Scalar();
  switch (spec.kind) {
    case ValueKind::port: {
      GPUCTL_TRY_ASSIGN(int port, integer(r, key, n, 1, 65535, "a port (1-65535)"));
      return Value{std::to_string(port)};
    }
    case ValueKind::count: {
      GPUCTL_TRY_ASSIGN(int count, integer(r, key, n, 1, 1'000'000, "a positive whole number"));
      return Value{std::to_string(count)};
    }
    case ValueKind::duration:
      if (auto d = util::parse_duration(s); !d) return r.bad(key, d.error().message);
      return Value{s};
    case ValueKind::host_rule:
      if (auto rule = ssh::parse_address_rule(s); !rule) return r.bad(key, without_flag_prefix(rule.error().message));
      return Value{s};
    case ValueKind::output:
      if (std::find(kOutputFormats.begin(), kOutputFormats.end(), s) == kOutputFormats.end()) {
        return r.bad(key, fmt::format("unknown format {}{}; use one of {}", kind_of(n), suggestion(s, kOutputFormats),
                                      util::join(kOutputFormats, ", ")));
      }
      return Value{s};
    case ValueKind::path: {
      GPUCTL_TRY_ASSIGN(std::string path, expand_path(r, key, s));
      return Value{path};
    }
    case ValueKind::text:
    case ValueKind::list: break;
  }
  if (s.empty()) return r.bad(key, "is empty; give a value or remove the key");
  return Value{s};
}

// The keys of a section, one level: "ssh" (a mapping of ssh.*) and the top-level settings.
std::vector<std::string> section_words(std::string_view group) {
  std::vector<std::string> words;
  for (const auto& spec : setting_specs()) {
    std::string_view key = spec.key;
    auto dot = key.find('.');
    std::string word;
    if (group.empty()) {
      word = std::string(key.substr(0, dot));
    } else if (dot != std::string_view::npos && key.substr(0, dot) == group) {
      word = std::string(key.substr(dot + 1));
    } else {
      continue;
    }
    if (std::find(words.begin(), words.end(), word) == words.end()) words.push_back(word);
  }
  return words;
}

Result<void> read_map(const Reader& r, const Node& map, const std::string& prefix, std::string_view group,
                      std::vector<std::string> words, Section& out,
                      const std::function<Result<bool>(const std::string&, const Node&)>& other);

// A section: the top level (prefix "") or contexts.NAME (prefix "contexts.NAME.").
Result<void> read_section(const Reader& r, const Node& map, const std::string& prefix, Section& out,
                          const std::function<Result<bool>(const std::string&, const Node&)>& other) {
  std::vector<std::string> words = section_words("");
  if (prefix.empty()) words.push_back("contexts");  // sections do not nest
  return read_map(r, map, prefix, "", words, out, other);
}

Result<void> read_map(const Reader& r, const Node& map, const std::string& prefix, std::string_view group,
                      std::vector<std::string> words, Section& out,
                      const std::function<Result<bool>(const std::string&, const Node&)>& other) {
  std::vector<std::string> seen;
  for (const auto& kv : map) {
    const std::string word = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string key = group.empty() ? word : fmt::format("{}.{}", group, word);
    const std::string shown_key = prefix + key;
    if (std::find(seen.begin(), seen.end(), word) != seen.end()) {
      return r.bad(shown_key, "appears twice; keep one");
    }
    seen.push_back(word);
    if (std::find(words.begin(), words.end(), word) == words.end()) {
      return r.bad(shown_key, fmt::format("unknown key{}; the keys here are {}", suggestion(word, words),
                                          util::join(words, ", ")));
    }
    if (other) {
      GPUCTL_TRY_ASSIGN(bool taken, other(word, kv.second));
      if (taken) continue;
    }
    if (const SettingSpec* spec = find_setting(key)) {
      GPUCTL_TRY_ASSIGN(out[std::string(spec->key)], read_value(r, *spec, shown_key, kv.second));
      continue;
    }
    // A group of settings (ssh): a mapping of its own.
    if (!kv.second.IsMap()) return r.bad(shown_key, "expected a mapping, got " + kind_of(kv.second));
    GPUCTL_TRY(read_map(r, kv.second, prefix, word, section_words(word), out, nullptr));
  }
  return {};
}

Result<UserConfig> read_root(const Reader& r, const Node& root) {
  UserConfig config;
  config.path = r.path;
  if (!root || root.IsNull()) return config;
  if (!root.IsMap())
    return fail(Errc::config, fmt::format("{}: expected a mapping of settings, got {}", r.path, kind_of(root)));
  auto contexts = [&](const std::string& word, const Node& n) -> Result<bool> {
    if (word != "contexts") return false;
    if (n.IsNull()) return true;
    if (!n.IsMap()) return r.bad("contexts", "expected a mapping of kubeconfig context names, got " + kind_of(n));
    for (const auto& kv : n) {
      const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
      const std::string prefix = fmt::format("contexts.{}.", name);
      if (config.contexts.contains(name)) return r.bad(prefix.substr(0, prefix.size() - 1), "appears twice; keep one");
      if (!kv.second.IsMap() && !kv.second.IsNull()) {
        return r.bad(prefix.substr(0, prefix.size() - 1), "expected a mapping of settings, got " + kind_of(kv.second));
      }
      Section& section = config.contexts[name];
      if (kv.second.IsMap()) GPUCTL_TRY(read_section(r, kv.second, prefix, section, nullptr));
    }
    return true;
  };
  GPUCTL_TRY(read_section(r, root, "", config.top, contexts));
  return config;
}

}  // namespace

Result<UserConfig> parse_user_config(std::string_view yaml, const std::string& path, const std::string& home) {
  Reader r{path, std::filesystem::path(path).parent_path().string(), home};
  YAML::Node root;
  try {
    const std::string owned(yaml);
    if (kube::detail::count_yaml_documents(owned, 1) > 1) {
      return fail(Errc::config, fmt::format("{}: holds more than one YAML document; keep one", path));
    }
    root = YAML::Load(owned);
    GPUCTL_TRY(kube::detail::check_yaml_tree(root, path, owned.size(), Errc::config));
  } catch (const YAML::DeepRecursion&) {
    return fail(kube::detail::yaml_too_deep(path, Errc::config));
  } catch (const YAML::Exception& e) {
    return fail(Errc::config, fmt::format("{}: line {}, column {}: not valid YAML: {}", path, e.mark.line + 1,
                                          e.mark.column + 1, e.msg));
  }
  try {
    return read_root(r, root);
  } catch (const YAML::Exception& e) {
    return fail(Errc::config, fmt::format("{}: line {}: {}", path, e.mark.line + 1, e.msg));
  }
}

std::optional<ConfigLocation> locate_user_config(const EnvLookup& env) {
  auto get = [&](const char* name) -> std::string {
    const char* v = env ? env(name) : nullptr;
    return v == nullptr ? std::string() : std::string(v);
  };
  if (std::string p = get("GPUCTL_CONFIG"); !p.empty()) return ConfigLocation{p, "GPUCTL_CONFIG", true};
  if (std::string x = get("XDG_CONFIG_HOME"); !x.empty()) {
    return ConfigLocation{x + "/gpuctl/config.yaml", "XDG_CONFIG_HOME", false};
  }
  if (std::string h = get("HOME"); !h.empty()) return ConfigLocation{h + "/.config/gpuctl/config.yaml", "HOME", false};
  return std::nullopt;
}

Result<std::optional<UserConfig>> load_user_config(const ConfigLocation& location, const std::string& home) {
  std::ifstream in(location.path, std::ios::binary);
  if (!in) {
    const int error = errno;
    if (error == ENOENT && !location.required) return std::optional<UserConfig>();
    return fail(Errc::config, fmt::format("{}: cannot read: {}{}", location.path, std::strerror(error),
                                          location.required ? " (named by GPUCTL_CONFIG)" : ""));
  }
  std::string text(kMaxUserConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return fail(Errc::config, fmt::format("{}: cannot read: {}", location.path, std::strerror(errno)));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxUserConfigBytes) {
    return fail(Errc::config,
                fmt::format("{}: larger than 1 MiB (the limit); a config file is a few lines", location.path));
  }
  GPUCTL_TRY_ASSIGN(UserConfig config, parse_user_config(text, location.path, home));
  return std::optional<UserConfig>(std::move(config));
}

}  // namespace gpuctl::config
