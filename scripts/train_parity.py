"""Training parity: trilemma's whole training path against its PyTorch twin, step by step.

For each model family, trilemma trains a small model (`trilemma train ... --log-every 1`), and
tests/torch/models.py's LanguageModel trains from the same initial weights (the run's step-0
checkpoint, `--stop-at 0`) on the same batches (`trilemma data dump`, the training stream as the
trainer draws it: step s trains on batch s) with the same optimizer (torch.optim.AdamW with
models.no_weight_decay's groups: norms, biases, embeddings, Mamba's A_log, D, dt_bias, B), the
same schedule (linear warm-up, then cosine to min-lr) and the same clipping
(torch.nn.utils.clip_grad_norm_), once in float32 and once in float64. The per-step training
losses are compared with trilemma's metrics.jsonl.

Criterion. Float32 trajectories drift from the exact one: every step's rounding error is carried
on and amplified by the training dynamics. Torch's own float32 run shows how far that drift goes
on this model and these batches, so the criterion is relative to it: over each window of
--window steps, the RMS of (trilemma - torch64) must be at most --multiple times the RMS of
(torch32 - torch64) plus a floor of --floor times the RMS of the torch64 loss (1e-6: some 16
float32 ulps of a loss near 4, for a window where torch's float32 run happens to stay on the
float64 one; a floor of 1e-4 would dominate the bound and let real differences through). Both
float32 runs start from the same weights and are amplified by the same dynamics, so the ratio of
their drifts is set by the ratio of their per-step rounding errors, which stays roughly constant
along the run.
The per-op and whole-model parity suites measure trilemma's per-step errors within a few times
torch's own float32 error (docs/TESTING.md); 10x leaves room for that while still failing on any
real difference: one wrong weight-decay group, a schedule off by one step or a clipping
difference moves the loss by far more than float32 rounding does (--self-check shows it: a
schedule one step late and weight decay on every parameter each exceed the bound 100x or more).

Prints one table per family (per window: steps, mean torch64 loss, both RMS differences, their
ratio, the bound), the first and final losses and the largest relative differences; exit code 0
when every window of every family passes, 1 otherwise or on any error.

Over a mix of pair counts (--num-kv-pairs 2,4,8: row i of a batch holds the (i mod 3)-th K) the
twin trains on the same mixed batches, and the finished run is also evaluated both ways: trilemma
eval's accuracy per K (acc@K=k) against the twin's on the same weights and the same test rows
(`data dump --split eval`), the twin grouping each row by its own count of scored positions. The
two may differ only where an argmax is a near-tie (top two logits within 1e-4 in the twin).

--precision bf16: trilemma trains with bf16 GEMM inputs. Its drift from torch float64 is far
above float32's, so the yardstick is PyTorch's own bf16 training, the twin under
torch.autocast("cpu", dtype=torch.bfloat16): the bound is --multiple times autocast's drift. The
run is repeated in fp32 from the same config, and the four drifts (trilemma bf16 and fp32, torch
autocast and fp32) are printed side by side: the gap bf16 costs. On a CPU without native bf16 the
script exits with 77 (a test skipped, not passed).

Usage: /usr/bin/python3 scripts/train_parity.py [--trilemma build/trilemma] [--steps 300]
       [--window 50] [--families attention,linear,mamba] [--threads 1] [--self-check]
       [--num-kv-pairs 4] [--precision fp32|bf16]
"""
import argparse
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# The run: mqar with 4 pairs (--num-kv-pairs) in rows of 64 tokens, vocabulary 128; 2 layers of
# width 32 with a head of its own; batches of 16 rows. AdamW (beta2 0.999) with the default weight
# decay (0.1) and clipping (1.0); warm-up over the first tenth of the steps, cosine decay to a
# tenth of the peak learning rate: a rate that changes at every step, so a schedule a step late
# shows (--self-check). Stated here, not left to the defaults (which are the experiments' recipe).
TASK = ["--task", "mqar", "--seq-len", "64", "--vocab", "128"]
MODEL = ["--d-model", "32", "--n-layers", "2", "--tie-embeddings", "0", "--rescale-residual", "0"]
OPTIM = ["--beta2", "0.999", "--schedule", "cosine"]
BATCH, LR = 16, 3e-3


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trilemma", default=os.path.join(HERE, "..", "build", "trilemma"), help="the trilemma binary")
    p.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    p.add_argument("--window", type=int, default=50, help="steps per window of the criterion (default 50)")
    p.add_argument("--families", default="attention,linear,mamba", help="comma-separated model families")
    p.add_argument("--multiple", type=float, default=10.0, help="allowed multiple of torch's own float32 drift")
    p.add_argument("--floor", type=float, default=1e-6, help="allowed RMS difference relative to the loss")
    p.add_argument("--threads", type=int, default=1, help="threads for trilemma and torch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--self-check", action="store_true",
                   help="also train torch float32 with deliberate mistakes (the schedule one step late, weight "
                   "decay on every parameter) and expect the criterion to fail on each")
    p.add_argument("--keep", metavar="DIR", help="keep the runs and the batches in DIR (default: a temporary folder)")
    p.add_argument("--num-kv-pairs", default="4", help="mqar's K, or a mix of them (2,4,8); default 4")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="trilemma's --precision; bf16: the reference drift is torch.autocast's in bf16, and "
                        "trilemma's fp32 drift is printed beside it")
    a = p.parse_args()
    if a.steps < 2 or a.window < 1 or a.window > a.steps:
        p.error(f"--steps {a.steps} --window {a.window}: need steps >= 2 and 1 <= window <= steps")
    if not os.access(a.trilemma, os.X_OK):
        p.error(f"--trilemma {a.trilemma}: not an executable (build first: scripts/build.sh)")
    return a


ARGS = parse_args() if __name__ == "__main__" else None  # a bad command line fails before torch loads

from checkpoint_torch import dataset, fail, load_checkpoint, open_h5, text  # noqa: E402  (imports torch)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
from models import no_weight_decay  # noqa: E402


def trilemma(binary, args):
    r = subprocess.run([binary] + args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"trilemma {' '.join(args[:2])}... exited with {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def lr_at(step, h):
    """framework/optim/optim_schedule.cpp's LrSchedule::lr_at (docs/ARCHITECTURE.md, "Optimizers")."""
    warmup, total = min(h["warmup"], h["steps"]), h["steps"]
    if step < warmup:
        return h["lr"] * (step + 1) / warmup
    if h["schedule"] == "constant":
        return h["lr"]
    if h["schedule"] == "wsd":
        start = max(warmup, total - math.floor(h["decay-fraction"] * total + 0.5))
        if step < start:
            return h["lr"]
        return h["min-lr"] + (h["lr"] - h["min-lr"]) * max(total - step, 0) / (total - start)
    progress = min(max((step - warmup) / max(1, total - warmup), 0.0), 1.0)
    return h["min-lr"] + 0.5 * (h["lr"] - h["min-lr"]) * (1.0 + math.cos(math.pi * progress))


def hyperparameters(config, path):
    if config.get("optimizer") != "adamw":
        fail(f"{path}: optimizer '{config.get('optimizer')}' (this script follows adamw)")
    h = {k: float(config[k]) for k in ("lr", "beta1", "beta2", "eps", "weight-decay", "clip", "min-lr")}
    h.update({k: int(config[k]) for k in ("warmup", "steps", "batch")})
    h["schedule"] = config["schedule"]
    h["decay-fraction"] = float(config.get("decay-fraction", 0.2))
    return h


# Mistakes --self-check makes on purpose; each must fail the criterion.
MISTAKES = {"the schedule one step late": "late", "weight decay on every parameter": "decay_all"}


def train_torch(model, batches, h, dtype, mistake=None, autocast=False):
    """The twin's training losses, one per step, in dtype (the weights converted from float32);
    autocast: the forward (and so its backward) under torch.autocast("cpu", dtype=torch.bfloat16)."""
    model = copy.deepcopy(model).to(dtype).train()
    params = dict(model.named_parameters())
    no_decay = (lambda n: False) if mistake == "decay_all" else no_weight_decay
    groups = [dict(params=[p for n, p in params.items() if not no_decay(n)], weight_decay=h["weight-decay"]),
              dict(params=[p for n, p in params.items() if no_decay(n)], weight_decay=0.0)]
    opt = torch.optim.AdamW(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"], foreach=False)
    inputs, targets = batches
    losses = []
    for step in range(len(inputs)):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(inputs[step])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[step].reshape(-1), ignore_index=-100)
        loss.backward()
        if h["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), h["clip"])
        for g in opt.param_groups:
            g["lr"] = lr_at(max(0, step - 1) if mistake == "late" else step, h)
        opt.step()
        losses.append(float(loss.item()))
    return np.array(losses)


def rms(x):
    return float(np.sqrt(np.mean(np.square(x))))


def windows(ours, t32, t64, a):
    """Per window: (first step, last step, mean t64, rms ours-t64, rms t32-t64, bound, ok)."""
    rows = []
    for start in range(0, len(t64), a.window):
        s = slice(start, min(start + a.window, len(t64)))
        r_ours, r_32 = rms(ours[s] - t64[s]), rms(t32[s] - t64[s])
        bound = a.multiple * r_32 + a.floor * rms(t64[s])
        rows.append((start + 1, s.stop, float(np.mean(t64[s])), r_ours, r_32, bound, r_ours <= bound))
    return rows


def print_table(family, rows, reference="torch32-t64"):
    print(f"\n{family}: per window of steps, RMS of the training-loss differences against torch float64")
    print(f"   steps    loss(t64)   trilemma-t64   {reference:>12s}   ratio        bound  ok")
    for first, last, mean, r_ours, r_32, bound, ok in rows:
        ratio = r_ours / r_32 if r_32 > 0 else float("inf")
        print(f"{first:4d}-{last:<4d}  {mean:9.5f}  {r_ours:13.3e}  {r_32:13.3e}  {ratio:6.2f}  {bound:11.3e}  "
              f"{'ok' if ok else 'FAILED'}")


def metrics_losses(run_dir, steps):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    train = {r["step"]: r for r in rows if r["split"] == "train"}
    if sorted(train) != list(range(1, steps + 1)):
        fail(f"{run_dir}/metrics.jsonl: training rows are not steps 1..{steps} (train with --log-every 1)")
    return np.array([train[s]["loss"] for s in range(1, steps + 1)]), np.array(
        [train[s]["grad_norm"] for s in range(1, steps + 1)])


def read_batches(path, config, h):
    with open_h5(path) as f:
        inputs, targets = dataset(f, "inputs"), dataset(f, "targets")
        dumped = dict(line.split(" = ", 1) for line in text(f.attrs["task_config"]).splitlines())
    for key, value in dumped.items():  # the dump's task is the run's task
        if config.get(key) != value:
            fail(f"{path}: task option {key} = {value} differs from the run's {config.get(key)}")
    if inputs.shape[0] < h["steps"] or inputs.shape[1] != h["batch"]:
        fail(f"{path}: /inputs {inputs.shape} does not hold {h['steps']} batches of {h['batch']} rows")
    return (torch.from_numpy(inputs[: h["steps"]].astype(np.int64)),
            torch.from_numpy(targets[: h["steps"]].astype(np.int64)))


def check_family(family, a, work):
    run_dir = os.path.join(work, family)
    common = ["--threads", str(a.threads), "--progress", "none"]
    # A step-0 pause writes the initial weights to last.h5; resuming completes the run exactly
    # as an uninterrupted one (docs/USAGE.md, "Training runs"; tested in test_train_cli).
    task = TASK + ["--num-kv-pairs", a.num_kv_pairs]
    trilemma(a.trilemma, ["train", "--model", family] + task + MODEL + OPTIM + [
        "--batch", str(BATCH), "--steps", str(a.steps), "--lr", str(LR), "--warmup", str(max(1, a.steps // 10)),
        "--min-lr", str(LR / 10), "--log-every", "1", "--eval-every", str(a.steps), "--eval-batches", "1",
        "--seed", str(a.seed), "--out", run_dir, "--stop-at", "0", "--precision", a.precision] + common)
    init = os.path.join(work, f"{family}-init.h5")
    shutil.copyfile(os.path.join(run_dir, "last.h5"), init)
    trilemma(a.trilemma, ["train", "--resume", run_dir] + common)

    model, _, config = load_checkpoint(init)
    h = hyperparameters(config, init)
    batches_path = os.path.join(work, "batches.h5")
    if not os.path.exists(batches_path):  # the task and seed are the same for every family
        trilemma(a.trilemma, ["data", "dump"] + task + ["--seed", str(a.seed), "--batches", str(a.steps),
                                                        "--rows", str(h["batch"]), "--out", batches_path])
    batches = read_batches(batches_path, config, h)

    ours, grad_norms = metrics_losses(run_dir, h["steps"])
    t32 = train_torch(model, batches, h, torch.float32)
    t64 = train_torch(model, batches, h, torch.float64)
    if a.precision == "bf16":
        # bf16 drifts by far more than float32: its yardstick is PyTorch's own bf16, autocast.
        reference = train_torch(model, batches, h, torch.float32, autocast=True)
        ours32 = os.path.join(work, family + "-fp32")
        trilemma(a.trilemma, ["train", "--config", os.path.join(run_dir, "config.ini"), "--precision", "fp32",
                              "--out", ours32] + common)
        fp32, _ = metrics_losses(ours32, h["steps"])
        print(f"\n{family}: RMS of the training-loss difference against torch float64 over all {h['steps']} steps: "
              f"trilemma bf16 {rms(ours - t64):.3e}, torch autocast bf16 {rms(reference - t64):.3e}, "
              f"trilemma fp32 {rms(fp32 - t64):.3e}, torch fp32 {rms(t32 - t64):.3e}")
    else:
        reference = t32
    rows = windows(ours, reference, t64, a)
    print_table(family, rows, "autocast-t64" if a.precision == "bf16" else "torch32-t64")
    clipped = int(np.sum(grad_norms > h["clip"])) if h["clip"] > 0 else 0
    rel = lambda x: float(np.max(np.abs(x - t64) / np.abs(t64)))  # noqa: E731
    print(f"step 1 loss: trilemma {ours[0]:.7f}, torch32 {t32[0]:.7f}, torch64 {t64[0]:.7f}; "
          f"final loss: trilemma {ours[-1]:.5f}, torch32 {t32[-1]:.5f}, torch64 {t64[-1]:.5f}")
    print(f"max relative difference to torch64: trilemma {rel(ours):.2e}, torch32 {rel(t32):.2e}; "
          f"clipping active at {clipped}/{h['steps']} steps")
    ok = all(r[-1] for r in rows)
    if "," in a.num_kv_pairs:
        ok = check_accuracy_per_k(a, run_dir, task, work) and ok
    for name, mistake in MISTAKES.items() if a.self_check else ():  # each must fail the same criterion
        wrong = windows(train_torch(model, batches, h, torch.float32, mistake), t32, t64, a)
        caught = not all(r[-1] for r in wrong)
        print(f"self-check: torch float32 with {name} {'fails' if caught else 'PASSES (too loose)'}: "
              f"RMS difference up to {max(r[3] / r[5] for r in wrong):.1f}x the bound")
        ok = ok and caught
    return ok


def check_accuracy_per_k(a, run_dir, task, work):
    """trilemma eval's acc@K=k of the finished run against the twin's on the same weights and rows."""
    checkpoint = os.path.join(run_dir, "last.h5")
    batches, rows = 4, 32
    ours = json.loads(trilemma(a.trilemma, ["eval", checkpoint, "--json", "--batches", str(batches), "--batch", str(rows),
                                            "--threads", str(a.threads)]))["results"][0]
    dump = os.path.join(work, "eval_batches.h5")
    trilemma(a.trilemma, ["data", "dump"] + task + ["--seed", str(a.seed), "--split", "eval", "--batches", str(batches),
                                                    "--rows", str(rows), "--out", dump])
    model, _, _ = load_checkpoint(checkpoint)
    model.eval()
    with open_h5(dump) as f:
        inputs, targets = dataset(f, "inputs"), dataset(f, "targets")
    right, total, near_ties = {}, {}, 0
    with torch.no_grad():
        for b in range(inputs.shape[0]):
            logits = model(torch.from_numpy(inputs[b].astype(np.int64))).double()
            y = torch.from_numpy(targets[b].astype(np.int64))
            for r in range(y.shape[0]):
                scored = (y[r] != -100).nonzero().flatten()
                k = len(scored)  # the row's own count of pairs: each key is queried once
                top2 = torch.topk(logits[r, scored], 2, dim=-1).values
                near_ties += int(((top2[:, 0] - top2[:, 1]) < 1e-4).sum())
                right[k] = right.get(k, 0) + int((logits[r, scored].argmax(-1) == y[r, scored]).sum())
                total[k] = total.get(k, 0) + len(scored)
    extra = ours.get("extra", {})
    differing = 0
    print(f"accuracy per K (eval stream, {batches * rows} rows): trilemma eval against the twin on the run's weights")
    for k in sorted(total):
        mine = extra.get(f"acc@K={k}")
        if mine is None or mine["total"] != total[k]:
            fail(f"{checkpoint}: trilemma eval's acc@K={k} ({mine}) does not score the twin's {total[k]} positions")
        differing += abs(mine["correct"] - right[k])
        print(f"  K={k:<3d} trilemma {mine['correct']}/{total[k]}  twin {right[k]}/{total[k]}")
    if set(f"acc@K={k}" for k in total) != set(x for x in extra if x.startswith("acc@K=")):
        fail(f"{checkpoint}: trilemma's K ({sorted(extra)}) are not the twin's ({sorted(total)})")
    ok = differing <= near_ties
    print(f"  positions counted differently: {differing} (near-ties in the twin: {near_ties}): {'ok' if ok else 'FAILED'}")
    return ok


def main(a):
    torch.set_num_threads(a.threads)
    if a.precision == "bf16":
        bf16 = json.loads(trilemma(a.trilemma, ["info", "--json"]))["bf16"]
        if not bf16.startswith("native"):
            print(f"training parity (bf16): not run, bf16 is {bf16} here")
            return 77
    families = [f for f in a.families.split(",") if f]
    work = a.keep or tempfile.mkdtemp(prefix="train_parity_")
    os.makedirs(work, exist_ok=True)
    print(f"training parity ({a.precision}): {a.steps} steps, mqar (seq-len 64, pairs {a.num_kv_pairs}, vocab 128), d-model 32, 2 layers, "
          f"batch {BATCH}; bound = {a.multiple:g} x RMS({'autocast' if a.precision == 'bf16' else 'torch32'} - torch64) "
          f"+ {a.floor:g} x RMS(loss), "
          f"per window of {a.window} steps")
    try:
        results = {f: check_family(f, a, work) for f in families}
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    failed = [f for f, ok in results.items() if not ok]
    print("\n" + ("training parity: ok" if not failed else f"training parity: FAILED for {', '.join(failed)}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
