#include <catch2/catch.hpp>

#include <sstream>

#include "live_status.hpp"
#include "gpuctl/output/table.hpp"
#include "gpuctl/output/yaml.hpp"

using nlohmann::json;

TEST_CASE("output::to_yaml quotes strings a YAML reader would turn into other types", "[output]") {
  json doc = {{"a", "true"}, {"b", "1.5"}, {"c", ""}, {"d", "2026-12-02T15:13:45Z"}, {"e", "plain text"}, {"f", nullptr},
              {"g", 3}, {"h", false}, {"i", json::array({"no", "x"})}, {"j", "0x1F"}, {"k", "2026-12-02"}};
  std::string y = gpuctl::output::to_yaml(doc);
  CHECK(y.find("a: \"true\"\n") != std::string::npos);
  CHECK(y.find("b: \"1.5\"\n") != std::string::npos);
  CHECK(y.find("c: \"\"\n") != std::string::npos);
  CHECK(y.find("d: \"2026-12-02T15:13:45Z\"\n") != std::string::npos);
  CHECK(y.find("e: plain text\n") != std::string::npos);
  CHECK(y.find("f: ~\n") != std::string::npos);
  CHECK(y.find("g: 3\n") != std::string::npos);
  CHECK(y.find("h: false\n") != std::string::npos);
  CHECK(y.find("  - \"no\"\n  - x\n") != std::string::npos);
  CHECK(y.find("j: \"0x1F\"\n") != std::string::npos);
  CHECK(y.find("k: \"2026-12-02\"\n") != std::string::npos);
}

TEST_CASE("output::Table aligns columns kubectl-style and colors only when asked", "[output]") {
  gpuctl::output::Table t({"NAME", "STATUS"});
  t.add_row({"a-long-name", gpuctl::output::Cell("NotReady", gpuctl::output::Style::bad)});
  t.add_row({"b", "Ready"});
  CHECK(t.render({true, false}) == "NAME          STATUS\na-long-name   NotReady\nb             Ready\n");
  CHECK(t.render({false, false}) == "a-long-name   NotReady\nb             Ready\n");
  std::string colored = t.render({true, true});
  CHECK(colored.find("\033[31mNotReady\033[0m") != std::string::npos);
}

TEST_CASE("live status: timestamped lines off a terminal, one redrawn line per node on one", "[output][drain]") {
  std::ostringstream log;
  gpuctl::cli::LiveStatus plain(log, false);
  plain.update("n1", "cordoned");
  plain.update("n2", "evicting ml/a");
  std::string text = log.str();
  CHECK(text.find("Z n1: cordoned\n") != std::string::npos);
  CHECK(text.find("Z n2: evicting ml/a\n") != std::string::npos);
  CHECK(text.find('\033') == std::string::npos);

  std::ostringstream tty;
  gpuctl::cli::LiveStatus live(tty, true, 30);
  live.update("n1", "cordoned");
  live.update("node-22", "evicting ml/a");
  live.update("n1", "waiting for 1 pod(s) to go: ml/averyveryverylongpodname");
  std::string screen = tty.str();
  // The third update moves up over the two lines drawn before and rewrites both, cut to width.
  auto last = screen.rfind("\033[2A");
  REQUIRE(last != std::string::npos);
  CHECK(screen.substr(last) ==
        "\033[2A\r\033[Kn1       waiting for 1 pod(s)\n\r\033[Knode-22  evicting ml/a\n");
}
