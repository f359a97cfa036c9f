// copy: long-range copy (Jelassi et al. 2024, "Repeat After Me"; docs/TASKS.md).
//   BOS s SEP s EOS PAD...; symbols 0..A-1, BOS = A, SEP = A+1, EOS = A+2, PAD = A+3.
//   |s| ~ U[min_len, max_len]. Scored: t = |s|+1 .. 2|s|+1 (targets: the copied string, then
//   EOS). Extra metric gen_acc: the answer produced by greedy decoding, not teacher forcing.
#include <algorithm>

#include "data/tasks.hpp"

namespace tri {

namespace {

// The token layout, defined once: the generator, the legend and the decoder's stop token.
struct CopyTokens {
  int32_t alphabet;
  int32_t bos() const { return alphabet; }
  int32_t sep() const { return alphabet + 1; }
  int32_t eos() const { return alphabet + 2; }
  int32_t pad() const { return alphabet + 3; }
};

class CopyTask : public TaskOptions {
 public:
  int64_t alphabet = 26;
  int64_t min_len = 5, max_len = 20;

  void visit(FieldVisitor& v) override {
    v.integer("alphabet", alphabet, {1, int64_t(1) << 30}, "alphabet size");
    v.integer("min-len", min_len, {1, int64_t(1) << 23}, "shortest string");
    v.integer("max-len", max_len, {1, int64_t(1) << 23}, "longest string");
  }
  std::unique_ptr<Options> clone() const override { return std::make_unique<CopyTask>(*this); }

  CopyTokens tokens() const { return {int32_t(alphabet)}; }
  int64_t default_seq_len() const override { return 2 * max_len + 3; }
  int64_t fixed_vocab() const override { return alphabet + 4; }

  void validate(const TaskConfig& c) const override {
    if (max_len < min_len)
      throw Error("task copy: --max-len " + std::to_string(max_len) + " must be >= --min-len " +
                  std::to_string(min_len));
    if (c.length() < 2 * max_len + 3)
      throw Error("task copy: --seq-len " + std::to_string(c.length()) + " cannot hold a string of --max-len " +
                  std::to_string(max_len) + " (needs seq-len >= 2*max-len+3 = " + std::to_string(2 * max_len + 3) + ")");
  }

  void fill_row(const TaskConfig&, Rng rng, Row& r) const override {
    const CopyTokens tok = tokens();
    const int32_t A = tok.alphabet;
    const int64_t L = min_len + int64_t(rng.below(uint64_t(max_len - min_len + 1)));
    r.x[0] = tok.bos();
    for (int64_t i = 0; i < L; ++i) r.x[1 + i] = r.x[L + 2 + i] = int32_t(rng.below(uint64_t(A)));
    r.x[L + 1] = tok.sep();
    r.x[2 * L + 2] = tok.eos();
    for (int64_t t = 2 * L + 3; t < r.T; ++t) r.x[t] = tok.pad();
    for (int64_t t = L + 1; t <= 2 * L + 1; ++t) r.score(t, r.x[t + 1]);  // s, then EOS
  }

  double chance_accuracy(const TaskConfig&) const override { return 1.0 / double(alphabet); }

  // Jelassi et al. score each string length on its own: at another length T than the run's,
  // every string has exactly (T-3)/2 symbols, the most the row holds.
  void set_length(TaskConfig& c, int64_t seq_len) const override {
    if (seq_len == c.length()) return;
    c.seq_len = seq_len;
    auto& o = static_cast<CopyTask&>(*c.options);
    o.min_len = o.max_len = std::max<int64_t>(1, (seq_len - 3) / 2);
  }

  std::string legend(const TaskConfig&) const override {
    const CopyTokens tok = tokens();
    auto n = [](int64_t v) { return std::to_string(v); };
    return "symbols 0.." + n(alphabet - 1) + ", BOS " + n(tok.bos()) + ", SEP " + n(tok.sep()) + ", EOS " +
           n(tok.eos()) + ", PAD " + n(tok.pad());
  }

  int32_t stop_token(const TaskConfig&) const override { return tokens().eos(); }

  // gen_acc: is each row's answer (the string and EOS) what greedy decoding produces?
  void extra_scores(const TaskConfig& c, const Batch& batch, const Tensor&, const GreedyDecoder* decode,
                    ExtraScores& out) const override {
    if (!decode) return;
    const int64_t B = batch.inputs.shape()[0], T = batch.inputs.shape()[1];
    Accuracy& gen = extra_score(out, "gen_acc");
    for (int64_t b = 0; b < B; ++b) {
      const AnswerSpan span = answer_span(batch, b);
      const int32_t* x = batch.inputs.data() + b * T;
      const std::vector<int32_t> prompt(x, x + span.start), answer(x + span.start, x + span.start + span.length);
      gen.correct += (*decode)(prompt, span.length, stop_token(c)) == answer;
      ++gen.total;
    }
  }
};

}  // namespace

TaskSpec copy_task() {
  return {"copy", "copy a string after a separator", [] { return std::make_unique<CopyTask>(); }};
}

}  // namespace tri
