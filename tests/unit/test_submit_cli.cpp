// gpuctl submit's command line in-process: where NAME and COMMAND come from.
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"

using gpuctl::testing::CliHarness;

TEST_CASE("cli: submit without NAME never takes the command's first word as the name", "[submit][cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"submit", "--image", "x", "--gpus", "1", "--", "python", "train.py"}, "a job NAME is required before --"},
      {{"submit", "--image", "x", "--gpus", "1", "--", "python"}, "a job NAME is required before --"},
      {{"submit", "-f", "job.yaml", "--", "python"}, "COMMAND cannot be combined with -f"},
      {{"submit", "-f", "job.yaml", "--", "python", "train.py"}, "COMMAND cannot be combined with -f"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    CliHarness h;
    auto r = h.run(c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(h.fake().requests().empty());
  }
}

TEST_CASE("cli: submit NAME before -- keeps every word after -- as the command", "[submit][cli]") {
  CliHarness h;
  // A usage error found after the arguments were split shows that NAME was accepted: the
  // refused --gpus value is checked after NAME.
  auto r = h.run({"submit", "train", "--image", "x", "--gpus", "-1", "--", "python", "train.py"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--gpus") != std::string::npos);
  CHECK(r.err.find("NAME") == std::string::npos);
  CHECK(h.fake().requests().empty());
}
