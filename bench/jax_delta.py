"""DeltaNet and Gated DeltaNet for the JAX anchor (bench/jax_models.py): the parameters with
tests/torch/models.py's names and initialisation laws, and the mixer in two forms of the delta rule
S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, o_t = S_t q_t / sqrt(d_k):
  chunked     torch_forms.py's chunked form (its docstring gives the algebra): chunks of 64, the
              pseudo-values of every chunk by a unit lower triangular solve (the UT transform) made of
              products (unit_lower_solve),
              then a lax.scan over the chunks carrying the state [d_k, d_v]; T padded up to a
              multiple of 64, the padding's outputs dropped
  sequential  lax.scan over the T steps (unrolled by 8)
Measured at 1 thread (median ms per step over 3 steps on a shared, loaded machine), with
lax.linalg.triangular_solve for the solve: E64 chunked 274 vs sequential 292 (deltanet), 335 vs
356 (gated_deltanet); S chunked 286 vs 742, 529 vs 963 -> chunked. With unit_lower_solve: see
jax_models.py's docstring.
Imported by jax_models.py after it has set XLA_FLAGS.
"""
import math

import jax
import jax.numpy as jnp
from jax import lax

CHUNK = 64
RMS_EPS = 1e-5


def gates(cfg):
    gated = cfg["family"] == "gated_deltanet"
    return gated and cfg["state_gate"], gated and cfg["output_gate"]


def init_params(params, p, cfg, keys, uniform, linear):
    """Adds the mixer's parameters under prefix p, in models.py's order (q/k/v, convs, b_proj,
    a_proj, A_log, dt_bias, g_proj, o_norm, out_proj)."""
    d, H, K = cfg["d_model"], cfg["n_heads"], cfg["conv_size"]
    state_gate, output_gate = gates(cfg)
    for proj in ("q_proj", "k_proj", "v_proj"):
        linear(p + proj, d, d, False)
    for conv in ("q_conv", "k_conv", "v_conv") if K else ():
        uniform(p + conv + ".weight", (d, 1, K), K ** -0.5)  # nn.Conv1d's bound: fan_in = K
        uniform(p + conv + ".bias", (d,), K ** -0.5)
    linear(p + "b_proj", H, d, False)
    if state_gate:
        linear(p + "a_proj", H, d, False)
        params[p + "A_log"] = jnp.log(jax.random.uniform(next(keys), (H,), jnp.float32, 1, 16))
        u = jax.random.uniform(next(keys), (H,), jnp.float32)
        dt = jnp.maximum(jnp.exp(u * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3)), 1e-4)
        params[p + "dt_bias"] = dt + jnp.log(-jnp.expm1(-dt))  # softplus(dt_bias) = dt
    if output_gate:
        linear(p + "g_proj", d, d, False)
    params[p + "o_norm.weight"] = jnp.ones(d // H, jnp.float32)
    linear(p + "out_proj", d, d, False)


def recurrent(q, k, v, beta, g):
    """q (scaled), k [B, H, T, dk], v [B, H, T, dv], beta, g (log-decay, or None) [B, H, T] -> o
    [B, H, T, dv]; the state h = S^T, [dk, dv]."""
    B, H, T, dk = k.shape
    alpha = jnp.ones_like(beta) if g is None else jnp.exp(g)

    def step(h, xs):
        qt, kt, vt, bt, at = xs
        h = h * at[..., None, None]
        u = bt[..., None] * (vt - jnp.einsum("bhkv,bhk->bhv", h, kt))  # beta (v - S k)
        h = h + kt[..., :, None] * u[..., None, :]
        return h, jnp.einsum("bhkv,bhk->bhv", h, qt)

    xs = tuple(jnp.moveaxis(t, 2, 0) for t in (q, k, v, beta, alpha))
    _, o = lax.scan(step, jnp.zeros((B, H, dk, v.shape[-1]), q.dtype), xs, unroll=8)
    return jnp.moveaxis(o, 0, 2)


def unit_lower_solve(L, rhs, block=16):
    """(I + L)^-1 rhs for L strictly lower [..., C, C], products only: block forward substitution,
    each diagonal block inverted as (I - M)(I + M^2)(I + M^4)... (M nilpotent). Not
    lax.linalg.triangular_solve: jaxlib's batched solve waits on XLA's intra-op pool from inside it,
    and two of them at once (the backward has two) deadlocked a run."""
    C = L.shape[-1]
    b = block if C % block == 0 else C
    xs = []
    for s in range(0, C, b):
        r = rhs[..., s:s + b, :]
        if s:
            r = r - L[..., s:s + b, :s] @ jnp.concatenate(xs, -2)
        M = -L[..., s:s + b, s:s + b]
        for _ in range(max(1, (b - 1).bit_length())):
            r = r + M @ r
            M = M @ M
        xs.append(r)
    return jnp.concatenate(xs, -2)


def chunked(q, k, v, beta, g):
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    C = min(CHUNK, T)
    pad = -T % C
    if pad:  # after every real step: changes no output that is kept
        q, k, v = (jnp.pad(t, ((0, 0), (0, 0), (0, pad), (0, 0))) for t in (q, k, v))
        beta = jnp.pad(beta, ((0, 0), (0, 0), (0, pad)))
        g = None if g is None else jnp.pad(g, ((0, 0), (0, 0), (0, pad)))
    n = (T + pad) // C
    q, k, v = (t.reshape(B, H, n, C, t.shape[-1]) for t in (q, k, v))
    beta = beta.reshape(B, H, n, C, 1)
    causal = jnp.tril(jnp.ones((C, C), bool))
    if g is None:
        decay = causal.astype(q.dtype)
        q_gamma, k_gamma, k_end = q, k, k
        gamma_end = jnp.ones((B, H, n, 1, 1), q.dtype)
    else:
        g = g.reshape(B, H, n, C)
        G = jnp.cumsum(g, -1)
        # G_i - G_j as the sum of g over (j, i] (a difference of cumsums near -100 would lose
        # float32 digits); exp only where j <= i, the exponents above being positive
        seg = jnp.cumsum(g[..., :, None] * jnp.tril(jnp.ones((C, C), q.dtype), -1), -2)
        decay = jnp.exp(jnp.where(causal, seg, -jnp.inf))
        gamma = jnp.exp(G)[..., None]
        q_gamma, k_gamma = q * gamma, k * gamma
        k_end = k * decay[..., -1, :, None]  # exp(G_C - G_j)
        gamma_end = jnp.exp(G[..., -1])[..., None, None]
    strict = decay * (1 - jnp.eye(C, dtype=q.dtype))
    L = jnp.einsum("bhnik,bhnjk->bhnij", k * beta, k) * strict
    rhs = jnp.concatenate([v * beta, k_gamma * beta], -1)
    X = unit_lower_solve(L, rhs)
    u_bar, W = X[..., :dv], X[..., dv:]
    att = jnp.einsum("bhnik,bhnjk->bhnij", q, k) * decay

    def step(h, xs):
        u_bar, W, q_gamma, att, k_end, gamma_end = xs
        u = u_bar - W @ h
        o = q_gamma @ h + att @ u
        return h * gamma_end + jnp.swapaxes(k_end, -1, -2) @ u, o

    xs = tuple(jnp.moveaxis(t, 2, 0) for t in (u_bar, W, q_gamma, att, k_end, gamma_end))
    _, o = lax.scan(step, jnp.zeros((B, H, dk, dv), q.dtype), xs)
    return jnp.moveaxis(o, 0, 2).reshape(B, H, n * C, dv)[:, :, :T]


def mixer(params, p, x, cfg, variant):
    B, T, D = x.shape
    H = cfg["n_heads"]
    dk = D // H
    state_gate, output_gate = gates(cfg)
    names = ["q_proj", "k_proj", "v_proj", "b_proj"] + ["a_proj"] * state_gate + ["g_proj"] * output_gate
    proj = x @ jnp.concatenate([params[p + n + ".weight"] for n in names]).T  # one product
    qkv, rest = proj[..., :3 * D], proj[..., 3 * D:]
    if p + "q_conv.weight" in params:  # causal depthwise conv over time, the three at once
        w = jnp.concatenate([params[p + c + ".weight"][:, 0, :] for c in ("q_conv", "k_conv", "v_conv")])
        bias = jnp.concatenate([params[p + c + ".bias"] for c in ("q_conv", "k_conv", "v_conv")])
        K = w.shape[-1]
        padded = jnp.pad(qkv, ((0, 0), (K - 1, 0), (0, 0)))
        qkv = sum(padded[:, j:j + T] * w[:, j] for j in range(K)) + bias
    qkv = jax.nn.silu(qkv).reshape(B, T, 3, H, dk).transpose(2, 0, 3, 1, 4)  # [3, B, H, T, dk]
    q, k, v = qkv[0], qkv[1], qkv[2]
    if cfg["l2_norm"]:
        from models import L2_NORM_EPS
        q, k = (t * lax.rsqrt((t * t).sum(-1, keepdims=True) + L2_NORM_EPS) for t in (q, k))
    q = q / math.sqrt(dk)
    beta = jax.nn.sigmoid(rest[..., :H]).transpose(0, 2, 1)  # [B, H, T]
    g = None
    if state_gate:
        g = (-jnp.exp(params[p + "A_log"]) * jax.nn.softplus(rest[..., H:2 * H] + params[p + "dt_bias"])).transpose(0, 2, 1)
    o = (chunked if variant == "chunked" else recurrent)(q, k, v, beta, g)
    o = o * lax.rsqrt((o * o).mean(-1, keepdims=True) + RMS_EPS) * params[p + "o_norm.weight"]
    o = o.transpose(0, 2, 1, 3)  # [B, T, H, dk]
    if output_gate:
        o = o * jax.nn.silu(rest[..., -D:]).reshape(B, T, H, dk)
    y = o.reshape(B, T, D) @ params[p + "out_proj.weight"].T
    return y
