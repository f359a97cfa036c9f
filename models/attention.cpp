#include "attention.hpp"

#include <algorithm>

#include "framework/kernels/attention.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/positions.hpp"
#include "models/family.hpp"
#include "models/lm.hpp"
#include "models/position_encodings.hpp"

namespace tri {

namespace {

// K and V of the tokens a step attends to, [B, t, H, Dh]: every token seen so far, or with a
// window W the last min(pos, W) of them in a ring buffer of W rows, position p in row p % W
// (the new row overwrites the oldest, in place). With one sequence (generation, gen_acc, the
// decode benchmark) the rows live in a buffer whose capacity doubles (up to W), so a step copies
// one row, not the whole cache (amortised O(1); attending is still O(t)).
struct KVCache : MixerState {
  int64_t batch = 0, pos = 0, window = 0;
  Tensor k, v;  // [B, t, H, Dh]; undefined before the first step
  Tensor k_buf, v_buf;  // batch 1: [capacity, H * Dh], k and v are views of their first t rows
  QkvWindows windows;   // the short convolutions' last inputs (--short-conv)
  int64_t bytes() const override {
    return (k.defined() ? 2 * k.numel() * int64_t(sizeof(float)) : 0) + windows.bytes();
  }
  // The row of the oldest cached position: 0 until a ring is full.
  int64_t oldest_row() const { return window && pos >= window ? pos % window : 0; }

  void append(const Tensor& k_row, const Tensor& v_row) {  // rows [B, 1, H, Dh] of position pos
    const int64_t t = k.defined() ? k.size(1) : 0, width = k_row.size(2) * k_row.size(3);
    if (window && t == window) {  // a full ring: overwrite the oldest row
      const int64_t row = pos % window;
      for (int64_t b = 0; b < batch; ++b) {
        std::copy_n(k_row.data() + b * width, width, k.data() + (b * window + row) * width);
        std::copy_n(v_row.data() + b * width, width, v.data() + (b * window + row) * width);
      }
      return;
    }
    if (batch != 1) {  // the cache owns its rows (a full ring is written in place)
      k = t ? concat({k, k_row}, 1) : k_row.clone();
      v = t ? concat({v, v_row}, 1) : v_row.clone();
      return;
    }
    const int64_t H = k_row.size(2), Dh = k_row.size(3);
    if (!k_buf.defined() || k_buf.size(0) == t) {
      const int64_t doubled = std::max<int64_t>(64, 2 * t), capacity = window ? std::min(window, doubled) : doubled;
      Tensor kb = Tensor::empty({capacity, width}), vb = Tensor::empty({capacity, width});
      if (t) {
        std::copy(k_buf.data(), k_buf.data() + t * width, kb.data());
        std::copy(v_buf.data(), v_buf.data() + t * width, vb.data());
      }
      k_buf = kb, v_buf = vb;
    }
    std::copy(k_row.data(), k_row.data() + width, k_buf.data() + t * width);
    std::copy(v_row.data(), v_row.data() + width, v_buf.data() + t * width);
    k = k_buf.narrow0(0, t + 1).view({1, t + 1, H, Dh});
    v = v_buf.narrow0(0, t + 1).view({1, t + 1, H, Dh});
  }
};

AttentionOptions options_for(const ModelConfig& cfg) {
  AttentionOptions opt;
  opt.causal = true;
  opt.window = cfg.options<MultiHeadAttentionOptions>().window;
  if (cfg.position().alibi) opt.alibi_slopes = alibi_slopes(cfg.options<HeadOptions>().n_heads);
  return opt;
}

}  // namespace

void MultiHeadAttentionOptions::visit(FieldVisitor& v) {
  HeadOptions::visit(v);
  v.integer("window", window, {0, int64_t(1) << 24},
            "sliding window: each query sees the N most recent positions, itself included; 0 = all earlier positions",
            {}, FieldAge::added_later);
}

FamilySpec attention_family() {
  FamilySpec f;
  f.name = "attention";
  f.summary = "multi-head causal softmax attention";
  f.options = [] { return std::make_unique<MultiHeadAttentionOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<MultiHeadAttention>(c, rng); };
  f.positions = {"none", "sinusoidal", "learned", "rope", "alibi"};
  f.validate = validate_heads;
  f.decode_state =
      "KV cache: K and V of every token seen, 2 T d floats per layer; with a window W, a ring buffer of the "
      "last W tokens, 2 min(T, W) d floats, constant in T once T >= W; with --short-conv K also the last K-1 "
      "inputs of the q, k and v convolutions, 3 (K-1) d floats";
  f.parity_model = "MultiHeadAttention";
  return f;
}

MultiHeadAttention::MultiHeadAttention(const ModelConfig& c, Rng& rng) : HeadMixer(c.checked(), rng) {}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& residual) {
  auto [q, k, v] = project(x);  // [B, T, H, Dh]
  if (cfg.position().rotary) {
    q = rope(q, 0);
    k = rope(k, 0);
  }
  Tensor o = probe ? attention_naive(q, k, v, options_for(cfg), probe)
                   : attention(q, k, v, options_for(cfg));  // [B, T, H, Dh]
  return out_proj(merge_heads(o), residual);
}

std::unique_ptr<MixerState> MultiHeadAttention::new_state(int64_t batch) const {
  auto s = std::make_unique<KVCache>();
  s->batch = batch;
  s->window = cfg.options<MultiHeadAttentionOptions>().window;
  s->windows = new_windows(batch);
  return s;
}

Tensor MultiHeadAttention::step(const Tensor& x, MixerState& state) {
  NoGradGuard no_grad;
  KVCache& cache = state_as<KVCache>(state, "attention");
  check_step_input(x, cache.batch);
  auto [q, k, v] = project_step(x, cache.windows);  // [B, 1, H, Dh]
  if (cfg.position().rotary) {
    q = rope(q, cache.pos);
    k = rope(k, cache.pos);
  }
  cache.append(k, v);
  cache.pos += 1;
  // The query sits at the newest cached position, and the cache holds no row outside its window:
  // it sees every cached row, in order of position from the oldest row on (ALiBi's distances).
  Tensor o = attention_decode(q, cache.k, cache.v, options_for(cfg), cache.oldest_row());
  return out_proj(merge_heads(o));
}

int64_t MultiHeadAttention::state_bytes(int64_t T) const {  // K and V rows of T tokens, at most W
  const int64_t window = cfg.options<MultiHeadAttentionOptions>().window;
  return 2 * (window ? std::min(T, window) : T) * cfg.d_model * int64_t(sizeof(float)) + windows_bytes();
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
