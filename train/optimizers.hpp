// The registry of optimizers: --optimizer names an entry, which builds the framework's optimizer
// from the run's OptimizerConfig. Adding one is its entry in optimizers.cpp (a few lines: its
// framework class from the config's fields) plus its line in the registry there; a
// hyperparameter no optimizer had before is a new OptimizerConfig field (FieldAge::added_later,
// so run ids and old configs stay as they were).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/optim/optim.hpp"
#include "train/run_config.hpp"

namespace tri::train {

struct OptimizerSpec {
  std::string name;     // the --optimizer value, and the checkpoint's optimizer
  std::string summary;  // one line for --help
  // The optimizer over `params`, starting at the config's --lr (the schedule sets it each step).
  std::function<std::unique_ptr<Optimizer>(const OptimizerConfig&, std::vector<Parameter>)> make;
};

// The entry of `name`; an Error naming the registered optimizers when there is none.
const OptimizerSpec& optimizer_spec(const std::string& name);
std::vector<std::string> optimizer_names();
// "<lead> adamw (its summary), sgd (...)", for --help.
std::string optimizers_help(const std::string& lead);

// The run's optimizer over the model's parameters (with its decay groups).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, const Module& model);

}  // namespace tri::train
