// The synthetic recall tasks of specs/TASKS.md: copy, selective-copy, mqar, induction, needle.
// A row is (inputs, next-token targets, loss mask) of length seq_len. Every row is a pure function
// of (stream seed, batch index, row) drawn with tri::Rng only, so a stream can resume at any
// batch, evaluation can take any slice, and the same seed gives the same bits on every machine.
//
// Layouts (T = seq_len; "target at t" is what the model must predict after reading inputs[t]):
//   copy            BOS s SEP s EOS PAD...; symbols 0..A-1, BOS=A, SEP=A+1, EOS=A+2, PAD=A+3.
//                   Scored: t = |s|+1 .. 2|s|+1 (targets: the copied string, then EOS).
//   selective-copy  noise 0 with M data tokens (1..A-2) at sorted distinct positions among the
//                   first T-M slots, then M markers A-1. Scored: the markers, targets the data
//                   tokens in order.
//   mqar            k1 v1 .. kK vK, then the query region (zeros, or uniform tokens with
//                   random_fillers). Keys from [1, V/2), values from [V/2, V), distinct within a
//                   row. Gaps g are drawn without replacement from p(i) ~ i^(a-1), i = 1..(T-2K)/2;
//                   key j is queried at 2K + 2*(g_j - 1) (Zoology's 0-based offset, so the largest
//                   gap still lands inside the row). Scored: the K query positions, target the value.
//   induction       content tokens 1..V-1 at 0..T-2, with the pair (trigger 0, x) at p, p+1 < T-2;
//                   the last input is the trigger. Scored: t = T-1, target x.
//   needle          fillers from [1, V/4), one key from [V/4, V/2) at T-2-d and its value from
//                   [V/2, V) right after it; the last input is the key. Scored: t = T-1, target
//                   the value. Row i of a batch uses distance distances[i % count].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/ops.hpp"

namespace tri {

struct TaskConfig {
  std::string task = "mqar";  // copy | selective-copy | mqar | induction | needle
  int64_t seq_len = 0;        // 0: the task's default (default_seq_len)
  int64_t vocab = 0;          // selective-copy, mqar, induction, needle; 0: the task's default
  // copy
  int64_t alphabet = 26;
  int64_t min_len = 5, max_len = 20;
  // selective-copy
  int64_t num_tokens = 16;  // M
  // mqar
  int64_t num_kv_pairs = 8;
  double power_a = 0.01;
  bool random_fillers = false;
  // needle
  std::vector<int64_t> distances = {4, 16, 64, 128, 250};

  int64_t length() const;      // seq_len, or the task's default when 0
  int64_t vocab_size() const;  // ids are 0..vocab_size()-1
  // Throws tri::Error naming the first bad parameter and its limit.
  void validate() const;
};

// The CPU defaults of specs/TASKS.md: copy 2*max_len+3, selective-copy 256, mqar 128 (the
// (128, 8) point of the Zoology grid), induction 256, needle 256.
int64_t default_seq_len(const TaskConfig& c);
const std::vector<std::string>& task_names();

struct Batch {
  IntTensor inputs;              // [B, T]
  IntTensor targets;             // [B, T], kIgnoreIndex where mask is 0
  std::vector<uint8_t> mask;     // [B*T], 1 at scored positions
  std::vector<int64_t> distance; // needle: [B] the row's key-query distance; empty otherwise
};

// The seed of the training or evaluation stream ("train" | "eval") from one base seed: distinct
// constants through seed_mix, so the two streams never share a row.
uint64_t stream_seed(uint64_t base_seed, const std::string& split);

// Batch `batch_index` of the stream `seed` (validates cfg first).
Batch make_batch(const TaskConfig& cfg, uint64_t seed, uint64_t batch_index, int64_t batch_size);

// Copy: the answer of row b (the copied string and EOS) starts at input position `start`
// (the first copied symbol) and has `length` tokens; the prompt is inputs[0, start).
struct AnswerSpan {
  int64_t start, length;
};
AnswerSpan copy_answer_span(const Batch& batch, int64_t row);

}  // namespace tri
