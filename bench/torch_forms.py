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
DeltaNet and Gated DeltaNet (the delta rule S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) +
beta_t v_t k_t^T, o_t = S_t q_t / sqrt(d_k); alpha = 1 without the state gate), both forms after
one GEMM on the concatenated q/k/v/b/a/g weights and one depthwise conv over the q/k/v channels:
  chunked   Yang et al. 2024 sec. 3 (the WY representation, the UT transform), with Yang et al.
            2025's decay: chunks of 64 steps (T padded up to a multiple, the padding's outputs
            dropped). With G the within-chunk cumulative log-decay, Gamma = exp(G) and h_0 the
            state [d_k, d_v] entering the chunk, the pseudo-values U = Ubar - W h_0 solve
            (I + L) [Ubar, W] = [diag(beta) V, diag(beta Gamma) K], L = tril(diag(beta) (K K^T *
            exp(G_i - G_j)), -1), by one batched unit triangular solve for all chunks at once; then
            per chunk O = (Q * Gamma) h_0 + (tril(Q K^T) * exp(G_i - G_j)) U and
            h_C = Gamma_C h_0 + (K * exp(G_C - G))^T U: one loop step per chunk. G_i - G_j is
            summed over (j, i] (a masked cumsum), not taken as a difference of cumsums, which
            lost float32 digits enough to fail --check on A_log's and dt_bias's gradients.
  recurrent the reference's step-by-step loop over T (the plain form, in the state's [d_k, d_v]
            layout).
Mamba 2 (SSD): bench/torch_ssd.py (chunked, recurrent).
"""
import math

import torch
import torch.nn.functional as F

from models import L2_NORM_EPS, LINEAR_ATTENTION_EPS, DeltaNet, LinearAttention, MambaMixer, MultiHeadAttention
from torch_scan import linear_scan
from torch_ssd import FastMamba2

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


def strictly_lower_mask(T, dtype):
    key = ("tril-1", T, dtype)
    if key not in _MASKS:
        _MASKS[key] = torch.ones(T, T, dtype=dtype).tril(-1)
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


def delta_rule_recurrent(q, k, v, beta, g):
    """q, k [B, H, T, dk] (q already scaled), v [B, H, T, dv], beta and g (log-decay, or None)
    [B, H, T] -> o [B, H, T, dv]; the state h = S^T, [dk, dv]."""
    B, H, T, dk = k.shape
    h = k.new_zeros(B, H, dk, v.shape[-1])
    outs = []
    for t in range(T):
        if g is not None:
            h = h * g[:, :, t, None, None].exp()
        kt = k[:, :, t, :, None]                                   # [B, H, dk, 1]
        u = beta[:, :, t, None] * (v[:, :, t] - (h * kt).sum(-2))  # beta (v - S k)
        h = h + kt * u[:, :, None, :]
        outs.append((h * q[:, :, t, :, None]).sum(-2))
    return torch.stack(outs, 2)


def delta_rule_chunked(q, k, v, beta, g, chunk):
    """delta_rule_recurrent's result by chunks (the module docstring's algebra)."""
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    C = min(chunk, T)
    pad = -T % C
    if pad:  # padding sits after every real step: it changes no output that is kept
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        beta = F.pad(beta, (0, pad))
        g = F.pad(g, (0, pad)) if g is not None else None
    n = (T + pad) // C
    q, k, v = (t.reshape(B, H, n, C, t.shape[-1]) for t in (q, k, v))
    beta = beta.reshape(B, H, n, C, 1)
    causal = multiplicative_causal_mask(C, q.dtype)
    if g is None:
        decay = causal
        k_gamma, k_end, gamma_end = k, k, None
        q_gamma = q
    else:
        g = g.reshape(B, H, n, C)
        G = g.cumsum(-1)
        # G_i - G_j as the sum of g over (j, i], not a difference of cumsums: at A up to 16 these
        # reach -100 in a chunk, and their difference would lose float32 digits; -inf above the
        # diagonal, where the exponents are positive and could overflow
        seg = (g[..., :, None] * strictly_lower_mask(C, q.dtype)).cumsum(-2)
        decay = seg.masked_fill(causal == 0, float("-inf")).exp()
        gamma = G.exp()[..., None]
        q_gamma, k_gamma = q * gamma, k * gamma
        k_end = k * decay[..., -1, :, None]                          # exp(G_C - G_j)
        gamma_end = G[..., -1].exp()[..., None, None]
    kb = k * beta
    L = (kb @ k.transpose(-2, -1)) * decay * strictly_lower_mask(C, q.dtype)
    rhs = torch.cat([v * beta, k_gamma * beta], -1)
    X = torch.linalg.solve_triangular(L, rhs, upper=False, unitriangular=True)  # (I + L)^-1 rhs
    u_bar, W = X[..., :dv], X[..., dv:]
    att = (q @ k.transpose(-2, -1)) * decay
    h, outs = None, []
    for i in range(n):
        if h is None:  # the first chunk starts from a zero state
            u = u_bar[:, :, i]
            o = att[:, :, i] @ u
        else:
            u = u_bar[:, :, i] - W[:, :, i] @ h
            o = q_gamma[:, :, i] @ h + att[:, :, i] @ u
        outs.append(o)
        if i + 1 < n:
            carried = k_end[:, :, i].transpose(-2, -1) @ u
            h = carried if h is None else (h if gamma_end is None else h * gamma_end[:, :, i]) + carried
    return torch.cat(outs, 2)[:, :, :T]


class FastDeltaNet(DeltaNet):
    form, chunk = "chunked", 64

    def forward(self, X):
        B, T, D = X.shape
        H, dk = self.h, self.dk
        names = ["q_proj", "k_proj", "v_proj", "b_proj"] + ["a_proj"] * self.state_gate + ["g_proj"] * self.output_gate
        proj = F.linear(X, torch.cat([getattr(self, n).weight for n in names]))
        qkv, rest = proj[..., : 3 * D], proj[..., 3 * D:]
        if hasattr(self, "q_conv"):
            convs = (self.q_conv, self.k_conv, self.v_conv)
            w, b = torch.cat([c.weight for c in convs]), torch.cat([c.bias for c in convs])
            qkv = F.conv1d(qkv.transpose(1, 2), w, b, padding=w.shape[-1] - 1, groups=3 * D)[..., :T]
            qkv = F.silu(qkv).view(B, 3, H, dk, T).permute(1, 0, 2, 4, 3)  # [3, B, H, T, dk]
        else:
            qkv = F.silu(qkv).view(B, T, 3, H, dk).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.l2_norm:
            q, k = (t * torch.rsqrt((t * t).sum(-1, keepdim=True) + L2_NORM_EPS) for t in (q, k))
        q = q / math.sqrt(dk)
        beta = torch.sigmoid(rest[..., :H]).transpose(1, 2)         # [B, H, T]
        g = None
        if self.state_gate:
            g = (-torch.exp(self.A_log) * F.softplus(rest[..., H:2 * H] + self.dt_bias)).transpose(1, 2)
        if self.form == "chunked":
            o = delta_rule_chunked(q, k, v, beta, g, self.chunk)
        else:
            o = delta_rule_recurrent(q, k, v, beta, g)
        o = self.o_norm(o).transpose(1, 2)                          # [B, T, H, dk]
        if self.output_gate:
            o = o * F.silu(rest[..., -D:]).view(B, T, H, dk)
        return self.out_proj(o.reshape(B, T, D))


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
FORMS = {
    "attention": (FastAttention, "form", ["qkv", "blocked"] + (["sdpa"] if HAS_SDPA else [])),
    "linear": (FastLinearAttention, "form", ["chunked", "quadratic"]),
    "mamba": (FastMamba, "kernel", ["chunked", "blelloch", "sequential"]),
    "deltanet": (FastDeltaNet, "form", ["chunked", "recurrent"]),
    "gated_deltanet": (FastDeltaNet, "form", ["chunked", "recurrent"]),
    "mamba2": (FastMamba2, "form", ["chunked", "recurrent"]),  # torch_ssd.py
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
