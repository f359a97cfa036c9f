"""The PyTorch twins of models/ (lm, block, attention, linear_attention): the same structure,
parameter names and shapes as the C++ LanguageModel, so a state_dict loads into either.

  MultiHeadAttention  the book's algorithm 2 (chapter 9, §9), made causal, with RoPE or ALiBi, and
                      optionally a sliding window (each query sees the W most recent positions)
  LinearAttention     Katharopoulos et al. 2020 from its quadratic form (masked kernel matrix),
                      phi = elu+1 | relu | identity | taylor (Based's 1 + s + s^2/2 over
                      feature_dim F), RoPE on the numerator only
  ShortConv           Based's depthwise causal conv on q, k, v (short_conv K > 0), in both
  DeltaNet            Yang et al. 2024 from its recurrence, one step at a time:
                      S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, o_t = S_t q_t / sqrt(d_k),
                      q, k, v through short convs (conv_size K > 0) and SiLU, q and k L2-normalised
                      per head (l2_norm), a per-head RMSNorm on o
  GatedDeltaNet       Yang et al. 2025: S_{t-1} scaled by alpha_t = exp(-exp(A_log) softplus(W_a x +
                      dt_bias)) (state_gate), o multiplied by SiLU(W_g x) after the norm (output_gate)
  Mamba2Mixer         Dao & Gu 2024 from its recurrence, one step at a time: per head
                      H_t = exp(dt_t A) H_{t-1} + dt_t x_t B_t^T, y_t = H_t C_t + D x_t, B and C
                      shared by groups of heads, then RMSNorm(y * SiLU(z)) per group
  Block               pre-norm x + f(norm(x)) or the book's post-norm norm(x + f(x)), optional MLP
  LanguageModel       embedding (+ sinusoidal or learned positions), blocks, norm_f, lm_head or
                      the tied embedding; Mamba blocks use mamba_ref.Mamba and RMSNorm. A hybrid
                      stack (mixers "mamba,attention") gives layer i the family mixers[i mod n],
                      with its norm; norm_f is the first family's

Config: a dict with ModelConfig's field names (models/config.hpp) and those of the family's
options (models/layers.hpp HeadOptions, models/linear_attention.hpp, models/mamba.hpp,
models/deltanet.hpp, models/mamba2.hpp): SHARED and
FAMILY_OPTIONS, merged in DEFAULTS; ADDED_LATER lists the options that configs saved before them
lack (their default applies). MIXERS maps each family to its twin, the class its registry entry
names as parity_model (models/family.hpp).
Written for clarity, not speed: every formula is the textbook one, computed in float32.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mamba_ref import Mamba

SHARED = dict(family="attention", mixers="", vocab=16, d_model=64, n_layers=2, max_seq_len=1024,
              tie_embeddings=False, pos="none", norm="pre", mlp="gelu")
FAMILY_OPTIONS = {
    "attention": dict(n_heads=4, bias=False, window=0, short_conv=0),
    "linear": dict(n_heads=4, bias=False, feature_map="elu", short_conv=0, feature_dim=0),
    "mamba": dict(d_state=16, d_conv=4, expand=2, dt_rank=0, ssm_selective=True, a_init="s4d-real"),
    "deltanet": dict(n_heads=4, conv_size=4, l2_norm=True),
    "gated_deltanet": dict(n_heads=4, conv_size=4, l2_norm=True, state_gate=True, output_gate=True),
    "mamba2": dict(state_size=64, head_dim=64, n_groups=1, d_conv=4, expand=2),
}
DEFAULTS = dict(SHARED, **{k: v for options in FAMILY_OPTIONS.values() for k, v in options.items()})
ADDED_LATER = {"window", "short_conv", "feature_dim", "mixers"}
LINEAR_ATTENTION_EPS = 1e-6  # framework/kernels/linear_attention.hpp's default
L2_NORM_EPS = 1e-6  # models/deltanet.cpp: x / sqrt(|x|^2 + eps)
# Parameters excluded from weight decay: norms (DeltaNet's o_norm among them), biases, embeddings,
# positions, and the SSM parameters models/mamba.hpp lists (A_log, D, dt_bias, B), which
# Gated DeltaNet's decay (A_log, dt_bias) and Mamba 2 (A_log, D, dt_bias) share.
MAMBA_NO_DECAY = {"A_log", "D", "dt_bias", "B"}


def no_weight_decay(name):
    parts = name.split(".")
    return (parts[-1] == "bias" or parts[-1] in MAMBA_NO_DECAY
            or any(p.startswith("norm") or p.endswith("_norm") or p.endswith("embedding") for p in parts[:-1]))


def alibi_slopes(heads):
    """Press et al. 2021: 2^(-8h/H) for H a power of two, else the paper's interleaving."""
    def power_of_two(n):
        start = 2 ** (-8 / n)
        return [start ** (h + 1) for h in range(n)]
    if math.log2(heads).is_integer():
        return power_of_two(heads)
    c = 2 ** math.floor(math.log2(heads))
    return power_of_two(c) + alibi_slopes(2 * c)[0::2][: heads - c]


def rope(x, offset=0, base=10000.0):
    """Rotate-half RoPE on x [..., T, Dh]: (x_j, x_{j+Dh/2}) rotate by (offset + t) base^(-2j/Dh)."""
    T, Dh = x.shape[-2], x.shape[-1]
    half = Dh // 2
    inv_freq = base ** (-2 * torch.arange(half, dtype=torch.float64) / Dh)
    angle = torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def sinusoidal_positions(T, D, dtype=torch.float32):
    """The book's §8: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same)."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, D, 2, dtype=torch.float64)[None, :]
    angle = pos / 10000 ** (two_i / D)
    pe = torch.zeros(T, D, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : D // 2]
    return pe.to(dtype)


def causal_mask(T, window=0):
    """True where query i sees key j: j <= i, and with a window W also i - j < W."""
    i = torch.arange(T)
    distance = i[:, None] - i[None, :]
    return (distance >= 0) & (distance < window) if window else distance >= 0


class ShortConv(nn.Conv1d):
    """Based's short convolution: depthwise and causal over time on x [B, N, C] (pad K-1 on
    both sides, keep the first N outputs), PyTorch's default Conv1d init."""
    def __init__(self, channels, width):
        super().__init__(channels, channels, width, groups=channels, padding=width - 1)

    def forward(self, x):
        return super().forward(x.transpose(1, 2))[..., : x.shape[1]].transpose(1, 2)


def add_projections(mixer, cfg, qk_width):
    """q_proj, k_proj ([qk_width, d]), v_proj, then with short_conv the convs, then out_proj:
    models/layers.hpp HeadMixer's names and order."""
    d, bias, K = cfg["d_model"], cfg["bias"], cfg["short_conv"]
    mixer.q_proj = nn.Linear(d, qk_width, bias=bias)
    mixer.k_proj = nn.Linear(d, qk_width, bias=bias)
    mixer.v_proj = nn.Linear(d, d, bias=bias)
    if K:
        mixer.q_conv, mixer.k_conv, mixer.v_conv = ShortConv(qk_width, K), ShortConv(qk_width, K), ShortConv(d, K)
    mixer.out_proj = nn.Linear(d, d, bias=bias)


def project(mixer, X):
    """Q, K, V [B, N, width]: the projections, then the short convs when there are any."""
    Q, K, V = mixer.q_proj(X), mixer.k_proj(X), mixer.v_proj(X)
    if hasattr(mixer, "q_conv"):
        Q, K, V = mixer.q_conv(Q), mixer.k_conv(K), mixer.v_conv(V)
    return Q, K, V


def taylor(x):
    """Based's second-order Taylor map over the last axis (width F):
    concat(1, x / F^(1/4), vec(x x^T) / (sqrt(2) sqrt(F))), so phi(q).phi(k) = 1 + s + s^2/2,
    s = q.k / sqrt(F)."""
    F_ = x.shape[-1]
    outer = (x[..., :, None] * x[..., None, :]).flatten(-2)
    return torch.cat([torch.ones_like(x[..., :1]), x / F_ ** 0.25, outer / (math.sqrt(2) * math.sqrt(F_))], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.h, self.dk, self.pos = cfg["n_heads"], d // cfg["n_heads"], cfg["pos"]
        self.window = cfg["window"]
        add_projections(self, cfg, d)

    def forward(self, X):
        B, N, D = X.shape
        # project and split into heads (B, h, N, dk)
        Q, K, V = (P.view(B, N, self.h, self.dk).transpose(1, 2) for P in project(self, X))
        if self.pos == "rope":
            Q, K = rope(Q), rope(K)
        scores = Q @ K.transpose(-2, -1) / self.dk ** 0.5
        if self.pos == "alibi":
            i = torch.arange(N)
            distance = (i[:, None] - i[None, :]).to(scores.dtype)
            slopes = torch.tensor(alibi_slopes(self.h), dtype=scores.dtype)
            scores = scores - slopes[:, None, None] * distance
        scores = scores.masked_fill(~causal_mask(N, self.window), float("-inf"))
        attn = F.softmax(scores, dim=-1)
        out = (attn @ V).transpose(1, 2).reshape(B, N, D)  # concatenate the heads
        return self.out_proj(out)


class LinearAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.h, self.dk = cfg["n_heads"], d // cfg["n_heads"]  # dk: the head width, v's
        self.f = cfg["feature_dim"] or self.dk  # the per-head width of q and k
        self.pos, self.feature_map = cfg["pos"], cfg["feature_map"]
        add_projections(self, cfg, self.h * self.f)

    def phi(self, x):
        if self.feature_map == "elu":
            return F.elu(x) + 1
        if self.feature_map == "relu":
            return F.relu(x)
        if self.feature_map == "taylor":
            return taylor(x)
        return x

    def forward(self, X):
        B, N, D = X.shape
        Q, K, V = project(self, X)
        Q = self.phi(Q.view(B, N, self.h, self.f)).transpose(1, 2)
        K = self.phi(K.view(B, N, self.h, self.f)).transpose(1, 2)
        V = V.view(B, N, self.h, self.dk).transpose(1, 2)
        Qn, Kn = (rope(Q), rope(K)) if self.pos == "rope" else (Q, K)
        mask = causal_mask(N).to(X.dtype)
        numerator = ((Qn @ Kn.transpose(-2, -1)) * mask) @ V
        denominator = ((Q @ K.transpose(-2, -1)) * mask).sum(-1, keepdim=True) + LINEAR_ATTENTION_EPS
        out = (numerator / denominator).transpose(1, 2).reshape(B, N, D)
        return self.out_proj(out)


class DeltaNet(nn.Module):
    """DeltaNet (Yang et al. 2024), written from its recurrence; GatedDeltaNet adds the gates.
    Parameters in models/deltanet.hpp's names: q_proj, k_proj, v_proj, [q_conv, k_conv, v_conv],
    b_proj, [a_proj, A_log, dt_bias], [g_proj], o_norm, out_proj."""
    gated = False

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.h, self.dk = cfg["n_heads"], d // cfg["n_heads"]  # d_k = d_v = the head width
        self.l2_norm = cfg["l2_norm"]
        self.state_gate = self.gated and cfg["state_gate"]
        self.output_gate = self.gated and cfg["output_gate"]
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, d, bias=False) for _ in range(3))
        if cfg["conv_size"]:
            K = cfg["conv_size"]
            self.q_conv, self.k_conv, self.v_conv = ShortConv(d, K), ShortConv(d, K), ShortConv(d, K)
        self.b_proj = nn.Linear(d, self.h, bias=False)
        if self.state_gate:
            self.a_proj = nn.Linear(d, self.h, bias=False)
            self.A_log = nn.Parameter(torch.empty(self.h).uniform_(1, 16).log())  # A in [1, 16]
            dt = torch.exp(torch.rand(self.h) * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3)).clamp(min=1e-4)
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt
        if self.output_gate:
            self.g_proj = nn.Linear(d, d, bias=False)
        self.o_norm = RMSNorm(self.dk)
        self.out_proj = nn.Linear(d, d, bias=False)

    def forward(self, X):
        B, N, D = X.shape
        Q, K, V = (F.silu(P).view(B, N, self.h, self.dk) for P in project(self, X))
        if self.l2_norm:
            Q, K = (P / torch.sqrt((P * P).sum(-1, keepdim=True) + L2_NORM_EPS) for P in (Q, K))
        beta = torch.sigmoid(self.b_proj(X))  # [B, N, h]
        if self.state_gate:
            alpha = torch.exp(-torch.exp(self.A_log) * F.softplus(self.a_proj(X) + self.dt_bias))
        else:
            alpha = torch.ones_like(beta)
        eye = torch.eye(self.dk, dtype=X.dtype)
        S = X.new_zeros(B, self.h, self.dk, self.dk)  # d_v x d_k per head
        outs = []
        for t in range(N):
            q, k, v = Q[:, t, :, :, None], K[:, t, :, :, None], V[:, t, :, :, None]  # [B, h, d, 1]
            a, b = alpha[:, t, :, None, None], beta[:, t, :, None, None]
            # S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T;  o_t = S_t q_t / sqrt(d_k)
            S = a * S @ (eye - b * k @ k.transpose(-2, -1)) + b * v @ k.transpose(-2, -1)
            outs.append((S @ q)[..., 0] / math.sqrt(self.dk))
        o = self.o_norm(torch.stack(outs, 1))  # [B, N, h, d], normed per head
        if self.output_gate:
            o = o * F.silu(self.g_proj(X)).view(B, N, self.h, self.dk)
        return self.out_proj(o.reshape(B, N, D))


class GatedDeltaNet(DeltaNet):
    gated = True


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MambaMixer(Mamba):
    def __init__(self, cfg):
        super().__init__(cfg["d_model"], d_state=cfg["d_state"], d_conv=cfg["d_conv"],
                         expand=cfg["expand"], dt_rank=cfg["dt_rank"] or None,
                         selective=cfg["ssm_selective"], a_init=cfg["a_init"])


class Mamba2Mixer(nn.Module):
    """Mamba 2 (Dao & Gu 2024), written from its recurrence. Parameters in mamba_ssm's Mamba2
    names: in_proj, conv1d, dt_bias, A_log, D, norm, out_proj."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.E = cfg["expand"] * d
        self.P, self.N, self.G, K = cfg["head_dim"], cfg["state_size"], cfg["n_groups"], cfg["d_conv"]
        self.H = self.E // self.P
        conv_dim = self.E + 2 * self.G * self.N
        self.in_proj = nn.Linear(d, 2 * self.E + 2 * self.G * self.N + self.H, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, K, groups=conv_dim, padding=K - 1)
        dt = torch.exp(torch.rand(self.H) * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt
        self.A_log = nn.Parameter(torch.empty(self.H).uniform_(1, 16).log())  # A in [1, 16]
        self.D = nn.Parameter(torch.ones(self.H))
        self.norm = RMSNorm(self.E)
        self.out_proj = nn.Linear(self.E, d, bias=False)

    def forward(self, u):
        Bsz, T, _ = u.shape
        E, P, N, G, H = self.E, self.P, self.N, self.G, self.H
        z, xBC, dt = torch.split(self.in_proj(u), [E, E + 2 * G * N, H], dim=-1)
        xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :T].transpose(1, 2))
        x, Bm, Cm = torch.split(xBC, [E, G * N, G * N], dim=-1)
        x = x.reshape(Bsz, T, H, P)
        # Head h reads group h // (H / G).
        Bm, Cm = (M.reshape(Bsz, T, G, N).repeat_interleave(H // G, dim=2) for M in (Bm, Cm))
        dt = F.softplus(dt + self.dt_bias)  # [B, T, H]
        A = -torch.exp(self.A_log)
        S = u.new_zeros(Bsz, H, P, N)
        ys = []
        for t in range(T):
            # H_t = exp(dt_t A) H_{t-1} + dt_t x_t B_t^T;  y_t = H_t C_t + D x_t
            a = torch.exp(dt[:, t] * A)[:, :, None, None]
            S = a * S + (dt[:, t, :, None, None] * x[:, t, :, :, None]) * Bm[:, t, :, None, :]
            ys.append((S * Cm[:, t, :, None, :]).sum(-1) + self.D[:, None] * x[:, t])
        y = torch.stack(ys, 1).reshape(Bsz, T, E) * F.silu(z)  # the gate, then the norm
        y = y.reshape(Bsz, T, G, E // G)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.norm.eps)
        return self.out_proj(y.reshape(Bsz, T, E) * self.norm.weight)


MIXERS = {"attention": MultiHeadAttention, "linear": LinearAttention, "mamba": MambaMixer,
          "deltanet": DeltaNet, "gated_deltanet": GatedDeltaNet, "mamba2": Mamba2Mixer}


def make_mixer(cfg):
    return MIXERS[cfg["family"]](cfg)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.mamba = cfg["d_model"], cfg["family"] in ("mamba", "mamba2")  # RMSNorm named "norm"
        Norm = RMSNorm if self.mamba else nn.LayerNorm
        if self.mamba:
            self.norm = RMSNorm(d)
        else:
            self.norm1 = nn.LayerNorm(d)
        self.mixer = make_mixer(cfg)
        self.pre_norm, self.has_mlp = cfg["norm"] == "pre", cfg["mlp"] != "none"
        if self.has_mlp:
            self.norm2 = Norm(d)
            self.mlp = Mlp(d)

    def forward(self, x):
        norm1 = self.norm if self.mamba else self.norm1
        if self.pre_norm:
            x = x + self.mixer(norm1(x))
            return x + self.mlp(self.norm2(x)) if self.has_mlp else x
        x = norm1(x + self.mixer(x))                         # the book: attention + residual + LN
        return self.norm2(x + self.mlp(x)) if self.has_mlp else x


def layer_families(cfg):
    """The family of each entry of a hybrid's mixers (commas, spaces or '+' separate), or [family]."""
    names = cfg["mixers"].replace("+", ",").replace(" ", ",").split(",")
    return [n for n in names if n] or [cfg["family"]]


def layer_config(cfg, i):
    families = layer_families(cfg)
    return dict(cfg, family=families[i % len(families)], mixers="")


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.pos = cfg["pos"]
        self.embedding = nn.Embedding(cfg["vocab"], d)
        if self.pos == "learned":
            self.pos_embedding = nn.Embedding(cfg["max_seq_len"], d)
        for table in self.modules():
            if isinstance(table, nn.Embedding):
                nn.init.normal_(table.weight, std=0.02)  # as models/lm.hpp (GPT-2, mamba_ssm)
        self.layers = nn.ModuleList(Block(layer_config(cfg, i)) for i in range(cfg["n_layers"]))
        self.norm_f = RMSNorm(d) if layer_families(cfg)[0] in ("mamba", "mamba2") else nn.LayerNorm(d)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.embedding(ids)
        if self.pos == "sinusoidal":
            x = x + sinusoidal_positions(T, x.shape[-1], x.dtype)
        if self.pos == "learned":
            x = x + self.pos_embedding.weight[:T]
        for layer in self.layers:
            x = layer(x)
        return self.norm_f(x)


class LanguageModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(DEFAULTS, **cfg)
        self.backbone = Backbone(self.cfg)
        if not self.cfg["tie_embeddings"]:
            self.lm_head = nn.Linear(self.cfg["d_model"], self.cfg["vocab"], bias=False)

    def forward(self, ids):
        h = self.backbone(ids)
        if self.cfg["tie_embeddings"]:
            return F.linear(h, self.backbone.embedding.weight)
        return self.lm_head(h)
