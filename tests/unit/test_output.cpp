#include <catch2/catch.hpp>

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
