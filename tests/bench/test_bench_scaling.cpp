// `trilemma bench scaling` through the binary at tiny sizes: every (model, window, what, seq_len)
// row is there, once, with a positive time, the peak memory where it belongs, and the model's
// recurrent state bytes as a model built here reports them; windowed attention's rows (--window)
// come after the others and carry their window, the others no window field. No timing is asserted.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "models/lm.hpp"
#include "tests/run_binary.hpp"

namespace {

using namespace trilemma_test;
using nlohmann::json;

// A window between the two lengths: the KV cache stops growing between them.
const char* const kArgs =
    "bench scaling --seq-lens 32,64 --d-model 16 --repeats 1 --decode-tokens 2 --threads 1 --window 48";

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(json::parse(line));
  return rows;
}

// The state bytes of the model the benchmark describes (2 layers of width 16), built here.
int64_t expected_state_bytes(const std::string& family, int64_t T, int64_t window = 0) {
  tri::ModelConfig cfg = tri::ModelConfig::of(family);
  if (window) tri::read_text(cfg, {{"window", std::to_string(window)}}, false);
  cfg.d_model = 16;
  cfg.n_layers = 2;
  cfg.vocab = 64;
  return tri::LanguageModel(cfg, 0).state_bytes(T);
}

}  // namespace

TEST_CASE("bench scaling: every model, measurement and length, with the model's state bytes") {
  const fs::path out = scratch("scaling.jsonl");
  Run r = run(std::string(kArgs) + " --json --out '" + out.string() + "'", "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const std::vector<json> printed = json_lines(r.out), written = json_lines(read_text(out));
  CHECK(printed == written);  // --json prints exactly the lines --out writes
  REQUIRE(written.size() == 4 * 3 * 2);

  std::set<std::tuple<std::string, int64_t, std::string, int64_t>> seen;
  for (size_t i = 0; i < written.size(); ++i) {
    const json& row = written[i];
    const std::string model = row.at("model"), what = row.at("what");
    const int64_t T = row.at("seq_len"), window = row.value("window", int64_t(0));
    INFO(row.dump());
    CHECK(seen.insert({model, window, what, T}).second);
    CHECK(window == (i < 3 * 3 * 2 ? 0 : 48));  // the windowed series last
    CHECK(row.contains("window") == (window > 0));  // the other rows as before: no window field
    CHECK(row.at("ms").get<double>() > 0);
    CHECK(row.at("d_model") == 16);
    CHECK(row.at("n_layers") == 2);
    CHECK(row.at("state_bytes").get<int64_t>() == expected_state_bytes(model, T, window));
    if (what == "decode") {
      CHECK(row.at("peak_bytes").is_null());
      CHECK(row.at("batch") == 1);
      CHECK(row.at("repeats") == 2);  // the decode tokens timed
    } else {
      CHECK(row.at("peak_bytes").get<int64_t>() > 0);
      CHECK(row.at("batch") == 4);
      CHECK(row.at("repeats") == 1);
    }
    CHECK(row.at("pos") == (model == "mamba" ? "none" : "rope"));
  }
  const std::pair<const char*, int64_t> series[] = {{"attention", 0}, {"linear", 0}, {"mamba", 0}, {"attention", 48}};
  for (auto [model, window] : series)
    for (const char* what : {"model", "mixer", "decode"})
      for (int64_t T : {32, 64}) CHECK(seen.count({model, window, what, T}) == 1);
  // Attention's KV cache grows with T, up to its window; the recurrent states do not grow.
  CHECK(expected_state_bytes("attention", 64) == 2 * expected_state_bytes("attention", 32));
  CHECK(expected_state_bytes("attention", 64, 48) == 48 * expected_state_bytes("attention", 32, 48) / 32);
  // The table names the windowed series.
  Run table = run(std::string(kArgs), "OMP_NUM_THREADS=1");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("\nattention w=48 model ") != std::string::npos);
  CHECK(expected_state_bytes("mamba", 64) == expected_state_bytes("mamba", 32));
}

TEST_CASE("bench scaling: a table by default, one family with --models, one-line errors") {
  Run r = run("bench scaling --models mamba --seq-lens 16 --d-model 16 --repeats 1 --decode-tokens 2 --threads 1",
              "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("mamba      decode") != std::string::npos);
  CHECK(r.out.find("attention") == std::string::npos);

  Run bad = run("bench scaling --models mamba,transformer");
  CHECK(bad.code == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.err.find("'transformer'") != std::string::npos);
  Run heads = run("bench scaling --d-model 18 --heads 4 --seq-lens 16");
  CHECK(heads.code == 2);
  CHECK(count_lines(heads.err) == 1);
  Run window = run("bench scaling --window -1 --seq-lens 16");
  CHECK(window.code == 2);
  CHECK(count_lines(window.err) == 1);
  CHECK(window.err.find("--window -1 is out of range (allowed: 0..16384)") != std::string::npos);
}

TEST_CASE("bench decode: the decode rows alone, at the lengths asked") {
  Run r = run("bench decode --seq-lens 16,48 --d-model 16 --decode-tokens 2 --threads 1 --json --window 20",
              "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<json> rows = json_lines(r.out);
  REQUIRE(rows.size() == 4 * 2);
  for (const json& row : rows) {
    CHECK(row.at("what") == "decode");
    CHECK(row.at("ms").get<double>() > 0);
    const int64_t T = row.at("seq_len"), window = row.value("window", int64_t(0));
    CHECK(row.at("state_bytes").get<int64_t>() == expected_state_bytes(row.at("model"), T, window));
  }
  CHECK(rows.back().value("window", 0) == 20);
}
