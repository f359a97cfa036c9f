#include "report/triangle.hpp"

#include <algorithm>
#include <cstdio>

#include "framework/config/options.hpp"

namespace tri::report {

namespace {

std::optional<int64_t> integer_key(const RunRow& r, const char* key) {
  const Json v = r.value(key);
  return v.is_number_integer() ? std::optional<int64_t>(v.get<int64_t>()) : std::nullopt;
}

// The needle with distractors (fillers from the values' range) is a task of its own here.
bool with_distractors(const RunRow& r) {
  const Json v = r.value("distractors");
  return v.is_boolean() && v.get<bool>();
}

// A task as the triangle reads it: "needle" (plain), "needle+distractors" or "mqar".
bool of_task(const RunRow& r, const std::string& task) {
  if (task == "needle+distractors") return r.task == "needle" && with_distractors(r);
  return r.task == task && !with_distractors(r);
}

bool of_variant(const RunRow& r, const std::string& model, int64_t window) {
  return r.model == model && window_of(r) == window;
}

// The completed runs of one task and variant, over every size and learning rate.
std::vector<const RunRow*> variant_runs(const std::vector<Group>& groups, const std::string& task,
                                        const std::string& model, int64_t window) {
  std::vector<const RunRow*> out;
  for (const Group& g : groups)
    for (const LrCell& c : g.cells)
      for (const RunRow* r : c.runs)
        if (of_task(*r, task) && of_variant(*r, model, window)) out.push_back(r);
  return out;
}

// The seeds of the variant's best cell for a task: over sizes and learning rates, the one with
// the highest mean validation accuracy (the report's best-lr rule, over sizes as well); its
// seeds' test accuracies are what the verdicts read.
std::vector<const RunRow*> best_cell_runs(const std::vector<Group>& groups, const std::string& task,
                                          const std::string& model, int64_t window) {
  std::vector<const RunRow*> best;
  double best_mean = 0;
  for (const Group& g : groups) {
    if (g.model != model) continue;
    for (const LrCell& c : g.cells) {
      std::vector<const RunRow*> runs;
      std::vector<double> acc;
      for (const RunRow* r : c.runs)
        if (of_task(*r, task) && of_variant(*r, model, window))
          runs.push_back(r), acc.push_back(r->choice_acc().value_or(0));
      if (runs.empty()) continue;
      const double mean = stat_of(acc).mean;
      if (best.empty() || mean > best_mean) best = runs, best_mean = mean;
    }
  }
  return best;
}

// Needle accuracy at the farthest distance, over the seeds that learned the nearest one; a
// windowed stack that cannot reach the farthest distance does not hold the corner, whatever it
// measured.
// The same rule reads the needle with distractors, where reaching the pair is not enough: the key
// must be matched among values that also fill the row.
Verdict needle_verdict(const TriangleRow& row, const std::vector<const RunRow*>& cell) {
  std::vector<SeedValue> values;
  if (row.needle_distance)
    for (const RunRow* r : cell)
      if (const std::optional<double> far = r->acc_at_distance(*row.needle_distance)) {
        const std::optional<double> near = r->acc_at_distance(row.nearest_distance.value_or(0));
        values.push_back({integer_key(*r, "seed"), *far, !near || *near >= kLearnedAcc});
      }
  Verdict v = seeded_verdict(values, kReceptiveFieldAcc, HeldWhen::at_least);
  if (v.outcome == Outcome::not_measured) return v;  // e.g. a variant without the needle with distractors
  if (const size_t left = v.values.size() - size_t(v.n); left > 0 && v.values.size() >= size_t(kMinSeeds)) {
    const std::string below = std::to_string(left) + " of " + std::to_string(v.values.size()) + " seeds below " +
                              format_number(kLearnedAcc, "%g") + " at d=" + std::to_string(*row.nearest_distance);
    v.note = v.outcome == Outcome::did_not_learn ? below : below + ", left out";
  }
  if (row.window > 0 && !row.hybrid && row.n_layers && row.needle_distance) {
    const int64_t reach = *row.n_layers * (row.window - 1);  // each layer looks W - 1 tokens further back
    if (reach < *row.needle_distance) {
      v.outcome = Outcome::structural_no;
      v.note = "reach " + std::to_string(*row.n_layers) + " x (" + std::to_string(row.window) + " - 1) = " +
               std::to_string(reach) + " < " + std::to_string(*row.needle_distance);
    }
  }
  return v;
}

// MQAR token accuracy at the largest K measured (a mix's largest, or the one K), over the seeds
// that learned the task (not on the 1/K plateau at every K); a variant none of whose needle runs
// recalls even the nearest pair says nothing about recalling many.
Verdict matching_verdict(TriangleRow& row, const std::vector<const RunRow*>& cell,
                         const std::vector<const RunRow*>& needle_runs) {
  for (const RunRow* r : cell)
    if (!r->acc_at_pairs.empty()) row.matching_k = std::max(row.matching_k.value_or(0), r->acc_at_pairs.rbegin()->first);
  std::vector<SeedValue> values;
  for (const RunRow* r : cell) {
    if (!row.matching_k) {  // a row that does not name its K: its token accuracy
      if (r->token_acc) values.push_back({integer_key(*r, "seed"), *r->token_acc, true});
      continue;
    }
    auto acc = r->acc_at_pairs.find(*row.matching_k);
    if (acc == r->acc_at_pairs.end()) continue;
    bool learned = true;
    if (row.capacity)
      for (const SeedCapacity& s : row.capacity->seeds)
        if (s.seed == integer_key(*r, "seed")) learned = s.learned;
    values.push_back({integer_key(*r, "seed"), acc->second, learned});
  }
  Verdict v = seeded_verdict(values, kPreciseMatchingAcc, HeldWhen::at_least);
  if (v.outcome == Outcome::not_measured) return v;  // e.g. a windowed control run on the needle only
  if (const size_t left = v.values.size() - size_t(v.n); left > 0 && v.values.size() >= size_t(kMinSeeds)) {
    const std::string plateau = std::to_string(left) + " of " + std::to_string(v.values.size()) +
                                " seeds on the 1/K plateau at every K";
    v.note = v.outcome == Outcome::did_not_learn ? plateau : plateau + ", left out";
  }
  std::optional<double> nearest_best;
  if (row.nearest_distance)
    for (const RunRow* r : needle_runs)
      if (const std::optional<double> a = r->acc_at_distance(*row.nearest_distance))
        nearest_best = std::max(nearest_best.value_or(*a), *a);
  if (nearest_best && *nearest_best < kLearnedAcc) {
    v.outcome = Outcome::did_not_learn;
    v.note = "no needle run reached " + format_number(kLearnedAcc, "%g") + " at d=" + std::to_string(*row.nearest_distance);
  }
  return v;
}

// State bytes per sequence at kStateSeqLen: measured there, else the line through the two
// largest measured T (decode rows before model rows).
void find_state_bytes(TriangleRow& row, const std::vector<ScalingSeries>& series) {
  const ScalingSeries* source = nullptr;
  for (const char* what : {"decode", "model"})
    for (const ScalingSeries& s : series)
      if (!source && s.model == row.model && s.window == row.window && s.what == what && !s.state_bytes.empty())
        source = &s;
  if (!source) return;
  const auto& pts = source->state_bytes;  // sorted by T
  auto exact = std::find_if(pts.begin(), pts.end(), [](const auto& p) { return p.first == kStateSeqLen; });
  if (auto layers = source->layer_state_bytes.find(kStateSeqLen); layers != source->layer_state_bytes.end())
    row.layer_state_bytes = layers->second;
  if (exact != pts.end()) {
    row.state_bytes = exact->second;
    row.state_note = "measured (" + source->what + ")";
  } else if (pts.size() >= 2) {
    const auto& [t0, y0] = pts[pts.size() - 2];
    const auto& [t1, y1] = pts.back();
    row.state_bytes = t1 == t0 ? y1 : y1 + (y1 - y0) / (t1 - t0) * (kStateSeqLen - t1);
    row.state_note = "extrapolated linearly from T=" + format_number(t0, "%g") + "," + format_number(t1, "%g") + " (" +
                     source->what + ")";
  } else {
    row.state_bytes = pts.back().second;
    row.state_note = "measured at T=" + format_number(pts.back().first, "%g") + " only (" + source->what + ")";
  }
}

TriangleRow variant_row(const std::string& model, int64_t window, const std::vector<Group>& groups,
                        const std::vector<ScalingSeries>& series, const std::vector<CapacityCurve>& curves) {
  TriangleRow row;
  row.model = model;
  row.window = window;
  row.book_grade = book_grade(model, window);
  const std::vector<const RunRow*> needle_runs = variant_runs(groups, "needle", model, window);
  std::vector<const RunRow*> any_needle = needle_runs;
  for (const RunRow* r : variant_runs(groups, "needle+distractors", model, window)) any_needle.push_back(r);
  for (const RunRow* r : any_needle)
    if (!r->acc_at.empty()) {
      row.needle_distance = std::max(row.needle_distance.value_or(0), r->acc_at.rbegin()->first);
      row.nearest_distance = std::min(row.nearest_distance.value_or(r->acc_at.begin()->first), r->acc_at.begin()->first);
    }
  const std::vector<const RunRow*> needle_cell = best_cell_runs(groups, "needle", model, window),
                                   distractor_cell = best_cell_runs(groups, "needle+distractors", model, window);
  for (const auto* cell : {&distractor_cell, &needle_cell})
    if (!cell->empty()) {
      row.n_layers = integer_key(*cell->front(), "n-layers");
      const Json mixers = cell->front()->value("mixers");
      row.hybrid = mixers.is_string() && !mixers.get<std::string>().empty();
    }
  row.receptive_field = needle_verdict(row, needle_cell);
  row.needle_distractors = needle_verdict(row, distractor_cell);
  const std::vector<const RunRow*> mqar_cell = best_cell_runs(groups, "mqar", model, window);
  if (!mqar_cell.empty())
    if (const CapacityCurve* c = curve_of(curves, mqar_cell.front())) row.capacity = *c;
  row.precise_matching = matching_verdict(row, mqar_cell, needle_runs);

  auto time_series = std::find_if(series.begin(), series.end(), [&](const ScalingSeries& s) {
    return s.what == "model" && s.model == model && s.window == window;
  });
  row.linear_cost = exponent_verdict(time_series == series.end() ? PowerFit{} : time_series->time_fit, kLinearCostExponent);
  if (time_series == series.end()) row.linear_cost.outcome = Outcome::not_measured, row.linear_cost.note.clear();
  else {
    if (time_series->time_fit.ok) row.time_fit_range = time_series->time_fit.range_text();
    if (time_series->memory_fit.ok) row.memory_exponent = time_series->memory_fit.exponent;
  }
  find_state_bytes(row, series);
  for (const ScalingSeries& s : series)
    if (s.what == "decode" && s.model == model && s.window == window)
      for (const auto& [t, ms] : s.ms)
        if (t == kStateSeqLen) row.decode_ms = ms;
  return row;
}

// "16, 16, 8 (rising at 10)": each seed's capacity, or "-".
std::string seed_capacities_text(const std::optional<CapacityCurve>& c) {
  std::string s;
  if (c)
    for (const SeedCapacity& x : c->seeds) s += (s.empty() ? "" : ", ") + x.text();
  return s.empty() ? "-" : s;
}

// "4864 + 16384": each layer's state bytes, or "-".
std::string layers_text(const std::vector<double>& bytes) {
  std::string s;
  for (double b : bytes) s += (s.empty() ? "" : " + ") + format_number(b, "%.0f");
  return s.empty() ? "-" : s;
}


Json corner_json(const Verdict& v) {
  Json values = Json::array();
  for (const SeedValue& x : v.values) values.push_back({{"seed", x.seed ? Json(*x.seed) : Json()}, {"value", x.value}});
  return {{"verdict", outcome_word(v.outcome)},
          {"text", v.text()},
          {"threshold", v.threshold},
          {"held_when", v.held_when == HeldWhen::at_least ? ">=" : "<="},
          {"value", v.value ? Json(*v.value) : Json()},
          {"values", values},
          {"interval", v.interval ? Json::array({v.interval->first, v.interval->second}) : Json()},
          {"n", v.n},
          {"left_out", v.left_out()},
          {"note", v.note}};
}

Json optional_json(const std::optional<double>& v) { return v ? Json(*v) : Json(); }
Json optional_json(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(); }

Json capacity_json(const CapacityCurve& c) {
  Json seeds = Json::array(), per_k = Json::array();
  for (const SeedCapacity& s : c.seeds) {
    Json acc = Json::object();
    for (const auto& [k, a] : s.acc) acc[std::to_string(k)] = a;
    seeds.push_back({{"seed", optional_json(s.seed)}, {"learned", s.learned}, {"capacity", s.learned ? Json(s.capacity) : Json()},
                     {"rising_at", optional_json(s.rising_at)}, {"acc", acc}});
  }
  for (const auto& [k, v] : c.at) per_k.push_back({{"k", k}, {"corner", corner_json(v)}});
  return {{"pairs", c.outcome == Outcome::yes ? Json(c.capacity) : Json()},
          {"outcome", outcome_word(c.outcome)},
          {"text", c.text()},
          {"every_k_tested", c.holds_every_k()},
          {"ks", c.ks},
          {"state_bytes", optional_json(c.state_bytes)},
          {"pairs_per_kb", optional_json(c.pairs_per_kb())},
          {"seeds", seeds},
          {"per_k", per_k}};
}

}  // namespace

std::vector<std::string> TriangleRow::corners_held() const {
  std::vector<std::string> held;
  if (receptive_field.held()) held.push_back("receptive field");
  if (linear_cost.held()) held.push_back("linear cost");
  if (precise_matching.held()) held.push_back("matching");
  return held;
}

namespace {

int grade_rank(const std::string& grade) { return grade == "strong" ? 3 : grade == "medium" ? 2 : grade == "weak" ? 1 : 0; }

// A fixed state that runs out at K on every seed: a variant of linear cost that learned the task,
// every learned seed of which is below kCapacityAcc there.
const TriangleRow* state_running_out_at(const std::vector<TriangleRow>& rows, int64_t k) {
  for (const TriangleRow& r : rows) {
    if (!r.linear_cost.held() || !r.capacity || r.capacity->outcome != Outcome::yes) continue;
    bool all_below = true;
    for (const SeedCapacity& s : r.capacity->seeds) {
      auto it = s.acc.find(k);
      if (s.learned) all_below &= it != s.acc.end() && it->second < kCapacityAcc;
    }
    if (all_below) return &r;
  }
  return nullptr;
}

}  // namespace

MatchingOrder matching_order(const std::vector<TriangleRow>& rows) {
  MatchingOrder o;
  for (const TriangleRow& r : rows)
    if (!r.book_grade.empty() && r.capacity) o.graded.push_back(&r);
  if (o.graded.size() < 2) return o;
  const auto capacity = [](const TriangleRow* r) { return r->capacity->outcome == Outcome::yes ? r->capacity->capacity : -1; };
  std::stable_sort(o.graded.begin(), o.graded.end(), [&](const TriangleRow* a, const TriangleRow* b) {
    return capacity(a) > capacity(b) || (capacity(a) == capacity(b) && grade_rank(a->book_grade) > grade_rank(b->book_grade));
  });
  std::vector<std::string> untold, reversed;  // pairs of grades the measurement does not tell apart, or tells the other way
  for (const TriangleRow* a : o.graded)
    for (const TriangleRow* b : o.graded)
      if (grade_rank(a->book_grade) > grade_rank(b->book_grade)) {
        const std::string pair = a->label() + " (" + a->book_grade + ") and " + b->label() + " (" + b->book_grade + ")";
        if (capacity(a) < 0 || capacity(b) < 0 || capacity(a) == capacity(b)) untold.push_back(pair);
        else if (capacity(a) < capacity(b)) reversed.push_back(pair);
      }
  o.agreement = !reversed.empty() ? "disagrees" : !untold.empty() ? "agrees in part" : "agrees";
  std::string measured, book;
  for (size_t i = 0; i < o.graded.size(); ++i) {
    const TriangleRow* r = o.graded[i];
    const std::string sep = i == 0 ? "" : capacity(o.graded[i - 1]) == capacity(r) ? " = " : " > ";
    measured += sep + r->label() + " " + r->capacity->short_text();
    book += std::string(i == 0 ? "" : ", ") + r->label() + " " + r->book_grade;
  }
  o.text = "Matching as a capacity, in pairs: " + measured + ". The book grades " + book + "; the measured order " +
           o.agreement;
  if (!reversed.empty()) o.text += ": the weaker grade holds more pairs for " + joined(reversed, "; ");
  if (!untold.empty()) o.text += "; not told apart: " + joined(untold, "; ");
  o.text += ".";
  for (const TriangleRow* r : o.graded)
    if (r->capacity->holds_every_k()) {
      const int64_t k = r->capacity->ks.back();
      const TriangleRow* out = state_running_out_at(rows, k);
      o.text += " " + r->label() + " holds every K tested; " +
                (out ? "at K=" + std::to_string(k) + " the fixed state of " + out->label() +
                           " runs out on every seed, so the list reaches past a fixed state's capacity."
                     : "no fixed state runs out on every seed at K=" + std::to_string(k) +
                           ", so the list ends before a fixed state's capacity: more pairs (a longer row) would be "
                           "needed to tell it apart.");
      break;
    }
  return o;
}

bool has_triangle(const Sweep& sweep) {
  const auto has_task = [&](const char* task) {
    return std::any_of(sweep.runs.begin(), sweep.runs.end(), [&](const RunRow& r) { return r.task == task; });
  };
  return has_task("needle") && has_task("mqar") && sweep.has_scaling;
}

std::vector<TriangleRow> triangle_rows(const Sweep& sweep, const std::vector<Group>& groups,
                                       const std::vector<ScalingSeries>& series) {
  std::vector<std::pair<std::string, int64_t>> variants;  // in order of first appearance
  auto add = [&](const std::string& model, int64_t window) {
    if (std::find(variants.begin(), variants.end(), std::pair{model, window}) == variants.end())
      variants.emplace_back(model, window);
  };
  for (const RunRow& r : sweep.runs) add(r.model, window_of(r));
  for (const ScalingSeries& s : series) add(s.model, s.window);
  const std::vector<CapacityCurve> curves = capacity_curves(sweep, groups);
  std::vector<TriangleRow> rows;
  for (const auto& [model, window] : variants) rows.push_back(variant_row(model, window, groups, series, curves));
  return rows;
}

std::vector<Table> triangle_table(const Sweep& sweep, const std::vector<TriangleRow>& rows) {
  if (rows.empty()) return {};
  const bool distractors = std::any_of(rows.begin(), rows.end(), [](const TriangleRow& r) {
    return r.needle_distractors.outcome != Outcome::not_measured;
  });
  Table t{"The trilemma",
          {"variant", "needle d", "needle acc per seed", "needle n", "needle 95% interval", "receptive field",
           "time exponent", "time exponent 95% interval", "memory exponent", "linear cost",
           "state bytes at T=" + format_number(kStateSeqLen, "%g"), "state bytes from", "state bytes per layer",
           "decode ms/token at T=" + format_number(kStateSeqLen, "%g"), "MQAR K", "MQAR acc per seed", "MQAR n",
           "MQAR 95% interval", "matching", "capacity per seed", "capacity (pairs)", "pairs per kB",
           "book's matching", "corners held"},
          {},
          ""};
  if (distractors) t.header.insert(t.header.end(), {"needle+distractors acc per seed", "needle+distractors"});
  for (const TriangleRow& r : rows) {
    const std::vector<std::string> held = r.corners_held();
    t.rows.push_back({r.label(), r.needle_distance ? std::to_string(*r.needle_distance) : "-",
                      r.receptive_field.values_text(), std::to_string(r.receptive_field.n),
                      interval_text(r.receptive_field.interval, "%.3f"), r.receptive_field.text(),
                      format_number(r.linear_cost.value, "%.2f"), interval_text(r.linear_cost.interval, "%.2f"),
                      format_number(r.memory_exponent, "%.2f"), r.linear_cost.text(), format_number(r.state_bytes, "%.0f"),
                      r.state_note.empty() ? "-" : r.state_note, layers_text(r.layer_state_bytes),
                      format_number(r.decode_ms, "%.3f"), r.matching_k ? std::to_string(*r.matching_k) : "-",
                      r.precise_matching.values_text(), std::to_string(r.precise_matching.n),
                      interval_text(r.precise_matching.interval, "%.3f"), r.precise_matching.text(),
                      seed_capacities_text(r.capacity), r.capacity ? r.capacity->text() : "-",
                      format_number(r.capacity ? r.capacity->pairs_per_kb() : std::nullopt, "%.2f"),
                      r.book_grade.empty() ? "-" : r.book_grade, held.empty() ? "none" : joined(held, " + ")});
    if (distractors) t.rows.back().insert(t.rows.back().end(), {r.needle_distractors.values_text(), r.needle_distractors.text()});
  }
  char rules[4096];
  std::snprintf(
      rules, sizeof rules,
      "Global receptive field: needle accuracy at the farthest distance d >= %.2f; a seed below %.2f at the "
      "shortest distance did not learn the task and is left out (in parentheses), and with fewer than %d seeds "
      "that learned the corner reads `did not learn`; a stack of windowed attention layers whose reach L x (W - 1) is "
      "below d reads `no (structural)` (a hybrid's other layers reach further). Precise matching: MQAR token accuracy "
      ">= %.2f at the largest number of pairs K measured (MQAR K), over the seeds that learned the task (`did not learn` when no needle run of the "
      "variant reached %.2f at the shortest distance). Each seed's final evaluation at the variant's best size and "
      "learning rate (highest mean final token accuracy), in seed order. A corner is decided with at least %d "
      "seeds run, of which at least %d learned, when those that learned all lie on one side of the threshold or the 95%% t interval of their mean does; otherwise "
      "`undecided`. Linear cost: time per training step (scaling.jsonl, what=model) grows as T^e with e <= %.2f, "
      "decided when the 95%% interval of the fitted slope (t with points - 2 degrees of freedom) lies on one side. "
      "Needle+distractors (a control, not a corner, when measured): the needle with values among its fillers, read as the "
      "receptive field is; holding it needs the key matched at the farthest distance, not only reached. "
      "Capacity: a seed's largest K with MQAR test accuracy >= %.2f (in parentheses: a seed below 1/K + %.2f at every "
      "K did not learn the task, and is not counted); the variant's, the largest K whose verdict over its seeds is yes; "
      "pairs per kB: that capacity over the state bytes per sequence at the runs' seq-len (attention: its KV cache "
      "there, which grows with T). Book's matching: the grade of section 9.6's table. ",
      kReceptiveFieldAcc, kLearnedAcc, kMinLearnedSeeds, kPreciseMatchingAcc, kLearnedAcc, kMinSeeds, kMinLearnedSeeds,
      kLinearCostExponent,
      kCapacityAcc, kPlateauMargin);
  const MatchingOrder order = matching_order(rows);
  t.caption = (order.text.empty() ? "" : "**" + order.text + "**\n\n") + std::string(rules) +
              "Exponents fitted as in the scaling table; state bytes per sequence at T=" +
              format_number(kStateSeqLen, "%g") + " (decode rows, else model rows), in total and per layer where "
              "measured there; decode: the median time per generated token, one sequence, with that many tokens of "
              "context (decode rows). Also in " + sweep.dir +
              "/triangle.json. " + made_by(sweep);
  return {t};
}

Json triangle_json(const Sweep& sweep, const std::vector<TriangleRow>& rows) {
  Json variants = Json::array();
  for (const TriangleRow& r : rows) {
    const Verdict& cost = r.linear_cost;
    variants.push_back(
        {{"label", r.label()},
         {"model", r.model},
         {"window", r.window},
         {"n_layers", optional_json(r.n_layers)},
         {"needle_distance", optional_json(r.needle_distance)},
         {"nearest_needle_distance", optional_json(r.nearest_distance)},
         {"state_bytes", optional_json(r.state_bytes)},
         {"state_bytes_from", r.state_note},
         {"layer_state_bytes", r.layer_state_bytes},
         {"decode_ms_per_token", optional_json(r.decode_ms)},
         {"exponents",
          {{"time", optional_json(cost.value)},
           {"time_interval", cost.interval ? Json::array({cost.interval->first, cost.interval->second}) : Json()},
           {"time_fit", r.time_fit_range},
           {"memory", optional_json(r.memory_exponent)}}},
         {"corners",
          {{"receptive_field", corner_json(r.receptive_field)},
           {"linear_cost", corner_json(cost)},
           {"precise_matching", corner_json(r.precise_matching)}}},
         {"controls", {{"needle_distractors", corner_json(r.needle_distractors)}}},
         {"matching_k", optional_json(r.matching_k)},
         {"book_grade", r.book_grade.empty() ? Json() : Json(r.book_grade)},
         {"capacity", r.capacity ? capacity_json(*r.capacity) : Json()},
         {"corners_held", r.corners_held()}});
  }
  const MatchingOrder order = matching_order(rows);
  Json graded = Json::array();
  for (const TriangleRow* r : order.graded)
    graded.push_back({{"label", r->label()}, {"book_grade", r->book_grade}, {"capacity", r->capacity->text()}});
  return {{"sweep_command", sweep.sweep_command},
          {"report_command", sweep.report_command},
          {"state_seq_len", int64_t(kStateSeqLen)},
          {"min_seeds", kMinSeeds},
          {"min_learned_seeds", kMinLearnedSeeds},
          {"learned_acc", kLearnedAcc},
          {"capacity_acc", kCapacityAcc},
          {"plateau_margin", kPlateauMargin},
          {"matching_order", {{"agreement", order.agreement}, {"text", order.text}, {"graded", graded}}},
          {"variants", variants}};
}

}  // namespace tri::report
