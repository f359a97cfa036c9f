// `trilemma attn-map` on a tiny attention model that `trilemma train` writes (mqar, RoPE):
//  - the PNG (when gnuplot is here) and the --data text: one T x T matrix per (layer, head),
//    every row summing to 1, exactly zero above the diagonal (causal);
//  - the recorded forward (naive kernel through the probes) gives the fused forward's logits,
//    for every position encoding attention takes, and leaves the probes cleared;
//  - the recall table names every head; without gnuplot the PNG is skipped with one line;
//  - a Mamba checkpoint and a layer out of range are refused with one line;
//  - the tasks' recall sources hold the scored target (mqar, induction, needle).
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "data/tasks.hpp"
#include "framework/core/autograd.hpp"
#include "framework/core/rng.hpp"
#include "models/attention.hpp"
#include "models/lm.hpp"
#include "tests/run_binary.hpp"
#include "train/model_io.hpp"

namespace {

using namespace trilemma_test;

const char* const kTask = "--task mqar --vocab 32 --seq-len 16 --num-kv-pairs 2 --d-model 16 --threads 1 --progress none";
constexpr int64_t kT = 16, kLayers = 2, kHeads = 2;

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

fs::path trained(const std::string& model, int steps) {
  const fs::path dir = scratch("run_" + model);
  if (!fs::exists(dir / "last.h5")) {
    const std::string pos = model == "attention" ? " --pos rope --n-heads 2" : "";
    Run r = run("train --model " + model + pos + " " + kTask + " --steps " + std::to_string(steps) +
                " --eval-every " + std::to_string(steps) + " --lr 0.01 --warmup 5 --out " + q(dir));
    INFO(r.err);
    REQUIRE(r.code == 0);
  }
  return dir / "last.h5";
}

// The --data file's matrices, in file order.
std::vector<std::vector<std::vector<double>>> read_matrices(const fs::path& file) {
  std::vector<std::vector<std::vector<double>>> m;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# layer", 0) == 0) m.emplace_back();
    if (line.empty() || line[0] == '#') continue;
    REQUIRE(!m.empty());
    std::istringstream values(line);
    m.back().emplace_back();
    for (double v; values >> v;) m.back().back().push_back(v);
  }
  return m;
}

bool gnuplot_here() { return capture("command -v gnuplot >/dev/null 2>&1 && echo yes") == "yes"; }

double max_abs_diff(const tri::Tensor& a, const tri::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, double(std::fabs(a.data()[i] - b.data()[i])));
  return d;
}

// record_attention's probabilities: rows sum to 1, zero above the diagonal; its logits equal the
// fused forward's; the probes are cleared afterwards.
void check_recording(tri::LanguageModel& model, const tri::IntTensor& ids) {
  const tri::AttentionRecording rec = tri::record_attention(model, ids);
  tri::Tensor logits;
  {
    tri::NoGradGuard no_grad;
    logits = model.forward(ids);
  }
  CHECK(max_abs_diff(rec.logits, logits) <= 1e-5);
  REQUIRE(rec.probs.size() == model.layers.size());
  const int64_t T = ids.shape()[1];
  for (const tri::Tensor& p : rec.probs) {
    REQUIRE(p.shape() == tri::Shape{ids.shape()[0], p.shape()[1], T, T});
    for (int64_t row = 0; row < p.numel() / T; ++row) {
      const float* r = p.data() + row * T;
      const int64_t query = row % T;
      double sum = 0;
      for (int64_t k = 0; k < T; ++k) {
        sum += r[k];
        if (k > query) CHECK(r[k] == 0.f);
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
    }
  }
  for (const auto& layer : model.layers)
    CHECK(dynamic_cast<tri::MultiHeadAttention&>(*layer->mixer).probe == nullptr);
}

}  // namespace

TEST_CASE("attn-map: PNG, causal probability rows summing to 1, the recall table") {
  const fs::path ckpt = trained("attention", 30), png = scratch("map.png"), data = scratch("map.txt");
  Run r = run("attn-map " + q(ckpt) + " --row 1 --out " + q(png) + " --data " + q(data) + " --threads 1");
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  if (gnuplot_here()) {
    REQUIRE(fs::exists(png));
    CHECK(read_text(png).substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
    CHECK(r.out.find("png: " + png.string()) != std::string::npos);
  } else {
    CHECK(r.out.find("png skipped") != std::string::npos);
  }
  const auto matrices = read_matrices(data);
  REQUIRE(matrices.size() == size_t(kLayers * kHeads));
  for (const auto& m : matrices) {
    REQUIRE(m.size() == size_t(kT));
    for (int64_t query = 0; query < kT; ++query) {
      REQUIRE(m[size_t(query)].size() == size_t(kT));
      double sum = 0;
      for (int64_t key = 0; key < kT; ++key) {
        sum += m[size_t(query)][size_t(key)];
        if (key > query) CHECK(m[size_t(query)][size_t(key)] == 0.0);
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
    }
  }
  CHECK(r.out.find("recall: mean probability the 2 scored positions") != std::string::npos);
  for (const char* head : {"     0     0  ", "     0     1  ", "     1     0  ", "     1     1  "})
    CHECK(r.out.find(head) != std::string::npos);
  CHECK(r.out.find("strongest recall head: layer ") != std::string::npos);

  // One layer only: its two heads.
  const fs::path one = scratch("layer1.txt");
  Run layer = run("attn-map " + q(ckpt) + " --row 1 --layer 1 --out " + q(scratch("layer1.png")) + " --data " + q(one));
  REQUIRE(layer.code == 0);
  const auto two = read_matrices(one);
  REQUIRE(two.size() == 2);
  CHECK(two[0] == matrices[2]);
  CHECK(two[1] == matrices[3]);
}

TEST_CASE("attn-map: the recorded forward equals the forward, for every position encoding") {
  tri::train::LoadedModel loaded = tri::train::load_model(trained("attention", 30).string());
  tri::Rng rng(3);
  std::vector<int32_t> ids(2 * kT);
  for (int32_t& id : ids) id = int32_t(rng.below(32));
  check_recording(*loaded.model, tri::IntTensor(tri::Shape{2, kT}, ids));
  for (const char* pos : {"none", "sinusoidal", "learned", "rope", "alibi"}) {
    INFO(pos);
    tri::ModelConfig cfg = tri::ModelConfig::of("attention");
    cfg.vocab = 32;
    cfg.d_model = 16;
    cfg.pos = pos;
    cfg.max_seq_len = kT;
    tri::LanguageModel model(cfg, 7);
    check_recording(model, tri::IntTensor(tri::Shape{2, kT}, ids));
  }
  tri::ModelConfig mamba = tri::ModelConfig::of("mamba");
  mamba.vocab = 32;
  tri::LanguageModel m(mamba, 1);
  CHECK_THROWS_WITH(tri::record_attention(m, tri::IntTensor(tri::Shape{1, 4}, {1, 2, 3, 4})),
                    doctest::Contains("mamba"));
}

TEST_CASE("attn-map: without gnuplot the data is written and the PNG skipped in one line") {
  const fs::path ckpt = trained("attention", 30), png = scratch("nognuplot.png");
  Run r = run("attn-map " + q(ckpt) + " --out " + q(png), "TRILEMMA_GNUPLOT=/nonexistent/gnuplot");
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(!fs::exists(png));
  CHECK(fs::exists(scratch("nognuplot.txt")));
  CHECK(read_matrices(scratch("nognuplot.txt")).size() == size_t(kLayers * kHeads));
  CHECK(r.out.find("png skipped: gnuplot not found") != std::string::npos);
}

TEST_CASE("attn-map: a Mamba checkpoint and a layer out of range are refused with one line") {
  Run mamba = run("attn-map " + q(trained("mamba", 2)));
  CHECK(mamba.code == 2);
  CHECK(count_lines(mamba.err) == 1);
  CHECK(mamba.err.find("holds model mamba") != std::string::npos);
  CHECK(mamba.out.empty());
  Run layer = run("attn-map " + q(trained("attention", 30)) + " --layer 2");
  CHECK(layer.code == 2);
  CHECK(count_lines(layer.err) == 1);
  CHECK(layer.err.find("--layer 2") != std::string::npos);
}

TEST_CASE("attn-map: the recall source of mqar, induction and needle holds the target, before the query") {
  for (const char* name : {"mqar", "induction", "needle"}) {
    INFO(name);
    tri::TaskConfig task = tri::TaskConfig::of(name);
    task.vocab = 64;
    task.seq_len = 40;
    if (std::string(name) == "needle") tri::read_text(task, {{"distance", "4,16,30"}}, false);
    const tri::Batch b = tri::make_batch(task, tri::stream_seed(0, "eval"), 0, 12);
    int64_t scored = 0;
    for (int64_t row = 0; row < 12; ++row) {
      const int32_t* x = b.inputs.data() + row * 40;
      for (int64_t t = 0; t < 40; ++t) {
        if (!b.mask[size_t(row * 40 + t)]) continue;
        const int64_t s = task.behaviour().recall_source(x, t);
        REQUIRE(s >= 1);
        CHECK(s < t);
        CHECK(x[s] == b.targets.data()[row * 40 + t]);
        ++scored;
      }
    }
    CHECK(scored >= 12);
  }
  tri::TaskConfig copy = tri::TaskConfig::of("copy");
  const int32_t x[4] = {1, 2, 1, 2};
  CHECK(copy.behaviour().recall_source(x, 2) == -1);  // copy names none
}
