"""Training throughput of trilemma against PyTorch on the same model and batch shape.

For each family, PyTorch trains tests/torch/models.py's LanguageModel (the same structure,
names and initialisation as models/; attention as softmax(QK^T/sqrt(d))V, linear attention in
its masked quadratic form, Mamba through mamba_ref's sequential scan, whose per-step slices are
taken by unbind: literal slicing would make PyTorch's backward quadratic in T) with AdamW,
and trilemma
runs `trilemma train` with the same sizes, logging every step. Both run side by side in one
process tree, alternated over --rounds rounds; the table gives the median ms per training step
(forward, backward, clipping, AdamW) and the ratio.

Usage: /usr/bin/python3 bench/train_vs_torch.py [--build build] [--threads 2] [--steps 30]
       [--families attention,linear,mamba] [--d-model 64] [--n-layers 2] [--batch 32]
       [--seq-len 128] [--vocab 256] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from models import LanguageModel, no_weight_decay  # noqa: E402


def torch_ms_per_step(family, a):
    torch.manual_seed(0)
    cfg = dict(family=family, vocab=a.vocab, d_model=a.d_model, n_layers=a.n_layers,
               max_seq_len=a.seq_len)
    model = LanguageModel(cfg)
    decay = [p for n, p in model.named_parameters() if not no_weight_decay(n)]
    no_decay = [p for n, p in model.named_parameters() if no_weight_decay(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq_len))
    targets = torch.randint(0, a.vocab, (a.batch, a.seq_len))
    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times[2:])


def trilemma_ms_per_step(family, a):
    with tempfile.TemporaryDirectory() as out:
        cmd = [os.path.join(a.build, "trilemma"), "train", "--model", family, "--task", "mqar",
               "--vocab", str(a.vocab), "--seq-len", str(a.seq_len), "--num-kv-pairs", "8",
               "--d-model", str(a.d_model), "--n-layers", str(a.n_layers), "--batch", str(a.batch),
               "--steps", str(a.steps), "--log-every", "1", "--eval-every", str(10 * a.steps),
               "--eval-batches", "1", "--progress", "none", "--threads", str(a.threads),
               "--out", os.path.join(out, "run")]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(out, "run", "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
    ms = [r["ms_per_step"] for r in rows if r["split"] == "train"]
    return statistics.median(ms[2:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--families", default="attention,linear,mamba")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {a.threads} threads; B={a.batch} T={a.seq_len} d={a.d_model} "
          f"layers={a.n_layers} V={a.vocab}; median ms per training step over {a.steps - 2} steps, "
          f"median of {a.rounds} alternating rounds", flush=True)
    print("| model | trilemma ms/step | PyTorch ms/step | speed-up | trilemma tokens/s |")
    print("|---|---|---|---|---|")
    for family in a.families.split(","):
        ours, theirs = [], []
        for _ in range(a.rounds):
            ours.append(trilemma_ms_per_step(family, a))
            theirs.append(torch_ms_per_step(family, a))
        o, t = statistics.median(ours), statistics.median(theirs)
        print(f"| {family} | {o:.2f} | {t:.2f} | {t / o:.1f}x | {a.batch * a.seq_len / o * 1e3:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
