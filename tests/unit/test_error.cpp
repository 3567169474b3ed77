#include <catch2/catch.hpp>

#include "gpuctl/error.hpp"

namespace {
gpuctl::Result<int> half(int x) {
  if (x % 2 != 0) return gpuctl::fail(gpuctl::Errc::invalid_argument, "odd");
  return x / 2;
}
gpuctl::Result<int> quarter(int x) {
  GPUCTL_TRY_ASSIGN(int h, half(x));
  GPUCTL_TRY_ASSIGN(int q, half(h));
  return q;
}
}  // namespace

TEST_CASE("gpuctl::GPUCTL_TRY_ASSIGN propagates the first error") {
  REQUIRE(quarter(8).value() == 2);
  auto r = quarter(6);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == gpuctl::Errc::invalid_argument);
  CHECK(r.error().message == "odd");
  CHECK(r.error().with_context("node a").message == "node a: odd");
}
