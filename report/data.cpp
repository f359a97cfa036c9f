#include "report/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "framework/core/tensor.hpp"

namespace tri::report {

namespace fs = std::filesystem;

namespace {

// Field readers: null or absent is "unknown"; a value of the wrong type is an error naming it.
std::optional<double> opt_number(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number()) throw Error(std::string("field '") + key + "' is not a number");
  return j[key].get<double>();
}

std::optional<int64_t> opt_int(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number_integer()) throw Error(std::string("field '") + key + "' is not an integer");
  return j[key].get<int64_t>();
}

std::string opt_string(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  if (!j[key].is_string()) throw Error(std::string("field '") + key + "' is not a string");
  return j[key].get<std::string>();
}

// needle's "acc@250": the accuracy at distance 250 (a number, or an object with "acc").
void read_acc_at(const Json& extra, std::map<int64_t, double>& out) {
  if (!extra.is_object()) return;
  for (const auto& [key, v] : extra.items()) {
    if (key.rfind("acc@", 0) != 0) continue;
    const std::string d = key.substr(4);
    if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos) continue;
    const Json& acc = v.is_object() && v.contains("acc") ? v["acc"] : v;
    if (acc.is_number()) out[std::stoll(d)] = acc.get<double>();
  }
}

// mqar's accuracy by pairs K: a mix's acc@K=k, or the token accuracy of a run at one K.
void read_acc_at_pairs(const Json& extra, RunRow& r) {
  const Json pairs = r.value("num-kv-pairs");
  const Json one = pairs.is_array() && pairs.size() == 1 ? pairs[0] : pairs;
  if (one.is_number_integer()) {
    if (r.token_acc) r.acc_at_pairs[one.get<int64_t>()] = *r.token_acc;
    return;
  }
  if (!extra.is_object()) return;
  for (const auto& [key, v] : extra.items()) {
    if (key.rfind("acc@K=", 0) != 0 || !v.is_number()) continue;
    const std::string k = key.substr(6);
    if (!k.empty() && k.find_first_not_of("0123456789") == std::string::npos) r.acc_at_pairs[std::stoll(k)] = v.get<double>();
  }
}

RunRow parse_run(const Json& j, int line) {
  if (!j.is_object()) throw Error("not a JSON object");
  RunRow r;
  r.line = line;
  r.id = opt_string(j, "id");
  if (r.id.empty()) throw Error("missing field 'id'");
  r.section = opt_string(j, "section");
  r.status = opt_string(j, "status");
  r.error = opt_string(j, "error");
  r.model = opt_string(j, "model");
  r.task = opt_string(j, "task");
  if (j.contains("config") && !j["config"].is_null()) {
    if (!j["config"].is_object()) throw Error("field 'config' is not an object");
    r.config = j["config"];
  }
  r.parameters = opt_number(j, "parameters");
  r.state_bytes = opt_number(j, "state_bytes");
  r.chance = opt_number(j, "chance");
  r.step = opt_int(j, "step");
  r.steps = opt_int(j, "steps");
  if (j.contains("final") && j["final"].is_object()) {
    const Json& f = j["final"];
    r.token_acc = opt_number(f, "token_acc");
    r.seq_acc = opt_number(f, "seq_acc");
    r.loss = opt_number(f, "loss");
    if (f.contains("extra")) read_acc_at(f["extra"], r.acc_at);
    if (r.task == "mqar") read_acc_at_pairs(f.value("extra", Json()), r);
  }
  if (j.contains("valid") && j["valid"].is_object()) r.valid_acc = opt_number(j["valid"], "token_acc");
  if (j.contains("lengths") && j["lengths"].is_array())
    for (const Json& l : j["lengths"]) {
      const std::optional<int64_t> t = opt_int(l, "seq_len");
      const std::optional<double> acc = opt_number(l, "token_acc");
      if (t && acc) r.lengths.emplace_back(*t, *acc);
    }
  return r;
}

ScalingRow parse_scaling(const Json& j) {
  if (!j.is_object()) throw Error("not a JSON object");
  ScalingRow s;
  s.model = opt_string(j, "model");
  s.what = opt_string(j, "what");
  const std::optional<int64_t> t = opt_int(j, "seq_len");
  const std::optional<double> ms = opt_number(j, "ms");
  if (s.model.empty() || s.what.empty() || !t || !ms)
    throw Error("needs model, what, seq_len and ms");
  s.seq_len = *t;
  s.ms = *ms;
  s.batch = opt_int(j, "batch").value_or(0);
  s.d_model = opt_int(j, "d_model").value_or(0);
  s.n_layers = opt_int(j, "n_layers").value_or(0);
  s.window = std::max<int64_t>(0, opt_int(j, "window").value_or(0));
  s.peak_bytes = opt_number(j, "peak_bytes");
  s.state_bytes = opt_number(j, "state_bytes");
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
    s.runs.push_back(parse_run(j, line));
    if (j.contains("varying") && j["varying"].is_array())
      for (const Json& k : j["varying"])
        if (k.is_string() && std::find(named_varying.begin(), named_varying.end(), k) == named_varying.end())
          named_varying.push_back(k.get<std::string>());
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
    if (!j.is_object() || opt_string(j, "split") != "train") return;
    const std::optional<double> step = opt_number(j, "step"), loss = opt_number(j, "loss");
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
