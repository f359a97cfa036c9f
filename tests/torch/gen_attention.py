"""PyTorch references for framework/kernels/attention.hpp: writes <outdir>/attention.h5.

Softmax attention is written out explicitly, softmax(Q K^T * scale + alibi_bias + causal_mask) V
in float32 (torch 1.13 has no F.scaled_dot_product_attention), with ALiBi's slopes from the
official implementation (ofirpress/attention_with_linear_biases) and RoPE in the rotate-half
form of GPT-NeoX / LLaMA.

/slopes/<H>             ALiBi slopes for H heads (float32, from the official get_slopes)
/<case> with attrs op:
  "attention"  attrs causal, alibi (0/1), scale (0: 1/sqrt(Dh)), window (0: none; W: query at
               position p sees keys p - W < j <= p); q, k, v, gout, out, gq, gk, gv
  "rope"       attrs offset, base; x, gout, out, gx
  "rope_attention"  q and k rotated (q at offset Tk - Tq, k at 0), then causal attention with
               attr window; q, k, v, gout, out, gq, gk, gv
Layouts: q [B, Tq, H, Dh], k and v [B, Tk, H, Dh]. Gradients are d(sum(out * gout)) / d input.
Every case also has out64 and g<input>64: the same computed in float64 from the same inputs
(with the same float32 ALiBi slopes and RoPE tables), the exact result to float32 precision.

Usage: /usr/bin/python3 tests/torch/gen_attention.py <outdir>
"""
import math
import os
import sys

import h5py
import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)  # a fixed summation order: the file is the same on every run


def get_slopes(n):
    """ALiBi head slopes, as in the paper's official code."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]


def attention(q, k, v, causal, slopes, scale, window=0):
    """softmax(Q K^T * scale + bias + mask) V over [B, T, H, Dh] inputs; with a window, the mask
    also hides the keys at or beyond `window` positions before the query."""
    Tq, Tk, Dh = q.shape[1], k.shape[1], q.shape[3]
    qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))  # [B, H, T, Dh]
    scores = (qh @ kh.transpose(-1, -2)) * (scale if scale else 1 / math.sqrt(Dh))
    # Query i sits at key position Tk - Tq + i; rel[i, j] = j - pos_i.
    rel = (torch.arange(Tk)[None, :] - (torch.arange(Tq) + Tk - Tq)[:, None]).float()
    if slopes is not None:
        scores = scores + torch.tensor(slopes, dtype=torch.float32)[:, None, None] * rel
    if causal:
        hidden = (rel > 0) | (rel <= -window) if window else rel > 0
        scores = scores + torch.zeros(Tq, Tk).masked_fill(hidden, float("-inf"))
    return (torch.softmax(scores, -1) @ vh).transpose(1, 2)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def rope(x, offset, base=10000.0):
    """x [B, T, H, Dh]; the angle table in float64, rounded once (as the C++ side does)."""
    T, Dh = x.shape[1], x.shape[3]
    inv_freq = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
    angle = (torch.arange(T, dtype=torch.float64) + offset)[:, None] * inv_freq[None, :]
    angle = torch.cat((angle, angle), -1)[None, :, None, :]  # [1, T, 1, Dh]
    return x * angle.cos().float() + rotate_half(x) * angle.sin().float()


def write_case(f, name, op, inputs, fn, attrs):
    g = f.create_group(name)
    g.attrs["op"] = op
    for key, value in attrs.items():
        g.attrs[key] = value
    gout = None
    for suffix, dtype in (("", torch.float32), ("64", torch.float64)):
        leaves = {key: x.detach().to(dtype).requires_grad_() for key, x in inputs.items()}
        out = fn(**leaves)
        if gout is None:
            gout = torch.randn(out.shape)
            g.create_dataset("gout", data=gout.numpy())
        out.backward(gout.to(dtype))
        for key, x in leaves.items():
            if not suffix:
                g.create_dataset(key, data=x.detach().numpy())
            g.create_dataset("g" + key + suffix, data=x.grad.numpy())
        g.create_dataset("out" + suffix, data=out.detach().numpy())


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(outdir, exist_ok=True)
    with h5py.File(os.path.join(outdir, "attention.h5"), "w") as f:
        for H in list(range(1, 13)) + [16, 24, 32]:
            f.create_dataset(f"slopes/{H}", data=np.asarray(get_slopes(H), dtype=np.float32))

        # (name, B, Tq, Tk, H, Dh, causal, alibi, scale, window)
        cases = [
            ("causal", 2, 37, 37, 3, 24, True, False, 0.0, 0),
            ("causal_alibi", 2, 37, 37, 3, 24, True, True, 0.0, 0),
            ("full", 2, 37, 37, 3, 24, False, False, 0.0, 0),
            ("full_alibi", 2, 37, 37, 3, 24, False, True, 0.0, 0),
            ("decode_step", 2, 1, 37, 3, 24, True, True, 0.0, 0),
            ("fewer_queries", 2, 5, 37, 3, 24, True, True, 0.0, 0),
            ("fewer_queries_full", 1, 20, 90, 2, 16, False, True, 0.0, 0),
            ("long_tiles", 1, 150, 150, 2, 32, True, True, 0.0, 0),
            ("scale", 1, 37, 37, 5, 12, True, True, 0.2, 0),
            ("window_1", 2, 37, 37, 3, 24, True, False, 0.0, 1),
            ("window_2_alibi", 2, 37, 37, 3, 24, True, True, 0.0, 2),
            ("window_70_tiles", 1, 150, 150, 2, 32, True, True, 0.0, 70),
            ("window_fewer_queries", 1, 40, 150, 2, 16, True, True, 0.0, 33),
            ("window_decode_step", 2, 1, 37, 3, 24, True, True, 0.0, 10),
            ("window_beyond_T", 1, 37, 37, 5, 12, True, False, 0.2, 100),
        ]
        for name, B, Tq, Tk, H, Dh, causal, alibi, scale, window in cases:
            slopes = get_slopes(H) if alibi else None
            inputs = {"q": torch.randn(B, Tq, H, Dh), "k": torch.randn(B, Tk, H, Dh),
                      "v": torch.randn(B, Tk, H, Dh)}
            write_case(f, name, "attention", inputs,
                       lambda q, k, v: attention(q, k, v, causal, slopes, scale, window),
                       {"causal": int(causal), "alibi": int(alibi), "scale": scale, "window": window})

        write_case(f, "rope", "rope", {"x": torch.randn(2, 37, 3, 24)},
                   lambda x: rope(x, 5), {"offset": 5, "base": 10000.0})
        write_case(f, "rope_base_offset", "rope", {"x": torch.randn(1, 20, 2, 8)},
                   lambda x: rope(x, 1000, 500.0), {"offset": 1000, "base": 500.0})
        Tq, Tk = 7, 29
        for name, window in (("rope_attention", 0), ("rope_attention_window", 6)):
            write_case(f, name, "rope_attention",
                       {"q": torch.randn(2, Tq, 2, 16), "k": torch.randn(2, Tk, 2, 16),
                        "v": torch.randn(2, Tk, 2, 16)},
                       lambda q, k, v: attention(rope(q, Tk - Tq), rope(k, 0), v, True, None, 0.0, window),
                       {"window": window})


if __name__ == "__main__":
    main()
