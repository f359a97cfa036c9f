// The language model around a stack of blocks (names as mamba_ssm's MambaLMHeadModel):
//   x = embedding(ids)  [+ positions]         backbone.embedding [V, D]; sinusoidal (the book's
//                                             §8 formula) or learned backbone.pos_embedding
//                                             [max_seq_len, D] are added here; rope and alibi
//                                             act inside attention; none adds nothing
//   x = layers[i](x)    i = 0 .. n_layers-1   backbone.layers.i (Block); in a hybrid stack
//                                             (--mixers) layer i is of family mixers[i mod n]
//   logits = lm_head(norm_f(x))               norm_f: the (first) family's norm (LayerNorm; RMSNorm for mamba);
//                                             lm_head [V, D], or the embedding when tied
// Init: embedding and learned positions ~ N(0, 0.02^2) (GPT-2, mamba_ssm), linears PyTorch's
// default, norms ones/zeros, the Mamba mixer its own.
// Weight decay: none on norms, biases, embeddings, positions (the Mamba mixer flags its own).
#pragma once
#include <memory>
#include <vector>

#include "models/block.hpp"

namespace tri {

// Decoding state: one mixer state per layer and the next position.
struct DecodeState {
  int64_t batch = 0, pos = 0;
  std::vector<std::unique_ptr<MixerState>> layers;
  int64_t bytes() const;  // all layers, all sequences
};

class LanguageModel : public Module {
 public:
  // Checks cfg (ModelConfig::checked: zeros resolved, validated); initialises the parameters
  // from Rng(seed).
  LanguageModel(const ModelConfig& cfg, uint64_t seed);

  Tensor forward(const IntTensor& ids);                             // [B, T] -> logits [B, T, V]
  Tensor loss(const IntTensor& ids, const IntTensor& targets);      // mean cross-entropy
  // Recurrent state bytes per sequence after T tokens, summed over layers; and per layer.
  int64_t state_bytes(int64_t T) const;
  std::vector<int64_t> layer_state_bytes(int64_t T) const;

  // Step-by-step decoding (no grad): ids [B, 1] -> logits [B, 1, V]; positions advance.
  DecodeState new_decode_state(int64_t batch) const;
  Tensor step(const IntTensor& ids, DecodeState& state);

  const ModelConfig& config() const { return cfg_; }

  Tensor embedding, pos_embedding;  // pos_embedding only for an encoding with a table (learned)
  std::vector<std::unique_ptr<Block>> layers;
  std::unique_ptr<Norm> norm_f;
  std::unique_ptr<Linear> lm_head;  // null when tied to the embedding

 private:
  ModelConfig cfg_;
  Tensor embed(const IntTensor& ids, int64_t offset) const;  // tokens + absolute positions
  Tensor head(const Tensor& x) const;                        // norm_f, then the LM head
};

}  // namespace tri
