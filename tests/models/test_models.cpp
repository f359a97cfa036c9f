// The language models of models/ on their own (PyTorch parity is test_parity_models):
//  - causality, for every mixer and position encoding: changing the tokens after t leaves the
//    logits up to t bit-identical (and changes later ones), and the gradient of the blocks'
//    output at t with respect to their input after t is exactly zero (nonzero up to t);
//  - recurrent decoding: 64 single-token steps give the parallel forward's logits to 1e-5
//    (relative to the largest logit; 1e-3 for the ill-conditioned identity feature map), and
//    the decoding state holds state_bytes(T) per sequence;
//  - parameter names and shapes as docs/CHECKPOINT.md, counts from a formula, decay flags;
//  - state_bytes: attention grows linearly with T (up to its window W, then constant), linear
//    attention and Mamba are constant;
//  - config validation and state_io errors (missing, unexpected, wrong shape; nothing loaded).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/io/state_io.hpp"
#include "models/attention.hpp"
#include "models/family.hpp"
#include "models/lm.hpp"
#include "models/linear_attention.hpp"
#include "models/mamba.hpp"
#include "models/position_encodings.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

ModelConfig small(const std::string& family, const std::string& pos = "none") {
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
std::string option_text(const ModelConfig& c, const std::string& key) {
  TextMap t;
  write_text(c, t);
  return t.count(key) ? t.at(key) : "";
}

// A Mamba config's sizes, with dt-rank resolved.
struct MambaSizes {
  int64_t E, N, R, K;
};
MambaSizes mamba_sizes(const ModelConfig& c) {
  const ModelConfig checked = c.checked();
  const MambaOptions& o = checked.options<MambaOptions>();
  return {o.expand * c.d_model, o.d_state, o.dt_rank, o.d_conv};
}

// Every mixer with every position encoding it takes, and the block variants.
std::map<std::string, ModelConfig> variants() {
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

Tensor random_tensor(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = float(rng.normal());
  return t;
}

// logits[b, t, :] of a [B, T, V] tensor.
const float* row(const Tensor& logits, int64_t b, int64_t t) {
  return logits.data() + (b * logits.size(1) + t) * logits.size(2);
}

}  // namespace

TEST_CASE("causality: tokens after t change nothing up to t, for every mixer and position") {
  const int64_t B = 2, T = 20;
  for (auto& [name, cfg] : variants()) {
    INFO(name);
    LanguageModel model(cfg, 3);
    NoGradGuard no_grad;
    const IntTensor ids = random_ids(B, T, cfg.vocab, 7);
    const Tensor logits = model.forward(ids);
    for (int64_t t : {int64_t(0), int64_t(9), T - 2}) {
      IntTensor changed = ids;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = t + 1; s < T; ++s)
          changed.data()[b * T + s] = int32_t((ids.data()[b * T + s] + 1) % cfg.vocab);
      const Tensor logits2 = model.forward(changed);
      bool same_before = true, differs_after = false;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < T; ++s) {
          const bool same = std::equal(row(logits, b, s), row(logits, b, s) + cfg.vocab,
                                       row(logits2, b, s));
          if (s <= t) same_before &= same;
          else differs_after |= !same;
        }
      INFO("t = " << t);
      CHECK(same_before);
      CHECK(differs_after);
    }
  }
}

TEST_CASE("causality: the gradient at t reaches the blocks' inputs up to t only") {
  const int64_t B = 2, T = 16;
  for (auto& [name, cfg] : variants()) {
    INFO(name);
    LanguageModel model(cfg, 5);
    for (int64_t t : {int64_t(0), int64_t(6), T - 2}) {
      Tensor x = random_tensor(Shape{B, T, cfg.d_model}, 11).requires_grad_();
      Tensor w = Tensor::zeros(Shape{B, T, cfg.d_model});  // picks position t
      Tensor wt = random_tensor(Shape{B, cfg.d_model}, 13);
      for (int64_t b = 0; b < B; ++b)
        std::copy(wt.data() + b * cfg.d_model, wt.data() + (b + 1) * cfg.d_model,
                  w.data() + (b * T + t) * cfg.d_model);
      Tensor h = x;
      for (auto& layer : model.layers) h = layer->forward(h);
      backward(sum(h * w));
      const float* g = x.grad().data();
      bool zero_after = true, nonzero_up_to_t = false;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < T; ++s)
          for (int64_t d = 0; d < cfg.d_model; ++d) {
            const float gv = g[(b * T + s) * cfg.d_model + d];
            if (s > t) zero_after &= gv == 0.f;
            else nonzero_up_to_t |= gv != 0.f;
          }
      INFO("t = " << t);
      CHECK(zero_after);
      CHECK(nonzero_up_to_t);
      model.zero_grad();
    }
  }
}

TEST_CASE("recurrent decoding gives the parallel forward's logits") {
  const int64_t B = 2, T = 64;
  std::printf("%-30s | %12s | %s\n", "variant", "step err", "state bytes/seq");
  for (auto& [name, cfg] : variants()) {
    INFO(name);
    LanguageModel model(cfg, 9);
    NoGradGuard no_grad;
    const IntTensor ids = random_ids(B, T, cfg.vocab, 17);
    const Tensor logits = model.forward(ids);
    DecodeState state = model.new_decode_state(B);
    double diff = 0, scale = 0;
    for (int64_t t = 0; t < T; ++t) {
      IntTensor one(Shape{B, 1}, std::vector<int32_t>{ids.data()[t], ids.data()[T + t]});
      const Tensor step = model.step(one, state);
      REQUIRE(step.shape() == Shape{B, 1, cfg.vocab});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t v = 0; v < cfg.vocab; ++v) {
          const float want = row(logits, b, t)[v];
          diff = std::max(diff, double(std::fabs(row(step, b, 0)[v] - want)));
          scale = std::max(scale, double(std::fabs(want)));
        }
    }
    std::printf("%-30s | %12.2e | %lld\n", name.c_str(), diff / scale,
                (long long)model.state_bytes(T));
    // The identity feature map's normaliser phi(q) . sum phi(k) has no sign and comes within
    // 1e-3 of zero at random weights, dividing the numerator's rounding by it: the two orders
    // of summation here differ by 3.8e-5 (all other variants: at most 7.8e-7).
    const bool ill_conditioned = option_text(cfg, "feature-map") == "identity";
    CHECK(diff / scale <= (ill_conditioned ? 1e-3 : 1e-5));
    CHECK(state.pos == T);
    CHECK(state.bytes() == B * model.state_bytes(T));
  }
}

TEST_CASE("state_bytes: attention grows with T (up to its window), linear attention and Mamba do not") {
  for (auto& [name, cfg] : variants()) {
    INFO(name);
    if (cfg.hybrid()) continue;  // the next test case
    LanguageModel model(cfg, 1);
    const int64_t s1 = model.state_bytes(64), s2 = model.state_bytes(128);
    CHECK(s1 > 0);
    if (cfg.family == "attention") {
      const int64_t window = cfg.options<MultiHeadAttentionOptions>().window;
      const int64_t row_bytes = cfg.n_layers * 2 * cfg.d_model * int64_t(sizeof(float));  // K and V of a token
      // The short convolutions' windows: the last K-1 inputs of q, k and v, whatever T.
      const int64_t K = cfg.options<HeadOptions>().short_conv;
      const int64_t conv = K ? cfg.n_layers * 3 * (K - 1) * cfg.d_model * int64_t(sizeof(float)) : 0;
      CHECK(s1 == row_bytes * (window ? std::min<int64_t>(64, window) : 64) + conv);
      CHECK(s2 - conv == (window ? s1 - conv : 2 * (s1 - conv)));
      CHECK(model.state_bytes(1) == row_bytes + conv);
      if (window) CHECK(model.state_bytes(100000) == row_bytes * window);  // a ring of W rows
    } else {
      CHECK(s2 == s1);
      CHECK(model.state_bytes(100000) == s1);
    }
  }
  ModelConfig lin = small("linear");
  const int64_t H = lin.options<HeadOptions>().n_heads, Dh = lin.d_model / H;
  CHECK(LanguageModel(lin, 1).state_bytes(7) == lin.n_layers * H * (Dh * Dh + Dh) * int64_t(sizeof(float)));
  // The Taylor map's state: (1 + F + F^2) x Dh and 1 + F + F^2 per head; d 64, 1 head, F 16:
  // 273 x 65 floats per layer (the figure the documentation gives); the convs add their last K-1
  // inputs, F per head for q and k, d for v.
  ModelConfig based = small("linear");
  based.d_model = 64;
  set_options(based, {{"n-heads", "1"}, {"feature-map", "taylor"}, {"feature-dim", "16"}});
  CHECK(LanguageModel(based, 1).state_bytes(7) == based.n_layers * 273 * 65 * int64_t(sizeof(float)));
  set_options(based, {{"short-conv", "3"}});
  CHECK(LanguageModel(based, 1).state_bytes(7) ==
        based.n_layers * (273 * 65 + (3 - 1) * (16 + 16 + 64)) * int64_t(sizeof(float)));
}

TEST_CASE("hybrid stacks: layer i is mixers[i mod n], with its family's options, norm and state") {
  ModelConfig cfg = small("attention", "learned");
  cfg.n_layers = 4;
  set_options(cfg, {{"mixers", "linear+attention"}, {"window", "3"}, {"feature-map", "relu"}, {"n-heads", "4"}});
  CHECK(cfg.family == "linear");  // the first entry
  CHECK(cfg.mixers == "linear,attention");
  CHECK(cfg.name() == "linear+attention");
  CHECK(cfg.variant() == "linear+attention feature-map=relu");
  const ModelConfig c = cfg.checked();
  CHECK(c.layer(0).options<LinearAttentionOptions>().feature_map == "relu");
  CHECK(c.layer(1).options<MultiHeadAttentionOptions>().window == 3);
  CHECK(c.layer(3).options<MultiHeadAttentionOptions>().window == 3);
  for (int64_t i = 0; i < 4; ++i) CHECK(c.layer(i).options<HeadOptions>().n_heads == 4);  // one shared value
  // Written once per key, and read back into any config: the same stack.
  TextMap text;
  write_text(c, text);
  CHECK(text.at("mixers") == "linear,attention");
  CHECK(text.at("window") == "3");
  ModelConfig again = ModelConfig::of("mamba");
  read_text(again, text, true);
  TextMap text_again;
  write_text(again, text_again);
  CHECK(text_again == text);

  LanguageModel m(c, 1);
  for (int64_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    const bool attention = i % 2 == 1;
    CHECK((dynamic_cast<MultiHeadAttention*>(m.layers[size_t(i)]->mixer.get()) != nullptr) == attention);
    // Each layer holds the state of its own family: a ring of 3 K and V rows, or (S, z).
    const int64_t H = 4, Dh = c.d_model / H;
    const int64_t own = attention ? 2 * 3 * c.d_model * int64_t(sizeof(float)) : H * (Dh * Dh + Dh) * int64_t(sizeof(float));
    CHECK(m.layer_state_bytes(64)[size_t(i)] == own);
  }
  const std::vector<int64_t> per_layer = m.layer_state_bytes(64);
  CHECK(m.state_bytes(64) == std::accumulate(per_layer.begin(), per_layer.end(), int64_t(0)));
  // A Mamba-first stack: RMSNorm named "norm" in its Mamba layers and for norm_f, LayerNorm in the
  // attention layers.
  ModelConfig ma = small("mamba");
  set_options(ma, {{"mixers", "mamba,attention"}});
  LanguageModel mm(ma, 1);
  std::set<std::string> names;
  for (const Parameter& p : mm.parameters()) names.insert(p.name);
  CHECK(names.count("backbone.layers.0.norm.weight") == 1);
  CHECK(names.count("backbone.layers.0.mixer.A_log") == 1);
  CHECK(names.count("backbone.layers.1.norm1.bias") == 1);
  CHECK(names.count("backbone.layers.1.mixer.q_proj.weight") == 1);
  CHECK(names.count("backbone.norm_f.weight") == 1);
  CHECK(names.count("backbone.norm_f.bias") == 0);
}

TEST_CASE("decoding errors name the problem") {
  ModelConfig cfg = small("attention", "learned");
  cfg.max_seq_len = 4;
  LanguageModel model(cfg, 1);
  CHECK(error_of([&] { model.forward(random_ids(1, 5, cfg.vocab, 1)); }) ==
        "language model: input to position 4 exceeds the learned positions (--max-seq-len 4; allowed: at most 4 "
        "positions)");
  DecodeState st = model.new_decode_state(2);
  CHECK(error_of([&] { model.step(random_ids(1, 1, cfg.vocab, 1), st); }).find("must be [2, 1]") !=
        std::string::npos);
  for (int i = 0; i < 4; ++i) model.step(random_ids(2, 1, cfg.vocab, i), st);
  CHECK(error_of([&] { model.step(random_ids(2, 1, cfg.vocab, 1), st); }).find("position 4") !=
        std::string::npos);
  // A mixer given another mixer's decoding state says so, naming itself.
  const std::pair<const char*, const char*> pairs[] = {
      {"attention", "linear"}, {"linear", "mamba"}, {"mamba", "attention"}, {"deltanet", "mamba"}, {"gated_deltanet", "linear"},
      {"mamba2", "mamba"}, {"mamba", "mamba2"}};
  for (auto [own, other] : pairs) {
    Rng rng(1);
    std::unique_ptr<Mixer> mixer = make_mixer(small(own), rng), stranger = make_mixer(small(other), rng);
    std::unique_ptr<MixerState> state = stranger->new_state(1);
    const std::string e = error_of([&] { mixer->step(Tensor::zeros(Shape{1, 1, 16}), *state); });
    CHECK(e.find("step was given another mixer's decode state") != std::string::npos);
    const std::string name = own == std::string("linear") ? "linear attention" : own == std::string("gated_deltanet") ? "deltanet" : own;
    CHECK(e.find(name) == 0);
  }
}

namespace {

using Names = std::vector<std::pair<std::string, Shape>>;

Names names_of(const Module& m) {
  Names n;
  for (const Parameter& p : m.parameters()) n.push_back({p.name, p.tensor.shape()});
  std::sort(n.begin(), n.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return n;
}

// docs/CHECKPOINT.md's names and shapes for a config.
Names checkpoint_names(const ModelConfig& c) {
  const int64_t V = c.vocab, D = c.d_model, F = 4 * D;
  const bool mamba = c.family == "mamba", bias = option_text(c, "bias") == "1";
  const auto [E, N, R, K] = mamba ? mamba_sizes(c) : MambaSizes{};
  Names n = {{"backbone.embedding.weight", {V, D}}, {"backbone.norm_f.weight", {D}}};
  if (!mamba) n.push_back({"backbone.norm_f.bias", {D}});
  if (c.position().table) n.push_back({"backbone.pos_embedding.weight", {c.max_seq_len, D}});
  if (!c.tie_embeddings) n.push_back({"lm_head.weight", {V, D}});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string l = "backbone.layers." + std::to_string(i) + ".";
    if (mamba) {
      n.push_back({l + "norm.weight", {D}});
      n.push_back({l + "mixer.in_proj.weight", {2 * E, D}});
      n.push_back({l + "mixer.conv1d.weight", {E, 1, K}});
      n.push_back({l + "mixer.conv1d.bias", {E}});
      n.push_back({l + "mixer.x_proj.weight", {R + 2 * N, E}});
      n.push_back({l + "mixer.dt_proj.weight", {E, R}});
      n.push_back({l + "mixer.dt_proj.bias", {E}});
      n.push_back({l + "mixer.A_log", {E, N}});
      n.push_back({l + "mixer.D", {E}});
      n.push_back({l + "mixer.out_proj.weight", {D, E}});
    } else {
      n.push_back({l + "norm1.weight", {D}});
      n.push_back({l + "norm1.bias", {D}});
      for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
        n.push_back({l + "mixer." + proj + ".weight", {D, D}});
        if (bias) n.push_back({l + "mixer." + proj + ".bias", {D}});
      }
    }
    if (c.mlp != "none") {
      n.push_back({l + "norm2.weight", {D}});
      if (!mamba) n.push_back({l + "norm2.bias", {D}});
      n.push_back({l + "mlp.fc1.weight", {F, D}});
      n.push_back({l + "mlp.fc1.bias", {F}});
      n.push_back({l + "mlp.fc2.weight", {D, F}});
      n.push_back({l + "mlp.fc2.bias", {D}});
    }
  }
  std::sort(n.begin(), n.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return n;
}

// Parameter count from the architecture, independently of the names above.
int64_t expected_count(const ModelConfig& c) {
  const int64_t V = c.vocab, D = c.d_model;
  const bool mamba = c.family == "mamba", bias = option_text(c, "bias") == "1";
  const auto [E, N, R, K] = mamba ? mamba_sizes(c) : MambaSizes{};
  const int64_t norm = mamba ? D : 2 * D;
  int64_t mixer = mamba ? 2 * E * D + E * K + E + (R + 2 * N) * E + E * R + E + E * N + E + D * E
                        : 4 * D * D + (bias ? 4 * D : 0);
  int64_t layer = norm + mixer + (c.mlp != "none" ? norm + 8 * D * D + 5 * D : 0);
  return V * D * (c.tie_embeddings ? 1 : 2) + (c.position().table ? c.max_seq_len * D : 0) +
         c.n_layers * layer + norm;
}

// Weight decay applies to matrices only: not to norms, biases, embeddings, positions or the
// SSM's own parameters (models/mamba.hpp).
bool should_decay(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".bias") || ends(".A_log") || ends(".D") || ends(".dt_bias") || ends(".B")) return false;
  return name.find("norm") == std::string::npos && name.find("embedding") == std::string::npos;
}

}  // namespace

TEST_CASE("parameter names and shapes are CHECKPOINT.md's; counts follow the formula") {
  std::vector<ModelConfig> configs;
  ModelConfig a = small("attention", "learned");
  a.options<HeadOptions>().bias = true;
  configs.push_back(a);
  ModelConfig l = small("linear", "rope");
  l.tie_embeddings = true;
  l.mlp = "none";
  configs.push_back(l);
  ModelConfig m = small("mamba");
  m.mlp = "none";
  configs.push_back(m);
  m.mlp = "gelu";
  m.n_layers = 3;
  m.options<MambaOptions>().dt_rank = 3;
  configs.push_back(m);
  for (const ModelConfig& c : configs) {
    INFO(c.family << " pos " << c.pos << " mlp " << c.mlp);
    LanguageModel model(c, 1);
    const Names got = names_of(model), want = checkpoint_names(c);
    CHECK(got.size() == want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      INFO("parameter " << got[i].first << " " << got[i].second.str() << ", expected "
                        << want[i].first << " " << want[i].second.str());
      CHECK(got[i].first == want[i].first);
      CHECK(got[i].second == want[i].second);
    }
    CHECK(model.num_parameters() == expected_count(c));
    for (const Parameter& p : model.parameters()) {
      INFO(p.name);
      CHECK(p.decay == should_decay(p.name));
    }
  }
}

TEST_CASE("rescale-residual: each residual branch's output projection divided by sqrt(branches x layers)") {
  for (const char* family : {"attention", "linear", "mamba", "deltanet", "gated_deltanet", "mamba2"})
    for (const char* mlp : {"none", "gelu"}) {
      INFO(family << " mlp " << mlp);
      ModelConfig c = small(family);
      c.mlp = mlp;
      c.n_layers = 3;
      LanguageModel plain(c, 7);
      c.rescale_residual = true;
      LanguageModel scaled(c, 7);
      // The same draws, then the projections scaled: 1/sqrt(3) without an MLP, 1/sqrt(6) with one.
      const float scale = float(1.0 / std::sqrt((std::string(mlp) == "gelu" ? 2.0 : 1.0) * 3.0));
      const std::vector<Parameter> a = plain.parameters(), b = scaled.parameters();
      REQUIRE(a.size() == b.size());
      int projections = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].name);
        const bool branch_out = a[i].name.ends_with("out_proj.weight") || a[i].name.ends_with("fc2.weight");
        projections += branch_out;
        for (int64_t j = 0; j < a[i].tensor.numel(); ++j)
          REQUIRE(b[i].tensor.data()[j] == (branch_out ? a[i].tensor.data()[j] * scale : a[i].tensor.data()[j]));
      }
      CHECK(projections == 3 * (std::string(mlp) == "gelu" ? 2 : 1));
    }
}

TEST_CASE("config validation names the field and what is allowed") {
  std::vector<std::pair<ModelConfig, std::string>> bad;
  auto with = [](ModelConfig c, auto change) {
    change(c);
    return c;
  };
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.family = "rnn"; }),
                 "--model 'rnn' unknown (allowed: attention, linear, mamba, deltanet, gated_deltanet, mamba2)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.family = "mamba"; }),
                 "the options are not those of family 'mamba'"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.d_model = 15; }),
                 "--d-model 15 is not divisible by --n-heads 2"});
  bad.push_back({with(small("attention", "rope"), [](ModelConfig& c) { c.d_model = 6; }),
                 "--pos rope needs an even head width, got d-model / n-heads = 3"});
  bad.push_back({small("linear", "alibi"), "--pos 'alibi' is not allowed for model linear (allowed: none, sinusoidal, learned, rope)"});
  bad.push_back({small("mamba", "rope"), "--pos 'rope' is not allowed for model mamba (allowed: none)"});
  bad.push_back({with(small("mamba"), [](ModelConfig& c) { c.options<MambaOptions>().a_init = "hippo-legs"; }),
                 "--a-init hippo-legs needs --ssm-selective 0"});
  bad.push_back({with(small("mamba"), [](ModelConfig& c) { c.options<MambaOptions>().a_init = "s4d-lin"; }),
                 "--a-init s4d-lin needs --ssm-selective 0"});
  // Hybrid stacks: the list against n-layers, each entry a family, each layer's own checks.
  bad.push_back({with(small("mamba"), [](ModelConfig& c) { set_options(c, {{"mixers", "mamba,attention,linear"}}); }),
                 "--mixers mamba,attention,linear names 3 layers but --n-layers is 2 (allowed: n-layers >= the entries of mixers)"});
  bad.push_back({with(small("mamba"), [](ModelConfig& c) { set_options(c, {{"mixers", "mamba+rnn"}}); }),
                 "--mixers mamba,rnn: --model 'rnn' unknown (allowed: attention, linear, mamba, deltanet, gated_deltanet, mamba2)"});
  bad.push_back({with(small("attention", "rope"), [](ModelConfig& c) { set_options(c, {{"mixers", "attention mamba"}}); }),
                 "--mixers attention,mamba, layer 1 (mamba): --pos 'rope' is not allowed for model mamba (allowed: none)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.vocab = 0; }),
                 "vocab 0 must be >= 1"});
  bad.push_back({with(small("mamba"), [](ModelConfig& c) { c.options<MambaOptions>().d_state = -1; }),
                 "--d-state -1 is out of range (allowed: 1..4096)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.pos = "relative"; }),
                 "--pos 'relative' unknown (allowed: none, sinusoidal, learned, rope, alibi)"});
  bad.push_back({with(small("linear"), [](ModelConfig& c) { c.options<LinearAttentionOptions>().feature_map = "softmax"; }),
                 "--feature-map 'softmax' unknown (allowed: elu, relu, identity, taylor)"});
  bad.push_back({with(small("linear", "rope"), [](ModelConfig& c) { c.options<LinearAttentionOptions>().feature_map = "taylor"; }),
                 "--pos rope does not apply to --feature-map taylor (allowed with taylor: --pos none, sinusoidal or learned)"});
  bad.push_back({with(small("linear", "rope"), [](ModelConfig& c) { c.options<LinearAttentionOptions>().feature_dim = 5; }),
                 "--pos rope needs an even --feature-dim, got 5"});
  bad.push_back({with(small("linear"), [](ModelConfig& c) { c.options<LinearAttentionOptions>().feature_dim = 1025; }),
                 "--feature-dim 1025 is out of range (allowed: 0..1024)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.options<HeadOptions>().short_conv = 65; }),
                 "--short-conv 65 is out of range (allowed: 0..64)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.norm = "sandwich"; }),
                 "--norm 'sandwich' unknown (allowed: pre, post)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.options<HeadOptions>().rope_style = "interleaved"; }),
                 "--rope-style 'interleaved' is not supported (allowed: half)"});
  bad.push_back({with(small("attention"), [](ModelConfig& c) { c.options<MultiHeadAttentionOptions>().window = -1; }),
                 "--window -1 is out of range (allowed: 0..16777216)"});
  bad.push_back({with(small("attention", "learned"), [](ModelConfig& c) { c.max_seq_len = 0; }),
                 "--max-seq-len 0: learned positions need a table size"});
  for (auto& [cfg, message] : bad) {
    INFO(message);
    const std::string e = error_of([&] { cfg.validate(); });
    CHECK(e.find(message) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(error_of([&] { LanguageModel m(cfg, 1); }) == e);
  }
  for (auto& [name, cfg] : variants()) {
    INFO(name);
    CHECK(error_of([&] { cfg.validate(); }) == "");
  }
}

TEST_CASE("state_io: save and load by name; mismatches are errors that load nothing") {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("trilemma_test_state_io_" + std::to_string(getpid()) + ".h5")).string();
  ModelConfig cfg = small("attention", "rope");
  LanguageModel a(cfg, 1), b(cfg, 2);
  {
    H5File f(path, H5File::Mode::create);
    save_parameters(f, a);
    f.flush();
  }
  H5File f(path, H5File::Mode::read);
  CHECK(f.shape_of("/model/backbone.layers.1.mlp.fc1.weight") == Shape{4 * cfg.d_model, cfg.d_model});
  load_parameters(f, b);
  for (size_t i = 0; i < a.parameters().size(); ++i)
    CHECK(a.parameters()[i].tensor.tolist() == b.parameters()[i].tensor.tolist());

  auto unchanged_after = [&](ModelConfig c, const std::string& message) {
    LanguageModel m(c, 3);
    const std::vector<float> before = m.embedding.tolist();
    const std::string e = error_of([&] { load_parameters(f, m); });
    INFO(e);
    CHECK(e.find(message) != std::string::npos);
    CHECK(m.embedding.tolist() == before);
  };
  ModelConfig wider = cfg;
  wider.vocab = 12;
  unchanged_after(wider, "parameter 'backbone.embedding.weight' has shape [11, 16] in the file, "
                         "the model expects [12, 16]");
  ModelConfig tied = cfg;
  tied.tie_embeddings = true;
  unchanged_after(tied, "unexpected parameter 'lm_head.weight'");
  ModelConfig biased = cfg;
  biased.options<HeadOptions>().bias = true;
  unchanged_after(biased, "missing parameter 'backbone.layers.0.mixer.q_proj.bias' [16]");
  CHECK(error_of([&] { load_parameters(f, b, "/nowhere"); }).find("/nowhere: no such group") !=
        std::string::npos);
  std::filesystem::remove(path);
}
