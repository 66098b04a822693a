// table.h: aligned plain-text tables for gswapctl's human output.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace gswap::daemon {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string render(const std::string& indent = "") const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].size());
      }
    std::string out;
    for (const auto& r : rows_) {
      std::string line = indent;
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace gswap::daemon
