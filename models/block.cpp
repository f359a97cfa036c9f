#include "block.hpp"

#include <cmath>

#include "framework/core/autograd.hpp"
#include "models/family.hpp"

namespace tri {

Block::Block(const ModelConfig& cfg, Rng& rng) : pre_norm(cfg.norm == "pre") {
  const FamilySpec& family = cfg.spec();
  const Norm::Kind kind = family.norm;
  // Registered in PyTorch's state_dict order: norm, mixer, norm2, mlp.
  norm1 = std::make_unique<Norm>(kind, cfg.d_model);
  add_module(family.first_norm, *norm1);
  mixer = family.make(cfg, rng);
  add_module("mixer", *mixer);
  if (cfg.mlp != "none") {
    norm2 = std::make_unique<Norm>(kind, cfg.d_model);
    add_module("norm2", *norm2);
    mlp = std::make_unique<Mlp>(cfg.d_model, rng);
    add_module("mlp", *mlp);
  }
  if (cfg.rescale_residual) {
    const double branches = mlp ? 2.0 : 1.0;
    const float scale = float(1.0 / std::sqrt(branches * double(cfg.n_layers)));
    for (const Parameter& p : parameters())
      if (p.name.ends_with("out_proj.weight") || p.name.ends_with("fc2.weight")) {
        Tensor w = p.tensor;
        for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] *= scale;
      }
  }
}

Tensor Block::residual(const Tensor& x, const Mix& mix) {
  const Norm& n1 = *norm1;
  if (pre_norm) {
    Tensor h = mix(n1(x), x);                 // x + mixer(norm1(x))
    return mlp ? (*mlp)((*norm2)(h), h) : h;  // h + mlp(norm2(h))
  }
  Tensor h = n1(mix(x, x));                   // norm1(x + mixer(x))
  return mlp ? (*norm2)((*mlp)(h, h)) : h;    // norm2(h + mlp(h))
}

Tensor Block::forward(const Tensor& x) {
  return residual(x, [this](const Tensor& a, const Tensor& r) { return mixer->forward(a, r); });
}

Tensor Block::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  return residual(x, [this, &state](const Tensor& a, const Tensor& r) { return r + mixer->step(a, state); });
}

}  // namespace tri
