// trilemma inspect CHECKPOINT: a checkpoint's step, tokens, optimizer, config and parameter
// table (name, shape, count, L2 norm). Reading validates the file: a missing, truncated or
// malformed checkpoint is a one-line error naming the file and the problem (exit code 1).
#include <cmath>
#include <cstdio>

#include "framework/io/h5.hpp"
#include "train/checkpoint.hpp"
#include "cli/cli.hpp"

namespace tri::cli {

using namespace tri::train;

void inspect_options(CommandOptions& o) {
  o.named.add_options()("checkpoint", po::value<std::string>()->value_name("FILE")->required(),
                        "the checkpoint file (.h5), also the first positional argument");
  o.positional.add("checkpoint", 1);
}

int run_inspect(const po::variables_map& vm) {
  const std::string path = vm["checkpoint"].as<std::string>();
  const CheckpointData meta = read_checkpoint_meta(path);  // validates the attributes
  H5File file(path, H5File::Mode::read);
  if (!file.exists("/model")) throw Error("checkpoint " + path + ": missing group /model");
  std::printf("checkpoint %s\nstep %lld, tokens seen %lld\noptimizer %s, step %lld\n",
              path.c_str(), (long long)meta.step, (long long)meta.tokens_seen,
              meta.optimizer_name.c_str(), (long long)meta.optimizer_step);
  for (const auto& [k, v] : meta.optimizer_hparams) std::printf("  %s = %g\n", k.c_str(), v);
  std::printf("config:\n");
  for (const auto& [k, v] : meta.config) std::printf("  %s = %s\n", k.c_str(), v.c_str());

  std::vector<std::string> names = file.list("/model");
  size_t w = 4;
  for (const std::string& n : names) w = std::max(w, n.size());
  std::printf("%-*s  %-18s %12s %12s\n", int(w), "name", "shape", "count", "norm");
  int64_t total = 0;
  for (const std::string& n : names) {
    const Tensor t = file.read("/model/" + n);  // checks the dtype is floating point
    double ss = 0;
    for (int64_t i = 0; i < t.numel(); ++i) ss += double(t.data()[i]) * t.data()[i];
    if (!std::isfinite(ss)) throw Error("checkpoint " + path + ": parameter " + n + " holds NaN or Inf");
    std::printf("%-*s  %-18s %12lld %12.4f\n", int(w), n.c_str(), t.shape().str().c_str(),
                (long long)t.numel(), std::sqrt(ss));
    total += t.numel();
  }
  std::printf("%-*s  %-18s %12lld\n", int(w), "total", "", (long long)total);
  return 0;
}

}  // namespace tri::cli
