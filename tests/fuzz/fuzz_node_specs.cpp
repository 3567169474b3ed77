// The node specs people type: taints (`KEY[=VALUE]:EFFECT[-]`), labels (`KEY=VALUE`, `KEY-`),
// --ssh-host-from rules, `quota set` values, and the name checks behind them. Invariant: a taint
// or label that parses writes back (kubectl's notation) to text that parses to the same spec.
#include "fuzz_support.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "gpuctl/ssh/ssh.hpp"

namespace {

using namespace gpuctl;

void check_taint(std::string_view text) {
  auto spec = ops::parse_taint_spec(text);
  (void)ops::looks_like_taint_spec(text);
  if (!spec || spec->remove) return;
  std::string written = kube::to_string(spec->taint);
  auto again = ops::parse_taint_spec(written);
  GPUCTL_FUZZ_CHECK(again.has_value(), written);
  GPUCTL_FUZZ_CHECK(!again->remove && again->taint == spec->taint, written);
  auto node = nlohmann::json::parse(R"({"metadata":{"name":"n","resourceVersion":"7"},
      "spec":{"taints":[{"key":"a","value":"b","effect":"NoSchedule"}]}})");
  auto plan = ops::plan_taints(node, {*spec}, false, "2026-12-04T00:00:00Z");
  if (plan && plan->changed) fuzz::dump_checked(plan->patch, "taint patch");
}

void check_label(std::string_view text) {
  auto spec = ops::parse_label_spec(text);
  (void)ops::looks_like_label_spec(text);
  if (!spec || spec->remove) return;
  std::string written = spec->key + "=" + spec->value;
  auto again = ops::parse_label_spec(written);
  GPUCTL_FUZZ_CHECK(again.has_value(), written);
  GPUCTL_FUZZ_CHECK(again->key == spec->key && again->value == spec->value, written);
}

void check_ssh_rule(std::string_view text) {
  auto rule = ssh::parse_address_rule(text);
  if (!rule) return;
  auto node = nlohmann::json::parse(R"({"metadata":{"name":"gpu-0","labels":{"a":"h1"}},
      "status":{"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}})");
  (void)ssh::node_ssh_address(node, *rule);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = fuzz::as_text(data, size);
  check_taint(text);
  check_label(text);
  check_ssh_rule(text);
  (void)ops::qualified_name_problem(text);
  (void)ops::label_value_problem(text);
  (void)ops::node_name_problem(text);
  (void)ops::namespace_name_problem(text);
  auto parts = fuzz::split_parts(text, 4);
  (void)ops::parse_quota_spec(parts[0], parts[1], parts[2], {std::string(parts[3])});
  return 0;
}
