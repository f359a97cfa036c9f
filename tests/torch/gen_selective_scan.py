"""PyTorch references for the selective scan: writes <outdir>/selective_scan.h5.

The reference is selective_scan_ref from mamba_ssm (mamba_ssm/ops/selective_scan_interface.py),
ported in mamba_ref.py for real inputs: channels-first as there (u, delta, z [B, E, T]; B, C
[B, N, T] or [E, N]). The C++ kernels are channels-last, so every [B, E, T] / [B, N, T] tensor
is transposed to [B, T, E] / [B, T, N] when written (and gradients likewise).

One group per case, /<case>:
  attrs  var_B, var_C      1 when B / C are selective [B, T, N], 0 when time-invariant [E, N]
         softplus          delta_softplus
  u, delta, A, B, C        inputs (D, z, delta_bias too when the case has them)
  out, gout                forward output and a random upstream gradient
  grad_<input>             d(sum(out * gout)) / d input, from torch autograd
  out64, grad_<input>64    the same computed in float64 from the same inputs: the exact result
                           to float32 precision, against which torch's own float32 error is known

Usage: /usr/bin/python3 tests/torch/gen_selective_scan.py <outdir>
"""
import os
import sys

import h5py
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mamba_ref import selective_scan_ref  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)  # a fixed summation order: the file is the same on every run


def uniform(lo, hi, *shape):
    return lo + (hi - lo) * torch.rand(shape, dtype=torch.float32)


def make_inputs(batch, T, E, N, var_B, var_C, has_D, has_z, has_bias, softplus):
    """Channels-first inputs with dt = (softplus of) delta + bias in about [0.01, 0.2]."""
    x = {"u": uniform(-1, 1, batch, E, T)}
    if softplus:  # softplus^-1 of [0.01, 0.2] is about [-4.6, -1.5]
        x["delta"] = uniform(-0.6, 0.6, batch, E, T) if has_bias else uniform(-4.5, -1.5, batch, E, T)
        if has_bias:
            x["delta_bias"] = uniform(-3.8, -2.2, E)
    else:
        x["delta"] = uniform(0.01, 0.1, batch, E, T)
        if has_bias:
            x["delta_bias"] = uniform(0.0, 0.1, E)
    x["A"] = uniform(-4, -0.25, E, N)
    x["B"] = uniform(-1, 1, batch, N, T) if var_B else uniform(-1, 1, E, N)
    x["C"] = uniform(-1, 1, batch, N, T) if var_C else uniform(-1, 1, E, N)
    if has_D:
        x["D"] = uniform(-1, 1, E)
    if has_z:
        x["z"] = uniform(-2, 2, batch, E, T)
    return x


def channels_last(t):
    """[B, E, T] / [B, N, T] -> [B, T, E] / [B, T, N]; parameters unchanged."""
    return t.transpose(1, 2).contiguous() if t.dim() == 3 else t


CASES = {
    # name: batch, T, E, N, var_B, var_C, has_D, has_z, has_bias, softplus
    "mamba": (2, 37, 24, 16, True, True, True, True, True, True),
    "s4d_real_lti": (2, 37, 24, 16, False, False, True, True, True, True),
    "plain_n4": (2, 37, 24, 4, True, True, False, False, False, False),
    "mixed_no_gate": (3, 29, 20, 8, True, False, True, False, True, True),
    "long_chunks": (2, 150, 40, 16, True, True, True, True, True, True),
}


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "selective_scan.h5")
    with h5py.File(path + ".tmp", "w") as f:
        for name, (batch, T, E, N, var_B, var_C, has_D, has_z, has_bias, softplus) in CASES.items():
            inputs = make_inputs(batch, T, E, N, var_B, var_C, has_D, has_z, has_bias, softplus)
            g = f.create_group(name)
            g.attrs["var_B"] = int(var_B)
            g.attrs["var_C"] = int(var_C)
            g.attrs["softplus"] = int(softplus)
            for k, t in inputs.items():
                g[k] = channels_last(t).numpy()
            gout = None
            for suffix, dtype in (("", torch.float32), ("64", torch.float64)):
                x = {k: t.detach().to(dtype).requires_grad_() for k, t in inputs.items()}
                out = selective_scan_ref(x["u"], x["delta"], x["A"], x["B"], x["C"], x.get("D"),
                                         x.get("z"), x.get("delta_bias"), softplus)
                if gout is None:
                    gout = torch.randn(out.shape, dtype=torch.float32)
                    g["gout"] = channels_last(gout).numpy()
                out.backward(gout.to(dtype))
                g["out" + suffix] = channels_last(out.detach()).numpy()
                for k, t in x.items():
                    g["grad_" + k + suffix] = channels_last(t.grad).numpy()
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gen_selective_scan.py <outdir>")
    main(sys.argv[1])
