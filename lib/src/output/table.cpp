#include "gpuctl/output/table.hpp"

#include <algorithm>

namespace gpuctl::output {

std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;  // count lead bytes only
  }
  return width;
}

std::string styled(const std::string& text, Style style, bool color) {
  if (!color || style == Style::plain || text.empty()) return text;
  const char* code = "";
  switch (style) {
    case Style::good: code = "\033[32m"; break;
    case Style::warn: code = "\033[33m"; break;
    case Style::bad: code = "\033[31m"; break;
    case Style::dim: code = "\033[2m"; break;
    case Style::plain: break;
  }
  return std::string(code) + text + "\033[0m";
}

std::string Table::render(const RenderOptions& options) const {
  std::size_t columns = headers_.size();
  std::vector<std::size_t> widths(columns, 0);
  if (options.headers) {
    for (std::size_t i = 0; i < columns; ++i) widths[i] = display_width(headers_[i]);
  }
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < columns && i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i].text));
  }
  std::string out;
  auto emit = [&](const std::vector<Cell>& cells) {
    std::string line;
    for (std::size_t i = 0; i < columns; ++i) {
      const Cell empty;
      const Cell& cell = i < cells.size() ? cells[i] : empty;
      line += styled(cell.text, cell.style, options.color);
      if (i + 1 < columns) line.append(widths[i] - display_width(cell.text) + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  if (options.headers) {
    std::vector<Cell> header_cells(headers_.begin(), headers_.end());
    emit(header_cells);
  }
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace gpuctl::output
