// The CEL subset of device selectors: NVIDIA's own class and claim expressions, the operators and
// functions of the subset, CEL's error semantics, what is refused as unsupported, and hostile
// input (deep nesting, huge strings and values, unterminated literals).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "gpuctl/ops/dra/dra_cel.hpp"

using namespace gpuctl;
using ops::CelVerdict;
using json = nlohmann::json;

namespace {

// A full GPU as NVIDIA's driver publishes it (attributes from the driver's deviceinfo.go).
ops::DraDevice a100() {
  ops::DraDevice d;
  d.driver = "gpu.nvidia.com";
  d.pool = "node-a";
  d.node = "node-a";
  d.name = "gpu-0";
  d.type = ops::DraDeviceType::gpu;
  d.product = "NVIDIA A100-SXM4-80GB";
  d.attributes = json::parse(R"({
    "type": {"string": "gpu"},
    "uuid": {"string": "GPU-2fa81118-5a5f-aa66-7660-471eed407181"},
    "productName": {"string": "NVIDIA A100-SXM4-80GB"},
    "architecture": {"string": "Ampere"},
    "cudaComputeCapability": {"version": "8.0.0"},
    "driverVersion": {"version": "580.126.20"},
    "index": {"int": 3},
    "migCapable": {"bool": true},
    "resource.kubernetes.io/pciBusID": {"string": "0000:65:00.0"}
  })");
  d.capacity = json::parse(R"({"memory": {"value": "80Gi"}})");
  return d;
}

ops::DraDevice h100() {
  ops::DraDevice d = a100();
  d.name = "gpu-1";
  d.product = "NVIDIA H100 80GB HBM3";
  d.attributes["productName"] = {{"string", d.product}};
  d.attributes["architecture"] = {{"string", "Hopper"}};
  return d;
}

ops::DraDevice mig() {
  ops::DraDevice d = a100();
  d.name = "gpu-0-mig-1g.10gb-0";
  d.type = ops::DraDeviceType::mig;
  d.profile = "1g.10gb";
  d.attributes["type"] = {{"string", "mig"}};
  d.attributes["profile"] = {{"string", "1g.10gb"}};
  return d;
}

CelVerdict::Kind eval(std::string_view expression, const ops::DraDevice& device = a100()) {
  return ops::evaluate_device_selector(expression, device).kind;
}

constexpr auto kMatch = CelVerdict::Kind::match;
constexpr auto kNoMatch = CelVerdict::Kind::no_match;
constexpr auto kUnsupported = CelVerdict::Kind::unsupported;

const std::string kGpuClass = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
const std::string kMigClass = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'";

}  // namespace

TEST_CASE("dra_cel: NVIDIA's device classes select full GPUs and MIG devices apart", "[dra_cel]") {
  CHECK(eval(kGpuClass, a100()) == kMatch);
  CHECK(eval(kGpuClass, mig()) == kNoMatch);
  CHECK(eval(kMigClass, mig()) == kMatch);
  CHECK(eval(kMigClass, a100()) == kNoMatch);
  ops::DraDevice other = a100();
  other.driver = "gpu.example.com";
  CHECK(eval(kGpuClass, other) == kNoMatch);
}

TEST_CASE("dra_cel: the anchors' productName regex finds the product, lower-cased", "[dra_cel]") {
  const std::string a100_selector =
      "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')";
  CHECK(eval(a100_selector, a100()) == kMatch);
  CHECK(eval(a100_selector, h100()) == kNoMatch);
  // Without lowerAscii the upper-case name does not hold "a100".
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.matches('a100')") == kNoMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.matches('(?i)a100')") == kMatch);
}

TEST_CASE("dra_cel: product_selector_expression matches the product as --gpu-type names it", "[dra_cel]") {
  std::string a100_expr = ops::product_selector_expression("gpu.nvidia.com", "A100");
  CHECK(a100_expr ==
        "has(device.attributes['gpu.nvidia.com'].productName) && "
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('a100')");
  CHECK(eval(a100_expr, a100()) == kMatch);
  CHECK(eval(a100_expr, h100()) == kNoMatch);
  // The label's spelling finds the driver's: dashes stand for spaces.
  CHECK(eval(ops::product_selector_expression("gpu.nvidia.com", "NVIDIA-H100-80GB-HBM3"), h100()) == kMatch);
  CHECK(eval(ops::product_selector_expression("gpu.nvidia.com", "h100-80gb"), h100()) == kMatch);
  CHECK(eval(ops::product_selector_expression("gpu.nvidia.com", "A100-SXM4"), a100()) == kMatch);
  // A device without a productName is not a match, never an error that aborts the allocation.
  ops::DraDevice nameless = a100();
  nameless.attributes.erase("productName");
  CHECK(ops::evaluate_device_selector(a100_expr, nameless).problem.empty());
  CHECK(eval(a100_expr, nameless) == kNoMatch);
}

TEST_CASE("dra_cel: a product with quotes, backslashes and regex characters stays a literal", "[dra_cel]") {
  ops::DraDevice odd = a100();
  odd.attributes["productName"] = {{"string", "GPU 'x' (a+b)\\c.*"}};
  for (std::string product : {"'x'", "(a+b)", "\\c", ".*", "' || true || '", "\\' || true || \\'"}) {
    std::string expr = ops::product_selector_expression("gpu.nvidia.com", product);
    INFO(expr);
    bool literal_inside = std::string("gpu 'x' (a+b)\\c.*").find(product) != std::string::npos;
    CHECK(eval(expr, odd) == (literal_inside ? kMatch : kNoMatch));
  }
  // ".*" is a literal here: the name without it does not match.
  CHECK(eval(ops::product_selector_expression("gpu.nvidia.com", ".*"), a100()) == kNoMatch);
  // A control character is escaped, and still matches itself.
  odd.attributes["productName"] = {{"string", "a\tb"}};
  CHECK(eval(ops::product_selector_expression("gpu.nvidia.com", "a\tb"), odd) == kMatch);
}

TEST_CASE("dra_cel: comparisons, logic, lists and literals", "[dra_cel]") {
  CHECK(eval("device.attributes['gpu.nvidia.com'].index == 3") == kMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].index != 3") == kNoMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].index >= 2 && device.attributes['gpu.nvidia.com'].index < 4") ==
        kMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].index > -1") == kMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].index <= 0x2") == kNoMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].migCapable") == kMatch);
  CHECK(eval("!device.attributes['gpu.nvidia.com'].migCapable") == kNoMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].migCapable == true && false == false") == kMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].architecture in ['Ampere', 'Hopper']") == kMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].architecture in ['Hopper',]") == kNoMatch);
  CHECK(eval("'Ampere' < 'Hopper' && !(1 > 2) && (false || true)") == kMatch);
  CHECK(eval("device.driver == \"gpu.nvidia.com\"") == kMatch);
  CHECK(eval("device.driver == '\\x67pu.nvidia.com'") == kMatch);  // \x67 is 'g'
  CHECK(eval("device.driver == r'gpu.nvidia.com' // a comment") == kMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com']['productName'] == 'NVIDIA A100-SXM4-80GB'") == kMatch);
  CHECK(eval("device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:65')") == kMatch);
  CHECK(eval("-9223372036854775808 < 0") == kMatch);
  CHECK(eval("1 == 'one'") == kNoMatch);  // CEL's heterogeneous equality: different types are unequal
}

TEST_CASE("dra_cel: string functions", "[dra_cel]") {
  const std::string name = "device.attributes['gpu.nvidia.com'].productName";
  CHECK(eval(name + ".startsWith('NVIDIA')") == kMatch);
  CHECK(eval(name + ".endsWith('80GB')") == kMatch);
  CHECK(eval(name + ".contains('SXM4')") == kMatch);
  CHECK(eval(name + ".contains('PCIE')") == kNoMatch);
  CHECK(eval(name + ".upperAscii() == 'NVIDIA A100-SXM4-80GB'") == kMatch);
  CHECK(eval(name + ".size() == 21 && size(" + name + ") == 21") == kMatch);
  CHECK(eval("size(['a', 'b']) == 2") == kMatch);
  CHECK(eval("matches(" + name + ", 'A100')") == kMatch);
  CHECK(eval(name + ".matches('^NVIDIA A100-SXM4-80GB$')") == kMatch);
  CHECK(eval(name + ".matches('^A100')") == kNoMatch);
  CHECK(eval(name + ".matches('80GB$')") == kMatch);
  CHECK(eval(name + ".matches('A1.0-.+-80')") == kMatch);
  CHECK(eval(name + ".matches('^NVIDIA.*SXM4.*$')") == kMatch);
  CHECK(eval(name + ".matches('^NVIDIA.*PCIE.*$')") == kNoMatch);
  CHECK(eval(name + ".matches('A100\\\\-SXM4')") == kMatch);  // an escaped '-' is a '-'
  CHECK(eval(name + ".matches('SXM4\\\\.')") == kNoMatch);    // an escaped '.' is only a '.'
}

TEST_CASE("dra_cel: a missing attribute fails the expression as the scheduler does, and is no match", "[dra_cel]") {
  auto verdict = ops::evaluate_device_selector("device.attributes['gpu.nvidia.com'].memoryVendor == 'x'", a100());
  CHECK(verdict.kind == kNoMatch);
  CHECK(verdict.problem.find("no such key") != std::string::npos);
  // CEL's && and || absorb the error where the other side decides.
  CHECK(eval("false && device.attributes['gpu.nvidia.com'].memoryVendor == 'x'") == kNoMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].memoryVendor == 'x' || true") == kMatch);
  CHECK(eval("true || device.attributes['gpu.nvidia.com'].memoryVendor == 'x'") == kMatch);
  // An unknown domain is an empty map: presence tests are false, lookups fail.
  CHECK(eval("'model' in device.attributes['dra.example.com']") == kNoMatch);
  CHECK(eval("device.attributes['dra.example.com'].model == 'x'") == kNoMatch);
  // Presence, with has() or `in`.
  CHECK(eval("has(device.attributes['gpu.nvidia.com'].productName)") == kMatch);
  CHECK(eval("has(device.attributes['gpu.nvidia.com'].memoryVendor)") == kNoMatch);
  CHECK(eval("'uuid' in device.attributes['gpu.nvidia.com']") == kMatch);
  CHECK(eval("'memory' in device.capacity['gpu.nvidia.com']") == kMatch);
  CHECK(eval("'pciBusID' in device.attributes['resource.kubernetes.io']") == kMatch);
}

TEST_CASE("dra_cel: versions compare as semver, never as strings", "[dra_cel]") {
  const std::string version = "device.attributes['gpu.nvidia.com'].driverVersion";
  // kubernetes.Semver has no == with a string: the scheduler fails it (no such overload).
  auto verdict = ops::evaluate_device_selector(version + " == '580.126.20'", a100());
  CHECK(verdict.kind == kNoMatch);
  CHECK(verdict.problem.find("no such overload") != std::string::npos);
  CHECK(eval(version + " == semver('580.126.20')") == kMatch);
  CHECK(eval(version + ".isGreaterThan(semver('570.86.15'))") == kMatch);
  CHECK(eval(version + ".isLessThan(semver('580.126.3'))") == kNoMatch);  // 126 > 3 as numbers
  CHECK(eval(version + ".compareTo(semver('580.126.20')) == 0") == kMatch);
  CHECK(eval(version + ".major() == 580 && " + version + ".minor() == 126") == kMatch);
  CHECK(eval("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))") == kMatch);
  CHECK(eval("semver('1.0.0-alpha.2').isLessThan(semver('1.0.0-alpha.10'))") == kMatch);
  CHECK(eval("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))") == kMatch);
  CHECK(eval("semver('01.0.0') == semver('1.0.0')") == kNoMatch);  // not strict semver: an error
  CHECK(eval(version + " < semver('600.0.0')") == kNoMatch);       // no ordering operators on Semver
}

TEST_CASE("dra_cel: capacity compares as quantities", "[dra_cel]") {
  const std::string memory = "device.capacity['gpu.nvidia.com'].memory";
  CHECK(eval(memory + ".compareTo(quantity('40Gi')) > 0") == kMatch);
  CHECK(eval(memory + ".isLessThan(quantity('100Gi'))") == kMatch);
  CHECK(eval(memory + " == quantity('80Gi')") == kMatch);
  CHECK(eval(memory + " == quantity('85899345920')") == kMatch);
  CHECK(eval(memory + ".isGreaterThan(quantity('81Gi'))") == kNoMatch);
}

TEST_CASE("dra_cel: expressions outside the subset are unsupported, with the reason", "[dra_cel]") {
  for (std::string expr : {
           "cel.bind(d, device.attributes['gpu.nvidia.com'], d.type == 'gpu')",
           "device.attributes['gpu.nvidia.com'].index + 1 == 4",
           "device.attributes['gpu.nvidia.com'].index == 3 ? true : false",
           "device.attributes['gpu.nvidia.com'].productName.matches('[ab]100')",
           "device.attributes['gpu.nvidia.com'].productName.matches('a100|h100')",
           "device.attributes['gpu.nvidia.com'].productName.matches('\\\\d+')",
           "device.attributes['gpu.nvidia.com'].productName.matches('(A100)')",
           "device.attributes['gpu.nvidia.com'].productName.matches('A1?00')",
           "device.attributes['gpu.nvidia.com'].index == 1.5",
           "device.attributes['gpu.nvidia.com'].index == 3u",
           "device.driver == '''gpu.nvidia.com'''",
           "device.driver == b'gpu.nvidia.com'",
           "exists(device.driver)",
           "device.allowMultipleAllocations",
           "{'a': 1}['a'] == 1",
           "",
       }) {
    INFO(expr);
    auto verdict = ops::evaluate_device_selector(expr, a100());
    CHECK(verdict.kind == kUnsupported);
    CHECK_FALSE(verdict.problem.empty());
  }
  // A function outside the subset on the side && does not need is absorbed, as an unknown is in CEL.
  CHECK(eval("device.driver == 'x' && device.attributes['gpu.nvidia.com'].productName.matches('[ab]')") == kNoMatch);
  CHECK(eval("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName.matches('[ab]')") ==
        kUnsupported);
  // The matches() of a newline-holding text with wildcards is left to the scheduler.
  ops::DraDevice newline = a100();
  newline.attributes["productName"] = {{"string", "a\nb"}};
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.matches('a.*b')", newline) == kUnsupported);
}

TEST_CASE("dra_cel: evaluate_device_selectors needs every selector to match", "[dra_cel]") {
  const std::string unsupported = "device.attributes['gpu.nvidia.com'].productName.matches('[a]')";
  CHECK(ops::evaluate_device_selectors({}, a100()).kind == kMatch);
  CHECK(ops::evaluate_device_selectors({kGpuClass, "device.attributes['gpu.nvidia.com'].index == 3"}, a100()).kind ==
        kMatch);
  CHECK(ops::evaluate_device_selectors({unsupported, kMigClass}, a100()).kind == kNoMatch);
  auto verdict = ops::evaluate_device_selectors({kGpuClass, unsupported}, a100());
  CHECK(verdict.kind == kUnsupported);
  CHECK(verdict.problem.find("[") != std::string::npos);
}

TEST_CASE("dra_cel: a result that is not a bool is no match", "[dra_cel]") {
  auto verdict = ops::evaluate_device_selector("device.driver", a100());
  CHECK(verdict.kind == kNoMatch);
  CHECK(verdict.problem.find("string") != std::string::npos);
}

TEST_CASE("dra_cel: hostile input is bounded and never crashes", "[dra_cel]") {
  auto started = std::chrono::steady_clock::now();
  // Deep nesting: parentheses, negations, lists and member chains.
  for (std::string expr : {std::string(5000, '(') + "true" + std::string(5000, ')'), std::string(5000, '!') + "true",
                           std::string(3000, '[') + std::string(3000, ']'), std::string(3000, '-') + "1"}) {
    auto verdict = ops::evaluate_device_selector(expr, a100());
    CHECK(verdict.kind == kUnsupported);
  }
  std::string members = "device";
  for (int i = 0; i < 1000; ++i) members += ".a";
  CHECK(eval(members) == kUnsupported);
  // A long flat chain costs no depth.
  std::string chain = "true";
  for (int i = 0; i < 1000; ++i) chain += " && true";
  CHECK(eval(chain) == kMatch);
  // Too long, unterminated strings, stray bytes.
  CHECK(eval("device.driver == '" + std::string(ops::kMaxCelLength, 'a') + "'") == kUnsupported);
  CHECK(eval("device.driver == 'gpu.nvidia.com") == kUnsupported);
  CHECK(eval("device.driver == \"gpu\\") == kUnsupported);
  CHECK(eval("device.driver == 'a\nb'") == kUnsupported);
  CHECK(eval(std::string("device.driver == \xff\x00", 19)) == kUnsupported);
  CHECK(eval("device.driver == 99999999999999999999") == kUnsupported);
  // A huge attribute value with a pathological search: the budget stops it.
  ops::DraDevice huge = a100();
  huge.attributes["productName"] = {{"string", std::string(1 << 20, 'a')}};
  std::string needle = std::string(4000, 'a') + "b";
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.contains('" + needle + "')", huge) == kUnsupported);
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.matches('" + needle + "')", huge) == kUnsupported);
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.matches('^a.*b$')", huge) == kNoMatch);
  CHECK(eval("device.attributes['gpu.nvidia.com'].productName.startsWith('aaa')", huge) == kMatch);
  // Attribute values of the wrong shape are not read.
  ops::DraDevice odd = a100();
  odd.attributes["index"] = {{"int", 18446744073709551615ULL}};
  odd.attributes["type"] = {{"float", 1.5}};
  odd.capacity["memory"] = {{"value", "lots"}};
  CHECK(eval("device.attributes['gpu.nvidia.com'].index > 0", odd) == kUnsupported);
  CHECK(eval("device.attributes['gpu.nvidia.com'].type == 'gpu'", odd) == kUnsupported);
  CHECK(eval("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('1'))", odd) == kUnsupported);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}
