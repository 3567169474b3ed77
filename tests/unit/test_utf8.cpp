#include <catch2/catch.hpp>

#include <string>

#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/util/utf8.hpp"

using gpuctl::util::valid_utf8_prefix;

TEST_CASE("util::valid_utf8_prefix accepts RFC 3629 UTF-8 and stops at the first invalid byte", "[utf8]") {
  CHECK(valid_utf8_prefix("") == 0);
  CHECK(valid_utf8_prefix("plain ascii") == 11);
  CHECK(valid_utf8_prefix("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == 14);  // é € 😀
  CHECK(valid_utf8_prefix("ab\xff") == 2);
  CHECK(valid_utf8_prefix("ab\xf5\x80\x80\x80") == 2);  // lead bytes past U+10FFFF (fuzz_kernel_log)
  CHECK(valid_utf8_prefix("\xc0\xaf") == 0);            // overlong '/'
  CHECK(valid_utf8_prefix("\xe0\x80\xaf") == 0);        // overlong, three bytes
  CHECK(valid_utf8_prefix("\xed\xa0\x80") == 0);        // a surrogate
  CHECK(valid_utf8_prefix("\xf4\x90\x80\x80") == 0);    // past U+10FFFF
  CHECK(valid_utf8_prefix("x\xe2\x82") == 1);           // cut short
}

TEST_CASE("kube::parse_manifest refuses a manifest that is not UTF-8, naming the byte", "[utf8]") {
  auto parsed = gpuctl::kube::parse_manifest("kind: Pod\nname: \xff\n", "job.yaml");
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.error().message == "job.yaml: byte 17 is not valid UTF-8; a manifest must be UTF-8 text");
}
