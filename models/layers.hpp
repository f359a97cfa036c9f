// The small modules every block is made of: Linear (PyTorch's nn.Linear), Norm (LayerNorm or
// RMSNorm), Mlp (fc1 -> gelu -> fc2) and HeadMixer, the base of the mixers that project to
// multi-head q, k, v and back (q_proj, k_proj, v_proj, out_proj: [D, D] each), optionally
// through Based's short convolutions (q_conv, k_conv, v_conv: models/short_conv.hpp).
#pragma once
#include <cstdint>
#include <memory>

#include "framework/core/module.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/rng.hpp"
#include "models/config.hpp"
#include "models/mixer.hpp"
#include "models/short_conv.hpp"

namespace tri {

// y = x W^T + b, W [out, in]. PyTorch's default init U(-1/sqrt(in), 1/sqrt(in)); the bias is
// not weight-decayed.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool with_bias, Rng& rng);
  // x W^T + b, plus residual when given (added inside the op: ops.hpp, linear).
  Tensor operator()(const Tensor& x, const Tensor& residual = Tensor()) const {
    return linear(x, weight, bias, residual);
  }
  Tensor weight, bias;  // bias undefined when !with_bias
};

// Over the last axis, eps kEps. LayerNorm: weight (ones) and bias (zeros); RMSNorm: weight
// only. Never weight-decayed.
class Norm : public Module {
 public:
  static constexpr float kEps = 1e-5f;
  enum class Kind { layer, rms };
  Norm(Kind kind, int64_t d);
  Tensor operator()(const Tensor& x) const;
  Kind kind;
  Tensor weight, bias;
};

// The position-wise feed-forward network: fc2(gelu(fc1(x))), d_ff = 4 d, with biases.
class Mlp : public Module {
 public:
  Mlp(int64_t d, Rng& rng);
  // fc2(gelu(fc1(x))), plus residual when given.
  Tensor operator()(const Tensor& x, const Tensor& residual = Tensor()) const {
    return gelu_linear(fc1(x), fc2.weight, fc2.bias, residual);
  }
  Linear fc1, fc2;
};

// The options of the mixers with heads (attention, linear attention).
struct HeadOptions : Options {
  int64_t n_heads = 4;
  bool bias = false;  // biases on the q/k/v/out projections
  // RoPE rotates the pairs (i, i + Dh/2): GPT-NeoX's rotate_half, not RoFormer's interleaved
  // (2i, 2i+1). Stated in saved configs so that a reader elsewhere rotates the same pairs.
  std::string rope_style = "half";
  int64_t short_conv = 0;  // width K of the short convolutions on q, k, v; 0: none
  void visit(FieldVisitor& v) override;
  std::unique_ptr<Options> clone() const override { return std::make_unique<HeadOptions>(*this); }
};
// d_model divisible by the heads, and an even head width for RoPE.
void validate_heads(const ModelConfig& cfg);

// The decoding state of the short convolutions on q, k, v: each one's last K-1 inputs
// (ShortConv::new_window); undefined without short convolutions.
struct QkvWindows {
  Tensor q, k, v;
  int64_t bytes() const;
};

// A mixer with H heads of width Dh = D / H, reading q, k, v through projections (v: [D, D];
// q and k: [qk_width, D], D unless the mixer asks for other widths), then, with
// HeadOptions::short_conv, through short convolutions, and writing through out_proj (biases
// with HeadOptions::bias).
class HeadMixer : public Mixer {
 protected:
  HeadMixer(const ModelConfig& cfg, Rng& rng, int64_t qk_width = 0);  // cfg: checked, with HeadOptions
  struct Qkv {
    Tensor q, k, v;  // [B, T, H, qk_width / H] (q, k) and [B, T, H, Dh] (v)
  };
  // The projections and, when there are any, the short convolutions, split into heads.
  Qkv project(const Tensor& x) const;
  // The same for one token x [B, 1, D]; the convolutions read and advance the windows.
  Qkv project_step(const Tensor& x, QkvWindows& windows) const;
  QkvWindows new_windows(int64_t batch) const;  // zeros: no token seen yet
  int64_t windows_bytes() const;  // what new_windows holds per sequence: (K-1) (2 qk_width + D) floats
  // [B, T, H * w] -> [B, T, H, w] and back: views, no transposes.
  Tensor split_heads(const Tensor& x) const;
  Tensor merge_heads(const Tensor& x) const;
  void check_step_input(const Tensor& x, int64_t batch) const;  // x must be [batch, 1, D]

  ModelConfig cfg;
  int64_t H, Dh;
  Linear q_proj, k_proj, v_proj, out_proj;
  std::unique_ptr<ShortConv> q_conv, k_conv, v_conv;  // null without HeadOptions::short_conv
};

}  // namespace tri
