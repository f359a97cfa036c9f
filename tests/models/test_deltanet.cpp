// DeltaNet and Gated DeltaNet (models/deltanet.hpp) as families: their parameters (names, shapes,
// weight decay, the decay's initial ranges), their options and what each switch removes, Gated
// DeltaNet with both gates off computing DeltaNet's logits, variant names, the command line's
// one-line refusals of bad combinations, and the fused decoding step giving the forward's ops
// stepped token by token (with every switch, and after a parameter is written). Causality and
// recurrent decoding run in test_models and test_decode over every family; PyTorch parity in
// test_parity_models; the kernel in tests/framework/test_delta_rule.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "framework/kernels/delta_rule.hpp"
#include "framework/ops/ops.hpp"
#include "models/deltanet.hpp"
#include "models/family.hpp"
#include "models/lm.hpp"
#include "tests/compare.hpp"
#include "tests/run_binary.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

ModelConfig small(const std::string& family, const TextMap& options = {}) {
  ModelConfig c = ModelConfig::of(family);
  c.vocab = 11;
  c.d_model = 16;
  c.n_layers = 2;
  c.max_seq_len = 40;
  c.tie_embeddings = false;
  set_options(c, {{"n-heads", "2"}});
  set_options(c, options);
  return c;
}

// The mixer's parameters of layer 0: name (after "backbone.layers.0.mixer.") -> shape.
std::map<std::string, Shape> mixer_parameters(const LanguageModel& m) {
  std::map<std::string, Shape> out;
  const std::string prefix = "backbone.layers.0.mixer.";
  for (const Parameter& p : m.parameters())
    if (p.name.rfind(prefix, 0) == 0) out[p.name.substr(prefix.size())] = p.tensor.shape();
  return out;
}

}  // namespace

TEST_CASE("deltanet and gated_deltanet: parameter names, shapes and weight decay; each switch removes its own") {
  const int64_t D = 16, H = 2, Dh = 8, K = 4;
  std::map<std::string, Shape> want = {
      {"q_proj.weight", {D, D}},      {"k_proj.weight", {D, D}},      {"v_proj.weight", {D, D}},
      {"q_conv.weight", {D, 1, K}},   {"q_conv.bias", {D}},           {"k_conv.weight", {D, 1, K}},
      {"k_conv.bias", {D}},           {"v_conv.weight", {D, 1, K}},   {"v_conv.bias", {D}},
      {"b_proj.weight", {H, D}},      {"o_norm.weight", {Dh}},        {"out_proj.weight", {D, D}}};
  CHECK(mixer_parameters(LanguageModel(small("deltanet"), 1)) == want);
  std::map<std::string, Shape> gated = want;
  gated.insert({{"a_proj.weight", {H, D}}, {"A_log", {H}}, {"dt_bias", {H}}, {"g_proj.weight", {D, D}}});
  CHECK(mixer_parameters(LanguageModel(small("gated_deltanet"), 1)) == gated);
  // Without the convolutions, the state gate, the output gate: their parameters go with them.
  std::map<std::string, Shape> no_conv = gated;
  for (const char* p : {"q_conv.weight", "q_conv.bias", "k_conv.weight", "k_conv.bias", "v_conv.weight", "v_conv.bias"})
    no_conv.erase(p);
  CHECK(mixer_parameters(LanguageModel(small("gated_deltanet", {{"conv-size", "0"}}), 1)) == no_conv);
  std::map<std::string, Shape> no_state_gate = gated;
  for (const char* p : {"a_proj.weight", "A_log", "dt_bias"}) no_state_gate.erase(p);
  CHECK(mixer_parameters(LanguageModel(small("gated_deltanet", {{"state-gate", "0"}}), 1)) == no_state_gate);
  std::map<std::string, Shape> no_output_gate = gated;
  no_output_gate.erase("g_proj.weight");
  CHECK(mixer_parameters(LanguageModel(small("gated_deltanet", {{"output-gate", "0"}}), 1)) == no_output_gate);
  // Weight decay on the matrices only: not on A_log, dt_bias, the norm's weight, the biases.
  LanguageModel m(small("gated_deltanet"), 1);
  for (const Parameter& p : m.parameters()) {
    INFO(p.name);
    const bool no_decay = p.name.ends_with(".bias") || p.name.ends_with(".A_log") || p.name.ends_with(".dt_bias") ||
                          p.name.find("norm") != std::string::npos || p.name.find("embedding") != std::string::npos;
    CHECK(p.decay == !no_decay);
  }
}

TEST_CASE("gated_deltanet: A = exp(A_log) in [1, 16] and dt = softplus(dt_bias) in [1e-3, 1e-1] at init") {
  ModelConfig c = small("gated_deltanet");
  set_options(c, {{"n-heads", "8"}});
  c.d_model = 64;
  c.n_layers = 4;
  LanguageModel m(c, 3);
  int64_t seen = 0;
  for (const Parameter& p : m.parameters())
    for (int64_t i = 0; i < p.tensor.numel(); ++i) {
      const double x = p.tensor.data()[i];
      if (p.name.ends_with(".A_log")) {
        CHECK(std::exp(x) >= 1 - 1e-5);
        CHECK(std::exp(x) <= 16 + 1e-4);
        ++seen;
      } else if (p.name.ends_with(".dt_bias")) {
        const double dt = std::log1p(std::exp(x));
        CHECK(dt >= 1e-3 * (1 - 1e-4));
        CHECK(dt <= 1e-1 * (1 + 1e-4));
        ++seen;
      }
    }
  CHECK(seen == 2 * 8 * 4);
}

TEST_CASE("gated_deltanet with both gates off computes deltanet's logits, bit for bit") {
  for (const char* conv : {"4", "0"}) {
    CAPTURE(conv);
    LanguageModel plain(small("deltanet", {{"conv-size", conv}}), 5);
    LanguageModel gated(small("gated_deltanet", {{"conv-size", conv}, {"state-gate", "0"}, {"output-gate", "0"}}), 5);
    REQUIRE(plain.parameters().size() == gated.parameters().size());
    for (size_t i = 0; i < plain.parameters().size(); ++i) {
      CHECK(plain.parameters()[i].name == gated.parameters()[i].name);
      {
        Tensor dst = gated.parameters()[i].tensor;
        dst.copy_(plain.parameters()[i].tensor);
      }
    }
    NoGradGuard no_grad;
    const IntTensor ids = random_ids(2, 30, 11, 9);
    const Tensor a = plain.forward(ids), b = gated.forward(ids);
    CHECK(scaled_err(a, b) == 0);
  }
}

TEST_CASE("--delta-form chunked computes the recurrent form's logits and gradients to float32 rounding") {
  // Same seed, same weights; T 40 spans a partial chunk. Tolerance: RMS error 1e-5 of the
  // reference's RMS, float32 roundings through two layers (1e-7 each), a wrong term 1e-2.
  for (const char* family : {"deltanet", "gated_deltanet"}) {
    CAPTURE(family);
    LanguageModel recurrent(small(family), 5), chunked(small(family, {{"delta-form", "chunked"}}), 5);
    const IntTensor ids = random_ids(2, 40, 11, 9);
    const Tensor a = recurrent.forward(ids);
    backward(mean(mul(a, a)));  // one model's tape at a time
    const Tensor b = chunked.forward(ids);
    backward(mean(mul(b, b)));
    CHECK(rms_err(b, a) < 1e-5);
    for (size_t i = 0; i < recurrent.parameters().size(); ++i) {
      INFO(recurrent.parameters()[i].name);
      CHECK(rms_err(chunked.parameters()[i].tensor.grad(), recurrent.parameters()[i].tensor.grad()) < 1e-5);
    }
  }
}

TEST_CASE("deltanet options: the papers' defaults, variant names, state bytes") {
  const ModelConfig d = small("deltanet"), g = small("gated_deltanet");
  CHECK(d.options<DeltaNetOptions>().conv_size == 4);
  CHECK(d.options<DeltaNetOptions>().l2_norm);
  CHECK(g.options<GatedDeltaNetOptions>().state_gate);
  CHECK(g.options<GatedDeltaNetOptions>().output_gate);
  CHECK(d.variant() == "deltanet");
  CHECK(small("deltanet", {{"conv-size", "0"}, {"l2-norm", "0"}}).variant() == "deltanet conv-size=0 l2-norm=0");
  CHECK(small("gated_deltanet", {{"state-gate", "0"}}).variant() == "gated_deltanet state-gate=0");
  // S per head (Dh x Dh) and the three convolutions' last K-1 inputs, per layer.
  const int64_t H = 2, Dh = 8, D = 16;
  CHECK(LanguageModel(d, 1).state_bytes(7) == 2 * (H * Dh * Dh + 3 * 3 * D) * int64_t(sizeof(float)));
  CHECK(LanguageModel(small("deltanet", {{"conv-size", "0"}}), 1).state_bytes(100000) ==
        2 * H * Dh * Dh * int64_t(sizeof(float)));
}

TEST_CASE("deltanet: bad combinations are one line naming the option") {
  auto error_of = [](ModelConfig c) {
    try {
      c.checked();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ModelConfig c = small("gated_deltanet");
  c.d_model = 30;
  set_options(c, {{"n-heads", "4"}});
  CHECK(error_of(c) == "--d-model 30 is not divisible by --n-heads 4");
  ModelConfig r = small("deltanet");
  r.pos = "rope";
  CHECK(error_of(r) == "--pos 'rope' is not allowed for model deltanet (allowed: none, sinusoidal, learned)");
  // On the command line: exit 2, one line.
  for (const char* args : {"train --model deltanet --task mqar --d-model 30 --n-heads 4 --steps 1",
                           "train --model gated_deltanet --task mqar --pos rope --steps 1",
                           "train --model gated_deltanet --task mqar --conv-size 65 --steps 1"}) {
    CAPTURE(args);
    const Run run_result = run(args);
    CHECK(run_result.code == 2);
    CHECK(count_lines(run_result.err) == 1);
  }
}

namespace {

// The forward's ops on one token, unfused: the decoding step as it was before it was fused.
struct StepByOps {
  Tensor S, q, k, v;  // the state and the convolutions' windows
  StepByOps(const DeltaNet& m, int64_t B) : S(Tensor::zeros(Shape{B, m.H, m.Dh, m.Dh})) {
    if (m.q_conv)
      for (Tensor* w : {&q, &k, &v}) *w = m.q_conv->new_window(B);
  }
  Tensor operator()(const DeltaNet& m, const Tensor& x) {
    const int64_t B = x.size(0), H = m.H, Dh = m.Dh;
    auto branch = [&](const Linear& proj, const std::unique_ptr<ShortConv>& conv, Tensor& window) {
      const Tensor p = proj(x);
      return conv ? silu(conv->step(p, window)) : silu(p);
    };
    const Shape heads{B, 1, H, Dh};
    Tensor qh = reshape(branch(m.q_proj, m.q_conv, q), heads), kh = reshape(branch(m.k_proj, m.k_conv, k), heads);
    const Tensor vh = reshape(branch(m.v_proj, m.v_conv, v), heads);
    if (m.l2_norm)
      for (Tensor* t : {&qh, &kh}) *t = mul_scalar(rms_norm(*t, Tensor(), 1e-6f / float(Dh)), 1.f / std::sqrt(float(Dh)));
    const Tensor beta = sigmoid(m.b_proj(x));
    const Tensor g = m.state_gate ? mul(mul_scalar(exp(m.A_log), -1.f), softplus(add((*m.a_proj)(x), m.dt_bias))) : Tensor();
    Tensor o = m.o_norm(delta_rule_step(qh, kh, vh, beta, g, S, 1.f / std::sqrt(float(Dh))));
    if (m.output_gate) o = mul(o, silu(reshape((*m.g_proj)(x), heads)));
    return m.out_proj(reshape(o, Shape{B, 1, m.D}));
  }
};

}  // namespace

TEST_CASE("the fused decoding step gives the forward's ops stepped one token at a time") {
  NoGradGuard no_grad;
  const std::pair<const char*, TextMap> cases[] = {
      {"deltanet", {}}, {"deltanet", {{"conv-size", "0"}}}, {"deltanet", {{"l2-norm", "0"}, {"conv-size", "2"}}},
      {"gated_deltanet", {}}, {"gated_deltanet", {{"state-gate", "0"}}}, {"gated_deltanet", {{"output-gate", "0"}}},
      {"gated_deltanet", {{"conv-size", "0"}}}};
  int steps = 0, same_bits = 0;
  for (const auto& [family, options] : cases) {
    CAPTURE(family);
    CAPTURE(options.size() ? options.begin()->first : "");
    LanguageModel lm(small(family, options), 3);
    const DeltaNet& m = dynamic_cast<const DeltaNet&>(*lm.layers[0]->mixer);
    const int64_t B = 2;
    std::unique_ptr<MixerState> st = lm.layers[0]->mixer->new_state(B);
    StepByOps ref(m, B);
    Tensor norm_w = m.o_norm.weight, q_w = m.q_proj.weight;  // away from ones: a weight left out shows
    norm_w.copy_(add_scalar(mul_scalar(norm_w, 0.3f), 0.5f));
    for (int64_t t = 0; t < 12; ++t) {
      CAPTURE(t);
      if (t == 6) q_w.copy_(mul_scalar(q_w, 0.5f));  // a parameter written between steps (training)
      Rng rng(40 + uint64_t(t));
      const Tensor x = init_normal(Shape{B, 1, 16}, rng, 0.f, 1.f);
      const Tensor got = lm.layers[0]->mixer->step(x, *st), want = ref(m, x);
      // Bit for bit here; to rounding where oneDNN sums the one GEMV over the joined weights in
      // another order than the separate ones (another CPU's kernel). A stale weight errs by 1e-1.
      CHECK(max_rel_err(got, want) <= 1e-5);
      same_bits += bit_equal(got, want);
      ++steps;
    }
  }
  std::printf("fused decoding step: %d of %d steps bit for bit with the ops stepped one token at a time\n", same_bits, steps);
}
