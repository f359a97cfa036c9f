#include "block.hpp"

#include "framework/autograd.hpp"
#include "models/attention.hpp"
#include "models/linear_attention.hpp"
#include "models/mamba.hpp"

namespace tri {

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, Rng& rng) {
  if (cfg.family == "attention") return std::make_unique<MultiHeadAttention>(cfg, rng);
  if (cfg.family == "linear") return std::make_unique<LinearAttention>(cfg, rng);
  if (cfg.family == "mamba") return std::make_unique<MambaMixer>(cfg, rng);
  throw Error("make_mixer: family '" + cfg.family + "' is not one of attention | linear | mamba");
}

Block::Block(const ModelConfig& cfg, Rng& rng) : pre_norm(cfg.norm == "pre") {
  const bool mamba = cfg.family == "mamba";
  const Norm::Kind kind = mamba ? Norm::Kind::rms : Norm::Kind::layer;
  // Registered in PyTorch's state_dict order: norm, mixer, norm2, mlp.
  norm1 = std::make_unique<Norm>(kind, cfg.d_model);
  add_module(mamba ? "norm" : "norm1", *norm1);
  mixer = make_mixer(cfg, rng);
  add_module("mixer", *mixer);
  if (cfg.mlp != "none") {
    norm2 = std::make_unique<Norm>(kind, cfg.d_model);
    add_module("norm2", *norm2);
    mlp = std::make_unique<Mlp>(cfg.d_model, rng);
    add_module("mlp", *mlp);
  }
}

Tensor Block::residual(const Tensor& x, const std::function<Tensor(const Tensor&)>& mix) {
  const Norm& n1 = *norm1;
  if (pre_norm) {
    Tensor h = x + mix(n1(x));
    return mlp ? h + (*mlp)((*norm2)(h)) : h;
  }
  Tensor h = n1(x + mix(x));
  return mlp ? (*norm2)(h + (*mlp)(h)) : h;
}

Tensor Block::forward(const Tensor& x) {
  return residual(x, [this](const Tensor& t) { return mixer->forward(t); });
}

Tensor Block::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  return residual(x, [this, &state](const Tensor& t) { return mixer->step(t, state); });
}

}  // namespace tri
