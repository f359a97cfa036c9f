// A language model rebuilt from a checkpoint: the saved /config gives the run's typed config,
// then the parameters are read with every name and shape checked (train/checkpoint.hpp).
#pragma once
#include <memory>
#include <string>

#include "data/tasks.hpp"
#include "models/lm.hpp"
#include "train/checkpoint.hpp"
#include "train/run_config.hpp"

namespace tri::train {

struct LoadedModel {
  RunConfig config;  // the run's config, as saved
  std::unique_ptr<LanguageModel> model;
  CheckpointData meta;
};

// Throws tri::Error "checkpoint <path>: ..." for a missing, corrupt or inconsistent file.
LoadedModel load_model(const std::string& checkpoint);

// Greedy decoding of `m` through its recurrent state (models/decode.hpp), for the tasks'
// generated answers.
GreedyDecoder greedy_decoder(LanguageModel& m);

}  // namespace tri::train
