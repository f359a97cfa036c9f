#include "report/verdicts.hpp"

#include <algorithm>
#include <cmath>

#include "framework/config/options.hpp"

namespace tri::report {

namespace {

// t_{0.975, df} for df = 1..30 (to 6 decimals); beyond, the Cornish-Fisher expansion around
// the normal quantile is exact to that precision.
constexpr double kT975[30] = {12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004,
                              2.262157,  2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905,
                              2.109816,  2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
                              2.059539,  2.055529, 2.051831, 2.048407, 2.045230, 2.042272};
constexpr double kZ975 = 1.959963984540054;

bool held_at(double v, double threshold, HeldWhen held_when) {
  return held_when == HeldWhen::at_least ? v >= threshold : v <= threshold;
}

// yes when all of [lo, hi] holds the corner, no when none of it does, else undecided.
Outcome side_of(double lo, double hi, double threshold, HeldWhen held_when) {
  const bool lo_held = held_at(lo, threshold, held_when), hi_held = held_at(hi, threshold, held_when);
  if (lo_held && hi_held) return Outcome::yes;
  if (!lo_held && !hi_held) return Outcome::no;
  return Outcome::undecided;
}

}  // namespace

double t_quantile_975(int df) {
  if (df < 1) return NAN;
  if (df <= 30) return kT975[df - 1];
  const double z = kZ975, v = df, z2 = z * z;
  const double g1 = (z2 + 1) * z / 4, g2 = ((5 * z2 + 16) * z2 + 3) * z / 96,
               g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
               g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

std::optional<Interval> mean_interval_95(const std::vector<double>& values) {
  if (values.size() < 2) return std::nullopt;
  const Stat s = stat_of(values);
  const double half = t_quantile_975(s.n - 1) * s.std / std::sqrt(double(s.n));
  return Interval{s.mean - half, s.mean + half};
}

std::string interval_text(const std::optional<Interval>& i, const char* format) {
  if (!i) return "-";
  std::string s = "[";
  s.append(number_text(i->first, format)).append(", ").append(number_text(i->second, format)).append("]");
  return s;
}

std::optional<Interval> exponent_interval_95(const PowerFit& fit) {
  if (!fit.ok || fit.dof() < 1) return std::nullopt;
  const double half = t_quantile_975(fit.dof()) * fit.exponent_se;
  return Interval{fit.exponent - half, fit.exponent + half};
}

std::string outcome_word(Outcome o) {
  switch (o) {
    case Outcome::yes: return "yes";
    case Outcome::no: return "no";
    case Outcome::undecided: return "undecided";
    case Outcome::did_not_learn: return "did not learn";
    case Outcome::structural_no: return "no (structural)";
    case Outcome::not_measured: return "not measured";
  }
  return "undecided";
}

std::vector<int64_t> Verdict::left_out() const {
  std::vector<int64_t> seeds;
  for (const SeedValue& v : values)
    if (!v.counted && v.seed) seeds.push_back(*v.seed);
  return seeds;
}

std::string Verdict::text() const {
  if (outcome == Outcome::structural_no) return "no (structural: " + note + ")";
  return outcome_word(outcome) + (note.empty() ? "" : " (" + note + ")");
}

std::string Verdict::values_text() const {
  std::string s;
  for (const SeedValue& x : values) {
    const std::string n = number_text(x.value, "%.3f");
    s += (s.empty() ? "" : ", ") + (x.counted ? n : "(" + n + ")");
  }
  return s.empty() ? "-" : s;
}

Verdict seeded_verdict(std::vector<SeedValue> values, double threshold, HeldWhen held_when) {
  std::stable_sort(values.begin(), values.end(), [](const SeedValue& a, const SeedValue& b) { return a.seed < b.seed; });
  Verdict v;
  v.threshold = threshold;
  v.held_when = held_when;
  v.values = std::move(values);
  if (v.values.empty()) {  // no runs of the probe: nothing was measured, so nothing disagrees
    v.outcome = Outcome::not_measured;
    return v;
  }
  std::vector<double> counted;
  for (const SeedValue& s : v.values)
    if (s.counted) counted.push_back(s.value);
  v.n = int(counted.size());
  if (!counted.empty()) v.value = stat_of(counted).mean;
  v.interval = mean_interval_95(counted);
  if (int(v.values.size()) < kMinSeeds) {
    v.note = "n < " + std::to_string(kMinSeeds);
    return v;
  }
  const std::string left = std::to_string(v.values.size() - counted.size()) + " of " +
                           std::to_string(v.values.size()) + " seeds did not learn";
  if (v.n < kMinLearnedSeeds) {
    v.outcome = Outcome::did_not_learn;
    v.note = left;
    return v;
  }
  if (v.n < int(v.values.size())) v.note = left + ", left out";
  const auto [lowest, highest] = std::minmax_element(counted.begin(), counted.end());
  v.outcome = side_of(*lowest, *highest, threshold, held_when);  // every seed on one side
  if (v.outcome == Outcome::undecided) v.outcome = side_of(v.interval->first, v.interval->second, threshold, held_when);
  return v;
}

Verdict exponent_verdict(const PowerFit& fit, double threshold) {
  Verdict v;
  v.threshold = threshold;
  v.held_when = HeldWhen::at_most;
  if (!fit.ok) {
    v.note = "no fit";
    return v;
  }
  v.value = fit.exponent;
  v.n = fit.points;
  v.interval = exponent_interval_95(fit);
  if (v.interval) {
    v.outcome = side_of(v.interval->first, v.interval->second, threshold, HeldWhen::at_most);
  } else {
    v.outcome = held_at(fit.exponent, threshold, HeldWhen::at_most) ? Outcome::yes : Outcome::no;
    v.note = "2 points: no interval";
  }
  return v;
}

}  // namespace tri::report
