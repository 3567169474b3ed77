#include "gpuctl/util/strings.hpp"

#include <algorithm>

namespace gpuctl::util {

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.append(separator);
    out.append(parts[i]);
  }
  return out;
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_word(const std::string& typed, const std::vector<std::string>& candidates) {
  // Words are short (keys, flags): the quadratic table is a few hundred cells; a hostile long
  // word is cut off first so it costs no more.
  if (typed.size() > 64) return {};
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(typed, c);
    if (d < best_distance && d * 2 < std::max(typed.size(), c.size())) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace gpuctl::util
