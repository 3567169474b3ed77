#pragma once
// Progress of long work on many nodes: on a terminal, one line per node redrawn in place; else
// (logs, CI) one timestamped line per event. Safe to call from several threads.
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace gpuctl::cli {

class LiveStatus {
 public:
  // `width`: the terminal's columns (lines are cut to fit, so redrawing stays aligned).
  LiveStatus(std::ostream& out, bool terminal, std::size_t width = 0);
  // The node's latest state; on a terminal it replaces the node's line.
  void update(const std::string& key, const std::string& line);
  bool terminal() const { return terminal_; }

 private:
  void redraw();

  std::ostream& out_;
  bool terminal_;
  std::size_t width_;
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> lines_;
  std::size_t drawn_ = 0;
};

// The width of the terminal on this file descriptor, or 0 when it is not one.
std::size_t terminal_width(int fd);

}  // namespace gpuctl::cli
