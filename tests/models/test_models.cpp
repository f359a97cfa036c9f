// The language models of models/ over time (PyTorch parity is test_parity_models; names, counts,
// validation and state_io are test_model_params):
//  - causality, for every mixer and position encoding: changing the tokens after t leaves the
//    logits up to t bit-identical (and changes later ones), and the gradient of the blocks'
//    output at t with respect to their input after t is exactly zero (nonzero up to t);
//  - recurrent decoding: 64 single-token steps give the parallel forward's logits to 1e-5
//    (relative to the largest logit; 1e-3 for the ill-conditioned identity feature map), and
//    the decoding state holds state_bytes(T) per sequence; decoding errors;
//  - state_bytes: attention grows linearly with T (up to its window W, then constant), linear
//    attention and Mamba are constant; hybrid stacks, layer by layer.
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
#include "tests/models/model_variants.hpp"
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
