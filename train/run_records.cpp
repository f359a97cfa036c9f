#include "train/run_records.hpp"

#include <cmath>
#include <fstream>
#include <set>

#include "framework/base/error.hpp"

namespace tri::train {

std::optional<double> json_number(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number()) throw Error(std::string("field '") + key + "' is not a number");
  return j[key].get<double>();
}

namespace {

int64_t integer(const Json& v, const char* key) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::abs(v.get<double>()) < 9e15 && v.get<double>() == std::floor(v.get<double>()))
    return int64_t(v.get<double>());
  throw Error(std::string("field '") + key + "' is not an integer");
}

}  // namespace

std::optional<int64_t> json_int(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  return integer(j[key], key);
}

std::string json_string(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  if (!j[key].is_string()) throw Error(std::string("field '") + key + "' is not a string");
  return j[key].get<std::string>();
}

namespace {

template <class T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json();
}

template <class T>
T required(const std::optional<T>& v, const char* key) {
  if (!v) throw Error(std::string("missing field '") + key + "'");
  return *v;
}

std::optional<std::vector<int64_t>> int_list(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_array()) throw Error(std::string("field '") + key + "' is not a list");
  std::vector<int64_t> out;
  for (const Json& v : j[key]) out.push_back(integer(v, key));
  return out;
}

// An extra metric's value: a number, or eval --json's object with "acc"; anything else is left
// out (it has no accuracy to report).
void add_extra(ExtraValues& extra, const std::string& name, const Json& v) {
  const Json& acc = v.is_object() && v.contains("acc") ? v["acc"] : v;
  if (acc.is_number()) extra.emplace_back(name, acc.get<double>());
}

Json extra_json(const ExtraValues& extra) {
  Json j = Json::object();
  for (const auto& [name, value] : extra) j[name] = value;
  return j;
}

void read_scores(const Json& j, Scores& s) {
  s.token_acc = json_number(j, "token_acc");
  s.seq_acc = json_number(j, "seq_acc");
  s.loss = json_number(j, "loss");
}

// The summary holds an evaluation flat, its extra metrics beside the scores; a results row
// nests them under "extra".
Json flat_json(const StepScores& s) {
  Json j = {{"step", or_null(s.step)}, {"token_acc", or_null(s.token_acc)}, {"seq_acc", or_null(s.seq_acc)},
            {"loss", or_null(s.loss)}};
  for (const auto& [name, value] : s.extra) j[name] = value;
  return j;
}

std::optional<StepScores> read_flat(const Json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_object()) return std::nullopt;
  const Json& f = j[key];
  StepScores s;
  s.step = json_int(f, "step");
  read_scores(f, s);
  for (const auto& [name, v] : f.items())
    if (name != "step" && name != "token_acc" && name != "seq_acc" && name != "loss") add_extra(s.extra, name, v);
  return s;
}

Json nested_json(const StepScores& s) {
  return {{"step", or_null(s.step)}, {"token_acc", or_null(s.token_acc)}, {"seq_acc", or_null(s.seq_acc)},
          {"loss", or_null(s.loss)}, {"extra", extra_json(s.extra)}};
}

void read_nested_extra(const Json& j, Scores& s) {
  if (j.contains("extra") && j["extra"].is_object())
    for (const auto& [name, v] : j["extra"].items()) add_extra(s.extra, name, v);
}

std::optional<StepScores> read_nested(const Json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_object()) return std::nullopt;
  StepScores s;
  s.step = json_int(j[key], "step");
  read_scores(j[key], s);
  read_nested_extra(j[key], s);
  return s;
}

Json lengths_json(const std::vector<LengthScores>& lengths) {
  Json out = Json::array();
  for (const LengthScores& l : lengths)
    out.push_back({{"seq_len", l.seq_len}, {"token_acc", or_null(l.token_acc)}, {"seq_acc", or_null(l.seq_acc)},
                   {"loss", or_null(l.loss)}, {"extra", extra_json(l.extra)}});
  return out;
}

// The evaluations at other lengths; an entry without its length says nothing and is left out.
std::vector<LengthScores> read_lengths(const Json& j) {
  std::vector<LengthScores> out;
  if (!j.contains("lengths") || !j["lengths"].is_array()) return out;
  for (const Json& l : j["lengths"]) {
    const std::optional<int64_t> t = json_int(l, "seq_len");
    if (!t) continue;
    LengthScores s;
    s.seq_len = *t;
    read_scores(l, s);
    read_nested_extra(l, s);
    out.push_back(std::move(s));
  }
  return out;
}

Json config_of(const Json& j) {
  if (!j.contains("config") || j["config"].is_null()) return Json::object();
  if (!j["config"].is_object()) throw Error("field 'config' is not an object");
  return j["config"];
}

}  // namespace

void to_json(Json& j, const RunSummary& s) {
  j = Json::object();
  j["status"] = s.status;
  j["step"] = s.step;
  j["steps"] = s.steps;
  j["tokens_seen"] = s.tokens_seen;
  j["final_train_loss"] = or_null(s.final_train_loss);
  j["skipped_steps"] = or_null(s.skipped_steps);
  j["final_eval"] = s.final_eval ? flat_json(*s.final_eval) : Json();
  j["final_valid"] = s.final_valid ? flat_json(*s.final_valid) : Json();
  j["best_valid_acc"] = or_null(s.best_valid_acc);
  j["best_step"] = or_null(s.best_step);
  j["parameters"] = s.parameters;
  j["state_bytes_per_sequence"] = s.state_bytes_per_sequence;
  j["state_bytes_per_layer"] = or_null(s.state_bytes_per_layer);
  j["params_fnv1a"] = s.params_fnv1a;
  j["elapsed_s"] = s.elapsed_s;
  j["tokens_per_s"] = or_null(s.tokens_per_s);
  j["ms_per_step"] = or_null(s.ms_per_step);
  j["peak_memory_bytes"] = s.peak_memory_bytes;
  j["chance_token_acc"] = or_null(s.chance_token_acc);
  j["lengths"] = lengths_json(s.lengths);
  j["config"] = s.config;
}

void from_json(const Json& j, RunSummary& s) {
  if (!j.is_object()) throw Error("not a JSON object");
  s.status = json_string(j, "status");
  if (s.status.empty()) throw Error("missing field 'status'");
  s.step = required(json_int(j, "step"), "step");
  s.steps = required(json_int(j, "steps"), "steps");
  s.tokens_seen = required(json_int(j, "tokens_seen"), "tokens_seen");
  s.final_train_loss = json_number(j, "final_train_loss");
  s.skipped_steps = json_int(j, "skipped_steps");
  s.final_eval = read_flat(j, "final_eval");
  s.final_valid = read_flat(j, "final_valid");
  s.best_valid_acc = j.contains("best_valid_acc") ? json_number(j, "best_valid_acc") : json_number(j, "best_eval_acc");
  s.best_step = json_int(j, "best_step");
  s.parameters = required(json_int(j, "parameters"), "parameters");
  s.state_bytes_per_sequence = required(json_int(j, "state_bytes_per_sequence"), "state_bytes_per_sequence");
  s.state_bytes_per_layer = int_list(j, "state_bytes_per_layer");
  s.params_fnv1a = json_string(j, "params_fnv1a");
  s.elapsed_s = required(json_number(j, "elapsed_s"), "elapsed_s");
  s.tokens_per_s = json_number(j, "tokens_per_s");
  s.ms_per_step = json_number(j, "ms_per_step");
  s.peak_memory_bytes = required(json_int(j, "peak_memory_bytes"), "peak_memory_bytes");
  s.chance_token_acc = json_number(j, "chance_token_acc");
  s.lengths = read_lengths(j);
  s.config = config_of(j);
}

std::string summary_text(const RunSummary& s) { return Json(s).dump(2) + "\n"; }

std::optional<RunSummary> read_summary(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return Json::parse(in).get<RunSummary>();
  } catch (const Json::exception&) {
    return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
}

void to_json(Json& j, const ResultsRow& r) {
  j = Json::object();
  j["id"] = r.id;
  j["section"] = r.section;
  j["status"] = r.status;
  j["error"] = or_null(r.error);
  j["model"] = r.model;
  j["task"] = r.task;
  j["config"] = r.config;
  j["varying"] = r.varying;
  j["parameters"] = or_null(r.parameters);
  j["state_bytes"] = or_null(r.state_bytes);
  j["state_bytes_per_layer"] = or_null(r.state_bytes_per_layer);
  j["step"] = or_null(r.step);
  j["steps"] = or_null(r.steps);
  j["wall_s"] = or_null(r.wall_s);
  j["tokens_per_s"] = or_null(r.tokens_per_s);
  j["ms_per_step"] = or_null(r.ms_per_step);
  j["peak_memory_bytes"] = or_null(r.peak_memory_bytes);
  j["chance"] = or_null(r.chance);
  j["final"] = r.final_eval ? nested_json(*r.final_eval) : Json();
  j["valid"] = r.final_valid ? nested_json(*r.final_valid) : Json();
  j["best"] = r.best ? Json{{"token_acc", or_null(r.best->token_acc)}, {"step", or_null(r.best->step)}} : Json();
  j["lengths"] = lengths_json(r.lengths);
}

void from_json(const Json& j, ResultsRow& r) {
  if (!j.is_object()) throw Error("not a JSON object");
  r.id = json_string(j, "id");
  if (r.id.empty()) throw Error("missing field 'id'");
  r.section = json_string(j, "section");
  r.status = json_string(j, "status");
  r.error = j.contains("error") && !j["error"].is_null() ? std::optional(json_string(j, "error")) : std::nullopt;
  r.model = json_string(j, "model");
  r.task = json_string(j, "task");
  r.config = config_of(j);
  r.varying.clear();
  if (j.contains("varying") && j["varying"].is_array())
    for (const Json& k : j["varying"])
      if (k.is_string()) r.varying.push_back(k.get<std::string>());
  r.parameters = json_int(j, "parameters");
  r.state_bytes = json_int(j, "state_bytes");
  r.state_bytes_per_layer = int_list(j, "state_bytes_per_layer");
  r.step = json_int(j, "step");
  r.steps = json_int(j, "steps");
  r.wall_s = json_number(j, "wall_s");
  r.tokens_per_s = json_number(j, "tokens_per_s");
  r.ms_per_step = json_number(j, "ms_per_step");
  r.peak_memory_bytes = json_int(j, "peak_memory_bytes");
  r.chance = json_number(j, "chance");
  r.final_eval = read_nested(j, "final");
  r.final_valid = read_nested(j, "valid");
  r.best.reset();
  if (j.contains("best") && j["best"].is_object())
    r.best = ResultsRow::Best{json_number(j["best"], "token_acc"), json_int(j["best"], "step")};
  r.lengths = read_lengths(j);
}

namespace {

Json value_or_null(const Json& j, const std::string& key) { return j.is_object() && j.contains(key) ? j[key] : Json(); }

std::string csv_cell(const Json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string()) s = v.get<std::string>();
  else if (v.is_array()) {
    for (const Json& x : v) {  // a list: items separated by spaces
      if (!s.empty()) s += ' ';
      s += x.dump();
    }
  } else s = v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q(1, '"');
  for (char c : s) {
    q += c;
    if (c == '"') q += '"';  // a quote inside a quoted cell is doubled
  }
  q += '"';
  return q;
}

}  // namespace

// The cells are the rows' JSON values, so a number reads the same in both files.
std::string results_csv(const std::vector<ResultsRow>& records) {
  std::vector<Json> rows(records.begin(), records.end());
  std::set<std::string> config_keys, extra_keys;
  std::set<int64_t> lengths;
  for (const ResultsRow& r : records) {
    for (const auto& [k, v] : r.config.items()) config_keys.insert(k);
    if (r.final_eval)
      for (const auto& [k, v] : r.final_eval->extra) extra_keys.insert(k);
    for (const LengthScores& l : r.lengths) lengths.insert(l.seq_len);
  }
  const std::vector<std::string> head = {"id", "section", "status", "model", "task"};
  const std::vector<std::string> outcome = {"parameters", "state_bytes", "step", "steps", "wall_s", "tokens_per_s",
                                            "ms_per_step", "peak_memory_bytes", "chance"};
  config_keys.erase("model"), config_keys.erase("task"), config_keys.erase("steps");  // columns of their own
  std::vector<std::string> columns = head;
  columns.insert(columns.end(), config_keys.begin(), config_keys.end());
  columns.insert(columns.end(), outcome.begin(), outcome.end());
  for (const char* c : {"final_token_acc", "final_seq_acc", "final_loss", "valid_token_acc", "best_token_acc", "best_step"})
    columns.push_back(c);
  for (const std::string& k : extra_keys) columns.push_back("final_" + k);
  for (int64_t L : lengths)
    for (const char* m : {"token_acc", "seq_acc"}) columns.push_back("len" + std::to_string(L) + "_" + m);
  columns.push_back("error");

  std::string out = joined(columns, ",") + "\n";
  for (const Json& r : rows) {
    std::vector<std::string> cells;
    for (const std::string& k : head) cells.push_back(csv_cell(r[k]));
    for (const std::string& k : config_keys) cells.push_back(csv_cell(value_or_null(r["config"], k)));
    for (const std::string& k : outcome) cells.push_back(csv_cell(r[k]));
    const Json& f = r["final"];
    for (const char* k : {"token_acc", "seq_acc", "loss"}) cells.push_back(csv_cell(value_or_null(f, k)));
    cells.push_back(csv_cell(value_or_null(r["valid"], "token_acc")));
    cells.push_back(csv_cell(value_or_null(r["best"], "token_acc")));
    cells.push_back(csv_cell(value_or_null(r["best"], "step")));
    for (const std::string& k : extra_keys)
      cells.push_back(csv_cell(f.is_object() ? value_or_null(f["extra"], k) : Json()));
    for (int64_t L : lengths) {
      Json at;
      for (const Json& l : r["lengths"])
        if (l["seq_len"] == L) at = l;
      cells.push_back(csv_cell(value_or_null(at, "token_acc")));
      cells.push_back(csv_cell(value_or_null(at, "seq_acc")));
    }
    cells.push_back(csv_cell(r["error"]));
    out += joined(cells, ",") + "\n";
  }
  return out;
}

}  // namespace tri::train
