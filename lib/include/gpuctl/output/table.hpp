#pragma once
// Column-aligned text tables in kubectl's style: upper-case headers, columns separated by
// three spaces, no borders. Cells may carry a style that is rendered as color only when asked.
#include <string>
#include <vector>

namespace gpuctl::output {

enum class Style { plain, good, warn, bad, dim };

struct Cell {
  std::string text;
  Style style = Style::plain;
  Cell() = default;
  Cell(std::string t, Style s = Style::plain) : text(std::move(t)), style(s) {}  // NOLINT: implicit from text
  Cell(const char* t, Style s = Style::plain) : text(t), style(s) {}             // NOLINT
};

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add_row(std::vector<Cell> cells) { rows_.push_back(std::move(cells)); }
  bool empty() const { return rows_.empty(); }
  std::size_t size() const { return rows_.size(); }

  struct RenderOptions {
    bool headers = true;
    bool color = false;
  };
  std::string render(const RenderOptions& options) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<Cell>> rows_;
};

// The display width of UTF-8 text (code points; gpuctl prints no wide characters).
std::size_t display_width(const std::string& text);
// ANSI color around text for a style; plain text when `color` is false.
std::string styled(const std::string& text, Style style, bool color);

}  // namespace gpuctl::output
