// What a run or a sweep leaves on disk, compared without the columns that are timings (no two
// runs share them; everything else must match bit for bit).
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_binary.hpp"

namespace trilemma_test {

inline std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A run's metrics.csv without its timing columns (ms_per_step, tokens_per_s, elapsed_s).
inline std::string metrics_without_timing(const fs::path& csv) {
  std::string out;
  for (const std::string& line : text_lines(read_text(csv))) {
    int commas = 0;
    size_t cut = line.size();
    for (size_t i = 0; i < line.size(); ++i)
      if (line[i] == ',' && ++commas == 7) cut = i;
    out += line.substr(0, cut) + "\n";
  }
  return out;
}

// A sweep's results.csv without its timing columns (wall_s, tokens_per_s, ms_per_step) and the
// peak tensor memory: like ms_per_step, a measurement of the run's last invocation, which after a
// resume covers only the steps that invocation took.
inline std::string csv_without_timing(const fs::path& csv) {
  const std::vector<std::string> rows = text_lines(read_text(csv));
  REQUIRE(!rows.empty());
  auto cells = [](const std::string& row) {
    std::vector<std::string> c(1);
    for (char ch : row) {
      if (ch == ',') c.emplace_back();
      else c.back().push_back(ch);
    }
    return c;
  };
  const std::vector<std::string> head = cells(rows[0]);
  std::string out;
  for (const std::string& row : rows) {
    const std::vector<std::string> c = cells(row);
    REQUIRE(c.size() == head.size());
    for (size_t i = 0; i < c.size(); ++i)
      if (head[i] != "wall_s" && head[i] != "tokens_per_s" && head[i] != "ms_per_step" && head[i] != "peak_memory_bytes")
        out += c[i] + ",";
    out += "\n";
  }
  return out;
}

// No file of an atomic write's temporary name (<name>.tmp.<pid>) is left in `dir`.
inline bool no_temporary_files(const fs::path& dir) {
  if (!fs::exists(dir)) return true;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  return true;
}

// || a - b || / || a - start || over every parameter of the checkpoints: the difference in
// units of the distance training moved the weights.
inline double relative_difference(const fs::path& a, const fs::path& b, const fs::path& start) {
  const std::string script =
      "import h5py, numpy as np, sys\n"
      "def load(f):\n"
      "    out = {}\n"
      "    with h5py.File(f) as h:\n"
      "        h['model'].visititems(lambda n, o: out.__setitem__(n, o[()].astype(np.float64)) if isinstance(o, h5py.Dataset) else None)\n"
      "    return out\n"
      "a, b, s = (load(f) for f in sys.argv[1:4])\n"
      "print(np.sqrt(sum(((a[k] - b[k]) ** 2).sum() for k in a) / sum(((a[k] - s[k]) ** 2).sum() for k in a)))\n";
  write_text(scratch("reldiff.py"), script);
  const std::string out = capture("/usr/bin/python3 '" + scratch("reldiff.py").string() + "' '" + a.string() +
                                  "' '" + b.string() + "' '" + start.string() + "'");
  return std::stod(out);
}

// The value of `key` in the metrics row of `split` at `step` (metrics.jsonl).
inline double metric(const fs::path& dir, int64_t step, const std::string& split, const std::string& key) {
  return std::stod(capture("/usr/bin/python3 -c 'import json, sys\nfor l in open(sys.argv[1]):\n    r = json.loads(l)\n"
                           "    if r[\"step\"] == " + std::to_string(step) + " and r[\"split\"] == \"" + split +
                           "\": print(r[\"" + key + "\"])' '" + (dir / "metrics.jsonl").string() + "'"));
}

}  // namespace trilemma_test
