// The synthetic tasks: each layout's invariants checked row by row, the mqar gap distribution
// against p(i) ~ i^(a-1), determinism and resumability, disjoint train/eval streams, config
// errors, the task metrics, and `trilemma data show` and `data dump` end to end.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "data/evaluate.hpp"
#include "data/metrics.hpp"
#include "data/tasks.hpp"
#include "tests/compare.hpp"
#include "tests/run_binary.hpp"

namespace {

using namespace tri;
using trilemma_test::set_options;

// A task with its defaults, and the given options set as a config file would set them.
TaskConfig config(const std::string& task, const TextMap& options = {}) {
  TaskConfig c = TaskConfig::of(task);
  set_options(c, options);
  return c;
}

// An option of c, read back as config.ini would hold it.
std::string option_text(const TaskConfig& c, const std::string& key) {
  TextMap text;
  write_text(c, text);
  return text.at(key);
}
int64_t int_option(const TaskConfig& c, const std::string& key) { return *parse_integer(option_text(c, key)); }

// The message of the tri::Error cfg.validate() throws, or "" when it passes.
std::string error_of(const TaskConfig& c) {
  try {
    c.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct RowView {
  const int32_t* x;
  const int32_t* y;
  const uint8_t* m;
};
RowView row(const Batch& b, int64_t i) {
  const int64_t T = b.inputs.shape()[1];
  return {b.inputs.data() + i * T, b.targets.data() + i * T, b.mask.data() + i * T};
}

// Logits [B, T, V] with 2.0 on the target at each scored position and on token 1 elsewhere.
Tensor logits_on_targets(const Batch& b, int64_t V) {
  const int64_t B = b.inputs.shape()[0], T = b.inputs.shape()[1];
  Tensor logits = Tensor::zeros({B, T, V});
  float* z = logits.data();
  for (int64_t i = 0; i < B * T; ++i) z[i * V + (b.mask[size_t(i)] ? b.targets.data()[i] : 1)] = 2.f;
  return logits;
}

void check_targets_follow_mask(const Batch& b) {
  for (size_t i = 0; i < b.mask.size(); ++i) CHECK((b.mask[i] != 0) == (b.targets.data()[i] != kIgnoreIndex));
}

}  // namespace

TEST_CASE("tasks: copy layout") {
  TaskConfig c = config("copy");
  c.seq_len = 50;
  const int32_t A = 26, BOS = A, SEP = A + 1, EOS = A + 2, PAD = A + 3;
  CHECK(c.vocab_size() == A + 4);
  Batch b = make_batch(c, 7, 3, 64);
  check_targets_follow_mask(b);
  std::set<int64_t> lengths;
  for (int64_t i = 0; i < 64; ++i) {
    RowView r = row(b, i);
    REQUIRE(r.x[0] == BOS);
    int64_t L = 1;
    while (r.x[L] != SEP) ++L;
    L -= 1;
    REQUIRE(L >= 5);
    REQUIRE(L <= 20);
    lengths.insert(L);
    for (int64_t k = 0; k < L; ++k) {
      CHECK(r.x[1 + k] < A);
      CHECK(r.x[L + 2 + k] == r.x[1 + k]);
    }
    CHECK(r.x[2 * L + 2] == EOS);
    for (int64_t t = 2 * L + 3; t < 50; ++t) CHECK(r.x[t] == PAD);
    for (int64_t t = 0; t < 50; ++t) {
      const bool scored = t >= L + 1 && t <= 2 * L + 1;
      CHECK(bool(r.m[t]) == scored);
      if (scored) CHECK(r.y[t] == r.x[t + 1]);
    }
    const AnswerSpan span = answer_span(b, i);
    CHECK(span.start == L + 2);
    CHECK(span.length == L + 1);
  }
  CHECK(lengths.size() > 8);  // lengths vary over the range
}

TEST_CASE("tasks: selective-copy layout") {
  TaskConfig c = config("selective-copy");
  const int64_t T = 256, M = 16, A = 16;
  CHECK(c.length() == T);
  Batch b = make_batch(c, 11, 0, 32);
  check_targets_follow_mask(b);
  for (int64_t i = 0; i < 32; ++i) {
    RowView r = row(b, i);
    std::vector<int32_t> data;
    for (int64_t t = 0; t < T - M; ++t) {
      CHECK(r.x[t] >= 0);
      CHECK(r.x[t] <= A - 2);
      CHECK(!r.m[t]);
      if (r.x[t] != 0) data.push_back(r.x[t]);
    }
    REQUIRE(int64_t(data.size()) == M);
    for (int64_t j = 0; j < M; ++j) {
      CHECK(r.x[T - M + j] == A - 1);
      CHECK(r.m[T - M + j]);
      CHECK(r.y[T - M + j] == data[size_t(j)]);
    }
  }
}

// Checks one mqar row of K pairs (0: the config's one K); returns its gaps (1-based) in the
// order the keys were written.
std::vector<int64_t> check_mqar_row(const TaskConfig& c, RowView r, int64_t K = 0) {
  if (K == 0) K = int_option(c, "num-kv-pairs");
  const int64_t T = c.length(), V = c.vocab_size();
  const bool random_fillers = int_option(c, "random-fillers") != 0;
  std::set<int32_t> keys, values;
  for (int64_t j = 0; j < K; ++j) {
    CHECK(r.x[2 * j] >= 1);
    CHECK(r.x[2 * j] < V / 2);
    CHECK(r.x[2 * j + 1] >= V / 2);
    CHECK(r.x[2 * j + 1] < V);
    keys.insert(r.x[2 * j]);
    values.insert(r.x[2 * j + 1]);
    CHECK(!r.m[2 * j]);
    CHECK(!r.m[2 * j + 1]);
  }
  CHECK(int64_t(keys.size()) == K);
  CHECK(int64_t(values.size()) == K);
  std::vector<int64_t> gaps(size_t(K), 0);
  int64_t scored = 0;
  for (int64_t t = 2 * K; t < T; ++t) {
    if (!r.m[t]) {
      if (!random_fillers) CHECK(r.x[t] == 0);
      continue;
    }
    ++scored;
    CHECK((t - 2 * K) % 2 == 0);
    int64_t j = 0;
    while (j < K && r.x[2 * j] != r.x[t]) ++j;
    REQUIRE(j < K);            // the query is one of the keys
    CHECK(gaps[size_t(j)] == 0);  // each key queried once
    gaps[size_t(j)] = (t - 2 * K) / 2 + 1;
    CHECK(r.y[t] == r.x[2 * j + 1]);
  }
  CHECK(scored == K);
  return gaps;
}

TEST_CASE("tasks: mqar layout, with zero and random fillers") {
  for (bool random : {false, true}) {
    CAPTURE(random);
    TaskConfig c = config("mqar", {{"random-fillers", random ? "1" : "0"}});
    CHECK(c.length() == 128);
    CHECK(c.vocab_size() == 8192);
    Batch b = make_batch(c, 5, 2, 64);
    check_targets_follow_mask(b);
    int64_t nonzero_fillers = 0;
    for (int64_t i = 0; i < 64; ++i) {
      check_mqar_row(c, row(b, i));
      for (int64_t t = 16; t < 128; ++t) nonzero_fillers += !row(b, i).m[t] && row(b, i).x[t] != 0;
    }
    CHECK((nonzero_fillers > 0) == random);
  }
  // 4K == seq_len: the query region is exactly filled at most.
  TaskConfig tight = config("mqar", {{"seq-len", "64"}, {"num-kv-pairs", "16"}, {"vocab", "1024"}});
  Batch b = make_batch(tight, 1, 0, 16);
  for (int64_t i = 0; i < 16; ++i) check_mqar_row(tight, row(b, i));
}

TEST_CASE("tasks: mqar over a mix of pair counts: row i holds the (i mod count)-th K") {
  TaskConfig c = config("mqar", {{"seq-len", "64"}, {"vocab", "512"}, {"num-kv-pairs", "16,2,4"}});
  const std::vector<int64_t> ks = {16, 2, 4};
  Batch b = make_batch(c, 3, 1, 30);
  check_targets_follow_mask(b);
  REQUIRE(b.group.size() == 30);
  for (int64_t i = 0; i < 30; ++i) {
    CAPTURE(i);
    CHECK(b.group[size_t(i)] == ks[size_t(i % 3)]);
    check_mqar_row(c, row(b, i), ks[size_t(i % 3)]);
  }
  CHECK(c.behaviour().group_name() == "pairs");
  CHECK(c.behaviour().legend(c).find("row i holds K = (16 2 4)[i mod 3] pairs") != std::string::npos);
  // One K is the plain task: no groups, no extra metrics, the token accuracy stops a run.
  TaskConfig one = config("mqar", {{"seq-len", "64"}, {"vocab", "512"}, {"num-kv-pairs", "4"}});
  CHECK(make_batch(one, 3, 1, 8).group.empty());
  ExtraScores none;
  one.behaviour().extra_scores(one, make_batch(one, 3, 1, 8), Tensor::zeros({8, 64, 512}), nullptr, none);
  CHECK(none.empty());
  CHECK(one.behaviour().stopping_accuracy(0.7, {{"acc@K=4", Accuracy{1, 10}}}) == 0.7);
}

TEST_CASE("tasks: mqar's mix scores each K, and stops a run on its lowest") {
  TaskConfig c = config("mqar", {{"seq-len", "32"}, {"vocab", "64"}, {"num-kv-pairs", "2,8"}});
  const int64_t B = 4, T = 32, V = 64;
  Batch b = make_batch(c, 8, 0, B);
  // Right at every scored position but one of row 1 (K = 8): acc@K=2 is 1, acc@K=8 15/16.
  Tensor logits = logits_on_targets(b, V);
  float* z = logits.data();
  int64_t wrong = -1;
  for (int64_t t = 0; t < T && wrong < 0; ++t)
    if (b.mask[size_t(T + t)]) wrong = T + t;
  REQUIRE(wrong >= 0);
  z[wrong * V + b.targets.data()[wrong]] = 0.f;
  ExtraScores by;
  c.behaviour().extra_scores(c, b, logits, nullptr, by);
  REQUIRE(by.size() == 2);
  CHECK(by[0].first == "acc@K=2");
  CHECK(by[0].second.total == 4);  // rows 0 and 2
  CHECK(by[0].second.value() == 1.0);
  CHECK(by[1].first == "acc@K=8");
  CHECK(by[1].second.total == 16);
  CHECK(by[1].second.value() == doctest::Approx(15.0 / 16.0));
  CHECK(score_batch(logits, b).token_acc == doctest::Approx(19.0 / 20.0));
  // The run stops on the lowest K's accuracy, not the pooled one (a model that learned only the
  // small K must keep training); a K the evaluation lacks does not count.
  CHECK(c.behaviour().stopping_accuracy(0.95, by) == doctest::Approx(15.0 / 16.0));
  CHECK(c.behaviour().stopping_accuracy(0.9, {{"acc@K=2", Accuracy{1, 1}}, {"acc@K=8", Accuracy{1, 4}}}) == 0.25);
}

TEST_CASE("tasks: mqar gaps follow p(i) ~ i^(a-1)") {
  TaskConfig c = config("mqar");  // T 128, K 8: gaps 1..56
  const int64_t space = (c.length() - 2 * int_option(c, "num-kv-pairs")) / 2, N = 20000;
  const double a = *parse_real(option_text(c, "power-a"));
  std::vector<double> count(size_t(space + 1), 0);
  for (int64_t batch = 0; batch < N / 500; ++batch) {
    Batch b = make_batch(c, 99, uint64_t(batch), 500);
    for (int64_t i = 0; i < 500; ++i) {
      std::vector<int64_t> gaps = check_mqar_row(c, row(b, i));
      count[size_t(gaps[0])] += 1;  // the first key's gap is the first draw
    }
  }
  double norm = 0;
  for (int64_t i = 1; i <= space; ++i) norm += std::pow(double(i), a - 1);
  double chi2 = 0;
  for (int64_t i = 1; i <= space; ++i) {
    const double expected = N * std::pow(double(i), a - 1) / norm;
    chi2 += (count[size_t(i)] - expected) * (count[size_t(i)] - expected) / expected;
  }
  // 55 degrees of freedom: mean 55, standard deviation ~10.5; 120 is beyond 6 of them.
  CAPTURE(chi2);
  CHECK(chi2 < 120);
  CHECK(count[1] > 20 * std::max(1.0, count[size_t(space)]));
  CHECK(count[1] + count[2] > count[size_t(space - 1)] + count[size_t(space)] + 1000);
}

TEST_CASE("tasks: induction layout") {
  TaskConfig c = config("induction");
  const int64_t T = 256;
  Batch b = make_batch(c, 3, 1, 64);
  check_targets_follow_mask(b);
  std::set<int64_t> positions;
  for (int64_t i = 0; i < 64; ++i) {
    RowView r = row(b, i);
    CHECK(r.x[T - 1] == 0);
    int64_t p = -1, triggers = 0;
    for (int64_t t = 0; t < T - 1; ++t) {
      CHECK(r.x[t] >= 0);
      CHECK(r.x[t] < 16);
      if (r.x[t] == 0) p = t, ++triggers;
      CHECK(!r.m[t]);
    }
    REQUIRE(triggers == 1);
    CHECK(p + 1 < T - 2);
    CHECK(r.x[p + 1] != 0);
    CHECK(r.m[T - 1]);
    CHECK(r.y[T - 1] == r.x[p + 1]);
    positions.insert(p);
  }
  CHECK(positions.size() > 40);  // the pair moves
}

TEST_CASE("tasks: needle layout and per-row distances") {
  TaskConfig c = config("needle", {{"distance", "1,10,254"}});
  const std::vector<int64_t> distances = {1, 10, 254};
  const int64_t T = 256, V = 8192;
  Batch b = make_batch(c, 4, 0, 9);
  check_targets_follow_mask(b);
  REQUIRE(b.group.size() == 9);
  for (int64_t i = 0; i < 9; ++i) {
    const int64_t d = distances[size_t(i % 3)];
    CHECK(b.group[size_t(i)] == d);
    RowView r = row(b, i);
    const int32_t key = r.x[T - 1], value = r.x[T - 1 - d];
    CHECK(key >= V / 4);
    CHECK(key < V / 2);
    CHECK(value >= V / 2);
    CHECK(value < V);
    CHECK(r.x[T - 2 - d] == key);
    for (int64_t t = 0; t < T; ++t) {
      if (t == T - 1 || t == T - 2 - d || t == T - 1 - d) continue;
      CHECK(r.x[t] >= 1);
      CHECK(r.x[t] < V / 4);
      CHECK(!r.m[t]);
    }
    CHECK(r.m[T - 1]);
    CHECK(r.y[T - 1] == value);
  }
}

TEST_CASE("tasks: needle with distractors: values among the fillers, the key still unique") {
  TaskConfig c = config("needle", {{"distance", "4,250"}, {"distractors", "1"}, {"vocab", "64"}});
  const int64_t T = 256, V = 64;
  Batch b = make_batch(c, 4, 0, 8);
  check_targets_follow_mask(b);
  int64_t value_fillers = 0, fillers = 0;
  for (int64_t i = 0; i < 8; ++i) {
    const int64_t d = i % 2 ? 250 : 4;
    RowView r = row(b, i);
    const int32_t key = r.x[T - 1], value = r.x[T - 1 - d];
    CHECK(r.x[T - 2 - d] == key);
    CHECK(r.y[T - 1] == value);
    for (int64_t t = 0; t < T; ++t) {
      if (t == T - 1 || t == T - 2 - d || t == T - 1 - d) continue;
      CHECK(((r.x[t] >= 1 && r.x[t] < V / 4) || (r.x[t] >= V / 2 && r.x[t] < V)));  // never a key
      value_fillers += r.x[t] >= V / 2;
      ++fillers;
    }
  }
  // Drawn from 15 filler ids and 32 value ids alike: 32/47 of the fillers are values (0.68; with
  // 2016 fillers its standard deviation is 0.010, the bounds are 5 of them away).
  CHECK(double(value_fillers) / double(fillers) > 0.63);
  CHECK(double(value_fillers) / double(fillers) < 0.73);
  // Without distractors the same seed gives the plain layout.
  TaskConfig plain = config("needle", {{"distance", "4,250"}, {"vocab", "64"}});
  const Batch p = make_batch(plain, 4, 0, 8);
  for (int64_t t = 0; t < T - 6; ++t) CHECK(row(p, 0).x[t] < V / 4);
}

TEST_CASE("tasks: rows are a pure function of (seed, batch, row); train, valid and eval differ") {
  for (const std::string& task : task_names()) {
    CAPTURE(task);
    TaskConfig c = config(task);
    const uint64_t train = stream_seed(42, "train"), eval = stream_seed(42, "eval"), valid = stream_seed(42, "valid");
    CHECK(train != eval);
    CHECK(valid != eval);
    CHECK(valid != train);
    Batch a = make_batch(c, train, 5, 16), again = make_batch(c, train, 5, 16);
    CHECK(a.inputs.values() == again.inputs.values());
    CHECK(a.targets.values() == again.targets.values());
    CHECK(a.mask == again.mask);
    // Resuming: batch 5 of a stream read from the start equals batch 5 made alone.
    Batch streamed;
    for (uint64_t k = 0; k <= 5; ++k) streamed = make_batch(c, train, k, 16);
    CHECK(streamed.inputs.values() == a.inputs.values());
    // A slice: the first 4 rows of a batch of 16 are the batch of 4.
    Batch small = make_batch(c, train, 5, 4);
    CHECK(std::equal(small.inputs.values().begin(), small.inputs.values().end(), a.inputs.values().begin()));
    // Other batches, the eval stream and other rows differ.
    CHECK(make_batch(c, train, 6, 16).inputs.values() != a.inputs.values());
    Batch e = make_batch(c, eval, 5, 16), v = make_batch(c, valid, 5, 16);
    CHECK(e.inputs.values() != a.inputs.values());
    CHECK(v.inputs.values() != e.inputs.values());
    CHECK(v.inputs.values() != a.inputs.values());
    const int64_t T = c.length();
    CHECK(!std::equal(a.inputs.values().begin(), a.inputs.values().begin() + T, a.inputs.values().begin() + T));
  }
  CHECK_THROWS_AS(stream_seed(1, "test"), Error);
}

TEST_CASE("tasks: impossible configurations name the parameter") {
  auto expect = [](const TaskConfig& c, const std::string& words) {
    const std::string msg = error_of(c);
    CAPTURE(msg);
    CHECK(msg.find(words) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK_THROWS_AS(make_batch(c, 1, 0, 2), Error);
  };
  for (const std::string& task : task_names()) CHECK(error_of(config(task)).empty());
  CHECK_THROWS_WITH_AS(config("nope"), doctest::Contains("--task 'nope' unknown (allowed: copy,"), Error);
  expect(config("copy", {{"seq-len", "42"}}), "--seq-len 42 cannot hold a string of --max-len 20");  // 2*20+3 = 43
  expect(config("copy", {{"min-len", "0"}}), "--min-len 0 is out of range");
  expect(config("copy", {{"min-len", "9"}, {"max-len", "8"}}), "--max-len 8 must be >= --min-len 9");
  expect(config("copy", {{"vocab", "50"}}), "--vocab 50 does not fit (the task's options fix it at 30)");
  expect(config("selective-copy", {{"num-tokens", "256"}}), "--num-tokens 256 out of range");
  expect(config("selective-copy", {{"num-tokens", "129"}}), "--num-tokens 129 out of range");
  expect(config("selective-copy", {{"vocab", "2"}}), "--vocab 2 too small");
  expect(config("mqar", {{"vocab", "128"}}), "--vocab 128 must be > --seq-len 128");
  expect(config("mqar", {{"num-kv-pairs", "33"}}), "--num-kv-pairs 33 too large for --seq-len 128");  // 4K > 128
  expect(config("mqar", {{"num-kv-pairs", "4,33"}}), "--num-kv-pairs 33 too large for --seq-len 128");
  expect(config("mqar", {{"num-kv-pairs", "4,8,4"}}), "--num-kv-pairs 4,8,4 repeats 4 (allowed: distinct K)");
  CHECK(error_of(config("mqar", {{"vocab", "512"}, {"seq-len", "64"}, {"num-kv-pairs", "2,16"}})).empty());
  expect(config("mqar", {{"vocab", "16"}, {"seq-len", "12"}, {"num-kv-pairs", "8"}}),
         "--num-kv-pairs 8 needs 8 distinct keys, and --vocab 16 holds 7");
  CHECK_THROWS_WITH_AS(config("mqar", {{"num-kv-pairs", ""}}), doctest::Contains("--num-kv-pairs '' holds no value"), Error);
  expect(config("mqar", {{"power-a", "0"}}), "--power-a 0 out of range (allowed: (0, 1])");
  expect(config("mqar", {{"power-a", "1.5"}}), "--power-a 1.5 is out of range (allowed: 0..1)");
  expect(config("induction", {{"seq-len", "3"}}), "--seq-len 3 too short");
  expect(config("induction", {{"seq-len", "-3"}}), "--seq-len -3 is out of range");
  expect(config("needle", {{"distance", "16,255"}}), "--distance 255 does not fit --seq-len 256");  // beyond 254
  CHECK_THROWS_WITH_AS(config("needle", {{"distance", "0"}}), doctest::Contains("--distance: '0'"), Error);
  expect(config("needle", {{"vocab", "4"}}), "--vocab 4 too small");
  CHECK_THROWS_AS(make_batch(config("mqar"), 1, 0, 0), Error);
}

TEST_CASE("tasks: metrics over scored positions, and needle's accuracy per distance") {
  TaskConfig c = config("needle", {{"vocab", "64"}, {"seq-len", "32"}, {"distance", "20,2"}});
  const int64_t B = 6, T = 32, V = 64;
  Batch b = make_batch(c, 8, 0, B);
  // Row 0's answer made wrong.
  Tensor logits = logits_on_targets(b, V);
  float* z = logits.data();
  const int64_t wrong = 0 * T + T - 1;
  z[wrong * V + b.targets.data()[wrong]] = 0.f;
  z[wrong * V + 3] = 2.f;
  TaskScore s = score_batch(logits, b);
  CHECK(s.scored == B);
  CHECK(s.rows == B);
  CHECK(s.token_acc == doctest::Approx(5.0 / 6.0));
  CHECK(s.seq_acc == doctest::Approx(5.0 / 6.0));
  // The loss equals the framework's cross_entropy on the masked targets (independent code).
  CHECK(s.loss == doctest::Approx(cross_entropy(logits, masked_targets(b.targets, b.mask)).data()[0]).epsilon(1e-5));
  ExtraScores by;
  c.behaviour().extra_scores(c, b, logits, nullptr, by);
  REQUIRE(by.size() == 2);  // by increasing distance, whatever the option's order
  CHECK(by[0].first == "acc@2");
  CHECK(by[0].second.total == 3);
  CHECK(by[0].second.value() == doctest::Approx(1.0));
  CHECK(by[1].first == "acc@20");
  CHECK(by[1].second.value() == doctest::Approx(2.0 / 3.0));  // row 0 has distance 20
}

TEST_CASE("tasks: copy gen_acc scores what the decoder generates") {
  TaskConfig c = config("copy");
  Batch b = make_batch(c, 2, 0, 8);
  const int64_t T = b.inputs.shape()[1];
  const int32_t eos = c.behaviour().stop_token(c);
  CHECK(eos == 28);  // alphabet 26: BOS 26, SEP 27, EOS 28
  // An oracle that knows every row: the rest of the row whose prompt it is given.
  const GreedyDecoder oracle = [&](const std::vector<int32_t>& prompt, int64_t max_new, int32_t stop) {
    CHECK(stop == eos);
    for (int64_t r = 0; r < 8; ++r) {
      const int32_t* x = b.inputs.data() + r * T;
      if (std::equal(prompt.begin(), prompt.end(), x) && x[prompt.size() - 1] == 27)
        return std::vector<int32_t>(x + prompt.size(), x + prompt.size() + max_new);
    }
    return std::vector<int32_t>{};
  };
  // Always predicting EOS is wrong on every row (strings are at least 5 symbols long).
  const GreedyDecoder eos_only = [&](const std::vector<int32_t>&, int64_t, int32_t) {
    return std::vector<int32_t>{eos};
  };
  const Tensor unused;
  for (auto [decode, want] : {std::pair{&oracle, 8}, std::pair{&eos_only, 0}}) {
    ExtraScores scores;
    c.behaviour().extra_scores(c, b, unused, decode, scores);
    REQUIRE(scores.size() == 1);
    CHECK(scores[0].first == "gen_acc");
    CHECK(scores[0].second.correct == want);
    CHECK(scores[0].second.total == 8);
  }
  ExtraScores none;  // without a decoder, no gen_acc
  c.behaviour().extra_scores(c, b, unused, nullptr, none);
  CHECK(none.empty());
}

TEST_CASE("tasks: evaluation per sequence length (length generalisation)") {
  TaskConfig c = config("induction");
  const int64_t V = c.vocab_size();
  // An oracle reading the answer from the row (induction: the token after the earlier trigger)
  // and a model with uniform logits; each records the lengths it was asked about.
  std::vector<int64_t> seen;
  const BatchLogits oracle = [&](const Batch& batch) {
    const int64_t B = batch.inputs.shape()[0], T = batch.inputs.shape()[1];
    seen.push_back(T);
    Tensor z = Tensor::zeros({B, T, V});
    for (int64_t b = 0; b < B; ++b) {
      const int32_t* x = batch.inputs.data() + b * T;
      int64_t p = 0;
      while (!(x[p] == 0 && p + 1 < T - 1)) ++p;  // the first trigger is the pair's
      z.data()[((b * T) + T - 1) * V + x[p + 1]] = 1.f;
    }
    return z;
  };
  const BatchLogits uniform = [&](const Batch& batch) {
    return Tensor::zeros({batch.inputs.shape()[0], batch.inputs.shape()[1], V});
  };
  const std::vector<int64_t> lengths = {64, 128, 512};
  const EvalSettings s{2, 8, 3};
  std::vector<EvalResult> r = evaluate_lengths(c, lengths, oracle, s);
  REQUIRE(r.size() == 3);
  CHECK(seen == std::vector<int64_t>{64, 64, 128, 128, 512, 512});
  for (size_t i = 0; i < r.size(); ++i) {
    CHECK(r[i].seq_len == lengths[i]);
    CHECK(r[i].score.token_acc == 1.0);
    CHECK(r[i].score.seq_acc == 1.0);
    CHECK(r[i].score.scored == 16);  // one scored position per row, 2 batches of 8
    CHECK(r[i].extra.empty());
  }
  for (const EvalResult& u : evaluate_lengths(c, lengths, uniform, s))
    CHECK(u.score.loss == doctest::Approx(std::log(double(V))).epsilon(1e-12));
  // An impossible length fails before any evaluation runs.
  seen.clear();
  CHECK_THROWS_AS(evaluate_lengths(c, {64, 2}, oracle, s), Error);
  CHECK(seen.empty());
}
