// The checkpoint reader on untrusted bytes, along the paths the CLI takes: `inspect` (the
// attributes), `eval` / `generate` (the model rebuilt from the saved config, its parameters read)
// and `train --resume` (the optimizer's state too). Seeds: fuzz/corpus/checkpoint, small
// checkpoints of each family and optimizer (scripts/fuzz.sh --seed makes them).
#include "fuzz/fuzz_input.hpp"
#include "train/checkpoint.hpp"
#include "train/model_io.hpp"
#include "train/trainer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tri::fuzz::single_threaded();
  const std::string& path = tri::fuzz::write_input(data, size, ".h5");
  tri::fuzz::expect_clean([&] { tri::train::read_checkpoint_meta(path); });
  tri::fuzz::expect_clean([&] {
    tri::train::LoadedModel m = tri::train::load_model(path);
    std::unique_ptr<tri::Optimizer> opt;
    {
      const tri::train::CheckpointSizeLimit limit(path);
      opt = tri::train::make_optimizer(m.config.optimizer, *m.model);
    }
    tri::train::read_checkpoint(path, *m.model, opt.get());
  });
  return 0;
}
