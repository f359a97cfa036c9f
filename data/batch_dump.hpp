// Batches written to HDF5 for programs outside trilemma (scripts/interop_check.py replays `eval
// --dump` in PyTorch; scripts/train_parity.py trains on `data dump`): /inputs, /targets (-100
// where unscored) and /mask as int32, /logits [B, T, V] float32 when the model's output goes
// with them, and attributes on the root. Both commands write through write_batch_dump.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "data/tasks.hpp"

namespace tri {

struct BatchDump {
  Shape shape;  // of /inputs, /targets and /mask: [B, T] for one batch, [N, B, T] for N batches
  std::vector<int32_t> inputs, targets, mask;
  std::optional<Tensor> logits;
  std::vector<std::pair<std::string, std::variant<std::string, int64_t>>> attrs;  // written in this order
};

// One batch, [B, T].
BatchDump batch_dump(const Batch& batch);
// Batches first..first+n-1 of `rows` rows of the stream of seed `stream`, [n, rows, T]: the
// batches the trainer draws at steps first..first+n-1 of that stream.
BatchDump stream_dump(const TaskConfig& c, uint64_t stream, int64_t first, int64_t n, int64_t rows);

// Written atomically: a failure leaves no file behind.
void write_batch_dump(const std::string& path, const BatchDump& d);

}  // namespace tri
