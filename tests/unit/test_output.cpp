#include <catch2/catch.hpp>

#include <sstream>

#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/output/printable.hpp"
#include "gpuctl/output/table.hpp"
#include "gpuctl/output/yaml.hpp"
#include "live_status.hpp"

using nlohmann::json;

TEST_CASE("output::to_yaml quotes strings a YAML reader would turn into other types", "[output]") {
  json doc = {{"a", "true"},      {"b", "1.5"}, {"c", ""},    {"d", "2026-12-02T15:13:45Z"},   {"e", "plain text"},
              {"f", nullptr},     {"g", 3},     {"h", false}, {"i", json::array({"no", "x"})}, {"j", "0x1F"},
              {"k", "2026-12-02"}};
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
  CHECK(screen.substr(last) == "\033[2A\r\033[Kn1       waiting for 1 pod(s)\n\r\033[Knode-22  evicting ml/a\n");
}

TEST_CASE("output::printable escapes C0, DEL, C1, bidi controls and stray bytes, and keeps other text", "[output]") {
  using gpuctl::output::is_printable;
  using gpuctl::output::printable;
  CHECK(printable("gpu-7") == "gpu-7");
  CHECK(printable("\x1b[2J\x1b[Hok") == "\\x1b[2J\\x1b[Hok");
  CHECK(printable("a\nb\tc\rd") == "a\\x0ab\\x09c\\x0dd");
  CHECK(printable(std::string("nul\0end", 7)) == "nul\\x00end");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("csi\xc2\x9b"
                  "31m") == "csi\\u009b31m");  // C1 CSI as UTF-8
  CHECK(printable("lone\x9b"
                  "31m") == "lone\\x9b31m");                            // a bare 8-bit CSI byte
  CHECK(printable("evil\xe2\x80\xaetxt.exe") == "evil\\u202etxt.exe");  // RIGHT-TO-LEFT OVERRIDE
  CHECK(printable("\xe2\x81\xa6x\xe2\x81\xa9") == "\\u2066x\\u2069");   // isolates
  CHECK(printable("\xe2\x80\xa9") == "\xe2\x80\xa9");                   // U+2029 is not on the list
  CHECK(printable("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80") == "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80");
  CHECK(printable("\xc0\x9b") == "\\xc0\\x9b");  // overlong: not UTF-8
  CHECK(printable("\xe2\x80") == "\\xe2\\x80");  // truncated
  CHECK(is_printable("NVIDIA-A100 caf\xc3\xa9"));
  CHECK_FALSE(is_printable("a\x1b"));
  CHECK_FALSE(is_printable("\xe2\x80\xae"));
}

TEST_CASE("output::Table escapes every cell, so server text cannot forge rows or move the cursor", "[output]") {
  gpuctl::output::Table t({"NAME", "MESSAGE"});
  t.add_row({"gpu-0\ngpu-9   Ready", "\x1b[2Jgone"});
  t.add_row({"gpu-1", "ok"});
  std::string text = t.render({true, true});
  CHECK(text.find("gpu-0\\x0agpu-9   Ready   \\x1b[2Jgone\n") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
  CHECK(text.find("\x1b[2J") == std::string::npos);
  // the escaped text is what the columns are aligned on
  CHECK(text.find("gpu-1                    ok\n") != std::string::npos);
}

TEST_CASE("output::to_yaml keeps control characters exact: what it writes reads back the same", "[output]") {
  json doc = {{"reason",
               "\x1b[2J\x1b[H\xe2\x80\xae"
               "FORGED\x07\r\nrow"},
              {"plain", "ok"}};
  std::string y = gpuctl::output::to_yaml(doc);
  CHECK(y.find('\x1b') == std::string::npos);  // a C0 character is written as an escape ...
  auto back = gpuctl::kube::parse_manifest(y, "yaml");
  REQUIRE(back);
  CHECK(*back == doc);  // ... and reads back exactly
}
