#include "report/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "framework/core/tensor.hpp"
#include "train/run_records.hpp"

namespace tri::report {

namespace fs = std::filesystem;

namespace {

using train::json_int;
using train::json_number;
using train::json_string;

std::optional<double> as_double(const std::optional<int64_t>& v) {
  return v ? std::optional<double>(double(*v)) : std::nullopt;
}

// needle's "acc@250": the accuracy at distance 250.
void read_acc_at(const train::ExtraValues& extra, std::map<int64_t, double>& out) {
  for (const auto& [key, v] : extra) {
    if (key.rfind("acc@", 0) != 0) continue;
    const std::string d = key.substr(4);
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) out[std::stoll(d)] = v;
  }
}

// mqar's accuracy by pairs K: a mix's acc@K=k, or the token accuracy of a run at one K.
void read_acc_at_pairs(const train::ExtraValues& extra, RunRow& r) {
  const Json pairs = r.value("num-kv-pairs");
  const Json one = pairs.is_array() && pairs.size() == 1 ? pairs[0] : pairs;
  if (one.is_number_integer()) {
    if (r.token_acc) r.acc_at_pairs[one.get<int64_t>()] = *r.token_acc;
    return;
  }
  for (const auto& [key, v] : extra) {
    if (key.rfind("acc@K=", 0) != 0) continue;
    const std::string k = key.substr(6);
    if (!k.empty() && k.find_first_not_of("0123456789") == std::string::npos) r.acc_at_pairs[std::stoll(k)] = v;
  }
}

// The report's view of a results row: what it groups and averages, by distance and by K.
RunRow run_of(const train::ResultsRow& row, int line) {
  RunRow r;
  r.line = line;
  r.id = row.id;
  r.section = row.section;
  r.status = row.status;
  r.error = row.error.value_or("");
  r.model = row.model;
  r.task = row.task;
  r.config = row.config;
  r.parameters = as_double(row.parameters);
  r.state_bytes = as_double(row.state_bytes);
  r.chance = row.chance;
  r.step = row.step;
  r.steps = row.steps;
  if (const std::optional<train::StepScores>& f = row.final_eval) {
    r.token_acc = f->token_acc;
    r.seq_acc = f->seq_acc;
    r.loss = f->loss;
    read_acc_at(f->extra, r.acc_at);
    if (r.task == "mqar") read_acc_at_pairs(f->extra, r);
  }
  if (row.final_valid) r.valid_acc = row.final_valid->token_acc;
  for (const train::LengthScores& l : row.lengths)
    if (l.token_acc) r.lengths.emplace_back(l.seq_len, *l.token_acc);
  return r;
}

ScalingRow parse_scaling(const Json& j) {
  if (!j.is_object()) throw Error("not a JSON object");
  ScalingRow s;
  s.model = json_string(j, "model");
  s.what = json_string(j, "what");
  const std::optional<int64_t> t = json_int(j, "seq_len");
  const std::optional<double> ms = json_number(j, "ms");
  if (s.model.empty() || s.what.empty() || !t || !ms)
    throw Error("needs model, what, seq_len and ms");
  s.seq_len = *t;
  s.ms = *ms;
  s.batch = json_int(j, "batch").value_or(0);
  s.d_model = json_int(j, "d_model").value_or(0);
  s.n_layers = json_int(j, "n_layers").value_or(0);
  s.window = std::max<int64_t>(0, json_int(j, "window").value_or(0));
  s.peak_bytes = json_number(j, "peak_bytes");
  s.state_bytes = json_number(j, "state_bytes");
  if (j.contains("layer_state_bytes") && j["layer_state_bytes"].is_array())
    for (const Json& b : j["layer_state_bytes"])
      if (b.is_number()) s.layer_state_bytes.push_back(b.get<double>());
  return s;
}

// The keys whose value differs between the runs, when the rows do not name them.
std::vector<std::string> computed_varying(const std::vector<RunRow>& runs) {
  std::vector<std::string> keys = {"model", "task"};
  for (const RunRow& r : runs)
    for (const auto& [k, v] : r.config.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::vector<std::string> out;
  for (const std::string& k : keys) {
    std::set<std::string> values;
    for (const RunRow& r : runs) values.insert(r.value(k).dump());
    if (values.size() > 1) out.push_back(k);
  }
  return out;
}

}  // namespace

bool RunRow::completed() const { return (status == "finished" || status == "early_stop") && token_acc; }

std::optional<double> RunRow::acc_at_distance(int64_t d) const {
  auto it = acc_at.find(d);
  return it == acc_at.end() ? std::nullopt : std::optional<double>(it->second);
}

Json RunRow::value(const std::string& key) const {
  if (config.contains(key)) return config[key];
  if (key == "model") return model;
  if (key == "task") return task;
  if (key == "section") return section;
  return nullptr;
}

int64_t window_of(const RunRow& r) {
  const Json w = r.value("window");
  return w.is_number_integer() && w.get<int64_t>() > 0 ? w.get<int64_t>() : 0;
}

std::string variant_label(const std::string& model, int64_t window) {
  return window > 0 ? model + " window=" + std::to_string(window) : model;
}

void read_json_lines(const std::string& path, const std::function<void(const Json&, int)>& fn) {
  std::ifstream f(path);
  if (!f) throw Error(path + ": cannot be read");
  std::string text;
  for (int line = 1; std::getline(f, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      fn(Json::parse(text), line);
    } catch (const Json::parse_error&) {
      if (f.eof()) break;  // a last line without its newline: torn by a killed writer, not wrong
      throw Error(path + ":" + std::to_string(line) + ": malformed JSON line");
    } catch (const std::exception& e) {
      throw Error(path + ":" + std::to_string(line) + ": " + e.what());
    }
  }
}

Sweep read_sweep(const std::string& dir) {
  if (!fs::is_directory(dir)) throw Error("report: " + dir + " is not a folder (expected a sweep folder)");
  Sweep s;
  s.dir = dir;
  s.report_command = "trilemma report " + dir;
  const std::string results = dir + "/results.jsonl";
  if (!fs::is_regular_file(results)) throw Error(results + ": missing (not a sweep folder?)");
  std::vector<std::string> named_varying;
  read_json_lines(results, [&](const Json& j, int line) {
    const train::ResultsRow row = j.get<train::ResultsRow>();
    s.runs.push_back(run_of(row, line));
    for (const std::string& k : row.varying)
      if (std::find(named_varying.begin(), named_varying.end(), k) == named_varying.end()) named_varying.push_back(k);
  });
  if (s.runs.empty()) throw Error(results + ": holds no runs");
  s.varying = named_varying.empty() ? computed_varying(s.runs) : named_varying;

  const std::string sweep_json = dir + "/sweep.json";
  s.sweep_command = "(no sweep.json: the sweep command is unknown)";
  if (fs::is_regular_file(sweep_json)) {
    std::ifstream f(sweep_json);
    const Json j = Json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(sweep_json + ": malformed JSON");
    if (j.contains("command") && j["command"].is_string()) s.sweep_command = j["command"].get<std::string>();
  }
  const std::string scaling = dir + "/scaling.jsonl";
  if (fs::is_regular_file(scaling)) {
    s.has_scaling = true;
    read_json_lines(scaling, [&](const Json& j, int) { s.scaling.push_back(parse_scaling(j)); });
  }
  return s;
}

Stat stat_of(const std::vector<double>& values) {
  Stat s;
  s.n = int(values.size());
  if (s.n == 0) return s;
  for (double v : values) s.mean += v;
  s.mean /= s.n;
  if (s.n > 1) {
    double ss = 0;
    for (double v : values) ss += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(ss / (s.n - 1));
  }
  return s;
}

Stat LrCell::stat(const std::function<std::optional<double>(const RunRow&)>& get) const {
  std::vector<double> values;
  for (const RunRow* r : runs)
    if (std::optional<double> v = get(*r)) values.push_back(*v);
  return stat_of(values);
}

const RunRow& LrCell::lowest_seed() const {
  const RunRow* best = runs.front();
  for (const RunRow* r : runs) {
    const Json a = r->value("seed"), b = best->value("seed");
    if (a.is_number() && b.is_number() && a.get<double>() < b.get<double>()) best = r;
  }
  return *best;
}

std::string Group::label(const std::vector<std::string>& leave_out) const {
  std::string s = model;
  for (const auto& [k, v] : keys)
    if (!v.is_null() && std::find(leave_out.begin(), leave_out.end(), k) == leave_out.end())
      s += " " + k + "=" + value_text(v);
  return s;
}

std::optional<double> Group::number(const std::string& key) const {
  for (const auto& [k, v] : keys)
    if (k == key && v.is_number()) return v.get<double>();
  return std::nullopt;
}

// The varying keys that tell runs of one task and model apart (a key that only follows the
// task or the model, as a family's positions or a section's batch, adds no column).
std::vector<std::string> group_keys(const Sweep& sweep) {
  std::vector<std::string> keys;
  for (const std::string& k : sweep.varying) {
    if (k == "seed" || k == "lr" || k == "model" || k == "task") continue;
    std::map<std::string, std::set<std::string>> values;  // task and model -> the key's values
    for (const RunRow& r : sweep.runs) values[r.task + "/" + r.model].insert(r.value(k).dump());
    for (const auto& [who, v] : values)
      if (v.size() > 1) {
        keys.push_back(k);
        break;
      }
  }
  return keys;
}

std::vector<Group> group_runs(const Sweep& sweep) {
  const std::vector<std::string> keys = group_keys(sweep);
  std::vector<Group> groups;
  std::map<std::string, size_t> index;  // the group's identity as text
  for (const RunRow& r : sweep.runs) {
    if (!r.completed()) continue;
    Group g{r.task, r.model, {}, {}, 0};
    for (const std::string& k : keys) g.keys.emplace_back(k, r.value(k));
    const std::string id = Json(g.task).dump() + Json(g.model).dump() + Json(g.keys).dump();
    auto [it, fresh] = index.emplace(id, groups.size());
    if (fresh) groups.push_back(std::move(g));
    Group& group = groups[it->second];
    const Json lr = r.value("lr");
    auto cell = std::find_if(group.cells.begin(), group.cells.end(), [&](const LrCell& c) { return c.lr == lr; });
    if (cell == group.cells.end()) cell = group.cells.insert(group.cells.end(), LrCell{lr, {}, {}, {}, {}, {}});
    cell->runs.push_back(&r);
  }
  for (Group& g : groups) {
    for (LrCell& c : g.cells) {
      c.token_acc = c.stat([](const RunRow& r) { return r.token_acc; });
      c.seq_acc = c.stat([](const RunRow& r) { return r.seq_acc; });
      c.loss = c.stat([](const RunRow& r) { return r.loss; });
      c.choice_acc = c.stat([](const RunRow& r) { return r.choice_acc(); });
    }
    for (size_t i = 1; i < g.cells.size(); ++i)
      if (g.cells[i].choice_acc.mean > g.cells[g.best].choice_acc.mean) g.best = i;
  }
  return groups;
}

std::string value_text(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v.get<double>());
    return buf;
  }
  return v.dump();
}

double PowerFit::at(double t) const { return std::exp(log_coef) * std::pow(t, exponent); }

std::string PowerFit::range_text() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "T = %g..%g (%d points)", t_lo, t_hi, points);
  return buf;
}

PowerFit fit_power_law(std::vector<std::pair<double, double>> points) {
  PowerFit fit;
  std::erase_if(points, [](const auto& p) { return !(p.first > 0 && p.second > 0); });
  std::sort(points.begin(), points.end());
  const size_t n = points.size();
  const size_t use = std::min(n, std::max(kMinFitPoints, (n + 1) / 2));
  points.erase(points.begin(), points.begin() + (n - use));
  if (points.size() < 2 || points.front().first == points.back().first) return fit;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [t, y] : points) {
    const double x = std::log(t), ly = std::log(y);
    sx += x, sy += ly, sxx += x * x, sxy += x * ly;
  }
  const double m = double(points.size());
  fit.exponent = (m * sxy - sx * sy) / (m * sxx - sx * sx);
  fit.log_coef = (sy - fit.exponent * sx) / m;
  if (points.size() > 2) {  // se(slope) = sqrt(residual variance / sum (x - mean x)^2)
    double sse = 0;
    for (const auto& [t, y] : points) {
      const double r = std::log(y) - (fit.log_coef + fit.exponent * std::log(t));
      sse += r * r;
    }
    fit.exponent_se = std::sqrt(sse / (m - 2) / (sxx - sx * sx / m));
  }
  fit.t_lo = points.front().first;
  fit.t_hi = points.back().first;
  fit.points = int(points.size());
  fit.ok = true;
  return fit;
}

std::vector<std::pair<double, double>> read_loss_curve(const std::string& metrics_path) {
  std::vector<std::pair<double, double>> curve;
  if (!fs::is_regular_file(metrics_path)) return curve;
  read_json_lines(metrics_path, [&](const Json& j, int) {
    if (!j.is_object() || json_string(j, "split") != "train") return;
    const std::optional<double> step = json_number(j, "step"), loss = json_number(j, "loss");
    if (step && loss) curve.emplace_back(*step, *loss);
  });
  return curve;
}

std::vector<ScalingSeries> scaling_series(const Sweep& sweep) {
  auto shape_of = [](const ScalingRow& r) {
    return "B=" + std::to_string(r.batch) + " d=" + std::to_string(r.d_model) + " L=" + std::to_string(r.n_layers);
  };
  std::map<std::string, std::set<std::string>> shapes;  // per what
  for (const ScalingRow& r : sweep.scaling) shapes[r.what].insert(shape_of(r));
  std::vector<ScalingSeries> out;
  for (const ScalingRow& r : sweep.scaling) {
    const std::string variant = variant_label(r.model, r.window);
    const std::string label = shapes[r.what].size() > 1 ? variant + " " + shape_of(r) : variant;
    auto s = std::find_if(out.begin(), out.end(),
                          [&](const ScalingSeries& x) { return x.what == r.what && x.label == label; });
    if (s == out.end()) s = out.insert(out.end(), ScalingSeries{r.what, r.model, label, r.window, {}, {}, {}, {}, {}, {}});
    const double t = double(r.seq_len);
    s->ms.emplace_back(t, r.ms);
    if (r.peak_bytes) s->peak_bytes.emplace_back(t, *r.peak_bytes);
    if (r.state_bytes) s->state_bytes.emplace_back(t, *r.state_bytes);
    if (!r.layer_state_bytes.empty()) s->layer_state_bytes[t] = r.layer_state_bytes;
  }
  for (ScalingSeries& s : out) {
    for (auto* v : {&s.ms, &s.peak_bytes, &s.state_bytes}) std::sort(v->begin(), v->end());
    s.time_fit = fit_power_law(s.ms);
    s.memory_fit = fit_power_law(s.peak_bytes);
  }
  return out;
}

}  // namespace tri::report
