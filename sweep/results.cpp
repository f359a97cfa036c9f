#include "sweep/results.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "framework/io/atomic_file.hpp"

namespace tri::sweep {

using namespace tri::train;

namespace fs = std::filesystem;

namespace {

// A JSON file, or null when it is missing or unreadable (a run that never got that far).
Json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Json();
  try {
    return Json::parse(in);
  } catch (const Json::exception&) {
    return Json();
  }
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

Json value_or_null(const Json& j, const char* key) { return j.is_object() && j.contains(key) ? j[key] : Json(); }

// summary.json's final_eval (held-out test stream) or final_valid (validation stream) holds the
// extra metrics beside the scores; the row nests them.
Json final_scores(const Json& summary, const char* key) {
  const Json f = value_or_null(summary, key);
  if (!f.is_object()) return Json();
  Json out = {{"step", f.value("step", Json())}, {"token_acc", f.value("token_acc", Json())},
              {"seq_acc", f.value("seq_acc", Json())}, {"loss", f.value("loss", Json())}};
  Json extra = Json::object();
  for (const auto& [k, v] : f.items())
    if (k != "step" && k != "token_acc" && k != "seq_acc" && k != "loss") extra[k] = v;
  out["extra"] = extra;
  return out;
}

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

std::string csv_text(const std::vector<Json>& rows) {
  std::set<std::string> config_keys, extra_keys;
  std::set<int64_t> lengths;
  for (const Json& r : rows) {
    for (const auto& [k, v] : r["config"].items()) config_keys.insert(k);
    if (r["final"].is_object())
      for (const auto& [k, v] : r["final"]["extra"].items()) extra_keys.insert(k);
    for (const Json& l : r["lengths"]) lengths.insert(l["seq_len"].get<int64_t>());
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
    for (const std::string& k : config_keys) cells.push_back(csv_cell(value_or_null(r["config"], k.c_str())));
    for (const std::string& k : outcome) cells.push_back(csv_cell(r[k]));
    const Json& f = r["final"];
    for (const char* k : {"token_acc", "seq_acc", "loss"}) cells.push_back(csv_cell(value_or_null(f, k)));
    cells.push_back(csv_cell(value_or_null(r["valid"], "token_acc")));
    cells.push_back(csv_cell(value_or_null(r["best"], "token_acc")));
    cells.push_back(csv_cell(value_or_null(r["best"], "step")));
    for (const std::string& k : extra_keys)
      cells.push_back(csv_cell(f.is_object() ? value_or_null(f["extra"], k.c_str()) : Json()));
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

}  // namespace

std::string run_folder(const std::string& dir, const std::string& id) { return dir + "/runs/" + id; }
std::string log_path(const std::string& dir, const std::string& id) { return dir + "/logs/" + id + ".log"; }
std::string error_path(const std::string& dir, const std::string& id) { return dir + "/logs/" + id + ".error"; }

bool is_done(const std::string& status) { return status == "finished" || status == "early_stop"; }

namespace {

// The status given the run's summary.json (null when it has none).
std::string status_of(const std::string& dir, const std::string& id, const Json& summary) {
  const Json s = value_or_null(summary, "status");
  const std::string status = s.is_string() ? s.get<std::string>() : "";
  if (is_done(status)) return status;
  if (fs::exists(error_path(dir, id))) return "failed";
  if (!status.empty()) return status;
  return fs::exists(run_folder(dir, id) + "/last.h5") ? "interrupted" : "pending";
}

}  // namespace

std::string run_status(const std::string& dir, const std::string& id) {
  return status_of(dir, id, read_json(run_folder(dir, id) + "/summary.json"));
}

Json result_row(const SweepRun& run, const std::string& dir, const Grid& grid) {
  const Json s = read_json(run_folder(dir, run.id) + "/summary.json");
  const std::string status = status_of(dir, run.id, s);
  Json config = config_json(run.config);
  for (auto it = config.begin(); it != config.end();)
    it = is_execution_key(it.key()) ? config.erase(it) : std::next(it);
  Json row;
  row["id"] = run.id;
  row["section"] = run.section;
  row["status"] = status;
  row["error"] = status == "failed" ? Json(first_line(error_path(dir, run.id))) : Json();
  row["model"] = run.config.model.variant();  // the family, or the hybrid or variant it is
  row["task"] = run.config.task.task;
  row["config"] = config;
  row["varying"] = grid.varying;
  row["parameters"] = value_or_null(s, "parameters");
  row["state_bytes"] = value_or_null(s, "state_bytes_per_sequence");
  row["state_bytes_per_layer"] = value_or_null(s, "state_bytes_per_layer");
  row["step"] = value_or_null(s, "step");
  row["steps"] = run.config.run.steps;
  row["wall_s"] = value_or_null(s, "elapsed_s");
  row["tokens_per_s"] = value_or_null(s, "tokens_per_s");
  row["ms_per_step"] = value_or_null(s, "ms_per_step");
  row["peak_memory_bytes"] = value_or_null(s, "peak_memory_bytes");
  row["chance"] = run.config.task.behaviour().chance_accuracy(run.config.task);
  row["final"] = final_scores(s, "final_eval");
  row["valid"] = final_scores(s, "final_valid");
  row["best"] = value_or_null(s, "best_step").is_null()
                    ? Json()
                    : Json{{"token_acc", s["best_valid_acc"]}, {"step", s["best_step"]}};
  row["lengths"] = value_or_null(s, "lengths").is_array() ? s["lengths"] : Json::array();
  return row;
}

void write_results(const std::string& dir, const Grid& grid) {
  std::vector<Json> rows;
  std::string jsonl;
  for (const SweepRun& r : grid.runs) {
    rows.push_back(result_row(r, dir, grid));
    jsonl += rows.back().dump() + "\n";
  }
  write_text_atomically(dir + "/results.jsonl", jsonl);
  write_text_atomically(dir + "/results.csv", csv_text(rows));
}

}  // namespace tri::sweep
