// The GPUCTL_SSH_* variables as defaults of the --ssh-* flags (what `cluster.py env` and the
// sandbox export), with every flag winning over its variable.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "fakes/fake_env.hpp"
#include "ssh_flags.hpp"

using namespace gpuctl;
using gpuctl::testing::env_of;

namespace {

const std::map<std::string, std::string> kSandbox = {{"GPUCTL_SSH_CONFIG", "/sb/ssh/ssh_config"},
                                                     {"GPUCTL_SSH_IDENTITY", "/sb/ssh/id_ed25519"},
                                                     {"GPUCTL_SSH_USER", "root"},
                                                     {"GPUCTL_SSH_PORT", "20022"},
                                                     {"GPUCTL_SSH_KNOWN_HOSTS", "/sb/ssh/known_hosts"}};

}  // namespace

TEST_CASE("ssh flags: the GPUCTL_SSH_* variables fill in the flags not given", "[ssh][cli]") {
  auto r = cli::validate_ssh_flags(cli::SshFlags{}, env_of(kSandbox));
  REQUIRE(r);
  const auto& s = r->settings;
  CHECK(s.config_file == "/sb/ssh/ssh_config");
  CHECK(s.identity_file == "/sb/ssh/id_ed25519");
  CHECK(s.user == "root");
  CHECK(s.port == 20022);
  CHECK(s.options == std::vector<std::string>{"UserKnownHostsFile=/sb/ssh/known_hosts"});
}

TEST_CASE("ssh flags: a flag wins over its variable", "[ssh][cli]") {
  cli::SshFlags f;
  f.config_file = "/etc/gpuctl/ssh_config";
  f.identity_file = "/keys/id";
  f.user = "ubuntu";
  f.port = 2222;
  f.options = {"userknownhostsfile=/keys/known"};
  auto r = cli::validate_ssh_flags(f, env_of(kSandbox));
  REQUIRE(r);
  const auto& s = r->settings;
  CHECK(s.config_file == "/etc/gpuctl/ssh_config");
  CHECK(s.identity_file == "/keys/id");
  CHECK(s.user == "ubuntu");
  CHECK(s.port == 2222);
  CHECK(s.options == std::vector<std::string>{"userknownhostsfile=/keys/known"});
}

TEST_CASE("ssh flags: unset and empty variables leave the flags alone", "[ssh][cli]") {
  auto none = cli::validate_ssh_flags(cli::SshFlags{}, env_of({}));
  REQUIRE(none);
  CHECK(none->settings.config_file.empty());
  CHECK(none->settings.port == 0);
  CHECK(none->settings.options.empty());
  auto empty = cli::validate_ssh_flags(cli::SshFlags{}, env_of({{"GPUCTL_SSH_CONFIG", ""}, {"GPUCTL_SSH_PORT", ""}}));
  REQUIRE(empty);
  CHECK(empty->settings.config_file.empty());
  CHECK(empty->settings.port == 0);
}

TEST_CASE("ssh flags: a known_hosts path with a blank is quoted for ssh", "[ssh][cli]") {
  auto r = cli::validate_ssh_flags(cli::SshFlags{}, env_of({{"GPUCTL_SSH_KNOWN_HOSTS", "/my keys/known_hosts"}}));
  REQUIRE(r);
  CHECK(r->settings.options == std::vector<std::string>{"UserKnownHostsFile=\"/my keys/known_hosts\""});
}

TEST_CASE("ssh flags: a bad GPUCTL_SSH_PORT is named, with the fix", "[ssh][cli]") {
  for (const char* bad : {"ssh", "0", "70000", "22x"}) {
    auto r = cli::validate_ssh_flags(cli::SshFlags{}, env_of({{"GPUCTL_SSH_PORT", bad}}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK(r.error().message ==
          "GPUCTL_SSH_PORT=\"" + std::string(bad) + "\": not a port (1-65535); set a port or unset the variable");
  }
  cli::SshFlags f;
  f.port = 22;
  CHECK(cli::validate_ssh_flags(f, env_of({{"GPUCTL_SSH_PORT", "ssh"}})));  // the flag wins, the variable is not read
}
