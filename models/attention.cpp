#include "attention.hpp"

#include "framework/attention.hpp"
#include "framework/autograd.hpp"
#include "framework/positions.hpp"
#include "models/family.hpp"
#include "models/lm.hpp"

namespace tri {

namespace {

// K and V of every token seen so far, [B, t, H, Dh]; a step appends one row.
struct KVCache : MixerState {
  int64_t batch = 0, pos = 0;
  Tensor k, v;  // undefined before the first step
  int64_t bytes() const override { return k.defined() ? 2 * k.numel() * int64_t(sizeof(float)) : 0; }
};

AttentionOptions options_for(const ModelConfig& cfg) {
  AttentionOptions opt;
  opt.causal = true;
  if (cfg.pos == "alibi") opt.alibi_slopes = alibi_slopes(cfg.options<HeadOptions>().n_heads);
  return opt;
}

// A copy of the cache plus one row: O(t) per step, the same order as attending over it.
Tensor append_row(const Tensor& cache, const Tensor& row) {
  return cache.defined() ? concat({cache, row}, 1) : row;
}

}  // namespace

FamilySpec attention_family() {
  FamilySpec f;
  f.name = "attention";
  f.summary = "multi-head causal softmax attention";
  f.options = [] { return std::make_unique<HeadOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<MultiHeadAttention>(c, rng); };
  f.positions = {"none", "sinusoidal", "learned", "rope", "alibi"};
  f.validate = validate_heads;
  f.decode_state = "KV cache: K and V of every token seen, 2 T d floats per layer";
  f.parity_model = "MultiHeadAttention";
  return f;
}

MultiHeadAttention::MultiHeadAttention(const ModelConfig& c, Rng& rng) : HeadMixer(c.checked(), rng) {}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  Tensor q = split_heads(q_proj(x));  // [B, T, H, Dh]
  Tensor k = split_heads(k_proj(x));
  Tensor v = split_heads(v_proj(x));
  if (cfg.pos == "rope") {
    q = rope(q, 0);
    k = rope(k, 0);
  }
  Tensor o = probe ? attention_naive(q, k, v, options_for(cfg), probe)
                   : attention(q, k, v, options_for(cfg));  // [B, T, H, Dh]
  return out_proj(merge_heads(o));
}

std::unique_ptr<MixerState> MultiHeadAttention::new_state(int64_t batch) const {
  auto s = std::make_unique<KVCache>();
  s->batch = batch;
  return s;
}

Tensor MultiHeadAttention::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  KVCache& cache = state_as<KVCache>(state, "attention");
  check_step_input(x, cache.batch);
  Tensor q = split_heads(q_proj(x));  // [B, 1, H, Dh]
  Tensor k = split_heads(k_proj(x));
  Tensor v = split_heads(v_proj(x));
  if (cfg.pos == "rope") {
    q = rope(q, cache.pos);
    k = rope(k, cache.pos);
  }
  cache.k = append_row(cache.k, k);
  cache.v = append_row(cache.v, v);
  cache.pos += 1;
  // The query sits at the end of the cache, so causal attention sees every cached row.
  Tensor o = attention(q, cache.k, cache.v, options_for(cfg));
  return out_proj(merge_heads(o));
}

int64_t MultiHeadAttention::state_bytes(int64_t T) const {  // K and V rows of T tokens
  return 2 * T * cfg.d_model * int64_t(sizeof(float));
}

AttentionRecording record_attention(LanguageModel& model, const IntTensor& ids) {
  std::vector<MultiHeadAttention*> mixers;
  for (const auto& layer : model.layers) {
    auto* a = dynamic_cast<MultiHeadAttention*>(layer->mixer.get());
    if (!a) throw Error("attention maps need model attention (this model is " + model.config().family + ")");
    mixers.push_back(a);
  }
  AttentionRecording r;
  r.probs.resize(mixers.size());
  struct ClearProbes {  // also when forward throws
    std::vector<MultiHeadAttention*>& m;
    ~ClearProbes() {
      for (MultiHeadAttention* a : m) a->probe = nullptr;
    }
  } clear{mixers};
  for (size_t i = 0; i < mixers.size(); ++i) mixers[i]->probe = &r.probs[i];
  NoGradGuard no_grad;
  r.logits = model.forward(ids);
  return r;
}

}  // namespace tri
