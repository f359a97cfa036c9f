"""PyTorch references for framework/optim/optim.hpp: writes <outdir>/optim.h5.

A few parameters of different shapes (one above the optimizers' one-thread threshold of
2^15 elements, odd sizes for the vector tails) take STEPS updates from a fixed sequence of
gradients, under each optimizer run below (torch.optim with foreach=False).

  attrs  steps, names      number of updates; parameter names in order, "a,b,c"
  init/<name>              initial values; attr decay (0: in the weight_decay=0 param group)
  grads/<k>/<name>         the gradient of update k (absent: p.grad is None at update k)
  <run>                    attrs: optimizer ("adamw" | "sgd") and its hyperparameters,
                           max_norm (clip_grad_norm_ before every update; 0: no clipping)
  <run>/<k>/<name>         the parameter after update k
  <run>/clipped/<k>        clipped runs only; attrs: norm, clip_grad_norm_'s returned norm
                           (torch sums the squares in float32), and norm64, the same norm
                           summed in float64
  <run>/clipped/<k>/<name> the gradient after clipping at update k
  <run>64/...              the same run in float64 from the same initial values and gradients:
                           <run>64/<k>/<name> and <run>64/clipped/<k>/<name>, the exact results
                           to float32 precision

Gradient scales vary per step so that clipping applies at some steps and not at others.
"block.bias" has no gradient at update 0 (skipped: its own step count lags the others) and
"norm.weight" an all-zero gradient at update 2.

Usage: /usr/bin/python3 tests/torch/gen_optim.py <outdir>
"""
import os
import sys

import h5py
import torch

torch.manual_seed(0)
torch.set_num_threads(1)

STEPS = 5
PARAMS = [  # name, shape, decay
    ("embed.weight", (11, 6), True),
    ("block.w", (3, 4, 5), True),
    ("block.bias", (7,), False),
    ("norm.weight", (33,), False),
    ("big.weight", (160, 257), True),
]
GRAD_SCALES = [1.0, 0.05, 3.0, 0.4, 10.0]
RUNS = {
    "adamw": dict(optimizer="adamw", lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8,
                  weight_decay=0.1, max_norm=0.0),
    "adamw_clip": dict(optimizer="adamw", lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8,
                       weight_decay=0.1, max_norm=100.0),
    "sgd": dict(optimizer="sgd", lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-2,
                nesterov=0, max_norm=0.0),
    "sgd_nesterov": dict(optimizer="sgd", lr=0.05, momentum=0.9, dampening=0.0,
                         weight_decay=1e-2, nesterov=1, max_norm=0.0),
}

init = {name: torch.randn(shape) for name, shape, _ in PARAMS}
grads = []  # per step: name -> tensor or None
for k in range(STEPS):
    step_grads = {}
    for name, shape, _ in PARAMS:
        step_grads[name] = torch.randn(shape) * GRAD_SCALES[k]
    step_grads["block.bias"] = None if k == 0 else step_grads["block.bias"]
    if k == 2:
        step_grads["norm.weight"] = torch.zeros(PARAMS[3][1])
    grads.append(step_grads)


def make_optimizer(cfg, params):
    decay = [params[name] for name, _, d in PARAMS if d]
    no_decay = [params[name] for name, _, d in PARAMS if not d]
    groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
    if cfg["optimizer"] == "adamw":
        return torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                                 eps=cfg["eps"], weight_decay=cfg["weight_decay"], foreach=False)
    return torch.optim.SGD(groups, lr=cfg["lr"], momentum=cfg["momentum"],
                           dampening=cfg["dampening"], weight_decay=cfg["weight_decay"],
                           nesterov=bool(cfg["nesterov"]), foreach=False)


def write(f, path, t):
    f.create_dataset(path, data=t.detach().numpy())


def run_optimizer(cfg, dtype):
    """STEPS updates of one run in dtype; per update: the norm clip_grad_norm_ returned (or
    None), the clipped gradients and the parameters after the update."""
    params = {name: init[name].to(dtype, copy=True).requires_grad_() for name, _, _ in PARAMS}
    opt = make_optimizer(cfg, params)
    updates = []
    for step_grads in grads:
        for name, p in params.items():
            g = step_grads[name]
            p.grad = None if g is None else g.to(dtype, copy=True)
        norm = None
        if cfg["max_norm"] > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(list(params.values()), cfg["max_norm"]))
        clipped = {name: p.grad.clone() for name, p in params.items() if p.grad is not None}
        opt.step()
        updates.append((norm, clipped, {name: p.detach().clone() for name, p in params.items()}))
    return updates


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    with h5py.File(os.path.join(outdir, "optim.h5"), "w") as f:
        f.attrs["steps"] = STEPS
        f.attrs["names"] = ",".join(name for name, _, _ in PARAMS)
        for name, _, decay in PARAMS:
            write(f, f"init/{name}", init[name])
            f[f"init/{name}"].attrs["decay"] = int(decay)
        for k, step_grads in enumerate(grads):
            for name, g in step_grads.items():
                if g is not None:
                    write(f, f"grads/{k}/{name}", g)

        for run, cfg in RUNS.items():
            group = f.create_group(run)
            for key, value in cfg.items():
                group.attrs[key] = value
            for suffix, dtype in (("", torch.float32), ("64", torch.float64)):
                for k, (norm, clipped, after) in enumerate(run_optimizer(cfg, dtype)):
                    for name, p in after.items():
                        write(f, f"{run}{suffix}/{k}/{name}", p)
                    if norm is None:
                        continue
                    for name, g in clipped.items():
                        write(f, f"{run}{suffix}/clipped/{k}/{name}", g)
                    f[f"{run}/clipped/{k}"].attrs["norm" + suffix] = norm
            print(f"{run}: {STEPS} steps")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gen_optim.py <outdir>")
    main(sys.argv[1])
