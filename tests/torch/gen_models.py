"""PyTorch references for the language models of models/ (tests/torch/models.py builds them):
writes <outdir>/models.h5.

One group per configuration, /<case>:
  attrs  every ModelConfig field (strings; ints; booleans as 0/1), loss (the mean
         cross-entropy, float64 of torch's float32), lr, weight_decay, steps
  model/<name>   the initial state_dict (models.py's init from a fixed seed, then the norms'
                 weights and biases (DeltaNet's o_norm too) nudged off 1 and 0 so that a norm
                 mix-up shows, and the
                 embeddings redrawn from N(0, 0.3^2) so that tied logits are of order 1 rather
                 than 0.02); attr decay
                 (0: in AdamW's weight_decay=0 group)
  ids, targets   int32 [B, T]; a few targets are -100 (ignored by the loss)
  logits         [B, T, V]
  grad/<name>    d loss / d parameter at the initial weights
  after/<name>   the parameters after STEPS AdamW updates (each: forward, loss, backward, step)
  logits64, attr loss64, grad64/<name>, after64/<name>
                 the same computation in float64 from the same initial weights: the exact
                 result to float32 precision, against which torch's own float32 error is known
  path64/<k>/<name>  the float64 run's parameters after update k, for 0 < k < steps
  denom64/<name> per element, the smallest of AdamW's denominators sqrt(v_hat) + eps over the
                 float64 run's updates (from torch's exp_avg_sq; 0 where the gradient is zero at
                 every update: unused embedding rows and positions). Adam divides the gradient
                 by it, so where it is small, float32 rounding of the gradient moves the
                 parameter visibly: the C++ test reads which elements those are from it

Sizes: V=17, d=32, 2 layers, 4 heads, B=2, T=24 (the attn_window_* cases' windows, 2 to 7, are
shorter than T; a window of 1, which test_parity_attention covers, makes every softmax row a
single 1: torch's q and k gradients are then exactly 0, ours float32 rounding of 0, and Adam
would turn that rounding into full-size steps). Key biases are only enabled with RoPE: without
it softmax is invariant to them, their gradient is pure rounding noise, and Adam would turn that
noise into full-size steps. The identity feature map's normaliser q . sum(k) has no sign: at
random weights it comes within 1e-3 of zero relative to its terms, where no float32 computation
(torch's included) settles the result, so that case sets the query and key biases to
IDENTITY_QK_BIAS, which keeps every normaliser positive through the steps.

Usage: /usr/bin/python3 tests/torch/gen_models.py <outdir>
"""
import copy
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import DEFAULTS, LanguageModel, no_weight_decay  # noqa: E402

torch.set_num_threads(1)  # a fixed summation order: the file is the same on every run

BASE = dict(vocab=17, d_model=32, n_layers=2, n_heads=4, max_seq_len=48)
B, T = 2, 24
LR, WEIGHT_DECAY, STEPS = 1e-2, 0.1, 3
BETA2, EPS = 0.999, 1e-8  # torch's AdamW defaults, as framework/optim/optim.hpp's
IDENTITY_QK_BIAS = 1.0

CASES = {
    "attn_none": dict(family="attention", pos="none"),
    "attn_sinusoidal": dict(family="attention", pos="sinusoidal"),
    "attn_learned": dict(family="attention", pos="learned"),
    "attn_rope_bias": dict(family="attention", pos="rope", bias=True),
    "attn_alibi": dict(family="attention", pos="alibi"),
    "attn_post_norm": dict(family="attention", pos="sinusoidal", norm="post"),
    "attn_no_mlp": dict(family="attention", pos="rope", mlp="none"),
    "attn_tied": dict(family="attention", pos="learned", tie_embeddings=True),
    # Sliding windows shorter than T, with every position encoding.
    "attn_window_none": dict(family="attention", pos="none", window=4),
    "attn_window_sinusoidal": dict(family="attention", pos="sinusoidal", window=7, norm="post"),
    "attn_window_learned": dict(family="attention", pos="learned", window=2),
    "attn_window_rope": dict(family="attention", pos="rope", window=5, bias=True),
    "attn_window_alibi": dict(family="attention", pos="alibi", window=3, mlp="none"),
    "linear_elu": dict(family="linear", feature_map="elu", bias=True),
    "linear_relu": dict(family="linear", feature_map="relu"),
    "linear_identity": dict(family="linear", feature_map="identity", bias=True),
    "linear_rope": dict(family="linear", feature_map="elu", pos="rope"),
    "linear_post_tied": dict(family="linear", norm="post", mlp="none", tie_embeddings=True),
    # Based (Arora et al. 2024): short convolutions on q, k, v; the Taylor feature map, its F
    # other than the head width 8 in linear_taylor (q and k project to 4 x 4).
    "attn_short_conv": dict(family="attention", pos="rope", short_conv=3),
    "linear_short_conv": dict(family="linear", feature_map="elu", short_conv=4, bias=True),
    "linear_taylor": dict(family="linear", feature_map="taylor", feature_dim=4, pos="sinusoidal"),
    "based": dict(family="linear", feature_map="taylor", feature_dim=8, short_conv=3, mlp="none",
                  tie_embeddings=True),
    "mamba": dict(family="mamba", mlp="none"),
    "mamba_mlp": dict(family="mamba", mlp="gelu"),
    "mamba_lti": dict(family="mamba", mlp="none", ssm_selective=False),
    # Hybrid stacks: layer i is mixers[i mod n], each with its family's norm and options.
    "hybrid_mamba_attention": dict(family="mamba", mixers="mamba,attention", mlp="none", tie_embeddings=True),
    "hybrid_linear_attention_window": dict(family="linear", mixers="linear,attention", n_layers=3, pos="learned",
                                           window=4),
    # DeltaNet and Gated DeltaNet (models/deltanet.hpp) at the papers' defaults, and the switches
    # the papers ablate: no short convolutions, no L2 norm, another width, each gate off.
    "deltanet": dict(family="deltanet"),
    "deltanet_ablated": dict(family="deltanet", conv_size=0, l2_norm=False, pos="sinusoidal", norm="post"),
    "gated_deltanet": dict(family="gated_deltanet", mlp="none", tie_embeddings=True),
    "gated_deltanet_no_state_gate": dict(family="gated_deltanet", state_gate=False, conv_size=2, pos="learned"),
    "gated_deltanet_no_output_gate": dict(family="gated_deltanet", output_gate=False, conv_size=0),
    "hybrid_gated_deltanet_attention": dict(family="gated_deltanet", mixers="gated_deltanet,attention", pos="learned"),
    # Mamba 2 (models/mamba2.hpp): 4 heads of 16 sharing B and C; 8 heads of 8 in two groups
    # (the gated norm then per group), another conv width; a hybrid stack.
    "mamba2": dict(family="mamba2", mlp="none", head_dim=16, state_size=8),
    "mamba2_groups": dict(family="mamba2", head_dim=8, state_size=16, n_groups=2, d_conv=3, norm="post"),
    "hybrid_mamba2_attention": dict(family="mamba2", mixers="mamba2,attention", head_dim=16, state_size=8,
                                    tie_embeddings=True),
}


def write_case(f, name, overrides, seed):
    cfg = dict(DEFAULTS, **dict(BASE, **overrides))
    torch.manual_seed(seed)
    model = LanguageModel(cfg)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.split(".")[-2].startswith("norm") or pname.split(".")[-2].endswith("_norm"):
                p.add_(0.1 * torch.randn_like(p))
            if pname.split(".")[-2].endswith("embedding"):
                p.normal_(0.0, 0.3)
            if cfg["feature_map"] == "identity" and pname.endswith(("q_proj.bias", "k_proj.bias")):
                p.fill_(IDENTITY_QK_BIAS)
    ids = torch.randint(0, cfg["vocab"], (B, T))
    targets = torch.randint(0, cfg["vocab"], (B, T))
    targets[0, :3] = -100

    g = f.create_group(name)
    for key, value in cfg.items():
        g.attrs[key] = int(value) if isinstance(value, bool) else value
    g.attrs["lr"], g.attrs["weight_decay"], g.attrs["steps"] = LR, WEIGHT_DECAY, STEPS
    for pname, p in model.state_dict().items():
        d = g.create_dataset(f"model/{pname}", data=p.numpy())
        d.attrs["decay"] = 0 if no_weight_decay(pname) else 1
    g.create_dataset("ids", data=ids.numpy().astype(np.int32))
    g.create_dataset("targets", data=targets.numpy().astype(np.int32))

    model64 = copy.deepcopy(model).double()
    for suffix, m in (("", model), ("64", model64)):
        logits, loss, grads, path, denoms = train(m, ids, targets, cfg["vocab"])
        g.create_dataset("logits" + suffix, data=logits)
        g.attrs["loss" + suffix] = loss
        for pname in grads:
            g.create_dataset(f"grad{suffix}/{pname}", data=grads[pname])
            g.create_dataset(f"after{suffix}/{pname}", data=path[-1][pname])
        if suffix == "64":
            for pname in grads:
                g.create_dataset(f"denom64/{pname}", data=denoms[pname])
            for k in range(1, STEPS):
                for pname in grads:
                    g.create_dataset(f"path64/{k}/{pname}", data=path[k - 1][pname])


def train(model, ids, targets, vocab):
    """STEPS AdamW updates; returns the first step's logits, loss and gradients, the
    parameters after each update and each element's smallest Adam denominator over the
    updates (numpy, in the model's dtype)."""
    params = dict(model.named_parameters())
    groups = [
        dict(params=[p for n, p in params.items() if not no_weight_decay(n)], weight_decay=WEIGHT_DECAY),
        dict(params=[p for n, p in params.items() if no_weight_decay(n)], weight_decay=0.0),
    ]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, BETA2), eps=EPS, foreach=False)
    denoms = {n: torch.full_like(p, float("inf")) for n, p in params.items()}
    path = []
    for step in range(STEPS):
        opt.zero_grad()
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        if step == 0:
            first = (logits.detach().numpy(), float(loss.item()),
                     {n: p.grad.numpy().copy() for n, p in params.items()})
        opt.step()
        path.append({n: p.detach().numpy().copy() for n, p in params.items()})
        for n, p in params.items():  # torch's update: exp_avg / (sqrt(v / (1 - beta2^t)) + eps)
            v_hat = opt.state[p]["exp_avg_sq"] / (1 - BETA2 ** (step + 1))
            step_denom = torch.where(v_hat > 0, v_hat.sqrt() + EPS, torch.full_like(v_hat, float("inf")))
            denoms[n] = torch.minimum(denoms[n], step_denom)
    denoms = {n: torch.where(d.isinf(), torch.zeros_like(d), d).numpy() for n, d in denoms.items()}
    return first + (path, denoms)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "models.h5")
    with h5py.File(path + ".tmp", "w") as f:
        for seed, (name, overrides) in enumerate(CASES.items()):
            write_case(f, name, overrides, seed)
    os.replace(path + ".tmp", path)
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
