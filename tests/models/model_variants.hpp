// The models the model tests build (test_models.cpp, test_model_params.cpp): a small config per
// family, every mixer with every position encoding it takes, and the block variants.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "framework/core/tensor.hpp"
#include "models/family.hpp"
#include "models/lm.hpp"
#include "models/mamba.hpp"

namespace trilemma_test {

using namespace tri;

inline ModelConfig small(const std::string& family, const std::string& pos = "none") {
  ModelConfig c = ModelConfig::of(family);
  c.vocab = 11;
  c.d_model = 16;
  c.n_layers = 2;
  c.max_seq_len = 80;
  c.pos = pos;
  c.tie_embeddings = false;    // a head of its own (lm_head), as the checks below name it
  c.rescale_residual = false;  // the projections as drawn; the rescale test sets it
  set_options(c, {{"n-heads", "2"}, {"d-state", "4"}, {"head-dim", "8"}, {"state-size", "4"}});
  return c;
}

// The text of a family option of c ("" when its family has none of that name).
inline std::string option_text(const ModelConfig& c, const std::string& key) {
  TextMap t;
  write_text(c, t);
  return t.count(key) ? t.at(key) : "";
}

// A Mamba config's sizes, with dt-rank resolved.
struct MambaSizes {
  int64_t E, N, R, K;
};
inline MambaSizes mamba_sizes(const ModelConfig& c) {
  const ModelConfig checked = c.checked();
  const MambaOptions& o = checked.options<MambaOptions>();
  return {o.expand * c.d_model, o.d_state, o.dt_rank, o.d_conv};
}

// Every mixer with every position encoding it takes, and the block variants.
inline std::map<std::string, ModelConfig> variants() {
  std::map<std::string, ModelConfig> v;
  for (const char* pos : {"none", "sinusoidal", "learned", "rope", "alibi"})
    v[std::string("attention ") + pos] = small("attention", pos);
  v["attention post-norm, no mlp"] = small("attention", "rope");
  v["attention post-norm, no mlp"].norm = "post";
  v["attention post-norm, no mlp"].mlp = "none";
  v["attention tied, bias"] = small("attention", "sinusoidal");
  v["attention tied, bias"].tie_embeddings = true;
  set_options(v["attention tied, bias"], {{"bias", "1"}});
  // Windows shorter than the sequences below: the band cuts every row after the first W.
  const std::pair<const char*, const char*> windowed[] = {
      {"none", "3"}, {"sinusoidal", "7"}, {"learned", "1"}, {"rope", "5"}, {"alibi", "2"}};
  for (auto [pos, window] : windowed) {
    ModelConfig& c = v[std::string("attention window ") + window + " " + pos] = small("attention", pos);
    set_options(c, {{"window", window}});
  }
  for (const char* pos : {"none", "sinusoidal", "learned", "rope"})
    v[std::string("linear elu ") + pos] = small("linear", pos);
  for (const char* fm : {"relu", "identity"}) {
    v[std::string("linear ") + fm] = small("linear");
    set_options(v[std::string("linear ") + fm], {{"feature-map", fm}});
  }
  // Based: short convolutions on q, k, v; the Taylor feature map with F other than Dh = 8.
  v["attention short-conv rope"] = small("attention", "rope");
  set_options(v["attention short-conv rope"], {{"short-conv", "3"}});
  v["linear short-conv"] = small("linear");
  set_options(v["linear short-conv"], {{"short-conv", "4"}});
  v["linear taylor"] = small("linear", "learned");
  set_options(v["linear taylor"], {{"feature-map", "taylor"}, {"feature-dim", "4"}});
  v["linear based"] = small("linear");
  set_options(v["linear based"], {{"feature-map", "taylor"}, {"short-conv", "3"}});
  // Hybrid stacks: each layer its family's norm and options; a window in the attention layers.
  v["hybrid mamba+attention"] = small("mamba");
  set_options(v["hybrid mamba+attention"], {{"mixers", "mamba,attention"}});
  v["hybrid linear+attention window"] = small("linear", "learned");
  v["hybrid linear+attention window"].n_layers = 3;
  set_options(v["hybrid linear+attention window"], {{"mixers", "linear,attention"}, {"window", "2"}});
  v["mamba"] = small("mamba");
  v["mamba"].mlp = "none";
  v["mamba mlp post-norm"] = small("mamba");
  v["mamba mlp post-norm"].norm = "post";
  for (const char* a : {"s4d-real", "hippo-legs", "s4d-lin"}) {
    ModelConfig c = small("mamba");
    c.mlp = "none";
    set_options(c, {{"ssm-selective", "0"}, {"a-init", a}});
    v[std::string("mamba lti ") + a] = c;
  }
  // DeltaNet and Gated DeltaNet, and their ablations: no short convolutions, no L2 norm, no gates.
  v["deltanet"] = small("deltanet");
  v["deltanet no conv, no l2-norm, post-norm"] = small("deltanet", "sinusoidal");
  v["deltanet no conv, no l2-norm, post-norm"].norm = "post";
  set_options(v["deltanet no conv, no l2-norm, post-norm"], {{"conv-size", "0"}, {"l2-norm", "0"}});
  v["gated_deltanet"] = small("gated_deltanet", "learned");
  v["gated_deltanet conv 2, no gates"] = small("gated_deltanet");
  set_options(v["gated_deltanet conv 2, no gates"], {{"conv-size", "2"}, {"state-gate", "0"}, {"output-gate", "0"}});
  v["hybrid gated_deltanet+attention"] = small("gated_deltanet");
  set_options(v["hybrid gated_deltanet+attention"], {{"mixers", "gated_deltanet,attention"}});
  // Mamba 2: heads of 8 sharing one B and C, or two groups of two; a hybrid stack.
  v["mamba2"] = small("mamba2");
  v["mamba2 groups 2, no mlp, post-norm"] = small("mamba2");
  v["mamba2 groups 2, no mlp, post-norm"].mlp = "none";
  v["mamba2 groups 2, no mlp, post-norm"].norm = "post";
  set_options(v["mamba2 groups 2, no mlp, post-norm"], {{"n-groups", "2"}, {"d-conv", "2"}});
  v["hybrid mamba2+attention"] = small("mamba2");
  set_options(v["hybrid mamba2+attention"], {{"mixers", "mamba2,attention"}});
  return v;
}

inline Tensor random_tensor(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = float(rng.normal());
  return t;
}

// logits[b, t, :] of a [B, T, V] tensor.
inline const float* row(const Tensor& logits, int64_t b, int64_t t) {
  return logits.data() + (b * logits.size(1) + t) * logits.size(2);
}

}  // namespace trilemma_test
