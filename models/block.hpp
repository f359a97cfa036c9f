// One residual block: a sequence mixer, norms and an optional MLP.
//   pre-norm  (default):  x = x + mixer(norm1(x));  x = x + mlp(norm2(x))
//   post-norm (the book's algorithm 3):  x = norm1(x + mixer(x));  x = norm2(x + mlp(x))
// The family's entry (models/family.hpp) says which norm: LayerNorm ("norm1", "norm2") for
// attention and linear attention, RMSNorm named as mamba_ssm names it ("norm", "norm2") for Mamba.
#pragma once
#include <functional>
#include <memory>

#include "models/layers.hpp"

namespace tri {

class Block : public Module {
 public:
  Block(const ModelConfig& cfg, Rng& rng);  // cfg: checked (ModelConfig::checked)
  Tensor forward(const Tensor& x);                      // [B, T, D] -> [B, T, D]
  Tensor step(const Tensor& x, MixerState& state);      // [B, 1, D], no grad

  std::unique_ptr<Norm> norm1, norm2;  // norm2 only with an MLP
  std::unique_ptr<Mixer> mixer;
  std::unique_ptr<Mlp> mlp;            // null when cfg.mlp == "none"

 private:
  bool pre_norm;
  // mix(a, r) = r + mixer(a): the sums of the residual stream are done by the sublayers'
  // output projections (Mixer::forward, Mlp), so no sublayer output is kept beside its sum.
  using Mix = std::function<Tensor(const Tensor& a, const Tensor& r)>;
  Tensor residual(const Tensor& x, const Mix& mix);
};

}  // namespace tri
