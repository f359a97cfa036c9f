// MQAR's matching corner as a capacity (Zoology's and Based's reading of associative recall):
// per variant and size, the test accuracy at each number of pairs K, each seed's capacity (the
// largest K it recalls at kCapacityAcc or better) and the variant's (the largest K whose verdict
// over the seeds is yes), with the state bytes those pairs sit in.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/data.hpp"
#include "report/tables.hpp"
#include "report/verdicts.hpp"

namespace tri::report {

// A seed holds K pairs when its test accuracy at K is at least this.
constexpr double kCapacityAcc = 0.9;
// A seed is on the 1/K plateau at K (it answers with one of the row's K values, not the right
// one) when its accuracy there is below 1/K + this; on it at every K, it did not learn the task.
constexpr double kPlateauMargin = 0.1;
// A seed was still rising at K when its validation accuracy there grew by at least this over the
// last fifth of its steps: its capacity is then a reading of the budget as much as of the state.
constexpr double kRisingBy = 0.05;

struct SeedCapacity {
  std::optional<int64_t> seed;
  std::map<int64_t, double> acc;            // test accuracy by K
  std::map<int64_t, const RunRow*> runs;    // the run each K was measured in (one mix run, or one per K)
  bool learned = true;                      // above the plateau at some K
  int64_t capacity = 0;                     // the largest K held; 0: none
  std::optional<int64_t> rising_at;         // the smallest K not held, when still rising there
  std::string text() const;                 // "16", "0", "(did not learn)", "8 (rising at 10)"
};

struct CapacityCurve {
  std::string model;  // the variant's model (RunRow::model)
  int64_t window = 0;
  std::string label;  // the variant and its size keys, e.g. "mamba d-model=32"
  std::vector<int64_t> ks;              // every K measured, increasing
  std::vector<SeedCapacity> seeds;      // in seed order
  std::map<int64_t, Verdict> at;        // per K: every learned seed's accuracy against kCapacityAcc
  std::optional<double> state_bytes;    // per sequence at the runs' seq-len (attention: its KV cache)
  Outcome outcome = Outcome::undecided;  // yes (a capacity is read), did_not_learn, undecided (n < 3)
  int64_t capacity = 0;                 // the largest K whose verdict is yes (0: none)
  std::string note;                     // "undecided at K=16", ...

  bool holds_every_k() const { return outcome == Outcome::yes && !ks.empty() && capacity == ks.back(); }
  // Pairs held per kB (1000 bytes) of state.
  std::optional<double> pairs_per_kb() const;
  // "16 (every K tested)", "8", "0 (below K=2)", "did not learn (2 of 3 seeds on the plateau)".
  std::string text() const;
  // The same without the notes: "16 (every K tested)", "8", "0 (below K=2)", "did not learn".
  std::string short_text() const;
};

// One curve per mqar variant and size: the groups that differ only in num-kv-pairs are joined,
// each at its best learning rate (validation).
std::vector<CapacityCurve> capacity_curves(const Sweep& sweep, const std::vector<Group>& groups);

// The curve holding `run` (the triangle's best cell), or null.
const CapacityCurve* curve_of(const std::vector<CapacityCurve>& curves, const RunRow* run);

// Two tables when the sweep has MQAR runs: each curve's capacity (per seed and over the seeds,
// in pairs and pairs per kB of state), and its accuracy at each K (per seed, mean [95%], verdict).
std::vector<Table> capacity_tables(const Sweep& sweep, const std::vector<CapacityCurve>& curves);

// The book's grade of a family's matching (section 9.6's table): strong, medium or weak; "" for
// variants the table does not name (windows, hybrids, other feature maps).
std::string book_grade(const std::string& model, int64_t window);

}  // namespace tri::report
