#include "gpuctl/output/table.hpp"

#include <algorithm>

#include "gpuctl/output/printable.hpp"

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
  // Every cell is escaped here, once: the table is where server text meets the terminal.
  std::size_t columns = headers_.size();
  auto safe_row = [](const std::vector<Cell>& cells) {
    std::vector<Cell> safe;
    safe.reserve(cells.size());
    for (const auto& c : cells) safe.emplace_back(printable(c.text), c.style);
    return safe;
  };
  std::vector<std::vector<Cell>> rows;
  rows.reserve(rows_.size() + 1);
  if (options.headers) rows.push_back(safe_row(std::vector<Cell>(headers_.begin(), headers_.end())));
  for (const auto& row : rows_) rows.push_back(safe_row(row));
  std::vector<std::size_t> widths(columns, 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < columns && i < row.size(); ++i)
      widths[i] = std::max(widths[i], display_width(row[i].text));
  }
  std::string out;
  for (const auto& cells : rows) {
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
  }
  return out;
}

}  // namespace gpuctl::output
