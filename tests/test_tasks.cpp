// The synthetic tasks: each layout's invariants checked row by row, the mqar gap distribution
// against p(i) ~ i^(a-1), determinism and resumability, disjoint train/eval streams, config
// errors, the task metrics, and `trilemma data show` end to end.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "data/evaluate.hpp"
#include "data/metrics.hpp"
#include "data/tasks.hpp"
#include "tests/run_binary.hpp"

namespace {

using namespace tri;

TaskConfig config(const std::string& task) {
  TaskConfig c;
  c.task = task;
  return c;
}

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
  const int64_t T = b.inputs.shape[1];
  return {b.inputs.v.data() + i * T, b.targets.v.data() + i * T, b.mask.data() + i * T};
}

void check_targets_follow_mask(const Batch& b) {
  for (size_t i = 0; i < b.mask.size(); ++i) CHECK((b.mask[i] != 0) == (b.targets.v[i] != kIgnoreIndex));
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
    const AnswerSpan span = copy_answer_span(b, i);
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

// Checks one mqar row; returns its gaps (1-based) in the order the keys were written.
std::vector<int64_t> check_mqar_row(const TaskConfig& c, RowView r) {
  const int64_t T = c.length(), K = c.num_kv_pairs, V = c.vocab_size();
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
      if (!c.random_fillers) CHECK(r.x[t] == 0);
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
    TaskConfig c = config("mqar");
    c.random_fillers = random;
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
  TaskConfig tight = config("mqar");  // 4K == seq_len: the query region is exactly filled at most
  tight.seq_len = 64;
  tight.num_kv_pairs = 16;
  tight.vocab = 1024;
  Batch b = make_batch(tight, 1, 0, 16);
  for (int64_t i = 0; i < 16; ++i) check_mqar_row(tight, row(b, i));
}

TEST_CASE("tasks: mqar gaps follow p(i) ~ i^(a-1)") {
  TaskConfig c = config("mqar");  // T 128, K 8: gaps 1..56
  const int64_t space = (c.length() - 2 * c.num_kv_pairs) / 2, N = 20000;
  std::vector<double> count(size_t(space + 1), 0);
  for (int64_t batch = 0; batch < N / 500; ++batch) {
    Batch b = make_batch(c, 99, uint64_t(batch), 500);
    for (int64_t i = 0; i < 500; ++i) {
      std::vector<int64_t> gaps = check_mqar_row(c, row(b, i));
      count[size_t(gaps[0])] += 1;  // the first key's gap is the first draw
    }
  }
  double norm = 0;
  for (int64_t i = 1; i <= space; ++i) norm += std::pow(double(i), c.power_a - 1);
  double chi2 = 0;
  for (int64_t i = 1; i <= space; ++i) {
    const double expected = N * std::pow(double(i), c.power_a - 1) / norm;
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
  TaskConfig c = config("needle");
  c.distances = {1, 10, 254};
  const int64_t T = 256, V = 8192;
  Batch b = make_batch(c, 4, 0, 9);
  check_targets_follow_mask(b);
  REQUIRE(b.distance.size() == 9);
  for (int64_t i = 0; i < 9; ++i) {
    const int64_t d = c.distances[size_t(i % 3)];
    CHECK(b.distance[size_t(i)] == d);
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

TEST_CASE("tasks: rows are a pure function of (seed, batch, row); train and eval differ") {
  for (const std::string& task : task_names()) {
    CAPTURE(task);
    TaskConfig c = config(task);
    const uint64_t train = stream_seed(42, "train"), eval = stream_seed(42, "eval");
    CHECK(train != eval);
    Batch a = make_batch(c, train, 5, 16), again = make_batch(c, train, 5, 16);
    CHECK(a.inputs.v == again.inputs.v);
    CHECK(a.targets.v == again.targets.v);
    CHECK(a.mask == again.mask);
    // Resuming: batch 5 of a stream read from the start equals batch 5 made alone.
    Batch streamed;
    for (uint64_t k = 0; k <= 5; ++k) streamed = make_batch(c, train, k, 16);
    CHECK(streamed.inputs.v == a.inputs.v);
    // A slice: the first 4 rows of a batch of 16 are the batch of 4.
    Batch small = make_batch(c, train, 5, 4);
    CHECK(std::equal(small.inputs.v.begin(), small.inputs.v.end(), a.inputs.v.begin()));
    // Other batches, the eval stream and other rows differ.
    CHECK(make_batch(c, train, 6, 16).inputs.v != a.inputs.v);
    Batch e = make_batch(c, eval, 5, 16);
    CHECK(e.inputs.v != a.inputs.v);
    const int64_t T = c.length();
    CHECK(!std::equal(a.inputs.v.begin(), a.inputs.v.begin() + T, a.inputs.v.begin() + T));
  }
  CHECK_THROWS_AS(stream_seed(1, "test"), Error);
}

TEST_CASE("tasks: impossible configurations name the parameter") {
  auto expect = [](TaskConfig c, const std::string& word) {
    const std::string msg = error_of(c);
    CAPTURE(msg);
    CHECK(msg.find(word) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK_THROWS_AS(make_batch(c, 1, 0, 2), Error);
  };
  for (const std::string& task : task_names()) CHECK(error_of(config(task)).empty());
  expect(config("nope"), "unknown task 'nope'");
  TaskConfig c = config("copy");
  c.seq_len = 42;  // 2*20+3 = 43
  expect(c, "max_len");
  c = config("copy");
  c.min_len = 0;
  expect(c, "min_len");
  c = config("copy");
  c.min_len = 9, c.max_len = 8;
  expect(c, "max_len");
  c = config("selective-copy");
  c.num_tokens = 256;
  expect(c, "num_tokens");
  c = config("selective-copy");
  c.num_tokens = 129;
  expect(c, "num_tokens");
  c = config("selective-copy");
  c.vocab = 2;
  expect(c, "vocab");
  c = config("mqar");
  c.vocab = 128;  // V <= seq_len
  expect(c, "vocab");
  c = config("mqar");
  c.num_kv_pairs = 33;  // 4K > 128
  expect(c, "num_kv_pairs");
  c = config("mqar");
  c.power_a = 0;
  expect(c, "power_a");
  c = config("induction");
  c.seq_len = 3;
  expect(c, "seq_len");
  c = config("needle");
  c.distances = {16, 255};  // beyond seq_len-2 = 254
  expect(c, "distance 255");
  c = config("needle");
  c.distances = {0};
  expect(c, "distance 0");
  c = config("needle");
  c.vocab = 4;
  expect(c, "vocab");
  CHECK_THROWS_AS(make_batch(config("mqar"), 1, 0, 0), Error);
}

TEST_CASE("tasks: metrics over scored positions") {
  TaskConfig c = config("needle");
  c.vocab = 64;
  c.seq_len = 32;
  c.distances = {2, 20};
  const int64_t B = 6, T = 32, V = 64;
  Batch b = make_batch(c, 8, 0, B);
  // Logits that put 2.0 on the target (and on token 1 elsewhere); row 1's answer made wrong.
  Tensor logits = Tensor::zeros({B, T, V});
  float* z = logits.data();
  for (int64_t i = 0; i < B * T; ++i) z[i * V + (b.mask[size_t(i)] ? b.targets.v[size_t(i)] : 1)] = 2.f;
  const int64_t wrong = 1 * T + T - 1;
  z[wrong * V + b.targets.v[size_t(wrong)]] = 0.f;
  z[wrong * V + 3] = 2.f;
  TaskScore s = score_batch(logits, b);
  CHECK(s.scored == B);
  CHECK(s.rows == B);
  CHECK(s.token_acc == doctest::Approx(5.0 / 6.0));
  CHECK(s.seq_acc == doctest::Approx(5.0 / 6.0));
  // The loss equals the framework's cross_entropy on the masked targets (independent code).
  CHECK(s.loss == doctest::Approx(cross_entropy(logits, masked_targets(b.targets, b.mask)).data()[0]).epsilon(1e-5));
  auto by = accuracy_by_distance(logits, b);
  REQUIRE(by.size() == 2);
  CHECK(by[2].scored == 3);
  CHECK(by[2].accuracy() == doctest::Approx(1.0));
  CHECK(by[20].accuracy() == doctest::Approx(2.0 / 3.0));  // row 1 has distance 20
}

TEST_CASE("tasks: copy gen_acc by greedy decoding") {
  TaskConfig c = config("copy");
  Batch b = make_batch(c, 2, 0, 8);
  const int64_t V = c.vocab_size();
  int64_t row_now = 0;
  // An oracle that knows row `row_now`: the next token of the true row after the prefix.
  auto oracle = [&](const IntTensor& prefix) {
    const int64_t t = prefix.shape[1];
    for (int64_t k = 0; k < t; ++k) REQUIRE(prefix.v[size_t(k)] == row(b, row_now).x[k]);
    Tensor z = Tensor::zeros({1, t, V});
    z.data()[(t - 1) * V + row(b, row_now).x[t]] = 1.f;
    return z;
  };
  for (row_now = 0; row_now < 8; ++row_now) CHECK(copy_generated_right(b, row_now, oracle));
  // Always predicting EOS is wrong on every row (strings are at least 5 symbols long).
  auto eos = [&](const IntTensor& prefix) {
    Tensor z = Tensor::zeros({1, prefix.shape[1], V});
    z.data()[z.numel() - V + c.alphabet + 2] = 1.f;
    return z;
  };
  CHECK(copy_gen_acc(b, eos) == 0.0);
}

TEST_CASE("tasks: evaluation per sequence length (length generalisation)") {
  TaskConfig c = config("induction");
  const int64_t V = c.vocab_size();
  // An oracle reading the answer from the row (induction: the token after the earlier trigger)
  // and a model with uniform logits; each records the lengths it was asked about.
  std::vector<int64_t> seen;
  auto oracle = [&](const IntTensor& in) {
    const int64_t B = in.shape[0], T = in.shape[1];
    seen.push_back(T);
    Tensor z = Tensor::zeros({B, T, V});
    for (int64_t b = 0; b < B; ++b) {
      const int32_t* x = in.v.data() + b * T;
      int64_t p = 0;
      while (!(x[p] == 0 && p + 1 < T - 1)) ++p;  // the first trigger is the pair's
      z.data()[((b * T) + T - 1) * V + x[p + 1]] = 1.f;
    }
    return z;
  };
  auto uniform = [&](const IntTensor& in) { return Tensor::zeros({in.shape[0], in.shape[1], V}); };
  const std::vector<int64_t> lengths = {64, 128, 512};
  std::vector<LengthResult> r = evaluate_lengths(c, lengths, oracle, 3, 2, 8);
  REQUIRE(r.size() == 3);
  CHECK(seen == std::vector<int64_t>{64, 64, 128, 128, 512, 512});
  for (size_t i = 0; i < r.size(); ++i) {
    CHECK(r[i].seq_len == lengths[i]);
    CHECK(r[i].score.token_acc == 1.0);
    CHECK(r[i].score.seq_acc == 1.0);
    CHECK(r[i].score.scored == 16);  // one scored position per row, 2 batches of 8
  }
  for (const LengthResult& u : evaluate_lengths(c, lengths, uniform, 3, 2, 8))
    CHECK(u.score.loss == doctest::Approx(std::log(double(V))).epsilon(1e-12));
  // An impossible length fails before any evaluation runs.
  seen.clear();
  CHECK_THROWS_AS(evaluate_lengths(c, {64, 2}, oracle, 3, 2, 8), Error);
  CHECK(seen.empty());
}

TEST_CASE("tasks: trilemma data show") {
  using trilemma_test::run;
  trilemma_test::Run r = run("data show --task mqar --rows 2 --threads 1");
  CHECK(r.code == 0);
  CHECK(r.out.find("row 1: 8 scored") != std::string::npos);
  CHECK(r.out.find("row 2") == std::string::npos);
  CHECK(r.out.find("[") != std::string::npos);
  for (const char* task : {"copy", "selective-copy", "induction", "needle"}) {
    CAPTURE(task);
    CHECK(run(std::string("data show --task ") + task + " --rows 1 --threads 1").code == 0);
  }
  struct Bad {
    const char* args;
    const char* named;
  };
  for (Bad bad : {Bad{"data show --task mqar --num-kv-pairs 40", "num_kv_pairs"},
                  Bad{"data show --task bogus", "--task"}, Bad{"data show --task mqar --rows 0", "--rows"},
                  Bad{"data show --task needle --distance 5,x", "--distance"},
                  Bad{"data show --task mqar --split test", "--split"}, Bad{"data list --task mqar", "list"},
                  Bad{"data show --task copy --seq-len 10", "max_len"}}) {
    CAPTURE(bad.args);
    r = run(std::string(bad.args) + " --threads 1");
    CHECK(r.code == 2);
    CHECK(r.err.find(bad.named) != std::string::npos);
  }
}
