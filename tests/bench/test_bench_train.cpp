// `trilemma bench train` and `train --profile` through the binary. The rows describe the models
// the PyTorch comparison builds (parameter counts from a model built here), the FLOP counter
// counts what the step's GEMMs and attention kernel must do (derived here from the shapes), and
// the profile sees every op of the step the expected number of times. No timing is asserted.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "models/layers.hpp"
#include "models/lm.hpp"
#include "tests/run_binary.hpp"

namespace {

using namespace trilemma_test;
using nlohmann::json;

// Configuration S: d 128, 2 layers, 4 heads, T 256, B 16, vocabulary 64.
constexpr int64_t kD = 128, kLayers = 2, kHeads = 4, kT = 256, kB = 16, kV = 64;

// The parameters of a benchmark model built here. The comparison's (S): heads with biases and
// learned positions, a GELU MLP (Mamba: its blocks alone). The experiments' (E64): d 64, 1 head
// with learned positions and no biases (Mamba: no positions), no MLP, tied, vocabulary 512.
int64_t expected_params(const std::string& family, bool experiment = false, int64_t seq_len = 64) {
  tri::ModelConfig cfg = tri::ModelConfig::of(family);
  cfg.d_model = experiment ? 64 : kD;
  cfg.n_layers = kLayers;
  cfg.vocab = experiment ? 512 : kV;
  cfg.max_seq_len = experiment ? seq_len : kT;
  cfg.tie_embeddings = experiment;
  auto* heads = dynamic_cast<tri::HeadOptions*>(cfg.mixer.get());
  if (heads) {
    heads->n_heads = experiment ? 1 : kHeads;
    heads->bias = !experiment;
    cfg.pos = "learned";
  }
  if (experiment || !heads) cfg.mlp = "none";
  return tri::LanguageModel(cfg, 0).num_parameters();
}

// The attention model's step: every linear layer runs three GEMMs of 2 * rows * in * out flops
// (forward, d input, d weight): q, k, v, out and fc1 (d -> 4d) as `linear` with the head,
// fc2 (4d -> d) as `gelu_linear`; the kernel does per head 4 Dh flops per visible (query, key)
// pair forward (Q K^T, P V) and 10 backward (the scores again, dV, dP, dQ, dK).
constexpr double kRows = kB * kT;
double linear_gflop() { return 3 * 2 * kRows * (kLayers * 8 * kD * kD + kD * kV) * 1e-9; }
double gelu_linear_gflop() { return 3 * 2 * kRows * kLayers * 4 * kD * kD * 1e-9; }
double attention_kernel_gflop() {
  const double pairs = kT * (kT + 1) / 2.0, per_pair = 14.0 * (kD / kHeads) * kB * kHeads * kLayers;
  return pairs * per_pair * 1e-9;
}
double attention_gflop() { return linear_gflop() + gelu_linear_gflop() + attention_kernel_gflop(); }

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') rows.push_back(json::parse(line));
  return rows;
}

std::map<std::string, json> profile_ops(const json& row) {
  std::map<std::string, json> ops;
  for (const json& op : row.at("profile")) ops[op.at("op")] = op;
  return ops;
}

}  // namespace

TEST_CASE("bench train: one row per model with the comparison's parameters, FLOPs and profile") {
  Run r = run("bench train --configs S --models attention,linear,mamba --repeats 1 --threads 1 --json --profile",
              "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<json> rows = json_lines(r.out);
  REQUIRE(rows.size() == 3);
  for (const json& row : rows) {
    const std::string model = row.at("model");
    INFO(row.dump());
    CHECK(row.at("config") == "S");
    CHECK(row.at("params").get<int64_t>() == expected_params(model));
    CHECK(row.at("ms_median").get<double>() > 0);
    CHECK(row.at("peak_rss_mib").get<double>() > 1);
    CHECK(row.at("sgemm_peak_gflops").get<double>() > 0);
    CHECK(row.at("gflop_per_step").get<double>() > 0);
    CHECK(row.at("mlp") == (model == "mamba" ? "none" : "gelu"));
    const std::map<std::string, json> ops = profile_ops(row);
    CHECK(ops.at("adamw").at("calls") == 1);
    CHECK(ops.at("clip_grad_norm").at("calls") == 1);
    CHECK(ops.at("cross_entropy").at("calls") == 1);
    CHECK(ops.at("linear").at("backward_ms").get<double>() > 0);
  }
  const json& attention = rows[0];
  CHECK(attention.at("gflop_per_step").get<double>() == doctest::Approx(attention_gflop()).epsilon(1e-9));
  const std::map<std::string, json> ops = profile_ops(attention);
  CHECK(ops.at("attention").at("calls") == kLayers);
  CHECK(ops.at("linear").at("calls") == 5 * kLayers + 1);  // q, k, v, out, fc1; the head
  CHECK(ops.at("gelu_linear").at("calls") == kLayers);      // fc2(gelu(.))
  // Each op's FLOPs, counted in its own forward and backward windows: the GEMMs' in the op
  // that calls them, the kernel's in `attention`, none anywhere else.
  auto gflop = [&](const char* op) { return ops.at(op).at("gflop").get<double>(); };
  CHECK(gflop("linear") == doctest::Approx(linear_gflop()).epsilon(1e-9));
  CHECK(gflop("gelu_linear") == doctest::Approx(gelu_linear_gflop()).epsilon(1e-9));
  CHECK(gflop("attention") == doctest::Approx(attention_kernel_gflop()).epsilon(1e-9));
  CHECK(gflop("layer_norm") == 0);
  CHECK(gflop("adamw") == 0);
  const std::string text = attention.at("profile_text");
  CHECK(text.find("GFLOP/s") != std::string::npos);
  CHECK(text.find("peak") != std::string::npos);
  CHECK(profile_ops(rows[2]).at("selective_scan").at("calls") == kLayers);
}

TEST_CASE("bench train: the experiments' sizes, and rows run as two processes at once") {
  Run r = run("bench train --configs E64 --models attention,mamba --repeats 1 --threads 1 --processes 2 --json",
              "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<json> rows = json_lines(r.out);
  REQUIRE(rows.size() == 2);
  for (const json& row : rows) {
    INFO(row.dump());
    CHECK(row.at("config") == "E64");
    CHECK(row.at("task") == "mqar");
    CHECK(row.at("batch") == 64);
    CHECK(row.at("seq_len") == 64);
    CHECK(row.at("mlp") == "none");
    CHECK(row.at("params").get<int64_t>() == expected_params(row.at("model"), /*experiment=*/true));
    CHECK(row.at("processes") == 2);
    const std::vector<double> medians = row.at("ms_median_per_process");
    REQUIRE(medians.size() == 2);
    CHECK(row.at("ms_median").get<double>() == doctest::Approx((medians[0] + medians[1]) / 2));  // median of two
  }
}

TEST_CASE("bench train: E1024 trains the needle, which takes a vocabulary below T") {
  Run r = run("bench train --configs E1024 --models linear --repeats 1 --threads 1 --json", "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<json> rows = json_lines(r.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("task") == "needle");
  CHECK(rows[0].at("seq_len") == 1024);
  CHECK(rows[0].at("params").get<int64_t>() == expected_params("linear", /*experiment=*/true, 1024));
}

TEST_CASE("bench train: a table by default; an unknown configuration is one line") {
  Run bad = run("bench train --configs S,XL");
  CHECK(bad.code == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.err.find("'XL'") != std::string::npos);
  Run model = run("bench train --models transformer");
  CHECK(model.code == 2);
  CHECK(model.err.find("'transformer'") != std::string::npos);
}

TEST_CASE("train --profile: the table after the run, over the steps after the warm-up") {
  const fs::path out = scratch("profiled");
  Run r = run("train --model mamba --task induction --seq-len 16 --d-model 16 --n-layers 1 --batch 4 --steps 5 "
              "--eval-every 100 --eval-batches 1 --progress none --threads 1 --profile --out '" + out.string() + "'",
              "OMP_NUM_THREADS=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("profile, ms per step over 3 steps") != std::string::npos);
  CHECK(r.out.find("\nselective_scan ") != std::string::npos);
  CHECK(r.out.find("\nadamw ") != std::string::npos);
  CHECK(r.out.find("\nmake_batch ") != std::string::npos);
}
