// What the shells' scripts get from `gpuctl __complete` in the cases the real shells showed
// (tests/e2e/test_completion.py drives bash, zsh and fish through tmux).
#include <catch2/catch.hpp>

#include "fakes/cli_harness.hpp"

using gpuctl::testing::CliHarness;

TEST_CASE("__complete: a list flag's next item after the comma, the items before it kept", "[completion]") {
  CliHarness h;
  // The shells replace the whole word (',' breaks no word), so each candidate is the whole word.
  auto r = h.run({"__complete", "diagnose", "--check", "node-unreachable,driver-b"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "node-unreachable,driver-broken\n:4\n");

  r = h.run({"__complete", "diagnose", "--skip=node-unreachable,driver-b"});
  CHECK(r.out == "--skip=node-unreachable,driver-broken\n:4\n");

  r = h.run({"__complete", "diagnose", "--check", "node-unreachable,"});
  CHECK(r.out.find("node-unreachable,driver-broken\n") != std::string::npos);
  CHECK(r.out.find("node-unreachable,gpu-count-mismatch\n") != std::string::npos);
  CHECK(r.out.ends_with("\n:4\n"));
  CHECK(r.err.empty());
}

TEST_CASE("__complete: a value without a delimiter keeps its commas", "[completion]") {
  CliHarness h;
  // -o takes one value: "json,y" is no list, and nothing starts with it.
  auto r = h.run({"__complete", "nodes", "-o", "json,y"});
  CHECK(r.out == ":4\n");
}
