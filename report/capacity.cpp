#include "report/capacity.hpp"

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <set>

#include "framework/config/options.hpp"

namespace tri::report {

namespace {

std::optional<int64_t> seed_of(const RunRow& r) {
  const Json v = r.value("seed");
  return v.is_number_integer() ? std::optional<int64_t>(v.get<int64_t>()) : std::nullopt;
}

// Whether the run's validation accuracy at K grew by kRisingBy or more over its last fifth of
// steps (metrics.jsonl's valid rows: a mix's acc@K=k, else acc).
bool rising(const Sweep& sweep, const RunRow& run, int64_t k) {
  const std::string path = sweep.dir + "/runs/" + run.id + "/metrics.jsonl";
  if (!std::filesystem::is_regular_file(path)) return false;
  const bool mixed = run.value("num-kv-pairs").is_array() && run.value("num-kv-pairs").size() > 1;
  const std::string key = mixed ? "acc@K=" + std::to_string(k) : "acc";
  std::vector<std::pair<double, double>> curve;
  read_json_lines(path, [&](const Json& j, int) {
    if (j.is_object() && j.value("split", "") == "valid" && j.contains(key) && j[key].is_number())
      curve.emplace_back(j["step"].get<double>(), j[key].get<double>());
  });
  if (curve.size() < 2) return false;
  const double last_step = curve.back().first, from = 0.8 * last_step;
  auto start = std::find_if(curve.begin(), curve.end(), [&](const auto& p) { return p.first >= from; });
  if (start == curve.end() || start == curve.end() - 1) start = curve.end() - 2;
  return curve.back().second - start->second >= kRisingBy;
}

void read_seed(const Sweep& sweep, SeedCapacity& s, const std::vector<int64_t>& ks) {
  s.learned = false;
  for (const auto& [k, acc] : s.acc) {
    s.learned |= acc >= 1.0 / double(k) + kPlateauMargin;
    if (acc >= kCapacityAcc) s.capacity = std::max(s.capacity, k);
  }
  for (int64_t k : ks)
    if (k > s.capacity && s.acc.count(k)) {
      if (rising(sweep, *s.runs.at(k), k)) s.rising_at = k;
      break;
    }
}

// The curve's verdict at each K over its learned seeds, and its capacity.
void read_curve(CapacityCurve& c) {
  int learned = 0;
  for (const SeedCapacity& s : c.seeds) learned += s.learned;
  for (int64_t k : c.ks) {
    std::vector<SeedValue> values;
    for (const SeedCapacity& s : c.seeds)
      if (auto it = s.acc.find(k); it != s.acc.end()) values.push_back({s.seed, it->second, s.learned});
    c.at[k] = seeded_verdict(values, kCapacityAcc, HeldWhen::at_least);
  }
  const std::string plateau = std::to_string(int(c.seeds.size()) - learned) + " of " +
                              std::to_string(c.seeds.size()) + " seeds on the 1/K plateau at every K";
  if (int(c.seeds.size()) < kMinSeeds || learned < kMinLearnedSeeds) {
    c.outcome = int(c.seeds.size()) < kMinSeeds ? Outcome::undecided : Outcome::did_not_learn;
    c.note = c.outcome == Outcome::undecided ? "n < " + std::to_string(kMinSeeds) : plateau;
    return;
  }
  c.outcome = Outcome::yes;
  if (learned < int(c.seeds.size())) c.note = plateau + ", left out";
  for (int64_t k : c.ks)
    if (c.at[k].outcome == Outcome::yes) c.capacity = k;
  for (int64_t k : c.ks)
    if (k > c.capacity && c.at[k].outcome == Outcome::undecided) {
      c.note += (c.note.empty() ? "" : "; ") + std::string("undecided at K=") + std::to_string(k) + ": seeds disagree";
      break;
    }
}

}  // namespace

std::string SeedCapacity::text() const {
  if (!learned) return "(did not learn)";
  return std::to_string(capacity) + (rising_at ? " (rising at " + std::to_string(*rising_at) + ")" : "");
}

std::optional<double> CapacityCurve::pairs_per_kb() const {
  if (outcome != Outcome::yes || !state_bytes || *state_bytes <= 0) return std::nullopt;
  return double(capacity) / (*state_bytes / 1000.0);
}

std::string CapacityCurve::short_text() const {
  if (outcome != Outcome::yes) return outcome_word(outcome);
  std::string s = std::to_string(capacity);
  if (holds_every_k()) s += " (every K tested)";
  else if (capacity == 0 && !ks.empty()) s += " (below K=" + std::to_string(ks.front()) + ")";
  return s;
}

std::string CapacityCurve::text() const {
  if (outcome != Outcome::yes) return outcome_word(outcome) + (note.empty() ? "" : " (" + note + ")");
  return short_text() + (note.empty() ? "" : "; " + note);
}

std::vector<CapacityCurve> capacity_curves(const Sweep& sweep, const std::vector<Group>& groups) {
  std::vector<CapacityCurve> curves;
  for (const Group& g : groups) {
    if (g.task != "mqar") continue;
    const LrCell& best = g.best_cell();
    // The variant (its window when it has one) and its size keys; K is the curve's axis.
    const int64_t window = window_of(*best.runs.front());
    std::string label = variant_label(g.model, window);
    const std::string keys = g.label({"num-kv-pairs", "window"});
    if (keys.size() > g.model.size()) label += keys.substr(g.model.size());
    auto c = std::find_if(curves.begin(), curves.end(), [&](const CapacityCurve& x) { return x.label == label; });
    if (c == curves.end())
      c = curves.insert(curves.end(), CapacityCurve{g.model, window, label, {}, {}, {}, {}, {}, 0, ""});
    for (const RunRow* r : best.runs) {
      const std::optional<int64_t> seed = seed_of(*r);
      auto s = std::find_if(c->seeds.begin(), c->seeds.end(), [&](const SeedCapacity& x) { return x.seed == seed; });
      if (s == c->seeds.end()) s = c->seeds.insert(c->seeds.end(), SeedCapacity{seed, {}, {}, true, 0, {}});
      for (const auto& [k, acc] : r->acc_at_pairs) s->acc[k] = acc, s->runs[k] = r;
      if (r->state_bytes) c->state_bytes = r->state_bytes;
    }
  }
  for (CapacityCurve& c : curves) {
    std::set<int64_t> ks;
    for (const SeedCapacity& s : c.seeds)
      for (const auto& [k, acc] : s.acc) ks.insert(k);
    c.ks.assign(ks.begin(), ks.end());
    std::stable_sort(c.seeds.begin(), c.seeds.end(), [](const auto& a, const auto& b) { return a.seed < b.seed; });
    for (SeedCapacity& s : c.seeds) read_seed(sweep, s, c.ks);
    read_curve(c);
  }
  std::erase_if(curves, [](const CapacityCurve& c) { return c.ks.empty(); });
  return curves;
}

const CapacityCurve* curve_of(const std::vector<CapacityCurve>& curves, const RunRow* run) {
  for (const CapacityCurve& c : curves)
    for (const SeedCapacity& s : c.seeds)
      for (const auto& [k, r] : s.runs)
        if (r == run) return &c;
  return nullptr;
}

std::vector<Table> capacity_tables(const Sweep& sweep, const std::vector<CapacityCurve>& curves) {
  if (curves.empty()) return {};
  Table summary{"MQAR capacity",
                {"variant", "K measured", "state bytes", "capacity per seed", "capacity (pairs)", "pairs per kB"}, {}, ""};
  Table per_k{"MQAR accuracy per number of pairs", {"variant", "K", "acc per seed", "n", "mean", "95% interval", "held"}, {}, ""};
  for (const CapacityCurve& c : curves) {
    std::vector<std::string> ks, seeds;
    for (int64_t k : c.ks) ks.push_back(std::to_string(k));
    for (const SeedCapacity& s : c.seeds) seeds.push_back(s.text());
    summary.rows.push_back({c.label, joined(ks, " "), format_number(c.state_bytes, "%.0f"), joined(seeds, ", "), c.text(),
                            format_number(c.pairs_per_kb(), "%.2f")});
    for (int64_t k : c.ks) {
      const Verdict& v = c.at.at(k);
      per_k.rows.push_back({c.label, std::to_string(k), v.values_text(), std::to_string(v.n),
                            format_number(v.value, "%.3f"), interval_text(v.interval, "%.3f"), v.text()});
    }
  }
  char rule[512];
  std::snprintf(rule, sizeof rule,
                "A seed holds K pairs when its test accuracy at K is >= %.2f; its capacity is the largest such K. A seed "
                "below 1/K + %.2f at every K stayed on the 1/K plateau: it did not learn the task (in parentheses), which "
                "says nothing of its capacity, and is not counted. ",
                kCapacityAcc, kPlateauMargin);
  summary.caption = std::string(rule) +
                    "The variant's capacity is the largest K whose verdict over the counted seeds is yes (every seed at "
                    "or above the threshold, or the 95% t interval of their mean); `every K tested` is a lower bound. "
                    "`rising at K`: the seed's validation accuracy at the first K it does not hold grew by " +
                    format_number(kRisingBy, "%g") +
                    " or more over its last fifth of steps, so more steps may raise its capacity. State bytes: per "
                    "sequence at the runs' seq-len (attention: its KV cache there, which grows with T); pairs per kB: "
                    "the capacity over them (Based's recall-state axis). Each K at the best learning rate of its runs. " +
                    made_by(sweep);
  per_k.caption = std::string(rule) + "Mean and 95% t interval over the counted seeds; `held` is the verdict at " +
                  format_number(kCapacityAcc, "%g") + ". " + made_by(sweep);
  return {summary, per_k};
}

std::string book_grade(const std::string& model, int64_t window) {
  if (window > 0) return "";
  if (model == "attention") return "strong";
  if (model == "mamba") return "medium";
  if (model == "linear") return "weak";
  return "";
}

}  // namespace tri::report
