#pragma once
// A value nvidia-smi reported, or why it did not: every field of the GPU model is a Reported<T>,
// so callers can tell "0" from "[N/A]", "[Not Supported]" and "the element is not in this schema
// version". In JSON a value that was not reported is null.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpuctl::gpu {

// Why a field has no value.
enum class Absence : std::uint8_t {
  missing,        // the field is not in this output at all (older schema, trimmed file, CSV column not queried)
  not_available,  // "N/A", "[N/A]", empty text
  not_supported,  // "[Not Supported]", "Not Supported", "[Function Not Found]"
  deprecated,     // "Requested functionality has been deprecated" (R550+ for display mode, app clocks, ...)
  error,          // "[Unknown Error]", "[GPU is lost]", "ERR!", "[Insufficient Permissions]": the GPU failed to answer
  invalid,        // text was present but is not a value of the expected type or unit
};

// "missing", "not_available", ... (stable names, used in messages and JSON where a reason is shown).
std::string_view to_string(Absence absence);

template <class T>
class Reported {
 public:
  Reported() = default;                            // missing
  Reported(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose, like std::optional
  static Reported absent(Absence why) {
    Reported r;
    r.absence_ = why;
    return r;
  }

  bool has_value() const { return value_.has_value(); }
  explicit operator bool() const { return value_.has_value(); }
  // Precondition: has_value().
  const T& operator*() const { return *value_; }
  const T* operator->() const { return &*value_; }
  const T& value() const { return value_.value(); }  // throws std::bad_optional_access when absent
  T value_or(T fallback) const { return value_ ? *value_ : std::move(fallback); }
  const std::optional<T>& optional() const { return value_; }
  // Why there is no value; Absence::missing when there is one.
  Absence absence() const { return value_ ? Absence::missing : absence_; }

  friend bool operator==(const Reported& a, const T& b) { return a.value_ && *a.value_ == b; }
  friend bool operator==(const Reported& a, const Reported& b) {
    return a.value_ == b.value_ && a.absence() == b.absence();
  }

 private:
  std::optional<T> value_;
  Absence absence_ = Absence::missing;
};

// --- Parsing one nvidia-smi value (XML text, CSV cell or `-q` text value) ---

// If `text` is one of nvidia-smi's "no value" spellings, why; std::nullopt for a real value.
// Surrounding whitespace and [brackets] are ignored.
std::optional<Absence> absence_of(std::string_view text);

// Plain text ("NVIDIA A100-SXM4-40GB"), trimmed; absent for N/A and friends.
Reported<std::string> parse_text(std::string_view text);
// An integer with an optional unit suffix: parse_integer("10240 MiB", "MiB") == 10240, and a bare
// "10240" (csv,nounits) is accepted too. Any other unit, or trailing garbage, is Absence::invalid.
// Decimals are rejected ("1.5 MiB" is invalid). Hex with 0x is accepted when unit is empty.
Reported<std::int64_t> parse_integer(std::string_view text, std::string_view unit = {});
// A decimal number with an optional unit: parse_number("139.62 W", "W") == 139.62.
Reported<double> parse_number(std::string_view text, std::string_view unit = {});
// "Enabled"/"Disabled", "Yes"/"No", "On"/"Off", "Active"/"Not Active", "True"/"False".
Reported<bool> parse_flag(std::string_view text);

// PCI bus id in one canonical spelling so ids from XML ("00000000:0B:00.0"), error messages
// ("0000:0b:00.0") and dmesg ("PCI:0000:0b:00") compare equal: a 4-digit domain (8 digits when
// the domain does not fit, as on Azure's "00000001:00:00.0" -> "0001:00:00.0"), upper-case hex,
// function ".0" when absent. Returns std::nullopt when `text` is not a bus id.
std::optional<std::string> canonical_pci_bus_id(std::string_view text);

}  // namespace gpuctl::gpu
