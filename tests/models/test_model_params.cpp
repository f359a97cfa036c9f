// The language models' parameters and settings (test_models.cpp checks them over time):
//  - parameter names and shapes as docs/CHECKPOINT.md, counts from a formula, decay flags;
//  - the residual branches' rescaled output projections;
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
