"""PyTorch references for causal linear attention: writes <outdir>/linear_attention.h5.

Layout as in framework/kernels/linear_attention.hpp: q, k [B, T, H, Dk], v [B, T, H, Dv];
  out_t = (qn_t^T sum_{s<=t} kn_s v_s^T) / (qd_t . sum_{s<=t} kd_s + eps),
where (qn, kn) = (q, k) and (qd, kd) = (q_den, k_den) when given, else (q, k).

One group per case, /<case>:
  attrs  eps, separate_den (0/1)
  q, k, v [, q_den, k_den]   float32 inputs
  gout                       a random upstream gradient
  out, g_<input>             torch's quadratic form: the [B, H, T, T] kernel matrix, masked
  out_cumsum, g_<input>_cumsum   the same by prefix sums of the [B, T, H, Dk, Dv] outer products,
                             an independent second computation
  out64, g_<input>64         the quadratic form in float64 from the same inputs: the exact
                             result to float32 precision, against which each torch form's own
                             float32 error is known
Gradients are d(sum(out * gout)) / d input from torch autograd. Inputs are float32.

Usage: /usr/bin/python3 tests/torch/gen_linear_attention.py <outdir>
"""
import os
import sys

import h5py
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)  # a fixed summation order: the file is the same on every run


def quadratic(q, k, v, qd, kd, eps):
    heads = lambda x: x.transpose(1, 2)  # [B, H, T, D]
    A = torch.tril(heads(q) @ heads(k).transpose(-1, -2))
    Ad = torch.tril(heads(qd) @ heads(kd).transpose(-1, -2))
    return ((A @ heads(v)) / (Ad.sum(-1, keepdim=True) + eps)).transpose(1, 2)


def cumsum(q, k, v, qd, kd, eps):
    S = torch.cumsum(k.unsqueeze(-1) * v.unsqueeze(-2), dim=1)  # [B, T, H, Dk, Dv]
    num = torch.einsum("bthd,bthde->bthe", q, S)
    den = (qd * torch.cumsum(kd, dim=1)).sum(-1, keepdim=True) + eps
    return num / den


def features(*shape):
    """Positive features as a model makes them: elu(x) + 1."""
    return F.elu(torch.randn(shape)) + 1


def write_case(f, name, B, T, H, Dk, Dv, separate_den, eps, scale=1.0):
    if separate_den:  # signed numerator features (RoPE-rotated), positive normaliser ones
        inputs = {"q": torch.randn(B, T, H, Dk), "k": torch.randn(B, T, H, Dk),
                  "v": torch.randn(B, T, H, Dv),
                  "q_den": scale * features(B, T, H, Dk), "k_den": scale * features(B, T, H, Dk)}
    else:
        inputs = {"q": scale * features(B, T, H, Dk), "k": scale * features(B, T, H, Dk),
                  "v": torch.randn(B, T, H, Dv)}
    gout = torch.randn(B, T, H, Dv)
    g = f.create_group(name)
    g.attrs["eps"] = eps
    g.attrs["separate_den"] = int(separate_den)
    g.create_dataset("gout", data=gout.numpy())
    for key, x in inputs.items():
        g.create_dataset(key, data=x.numpy())
    outs = {}
    for suffix, form, dtype in (("", quadratic, torch.float32), ("_cumsum", cumsum, torch.float32),
                                ("64", quadratic, torch.float64)):
        leaves = {key: x.to(dtype, copy=True).requires_grad_() for key, x in inputs.items()}
        q, k, v = leaves["q"], leaves["k"], leaves["v"]
        out = form(q, k, v, leaves.get("q_den", q), leaves.get("k_den", k), eps)
        out.backward(gout.to(dtype))
        g.create_dataset("out" + suffix, data=out.detach().numpy())
        for key, x in leaves.items():
            g.create_dataset(f"g_{key}{suffix}", data=x.grad.numpy())
        outs[suffix] = out.detach()
    diff = (outs[""] - outs["_cumsum"]).abs().max().item()
    assert diff < 1e-4, f"{name}: the two torch forms differ by {diff}"


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    with h5py.File(os.path.join(outdir, "linear_attention.h5"), "w") as f:
        write_case(f, "odd_sizes", 2, 37, 3, 12, 20, False, 1e-6)
        write_case(f, "odd_sizes_separate_den", 2, 37, 3, 12, 20, True, 1e-6)
        # Small features: den is O(1), so eps changes the result visibly.
        write_case(f, "large_eps", 2, 9, 2, 4, 5, True, 0.5, scale=0.05)
        write_case(f, "long", 1, 300, 2, 32, 32, False, 1e-6)


if __name__ == "__main__":
    main()
