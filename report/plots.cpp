#include "report/plots.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "framework/core/tensor.hpp"
#include "framework/io/atomic_file.hpp"
#include "report/capacity.hpp"
#include "report/gnuplot.hpp"
#include "report/tables.hpp"

namespace tri::report {

namespace fs = std::filesystem;

namespace {

// A task name as part of a file name.
std::string file_part(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return out.empty() ? "none" : out;
}

std::vector<const Group*> groups_of(const std::vector<Group>& groups, const std::string& task) {
  std::vector<const Group*> out;
  for (const Group& g : groups)
    if (g.task == task) out.push_back(&g);
  return out;
}

std::vector<std::string> tasks_of(const std::vector<Group>& groups) {
  std::vector<std::string> tasks;
  for (const Group& g : groups)
    if (std::find(tasks.begin(), tasks.end(), g.task) == tasks.end()) tasks.push_back(g.task);
  return tasks;
}

// A dashed horizontal line at the task's chance level.
std::vector<std::string> chance_line(const std::vector<const Group*>& groups) {
  const std::optional<double> chance = groups.front()->best_cell().runs.front()->chance;
  if (!chance) return {};
  return {format_number(chance, "%.6g") + " with lines dt 2 lc rgb \"gray40\" title " +
          gnuplot_quoted("chance " + format_number(chance, "%.4g"))};
}

size_t distinct_x(const PlotSpec& p) {
  std::set<double> xs;
  for (const Series& s : p.series)
    for (const auto& [x, y] : s.points) xs.insert(x);
  return xs.size();
}

// Accuracy vs sequence length at the best lr, mean over seeds: from the evaluation at other
// lengths when the runs have it, else from runs trained at different seq-len.
PlotSpec accuracy_vs_length(const std::string& task, const std::vector<const Group*>& groups) {
  PlotSpec p{"acc_vs_seq_len_" + file_part(task), task + ": token accuracy vs sequence length (best lr, mean over seeds)",
             "sequence length T", "token accuracy", true, false, "[0:1.02]", {}, chance_line(groups), "", ""};
  const bool from_lengths = std::any_of(groups.begin(), groups.end(), [](const Group* g) {
    return std::any_of(g->best_cell().runs.begin(), g->best_cell().runs.end(),
                       [](const RunRow* r) { return !r->lengths.empty(); });
  });
  std::map<std::string, size_t> line_of;
  for (const Group* g : groups) {
    const LrCell& best = g->best_cell();
    if (from_lengths) {
      std::set<int64_t> lengths;
      for (const RunRow* r : best.runs)
        for (const auto& [t, acc] : r->lengths) lengths.insert(t);
      Series s{g->label() + " lr=" + value_text(best.lr), {}, "linespoints lw 2", {}};
      for (int64_t t : lengths)
        s.points.emplace_back(double(t), best.stat([&](const RunRow& r) -> std::optional<double> {
          for (const auto& [len, acc] : r.lengths)
            if (len == t) return acc;
          return std::nullopt;
        }).mean);
      if (!s.points.empty()) p.series.push_back(s);
    } else if (const std::optional<double> t = g->number("seq-len")) {
      const std::string title = g->label({"seq-len"});
      auto [it, fresh] = line_of.emplace(title, p.series.size());
      if (fresh) p.series.push_back({title, {}, "linespoints lw 2", {}});
      p.series[it->second].points.emplace_back(*t, best.token_acc.mean);
    }
  }
  for (Series& s : p.series) std::sort(s.points.begin(), s.points.end());
  p.caption = "Token accuracy against the sequence length T, " +
              std::string(from_lengths ? "evaluated after training at each length (the runs' \"lengths\")"
                                       : "one run per trained seq-len") +
              "; one line per model and size at its best learning rate, mean over seeds; dashed: chance.";
  return p;
}

PlotSpec accuracy_vs_state(const std::string& task, const std::vector<const Group*>& groups) {
  PlotSpec p{"acc_vs_state_" + file_part(task), task + ": token accuracy vs recurrent state size",
             "recurrent state bytes per sequence", "token accuracy (best lr, mean over seeds)", true, false, "[0:1.02]", {},
             chance_line(groups), "", ""};
  std::map<std::string, size_t> line_of;
  for (const Group* g : groups) {
    const std::optional<double> bytes = g->best_cell().runs.front()->state_bytes;
    if (!bytes || *bytes <= 0) continue;
    auto [it, fresh] = line_of.emplace(g->model, p.series.size());
    if (fresh) p.series.push_back({g->model, {}, "points pt 7 ps 1.5", {}});
    p.series[it->second].points.emplace_back(*bytes, g->best_cell().token_acc.mean);
  }
  p.caption = "Token accuracy at the best learning rate (mean over seeds) against the recurrent state bytes per "
              "sequence, one point per model and size; dashed: chance.";
  return p;
}

PlotSpec loss_curves(const Sweep& sweep, const std::string& task, const std::vector<const Group*>& groups) {
  PlotSpec p{"loss_" + file_part(task), task + ": train loss (best lr, lowest seed)", "step", "train loss", false,
             true, "", {}, {}, "", ""};
  for (const Group* g : groups) {
    const RunRow& r = g->best_cell().lowest_seed();
    Series s{g->label() + " lr=" + value_text(g->best_cell().lr) + " seed=" + value_text(r.value("seed")),
             read_loss_curve(sweep.dir + "/runs/" + r.id + "/metrics.jsonl"), "lines lw 2", {}};
    if (!s.points.empty()) p.series.push_back(s);
  }
  p.caption = "Train loss against the step (runs/<id>/metrics.jsonl), one line per model and size: its run at the "
              "best learning rate with the lowest seed.";
  return p;
}

PlotSpec accuracy_vs_distance(const std::string& task, const std::vector<const Group*>& groups) {
  PlotSpec p{"acc_vs_distance_" + file_part(task), task + ": accuracy vs distance (best lr, mean over seeds)",
             "distance d", "accuracy at distance d", true, false, "[0:1.02]", {}, chance_line(groups), "", ""};
  for (const Group* g : groups) {
    const LrCell& best = g->best_cell();
    std::set<int64_t> distances;
    for (const RunRow* r : best.runs)
      for (const auto& [d, acc] : r->acc_at) distances.insert(d);
    Series s{g->label() + " lr=" + value_text(best.lr), {}, "linespoints lw 2", {}};
    for (int64_t d : distances)
      s.points.emplace_back(double(d), best.stat([&](const RunRow& r) -> std::optional<double> {
        auto it = r.acc_at.find(d);
        return it == r.acc_at.end() ? std::nullopt : std::optional<double>(it->second);
      }).mean);
    if (!s.points.empty()) p.series.push_back(s);
  }
  p.caption = "Final evaluation's accuracy at each distance d (acc@d), one line per model and size at its best "
              "learning rate, mean over seeds; dashed: chance.";
  return p;
}

// MQAR accuracy against the number of pairs K (or K per kB of state), one line per variant and
// size: the mean over its seeds, with bars from the lowest seed to the highest; dashed: the
// capacity threshold.
PlotSpec capacity_plot(const std::vector<CapacityCurve>& curves, bool per_kb) {
  PlotSpec p{per_kb ? "capacity_per_kb_mqar" : "capacity_mqar",
             per_kb ? "mqar: accuracy vs pairs per kB of state" : "mqar: accuracy vs number of pairs K",
             per_kb ? "pairs per kB of state (K / state kB)" : "key-value pairs K", "test token accuracy",
             per_kb, false, "[0:1.05]", {},
             {format_number(kCapacityAcc, "%g") + " with lines dt 2 lc rgb \"gray40\" title " +
              gnuplot_quoted("capacity threshold " + format_number(kCapacityAcc, "%g"))}, "", ""};
  int64_t largest = 0;
  for (const CapacityCurve& c : curves)
    if (!c.ks.empty()) largest = std::max(largest, c.ks.back());
  if (!per_kb) p.x_range = "[0:" + std::to_string(largest + std::max<int64_t>(1, largest / 16)) + "]";
  for (const CapacityCurve& c : curves) {
    if (per_kb && !(c.state_bytes && *c.state_bytes > 0)) continue;
    Series s{c.label, {}, "yerrorlines lw 2", {}};
    for (int64_t k : c.ks) {
      const Verdict& v = c.at.at(k);
      if (v.values.empty()) continue;
      double lo = 1, hi = 0;
      for (const SeedValue& x : v.values) lo = std::min(lo, x.value), hi = std::max(hi, x.value);
      const double x = per_kb ? double(k) / (*c.state_bytes / 1000.0) : double(k);
      s.points.emplace_back(x, v.value.value_or((lo + hi) / 2));
      s.spread.emplace_back(lo, hi);
    }
    if (!s.points.empty()) p.series.push_back(s);
  }
  p.caption = per_kb ? "The same points against K over the state bytes per sequence (in kB) at the runs' seq-len: "
                       "Based's recall-state axis. Attention's state is its KV cache there, which grows with T. Bars: "
                       "the lowest and highest seed; dashed: the capacity threshold."
                     : "Test accuracy at each number of pairs K, one line per variant and size: the mean over the "
                       "seeds that learned the task (every seed when none did), bars from the lowest seed to the "
                       "highest; dashed: the capacity threshold. A seed's capacity is the largest K at or above it.";
  return p;
}

// Time or memory vs T on log-log axes, each series with its fitted power law (dashed, over the
// fitted range) and the exponent in the legend.
PlotSpec scaling_plot(const Sweep& sweep, const std::string& what, bool memory,
                      const std::vector<ScalingSeries>& series) {
  const std::string quantity = memory ? "peak memory" : (what == "decode" ? "ms per token" : "ms per step");
  PlotSpec p{std::string(memory ? "memory_" : "time_") + file_part(what),
             what + ": " + quantity + " vs sequence length", "sequence length T",
             memory ? "peak extra tensor bytes" : (what == "decode" ? "ms per generated token" : "ms per training step"),
             true, true, "", {}, {}, "", ""};
  std::string ranges;
  for (const ScalingSeries& s : series) {
    if (s.what != what) continue;
    const auto& points = memory ? s.peak_bytes : s.ms;
    const PowerFit& fit = memory ? s.memory_fit : s.time_fit;
    if (points.empty()) continue;
    p.series.push_back({s.label + (fit.ok ? "  T^" + format_number(fit.exponent, "%.2f") : ""), points, "linespoints lw 2", {}});
    if (fit.ok) {
      p.series.push_back({"", {{fit.t_lo, fit.at(fit.t_lo)}, {fit.t_hi, fit.at(fit.t_hi)}}, "lines lw 2 dt 2", {}});
      ranges += (ranges.empty() ? "" : "; ") + s.label + " " + fit.range_text();
    }
  }
  p.caption = "Median " + quantity + " against T on log-log axes (scaling.jsonl, what=" + what +
              "); dashed: the least-squares power law over the largest T (" + ranges +
              "), its exponent in the legend. scaling.jsonl: `trilemma bench scaling --out " + sweep.dir +
              "/scaling.jsonl`.";
  return p;
}

std::string data_text(const PlotSpec& p) {
  std::string s = "# " + p.title + "\n# x y, one block per series (gnuplot index 0, 1, ...)\n";
  for (const Series& series : p.series) {
    s += "# " + (series.title.empty() ? "fit" : series.title) + "\n";
    for (size_t i = 0; i < series.points.size(); ++i) {
      s += format_number(series.points[i].first, "%.10g") + " " + format_number(series.points[i].second, "%.10g");
      if (i < series.spread.size())
        s += " " + format_number(series.spread[i].first, "%.10g") + " " + format_number(series.spread[i].second, "%.10g");
      s += "\n";
    }
    s += "\n\n";
  }
  return s;
}

std::string script_text(const PlotSpec& p, const std::string& made_by_line) {
  std::ostringstream s;
  s << "# " << made_by_line << "\n# Redraw: cd into this folder and run `gnuplot " << p.name << ".gp`.\n"
    << "set terminal png size 900,600\nset termoption noenhanced\nset output '" << p.name << ".png'\n"
    << "set title " << gnuplot_quoted(p.title) << "\nset xlabel " << gnuplot_quoted(p.xlabel) << "\nset ylabel "
    << gnuplot_quoted(p.ylabel) << "\nset grid\nset key below spacing 1.2 height 1\n";
  if (p.log_x) s << "set logscale x\n";
  if (p.log_y) s << "set logscale y\n";
  if (!p.y_range.empty()) s << "set yrange " << p.y_range << "\n";
  if (!p.x_range.empty()) s << "set xrange " << p.x_range << "\n";
  s << "plot ";
  // A series' color follows the data series before it: a fit line (no title) takes its color.
  int color = 0;
  std::string sep;
  for (size_t i = 0; i < p.series.size(); ++i) {
    const Series& series = p.series[i];
    if (!series.title.empty()) ++color;
    s << sep << "'" << p.name << ".dat' index " << i << " with " << series.style << " lc " << color << " "
      << (series.title.empty() ? "notitle" : "title " + gnuplot_quoted(series.title));
    sep = ", \\\n     ";
  }
  for (const std::string& e : p.extra_plots) s << sep << e;
  s << "\n";
  return s.str();
}


}  // namespace

std::vector<PlotSpec> plan_plots(const Sweep& sweep, const std::vector<Group>& groups,
                                 const std::vector<ScalingSeries>& series) {
  std::vector<PlotSpec> plans;
  auto keep = [&](PlotSpec p, size_t min_x) {
    if (!p.series.empty() && distinct_x(p) >= min_x) plans.push_back(std::move(p));
  };
  for (const std::string& task : tasks_of(groups)) {
    const std::vector<const Group*> g = groups_of(groups, task);
    keep(accuracy_vs_length(task, g), 2);
    keep(accuracy_vs_state(task, g), 1);
    keep(loss_curves(sweep, task, g), 1);
    keep(accuracy_vs_distance(task, g), 1);
  }
  const std::vector<CapacityCurve> curves = capacity_curves(sweep, groups);
  keep(capacity_plot(curves, false), 2);
  keep(capacity_plot(curves, true), 2);
  std::vector<std::string> whats;
  for (const ScalingSeries& s : series)
    if (std::find(whats.begin(), whats.end(), s.what) == whats.end()) whats.push_back(s.what);
  for (const std::string& what : whats) {
    keep(scaling_plot(sweep, what, false, series), 1);
    keep(scaling_plot(sweep, what, true, series), 1);
  }
  return plans;
}

std::vector<std::string> write_plots(const std::vector<PlotSpec>& plots, const std::string& plots_dir,
                                     const std::string& gnuplot, const std::string& made_by_line) {
  std::error_code ec;
  fs::create_directories(plots_dir, ec);
  if (ec) throw Error(plots_dir + ": cannot create the folder (" + ec.message() + ")");
  std::vector<std::string> failures;
  for (const PlotSpec& p : plots) {
    write_text_atomically(plots_dir + "/" + p.name + ".dat", data_text(p));
    write_text_atomically(plots_dir + "/" + p.name + ".gp", script_text(p, made_by_line));
    if (gnuplot.empty()) continue;
    const std::string log = p.name + ".gp.log";
    const std::string error = run_gnuplot(gnuplot, p.name + ".gp", log, plots_dir);
    std::error_code ignored;
    if (error.empty()) fs::remove(plots_dir + "/" + log, ignored);
    if (!error.empty()) failures.push_back(p.name + ": " + error + " (see plots/" + log + ")");
  }
  return failures;
}

}  // namespace tri::report
