"""Fast forms of tests/torch/models.py's mixers: the same parameters (names, shapes, values), other
arithmetic. A model built by models.LanguageModel switches a mixer to a fast form by swapping its
class (use_form), so the reference and the fast form run on the very same weights.

Attention (causal softmax, 1/sqrt(dh) scale):
  qkv       the three projections as one [3d, d] GEMM (weights concatenated per step), scores by
            baddbmm onto a precomputed additive -inf mask (scale folded into alpha), softmax, bmm.
  blocked   as qkv, but query blocks of 512 rows only meet the keys up to their block's end:
            about half the score FLOPs, exp and memory at long T.
  sdpa      the fused q/k/v GEMM, then F.scaled_dot_product_attention(is_causal=True) (PyTorch
            2.0 on; its CPU flash kernel skips the masked half).
Linear attention (Katharopoulos et al., phi = elu + 1; out = (phi(q) S) / (phi(q) z + eps),
eps = 1e-6 as framework/kernels/linear_attention.hpp):
  quadratic the masked kernel matrix (the reference's form) after one fused qkv GEMM.
  chunked   chunks of 64 steps: inside a chunk the masked quadratic form, across chunks the
            running state S = sum k^T v (and z = sum k) as an exclusive cumsum of per-chunk sums.
Mamba (Gu & Dao selective scan, mamba_ssm's parameterisation as models/mamba.cpp):
  scan-<kernel>  time-major [T, B, E, N] discretisation a = exp(dt A), b = dt B u, the
            recurrence by torch_scan.LinearScan (kernel: sequential, chunked or blelloch), then
            y = C . h + D u, gated by silu(z).
"""
import math

import torch
import torch.nn.functional as F

from models import LINEAR_ATTENTION_EPS, LinearAttention, MambaMixer, MultiHeadAttention
from torch_scan import linear_scan

_MASKS = {}


def additive_causal_mask(T, dtype):
    key = (T, dtype)
    if key not in _MASKS:
        _MASKS[key] = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    return _MASKS[key]


def multiplicative_causal_mask(T, dtype):
    key = ("tril", T, dtype)
    if key not in _MASKS:
        _MASKS[key] = torch.ones(T, T, dtype=dtype).tril()
    return _MASKS[key]


def fused_qkv(mixer, x):
    """[B, T, d] -> q, k, v, each [B, H, T, dh], from one GEMM on the concatenated weights."""
    B, T, D = x.shape
    w = torch.cat([mixer.q_proj.weight, mixer.k_proj.weight, mixer.v_proj.weight])
    bias = None
    if mixer.q_proj.bias is not None:
        bias = torch.cat([mixer.q_proj.bias, mixer.k_proj.bias, mixer.v_proj.bias])
    qkv = F.linear(x, w, bias).view(B, T, 3, mixer.h, mixer.dk).permute(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]


class FastAttention(MultiHeadAttention):
    form, block = "qkv", 512

    def forward(self, X):
        assert self.pos in ("none", "learned") and not self.window, "the fast forms cover no RoPE/ALiBi/window"
        B, T, D = X.shape
        if self.form == "sdpa":
            out = F.scaled_dot_product_attention(*fused_qkv(self, X), is_causal=True)
            return self.out_proj(out.transpose(1, 2).reshape(B, T, D))
        q, k, v = (t.reshape(B * self.h, T, self.dk) for t in fused_qkv(self, X))
        alpha = 1.0 / math.sqrt(self.dk)
        if self.form == "qkv" or T <= self.block:
            att = torch.baddbmm(additive_causal_mask(T, X.dtype), q, k.transpose(1, 2), alpha=alpha)
            out = torch.bmm(att.softmax(-1), v)
        else:
            mask = additive_causal_mask(self.block, X.dtype)
            outs = []
            for s in range(0, T, self.block):
                e = min(s + self.block, T)
                scores = torch.bmm(q[:, s:e], k[:, :e].transpose(1, 2)).mul_(alpha)
                diag = scores[:, :, s:e]
                diag.add_(mask[: e - s, : e - s])
                outs.append(torch.bmm(scores.softmax(-1), v[:, :e]))
            out = torch.cat(outs, 1)
        out = out.view(B, self.h, T, self.dk).transpose(1, 2).reshape(B, T, D)
        return self.out_proj(out)


class FastLinearAttention(LinearAttention):
    form, chunk = "chunked", 64

    def forward(self, X):
        assert self.pos != "rope", "the fast forms cover no RoPE"
        B, T, D = X.shape
        q, k, v = fused_qkv(self, X)
        q, k = self.phi(q), self.phi(k)  # [B, H, T, dh]
        C = min(self.chunk, T)
        if self.form == "quadratic" or T % C:
            mask = multiplicative_causal_mask(T, X.dtype)
            att = (q @ k.transpose(-2, -1)) * mask
            out = (att @ v) / (att.sum(-1, keepdim=True) + LINEAR_ATTENTION_EPS)
        else:
            n, H, dh = T // C, self.h, self.dk
            qc, kc, vc = (t.reshape(B, H, n, C, dh) for t in (q, k, v))
            att = (qc @ kc.transpose(-2, -1)) * multiplicative_causal_mask(C, X.dtype)
            kv = kc.transpose(-2, -1) @ vc                   # [B, H, n, dh, dh]
            ksum = kc.sum(3, keepdim=True)                    # [B, H, n, 1, dh]
            zero_kv, zero_k = kv.new_zeros(B, H, 1, dh, dh), ksum.new_zeros(B, H, 1, 1, dh)
            S = torch.cat([zero_kv, kv[:, :, :-1].cumsum(2)], 2)   # state before each chunk
            z = torch.cat([zero_k, ksum[:, :, :-1].cumsum(2)], 2)
            num = torch.baddbmm((qc @ S).view(-1, C, dh), att.view(-1, C, C), vc.reshape(-1, C, dh))
            den = att.sum(-1, keepdim=True) + (qc * z).sum(-1, keepdim=True) + LINEAR_ATTENTION_EPS
            out = num.view(B, H, n, C, dh) / den
            out = out.view(B, H, T, dh)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))


class FastMamba(MambaMixer):
    kernel = "chunked"

    def forward(self, hidden_states):
        assert self.selective and self.a_init == "s4d-real", "the fast form is Mamba (S6) only"
        Bsz, T, _ = hidden_states.shape
        N, R = self.d_state, self.dt_rank
        xz = self.in_proj(hidden_states)                              # [B, T, 2E]
        x, z = xz.chunk(2, dim=-1)
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :T])           # [B, E, T]
        u = x.permute(2, 0, 1).contiguous()                           # [T, B, E]
        dt, Bm, Cm = torch.split(self.x_proj(u), [R, N, N], dim=-1)
        delta = F.softplus(F.linear(dt, self.dt_proj.weight, self.dt_proj.bias))  # [T, B, E]
        A = -torch.exp(self.A_log)                                    # [E, N]
        a = torch.exp(delta.unsqueeze(-1) * A)                        # [T, B, E, N]
        b = (delta * u).unsqueeze(-1) * Bm.unsqueeze(2)
        h = linear_scan(a, b, self.kernel)
        y = (h @ Cm.unsqueeze(-1)).squeeze(-1) + u * self.D           # [T, B, E]
        y = y * F.silu(z.transpose(0, 1))
        return self.out_proj(y).transpose(0, 1)


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
FORMS = {
    "attention": (FastAttention, "form", ["qkv", "blocked"] + (["sdpa"] if HAS_SDPA else [])),
    "linear": (FastLinearAttention, "form", ["chunked", "quadratic"]),
    "mamba": (FastMamba, "kernel", ["chunked", "blelloch", "sequential"]),
}


def use_form(model, family, variant):
    """Switches every mixer of models.LanguageModel `model` to the fast form `variant` in place."""
    cls, attr, variants = FORMS[family]
    if variant not in variants:
        raise ValueError(f"{family}: form {variant!r} unknown (allowed: {', '.join(variants)})")
    fast = type(f"{cls.__name__}_{variant}", (cls,), {attr: variant})
    for layer in model.backbone.layers:
        layer.mixer.__class__ = fast
    return model
