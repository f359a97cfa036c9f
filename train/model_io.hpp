// A language model rebuilt from a checkpoint: the saved /config gives the task and the model,
// then the parameters are read with every name and shape checked (train/checkpoint.hpp).
#pragma once
#include <memory>
#include <string>

#include "models/lm.hpp"
#include "train/checkpoint.hpp"
#include "train/run_config.hpp"

namespace tri::cli {

struct LoadedModel {
  ConfigMap config;  // the run's resolved config, as saved
  TaskConfig task;
  ModelConfig model_config;
  std::unique_ptr<LanguageModel> model;
  CheckpointData meta;
};

// Throws tri::Error "checkpoint <path>: ..." for a missing, corrupt or inconsistent file.
LoadedModel load_model(const std::string& checkpoint);

// The typed task and model of a saved config; a bad value is an Error naming the file.
TaskConfig saved_task(const ConfigMap& config, const std::string& checkpoint);
ModelConfig saved_model(const ConfigMap& config, const TaskConfig& task, const std::string& checkpoint);

}  // namespace tri::cli
