#include "gpuctl/util/time.hpp"

#include <cctype>
#include <charconv>
#include <ctime>

#include <fmt/format.h>

namespace gpuctl::util {
namespace {

bool read_int(std::string_view text, std::size_t pos, std::size_t len, int& out) {
  if (pos + len > text.size()) return false;
  auto first = text.data() + pos;
  auto [ptr, ec] = std::from_chars(first, first + len, out);
  return ec == std::errc() && ptr == first + len;
}

}  // namespace

std::optional<TimePoint> parse_rfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  int year, month, day, hour, minute, second;
  if (text.size() < 20) return std::nullopt;
  if (!read_int(text, 0, 4, year) || text[4] != '-' || !read_int(text, 5, 2, month) || text[7] != '-' ||
      !read_int(text, 8, 2, day) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') ||
      !read_int(text, 11, 2, hour) || text[13] != ':' || !read_int(text, 14, 2, minute) || text[16] != ':' ||
      !read_int(text, 17, 2, second)) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  }
  int offset_seconds = 0;
  if (pos >= text.size()) return std::nullopt;
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    int oh, om;
    if (!read_int(text, pos + 1, 2, oh) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !read_int(text, pos + 4, 2, om)) {
      return std::nullopt;
    }
    offset_seconds = (oh * 3600 + om * 60) * (text[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  using namespace std::chrono;
  auto ymd = year_month_day{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                            std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return std::nullopt;
  auto tp = sys_days{ymd} + hours{hour} + minutes{minute} + seconds{second} - seconds{offset_seconds};
  // TimePoint counts nanoseconds in 64 bits (years 1678..2261); a valid RFC 3339 time outside
  // them ("9999-12-31T23:59:59Z", found by fuzz_time) would overflow the cast: malformed for us.
  constexpr auto kLimit = duration_cast<seconds>(system_clock::duration::max());
  if (tp.time_since_epoch() >= kLimit || tp.time_since_epoch() <= -kLimit) return std::nullopt;
  return time_point_cast<system_clock::duration>(tp);
}

std::string format_rfc3339(TimePoint t) {
  using namespace std::chrono;
  auto secs = floor<seconds>(t);
  auto days = floor<std::chrono::days>(secs);
  year_month_day ymd{days};
  hh_mm_ss hms{secs - days};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count());
}

std::string human_duration(std::chrono::seconds d) {
  long long s = d.count();
  if (s < -1) return "<invalid>";
  if (s < 0) return "0s";
  if (s < 60 * 2) return fmt::format("{}s", s);
  long long m = s / 60;
  if (m < 10) return s % 60 == 0 ? fmt::format("{}m", m) : fmt::format("{}m{}s", m, s % 60);
  if (m < 60 * 3) return fmt::format("{}m", m);
  long long h = m / 60;
  if (h < 8) return m % 60 == 0 ? fmt::format("{}h", h) : fmt::format("{}h{}m", h, m % 60);
  if (h < 48) return fmt::format("{}h", h);
  if (h < 24 * 8) return h % 24 == 0 ? fmt::format("{}d", h / 24) : fmt::format("{}d{}h", h / 24, h % 24);
  if (h < 24 * 365 * 2) return fmt::format("{}d", h / 24);
  if (h < 24 * 365 * 8) {
    long long dy = h / 24 % 365;
    return dy == 0 ? fmt::format("{}y", h / 24 / 365) : fmt::format("{}y{}d", h / 24 / 365, dy);
  }
  return fmt::format("{}y", h / 24 / 365);
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return fail(
        Errc::invalid_argument,
        fmt::format("invalid duration \"{}\": {} (use a number with a unit, e.g. 30s, 5m, 1h30m, 7d)", text, why));
  };
  if (text.empty()) return bad("empty");
  if (text == "0") return std::chrono::milliseconds(0);
  if (text.front() == '-') return bad("must not be negative");
  long double total_ms = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t start = pos;
    // Go's grammar: digits, optionally "." and more digits; at least one digit in all.
    auto digits = [&] {
      std::size_t from = pos;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
      return pos - from;
    };
    std::size_t whole = digits();
    std::size_t fraction = 0;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      fraction = digits();
    }
    if (whole + fraction == 0) return bad("expected a number");
    if (pos < text.size() && text[pos] == '.') return bad("a number has at most one decimal point");
    std::string number(text.substr(start, pos - start));
    long double value = 0;
    try {
      value = std::stold(number);
    } catch (...) {
      return bad("expected a number");
    }
    std::size_t unit_start = pos;
    while (pos < text.size() &&
           (std::isalpha(static_cast<unsigned char>(text[pos])) || static_cast<unsigned char>(text[pos]) >= 0x80))
      ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    long double factor;
    if (unit == "ns")
      factor = 1e-6L;
    else if (unit == "us" || unit == "\u00b5s")
      factor = 1e-3L;
    else if (unit == "ms")
      factor = 1;
    else if (unit == "s")
      factor = 1000;
    else if (unit == "m")
      factor = 60'000;
    else if (unit == "h")
      factor = 3'600'000;
    else if (unit == "d")
      factor = 86'400'000;
    else if (unit.empty())
      return bad("missing unit");
    else
      return bad(fmt::format("unknown unit \"{}\"", unit));
    total_ms += value * factor;
    if (total_ms > 1e15L) return bad("too large");
  }
  if (total_ms > 1e15L) return bad("too large");
  return std::chrono::milliseconds(static_cast<long long>(total_ms));
}

}  // namespace gpuctl::util
