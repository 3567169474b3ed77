// Quantities ("500m", "1.5Gi") from manifests, node status and flags. Invariants: what parses
// formats back to text that parses to the same value, canonical form included; canonical forms
// settle after one re-parse; and the saturating accessors and arithmetic never overflow (UBSan
// would report it).
#include "fuzz_support.hpp"
#include "gpuctl/kube/quantity.hpp"

using gpuctl::kube::Quantity;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpuctl::fuzz::as_text(data, size);
  auto parsed = Quantity::parse(text);
  if (!parsed) {
    GPUCTL_FUZZ_CHECK(!parsed.error().message.empty(), text);
    return 0;
  }
  const Quantity& q = *parsed;
  for (const std::string& written : {q.to_string(), q.canonical()}) {
    auto again = Quantity::parse(written);
    GPUCTL_FUZZ_CHECK(again.has_value(), written);
    GPUCTL_FUZZ_CHECK(*again == q, written);
    // Not again->canonical() == q.canonical(): as upstream, "62.5Ki" is binary and canonically
    // "64000", which parses as decimal, canonically "64k" (regressions/fuzz_quantity). From
    // there on the form is stable.
    std::string settled = again->canonical();
    auto settled_again = Quantity::parse(settled);
    GPUCTL_FUZZ_CHECK(settled_again.has_value() && settled_again->canonical() == settled, settled);
  }
  (void)q.value();
  (void)q.milli_value();
  GPUCTL_FUZZ_CHECK(q.is_zero() == (q.sign() == 0), text);
  GPUCTL_FUZZ_CHECK((q - q).is_zero(), text);
  Quantity doubled = q + q;
  GPUCTL_FUZZ_CHECK(doubled == q.times(2), text);
  (void)q.times(1'000'000'007).canonical();
  (void)doubled.canonical();
  return 0;
}
