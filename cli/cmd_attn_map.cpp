// trilemma attn-map CHECKPOINT: the attention probabilities of an attention model as heat maps
// (report/attn_map.hpp).
#include "cli/cli.hpp"
#include "report/attn_map.hpp"

namespace tri::cli {

void attn_map_options(CommandOptions& o) {
  o.named.add_options()
      ("checkpoint", po::value<std::string>()->value_name("FILE")->required(),
       "the checkpoint file (.h5) of an attention model, also the first positional argument")
      ("row", po::value<int64_t>()->value_name("N")->default_value(0)->notifier(in_range<int64_t>("row", 0, 99999)),
       "the row of the evaluation stream's first batch")
      ("layer", po::value<int64_t>()->value_name("L")->notifier(in_range<int64_t>("layer", 0, 1023)),
       "only this layer (from 0); default: every layer")
      ("seq-len", po::value<int64_t>()->value_name("N")->notifier(in_range<int64_t>("seq-len", 1, 65536)),
       "the row's length; default: the task's")
      ("out", po::value<std::string>()->value_name("FILE"),
       "the PNG to write; default: attn-map.png next to the checkpoint")
      ("data", po::value<std::string>()->value_name("FILE"),
       "also write the probabilities as text: per head a T x T matrix (row = query position)");
  o.positional.add("checkpoint", 1);
}

int run_attn_map(const po::variables_map& vm) {
  report::AttnMapRequest req;
  req.checkpoint = vm["checkpoint"].as<std::string>();
  req.row = vm["row"].as<int64_t>();
  if (vm.count("layer")) req.layer = vm["layer"].as<int64_t>();
  if (vm.count("seq-len")) req.seq_len = vm["seq-len"].as<int64_t>();
  if (vm.count("out")) req.out = vm["out"].as<std::string>();
  if (vm.count("data")) req.data = vm["data"].as<std::string>();
  report::attention_map(req);
  return 0;
}

}  // namespace tri::cli
