#pragma once
// A fake process environment for the flag groups that fill in GPUCTL_* variables (cli::EnvLookup):
// the named variables set, every other one unset.
#include <map>
#include <string>

#include "ssh_flags.hpp"

namespace gpuctl::testing {

inline cli::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace gpuctl::testing
