// trilemma bench mixers: forward+backward time and peak extra memory of each sequence mixer
// at several sequence lengths, of the two attention kernels (fused vs naive) and of the delta
// rule's and Mamba 2's SSD scan's two forms (fused recurrence vs chunkwise) on their own.
// Peak memory: StepCost (bench.hpp). measure_mixer, the mixer alone, is shared with `bench scaling`.
#include <cmath>
#include <cstdio>

#include "framework/kernels/attention.hpp"
#include "framework/kernels/delta_rule.hpp"
#include "framework/kernels/ssd_scan.hpp"
#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"
#include "bench/bench.hpp"
#include "models/family.hpp"
#include "train/run_config.hpp"

namespace tri::bench {

using namespace tri::train;

namespace {

struct Row {
  std::string what;
  int64_t T;
  StepCost cost;
  double tokens_per_s;
  int64_t params = 0, state_bytes = 0;  // mixers only: parameters, recurrent state per sequence
};

double mb(int64_t bytes) { return double(bytes) / (1 << 20); }

Row mixer_row(const std::string& family, int64_t B, int64_t T, int64_t D, int64_t H, int repeats) {
  ModelConfig cfg = ModelConfig::of(family);
  cfg.d_model = D;
  read_text(cfg, {{"n-heads", std::to_string(H)}}, false);  // the families with heads
  // Mamba 2: H heads over its 2 D channels (expand 2; D 128, H 4: head-dim 64, its default).
  read_text(cfg, {{"head-dim", std::to_string(2 * D / H)}}, false);
  cfg.vocab = 16;
  cfg.max_seq_len = T;
  const MixerCost m = measure_mixer(cfg, B, T, repeats);
  return {family + " mixer", T, m.cost, double(B * T) / (m.cost.ms * 1e-3), m.params, m.state_bytes};
}

Row kernel_row(bool fused, int64_t B, int64_t T, int64_t D, int64_t H, int repeats) {
  Rng rng(2);
  const Shape s{B, T, H, D / H};
  Tensor q = init_normal(s, rng, 0.f, 1.f).requires_grad_(), k = init_normal(s, rng, 0.f, 1.f).requires_grad_(),
         v = init_normal(s, rng, 0.f, 1.f).requires_grad_();
  AttentionOptions opt;
  StepCost c = measure_step(
      [&] {
        Tensor o = fused ? attention(q, k, v, opt) : attention_naive(q, k, v, opt);
        backward(mean(o));
        for (Tensor* t : {&q, &k, &v}) t->zero_grad();
      },
      repeats);
  return {fused ? "attention kernel (fused)" : "attention kernel (naive)", T, c, double(B * T) / (c.ms * 1e-3)};
}
// The delta rule's forms at the mixer's head width Dh = D / H: the fused recurrence (at Dh 16 also
// with its state in memory instead of registers) and the chunkwise form (chunks of 64), forward
// and backward, on unit keys as the models' (L2-normed).
enum class DeltaForm { fused, fused_in_memory, chunked };

Row delta_rule_row(DeltaForm form, bool gated, int64_t B, int64_t T, int64_t D, int64_t H, int repeats) {
  Rng rng(3);
  const Shape s{B, T, H, D / H}, sb{B, T, H};
  Tensor q = init_normal(s, rng, 0.f, 1.f).requires_grad_(), v = init_normal(s, rng, 0.f, 1.f).requires_grad_();
  Tensor k = mul_scalar(init_normal(s, rng, 0.f, 1.f), 1.f / std::sqrt(float(D / H))).requires_grad_();
  Tensor beta = Tensor::full(sb, 0.5f).requires_grad_();
  Tensor g = gated ? Tensor::full(sb, -0.05f).requires_grad_() : Tensor();
  StepCost c = measure_step(
      [&] {
        Tensor o = form == DeltaForm::chunked ? delta_rule_chunked(q, k, v, beta, g)
                                              : delta_rule(q, k, v, beta, g, 1.f, form == DeltaForm::fused);
        backward(mean(o));
        for (Tensor* t : {&q, &k, &v, &beta, &g})
          if (t->defined()) t->zero_grad();
      },
      repeats);
  const char* form_name = form == DeltaForm::chunked ? "chunked)" : form == DeltaForm::fused ? "fused)" : "fused, in memory)";
  const std::string what = std::string(gated ? "gated " : "") + "delta rule (" + form_name;
  return {what, T, c, double(B * T) / (c.ms * 1e-3)};
}

// Mamba 2's SSD scan in its two forms at mamba2's default shape for the mixer's heads: head
// dimension P = 2 D / H (expand 2), state N 64, one group of B and C.
Row ssd_scan_row(bool chunked, int64_t B, int64_t T, int64_t D, int64_t H, int repeats) {
  Rng rng(4);
  const int64_t P = 2 * D / H, N = 64;
  Tensor x = init_normal(Shape{B, T, H, P}, rng, 0.f, 1.f).requires_grad_();
  Tensor dt = Tensor::full(Shape{B, T, H}, 0.05f).requires_grad_();
  Tensor A = Tensor::full(Shape{H}, -1.f).requires_grad_();
  Tensor Bm = init_normal(Shape{B, T, 1, N}, rng, 0.f, 1.f).requires_grad_();
  Tensor Cm = init_normal(Shape{B, T, 1, N}, rng, 0.f, 1.f).requires_grad_();
  Tensor Dk = Tensor::full(Shape{H}, 1.f).requires_grad_();
  StepCost c = measure_step(
      [&] {
        Tensor y = chunked ? ssd_scan_chunked(x, dt, A, Bm, Cm, Dk) : ssd_scan(x, dt, A, Bm, Cm, Dk);
        backward(mean(y));
        for (Tensor* t : {&x, &dt, &A, &Bm, &Cm, &Dk}) t->zero_grad();
      },
      repeats);
  return {std::string("ssd scan (") + (chunked ? "chunked)" : "fused)"), T, c, double(B * T) / (c.ms * 1e-3)};
}

}  // namespace

MixerCost measure_mixer(const ModelConfig& cfg, int64_t B, int64_t T, int repeats) {
  Rng rng(1);
  std::unique_ptr<Mixer> mixer = make_mixer(cfg, rng);
  Tensor x = init_normal(Shape{B, T, cfg.d_model}, rng, 0.f, 1.f).requires_grad_();
  const StepCost c = measure_step(
      [&] {
        backward(mean(mixer->forward(x)));
        mixer->zero_grad();
        x.zero_grad();
      },
      repeats);
  return {c, mixer->num_parameters(), mixer->state_bytes(T)};
}

int bench_mixers(const po::variables_map& vm) {
  const std::vector<int64_t> lens = bench_sizes(vm, "seq-lens", "1024,2048,4096");
  const int64_t B = vm["batch"].as<int>(), D = vm["d-model"].as<int>(), H = vm["heads"].as<int>();
  const int repeats = bench_repeats(vm, 5);
  const bool json = vm["json"].as<bool>(), naive = vm["naive"].as<bool>();
  if (D % H != 0)
    throw UsageError("--d-model " + std::to_string(D) + " must be divisible by --heads " + std::to_string(H));
  std::vector<Row> rows;
  if (!json)
    std::printf("mixer forward+backward, B=%lld D=%lld H=%lld, median of %d, %d threads, load average %.2f\n"
                "%-36s %6s %10s %12s %12s %10s %12s\n", (long long)B, (long long)D, (long long)H, repeats,
                num_threads(), load_average(), "what", "T", "ms", "tokens/s", "peak MB", "params",
                "state B/seq");
  auto show = [&](const Row& r) {
    rows.push_back(r);
    if (!json) {
      std::printf("%-36s %6lld %10.2f %12.0f %12.1f %10lld %12lld\n", r.what.c_str(), (long long)r.T,
                  r.cost.ms, r.tokens_per_s, mb(r.cost.peak_bytes), (long long)r.params, (long long)r.state_bytes);
      std::fflush(stdout);
    }
  };
  for (const std::string& family : family_names())
    for (int64_t T : lens) show(mixer_row(family, B, T, D, H, repeats));
  for (int64_t T : lens) {
    show(kernel_row(true, B, T, D, H, repeats));
    if (naive) show(kernel_row(false, B, T, D, H, repeats));
  }
  for (bool gated : {false, true})
    for (int64_t T : lens)
      for (DeltaForm form : {DeltaForm::fused, DeltaForm::fused_in_memory, DeltaForm::chunked})
        if (form != DeltaForm::fused_in_memory || D / H == 16) show(delta_rule_row(form, gated, B, T, D, H, repeats));
  for (int64_t T : lens)
    for (bool chunked : {false, true}) show(ssd_scan_row(chunked, B, T, D, H, repeats));
  if (json) {
    Json j = {{"benchmark", "mixers"}, {"batch", B}, {"d_model", D}, {"heads", H}, {"threads", num_threads()},
              {"rows", Json::array()}};
    for (const Row& r : rows)
      j["rows"].push_back({{"what", r.what}, {"T", r.T}, {"ms", r.cost.ms}, {"tokens_per_s", r.tokens_per_s},
                           {"peak_mb", mb(r.cost.peak_bytes)}, {"params", r.params}, {"state_bytes", r.state_bytes}});
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace tri::bench
