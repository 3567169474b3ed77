#include "live_status.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/output/printable.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::cli {

LiveStatus::LiveStatus(std::ostream& out, bool terminal, std::size_t width)
    : out_(out), terminal_(terminal), width_(width == 0 ? 120 : width) {}

void LiveStatus::update(const std::string& raw_key, const std::string& raw_line) {
  // Node names and event messages come from the cluster; escaped before the block is laid out,
  // so the cursor movements below stay the only control sequences.
  std::string key = output::printable(raw_key);
  std::string line = output::printable(raw_line);
  std::lock_guard guard(mutex_);
  if (!terminal_) {
    out_ << util::format_rfc3339(std::chrono::system_clock::now()) << ' ' << key << ": " << line << '\n';
    out_.flush();
    return;
  }
  auto it = std::find_if(lines_.begin(), lines_.end(), [&](const auto& l) { return l.first == key; });
  if (it == lines_.end()) {
    lines_.emplace_back(key, line);
  } else {
    it->second = line;
  }
  redraw();
}

void LiveStatus::redraw() {
  std::size_t key_width = 0;
  for (const auto& [key, line] : lines_) key_width = std::max(key_width, key.size());
  if (drawn_ > 0) out_ << fmt::format("\033[{}A", drawn_);  // back to the first line of the block
  for (const auto& [key, line] : lines_) {
    std::string text = fmt::format("{:<{}}  {}", key, key_width, line);
    if (text.size() >= width_) text = text.substr(0, width_ - 1);
    out_ << "\r\033[K" << text << '\n';
  }
  drawn_ = lines_.size();
  out_.flush();
}

std::size_t terminal_width(int fd) {
  winsize size{};
  if (::isatty(fd) != 1 || ::ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace gpuctl::cli
