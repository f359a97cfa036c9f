"""Mamba 2 (SSD) for the JAX anchor (bench/jax_models.py): the parameters with tests/torch/models.py's
Mamba2Mixer names and initialisation laws, and the mixer in two forms of the per-head recurrence
H_t = exp(dt_t A) H_{t-1} + dt_t x_t B_t^T, y_t = H_t C_t + D x_t:
  chunked     torch_ssd.py's chunked form (its docstring gives the algebra): chunks of 64, the
              decays inside a chunk from per-segment sums, (C B^T * L) X for every chunk at once,
              a lax.scan over the chunks carrying the state [N, P]; T padded up to a multiple of
              64, the padding's outputs dropped
  sequential  lax.scan over the T steps (unrolled by 8)
Measured at 1 thread: jax_models.py's docstring.
Imported by jax_models.py after it has set XLA_FLAGS.
"""
import math

import jax
import jax.numpy as jnp
from jax import lax

CHUNK = 64
RMS_EPS = 1e-5


def sizes(cfg):
    d = cfg["d_model"]
    E = cfg["expand"] * d
    return E, cfg["head_dim"], cfg["state_size"], cfg["n_groups"], cfg["d_conv"], E // cfg["head_dim"]


def init_params(params, p, cfg, keys, uniform, linear):
    """Adds the mixer's parameters under prefix p, in models.py's order (in_proj, conv1d, dt_bias,
    A_log, D, norm, out_proj)."""
    d = cfg["d_model"]
    E, P, N, G, K, H = sizes(cfg)
    conv_dim = E + 2 * G * N
    linear(p + "in_proj", 2 * E + 2 * G * N + H, d, False)
    uniform(p + "conv1d.weight", (conv_dim, 1, K), K ** -0.5)  # nn.Conv1d's bound: fan_in = K
    uniform(p + "conv1d.bias", (conv_dim,), K ** -0.5)
    u = jax.random.uniform(next(keys), (H,), jnp.float32)
    dt = jnp.maximum(jnp.exp(u * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3)), 1e-4)
    params[p + "dt_bias"] = dt + jnp.log(-jnp.expm1(-dt))  # softplus(dt_bias) = dt
    params[p + "A_log"] = jnp.log(jax.random.uniform(next(keys), (H,), jnp.float32, 1, 16))
    params[p + "D"] = jnp.ones(H, jnp.float32)
    params[p + "norm.weight"] = jnp.ones(E, jnp.float32)
    linear(p + "out_proj", d, E, False)


def sequential(x, dt, A, Bm, Cm):
    """x [B, T, H, P], dt [B, T, H], A [H], Bm, Cm [B, T, G, N] -> y without D x, [B, T, H, P]."""
    Bsz, T, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    Bm, Cm = (jnp.repeat(M, H // G, axis=2) for M in (Bm, Cm))  # head h reads group h // (H / G)

    def step(S, xs):
        xt, dtt, bt, ct = xs
        S = jnp.exp(dtt * A)[..., None, None] * S + (dtt[..., None] * xt)[..., :, None] * bt[..., None, :]
        return S, jnp.einsum("bhpn,bhn->bhp", S, ct)

    xs = tuple(jnp.moveaxis(t, 1, 0) for t in (x, dt, Bm, Cm))
    _, y = lax.scan(step, jnp.zeros((Bsz, H, P, N), x.dtype), xs, unroll=8)
    return jnp.moveaxis(y, 0, 1)


def chunked(x, dt, A, Bm, Cm):
    Bsz, T, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    Hg = H // G
    C = min(CHUNK, T)
    pad = -T % C
    if pad:  # after every real step: dt 0 and x 0 leave the kept outputs as they are
        x, Bm, Cm = (jnp.pad(t, ((0, 0), (0, pad), (0, 0), (0, 0))) for t in (x, Bm, Cm))
        dt = jnp.pad(dt, ((0, 0), (0, pad), (0, 0)))
    n = (T + pad) // C
    # heads of a group side by side: [B, G, Hg, n, C, ...]; B and C [B, G, n, C, N], one per group
    X = (x * dt[..., None]).reshape(Bsz, n, C, G, Hg, P).transpose(0, 3, 4, 1, 2, 5)
    a = (dt * A).reshape(Bsz, n, C, G, Hg).transpose(0, 3, 4, 1, 2)
    Bc, Cc = (M.reshape(Bsz, n, C, G, N).transpose(0, 3, 1, 2, 4) for M in (Bm, Cm))
    # seg[i, j] = a_{j+1} + ... + a_i, summed per segment (a difference of the chunk's prefix sums
    # would lose float32 digits); exp only where j <= i
    seg = jnp.cumsum(a[..., :, None] * jnp.tril(jnp.ones((C, C), x.dtype), -1), -2)
    L = jnp.exp(jnp.where(jnp.tril(jnp.ones((C, C), bool)), seg, -jnp.inf))  # [B, G, Hg, n, C, C]
    CB = jnp.einsum("bgnid,bgnjd->bgnij", Cc, Bc)[:, :, None]  # one per group
    y = (CB * L) @ X  # inside the chunks
    if n > 1:
        states = jnp.swapaxes(Bc, -1, -2)[:, :, None] @ (X * L[..., -1, :, None])  # each chunk's own
        A_cum = jnp.cumsum(a, -1)
        decay_chunk = jnp.exp(A_cum[..., -1])  # [B, G, Hg, n]

        def step(h, xs):
            s, dc = xs
            return dc[..., None, None] * h + s, h  # emit the state entering the chunk

        _, h_in = lax.scan(step, jnp.zeros_like(states[:, :, :, 0]),
                           (jnp.moveaxis(states, 3, 0), jnp.moveaxis(decay_chunk, 3, 0)))
        h_in = jnp.moveaxis(h_in, 0, 3)  # [B, G, Hg, n, N, P]
        y = y + (Cc[:, :, None] * jnp.exp(A_cum)[..., None]) @ h_in
    return y.transpose(0, 3, 4, 1, 2, 5).reshape(Bsz, n * C, H, P)[:, :T]


def mixer(params, p, u, cfg, variant):
    Bsz, T, _ = u.shape
    E, P, N, G, K, H = sizes(cfg)
    proj = u @ params[p + "in_proj.weight"].T
    z, xBC, dt = proj[..., :E], proj[..., E:2 * E + 2 * G * N], proj[..., 2 * E + 2 * G * N:]
    padded = jnp.pad(xBC, ((0, 0), (K - 1, 0), (0, 0)))  # causal depthwise conv over time
    w = params[p + "conv1d.weight"][:, 0, :]
    xBC = jax.nn.silu(sum(padded[:, j:j + T] * w[:, j] for j in range(K)) + params[p + "conv1d.bias"])
    x = xBC[..., :E].reshape(Bsz, T, H, P)
    Bm = xBC[..., E:E + G * N].reshape(Bsz, T, G, N)
    Cm = xBC[..., E + G * N:].reshape(Bsz, T, G, N)
    dt = jax.nn.softplus(dt + params[p + "dt_bias"])
    A = -jnp.exp(params[p + "A_log"])
    y = (chunked if variant == "chunked" else sequential)(x, dt, A, Bm, Cm)
    y = (y + params[p + "D"][:, None] * x).reshape(Bsz, T, E) * jax.nn.silu(z)  # the gate, then the norm
    y = y.reshape(Bsz, T, G, E // G)
    y = y * lax.rsqrt((y * y).mean(-1, keepdims=True) + RMS_EPS)
    return (y.reshape(Bsz, T, E) * params[p + "norm.weight"]) @ params[p + "out_proj.weight"].T
