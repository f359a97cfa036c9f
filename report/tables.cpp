#include "report/tables.hpp"

#include "framework/config/options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace tri::report {

namespace {

// Characters, not bytes: "±" takes one column.
size_t text_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string padded(const std::string& s, size_t width) { return s + std::string(width - text_width(s), ' '); }

std::string chance_text(const LrCell& c) { return format_number(c.runs.front()->chance); }

// "Chance level ...: mqar 0.0039, needle 0.0156."
std::string chance_caption(const Sweep& sweep) {
  std::vector<std::string> seen;
  std::string s;
  for (const RunRow& r : sweep.runs)
    if (r.chance && std::find(seen.begin(), seen.end(), r.task) == seen.end()) {
      seen.push_back(r.task);
      s += std::string(s.empty() ? "" : ", ") + r.task + " " + format_number(r.chance);
    }
  return s.empty() ? "" : " Chance level (token accuracy of a uniform guess): " + s + ".";
}

// The columns that tell groups apart: task, model and the other varying keys.
std::vector<std::string> group_header(const Sweep& sweep) {
  std::vector<std::string> h = {"task", "model"};
  for (const std::string& k : group_keys(sweep)) h.push_back(k);
  return h;
}

std::vector<std::string> group_cells(const Group& g) {
  std::vector<std::string> row = {g.task, g.model};
  for (const auto& [k, v] : g.keys) row.push_back(value_text(v));
  return row;
}

// One row of the learning-rate tables: the group, then a cell's numbers.
std::vector<std::string> cell_row(const Group& g, const LrCell& c, const std::string& lr_text) {
  std::vector<std::string> row = group_cells(g);
  const RunRow& r = *c.runs.front();
  for (const std::string& s :
       {lr_text, std::to_string(c.runs.size()), mean_std_text(c.token_acc), mean_std_text(c.seq_acc),
        mean_std_text(c.loss), chance_text(c), format_number(r.parameters, "%.0f"), format_number(r.state_bytes, "%.0f")})
    row.push_back(s);
  return row;
}

std::vector<std::string> cell_header(const Sweep& sweep, const char* lr_name) {
  std::vector<std::string> h = group_header(sweep);
  for (const char* s : {lr_name, "seeds", "token_acc", "seq_acc", "loss", "chance", "parameters", "state bytes"})
    h.push_back(s);
  return h;
}

// Mean ± std over the best cell's seeds of a per-run value, one column per key in `columns`.
template <class Get>
Table per_key_table(const Sweep& sweep, const std::vector<Group>& groups, const std::set<int64_t>& columns,
                    const std::string& column_prefix, Get get) {
  Table t;
  t.header = group_header(sweep);
  t.header.push_back("best lr");
  for (int64_t c : columns) t.header.push_back(column_prefix + std::to_string(c));
  t.header.push_back("chance");
  for (const Group& g : groups) {
    const LrCell& best = g.best_cell();
    std::vector<std::string> row = group_cells(g);
    row.push_back(value_text(best.lr));
    bool any = false;
    for (int64_t c : columns) {
      const Stat s = best.stat([&](const RunRow& r) { return get(r, c); });
      any |= s.n > 0;
      row.push_back(mean_std_text(s));
    }
    row.push_back(chance_text(best));
    if (any) t.rows.push_back(row);
  }
  return t;
}

std::optional<double> at_length(const RunRow& r, int64_t seq_len) {
  for (const auto& [t, acc] : r.lengths)
    if (t == seq_len) return acc;
  return std::nullopt;
}

}  // namespace

std::string mean_std_text(const Stat& s) {
  if (s.n == 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f ± %.4f", s.mean, s.std);
  return buf;
}

std::string format_number(std::optional<double> v, const char* format) {
  return v ? number_text(*v, format) : "-";
}

std::string Table::markdown() const {
  std::vector<size_t> width(header.size(), 3);
  for (size_t i = 0; i < header.size(); ++i) width[i] = std::max(width[i], text_width(header[i]));
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], text_width(row[i]));
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (size_t i = 0; i < width.size(); ++i) {
      s += ' ';
      s += padded(i < cells.size() ? cells[i] : "", width[i]);
      s += " |";
    }
    return s + "\n";
  };
  std::string s = "## " + title + "\n\n" + line(header) + "|";
  for (size_t w : width) s += std::string(w + 2, '-') + "|";
  s += "\n";
  for (const auto& row : rows) s += line(row);
  return s + "\n" + caption + "\n\n";
}

std::string made_by(const Sweep& sweep) {
  return "Made by `" + sweep.sweep_command + "` and `" + sweep.report_command + "`.";
}

std::vector<Table> accuracy_tables(const Sweep& sweep, const std::vector<Group>& groups) {
  if (groups.empty()) return {};
  std::vector<Table> tables;
  const std::string chance = chance_caption(sweep), made = " " + made_by(sweep);

  Table best{"Best learning rate per model and size", cell_header(sweep, "best lr"), {}, ""};
  for (const Group& g : groups) best.rows.push_back(cell_row(g, g.best_cell(), value_text(g.best_cell().lr)));
  best.caption = "Final evaluation, mean ± standard deviation over seeds (sample std, n - 1), at the learning "
                 "rate with the highest mean validation accuracy (valid_token_acc), chosen apart from the "
                 "test stream these accuracies come from." + chance +
                 " State bytes: recurrent state per sequence at the run's seq-len." + made;
  tables.push_back(best);

  Table all{"Every learning rate", cell_header(sweep, "lr"), {}, ""};
  for (const Group& g : groups)
    for (size_t i = 0; i < g.cells.size(); ++i)
      all.rows.push_back(cell_row(g, g.cells[i], value_text(g.cells[i].lr) + (i == g.best ? " (best)" : "")));
  all.caption = "Final evaluation per learning rate, mean ± std over seeds." + chance + made;
  tables.push_back(all);

  std::set<int64_t> lengths, distances;
  for (const RunRow& r : sweep.runs) {
    if (!r.completed()) continue;
    for (const auto& [t, acc] : r.lengths) lengths.insert(t);
    for (const auto& [d, acc] : r.acc_at) distances.insert(d);
  }
  if (!lengths.empty()) {
    Table t = per_key_table(sweep, groups, lengths, "T=", at_length);
    t.title = "Token accuracy at other lengths";
    t.caption = "Evaluation after training at each sequence length T, at the best learning rate, mean ± std "
                "over seeds." + chance + made;
    tables.push_back(t);
  }
  if (!distances.empty()) {
    Table t = per_key_table(sweep, groups, distances, "d=",
                            [](const RunRow& r, int64_t d) { return r.acc_at_distance(d); });
    t.title = "Accuracy per needle distance";
    t.caption = "Final evaluation's accuracy at each distance d (acc@d), at the best learning rate, mean ± std "
                "over seeds." + chance + made;
    tables.push_back(t);
  }
  return tables;
}

std::vector<Table> unfinished_table(const Sweep& sweep) {
  Table t{"Runs not averaged", {"id", "status", "step", "error"}, {}, ""};
  for (const RunRow& r : sweep.runs) {
    if (r.completed()) continue;
    std::string step = r.step ? std::to_string(*r.step) : "-";
    if (r.steps) step += "/" + std::to_string(*r.steps);
    std::string error = r.error.empty() ? "-" : r.error;
    if (r.status == "finished" || r.status == "early_stop") error = "no final token accuracy";
    t.rows.push_back({r.id, r.status.empty() ? "-" : r.status, step, error});
  }
  if (t.rows.empty()) return {};
  t.caption = "Runs that did not finish (failed, pending, paused, interrupted) are listed, not averaged. " + made_by(sweep);
  return {t};
}

std::vector<Table> scaling_tables(const Sweep& sweep, const std::vector<ScalingSeries>& series) {
  if (!sweep.has_scaling || series.empty()) return {};
  Table t{"Scaling exponents in T",
          {"what", "model", "points", "time exponent", "time fit range", "memory exponent", "memory fit range"}, {}, ""};
  for (const ScalingSeries& s : series) {
    auto exponent = [](const PowerFit& f) { return f.ok ? format_number(f.exponent, "%.3f") : std::string("-"); };
    auto range = [](const PowerFit& f) { return f.ok ? f.range_text() : std::string("-"); };
    t.rows.push_back({s.what, s.label, std::to_string(s.ms.size()), exponent(s.time_fit), range(s.time_fit),
                      exponent(s.memory_fit), range(s.memory_fit)});
  }
  t.caption = "Least-squares slope of log(ms) and of log(peak bytes) against log(T), over the largest T: the "
              "upper half of the measurements, at least " + std::to_string(kMinFitPoints) +
              " (the range fitted is given). model/mixer: ms per training step; decode: ms per generated token. "
              "From " + sweep.dir + "/scaling.jsonl (`trilemma bench scaling --out " + sweep.dir +
              "/scaling.jsonl`). " + made_by(sweep);
  return {t};
}

}  // namespace tri::report
