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
  if (const size_t left = v.values.size() - size_t(v.n); left > 0) {
    const std::string below = std::to_string(left) + " of " + std::to_string(v.values.size()) + " seeds below " +
                              format_number(kLearnedAcc, "%g") + " at d=" + std::to_string(*row.nearest_distance);
    if (v.n < kMinSeeds) v.outcome = Outcome::did_not_learn, v.note = below;
    else v.note = below + ", left out";
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

// MQAR token accuracy; a variant none of whose needle runs recalls even the nearest pair says
// nothing about recalling many.
Verdict matching_verdict(const TriangleRow& row, const std::vector<const RunRow*>& cell,
                         const std::vector<const RunRow*>& needle_runs) {
  std::vector<SeedValue> values;
  for (const RunRow* r : cell) values.push_back({integer_key(*r, "seed"), *r->token_acc, true});
  Verdict v = seeded_verdict(values, kPreciseMatchingAcc, HeldWhen::at_least);
  if (v.outcome == Outcome::not_measured) return v;  // e.g. a windowed control run on the needle only
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
                        const std::vector<ScalingSeries>& series) {
  TriangleRow row;
  row.model = model;
  row.window = window;
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
  row.precise_matching = matching_verdict(row, best_cell_runs(groups, "mqar", model, window), needle_runs);

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

// "0.990, 1.000, (0.120)": each seed's value in seed order, those not counted in parentheses.
std::string values_text(const Verdict& v) {
  std::string s;
  for (const SeedValue& x : v.values) {
    const std::string n = format_number(x.value, "%.3f");
    s += (s.empty() ? "" : ", ") + (x.counted ? n : "(" + n + ")");
  }
  return s.empty() ? "-" : s;
}

// "4864 + 16384": each layer's state bytes, or "-".
std::string layers_text(const std::vector<double>& bytes) {
  std::string s;
  for (double b : bytes) s += (s.empty() ? "" : " + ") + format_number(b, "%.0f");
  return s.empty() ? "-" : s;
}

std::string interval_text(const std::optional<Interval>& i, const char* format) {
  return i ? "[" + format_number(i->first, format) + ", " + format_number(i->second, format) + "]" : "-";
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

}  // namespace

std::vector<std::string> TriangleRow::corners_held() const {
  std::vector<std::string> held;
  if (receptive_field.held()) held.push_back("receptive field");
  if (linear_cost.held()) held.push_back("linear cost");
  if (precise_matching.held()) held.push_back("matching");
  return held;
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
  std::vector<TriangleRow> rows;
  for (const auto& [model, window] : variants) rows.push_back(variant_row(model, window, groups, series));
  return rows;
}

std::vector<Table> triangle_table(const Sweep& sweep, const std::vector<TriangleRow>& rows) {
  if (rows.empty()) return {};
  Table t{"The trilemma",
          {"variant", "needle d", "needle acc per seed", "needle n", "needle 95% interval", "receptive field",
           "time exponent", "time exponent 95% interval", "memory exponent", "linear cost",
           "state bytes at T=" + format_number(kStateSeqLen, "%g"), "state bytes from", "state bytes per layer",
           "decode ms/token at T=" + format_number(kStateSeqLen, "%g"), "MQAR acc per seed", "MQAR n",
           "MQAR 95% interval", "matching", "corners held", "needle+distractors acc per seed",
           "needle+distractors"},
          {},
          ""};
  for (const TriangleRow& r : rows) {
    const std::vector<std::string> held = r.corners_held();
    t.rows.push_back({r.label(), r.needle_distance ? std::to_string(*r.needle_distance) : "-",
                      values_text(r.receptive_field), std::to_string(r.receptive_field.n),
                      interval_text(r.receptive_field.interval, "%.3f"), r.receptive_field.text(),
                      format_number(r.linear_cost.value, "%.2f"), interval_text(r.linear_cost.interval, "%.2f"),
                      format_number(r.memory_exponent, "%.2f"), r.linear_cost.text(), format_number(r.state_bytes, "%.0f"),
                      r.state_note.empty() ? "-" : r.state_note, layers_text(r.layer_state_bytes),
                      format_number(r.decode_ms, "%.3f"), values_text(r.precise_matching),
                      std::to_string(r.precise_matching.n), interval_text(r.precise_matching.interval, "%.3f"),
                      r.precise_matching.text(), held.empty() ? "none" : joined(held, " + "),
                      values_text(r.needle_distractors), r.needle_distractors.text()});
  }
  char rules[2048];
  std::snprintf(
      rules, sizeof rules,
      "Global receptive field: needle accuracy at the farthest distance d >= %.2f; a seed below %.2f at the "
      "shortest distance did not learn the task and is left out (in parentheses), and with fewer than %d seeds "
      "left the corner reads `did not learn`; a stack of windowed attention layers whose reach L x (W - 1) is "
      "below d reads `no (structural)` (a hybrid's other layers reach further). Precise matching: MQAR token accuracy >= %.2f (`did not learn` when no needle run of the "
      "variant reached %.2f at the shortest distance). Each seed's final evaluation at the variant's best size and "
      "learning rate (highest mean final token accuracy), in seed order. A corner is decided with at least %d "
      "seeds when all lie on one side of the threshold or the 95%% t interval of their mean does; otherwise "
      "`undecided`. Linear cost: time per training step (scaling.jsonl, what=model) grows as T^e with e <= %.2f, "
      "decided when the 95%% interval of the fitted slope (t with points - 2 degrees of freedom) lies on one side. "
      "Needle+distractors (a control, not a corner): the needle with values among its fillers, read as the "
      "receptive field is; holding it needs the key matched at the farthest distance, not only reached. ",
      kReceptiveFieldAcc, kLearnedAcc, kMinSeeds, kPreciseMatchingAcc, kLearnedAcc, kMinSeeds, kLinearCostExponent);
  t.caption = std::string(rules) + "Exponents fitted as in the scaling table; state bytes per sequence at T=" +
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
         {"corners_held", r.corners_held()}});
  }
  return {{"sweep_command", sweep.sweep_command},
          {"report_command", sweep.report_command},
          {"state_seq_len", int64_t(kStateSeqLen)},
          {"min_seeds", kMinSeeds},
          {"learned_acc", kLearnedAcc},
          {"variants", variants}};
}

}  // namespace tri::report
