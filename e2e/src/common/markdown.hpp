// Markdown table pieces of the e2e reports: escaped cells and whole rows.
#pragma once

#include <string>
#include <vector>

namespace dsv4::eval {

// A table cell: '|' escaped, newlines as <br>.
inline std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += "<br>";
    else
      out += c;
  }
  return out;
}

// "| a | b |\n" with every cell escaped.
inline std::string md_row(const std::vector<std::string>& cells) {
  std::string o = "|";
  for (const auto& c : cells) o += " " + md_cell(c) + " |";
  return o + "\n";
}

// The rule under a header of `n` columns; columns from `right_from` on are right-aligned.
inline std::string md_rule(size_t n, size_t right_from = size_t(-1)) {
  std::string o = "|";
  for (size_t i = 0; i < n; ++i) o += i >= right_from ? "---:|" : "---|";
  return o + "\n";
}

}  // namespace dsv4::eval
