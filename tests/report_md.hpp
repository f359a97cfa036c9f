// A report.md read back: its tables as cells, and the text the trilemma table gives numbers.
#pragma once
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace trilemma_test {

// The cells of a Markdown table under "## title": the header first.
inline std::vector<std::vector<std::string>> markdown_table(const std::string& md, const std::string& title) {
  std::vector<std::vector<std::string>> rows;
  size_t at = md.find("## " + title + "\n\n");
  if (at == std::string::npos) return rows;
  at = md.find('\n', at) + 2;
  while (at < md.size() && md[at] == '|') {
    const size_t end = md.find('\n', at);
    const std::string line = md.substr(at, end - at);
    std::vector<std::string> cells;
    for (size_t p = 1, next; (next = line.find('|', p)) != std::string::npos; p = next + 1) {
      std::string c = line.substr(p, next - p);
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
      cells.push_back(c);
    }
    if (cells.empty() || cells[0].find("---") == std::string::npos) rows.push_back(cells);
    at = end + 1;
  }
  return rows;
}

// The row whose first cells are `key`, as column name -> cell; empty when there is none.
inline std::map<std::string, std::string> row_of(const std::vector<std::vector<std::string>>& t,
                                                 const std::vector<std::string>& key) {
  std::map<std::string, std::string> out;
  for (size_t r = 1; r < t.size(); ++r)
    if (t[r].size() >= key.size() && std::equal(key.begin(), key.end(), t[r].begin())) {
      for (size_t c = 0; c < t[0].size() && c < t[r].size(); ++c) out[t[0][c]] = t[r][c];
      return out;
    }
  return out;
}

inline std::string fixed(double v, const char* format = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The trilemma table's per-seed cell: "0.990, (0.120), 1.000", seeds not counted in parentheses.
inline std::string seed_values_text(const std::vector<double>& values, const std::vector<bool>& counted) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string v = fixed(values[i], "%.3f");
    s += (i ? ", " : "") + (counted[i] ? v : "(" + v + ")");
  }
  return s.empty() ? "-" : s;
}

// "[0.912, 1.004]"
inline std::string interval_text(double lo, double hi, const char* format = "%.3f") {
  std::string s = "[";  // built up: "[" + a temporary trips GCC 12's -Wrestrict
  s += fixed(lo, format) + ", " + fixed(hi, format);
  return s += "]";
}

}  // namespace trilemma_test
