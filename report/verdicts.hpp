// The triangle's verdicts: a corner is held, not held or undecided from the values of several
// seeds (or a fitted exponent), so that no single seed can flip it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/data.hpp"

namespace tri::report {

// The 0.975 quantile of Student's t with df degrees of freedom (df >= 1): the half-width factor
// of a two-sided 95% interval.
double t_quantile_975(int df);

using Interval = std::pair<double, double>;
// mean ± t_{0.975, n-1} s / sqrt(n) over the values; none for fewer than two.
std::optional<Interval> mean_interval_95(const std::vector<double>& values);
// "[0.953, 0.961]" in `format`, or "-" for none.
std::string interval_text(const std::optional<Interval>& i, const char* format);
// exponent ± t_{0.975, points-2} se(slope); none for a fit through two points.
std::optional<Interval> exponent_interval_95(const PowerFit& fit);

enum class Outcome { yes, no, undecided, did_not_learn, structural_no, not_measured };
// "yes", "no", "undecided", "did not learn", "no (structural)", "not measured" (no runs of the probe).
std::string outcome_word(Outcome o);

// Which way a corner is held: an accuracy at least its threshold, an exponent at most.
enum class HeldWhen { at_least, at_most };

// A seed's value at a corner. A seed that did not learn the task is listed but not counted.
struct SeedValue {
  std::optional<int64_t> seed;  // the run's config "seed", when it has one
  double value = 0;
  bool counted = true;
};

// A decided verdict needs at least kMinSeeds seeds run, and of them at least kMinLearnedSeeds
// that learned the task (a seed that did not learn is listed, not counted: it says nothing of
// the corner).
constexpr int kMinSeeds = 3;
constexpr int kMinLearnedSeeds = 2;

struct Verdict {
  Outcome outcome = Outcome::undecided;
  double threshold = 0;
  HeldWhen held_when = HeldWhen::at_least;
  std::vector<SeedValue> values;    // every seed, in seed order (the linear cost: none)
  std::optional<double> value;      // the mean over counted seeds; the linear cost: the exponent
  std::optional<Interval> interval;  // 95%
  int n = 0;                        // counted seeds; the linear cost: points of the fit
  std::string note;                 // why, when the word alone does not say: "n < 3", the reach, ...

  bool held() const { return outcome == Outcome::yes; }
  std::vector<int64_t> left_out() const;  // the seeds not counted
  // The word with its note: "undecided (n < 3)", "no (structural: reach 2 x (8 - 1) = 14 < 250)".
  std::string text() const;
  // "0.990, 1.000, (0.120)": each seed's value in seed order, those not counted in parentheses; "-" for none.
  std::string values_text() const;
};

// The seeded corners' rule: `not measured` without values; `undecided (n < 3)` with fewer than
// kMinSeeds; `did not learn` with fewer than kMinLearnedSeeds counted (learned) seeds; else
// decided over the counted seeds when every one lies on the same side of the threshold, or when
// the 95% t interval of their mean lies wholly on one side, and undecided otherwise. Values are
// sorted by seed; the note says how many did not learn ("1 of 3 seeds did not learn, left out").
Verdict seeded_verdict(std::vector<SeedValue> values, double threshold, HeldWhen held_when);

// The linear-cost rule: decided when the 95% interval of the fitted exponent lies wholly on one
// side of the threshold; a fit through two points has no interval and is read at its value.
Verdict exponent_verdict(const PowerFit& fit, double threshold);

}  // namespace tri::report
