// models/decode.hpp: greedy decoding through the recurrent state.
//  - greedy_decode gives exactly the tokens of greedy decoding by full forward passes over the
//    growing prefix (attention with RoPE, linear attention, Mamba; windowed attention with every
//    position encoding, its windows shorter than the decoded length, so the KV cache's ring buffer
//    wraps; Based's short convolutions in attention and linear attention, its Taylor feature map
//    with and without them; hybrid stacks, a KV cache in the attention layers and (S, z) or
//    Mamba's state in the others; DeltaNet and Gated DeltaNet, with and without their short
//    convolutions and gates; Mamba 2, alone with one group and in a hybrid with two), and stops
//    at the stop token;
//  - copy's gen_acc (its extra metric, data/task_copy.cpp) through greedy_decode equals gen_acc
//    through full forward passes, row by row, on models trained briefly so that some rows are
//    copied exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/metrics.hpp"
#include "framework/core/argmax.hpp"
#include "framework/core/autograd.hpp"
#include "framework/optim/optim.hpp"
#include "framework/runtime/runtime.hpp"
#include "models/decode.hpp"
#include "tests/compare.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

struct Family {
  std::string family, pos;
  int64_t window = 0;  // attention's
  TextMap based = {};  // Based's options (short-conv, feature-map taylor, feature-dim), or mixers
};
const Family kFamilies[] = {{"attention", "rope"},         {"linear", "none"},
                            {"mamba", "none"},             {"attention", "rope", 5},
                            {"attention", "alibi", 3},     {"attention", "none", 4},
                            {"attention", "sinusoidal", 6}, {"attention", "learned", 1},
                            {"attention", "rope", 0, {{"short-conv", "3"}}},
                            {"linear", "none", 0, {{"short-conv", "4"}}},
                            {"linear", "learned", 0, {{"feature-map", "taylor"}, {"feature-dim", "6"}}},
                            {"linear", "none", 0, {{"feature-map", "taylor"}, {"short-conv", "3"}}},
                            {"mamba", "none", 0, {{"mixers", "mamba,attention"}}},
                            {"linear", "learned", 3, {{"mixers", "linear,attention"}}},
                            {"deltanet", "none"},
                            {"gated_deltanet", "learned"},
                            {"gated_deltanet", "none", 0, {{"conv-size", "0"}, {"state-gate", "0"}}},
                            {"gated_deltanet", "none", 0, {{"mixers", "gated_deltanet,attention"}}},
                            {"mamba2", "none", 0, {{"head-dim", "16"}, {"state-size", "16"}}},
                            {"mamba2", "none", 0, {{"mixers", "mamba2,attention"}, {"head-dim", "8"}, {"n-groups", "2"}}}};

// "feature-map=taylor short-conv=3 ": a family's Based options, for failure messages.
std::string based_text(const Family& f) {
  std::string s;
  for (const auto& [key, value] : f.based) s += key + "=" + value + " ";
  return s;
}

ModelConfig small(const Family& f, int64_t vocab) {
  ModelConfig c = ModelConfig::of(f.family);
  c.pos = f.pos;
  c.vocab = vocab;
  c.d_model = 32;
  c.n_layers = 2;
  set_options(c, {{"n-heads", "4"}});
  set_options(c, f.based);  // first: mixers brings the options of the families it names
  if (f.window) set_options(c, {{"window", std::to_string(f.window)}});
  c.mlp = f.family == "mamba" ? "none" : "gelu";
  c.max_seq_len = 128;
  return c;
}

// Embeddings redrawn from N(0, 0.5^2): logits of order 1, so the argmax never hinges on float
// rounding (the recurrent and parallel paths agree to about 1e-6, not bit for bit).
void spread_embeddings(LanguageModel& m, uint64_t seed) {
  Rng rng(seed);
  float* e = m.embedding.data();
  for (int64_t i = 0; i < m.embedding.numel(); ++i) e[i] = 0.5f * float(rng.normal());
}

Tensor full_forward_last(LanguageModel& m, const std::vector<int32_t>& prefix) {
  NoGradGuard no_grad;
  return m.forward(IntTensor(Shape{1, int64_t(prefix.size())}, prefix));
}

// Greedy decoding the slow way: a full forward pass over the whole prefix for every token.
std::vector<int32_t> greedy_by_forward(LanguageModel& m, std::vector<int32_t> prefix, int64_t max_new,
                                       int32_t stop) {
  std::vector<int32_t> out;
  while (int64_t(out.size()) < max_new) {
    const Tensor z = full_forward_last(m, prefix);
    const int64_t V = z.size(-1);
    const int32_t next = int32_t(argmax(z.data() + z.numel() - V, V));
    out.push_back(next);
    prefix.push_back(next);
    if (next == stop) break;
  }
  return out;
}

std::vector<int32_t> random_prompt(int64_t n, int64_t V, uint64_t seed) {
  return random_ids(1, n, V, seed).values();
}

}  // namespace

TEST_CASE("greedy_decode equals greedy decoding by full forward passes") {
  set_threads(1);
  for (const Family& f : kFamilies) {
    CAPTURE(f.family);
    CAPTURE(f.pos);
    CAPTURE(f.window);
    const std::string based = based_text(f);
    CAPTURE(based);
    LanguageModel m(small(f, 13), 7);
    spread_embeddings(m, 8);
    for (uint64_t seed : {1, 2, 3}) {
      CAPTURE(seed);
      const std::vector<int32_t> prompt = random_prompt(int64_t(4 + seed), 13, seed);
      const std::vector<int32_t> want = greedy_by_forward(m, prompt, 24, -1);
      const std::vector<int32_t> got = greedy_decode(m, prompt, 24);
      CHECK(got == want);
      // A stop token ends the decoding right after its first occurrence, and is included.
      const int32_t stop = want[5];
      const size_t first = size_t(std::find(want.begin(), want.end(), stop) - want.begin());
      const std::vector<int32_t> stopped = greedy_decode(m, prompt, 24, stop);
      CHECK(stopped == std::vector<int32_t>(want.begin(), want.begin() + first + 1));
      CHECK(greedy_by_forward(m, prompt, 24, stop) == stopped);
    }
    CHECK(greedy_decode(m, {1, 2}, 0).empty());
  }
}

TEST_CASE("greedy_decode rejects an empty prompt and a negative length") {
  LanguageModel m(small(kFamilies[1], 13), 7);
  CHECK_THROWS_WITH_AS(greedy_decode(m, {}, 4), doctest::Contains("prompt is empty"), Error);
  CHECK_THROWS_WITH_AS(greedy_decode(m, {1}, -1), doctest::Contains("max_new -1"), Error);
}

TEST_CASE("copy gen_acc through greedy_decode equals gen_acc through full forward passes") {
  set_threads(1);
  TaskConfig task = TaskConfig::of("copy");
  set_options(task, {{"alphabet", "6"}, {"min-len", "2"}, {"max-len", "5"}});
  const int64_t rows = 24;
  const int32_t eos = task.behaviour().stop_token(task);
  double best_acc = 0;
  for (const Family& f : kFamilies) {
    CAPTURE(f.family);
    CAPTURE(f.pos);
    CAPTURE(f.window);
    const std::string based = based_text(f);
    CAPTURE(based);
    LanguageModel m(small(f, task.vocab_size()), 3);
    // A brief training run, so that some rows are copied exactly and the comparison has
    // right and wrong rows to agree on.
    AdamW opt(m.parameters(), 1e-2, AdamWOptions{.weight_decay = 0.0});
    const uint64_t train_stream = stream_seed(1, "train");
    for (uint64_t step = 0; step < 120; ++step) {
      const Batch b = make_batch(task, train_stream, step, 16);
      opt.zero_grad();
      backward(m.loss(b.inputs, b.targets));
      opt.step();
    }
    m.eval();
    const Batch batch = make_batch(task, stream_seed(1, "eval"), 0, rows);
    const int64_t T = batch.inputs.shape()[1];
    int64_t right = 0;
    for (int64_t b = 0; b < rows; ++b) {
      CAPTURE(b);
      const AnswerSpan span = answer_span(batch, b);
      const int32_t* x = batch.inputs.data() + b * T;
      const std::vector<int32_t> prompt(x, x + span.start), answer(x + span.start, x + span.start + span.length);
      const std::vector<int32_t> by_forward = greedy_by_forward(m, prompt, span.length, eos);
      CHECK(greedy_decode(m, prompt, span.length, eos) == by_forward);
      right += by_forward == answer;
    }
    // The task's metric, with each decoder.
    const GreedyDecoder recurrent = [&](const std::vector<int32_t>& p, int64_t n, int32_t stop) {
      return greedy_decode(m, p, n, stop);
    };
    const GreedyDecoder forward = [&](const std::vector<int32_t>& p, int64_t n, int32_t stop) {
      return greedy_by_forward(m, p, n, stop);
    };
    const Tensor unused;  // copy's gen_acc reads the decoder, not the logits
    for (const GreedyDecoder* decode : {&recurrent, &forward}) {
      ExtraScores scores;
      task.behaviour().extra_scores(task, batch, unused, decode, scores);
      REQUIRE(scores.size() == 1);
      CHECK(scores[0].first == "gen_acc");
      CHECK(scores[0].second.correct == right);
      CHECK(scores[0].second.total == rows);
    }
    best_acc = std::max(best_acc, double(right) / double(rows));
  }
  CHECK(best_acc >= 0.25);  // the comparison covered exactly copied rows
}
