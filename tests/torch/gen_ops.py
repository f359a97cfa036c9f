"""PyTorch references for every op in framework/ops/ops.hpp: writes <outdir>/ops.h5.

One group per case, /<case>:
  attrs  op          the op the C++ test runs (its runner and tolerance are keyed by it)
         <param>     scalar parameters (floats, ints; lists of ints as "a,b,c" strings)
         pre<i>      optional: input i is first made non-contiguous in torch by this view
                     ("transpose,a0,a1", "slice,axis,start,end" or "permute,o0,o1,...");
                     the C++ test applies the same transform with its copying ops
  in<i>        float32 inputs (all require grad);  ids / targets / mask: int32 inputs
  out, gout    forward output and a random upstream gradient
  gin<i>       d(sum(out * gout)) / d in<i>, from torch autograd (out.backward(gout))
  out64, gin<i>64  the same computed in float64 from the same inputs: the exact result to
               float32 precision, against which torch's own float32 error is known
Inputs are float32. Inputs are drawn away from kinks (relu/elu at 0) and inside each
op's domain (log, pow and div get positive or nonzero inputs).

Usage: /usr/bin/python3 tests/torch/gen_ops.py <outdir>
"""
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import taylor  # noqa: E402  (Based's Taylor feature map, as the model twin writes it)

torch.manual_seed(0)
torch.set_num_threads(1)  # a fixed summation order: the file is the same on every run


def randn(*shape):
    return torch.randn(shape, dtype=torch.float32)


def uniform(lo, hi, *shape):
    return lo + (hi - lo) * torch.rand(shape, dtype=torch.float32)


def away_from_zero(*shape, margin=0.1):
    """Values with |x| >= margin: no input sits on the kink of relu/elu or near a pole."""
    x = randn(*shape)
    return torch.sign(x + (x == 0).float()) * (margin + x.abs())


def apply_pre(x, spec):
    """The non-contiguous view a spec names (the C++ test makes the same by copying)."""
    kind, *args = spec.split(",")
    args = [int(a) for a in args]
    if kind == "transpose":
        return x.transpose(args[0], args[1])
    if kind == "permute":
        return x.permute(*args)
    if kind == "slice":
        axis, start, end = args
        return x.narrow(axis, start, end - start)
    raise ValueError(f"unknown pre transform {spec!r}")


def attr_value(v):
    if isinstance(v, bool):
        return int(v)  # h5py would store a bool as an HDF5 enum
    if isinstance(v, (list, tuple)):
        return ",".join(str(int(a)) for a in v)
    return v


def rms(eps):
    """RMSNorm as mamba_ssm writes it."""
    return lambda x, wt=None: (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                               * (wt if wt is not None else 1.0))


def conv(x, wt, b=None):
    """The causal depthwise conv of Mamba: x [B, T, C], wt [C, 1, K]."""
    K, C, T = wt.shape[-1], x.shape[-1], x.shape[1]
    return F.conv1d(x.transpose(1, 2), wt, b, padding=K - 1, groups=C)[..., :T].transpose(1, 2)


class Writer:
    def __init__(self, path):
        self.f = h5py.File(path, "w")

    def case(self, name, op, inputs, fn, ints=None, attrs=None, pre=None):
        """inputs: float tensors; fn(*inputs_after_pre) -> out (None: no torch reference)."""
        if name in self.f:
            raise ValueError(f"case {name} written twice")
        g = self.f.create_group(name)
        g.attrs["op"] = op
        for k, v in (attrs or {}).items():
            g.attrs[k] = attr_value(v)
        for k, v in (ints or {}).items():
            g.create_dataset(k, data=np.asarray(v, dtype=np.int32))
        for i, spec in (pre or {}).items():
            g.attrs[f"pre{i}"] = spec
        for i, x in enumerate(inputs):
            g.create_dataset(f"in{i}", data=x.detach().float().numpy())
        if fn is None:  # the C++ test checks this case by itself (dropout)
            g.create_dataset("gout", data=randn(*inputs[0].shape).numpy())
            return
        gout = None
        for suffix, dtype in (("", torch.float32), ("64", torch.float64)):
            leaves = [x.detach().float().to(dtype).requires_grad_() for x in inputs]
            args = list(leaves)
            for i, spec in (pre or {}).items():
                args[i] = apply_pre(args[i], spec)
            out = fn(*args)
            assert out.dtype == dtype, name
            if gout is None:
                gout = randn(*out.shape)
                g.create_dataset("gout", data=gout.numpy())
            out.backward(gout.to(dtype))
            g.create_dataset("out" + suffix, data=out.detach().numpy())
            for i, x in enumerate(leaves):
                grad = x.grad if x.grad is not None else torch.zeros_like(x)
                g.create_dataset(f"gin{i}{suffix}", data=grad.numpy())


def gen_matmul(w):
    def case(name, a, b, ta=False, tb=False, pre=None):
        fn = lambda a, b: (a.transpose(-1, -2) if ta else a) @ (b.transpose(-1, -2) if tb else b)
        w.case(name, "matmul", [a, b], fn, attrs={"trans_a": ta, "trans_b": tb}, pre=pre)

    M, K, N = 4, 6, 5
    for ta in (False, True):
        for tb in (False, True):
            a = randn(K, M) if ta else randn(M, K)
            b = randn(N, K) if tb else randn(K, N)
            case(f"matmul_{'t' if ta else 'n'}{'t' if tb else 'n'}", a, b, ta, tb)
    # Batched a with a 2-D b shared across the batch (the folded tall GEMM, and the
    # per-batch path when a is transposed).
    case("matmul_batch3_shared_b", randn(3, 4, 6), randn(6, 5))
    case("matmul_batch4_shared_b", randn(2, 3, 5, 4), randn(4, 6))
    case("matmul_batch4_shared_b_nt", randn(2, 3, 5, 4), randn(6, 4), tb=True)
    case("matmul_batch3_shared_b_tn", randn(3, 6, 4), randn(6, 5), ta=True)
    # Batched a with batched b.
    case("matmul_batch4", randn(2, 3, 5, 4), randn(2, 3, 4, 6))
    case("matmul_batch4_nt", randn(2, 3, 5, 4), randn(2, 3, 6, 4), tb=True)
    case("matmul_batch3_tt", randn(3, 4, 5), randn(3, 6, 4), ta=True, tb=True)
    # Large enough for the threaded GEMM path (one multi-threaded GEMM per batch item).
    case("matmul_batch_large", randn(2, 160, 96), randn(2, 96, 288))
    # Non-contiguous input: a is a transposed view in torch.
    case("matmul_noncontig_a", randn(3, 6, 4), randn(3, 6, 5), pre={0: "transpose,-1,-2"})

    w.case("linear_bias", "linear", [randn(5, 8), randn(6, 8), randn(6)], F.linear)
    w.case("linear_nobias_3d", "linear", [randn(2, 5, 8), randn(6, 8)], F.linear)
    w.case("linear_bias_3d", "linear", [randn(2, 5, 8), randn(6, 8), randn(6)], F.linear)
    # A slice along an inner axis (time) before the projection.
    w.case("linear_noncontig_x", "linear", [randn(2, 7, 8), randn(6, 8), randn(6)], F.linear,
           pre={0: "slice,1,2,6"})


def gen_elementwise(w):
    fns = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    patterns = {  # name: (shape of a, shape of b)
        "same": ((3, 4, 5), (3, 4, 5)),
        "row": ((4, 5), (5,)),
        "col": ((4, 5), (4, 1)),
        "one": ((4, 5), (1,)),
        "dim0": ((4, 5), ()),
        "both": ((3, 1, 5), (4, 1)),
        "left": ((5,), (4, 5)),
    }
    for op, fn in fns.items():
        for pat, (sa, sb) in patterns.items():
            b = away_from_zero(*sb, margin=0.5) if op == "div" else randn(*sb)
            w.case(f"{op}_{pat}", op, [randn(*sa), b], fn)
    # Non-contiguous operand: b is a transposed view.
    w.case("add_noncontig_b", "add", [randn(4, 5), randn(5, 4)], torch.add,
           pre={1: "transpose,0,1"})
    w.case("mul_noncontig_a_bcast", "mul", [randn(4, 1, 3), randn(5, 1)], torch.mul,
           pre={0: "transpose,0,2"})

    w.case("add_scalar", "add_scalar", [randn(3, 7)], lambda x: x + 0.75, attrs={"s": 0.75})
    w.case("mul_scalar", "mul_scalar", [randn(3, 7)], lambda x: x * -1.5, attrs={"s": -1.5})
    w.case("pow_scalar_frac", "pow_scalar", [uniform(0.2, 3.0, 3, 7)], lambda x: x.pow(2.5),
           attrs={"p": 2.5})
    w.case("pow_scalar_neg", "pow_scalar", [uniform(0.2, 3.0, 3, 7)], lambda x: x.pow(-0.5),
           attrs={"p": -0.5})
    w.case("pow_scalar_int", "pow_scalar", [randn(3, 7)], lambda x: x.pow(3.0), attrs={"p": 3.0})
    w.case("pow_scalar_square", "pow_scalar", [randn(3, 7)], lambda x: x.pow(2.0), attrs={"p": 2.0})


def gen_activation(w):
    shape = (4, 33)
    w.case("gelu", "gelu", [3 * randn(*shape)], lambda x: F.gelu(x, approximate="none"))
    w.case("gelu_noncontig", "gelu", [randn(6, 10)], lambda x: F.gelu(x, approximate="none"),
           pre={0: "slice,1,2,7"})
    w.case("silu", "silu", [3 * randn(*shape)], F.silu)
    w.case("mul_silu", "mul_silu", [randn(*shape), 3 * randn(*shape)], lambda a, x: a * F.silu(x))
    w.case("elu", "elu", [away_from_zero(*shape)], lambda x: F.elu(x, 1.0), attrs={"alpha": 1.0})
    w.case("elu_alpha", "elu", [away_from_zero(*shape)], lambda x: F.elu(x, 0.7), attrs={"alpha": 0.7})
    w.case("elu_plus_one", "elu_plus_one", [away_from_zero(*shape)], lambda x: F.elu(x) + 1)
    # softplus switches to the identity above 20: values on both sides, none near the switch.
    x = 4 * randn(*shape)
    x[0, :8] = uniform(21.0, 40.0, 8)
    x[1, :4] = uniform(-40.0, -21.0, 4)
    w.case("softplus", "softplus", [x], F.softplus)
    w.case("exp", "exp", [2 * randn(*shape)], torch.exp)
    w.case("log", "log", [uniform(0.05, 10.0, *shape)], torch.log)
    w.case("sigmoid", "sigmoid", [4 * randn(*shape)], torch.sigmoid)
    w.case("relu", "relu", [away_from_zero(*shape)], F.relu)
    w.case("tanh", "tanh", [2 * randn(*shape)], torch.tanh)


def gen_reduce(w):
    for op, fn in (("sum", torch.sum), ("mean", torch.mean)):
        def red(axes, keepdim):
            if not axes:
                return lambda x: fn(x)
            return lambda x: fn(x, dim=tuple(axes), keepdim=keepdim)

        for tag, axes, keepdim in (("all", [], False), ("axis1", [1], False), ("last_keep", [-1], True),
                                   ("axes02", [0, 2], False), ("axes01_keep", [0, 1], True)):
            w.case(f"{op}_{tag}", op, [randn(3, 4, 5)], red(axes, keepdim),
                   attrs={"axes": axes, "keepdim": keepdim})
        # Reducing an axis of size 1 only reshapes.
        w.case(f"{op}_unit_axis", op, [randn(3, 1, 5)], red([1], False),
               attrs={"axes": [1], "keepdim": False})
        # Many elements: the threaded full reduction and a long row reduction.
        w.case(f"{op}_all_large", op, [randn(96, 1000)], red([], False),
               attrs={"axes": [], "keepdim": False})
        w.case(f"{op}_last_large", op, [randn(80, 1000)], red([-1], False),
               attrs={"axes": [-1], "keepdim": False})
        w.case(f"{op}_noncontig", op, [randn(3, 4, 5)], red([1], False),
               attrs={"axes": [1], "keepdim": False}, pre={0: "permute,2,0,1"})


def gen_shape(w):
    w.case("reshape", "reshape", [randn(3, 4, 5)], lambda x: x.reshape(6, 10), attrs={"shape": [6, 10]})
    w.case("reshape_split", "reshape", [randn(2, 30)], lambda x: x.reshape(5, 2, 6),
           attrs={"shape": [5, 2, 6]})
    w.case("permute", "permute", [randn(2, 3, 4, 5)], lambda x: x.permute(2, 0, 3, 1),
           attrs={"order": [2, 0, 3, 1]})
    w.case("transpose", "transpose", [randn(2, 3, 4)], lambda x: x.transpose(0, 2),
           attrs={"a0": 0, "a1": 2})
    w.case("transpose_last2", "transpose", [randn(2, 3, 4, 5)], lambda x: x.transpose(-1, -2),
           attrs={"a0": -1, "a1": -2})
    w.case("slice_axis0", "slice", [randn(6, 4)], lambda x: x[1:4], attrs={"axis": 0, "start": 1, "end": 4})
    w.case("slice_inner", "slice", [randn(3, 7, 4)], lambda x: x[:, 2:6],
           attrs={"axis": 1, "start": 2, "end": 6})
    w.case("slice_last", "slice", [randn(3, 7, 5)], lambda x: x[..., 1:4],
           attrs={"axis": -1, "start": 1, "end": 4})
    w.case("concat_axis0", "concat", [randn(2, 3), randn(4, 3), randn(1, 3)],
           lambda *xs: torch.cat(xs, 0), attrs={"axis": 0})
    w.case("concat_inner", "concat", [randn(2, 3, 4), randn(2, 1, 4), randn(2, 2, 4)],
           lambda *xs: torch.cat(xs, 1), attrs={"axis": 1})
    w.case("concat_last", "concat", [randn(2, 3, 4), randn(2, 3, 2)],
           lambda *xs: torch.cat(xs, -1), attrs={"axis": -1})


def gen_nn(w):
    ids = torch.tensor([[1, 3, 3, 0, 9], [9, 2, 3, 1, 1], [7, 7, 7, 4, 0]])  # repeats accumulate
    w.case("embedding", "embedding", [randn(10, 6)], lambda wt: F.embedding(ids, wt),
           ints={"ids": ids})

    D = 16
    w.case("layer_norm", "layer_norm", [randn(4, 7, D), 1 + 0.5 * randn(D), randn(D)],
           lambda x, g, b: F.layer_norm(x, (D,), g, b, 1e-5), attrs={"eps": 1e-5})
    w.case("layer_norm_noaffine", "layer_norm", [randn(4, 7, D)],
           lambda x: F.layer_norm(x, (D,), None, None, 1e-5), attrs={"eps": 1e-5})
    # Wide rows with a large mean: the variance must not cancel catastrophically.
    w.case("layer_norm_wide_offset", "layer_norm", [3 + randn(6, 512), 1 + 0.5 * randn(512), randn(512)],
           lambda x, g, b: F.layer_norm(x, (512,), g, b, 1e-5), attrs={"eps": 1e-5})
    w.case("layer_norm_noncontig", "layer_norm", [randn(3, 5, 20), 1 + 0.5 * randn(12), randn(12)],
           lambda x, g, b: F.layer_norm(x, (12,), g, b, 1e-5), attrs={"eps": 1e-5},
           pre={0: "slice,2,4,16"})

    w.case("rms_norm", "rms_norm", [randn(4, 7, D), 1 + 0.5 * randn(D)], rms(1e-5), attrs={"eps": 1e-5})
    w.case("rms_norm_noweight", "rms_norm", [randn(4, 7, D)], rms(1e-5), attrs={"eps": 1e-5})
    w.case("rms_norm_eps", "rms_norm", [0.01 * randn(5, 64), 1 + 0.5 * randn(64)], rms(1e-3),
           attrs={"eps": 1e-3})

    # The delta rule's L2 norm as fla writes it: x / sqrt(sum(x^2) + eps).
    l2 = lambda eps: lambda x: x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)
    w.case("l2_norm", "l2_norm", [randn(4, 7, D)], l2(1e-6), attrs={"eps": 1e-6})
    w.case("l2_norm_small_rows", "l2_norm", [1e-3 * randn(5, 32)], l2(1e-6), attrs={"eps": 1e-6})

    w.case("softmax", "softmax", [2 * randn(4, 7, D)], lambda x: torch.softmax(x, -1))
    w.case("softmax_large_logits", "softmax", [30 * randn(5, 33)], lambda x: torch.softmax(x, -1))
    w.case("softmax_noncontig", "softmax", [randn(2, 8, 5)], lambda x: torch.softmax(x, -1),
           pre={0: "transpose,1,2"})
    w.case("log_softmax", "log_softmax", [2 * randn(4, 7, D)], lambda x: F.log_softmax(x, -1))
    w.case("log_softmax_large_logits", "log_softmax", [30 * randn(5, 33)], lambda x: F.log_softmax(x, -1))

    # cross_entropy: the C++ side builds the -100 targets with masked_targets(targets, mask).
    for tag, (B, T, V) in (("3d", (4, 6, 11)), ("wide", (3, 8, 300))):
        targets = torch.randint(0, V, (B, T))
        mask = (torch.rand(B, T) > 0.3).int()
        mask[0, 0] = 1
        mask[0, 1] = 0  # at least one of each
        ignored = targets.masked_fill(mask == 0, -100)
        w.case(f"cross_entropy_{tag}", "cross_entropy", [2 * randn(B, T, V)],
               lambda x, t=ignored, V=V: F.cross_entropy(x.reshape(-1, V), t.reshape(-1),
                                                         ignore_index=-100),
               ints={"targets": targets, "mask": mask})
    targets = torch.randint(0, 50, (8,))
    w.case("cross_entropy_2d", "cross_entropy", [2 * randn(8, 50)],
           lambda x: F.cross_entropy(x, targets),
           ints={"targets": targets, "mask": torch.ones(8, dtype=torch.int32)})

    w.case("causal_conv1d", "causal_conv1d", [randn(2, 9, 6), randn(6, 1, 4), randn(6)], conv)
    w.case("causal_conv1d_nobias", "causal_conv1d", [randn(2, 9, 6), randn(6, 1, 4)], conv)
    w.case("causal_conv1d_short", "causal_conv1d", [randn(3, 2, 5), randn(5, 1, 4), randn(5)], conv)

    # Based's Taylor feature map: heads of F = 8 and a single F = 1 (one squared term).
    w.case("taylor_features", "taylor_features", [randn(2, 5, 3, 8)], taylor)
    w.case("taylor_features_f1", "taylor_features", [randn(6, 1)], taylor)

    # dropout: the RNGs differ, so the C++ test checks its own mask (no torch reference).
    w.case("dropout", "dropout", [away_from_zero(128, 256)], None,
           attrs={"p": 0.25, "seed": 1234, "counter": 7})


def gen_threaded(w):
    """Sizes above the framework's thresholds for OpenMP loops (2^15 elements for element-wise
    ops, 2^14 for row-wise ones): the threaded branches must give the same answers."""
    w.case("mul_same_threaded", "mul", [randn(160, 256), randn(160, 256)], torch.mul)
    w.case("gelu_threaded", "gelu", [3 * randn(160, 256)], lambda x: F.gelu(x, approximate="none"))
    w.case("layer_norm_threaded", "layer_norm", [randn(48, 384), 1 + 0.5 * randn(384), randn(384)],
           lambda x, g, b: F.layer_norm(x, (384,), g, b, 1e-5), attrs={"eps": 1e-5})
    w.case("rms_norm_threaded", "rms_norm", [randn(48, 384), 1 + 0.5 * randn(384)], rms(1e-5),
           attrs={"eps": 1e-5})
    w.case("softmax_threaded", "softmax", [2 * randn(48, 384)], lambda x: torch.softmax(x, -1))
    w.case("log_softmax_threaded", "log_softmax", [2 * randn(48, 384)], lambda x: F.log_softmax(x, -1))
    targets = torch.randint(0, 300, (2, 32))
    w.case("cross_entropy_threaded", "cross_entropy", [2 * randn(2, 32, 300)],
           lambda x: F.cross_entropy(x.reshape(-1, 300), targets.reshape(-1)),
           ints={"targets": targets, "mask": torch.ones(2, 32, dtype=torch.int32)})
    w.case("causal_conv1d_threaded", "causal_conv1d", [randn(4, 64, 80), randn(80, 1, 4), randn(80)], conv)
    w.case("taylor_features_threaded", "taylor_features", [randn(4, 32, 2, 16)], taylor)


def gen_book(w):
    # The book's worked example: self-attention with W_Q = W_K = W_V = I.
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    w.case("book_attention", "book_attention", [X],
           lambda x: torch.softmax(x @ x.T / math.sqrt(2.0), -1) @ x)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_ops.py <outdir>")
    os.makedirs(sys.argv[1], exist_ok=True)
    path = os.path.join(sys.argv[1], "ops.h5")
    w = Writer(path + ".tmp")
    try:
        for gen in (gen_matmul, gen_elementwise, gen_activation, gen_reduce, gen_shape, gen_nn,
                    gen_threaded, gen_book):
            gen(w)
    except BaseException:
        w.f.close()
        os.remove(path + ".tmp")
        raise
    n = len(w.f)
    w.f.close()
    os.replace(path + ".tmp", path)  # readers never see a half-written file
    print(f"wrote {n} cases to {path}")


if __name__ == "__main__":
    main()
