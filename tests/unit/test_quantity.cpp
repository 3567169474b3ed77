// kube::Quantity against the upstream tables of k8s.io/apimachinery/pkg/api/resource
// (quantity_test.go): TestQuantityParse, TestQuantityString, TestQuantityParseEmit,
// TestParseQuantity, TestQuantityCmp*, TestMilliNewSet, TestNewSet, TestNewScaledSet,
// TestScaledValue, TestAdd, TestSub and the *PreservesSuffix tests. Upstream builds expected
// values with decQuantity(mantissa, exponent, format); here that is from_scaled().
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "gpuctl/kube/quantity.hpp"

using gpuctl::kube::Quantity;
using Format = Quantity::Format;

namespace {

constexpr std::int64_t kMostPositive = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMostNegative = std::numeric_limits<std::int64_t>::min();

const char* format_name(Format f) {
  switch (f) {
    case Format::decimal_exponent: return "DecimalExponent";
    case Format::binary_si: return "BinarySI";
    case Format::decimal_si: return "DecimalSI";
  }
  return "?";
}

Quantity must_parse(std::string_view text) {
  INFO("parsing " << text);
  auto q = Quantity::parse(text);
  if (!q) FAIL("unexpected error: " << q.error().message);
  return *q;
}

// decQuantity(mantissa, exponent, format) of the upstream tests.
Quantity dec(std::int64_t mantissa, int exponent, Format format) {
  INFO("from_scaled " << mantissa << "e" << exponent);
  auto q = Quantity::from_scaled(mantissa, exponent, format);
  if (!q) FAIL("unexpected error: " << q.error().message);
  return *q;
}

Quantity negated(const Quantity& q) { return Quantity{} - q; }

// prefix + n copies of c + suffix. (Built by appending: GCC 12 reports a false
// -Warray-bounds on std::string(n, c) + "literal" at -O2.)
std::string repeated(std::string_view prefix, std::size_t n, char c, std::string_view suffix) {
  std::string out(prefix);
  out.append(n, c);
  out.append(suffix);
  return out;
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<Quantity> {
  static std::string convert(const Quantity& q) {
    return q.to_string() + " (" + format_name(q.format()) + ", canonical " + q.canonical() + ")";
  }
};
}  // namespace Catch

// --- TestQuantityParse ---------------------------------------------------------------------

namespace {
struct ParseRow {
  const char* input;
  Quantity expect;
};
}  // namespace

TEST_CASE("kube::Quantity::parse matches the upstream TestQuantityParse table", "[quantity]") {
  const auto row = GENERATE(values<ParseRow>({
      {"0", dec(0, 0, Format::decimal_si)},
      {"0n", dec(0, 0, Format::decimal_si)},
      {"0u", dec(0, 0, Format::decimal_si)},
      {"0m", dec(0, 0, Format::decimal_si)},
      {"0Ki", dec(0, 0, Format::binary_si)},
      {"0k", dec(0, 0, Format::decimal_si)},
      {"0Mi", dec(0, 0, Format::binary_si)},
      {"0M", dec(0, 0, Format::decimal_si)},
      {"0Gi", dec(0, 0, Format::binary_si)},
      {"0G", dec(0, 0, Format::decimal_si)},
      {"0Ti", dec(0, 0, Format::binary_si)},
      {"0T", dec(0, 0, Format::decimal_si)},

      // Quantity less numbers are allowed
      {"1", dec(1, 0, Format::decimal_si)},

      // Binary suffixes
      {"1Ki", dec(1024, 0, Format::binary_si)},
      {"8Ki", dec(8 * 1024, 0, Format::binary_si)},
      {"7Mi", dec(7 * 1024 * 1024, 0, Format::binary_si)},
      {"6Gi", dec(6LL * 1024 * 1024 * 1024, 0, Format::binary_si)},
      {"5Ti", dec(5LL * 1024 * 1024 * 1024 * 1024, 0, Format::binary_si)},
      {"4Pi", dec(4LL * 1024 * 1024 * 1024 * 1024 * 1024, 0, Format::binary_si)},
      {"3Ei", dec(3LL * 1024 * 1024 * 1024 * 1024 * 1024 * 1024, 0, Format::binary_si)},
      {"10Ti", dec(10LL * 1024 * 1024 * 1024 * 1024, 0, Format::binary_si)},
      {"100Ti", dec(100LL * 1024 * 1024 * 1024 * 1024, 0, Format::binary_si)},

      // Decimal suffixes
      {"5n", dec(5, -9, Format::decimal_si)},
      {"4u", dec(4, -6, Format::decimal_si)},
      {"3m", dec(3, -3, Format::decimal_si)},
      {"9", dec(9, 0, Format::decimal_si)},
      {"8k", dec(8, 3, Format::decimal_si)},
      {"50k", dec(5, 4, Format::decimal_si)},
      {"7M", dec(7, 6, Format::decimal_si)},
      {"6G", dec(6, 9, Format::decimal_si)},
      {"5T", dec(5, 12, Format::decimal_si)},
      {"40T", dec(4, 13, Format::decimal_si)},
      {"300T", dec(3, 14, Format::decimal_si)},
      {"2P", dec(2, 15, Format::decimal_si)},
      {"1E", dec(1, 18, Format::decimal_si)},

      // Decimal exponents
      {"1E-3", dec(1, -3, Format::decimal_exponent)},
      {"1e3", dec(1, 3, Format::decimal_exponent)},
      {"1E6", dec(1, 6, Format::decimal_exponent)},
      {"1e9", dec(1, 9, Format::decimal_exponent)},
      {"1E12", dec(1, 12, Format::decimal_exponent)},
      {"1e15", dec(1, 15, Format::decimal_exponent)},
      {"1E18", dec(1, 18, Format::decimal_exponent)},

      // Nonstandard but still parsable
      {"1e14", dec(1, 14, Format::decimal_exponent)},
      {"1e13", dec(1, 13, Format::decimal_exponent)},
      {"100.035k", dec(100035, 0, Format::decimal_si)},

      // Things that look like floating point
      {"0.001", dec(1, -3, Format::decimal_si)},
      {"0.0005k", dec(5, -1, Format::decimal_si)},
      {"0.005", dec(5, -3, Format::decimal_si)},
      {"0.05", dec(5, -2, Format::decimal_si)},
      {"0.5", dec(5, -1, Format::decimal_si)},
      {"0.00050k", dec(5, -1, Format::decimal_si)},
      {"0.00500", dec(5, -3, Format::decimal_si)},
      {"0.05000", dec(5, -2, Format::decimal_si)},
      {"0.50000", dec(5, -1, Format::decimal_si)},
      {"0.5e0", dec(5, -1, Format::decimal_exponent)},
      {"0.5e-1", dec(5, -2, Format::decimal_exponent)},
      {"0.5e-2", dec(5, -3, Format::decimal_exponent)},
      {"10.035M", dec(10035, 3, Format::decimal_si)},

      {"1.2e3", dec(12, 2, Format::decimal_exponent)},
      {"1.3E+6", dec(13, 5, Format::decimal_exponent)},
      {"1.40e9", dec(14, 8, Format::decimal_exponent)},
      {"1.53E12", dec(153, 10, Format::decimal_exponent)},
      {"1.6e15", dec(16, 14, Format::decimal_exponent)},
      {"1.7E18", dec(17, 17, Format::decimal_exponent)},

      {"9.01", dec(901, -2, Format::decimal_si)},
      {"8.1k", dec(81, 2, Format::decimal_si)},
      {"7.123456M", dec(7123456, 0, Format::decimal_si)},
      {"6.987654321G", dec(6987654321, 0, Format::decimal_si)},
      {"5.444T", dec(5444, 9, Format::decimal_si)},
      {"40.1T", dec(401, 11, Format::decimal_si)},
      {"300.2T", dec(3002, 11, Format::decimal_si)},
      {"2.5P", dec(25, 14, Format::decimal_si)},
      {"1.01E", dec(101, 16, Format::decimal_si)},

      // Things that saturate/round
      {"3.001n", dec(4, -9, Format::decimal_si)},
      {"1.1E-9", dec(2, -9, Format::decimal_exponent)},
      {"0.0000000001", dec(1, -9, Format::decimal_si)},
      {"0.0000000005", dec(1, -9, Format::decimal_si)},
      {"0.00000000050", dec(1, -9, Format::decimal_si)},
      {"0.5e-9", dec(1, -9, Format::decimal_exponent)},
      {"0.9n", dec(1, -9, Format::decimal_si)},
      {"0.00000012345", dec(124, -9, Format::decimal_si)},
      {"0.00000012354", dec(124, -9, Format::decimal_si)},
      {"9Ei", dec(kMostPositive, 0, Format::binary_si)},
      {"9223372036854775807Ki", dec(kMostPositive, 0, Format::binary_si)},
      {"12E", dec(12, 18, Format::decimal_si)},

      // We'll accept fractional binary stuff, too.
      {"100.035Ki", dec(10243584, -2, Format::binary_si)},
      {"0.5Mi", dec(512 * 1024, 0, Format::binary_si)},
      {"0.05Gi", dec(536870912, -1, Format::binary_si)},
      {"0.025Ti", dec(274877906944, -1, Format::binary_si)},

      // Things written by trolls
      {"0.000000000001Ki", dec(2, -9, Format::decimal_si)},  // rounds up, changes format
      {".001", dec(1, -3, Format::decimal_si)},
      {".0001k", dec(100, -3, Format::decimal_si)},
      {"1.", dec(1, 0, Format::decimal_si)},
      {"1.G", dec(1, 9, Format::decimal_si)},
  }));
  const std::string input = row.input;
  CAPTURE(input, row.expect);

  const Quantity got = must_parse(input);
  CHECK(got == row.expect);
  CHECK(format_name(got.format()) == std::string(format_name(row.expect.format())));

  // the negative of everything, keeping the format
  const Quantity negative = must_parse("-" + input);
  CHECK(negative == negated(row.expect));
  CHECK(negative.sign() == -row.expect.sign());
  CHECK(format_name(negative.format()) == std::string(format_name(row.expect.format())));

  // everything with an explicit +
  const Quantity positive = must_parse("+" + input);
  CHECK(positive == row.expect);
  CHECK(format_name(positive.format()) == std::string(format_name(row.expect.format())));

  // the canonical form reparses to the same value (upstream's decimal round trip)
  CHECK(must_parse(got.canonical()) == got);
}

TEST_CASE("kube::Quantity::parse rejects what upstream rejects, saying why", "[quantity]") {
  constexpr std::string_view kRegex =
      "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
  constexpr std::string_view kSuffix = "unable to parse quantity's suffix";
  constexpr std::string_view kNumeric = "unable to parse numeric part of quantity";
  struct Row {
    const char* input;
    std::string_view reason;
  };
  const auto row = GENERATE_COPY(values<Row>({
      // upstream's invalid list
      {"", kRegex},
      {"1.1.M", kRegex},
      {"1+1.0M", kRegex},
      {"0.1mi", kSuffix},
      {"0.1am", kRegex},
      {"aoeu", kRegex},
      {".5i", kSuffix},
      {"1i", kSuffix},
      {"-3.01i", kSuffix},
      {"-3.01e-", kSuffix},
      {" 1", kRegex},  // whitespace is forbidden
      {"1 ", kRegex},
      {"Non-Numeric", kRegex},  // TestQuantityParseNonNumericPanic
      {"invalid", kRegex},      // TestQuantityValueSet
      // more of the same rules
      {"1K", kSuffix},
      {"1KI", kRegex},  // 'I' is not a suffix letter
      {"1e", kSuffix},
      {"1e+", kSuffix},
      {"1Ee3", kSuffix},
      {"1m5", kSuffix},
      {"1e3k", kRegex},
      {"1e--3", kRegex},
      {"--1", kSuffix},
      {"1,5", kRegex},
      {"1_000", kRegex},
      {"0x10", kRegex},
      {"1\t", kRegex},
      {"1e99999999999999999999", kSuffix},  // the exponent must fit int64, as strconv.ParseInt
      // no digits where upstream leaves its int64 fast path: inf.Dec has nothing to read
      {"Pi", kNumeric},
      {"Ei", kNumeric},
      {".e-10", kNumeric},
      {"-e-10", kNumeric},
      {"+.Pi", kNumeric},
  }));
  const std::string input = row.input;
  CAPTURE(input);
  const auto result = Quantity::parse(input);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().code == gpuctl::Errc::invalid_argument);
  const std::string& message = result.error().message;
  CAPTURE(message);
  CHECK(message.find(row.reason) != std::string::npos);
  CHECK(message.find("invalid quantity") == 0);
  CHECK(message.find("for example 500m, 1.5Gi") != std::string::npos);  // says what one looks like
  if (input.find_first_of("\t\"\\") == std::string::npos) {
    CHECK(message.find("\"" + input + "\"") != std::string::npos);  // names the bad text
  }
}

TEST_CASE("kube::Quantity::parse error messages escape and shorten the text they quote", "[quantity]") {
  const auto tab = Quantity::parse("1\t");
  REQUIRE_FALSE(tab);
  CHECK(tab.error().message.find("\"1\\x09\"") != std::string::npos);

  const std::string long_text = repeated("", 1000, '1', "x");
  const auto long_result = Quantity::parse(long_text);
  REQUIRE_FALSE(long_result);
  CHECK(long_result.error().message.find(repeated("", 64, '1', "...\" (1001 bytes)")) != std::string::npos);
  CHECK(long_result.error().message.size() < 400);
}

// --- TestParseQuantityString and the scanner's looseness ---------------------------------

TEST_CASE("kube::Quantity::parse accepts the same loose forms as upstream's scanner", "[quantity]") {
  struct Row {
    const char* input;
    Quantity expect;
    const char* text;
  };
  const auto row = GENERATE(values<Row>({
      // TestParseQuantityString
      {"0.025Ti", dec(274877906944, -1, Format::binary_si), "27487790694400m"},
      {"1.025Ti", dec(11269994184704, -1, Format::binary_si), "1126999418470400m"},
      {"-1.025Ti", dec(-11269994184704, -1, Format::binary_si), "-1126999418470400m"},
      {".", dec(0, 0, Format::decimal_si), "0"},
      {"-.", dec(0, 0, Format::decimal_si), "0"},
      {"1E-3", dec(1, -3, Format::decimal_exponent), "1E-3"},
      // a bare sign or suffix is zero (kubernetes/apimachinery#165, still so upstream)
      {"-", dec(0, 0, Format::decimal_si), "0"},
      {"+", dec(0, 0, Format::decimal_si), "0"},
      {"k", dec(0, 0, Format::decimal_si), "0"},
      {"m", dec(0, 0, Format::decimal_si), "0"},
      {"Ki", dec(0, 0, Format::binary_si), "0"},
      {"Ti", dec(0, 0, Format::binary_si), "0"},
      {"e5", dec(0, 0, Format::decimal_exponent), "0"},
      {".e-5", dec(0, 0, Format::decimal_exponent), "0"},
      {"-000", dec(0, 0, Format::decimal_si), "0"},
      {"0e99999999999", dec(0, 0, Format::decimal_exponent), "0"},
      // leading zeros, empty fractions
      {"007", dec(7, 0, Format::decimal_si), "007"},
      {".5", dec(5, -1, Format::decimal_si), "500m"},
      {"1.Ki", dec(1024, 0, Format::binary_si), "1.Ki"},  // kept: upstream's test ignores the point
      {"1E", dec(1, 18, Format::decimal_si), "1E"},
      {"1e+3", dec(1, 3, Format::decimal_exponent), "1e+3"},
      {"1e0003", dec(1, 3, Format::decimal_exponent), "1e0003"},
  }));
  const std::string input = row.input;
  CAPTURE(input);
  const Quantity got = must_parse(input);
  CHECK(got == row.expect);
  CHECK(format_name(got.format()) == std::string(format_name(row.expect.format())));
  CHECK(got.to_string() == row.text);
}

// --- TestQuantityString ------------------------------------------------------------------

TEST_CASE("kube::Quantity::to_string matches the upstream TestQuantityString table", "[quantity]") {
  struct Row {
    Quantity in;
    const char* expect;
    const char* alternate;
  };
  const auto row = GENERATE(values<Row>({
      {dec(1024 * 1024 * 1024, 0, Format::binary_si), "1Gi", "1024Mi"},
      {dec(300 * 1024 * 1024, 0, Format::binary_si), "300Mi", "307200Ki"},
      {dec(6 * 1024, 0, Format::binary_si), "6Ki", ""},
      {dec(1001LL * 1024 * 1024 * 1024, 0, Format::binary_si), "1001Gi", "1025024Mi"},
      {dec(1024LL * 1024 * 1024 * 1024, 0, Format::binary_si), "1Ti", "1024Gi"},
      {dec(5, 0, Format::binary_si), "5", "5000m"},
      {dec(500, -3, Format::binary_si), "500m", "0.5"},
      {dec(1, 9, Format::decimal_si), "1G", "1000M"},
      {dec(1000, 6, Format::decimal_si), "1G", "0.001T"},
      {dec(1000000, 3, Format::decimal_si), "1G", ""},
      {dec(1000000000, 0, Format::decimal_si), "1G", ""},
      {dec(1, -3, Format::decimal_si), "1m", "1000u"},
      {dec(80, -3, Format::decimal_si), "80m", ""},
      {dec(1080, -3, Format::decimal_si), "1080m", "1.08"},
      {dec(108, -2, Format::decimal_si), "1080m", "1080000000n"},
      {dec(10800, -4, Format::decimal_si), "1080m", ""},
      {dec(300, 6, Format::decimal_si), "300M", ""},
      {dec(1, 12, Format::decimal_si), "1T", ""},
      {dec(1234567, 6, Format::decimal_si), "1234567M", ""},
      {dec(1234567, -3, Format::binary_si), "1234567m", ""},
      {dec(3, 3, Format::decimal_si), "3k", ""},
      {dec(1025, 0, Format::binary_si), "1025", ""},
      {dec(0, 0, Format::decimal_si), "0", ""},
      {dec(0, 0, Format::binary_si), "0", ""},
      {dec(1, 9, Format::decimal_exponent), "1e9", ".001e12"},
      {dec(1, -3, Format::decimal_exponent), "1e-3", "0.001e0"},
      {dec(1, -9, Format::decimal_exponent), "1e-9", "1000e-12"},
      {dec(80, -3, Format::decimal_exponent), "80e-3", ""},
      {dec(300, 6, Format::decimal_exponent), "300e6", ""},
      {dec(1, 12, Format::decimal_exponent), "1e12", ""},
      {dec(1, 3, Format::decimal_exponent), "1e3", ""},
      {dec(3, 3, Format::decimal_exponent), "3e3", ""},
      {dec(3, 3, Format::decimal_si), "3k", ""},
      {dec(0, 0, Format::decimal_exponent), "0", "00"},
      {dec(1, -9, Format::decimal_si), "1n", ""},
      {dec(80, -9, Format::decimal_si), "80n", ""},
      {dec(1080, -9, Format::decimal_si), "1080n", ""},
      {dec(108, -8, Format::decimal_si), "1080n", ""},
      {dec(10800, -10, Format::decimal_si), "1080n", ""},
      {dec(1, -6, Format::decimal_si), "1u", ""},
      {dec(80, -6, Format::decimal_si), "80u", ""},
      {dec(1080, -6, Format::decimal_si), "1080u", ""},
  }));
  const std::string expect = row.expect;
  const std::string alternate = row.alternate;
  CAPTURE(expect, alternate);

  CHECK(row.in.to_string() == expect);
  CHECK(row.in.canonical() == expect);

  // the canonical string parses back to itself (upstream also checks it is kept as the text)
  const Quantity reparsed = must_parse(expect);
  CHECK(reparsed.to_string() == expect);
  CHECK(reparsed.canonical() == expect);
  CHECK(reparsed == row.in);

  if (!alternate.empty()) {
    const Quantity other = must_parse(alternate);
    CHECK(other.to_string() == expect);
    CHECK(other == row.in);
  }

  // never "-0"
  if (!row.in.is_zero()) {
    CHECK(negated(row.in).to_string() == "-" + expect);
  }
}

// --- TestQuantityParseEmit ---------------------------------------------------------------

TEST_CASE("kube::Quantity::parse then to_string matches upstream TestQuantityParseEmit", "[quantity]") {
  const auto row = GENERATE(table<const char*, const char*>({
      {"1Ki", "1Ki"},
      {"1Mi", "1Mi"},
      {"1Gi", "1Gi"},
      {"1024Mi", "1Gi"},
      {"1000M", "1G"},
      {".001Ki", "1024m"},
      {".000001Ki", "1024u"},
      {".000000001Ki", "1024n"},
      {".000000000001Ki", "2n"},
      // the examples in the upstream type's comment and the brief
      {"1.5", "1500m"},
      {"1.5Gi", "1536Mi"},
      {"0.5", "500m"},
      {"1000", "1k"},
      {"1536Ki", "1536Ki"},
      {"1.5Ki", "1536"},
      {"2048Ki", "2Mi"},
      {"1023.5Ki", "1048064"},
      {"0.5Ki", "512"},
  }));
  const std::string in = std::get<0>(row);
  const std::string expect = std::get<1>(row);
  CAPTURE(in);
  CHECK(must_parse(in).to_string() == expect);
  const Quantity negative = must_parse("-" + in);
  if (!negative.is_zero()) {
    CHECK(negative.to_string() == (expect[0] == '-' ? expect.substr(1) : "-" + expect));
  }
}

// --- TestParseQuantity (the int64 boundary table) -----------------------------------------

TEST_CASE("kube::Quantity::parse keeps values past int64 exactly, as upstream TestParseQuantity", "[quantity]") {
  struct Row {
    const char* input;
    const char* as_dec;     // the exact value upstream's AsDec() reports
    const char* canonical;  // what String() gives when it differs from the input
  };
  const auto row = GENERATE(values<Row>({
      // min/max 18 digits
      {"-999999999999999999", "-999999999999999999", ""},
      {"999999999999999999", "999999999999999999", ""},
      {"-999999999999999999.0", "-999999999999999999", "-999999999999999999"},
      {"999999999999999999.0", "999999999999999999", "999999999999999999"},
      {"-999999999999999999.1", "-999999999999999999.1", "-999999999999999999100m"},
      {"999999999999999999.1", "999999999999999999.1", "999999999999999999100m"},
      // min/max 19 digits
      {"-9999999999999999999", "-9999999999999999999", ""},
      {"9999999999999999999", "9999999999999999999", ""},
      {"-1E", "-1000000000000000000", ""},
      {"1E", "1000000000000000000", ""},
      {"-1000000000000000000", "-1000000000000000000", "-1E"},
      {"1000000000000000000", "1000000000000000000", "1E"},
      {"-9999999999999999999.0", "-9999999999999999999", "-9999999999999999999"},
      {"9999999999999999999.0", "9999999999999999999", "9999999999999999999"},
      {"-1.0E", "-1000000000000000000", "-1E"},
      {"1.0E", "1000000000000000000", "1E"},
      {"-1000000000000000000.0", "-1000000000000000000", "-1E"},
      {"1000000000000000000.0", "1000000000000000000", "1E"},
      {"-9999999999999999999000m", "-9999999999999999999", "-9999999999999999999"},
      {"9999999999999999999000m", "9999999999999999999", "9999999999999999999"},
      {"-9999999999999999999.1", "-9999999999999999999.1", "-9999999999999999999100m"},
      {"9999999999999999999.1", "9999999999999999999.1", "9999999999999999999100m"},
      {"-1.0000000000000000001E", "-1000000000000000000.1", "-1000000000000000000100m"},
      {"1.0000000000000000001E", "1000000000000000000.1", "1000000000000000000100m"},
      {"-1000000000000000000.1", "-1000000000000000000.1", "-1000000000000000000100m"},
      {"1000000000000000000.1", "1000000000000000000.1", "1000000000000000000100m"},
      {"-1.000000000000000001E", "-1000000000000000001", "-1000000000000000001"},
      {"1.000000000000000001E", "1000000000000000001", "1000000000000000001"},
      {"-1000000000000000001", "-1000000000000000001", ""},
      {"1000000000000000001", "1000000000000000001", ""},
      // min/max 20 digits
      {"-10E", "-10000000000000000000", ""},
      {"10E", "10000000000000000000", ""},
      {"-10000000000000000000", "-10000000000000000000", "-10E"},
      {"10000000000000000000", "10000000000000000000", "10E"},
      {"-10.0E", "-10000000000000000000", "-10E"},
      {"10.0E", "10000000000000000000", "10E"},
      {"-10000000000000000000.0", "-10000000000000000000", "-10E"},
      {"10000000000000000000.0", "10000000000000000000", "10E"},
      {"-10000000000000000000000m", "-10000000000000000000", "-10E"},
      {"10000000000000000000000m", "10000000000000000000", "10E"},
      {"-10.0000000000000000001E", "-10000000000000000000.1", "-10000000000000000000100m"},
      {"10.0000000000000000001E", "10000000000000000000.1", "10000000000000000000100m"},
      {"-10000000000000000000.1", "-10000000000000000000.1", "-10000000000000000000100m"},
      {"10000000000000000000.1", "10000000000000000000.1", "10000000000000000000100m"},
      {"-10.000000000000000001E", "-10000000000000000001", "-10000000000000000001"},
      {"10.000000000000000001E", "10000000000000000001", "10000000000000000001"},
      {"-10000000000000000001", "-10000000000000000001", ""},
      {"10000000000000000001", "10000000000000000001", ""},
      // min/max int64 - 1
      {"-9223372036854775809", "-9223372036854775809", ""},
      {"9223372036854775806", "9223372036854775806", ""},
      {"-9223372036854775809.0", "-9223372036854775809", "-9223372036854775809"},
      {"9223372036854775806.0", "9223372036854775806", "9223372036854775806"},
      {"-9223372036854775809000m", "-9223372036854775809", "-9223372036854775809"},
      {"9223372036854775806000m", "9223372036854775806", "9223372036854775806"},
      {"-9223372036854775809.1", "-9223372036854775809.1", "-9223372036854775809100m"},
      {"9223372036854775806.1", "9223372036854775806.1", "9223372036854775806100m"},
      // min/max int64
      {"-9223372036854775808", "-9223372036854775808", ""},
      {"9223372036854775807", "9223372036854775807", ""},
      {"-9223372036854775808.0", "-9223372036854775808", "-9223372036854775808"},
      {"9223372036854775807.0", "9223372036854775807", "9223372036854775807"},
      {"-9223372036854775808000m", "-9223372036854775808", "-9223372036854775808"},
      {"9223372036854775807000m", "9223372036854775807", "9223372036854775807"},
      {"-9223372036854775808.1", "-9223372036854775808.1", "-9223372036854775808100m"},
      {"9223372036854775807.1", "9223372036854775807.1", "9223372036854775807100m"},
      // min/max int64 + 1
      {"-9223372036854775807", "-9223372036854775807", ""},
      {"9223372036854775808", "9223372036854775808", ""},
      {"-9223372036854775807.0", "-9223372036854775807", "-9223372036854775807"},
      {"9223372036854775808.0", "9223372036854775808", "9223372036854775808"},
      {"-9223372036854775807000m", "-9223372036854775807", "-9223372036854775807"},
      {"9223372036854775808000m", "9223372036854775808", "9223372036854775808"},
      {"-9223372036854775807.1", "-9223372036854775807.1", "-9223372036854775807100m"},
      {"9223372036854775808.1", "9223372036854775808.1", "9223372036854775808100m"},
  }));
  const std::string input = row.input;
  const std::string canonical = *row.canonical != '\0' ? row.canonical : row.input;
  CAPTURE(input);
  const Quantity q = must_parse(input);
  CHECK(q == must_parse(row.as_dec));
  CHECK(q.to_string() == canonical);
  CHECK(q.format() == Format::decimal_si);
  CHECK(must_parse(canonical) == q);
}

// --- Cmp --------------------------------------------------------------------------------

TEST_CASE("kube::Quantity comparisons match upstream TestQuantityCmp", "[quantity]") {
  const auto row = GENERATE(table<const char*, const char*, int>({
      {"0", "0", 0},
      {"100m", "50m", 1},
      {"50m", "100m", -1},
      {"10000T", "100Gi", 1},
      // formats do not matter, only values
      {"1Ki", "1024", 0},
      {"1k", "1e3", 0},
      {"1024Mi", "1Gi", 0},
      {"-1", "1n", -1},
      {"12E", "9Ei", 1},
  }));
  const Quantity x = must_parse(std::get<0>(row));
  const Quantity y = must_parse(std::get<1>(row));
  const int expect = std::get<2>(row);
  CAPTURE(x, y, expect);
  CHECK((x == y) == (expect == 0));
  CHECK((x < y) == (expect < 0));
  CHECK((x > y) == (expect > 0));
  CHECK((y < x) == (expect > 0));
  CHECK(((x <=> y) == std::strong_ordering::equal) == (expect == 0));
}

TEST_CASE("kube::Quantity comparisons match upstream TestQuantityCmpInt64AndDec", "[quantity]") {
  struct Row {
    Quantity a;
    Quantity b;
    int cmp;
  };
  constexpr auto si = Format::decimal_si;
  const auto row = GENERATE_COPY(values<Row>({
      {dec(901, -2, si), dec(901, -2, si), 0},
      {dec(90, -1, si), dec(901, -2, si), -1},
      {dec(901, -2, si), dec(900, -2, si), 1},
      {dec(0, 0, si), dec(0, 0, si), 0},
      {dec(0, 1, si), dec(0, -1, si), 0},
      {dec(0, -1, si), dec(0, 1, si), 0},
      {dec(800, -3, si), dec(1, 0, si), -1},
      {dec(800, -3, si), dec(79, -2, si), 1},

      {dec(kMostPositive, 0, si), dec(1, -1, si), 1},
      {dec(kMostPositive, 1, si), dec(1, 0, si), 1},
      {dec(kMostPositive, 1, si), dec(1, 1, si), 1},
      {dec(kMostPositive, 1, si), dec(0, 1, si), 1},
      // 922.3372036854775807, rounded up to the nano as every gpuctl value is
      {dec(kMostPositive, -16, si), dec(1, 3, si), -1},

      {dec(kMostNegative, 0, si), dec(0, 0, si), -1},
      {dec(kMostNegative, -18, si), dec(-1, 0, si), -1},
      {dec(kMostNegative, -19, si), dec(-1, 0, si), 1},

      {dec(1000000000000000000, -17, si), dec(1, 1, si), 0},
      {dec(1000000000000000000, -17, si), dec(-10, 0, si), 1},
      {dec(-1000000000000000000, -17, si), dec(-10, 0, si), 0},
      {dec(1000000000000000000, -17, si), dec(1, 0, si), 1},

      {dec(1000000000000000001, -17, si), dec(1, 1, si), 1},
      // Not ported: (10^18-1)e-17 < 10 upstream. It is finer than a nano, which parse() never
      // produces upstream either; from_scaled() rounds it up to exactly 10.
  }));
  CAPTURE(row.a, row.b, row.cmp);
  CHECK((row.a == row.b) == (row.cmp == 0));
  CHECK((row.a < row.b) == (row.cmp < 0));
  CHECK((row.b < row.a) == (row.cmp > 0));
}

// --- NewMilliQuantity / NewQuantity / NewScaledQuantity -----------------------------------

TEST_CASE("kube::Quantity::from_milli matches upstream TestMilliNewSet", "[quantity]") {
  struct Row {
    std::int64_t value;
    Format format;
    const char* expect;
    bool exact;
  };
  const auto row = GENERATE(values<Row>({
      {1, Format::decimal_si, "1m", true},
      {1000, Format::decimal_si, "1", true},
      {1234000, Format::decimal_si, "1234", true},
      {1024, Format::binary_si, "1024m", false},  // written as decimal SI
      {1000000, Format::decimal_exponent, "1e3", true},
      {1024 * 1024, Format::binary_si, "1048576m", false},
  }));
  CAPTURE(row.value, row.expect);
  const Quantity q = Quantity::from_milli(row.value, row.format);
  CHECK(q.to_string() == row.expect);
  CHECK(q.format() == row.format);  // the format is kept; only its writing falls back
  CHECK(q.milli_value() == row.value);
  if (row.exact) {
    CHECK(must_parse(q.to_string()).milli_value() == row.value);
  }
}

TEST_CASE("kube::Quantity::from_int matches upstream TestNewSet", "[quantity]") {
  struct Row {
    std::int64_t value;
    Format format;
    const char* expect;
  };
  const auto row = GENERATE(values<Row>({
      {1, Format::decimal_si, "1"},
      {1000, Format::decimal_si, "1k"},
      {1234000, Format::decimal_si, "1234k"},
      {1024, Format::binary_si, "1Ki"},
      {1000000, Format::decimal_exponent, "1e6"},
      {1024 * 1024, Format::binary_si, "1Mi"},
      {kMostPositive, Format::decimal_si, "9223372036854775807"},
  }));
  CAPTURE(row.value, row.expect);
  const Quantity q = Quantity::from_int(row.value, row.format);
  CHECK(q.to_string() == row.expect);
  CHECK(q.value() == row.value);
  CHECK(must_parse(q.to_string()).value() == row.value);
}

TEST_CASE("kube::Quantity::from_scaled matches upstream TestNewScaledSet and TestScaledValue", "[quantity]") {
  struct Row {
    std::int64_t value;
    int scale;
    const char* expect;
    std::int64_t value_rounded_up;
    std::int64_t milli_rounded_up;
  };
  const auto row = GENERATE(values<Row>({
      {1, -9, "1n", 1, 1},
      {1000, -9, "1u", 1, 1},
      {1, -6, "1u", 1, 1},
      {1000, -6, "1m", 1, 1},
      {1, -3, "1m", 1, 1},
      {1000, -3, "1", 1, 1000},
      {1, 0, "1", 1, 1000},
      {0, -9, "0", 0, 0},
      {0, -6, "0", 0, 0},
      {0, -3, "0", 0, 0},
      {0, 0, "0", 0, 0},
      {1, 2, "100", 100, 100000},
      {-1, -9, "-1n", -1, -1},
      {1, -12, "1n", 1, 1},  // finer than a nano: rounds up, as parse() does
  }));
  CAPTURE(row.value, row.scale);
  const Quantity q = dec(row.value, row.scale, Format::decimal_si);
  CHECK(q.to_string() == row.expect);
  CHECK(q.value() == row.value_rounded_up);
  CHECK(q.milli_value() == row.milli_rounded_up);
  CHECK(must_parse(q.to_string()) == q);
}

TEST_CASE("kube::Quantity::from_scaled refuses magnitudes of 1e29 and more", "[quantity]") {
  CHECK(Quantity::from_scaled(1, 28).has_value());
  CHECK(Quantity::from_scaled(kMostPositive, 10).has_value());  // 9.2e28
  const auto too_large = Quantity::from_scaled(1, 29);
  REQUIRE_FALSE(too_large);
  CHECK(too_large.error().code == gpuctl::Errc::invalid_argument);
  CHECK(too_large.error().message.find("1e29") != std::string::npos);
  CHECK_FALSE(Quantity::from_scaled(kMostNegative, 11).has_value());
  CHECK_FALSE(Quantity::from_scaled(1, std::numeric_limits<int>::max()).has_value());
  CHECK(Quantity::from_scaled(-1, std::numeric_limits<int>::min())->to_string() == "-1n");
  CHECK(Quantity::from_scaled(0, std::numeric_limits<int>::max())->is_zero());
}

// --- Value / MilliValue -----------------------------------------------------------------

TEST_CASE("kube::Quantity::value and milli_value round away from zero and saturate", "[quantity]") {
  const auto row = GENERATE(table<const char*, std::int64_t, std::int64_t>({
      {"0", 0, 0},
      {"1", 1, 1000},
      {"1.5", 2, 1500},
      {"-1.5", -2, -1500},
      {"1.1", 2, 1100},
      {"100m", 1, 100},
      {"0.1m", 1, 1},  // 100u
      {"-0.1m", -1, -1},
      {"1n", 1, 1},
      {"-1n", -1, -1},
      {"1Ki", 1024, 1024000},
      {"1Mi", 1048576, 1048576000},
      {"9.01", 10, 9010},
      {"-9.01", -10, -9010},
      {"9223372036854775807", kMostPositive, kMostPositive},
      {"-9223372036854775808", kMostNegative, kMostNegative},
      {"9223372036854775.807", 9223372036854776, kMostPositive},
      {"-9223372036854775.808", -9223372036854776, kMostNegative},
      {"9223372036854775.8071", 9223372036854776, kMostPositive},  // rounds past int64: saturates
      {"9223372036854775807.1", kMostPositive, kMostPositive},     // rounds past int64: saturates
      {"-9223372036854775809", kMostNegative, kMostNegative},
      {"12E", kMostPositive, kMostPositive},
      {"-12E", kMostNegative, kMostNegative},
      {"8Ei", kMostPositive, kMostPositive},  // capped at parse
  }));
  const Quantity q = must_parse(std::get<0>(row));
  CAPTURE(q);
  CHECK(q.value() == std::get<1>(row));
  CHECK(q.milli_value() == std::get<2>(row));
}

// --- Arithmetic (TestAdd, TestSub, *PreservesSuffix, TestQuantityCanocicalizeZero) ----------

TEST_CASE("kube::Quantity addition matches upstream TestAdd", "[quantity]") {
  struct Row {
    Quantity a;
    Quantity b;
    Quantity expected;
  };
  const auto row = GENERATE(values<Row>({
      {dec(10, 0, Format::decimal_si), dec(1, 1, Format::decimal_si), dec(20, 0, Format::decimal_si)},
      {dec(10, 0, Format::decimal_si), dec(1, 0, Format::binary_si), dec(11, 0, Format::decimal_si)},
      {dec(10, 0, Format::binary_si), dec(1, 0, Format::decimal_si), dec(11, 0, Format::binary_si)},
      {Quantity{}, dec(50, 0, Format::decimal_si), dec(50, 0, Format::decimal_si)},
      {dec(50, 0, Format::decimal_si), Quantity{}, dec(50, 0, Format::decimal_si)},
      {Quantity{}, Quantity{}, dec(0, 0, Format::decimal_si)},
  }));
  Quantity a = row.a;
  a += row.b;
  CAPTURE(row.a, row.b);
  CHECK(a == row.expected);
  CHECK(a.format() == row.expected.format());
  CHECK(row.a + row.b == row.expected);
}

TEST_CASE("kube::Quantity subtraction matches upstream TestSub", "[quantity]") {
  struct Row {
    Quantity a;
    Quantity b;
    Quantity expected;
  };
  const auto row = GENERATE(values<Row>({
      {dec(10, 0, Format::decimal_si), dec(1, 1, Format::decimal_si), dec(0, 0, Format::decimal_si)},
      {dec(10, 0, Format::decimal_si), dec(1, 0, Format::binary_si), dec(9, 0, Format::decimal_si)},
      {dec(10, 0, Format::binary_si), dec(1, 0, Format::decimal_si), dec(9, 0, Format::binary_si)},
      {Quantity{}, dec(50, 0, Format::decimal_si), dec(-50, 0, Format::decimal_si)},
      {dec(50, 0, Format::decimal_si), Quantity{}, dec(50, 0, Format::decimal_si)},
      {Quantity{}, Quantity{}, dec(0, 0, Format::decimal_si)},
  }));
  Quantity a = row.a;
  a -= row.b;
  CAPTURE(row.a, row.b);
  CHECK(a == row.expected);
  CHECK(row.a - row.b == row.expected);
}

TEST_CASE("kube::Quantity addition and subtraction of zero keep the suffix", "[quantity]") {
  const std::string text = GENERATE("100m", "1Gi");
  CAPTURE(text);
  const Quantity value = must_parse(text);
  const Quantity zero = must_parse("0");
  CHECK((value + zero).to_string() == text);
  CHECK((zero + value).to_string() == text);
  CHECK((value - zero).to_string() == text);
  CHECK((zero - value).to_string() == "-" + text);
  CHECK((zero - value).format() == value.format());
}

TEST_CASE("kube::Quantity arithmetic cancels and canonicalizes zero as 0", "[quantity]") {
  // TestQuantityCanocicalizeZero
  CHECK((must_parse("1000m") - must_parse("1")).to_string() == "0");
  CHECK((must_parse("1Gi") - must_parse("1024Mi")).to_string() == "0");

  // TestAddSubRoundTrip / TestAddSubRoundTripAcrossScales, with fixed values
  const std::int64_t values[] = {kMostPositive, 1, 998244353, 4611686018427387904, 123456789012345678};
  for (int scale = -9; scale <= 9; ++scale) {  // the sums stay below 1e29
    Quantity sum;
    for (std::int64_t v : values) sum += dec(v, scale, Format::decimal_si);
    for (std::int64_t v : values) sum -= dec(v, scale, Format::decimal_si);
    CAPTURE(scale, sum);
    CHECK(sum.is_zero());
  }
  Quantity across;
  for (std::int64_t v : values) across += dec(v, static_cast<int>(v % 20) - 10, Format::decimal_si);
  for (std::int64_t v : values) across -= dec(v, static_cast<int>(v % 20) - 10, Format::decimal_si);
  CHECK(across.is_zero());

  // TestNegateRoundTrip
  const Quantity q = dec(kMostNegative, 3, Format::binary_si);
  CHECK(negated(negated(q)) == q);
  CHECK(negated(q).sign() == 1);
}

TEST_CASE("kube::Quantity arithmetic drops the parsed text, as upstream does", "[quantity]") {
  const Quantity plus_one = must_parse("+1");
  CHECK(plus_one.to_string() == "+1");
  CHECK((plus_one + Quantity{}).to_string() == "1");
  CHECK((plus_one - Quantity{}).to_string() == "1");
}

TEST_CASE("kube::Quantity arithmetic saturates at the largest magnitude parse accepts", "[quantity]") {
  const Quantity max = must_parse("99999999999999999999999999999.999999999");
  const Quantity min = negated(max);
  CHECK((max + max) == max);
  CHECK((min + min) == min);
  CHECK((min - max) == min);
  CHECK((max - min) == max);
  CHECK((max + min).is_zero());
  CHECK((max + max).to_string() == "99999999999999999999999999999999999999n");
  CHECK(max.value() == kMostPositive);
  CHECK(min.milli_value() == kMostNegative);
}

// --- Beyond upstream's tables: the text upstream keeps, limits, exponents ------------------

TEST_CASE(
    "kube::Quantity::to_string keeps the text upstream takes as canonical, canonical() "
    "does not",
    "[quantity]") {
  const auto row = GENERATE(table<const char*, const char*, const char*>({
      // input, to_string (upstream's String()), canonical()
      {"0", "0", "0"},
      {"100m", "100m", "100m"},
      {"1Ki", "1Ki", "1Ki"},
      {"+1", "+1", "1"},
      {"01", "01", "1"},
      {"+1Ki", "+1Ki", "1Ki"},
      {"007Ki", "007Ki", "7Ki"},
      {"1E3", "1E3", "1e3"},
      {"1e+3", "1e+3", "1e3"},
      {"1e0", "1e0", "1"},
      {"1.500k", "1.500k", "1500"},
      {"12.345M", "12.345M", "12345k"},
      {"-1.234k", "-1.234k", "-1234"},
      // not kept: trailing 000, a leading 0 digit, a scale not a multiple of 3, binary x8
      {"1000", "1k", "1k"},
      {"+0", "0", "0"},
      {"-0", "0", "0"},
      {"0.5", "500m", "500m"},
      {"1.5k", "1500", "1500"},
      {"8Ki", "8Ki", "8Ki"},
      {"2048Ki", "2Mi", "2Mi"},
      {"1.0Ki", "1Ki", "1Ki"},
      {"+1.5", "1500m", "1500m"},
      {"1234567890123456789", "1234567890123456789", "1234567890123456789"},  // 19 digits
      {"+1234567890123456789", "1234567890123456789", "1234567890123456789"},
  }));
  const Quantity q = must_parse(std::get<0>(row));
  CAPTURE(std::get<0>(row));
  CHECK(q.to_string() == std::get<1>(row));
  CHECK(q.canonical() == std::get<2>(row));
  CHECK(must_parse(q.canonical()).canonical() == q.canonical());
}

TEST_CASE("kube::Quantity::canonical writes values past the last suffix as upstream's fix does", "[quantity]") {
  const auto row = GENERATE(table<const char*, const char*>({
      {"100E", "100E"},
      {"999E", "999E"},
      {"1000E", "1e21"},  // not "1", the pre-fix upstream output
      {"1000000000000000000000", "1e21"},
      {"-1000000000000000000000", "-1e21"},
      {"1234567E", "1234567E"},
      {"12345670E", "12345670E"},
      {"1e24", "1e24"},
      {"1.5e24", "1500e21"},
      {"1e28", "10e27"},
      {"99999999999999999999999999999", "99999999999999999999999999999"},
  }));
  const Quantity q = must_parse(std::get<0>(row));
  CAPTURE(std::get<0>(row));
  CHECK(q.to_string() == std::get<1>(row));
  CHECK(must_parse(q.to_string()) == q);

  // 2^70, reachable only by arithmetic on binary SI: no "Zi", so decimal digits
  Quantity big(must_parse("1Ei"));
  for (int i = 1; i < 1024; ++i) big += must_parse("1Ei");
  CHECK(big.format() == Format::binary_si);
  CHECK(big.to_string() == "1180591620717411303424");
  CHECK(must_parse(big.to_string()) == big);
  CHECK((big - must_parse("1Ei")).to_string() == "1023Ei");
}

TEST_CASE("kube::Quantity::parse caps binary SI at 2^63-1 and rounds tiny values up to 1n", "[quantity]") {
  const auto row = GENERATE(table<const char*, const char*, Format>({
      {"8Ei", "9223372036854775807", Format::binary_si},
      {"-8Ei", "-9223372036854775807", Format::binary_si},
      {"7.99999999999999999999Ei", "9223372036854775807", Format::binary_si},
      {"7Ei", "7Ei", Format::binary_si},
      {"100000000000000000000000000000000000000000000Ki", "9223372036854775807", Format::binary_si},
      {"1e-100", "1e-9", Format::decimal_exponent},
      {"-1e-100", "-1e-9", Format::decimal_exponent},
      {"1e-3000000000", "1e-9", Format::decimal_exponent},  // upstream would wrap the exponent
      {"0.00000000000000000000000000000000000000000000001", "1n", Format::decimal_si},
      {"0.00000000000000000000001Ki", "1n", Format::decimal_si},
      {"0.5n", "1n", Format::decimal_si},
      {"-0.5n", "-1n", Format::decimal_si},
      {"1.0000000001", "1000000001n", Format::decimal_si},
      {"0.0000000000000Ki", "0", Format::binary_si},
      {"0e-2147483647", "0", Format::decimal_exponent},
  }));
  const Quantity q = must_parse(std::get<0>(row));
  CAPTURE(std::get<0>(row));
  CHECK(q.to_string() == std::get<1>(row));
  CHECK(q.format() == std::get<2>(row));
}

TEST_CASE("kube::Quantity -8Ei is representable but parses capped, as upstream", "[quantity]") {
  const Quantity min = Quantity::from_int(kMostNegative, Format::binary_si);
  CHECK(min.to_string() == "-8Ei");
  CHECK(min.value() == kMostNegative);
  CHECK(must_parse("-8Ei").value() == -kMostPositive);
  CHECK(must_parse("-8Ei").to_string() == "-9223372036854775807");
}

TEST_CASE("kube::Quantity::parse refuses magnitudes of 1e29 and more instead of wrapping", "[quantity]") {
  const std::string input =
      GENERATE(as<std::string>{}, "1e29", "-1e29", "100000000000000000000000000000",
               "99999999999999999999999999999.9999999991", "100000000000E", "1e9223372036854775807", "1e2147483647",
               "123456789012345678901234567890123456789012345678901234567890");
  CAPTURE(input);
  const auto result = Quantity::parse(input);
  REQUIRE_FALSE(result);
  CHECK(result.error().code == gpuctl::Errc::invalid_argument);
  CHECK(result.error().message.find("too large") != std::string::npos);
  CHECK(result.error().message.find("below 1e29") != std::string::npos);
}

TEST_CASE("kube::Quantity::parse handles very long digit strings", "[quantity]") {
  const std::string tiny = repeated("0.", 200000, '0', "1");
  CHECK(must_parse(tiny).to_string() == "1n");
  const std::string long_fraction = repeated("1.", 200000, '0', "1Ki");
  CHECK(must_parse(long_fraction).to_string() == "1024000000001n");
  const std::string zeros = repeated("", 200000, '0', "5Gi");
  CHECK(must_parse(zeros).canonical() == "5Gi");
  CHECK(must_parse(zeros).to_string() == zeros);  // leading zeros do not stop upstream keeping it
  CHECK_FALSE(Quantity::parse(std::string(200000, '9')).has_value());
}

TEST_CASE("kube::Quantity default and accessors", "[quantity]") {
  const Quantity zero;
  CHECK(zero.is_zero());
  CHECK(zero.sign() == 0);
  CHECK(zero.format() == Format::decimal_si);
  CHECK(zero.to_string() == "0");
  CHECK(zero.value() == 0);
  CHECK(zero.milli_value() == 0);
  CHECK(must_parse("-1n").sign() == -1);
  CHECK(must_parse("1n").sign() == 1);
  CHECK(zero == must_parse("0Ki"));
}

TEST_CASE("kube::Quantity sums and products near 2^63 saturate instead of overflowing", "[quantity][limits]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  using gpuctl::kube::saturating_add;
  using gpuctl::kube::saturating_mul;
  CHECK(saturating_add(kMax, 1) == kMax);
  CHECK(saturating_add(kMax, kMax) == kMax);
  CHECK(saturating_add(kMax - 1, 1) == kMax);
  CHECK(saturating_add(kMin, -1) == kMin);
  CHECK(saturating_add(kMin, kMin) == kMin);
  CHECK(saturating_add(kMax, kMin) == -1);
  CHECK(saturating_add(5, -7) == -2);
  CHECK(gpuctl::kube::saturating_sub(kMax, -1) == kMax);
  CHECK(gpuctl::kube::saturating_sub(kMin, 1) == kMin);
  CHECK(gpuctl::kube::saturating_sub(0, kMin) == kMax);
  CHECK(gpuctl::kube::saturating_sub(-1, kMin) == kMax);
  CHECK(gpuctl::kube::saturating_sub(7, 9) == -2);
  CHECK(saturating_mul(kMax, 2) == kMax);
  CHECK(saturating_mul(kMax, -2) == kMin);
  CHECK(saturating_mul(kMin, -1) == kMax);
  CHECK(saturating_mul(kMin, 1) == kMin);
  CHECK(saturating_mul(std::int64_t{1} << 32, std::int64_t{1} << 31) == kMax);     // 2^63: one past the top
  CHECK(saturating_mul(-(std::int64_t{1} << 32), std::int64_t{1} << 31) == kMin);  // -2^63: exactly the bottom
  CHECK(saturating_mul(std::int64_t{1} << 32, std::int64_t{1} << 32) == kMax);
  CHECK(saturating_mul(-(std::int64_t{1} << 32), std::int64_t{1} << 32) == kMin);
  CHECK(saturating_mul(3, 4) == 12);
  CHECK(saturating_mul(0, kMin) == 0);

  // Quantities of 2^63-1 ("8Ei" is capped there) summed many times: the value saturates.
  const Quantity big = *Quantity::parse("8Ei");
  CHECK(big.value() == kMax);
  Quantity sum;
  for (int i = 0; i < 4; ++i) sum += big;
  CHECK(sum.value() == kMax);
  CHECK((Quantity() - big - big).value() == kMin);
  CHECK(saturating_add(big.value(), big.value()) == kMax);

  // times(n) is n additions in one step, saturating the same way.
  CHECK(big.times(kMax).value() == kMax);
  CHECK(big.times(kMax) == Quantity::from_int(1).times(kMax).times(kMax));
  CHECK((Quantity() - big).times(kMax).value() == kMin);
  CHECK(big.times(0).is_zero());
  CHECK(big.times(-5).is_zero());
  const Quantity half = *Quantity::parse("500m");
  CHECK(half.times(3).milli_value() == 1500);
  CHECK(half.times(3).to_string() == "1500m");
  Quantity by_loop;
  for (int i = 0; i < 3; ++i) by_loop += *Quantity::parse("1Gi");
  CHECK(Quantity::parse("1Gi")->times(3).to_string() == by_loop.to_string());
  CHECK(Quantity::from_int(kMax).times(kMax).milli_value() == kMax);
  CHECK(Quantity::from_int(kMin).times(kMax).milli_value() == kMin);
}
