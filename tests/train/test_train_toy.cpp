// End to end: `trilemma train` takes a small attention model to high held-out accuracy on a
// small recall task, and two runs with the same seed and thread count give identical bits
// (every metrics row and every parameter), at one thread and at two.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/run_binary.hpp"

using namespace trilemma_test;

namespace {

// Copy (strings of 5-6 tokens over an alphabet of 8, rows of 15) with a 2-layer attention model of
// width 48 and RoPE: measured 0.999 held-out token accuracy and loss 0.053 after 300 steps, about
// 2 s on one thread; chance is 1/8 and the loss starts near log(12) = 2.48.
const std::string kToy =
    "train --model attention --pos rope --task copy --alphabet 8 --max-len 6 --d-model 48 --warmup 20"
    " --log-every 50 --progress none";
const std::string kFull = " --steps 300 --eval-every 300";

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE_MESSAGE(in, "cannot read " << file);
  return nlohmann::json::parse(in);
}

// Every metrics row without its timing fields (ms_per_step, tokens_per_s, elapsed_s), which no
// two runs share; everything else must match bit for bit (JSON prints doubles exactly).
std::string rows_without_timing(const fs::path& jsonl) {
  std::istringstream in(read_text(jsonl));
  std::string line, out;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line);
    for (const char* key : {"ms_per_step", "tokens_per_s", "elapsed_s"}) row.erase(key);
    out += row.dump() + "\n";
  }
  return out;
}

struct Trained {
  nlohmann::json summary;
  std::string rows;
};

Trained train(const std::string& name, const std::string& extra) {
  const fs::path dir = scratch(name);
  Run r = run(kToy + extra + " --out '" + dir.string() + "'");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return {read_json(dir / "summary.json"), rows_without_timing(dir / "metrics.jsonl")};
}

}  // namespace

TEST_CASE("train learns a recall task and repeats bit for bit") {
  const Trained a = train("toy-a", kFull + " --threads 1"), b = train("toy-b", kFull + " --threads 1");
  const nlohmann::json& eval = a.summary["final_eval"];
  CHECK(eval["token_acc"].get<double>() >= 0.95);
  // The evaluation loss falls from about log(12) = 2.48 to well under 0.5.
  CHECK(eval["loss"].get<double>() < 0.5);
  CHECK(a.summary["params_fnv1a"] == b.summary["params_fnv1a"]);
  CHECK(a.summary["final_train_loss"] == b.summary["final_train_loss"]);
  CHECK(a.summary["final_eval"] == b.summary["final_eval"]);
  CHECK(count_lines(a.rows) == 300 / 50 + 1);  // --log-every 50 rows and the evaluation
  CHECK(a.rows == b.rows);

  SUBCASE("another seed gives other parameters") {
    const Trained c = train("toy-seed", kFull + " --threads 1 --seed 7");
    CHECK(c.summary["params_fnv1a"] != a.summary["params_fnv1a"]);
  }
}

// Two threads split the kernels' loops; a loaded machine makes them slow, so fewer steps.
TEST_CASE("train repeats bit for bit on two threads too") {
  const std::string shorter = " --threads 2 --steps 40 --eval-every 40";
  const Trained a = train("toy-2a", shorter), b = train("toy-2b", shorter);
  CHECK(a.summary["params_fnv1a"] == b.summary["params_fnv1a"]);
  CHECK(a.summary["final_eval"] == b.summary["final_eval"]);
  CHECK(count_lines(a.rows) == 1 + 1);  // the last step's row and the evaluation
  CHECK(a.rows == b.rows);
}

TEST_CASE("train rejects a bad value with one line and exit code 2") {
  Run r = run(kToy + kFull + " --n-heads 5 --out '" + scratch("toy-bad").string() + "'");
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("--n-heads 5") != std::string::npos);
  CHECK(!fs::exists(scratch("toy-bad")));
}
