// trilemma demo: the default training run. A one-layer ConvLM (models/conv_lm.hpp) learns the
// lag task (data/lag_task.hpp: predict the token seen `lag` steps back) with AdamW, warm-up +
// cosine schedule and gradient clipping, then reports held-out accuracy. Prints a checksum of
// the final parameters so two runs can be compared bit for bit.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "data/lag_task.hpp"
#include "data/metrics.hpp"
#include "framework/autograd.hpp"
#include "framework/optim.hpp"
#include "framework/runtime.hpp"
#include "models/conv_lm.hpp"
#include "train/cli.hpp"

namespace tri::cli {

void demo_options(CommandOptions& o) {
  o.named.add_options()
      ("steps", po::value<int>()->default_value(300)->notifier(in_range<int>("steps", 1, 1000000)), "training steps")
      ("batch", po::value<int>()->default_value(16)->notifier(in_range<int>("batch", 1, 4096)), "rows per batch")
      ("seq-len", po::value<int>()->default_value(64)->notifier(in_range<int>("seq-len", 2, 65536)), "tokens per row")
      ("vocab", po::value<int>()->default_value(16)->notifier(in_range<int>("vocab", 2, 1 << 20)), "vocabulary size")
      ("d-model", po::value<int>()->default_value(32)->notifier(in_range<int>("d-model", 1, 8192)), "model width")
      ("lag", po::value<int>()->default_value(3)->notifier(in_range<int>("lag", 1, 3)), "how far back the target lies (the conv sees 3 back)")
      ("lr", po::value<double>()->default_value(3e-3, "0.003")->notifier(in_range<double>("lr", 0.0, 10.0)), "peak learning rate")
      ("warmup", po::value<int>()->default_value(20)->notifier(in_range<int>("warmup", 0, 1000000)), "linear warm-up steps")
      ("clip", po::value<double>()->default_value(1.0, "1.0")->notifier(in_range<double>("clip", 0.0, 1e9)), "global grad-norm clip (0: off)")
      ("weight-decay", po::value<double>()->default_value(0.01, "0.01")->notifier(in_range<double>("weight-decay", 0.0, 10.0)), "AdamW weight decay")
      ("seed", po::value<uint64_t>()->default_value(0), "seed for initialisation and data")
      ("log-every", po::value<int>()->default_value(50)->notifier(in_range<int>("log-every", 1, 1000000)), "steps between log lines");
}

int run_demo(const po::variables_map& vm) {
  const int steps = vm["steps"].as<int>(), B = vm["batch"].as<int>(), T = vm["seq-len"].as<int>();
  const int lag = vm["lag"].as<int>(), log_every = vm["log-every"].as<int>();
  const uint64_t seed = vm["seed"].as<uint64_t>();
  if (lag >= T) throw UsageError("--lag " + std::to_string(lag) + " must be below --seq-len " + std::to_string(T));
  ConvLMConfig cfg{vm["vocab"].as<int>(), vm["d-model"].as<int>(), 4};
  ConvLM model(cfg, seed);
  AdamWOptions ao;
  ao.lr = vm["lr"].as<double>();
  ao.weight_decay = vm["weight-decay"].as<double>();
  AdamW opt(model.parameters(), ao);
  LrSchedule sched("cosine", ao.lr, vm["warmup"].as<int>(), steps, 0.1 * ao.lr);
  const double clip = vm["clip"].as<double>();
  std::printf("%s\n", runtime_summary().c_str());  // what the ms/step and tokens/s below ran on
  std::printf("demo: ConvLM d_model=%d vocab=%d, lag task T=%d lag=%d, batch %d, %d steps\n",
              cfg.d_model, cfg.vocab, T, lag, B, steps);
  std::printf("optimizer: %s\nschedule: %s\nclip: %g\nparameters: %lld\n", opt.describe().c_str(),
              sched.describe().c_str(), clip, (long long)model.num_parameters());

  const uint64_t train_seed = seed_mix(seed, 1), eval_seed = seed_mix(seed, 2);  // disjoint streams
  auto t0 = std::chrono::steady_clock::now();
  double loss = 0;
  for (int step = 0; step < steps; ++step) {
    LagBatch batch = lag_batch(train_seed, uint64_t(step), B, T, cfg.vocab, lag);
    Tensor logits = model.forward(batch.inputs);
    Tensor l = cross_entropy(logits, batch.targets);
    backward(l);
    const double gnorm = clip_grad_norm(model.parameters(), clip);
    opt.set_lr(sched.lr_at(step));
    opt.step();
    opt.zero_grad();
    loss = l.item();
    if ((step + 1) % log_every == 0 || step + 1 == steps) {
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %5d  loss %.4f  acc %.3f  gnorm %.3f  lr %.2e  %.2f ms/step  %.0f tok/s\n",
                  step + 1, loss, token_accuracy(logits, batch.targets).value(), gnorm,
                  sched.lr_at(step), 1e3 * sec / (step + 1), double(step + 1) * B * T / sec);
    }
  }
  NoGradGuard no_grad;
  Accuracy score;
  double eval_loss = 0;
  const int eval_batches = 8;
  for (int i = 0; i < eval_batches; ++i) {
    LagBatch batch = lag_batch(eval_seed, uint64_t(i), B, T, cfg.vocab, lag);
    Tensor logits = model.forward(batch.inputs);
    eval_loss += cross_entropy(logits, batch.targets).item() / eval_batches;
    score.add(token_accuracy(logits, batch.targets));
  }
  std::printf("eval: loss %.6f  token_acc %.4f  (%lld held-out positions)\n", eval_loss,
              score.value(), (long long)score.total);
  std::printf("final: train_loss %a  eval_loss %a  params_fnv1a %016llx\n", loss, eval_loss,
              (unsigned long long)model.parameters_fnv1a());
  return 0;
}

}  // namespace tri::cli
