// llm-admin's text output: durations as 1h02m03s, percentages, aligned "key: value" lines and
// padded tables. Header-only plain C++ (no proto), so the unit tests check it directly.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace llm::admin {

// 3723.4 -> "1h02m03s", 65 -> "1m05s", 7.9 -> "7s"; negative -> "0s".
inline std::string Duration(double seconds) {
  const long long s = seconds > 0 ? static_cast<long long>(seconds) : 0;
  char buf[48];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", s);
  }
  return buf;
}

// 100 * part / whole with one decimal and a '%' ("0.0%" when whole is 0).
inline std::string Percent(double part, double whole) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

// "key:  value" lines, the values aligned two spaces after the longest key.
inline std::string FormatFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& f : fields) width = std::max(width, f.first.size() + 1);
  std::string out;
  for (const auto& [key, value] : fields) {
    out += key + ":" + std::string(width - key.size() - 1 + 2, ' ') + value + "\n";
  }
  return out;
}

// Rows of cells, each column padded to its widest cell plus two spaces (none after the last).
inline std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += "\n";
  }
  return out;
}

}  // namespace llm::admin
