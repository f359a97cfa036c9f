#include "train/model_io.hpp"

#include "models/decode.hpp"

namespace tri::train {

LoadedModel load_model(const std::string& checkpoint) {
  LoadedModel m;
  m.meta = read_checkpoint_meta(checkpoint);
  try {
    m.config = RunConfig::from_text(m.meta.config);
  } catch (const Error& e) {
    throw Error("checkpoint " + checkpoint + ": config: " + e.what());
  }
  {
    const CheckpointSizeLimit limit(checkpoint);
    m.model = std::make_unique<LanguageModel>(m.config.model, 0);
  }
  m.meta = read_checkpoint(checkpoint, *m.model, nullptr);
  m.model->eval();
  return m;
}

GreedyDecoder greedy_decoder(LanguageModel& m) {
  return [&m](const std::vector<int32_t>& prompt, int64_t max_new, int32_t stop_token) {
    return greedy_decode(m, prompt, max_new, stop_token);
  };
}

}  // namespace tri::train
