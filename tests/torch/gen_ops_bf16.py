"""PyTorch references for the GEMM ops under --precision bf16: writes <outdir>/ops_bf16.h5.

The ops whose arithmetic bf16 changes are the GEMMs (matmul, linear; linear_parts is linear's
columns); every other op stays float32 (gen_ops.py covers them). One group per case:
  attrs  op, trans_a, trans_b   as gen_ops.py
  in<i>, gout                   float32 inputs and the upstream gradient
  out_ac, gin<i>_ac             torch.autocast("cpu", dtype=torch.bfloat16): inputs cast to
                                bf16, output and input gradients in bf16 (cast back to float32)
  out64, gin<i>64               float64 on the float32 inputs: the exact result
  outr, gin<i>r                 float64 on the bf16-rounded inputs (and, backward, the rounded
                                upstream gradient; a bias's gradient is the unrounded sum): the
                                exact result of trilemma's rule, bf16 inputs summed in float
Usage: /usr/bin/python3 tests/torch/gen_ops_bf16.py <outdir>
"""
import os
import sys

import h5py
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


def randn(*shape):
    return torch.randn(shape, dtype=torch.float32)


def bf16(x):
    return x.to(torch.bfloat16).to(x.dtype)


def matmul(a, b, ta, tb):
    return (a.transpose(-1, -2) if ta else a) @ (b.transpose(-1, -2) if tb else b)


def write(g, name, t):
    g.create_dataset(name, data=t.detach().float().numpy())


def case(f, name, op, inputs, fn, attrs=None):
    """fn(*inputs) -> out, built from matmul and F.linear (which autocast runs in bf16)."""
    g = f.create_group(name)
    g.attrs["op"] = op
    for k, v in (attrs or {}).items():
        g.attrs[k] = int(v)
    for i, x in enumerate(inputs):
        write(g, f"in{i}", x)
    with torch.no_grad():
        gout = randn(*fn(*inputs).shape)
    write(g, "gout", gout)

    leaves = [x.clone().requires_grad_() for x in inputs]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn(*leaves)
    assert out.dtype == torch.bfloat16, f"{name}: autocast left {out.dtype}"
    out.backward(gout.to(out.dtype))
    write(g, "out_ac", out)
    for i, x in enumerate(leaves):
        write(g, f"gin{i}_ac", x.grad)

    leaves = [x.double().requires_grad_() for x in inputs]
    out = fn(*leaves)
    out.backward(gout.double())
    write(g, "out64", out)
    for i, x in enumerate(leaves):
        write(g, f"gin{i}64", x.grad)

    # trilemma's rule: each GEMM's two inputs rounded to bf16, forward and backward alike. With
    # the rounding as a custom autograd function around the GEMM inputs, the backward GEMMs
    # see rounded operands too (d out rounded where it enters a GEMM; a bias sums it unrounded).
    leaves = [x.double().requires_grad_() for x in inputs]
    out = fn(*(Round.apply(x) if i < 2 else x for i, x in enumerate(leaves)), round_grad=True)
    out.backward(gout.double())
    write(g, "outr", out)
    for i, x in enumerate(leaves):
        write(g, f"gin{i}r", x.grad)


class Round(torch.autograd.Function):
    """bf16 rounding forward; the identity backward (the GEMM's own inputs are what is rounded)."""

    @staticmethod
    def forward(ctx, x):
        return bf16(x)

    @staticmethod
    def backward(ctx, g):
        return g


class RoundGrad(torch.autograd.Function):
    """The identity forward; bf16 rounding of the gradient that flows into the GEMM backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return bf16(g)


def gemm(ta=False, tb=False):
    def fn(a, b, round_grad=False):
        out = matmul(a, b, ta, tb)
        return RoundGrad.apply(out) if round_grad else out
    return fn


def linear(x, w, b=None, round_grad=False):
    if not round_grad:
        return F.linear(x, w, b)  # autocast runs it, bias too, in bf16
    out = RoundGrad.apply(F.linear(x, w))
    return out + b if b is not None else out  # the bias adds in float32, its gradient unrounded


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_ops_bf16.py <outdir>")
    os.makedirs(sys.argv[1], exist_ok=True)
    path = os.path.join(sys.argv[1], "ops_bf16.h5")
    with h5py.File(path + ".tmp", "w") as f:
        for ta in (False, True):
            for tb in (False, True):
                a = randn(24, 40) if not ta else randn(40, 24)
                b = randn(40, 32) if not tb else randn(32, 40)
                case(f, f"matmul_{'t' if ta else 'n'}{'t' if tb else 'n'}", "matmul", [a, b], gemm(ta, tb),
                     {"trans_a": ta, "trans_b": tb})
        case(f, "matmul_batch3", "matmul", [randn(3, 20, 48), randn(3, 48, 36)], gemm(), {"trans_a": 0, "trans_b": 0})
        case(f, "matmul_k512", "matmul", [randn(64, 512), randn(512, 96)], gemm(), {"trans_a": 0, "trans_b": 0})
        case(f, "linear", "linear", [randn(4, 16, 64), randn(386, 64)], linear)
        case(f, "linear_bias", "linear", [randn(2, 30, 128), randn(64, 128), randn(64)], linear)
        case(f, "linear_head", "linear", [randn(256, 64), randn(512, 64)], linear)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
