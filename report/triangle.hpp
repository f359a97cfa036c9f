// The trilemma: for each architecture variant (a model family, and attention's window when it
// has one), a verdict on each corner of the triangle (global receptive field, linear cost,
// precise matching) from the seeds of its best cell, as a table and as DIR/triangle.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/capacity.hpp"
#include "report/data.hpp"
#include "report/tables.hpp"
#include "report/verdicts.hpp"

namespace tri::report {

// The trilemma's thresholds: a corner is held at these values.
constexpr double kReceptiveFieldAcc = 0.9;  // needle accuracy at the farthest distance
constexpr double kLinearCostExponent = 1.3;  // time per training step grows at most as T^1.3
constexpr double kPreciseMatchingAcc = kCapacityAcc;  // MQAR token accuracy at the largest K measured
// A seed learned the needle task when it recalls the nearest needle this well; one that did not
// says nothing about how far it reaches.
constexpr double kLearnedAcc = 0.9;
constexpr double kStateSeqLen = 4096;  // the T at which recurrent state bytes are compared

struct TriangleRow {
  std::string model;
  int64_t window = 0;
  std::optional<int64_t> needle_distance, nearest_distance;  // the farthest and the shortest
  std::optional<int64_t> n_layers;                           // of the needle's best cell
  bool hybrid = false;  // layers of several families: a window bounds only the attention layers' reach
  Verdict receptive_field, linear_cost, precise_matching;
  std::optional<int64_t> matching_k;        // the K the matching corner is read at: the largest measured
  std::optional<CapacityCurve> capacity;    // MQAR's accuracy against K, when its best cell has one
  std::string book_grade;                   // the book's matching grade (strong, medium, weak), or ""
  Verdict needle_distractors;  // the needle with values among the fillers: matching at a distance
  std::optional<double> memory_exponent, state_bytes;
  std::vector<double> layer_state_bytes;  // per layer at kStateSeqLen, where measured there
  std::optional<double> decode_ms;        // per generated token with kStateSeqLen tokens of context
  std::string time_fit_range;  // "T = 512..2048 (3 points)"
  std::string state_note;      // how state_bytes was found ("measured (decode)", "extrapolated ...")

  std::string label() const { return variant_label(model, window); }
  std::vector<std::string> corners_held() const;  // names of the corners whose verdict is yes
};

// Whether the folder has what the triangle needs: needle runs, mqar runs and scaling.jsonl.
bool has_triangle(const Sweep& sweep);
std::vector<TriangleRow> triangle_rows(const Sweep& sweep, const std::vector<Group>& groups,
                                       const std::vector<ScalingSeries>& series);
std::vector<Table> triangle_table(const Sweep& sweep, const std::vector<TriangleRow>& rows);
// The book's grades of matching against the measured capacities: the families it grades, each
// with its capacity, and whether their order agrees (every pair the book tells apart is told
// apart the same way), does not separate some (a tie) or disagrees.
struct MatchingOrder {
  std::vector<const TriangleRow*> graded;  // by measured capacity, largest first
  std::string agreement;                   // "agrees", "agrees in part", "disagrees"; "" with fewer than 2
  std::string text;                        // the sentence report.md prints
};
MatchingOrder matching_order(const std::vector<TriangleRow>& rows);

// DIR/triangle.json's content (docs/USAGE.md, Reports).
Json triangle_json(const Sweep& sweep, const std::vector<TriangleRow>& rows);

}  // namespace tri::report
