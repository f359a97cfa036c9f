// The optimizers --optimizer names: each entry maps the run's config onto its framework class.
#include "train/optimizers.hpp"

#include "framework/config/registry.hpp"

namespace tri::train {

namespace {

OptimizerSpec adamw_optimizer() {
  return {"adamw", "AdamW: decoupled weight decay, --beta1, --beta2, --eps",
          [](const OptimizerConfig& c, std::vector<Parameter> params) -> std::unique_ptr<Optimizer> {
            AdamWOptions o;
            o.beta1 = c.beta1, o.beta2 = c.beta2, o.eps = c.eps, o.weight_decay = c.weight_decay;
            return std::make_unique<AdamW>(std::move(params), c.lr, o);
          }};
}

OptimizerSpec sgd_optimizer() {
  return {"sgd", "SGD: L2 weight decay, --momentum",
          [](const OptimizerConfig& c, std::vector<Parameter> params) -> std::unique_ptr<Optimizer> {
            SGDOptions o;
            o.momentum = c.momentum, o.weight_decay = c.weight_decay;
            return std::make_unique<SGD>(std::move(params), c.lr, o);
          }};
}

Registry<OptimizerSpec>& registry() {
  static Registry<OptimizerSpec> r("--optimizer", {adamw_optimizer(), sgd_optimizer()});
  return r;
}

}  // namespace

const OptimizerSpec& optimizer_spec(const std::string& name) { return registry().find(name); }
std::vector<std::string> optimizer_names() { return registry().names(); }
std::string optimizers_help(const std::string& lead) { return registry().help(lead); }

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, const Module& model) {
  return optimizer_spec(c.optimizer).make(c, model.parameters());
}

}  // namespace tri::train
