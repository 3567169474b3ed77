// ssh argv, address rules, classification of ssh's own failures (the messages OpenSSH prints),
// and reading probe runs into per-node outcomes grouped as dshbak -c groups them.
#include <catch2/catch.hpp>

#include "fakes/fake_ssh_runner.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ssh/ssh.hpp"
#include "test_drain_support.hpp"

using namespace gpuctl;
using namespace std::chrono_literals;

namespace {
util::ProcessResult ssh_run(int code, std::string err, bool timed_out = false) {
  util::ProcessResult r;
  r.exit_code = code;
  r.stderr_text = std::move(err);
  r.timed_out = timed_out;
  return r;
}
}  // namespace

TEST_CASE("ssh argv: batch mode, timeouts, the user's options, then -- ADDRESS COMMAND", "[ssh]") {
  ssh::SshSettings s;
  s.config_file = "/etc/gpuctl/ssh_config";
  s.user = "ubuntu";
  s.port = 2222;
  s.identity_file = "/keys/id";
  s.options = {"ProxyJump=bastion"};
  s.connect_timeout = 2500ms;
  auto argv = ssh::ssh_argv(s, "10.0.0.7", "sh -c 'x'");
  CHECK(argv == std::vector<std::string>{"ssh",
                                         "-F",
                                         "/etc/gpuctl/ssh_config",
                                         "-o",
                                         "BatchMode=yes",
                                         "-o",
                                         "ConnectTimeout=3",
                                         "-o",
                                         "ServerAliveInterval=5",
                                         "-o",
                                         "ServerAliveCountMax=3",
                                         "-l",
                                         "ubuntu",
                                         "-p",
                                         "2222",
                                         "-i",
                                         "/keys/id",
                                         "-o",
                                         "ProxyJump=bastion",
                                         "--",
                                         "10.0.0.7",
                                         "sh -c 'x'"});
  CHECK(ssh::validate(s));
  s.options = {"novalue"};
  CHECK_FALSE(ssh::validate(s));
  s.options = {};
  s.deadline = 1s;
  CHECK(ssh::validate(s).error().message == "--ssh-timeout (1s) must be longer than --connect-timeout (2500ms)");
}

TEST_CASE("ssh failures are classified from OpenSSH's own messages", "[ssh]") {
  ssh::SshSettings s;
  struct Case {
    util::ProcessResult run;
    ssh::HostOutcome outcome;
  };
  for (const auto& c : std::vector<Case>{
           {ssh_run(255, "ssh: connect to host 10.1.2.3 port 22: Connection timed out\r\n"),
            ssh::HostOutcome::unreachable},
           {ssh_run(255, "ssh: connect to host 10.1.2.3 port 22: Connection refused\r\n"),
            ssh::HostOutcome::unreachable},
           {ssh_run(255, "ssh: connect to host 10.1.2.3 port 22: No route to host\r\n"), ssh::HostOutcome::unreachable},
           {ssh_run(255, "ssh: Could not resolve hostname gpu-9: Name or service not known\r\n"),
            ssh::HostOutcome::unreachable},
           {ssh_run(255, "root@10.1.2.3: Permission denied (publickey).\r\n"), ssh::HostOutcome::auth_failed},
           {ssh_run(255,
                    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
                    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
                    "Host key verification failed.\r\n"),
            ssh::HostOutcome::host_key_mismatch},
           {ssh_run(255,
                    "No ED25519 host key is known for 10.1.2.3 and you have requested strict checking.\r\nHost key "
                    "verification failed.\r\n"),
            ssh::HostOutcome::host_key_mismatch},
           {ssh_run(255, "kex_exchange_identification: read: Connection reset by peer\r\n"),
            ssh::HostOutcome::unreachable},
           {ssh_run(255, "Bad configuration option: frobnicate\n"), ssh::HostOutcome::ssh_error},
           {ssh_run(-1, "", true), ssh::HostOutcome::timed_out},
           {ssh_run(0, ""), ssh::HostOutcome::ok},
           {ssh_run(127, "sh: 1: nvidia-smi: not found\n"), ssh::HostOutcome::ok},  // the remote command's own failure
       }) {
    CAPTURE(c.run.stderr_text);
    auto verdict = ssh::classify_ssh_run(c.run, s);
    CHECK(verdict.outcome == c.outcome);
    if (c.outcome != ssh::HostOutcome::ok) {
      CHECK_FALSE(verdict.message.empty());
      CHECK(verdict.message.find("10.1.2.3") == std::string::npos);  // so identical failures group
    }
  }
  util::ProcessResult missing;
  missing.start_error = ENOENT;
  CHECK(ssh::classify_ssh_run(missing, s).outcome == ssh::HostOutcome::ssh_missing);
}

TEST_CASE("ssh failures: an unknown stderr line is kept as valid UTF-8 and bounded", "[ssh]") {
  ssh::SshSettings s;
  auto verdict = ssh::classify_ssh_run(ssh_run(255, "proxy says: caf\xc3\xa9 \xff\xfe tail\n"), s);
  CHECK(verdict.outcome == ssh::HostOutcome::ssh_error);
  CHECK(verdict.message == "ssh failed: proxy says: caf\xc3\xa9 ");
  CHECK_NOTHROW(nlohmann::json(verdict.message).dump());
  auto flood = ssh::classify_ssh_run(ssh_run(255, std::string(100000, 'x') + "\n"), s);
  CHECK(flood.message.size() < 400);
}

TEST_CASE("ssh addresses: from the node's addresses, labels, annotations or a template, never an option", "[ssh]") {
  using gpuctl::testing::nodeadmin::node;
  auto n = node("gpu-3");
  n["status"]["addresses"] = {{{"type", "InternalIP"}, {"address", "10.0.0.3"}},
                              {{"type", "Hostname"}, {"address", "gpu-3"}}};
  n["metadata"]["labels"]["ssh.example.com/host"] = "bmc-3.example.com";
  n["metadata"]["annotations"]["evil"] = "-oProxyCommand=touch /tmp/pwned";
  auto address = [&](const char* rule) { return ssh::node_ssh_address(n, *ssh::parse_address_rule(rule)); };
  CHECK(*address("internal-ip") == "10.0.0.3");
  CHECK(*address("hostname") == "gpu-3");
  CHECK(*address("name") == "gpu-3");
  CHECK(*address("label:ssh.example.com/host") == "bmc-3.example.com");
  CHECK(*address("{name}.gpu.example.com") == "gpu-3.gpu.example.com");
  CHECK(address("external-ip").error().message ==
        "node gpu-3 has no ExternalIP address to reach it at: choose another --ssh-host-from");
  CHECK_FALSE(address("annotation:evil"));
  CHECK_FALSE(ssh::parse_address_rule("bogus"));
}

TEST_CASE("probe runs become per-node outcomes, and identical failures group with a count", "[ssh][gpus]") {
  ssh::SshSettings s;
  s.deadline = 5s;
  ops::ProbeTarget a{"a", "10.0.0.1", ""}, b{"b", "10.0.0.2", ""}, c{"c", "10.0.0.3", ""};
  auto pa = ops::read_probe_run(
      a, testing::classified_run(ssh_run(255, "ssh: connect to host 10.0.0.1 port 22: Connection timed out\n"), s));
  auto pb = ops::read_probe_run(
      b, testing::classified_run(ssh_run(255, "ssh: connect to host 10.0.0.2 port 22: Connection timed out\n"), s));
  auto pc = ops::read_probe_run(c, testing::classified_run(ssh_run(-1, "", true), s));
  CHECK(pa.outcome == "unreachable");
  CHECK(pc.outcome == "timed_out");
  CHECK(pc.message == "no answer within --ssh-timeout 5s: the node or its nvidia-smi hangs (killed)");
  ops::NodeProbe ok;
  ok.node = "d";
  ok.outcome = "ok";
  auto groups = ops::group_failures({pc, pa, ok, pb});
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].outcome == "unreachable");
  CHECK(groups[0].nodes == std::vector<std::string>{"a", "b"});
  CHECK(groups[1].nodes == std::vector<std::string>{"c"});
}
