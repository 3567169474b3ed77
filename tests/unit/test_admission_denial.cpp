#include <catch2/catch.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/ops/admission/admission_denial.hpp"

using gpuctl::ops::AdmissionDenialKind;
using gpuctl::ops::parse_admission_denial;
using gpuctl::testing::fixture;

TEST_CASE("admission denial: exceeded quota from a real 403 Status body") {
  auto d = parse_admission_denial(fixture("k8s-errors/quota__api-status-403-exceeded-quota.json"));
  REQUIRE(d);
  CHECK(d->kind == AdmissionDenialKind::quota_exceeded);
  CHECK(d->quota == "medium");
  REQUIRE(d->items.size() == 1);
  CHECK(d->items[0].resource == "limits.cpu");
  CHECK(d->items[0].requested == "1");
  CHECK(d->items[0].used == "1500m");
  CHECK(d->items[0].limited == "2");
  CHECK(describe(*d) == "quota \"medium\" is full: 2 limits.cpu allowed, 1500m in use, 1 requested");
}

TEST_CASE("admission denial: several keys in one kubectl error line") {
  auto d = parse_admission_denial(fixture("k8s-errors/quota__kubectl-apply-exceeded-quota.txt"));
  REQUIRE(d);
  CHECK(d->quota == "money-claims-quota");
  REQUIRE(d->items.size() == 2);
  CHECK(d->items[0].resource == "requests.cpu");
  CHECK(d->items[0].requested == "20");
  CHECK(d->items[0].used == "32575m");
  CHECK(d->items[0].limited == "50");
  CHECK(d->items[1].resource == "requests.memory");
  CHECK(d->items[1].limited == "140Gi");
}

TEST_CASE("admission denial: a GPU quota in a Job controller FailedCreate event") {
  auto d = parse_admission_denial(
      "Error creating: pods \"train-x7k2p\" is forbidden: exceeded quota: team-a-gpus, requested: "
      "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=6, limited: requests.nvidia.com/gpu=8");
  REQUIRE(d);
  REQUIRE(d->items.size() == 1);
  CHECK(d->items[0].resource == "requests.nvidia.com/gpu");
  CHECK(describe(*d) == "quota \"team-a-gpus\" is full: 8 requests.nvidia.com/gpu allowed, 6 in use, 4 requested");
}

TEST_CASE("admission denial: must specify and status unknown") {
  auto must = parse_admission_denial(fixture("k8s-errors/quota__failed-quota-must-specify__kubeflow.txt"));
  REQUIRE(must);
  CHECK(must->kind == AdmissionDenialKind::quota_must_specify);
  CHECK(must->quota == "kf-resource-quota");
  CHECK(must->resources == std::vector<std::string>{"cpu", "memory"});

  auto unknown = parse_admission_denial(
      "pods \"p\" is forbidden: status unknown for quota: gpu-quota, resources: requests.nvidia.com/gpu");
  REQUIRE(unknown);
  CHECK(unknown->kind == AdmissionDenialKind::quota_status_unknown);
  CHECK(unknown->quota == "gpu-quota");
  CHECK(unknown->resources == std::vector<std::string>{"requests.nvidia.com/gpu"});
}

TEST_CASE("admission denial: LimitRange maximum per container") {
  auto d = parse_admission_denial(
      "pods \"x\" is forbidden: maximum nvidia.com/gpu usage per Container is 4, but limit is 8");
  REQUIRE(d);
  CHECK(d->kind == AdmissionDenialKind::limit_range);
  CHECK(d->detail == "maximum nvidia.com/gpu usage per Container is 4, but limit is 8");
}

TEST_CASE("admission denial: other refusals are not mistaken for quota") {
  CHECK_FALSE(parse_admission_denial(fixture("k8s-errors/quota__gatekeeper-denied-and-exceeded-quota-truncated.txt")));
  CHECK_FALSE(parse_admission_denial("0/3 nodes are available: 3 Insufficient nvidia.com/gpu."));
  CHECK_FALSE(parse_admission_denial("exceeded quota: truncated"));
}
