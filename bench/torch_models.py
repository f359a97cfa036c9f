"""The PyTorch baseline of the training benchmark: trilemma's benchmark models (tests/torch/models.py's
LanguageModel: the same structure, names, initialisation and parameter counts) trained with
AdamW and grad-norm clipping as train/trainer.cpp does (lr 1e-3, betas 0.9/0.999, eps 1e-8,
weight decay 0.1 except norms, biases, embeddings, Mamba's A_log/D and Gated DeltaNet's
A_log/dt_bias; clip 1.0; warm-up 50 then cosine), on random token batches of the benchmark's shapes.

  --form plain  PyTorch out of the box: models.py as written (masked softmax attention, masked
                quadratic linear attention, Mamba's sequential scan by unbind, the delta rule's
                and Mamba 2's step-by-step loops), AdamW's default implementation,
                zero_grad(set_to_none=True).
  --form tuned  the fastest form measured per model and shape (torch_forms.py says what each
                does; TUNED below is the choice), AdamW(foreach=True). The process environment
                (OPENBLAS_CORETYPE, OMP_WAIT_POLICY, tcmalloc, threads) is the caller's:
                bench/vs_torch.py sets it.
  --compile     (PyTorch 2.x, with --form tuned) the model under torch.compile (inductor, C++
                kernels on the CPU); compilation happens in the warm-up steps, whose time beyond
                the median step is reported apart as compile_s. Runs in the anchors' venv
                (bench/anchors_venv.sh), as do the sdpa form and PyTorch 2.x's TUNED choice.

Measured here (1 thread, tuned environment, median ms per step over 2-3 steps on a shared machine
at load 5-7, so only the ratios mean anything; the chosen form first):
  attention  L2048: qkv 5800, 5940 vs blocked 11020, 8040 (the strided key/query slices and the
             extra copies cost more than the skipped upper half saves) -> qkv at every T
  linear     S: chunked 251 vs quadratic 444;  L4096: chunked 2745 vs quadratic 13770 (RSS 757
             vs 3793 MiB) -> chunked at every T
  mamba      S: chunked 450 vs blelloch 491 vs sequential 755;  L4096: chunked 3196 vs blelloch
             5886 vs sequential 4682 -> chunked at every T
  (2 threads at S, load 5: mamba chunked 439-1259 vs plain unbind form 14660-20300 ms)
  deltanet, gated_deltanet (median ms per step over 3 steps, 1 thread, load 2-5; PyTorch 2.15,
             then 1.13): E64 chunked 128, 232 vs recurrent 173, 263 (2.15); 168, 243 vs 374, 414
             (1.13); S chunked 379, 337 vs recurrent 1041, 836 (2.15); 289, 309 vs 1416, 1088
             (1.13) -> chunked at every T. Compiled (2.15, chunked): E64 168, 208; S 333, 446 (compile
             58-105 s), no faster than eager on this loaded machine
  mamba2     (median ms per step over 3 steps, 1 thread, load 3-4, PyTorch 2.15; CPU ms in
             brackets): E64 chunked 209 (141) vs recurrent 552 (368); S chunked 494 (326) vs
             recurrent 1950 (1312) -> chunked at every T. Compiled (chunked): E64 185 (130), S 451
             (296), compile 52-77 s
PyTorch 2.15 (1 thread, E64, CPU ms per step on a machine at load 10): attention sdpa 63, 66 vs
  qkv 68, 78 -> sdpa wherever F.scaled_dot_product_attention exists. Under torch.compile Mamba's
  scan stays torch_scan.py's eager kernels (dynamo cannot trace their out= rows), the rest compiles.

--check: every fast form against the plain form on the same weights and batch, forward + backward
in float32, both compared with a float64 run of the plain form. Criterion per tensor (the loss and
every parameter's gradient): RMS(fast32 - plain64) <= 4 RMS(plain32 - plain64) + 8 eps32
RMS(plain64). Reordered float32 sums differ from the reference by a few times its own rounding
error, never more; a wrong formula is off by orders of magnitude. Under PyTorch 2.x the check also
covers the sdpa form and every family's TUNED form under torch.compile.

Usage: /usr/bin/python3 bench/torch_models.py --config S|W|L1024|L2048|L4096|E64|E256|E1024
       --model attention|linear|mamba|deltanet|gated_deltanet|mamba2 [--form tuned|plain] [--variant V] [--steps 10] [--warmup 2]
       [--threads 2] [--json] [--compile]
       /usr/bin/python3 bench/torch_models.py --check
"""
import argparse
import copy
import json
import math
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from models import FAMILY_OPTIONS, LanguageModel, no_weight_decay  # noqa: E402
from torch_forms import FORMS, HAS_SDPA, use_form  # noqa: E402

VOCAB = 64
CONFIGS = {  # name: (d_model, n_layers, n_heads, seq_len, batch), as docs/BENCHMARKS.md's configs
    "S": (128, 2, 4, 256, 16),
    "W": (512, 4, 8, 256, 8),
    "L1024": (128, 2, 4, 1024, 4),
    "L2048": (128, 2, 4, 2048, 4),
    "L4096": (128, 2, 4, 4096, 4),
    # The experiments' models (trilemma bench train's E rows): no MLP, tied embeddings, no biases,
    # vocabulary EXPERIMENT_VOCAB.
    "E64": (64, 2, 1, 64, 64),
    "E256": (64, 2, 1, 256, 64),
    "E1024": (64, 2, 1, 1024, 64),
}
EXPERIMENT_VOCAB = 512
TUNED = {"attention": lambda T: "sdpa" if HAS_SDPA else "qkv",
         "linear": lambda T: "chunked",
         "mamba": lambda T: "chunked",
         "deltanet": lambda T: "chunked",
         "gated_deltanet": lambda T: "chunked",
         "mamba2": lambda T: "chunked"}
DELTA_FAMILIES = ("deltanet", "gated_deltanet")
LR, BETAS, EPS, WEIGHT_DECAY, CLIP, WARMUP = 1e-3, (0.9, 0.999), 1e-8, 0.1, 1.0, 50


def model_config(family, d, layers, heads, T, experiment=False):
    cfg = dict(family=family, vocab=EXPERIMENT_VOCAB if experiment else VOCAB, d_model=d, n_layers=layers,
               max_seq_len=T)
    if experiment:
        cfg.update(mlp="none", tie_embeddings=True)
    if family in ("mamba", "mamba2"):  # the family's own sizes (models.py's defaults), no positions
        return dict(cfg, mlp="none")
    if family in DELTA_FAMILIES:  # no HeadOptions in trilemma bench train: no MLP nor positions, the family's heads
        return dict(cfg, mlp="none", n_heads=FAMILY_OPTIONS[family]["n_heads"])
    return dict(cfg, n_heads=heads, bias=not experiment, pos="learned")


def build(family, d, layers, heads, T, variant=None, seed=0, experiment=False):
    torch.manual_seed(seed)
    model = LanguageModel(model_config(family, d, layers, heads, T, experiment))
    return use_form(model, family, variant) if variant else model


def make_optimizer(model, tuned):
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if not no_weight_decay(n)], "weight_decay": WEIGHT_DECAY},
              {"params": [p for n, p in named if no_weight_decay(n)], "weight_decay": 0.0}]
    extra = {"foreach": True} if tuned else {}
    return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, **extra)


def lr_at(step, total):
    warm = min(WARMUP, total)
    if step < warm:
        return LR * (step + 1) / warm
    return 0.5 * LR * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def train_step(forward, model, opt, ids, targets, step, total, micro=1, bf16=False):
    """forward: model itself, or model under torch.compile. micro > 1: the batch's rows in that
    many forward and backward passes, their gradients summed before one update (as trilemma's
    --micro-batches). bf16: the forward and loss under torch.autocast("cpu", dtype=torch.bfloat16),
    as a PyTorch user trains in mixed precision."""
    for group in opt.param_groups:
        group["lr"] = lr_at(step, total)
    for part_ids, part_targets in zip(ids.chunk(micro), targets.chunk(micro)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = forward(part_ids)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), part_targets.reshape(-1))
        (loss / micro if micro > 1 else loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def whole_step(model, opt, micro, mode, bf16=False):
    """One torch.compile over the whole training step (forward, backward, clip_grad_norm_, AdamW,
    zero_grad), as PyTorch's documentation compiles an optimizer step and a 2026 user compiles
    the step. The learning rate is a tensor, so a new rate each step is data, not a recompile."""
    for group in opt.param_groups:
        group["lr"] = torch.tensor(float(group["lr"]))
        group["foreach"] = False  # a tensor rate needs the per-parameter form; compiled, it fuses anyway
    params = list(model.parameters())

    @torch.compile(mode=mode)
    def step(ids, targets):
        for part_ids, part_targets in zip(ids.chunk(micro), targets.chunk(micro)):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(part_ids)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), part_targets.reshape(-1))
            (loss / micro if micro > 1 else loss).backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def run(ids, targets, step_index, total):
        for group in opt.param_groups:
            group["lr"].fill_(lr_at(step_index, total))
        step(ids, targets)
    return run


def bench(a):
    d, layers, heads, T, batch = CONFIGS[a.config]
    variant = None
    if a.form == "tuned":
        variant = a.variant or TUNED[a.model](T)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    experiment = a.config.startswith("E")
    model = build(a.model, d, layers, heads, T, variant, experiment=experiment)
    opt = make_optimizer(model, a.form == "tuned")
    forward = torch.compile(model) if a.compile == "forward" else model
    bf16 = a.precision == "bf16"
    compiled = whole_step(model, opt, a.micro_batches, a.compile_mode, bf16) if a.compile == "step" else None
    g = torch.Generator().manual_seed(1)
    vocab = EXPERIMENT_VOCAB if experiment else VOCAB
    ids = torch.randint(0, vocab, (batch, T), generator=g)
    targets = torch.randint(0, vocab, (batch, T), generator=g)
    total = a.warmup + a.steps
    ms, warm, cpu_ms = [], [], []
    for step in range(total):
        t0, c0 = time.perf_counter(), time.process_time()
        if compiled:
            compiled(ids, targets, step, total)
        else:
            train_step(forward, model, opt, ids, targets, step, total, a.micro_batches, bf16)
        (ms if step >= a.warmup else warm).append(round(1e3 * (time.perf_counter() - t0), 3))
        cpu_ms.append(1e3 * (time.process_time() - c0))  # CPU time: steadier on a shared machine
    med = statistics.median(ms)
    compile_s = round(sum(w - med for w in warm) / 1e3, 2) if a.compile else None
    form = a.form + {None: "", "forward": "-compile", "step": "-compile-step"}[a.compile]
    return {"config": a.config, "model": a.model, "form": form, "compile_mode": a.compile_mode if a.compile else None,
            "variant": variant or "models.py", "compile_s": compile_s, "micro_batches": a.micro_batches,
            "precision": a.precision,
            "cpu_ms_median": round(statistics.median(cpu_ms[a.warmup:]), 3),
            "params": sum(p.numel() for p in model.parameters()), "ms_median": med, "ms": ms,
            "tokens_per_s": round(batch * T / med * 1e3, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def loss_and_grads(model, ids, targets, dtype, compiled=False):
    model = copy.deepcopy(model).to(dtype)
    forward = torch.compile(model) if compiled else model
    loss = F.cross_entropy(forward(ids).reshape(-1, VOCAB), targets.reshape(-1))
    loss.backward()
    out = {"loss": loss.detach().double().reshape(1)}
    out.update({n: p.grad.double() for n, p in model.named_parameters()})
    return out


def rms(t):
    return t.pow(2).mean().sqrt().item()


def check(threads):
    """Every fast form against the plain one; returns the number of failing tensors."""
    torch.set_num_threads(threads)
    sizes = dict(d=32, layers=2, heads=4, T=256, batch=2)  # T 256: 4 chunks of 64
    failures = 0
    cases = [(family, sizes["T"]) for family in FORMS]
    cases += [(family, 100) for family in DELTA_FAMILIES + ("mamba2",)]  # T % 64 != 0: the chunked forms' padding
    for family, T in cases:
        variants = FORMS[family][2]
        ref = build(family, sizes["d"], sizes["layers"], sizes["heads"], T)
        with torch.no_grad():  # move the weights off their init so every gradient path matters
            for p in ref.parameters():
                p.add_(0.02 * torch.randn_like(p))
        g = torch.Generator().manual_seed(2)
        ids = torch.randint(0, VOCAB, (sizes["batch"], T), generator=g)
        targets = torch.randint(0, VOCAB, (sizes["batch"], T), generator=g)
        exact = loss_and_grads(ref, ids, targets, torch.float64)
        plain = loss_and_grads(ref, ids, targets, torch.float32)
        compiled = [(TUNED[family](T), True)] if hasattr(torch, "compile") else []
        for variant, compile_it in [(v, False) for v in variants] + compiled:
            FORMS[family][0].block = 64  # blocked attention: several blocks at this small T
            fast = loss_and_grads(use_form(copy.deepcopy(ref), family, variant), ids, targets,
                                  torch.float32, compile_it)
            variant += (" compiled" if compile_it else "") + (f" T {T}" if T != sizes["T"] else "")
            worst = 0.0
            for name, x in exact.items():
                bound = 4 * rms(plain[name] - x) + 8 * torch.finfo(torch.float32).eps * rms(x)
                err = rms(fast[name] - x)
                worst = max(worst, err / bound if bound > 0 else math.inf * (err > 0))
                if err > bound:
                    failures += 1
                    print(f"FAIL {family}/{variant} {name}: rms error {err:.3e} > bound {bound:.3e}")
            print(f"{family}/{variant}: loss {fast['loss'].item():.6f} (plain "
                  f"{plain['loss'].item():.6f}); worst error/bound {worst:.2f} over "
                  f"{len(exact)} tensors")
        FORMS[family][0].block = 512
    return failures


def add_anchor_arguments(p, models, variant_help, threads, threads_help, check_help):
    """The options every anchor script shares (this one and jax_models.py)."""
    p.add_argument("--config", choices=list(CONFIGS), default="S")
    p.add_argument("--model", choices=list(models), default="attention")
    p.add_argument("--variant", help=variant_help)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--threads", type=int, default=threads, help=threads_help)
    p.add_argument("--json", action="store_true", help="one JSON line instead of a sentence")
    p.add_argument("--check", action="store_true", help=check_help)


def run_anchor(a, check_forms, bench_run, sentence):
    """The end of every anchor script: --check (exit 1 on a mismatch), or one timed run printed
    as a JSON line (--json) or a sentence."""
    if a.check:
        failures = check_forms()
        print("all forms match" if not failures else f"{failures} tensors out of bounds")
        sys.exit(1 if failures else 0)
    r = bench_run(a)
    print(json.dumps(r) if a.json else sentence(r), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_anchor_arguments(p, FORMS, "tuned form to use instead of the chosen one (see torch_forms.py)", 2,
                         "torch threads; 0 = torch's default", "check the fast forms against the plain one")
    p.add_argument("--form", choices=["tuned", "plain"], default="tuned")
    p.add_argument("--compile", nargs="?", const="forward", choices=["forward", "step"],
                   help="torch.compile the tuned form (PyTorch 2.x): its forward (--compile, as before), or the "
                        "whole training step, forward, backward, clipping and AdamW (--compile step)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: the forward and loss under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    p.add_argument("--compile-mode", default="default", choices=["default", "max-autotune-no-cudagraphs"],
                   help="torch.compile's mode (--compile step)")
    p.add_argument("--micro-batches", type=int, default=1,
                   help="each step's batch in K forward and backward passes, gradients summed (K divides the batch)")
    a = p.parse_args()
    if a.compile and (a.form != "tuned" or not hasattr(torch, "compile")):
        p.error(f"--compile needs --form tuned and PyTorch 2.x (this is {torch.__version__})")
    if a.micro_batches < 1 or CONFIGS[a.config][4] % a.micro_batches:
        p.error(f"--micro-batches {a.micro_batches} does not divide {a.config}'s batch of {CONFIGS[a.config][4]}")
    compiling = lambda r: f", compile {r['compile_s']} s" if a.compile else ""  # noqa: E731
    run_anchor(a, lambda: check(max(1, a.threads)), bench,
               lambda r: f"{r['config']} {r['model']} {r['form']} ({r['variant']}): {r['ms_median']:.1f} "
                         f"ms/step{compiling(r)}, {r['tokens_per_s']:.0f} tokens/s, {r['params']} params, "
                         f"peak RSS {r['peak_rss_mib']} MiB, CPU {r['cpu_ms_median']:.1f} ms/step")


if __name__ == "__main__":
    main()
