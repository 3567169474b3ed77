#include <catch2/catch.hpp>

#include <string>

#include "gpuctl/util/nesting.hpp"

using gpuctl::util::json_nesting_depth;
using gpuctl::util::json_nesting_exceeds;

TEST_CASE("json_nesting_depth counts brackets outside strings") {
  CHECK(json_nesting_depth("") == 0);
  CHECK(json_nesting_depth("42") == 0);
  CHECK(json_nesting_depth(R"({"a":[1,{"b":2}]})") == 3);
  CHECK(json_nesting_depth(R"({"a":"[[[[{{{{"})") == 1);
  CHECK(json_nesting_depth(R"({"a":"\"[[[["})") == 1);
  CHECK(json_nesting_depth(R"(["\\",[[]]])") == 3);
}

TEST_CASE("json_nesting_depth stops at the limit on a hostile document") {
  std::string deep(10'000'000, '[');
  CHECK(json_nesting_depth(deep, 200) == 201);
  CHECK(json_nesting_exceeds(deep));
  std::string ok = std::string(200, '[') + std::string(200, ']');
  CHECK_FALSE(json_nesting_exceeds(ok));
  CHECK(json_nesting_exceeds("[" + ok + "]"));
}
