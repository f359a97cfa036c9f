#include "lm.hpp"

#include "framework/ops/positions.hpp"
#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "models/family.hpp"
#include "models/position_encodings.hpp"

namespace tri {

int64_t DecodeState::bytes() const {
  int64_t n = 0;
  for (const auto& s : layers) n += s->bytes();
  return n;
}

LanguageModel::LanguageModel(const ModelConfig& config, uint64_t seed) : cfg_(config.checked()) {
  const ModelConfig& cfg = cfg_;
  Rng rng(seed);
  const int64_t D = cfg.d_model;
  // Registered in PyTorch's state_dict order.
  embedding = init_normal(Shape{cfg.vocab, D}, rng, 0.f, 0.02f);
  add_parameter("backbone.embedding.weight", embedding, false);
  if (cfg.position().table) {
    pos_embedding = init_normal(Shape{cfg.max_seq_len, D}, rng, 0.f, 0.02f);
    add_parameter("backbone.pos_embedding.weight", pos_embedding, false);
  }
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    layers.push_back(std::make_unique<Block>(cfg.layer(i), rng));
    add_module("backbone.layers." + std::to_string(i), *layers.back());
  }
  norm_f = std::make_unique<Norm>(cfg.spec().norm, D);
  add_module("backbone.norm_f", *norm_f);
  if (!cfg.tie_embeddings) {
    lm_head = std::make_unique<Linear>(D, cfg.vocab, false, rng);
    add_module("lm_head", *lm_head);
  }
}

Tensor LanguageModel::embed(const IntTensor& ids, int64_t offset) const {
  if (ids.shape().nd != 2)
    throw Error("language model: ids " + ids.shape().str() + " must be [B, T]");
  const int64_t T = ids.shape()[1], D = cfg_.d_model;
  Tensor x = tri::embedding(embedding, ids);  // [B, T, D]
  const PositionSpec& pos = cfg_.position();
  if (pos.sinusoids) x = x + sinusoidal_positions(T, D, offset);
  if (pos.table) {
    check_position_limit(cfg_, offset + T, "language model: input to position " + std::to_string(offset + T - 1));
    x = x + slice(pos_embedding, 0, offset, offset + T);
  }
  return x;
}

Tensor LanguageModel::head(const Tensor& x) const {
  Tensor h = (*norm_f)(x);
  return lm_head ? (*lm_head)(h) : linear(h, embedding);
}

Tensor LanguageModel::forward(const IntTensor& ids) {
  Tensor x = embed(ids, 0);
  for (auto& layer : layers) x = layer->forward(x);
  return head(x);
}

Tensor LanguageModel::loss(const IntTensor& ids, const IntTensor& targets) {
  return cross_entropy(forward(ids), targets);
}

int64_t LanguageModel::state_bytes(int64_t T) const {
  int64_t n = 0;
  for (int64_t b : layer_state_bytes(T)) n += b;
  return n;
}

std::vector<int64_t> LanguageModel::layer_state_bytes(int64_t T) const {
  std::vector<int64_t> out;
  for (const auto& layer : layers) out.push_back(layer->mixer->state_bytes(T));
  return out;
}

DecodeState LanguageModel::new_decode_state(int64_t batch) const {
  if (batch <= 0) throw Error("new_decode_state: batch = " + std::to_string(batch) + " must be positive");
  DecodeState s;
  s.batch = batch;
  for (const auto& layer : layers) s.layers.push_back(layer->mixer->new_state(batch));
  return s;
}

Tensor LanguageModel::step(const IntTensor& ids, DecodeState& state) {
  if (ids.shape().nd != 2 || ids.shape()[0] != state.batch || ids.shape()[1] != 1)
    throw Error("language model step: ids " + ids.shape().str() + " must be [" +
                std::to_string(state.batch) + ", 1] (batch of the state, one token)");
  NoGradGuard no_grad;
  Tensor x = embed(ids, state.pos);
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i]->step(x, *state.layers[i]);
  state.pos += 1;
  return head(x);
}

}  // namespace tri
