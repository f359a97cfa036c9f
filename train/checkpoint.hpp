// Checkpoints: one HDF5 file with everything needed to resume training bit for bit, in the
// layout of docs/CHECKPOINT.md:
//   /                     attrs format="trilemma-checkpoint", format_version=1, step, tokens_seen
//   /config               attrs: every resolved config value as text, under its CLI name
//   /model/<name>         float32 parameters, PyTorch names and shapes (framework/io/state_io.hpp)
//   /optimizer            attrs name, step and the hyper-parameters
//   /optimizer/<slot>/<name>   slot tensors (AdamW: exp_avg, exp_avg_sq), each with an int
//                         attribute `step`: the parameter's own update count
//   /rng/<name>           uint64 random-number states: "init" (the parameters' seed) and "data"
//                         (the training stream's seed and next batch index)
//   /run                  attrs: the training run's bookkeeping (best evaluation, elapsed time);
//                         optional, as readers ignore fields they do not know
// Files are written atomically: a crash leaves either the old file or the new one.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/core/module.hpp"
#include "framework/optim/optim.hpp"

namespace tri::train {

constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointData {
  int64_t step = 0;         // training steps done
  int64_t tokens_seen = 0;  // training tokens consumed
  std::map<std::string, std::string> config;  // CLI name -> resolved value as text
  // Optimizer attributes. On write, name and step come from the optimizer itself and its
  // hyper-parameters (lr = the current one) are merged with these (these win).
  std::string optimizer_name;
  int64_t optimizer_step = 0;
  std::map<std::string, double> optimizer_hparams;
  // Random-number states, e.g. "init" -> Rng::state() words, "data" -> {seed, batch index}.
  std::map<std::string, std::vector<uint64_t>> rng;
  // The run's bookkeeping: e.g. "best_eval_acc", "best_step", "elapsed_s".
  std::map<std::string, double> run;
};

// Writes `path` atomically (framework/io/atomic_file.hpp): on failure any existing `path` is left
// untouched, no temporary file remains and an Error naming `path` is thrown. `meta.config` and
// `meta.rng` must not be empty (a checkpoint without them cannot be resumed).
void write_checkpoint(const std::string& path, const Module& model, const Optimizer& opt,
                      const CheckpointData& meta);

// Reads a checkpoint into `model` and, when given, `opt` (its slots, per-parameter step
// counts, step count and lr). Everything is validated first — format, format_version,
// required fields, every parameter's name and shape, the optimizer's name and slot shapes —
// so on any Error (naming the file and the field) neither the model nor the optimizer changed.
CheckpointData read_checkpoint(const std::string& path, Module& model, Optimizer* opt);

// Only the attributes and the rng states, without a model: for `inspect` and for building the
// model from the saved config before read_checkpoint.
CheckpointData read_checkpoint_meta(const std::string& path);

// For building the model (and optimizer) a checkpoint's config declares: everything they hold is
// stored in the file, so while this lives their tensors may not take more than the file's size
// (plus room for alignment and small buffers). A corrupt config declaring a huge model is an
// Error naming the file, not an allocation.
struct CheckpointSizeLimit : TensorMemoryLimit {
  explicit CheckpointSizeLimit(const std::string& path);

 private:
  CheckpointSizeLimit(const std::string& path, int64_t file_bytes);
};

}  // namespace tri::train
