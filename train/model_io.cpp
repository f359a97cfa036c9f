#include "train/model_io.hpp"

namespace tri::cli {

TaskConfig saved_task(const ConfigMap& config, const std::string& checkpoint) {
  try {
    return task_config(config);
  } catch (const UsageError& e) {
    throw Error("checkpoint " + checkpoint + ": config: " + e.what());
  }
}

ModelConfig saved_model(const ConfigMap& config, const TaskConfig& task, const std::string& checkpoint) {
  try {
    return model_config(config, task);
  } catch (const UsageError& e) {
    throw Error("checkpoint " + checkpoint + ": config: " + e.what());
  }
}

LoadedModel load_model(const std::string& checkpoint) {
  LoadedModel m;
  m.meta = read_checkpoint_meta(checkpoint);
  m.config = m.meta.config;
  m.task = saved_task(m.config, checkpoint);
  m.model_config = saved_model(m.config, m.task, checkpoint);
  m.model = std::make_unique<LanguageModel>(m.model_config, 0);
  m.meta = read_checkpoint(checkpoint, *m.model, nullptr);
  m.model->eval();
  return m;
}

}  // namespace tri::cli
