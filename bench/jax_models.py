"""The JAX anchor of the training benchmark: bench/torch_models.py's models (tests/torch/models.py's
LanguageModel: the same shapes, parameter names and counts, the same initialisation laws) and its
training step (cross entropy, clip-grad-norm 1.0, AdamW lr 1e-3, betas 0.9/0.999, eps 1e-8,
weight decay 0.1 except norms, biases, embeddings and Mamba's A_log/D, warm-up then cosine), the
whole step under one jax.jit with the parameters and optimizer state donated. Runs in the
anchors' venv (bench/anchors_venv.sh).

Forms, per mixer (--variant picks another):
  attention  causal softmax: one fused q/k/v product, einsum scores, where(-inf) mask, softmax
  linear     chunked (chunks of 64, as torch_forms.py's: masked quadratic form inside a chunk,
             an exclusive cumsum of the per-chunk states across chunks); quadratic when T % 64
  mamba      the selective scan h_t = a_t h_{t-1} + b_t (a = exp(dt A), b = dt B u) as
               associative  lax.associative_scan over T (log-depth, T log T work)
               chunked      lax.associative_scan inside chunks of 64, a lax.scan over the chunk
                            boundaries, then h += P carry (as torch_scan.py's chunked kernel)
               sequential   lax.scan over the T steps (unrolled by 8)
             measured at 1 thread, CPU ms per step on a shared machine: E64 associative 1117,
             1161 vs sequential 970, 1150 vs chunked 1028 (the same computation as associative
             at T <= 64); S associative 2614 vs chunked 3011 -> associative as the default
  deltanet, gated_deltanet  the delta rule (bench/jax_delta.py): chunked (chunks of 64, the UT
             transform inside, a lax.scan across) or sequential (lax.scan over the T steps);
             measured at 1 thread, CPU ms per step (deltanet, gated_deltanet) on a machine at load
             5: E64 chunked 210, 316-353 vs sequential 201, 259-267; S chunked 410, 541 vs
             sequential 515, 640 -> sequential at T <= 64 (one chunk), chunked above
  mamba2     the SSD recurrence (bench/jax_ssd.py): chunked (chunks of 64, per-segment decays,
             a lax.scan over the chunk states) or sequential (lax.scan over the T steps)
             measured at 1 thread, median ms per step over 3 steps at load 3-4 (CPU ms in
             brackets): E64 chunked 328 (234) vs sequential 1120 (750); S chunked 858 (572) vs
             sequential 1916 (1274) -> chunked

--threads N sets XLA_FLAGS (--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1 for
N = 1, intra_op_parallelism_threads=N otherwise), OMP_NUM_THREADS and OPENBLAS_NUM_THREADS before
jax is imported; compile seconds (lower +
compile of the step, apart from the timed steps) are reported as compile_s.

--check: the twin tests/torch/models.py under the venv's torch, same seed, its weights copied in;
logits, loss and every gradient compared as RMS relative error against the twin in float64,
tolerance 1e-4: float32 reductions reordered over <= 256 terms land near 1e-6, while a wrong
formula or a misplaced weight is off by 1e-2 or more. A gradient is measured against its own RMS,
or 1e-3 of the largest gradient RMS if that is larger: k_proj.bias's gradient is zero in exact
arithmetic (softmax ignores a shift shared by all keys), so its relative error means nothing.

Usage: .../bench-venv/bin/python bench/jax_models.py --config S|W|L1024|...|E1024
       --model attention|linear|mamba|deltanet|gated_deltanet|mamba2 [--variant V] [--steps 10] [--warmup 2] [--threads 1] [--json]
       .../bench-venv/bin/python bench/jax_models.py --check
"""
import argparse
import math
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
sys.path.insert(0, HERE)

VARIANTS = {"attention": ["softmax"], "linear": ["chunked", "quadratic"],
            "mamba": ["associative", "chunked", "sequential"],
            "deltanet": ["chunked", "sequential"], "gated_deltanet": ["chunked", "sequential"],
            "mamba2": ["chunked", "sequential"]}
DEFAULT_VARIANT = {"attention": "softmax", "linear": "chunked", "mamba": "associative",
                   "deltanet": "chunked", "gated_deltanet": "chunked", "mamba2": "chunked"}
DELTA_FAMILIES = ("deltanet", "gated_deltanet")
CHUNK = 64
LN_EPS = RMS_EPS = 1e-5


def xla_flags(threads):
    """One thread: XLA's Eigen pool off. More: XLA has no flag for a count; its pool takes every
    core, which is the count the benchmarks ask for on the 2-core machine."""
    if threads == 1:
        return "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return ""


def set_threads(threads):
    """Must run before jax is imported."""
    flags = " ".join(f for f in (os.environ.get("XLA_FLAGS", ""), xla_flags(threads)) if f)
    if flags:
        os.environ["XLA_FLAGS"] = flags
    if threads > 0:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        # jaxlib's LAPACK/BLAS custom calls run on scipy's OpenBLAS, which starts a pool of its own
        os.environ["OPENBLAS_NUM_THREADS"] = str(threads)


def import_jax():
    global jax, jnp, lax
    import jax
    import jax.numpy as jnp
    from jax import lax


# --- parameters: names and initialisation laws of models.py (torch's nn.Linear, nn.Conv1d, ...)

def init_params(cfg, key):
    from models import DEFAULTS
    from mamba_ref import DT_FLOOR, DT_MAX, DT_MIN
    cfg = dict(DEFAULTS, **cfg)
    d, vocab, family = cfg["d_model"], cfg["vocab"], cfg["family"]
    params, keys = {}, iter(jax.random.split(key, 256))

    def uniform(name, shape, bound):
        params[name] = jax.random.uniform(next(keys), shape, jnp.float32, -bound, bound)

    def linear(name, n_out, n_in, bias):
        uniform(name + ".weight", (n_out, n_in), n_in ** -0.5)
        if bias:
            uniform(name + ".bias", (n_out,), n_in ** -0.5)

    def norm(name, rms):
        params[name + ".weight"] = jnp.ones(d, jnp.float32)
        if not rms:
            params[name + ".bias"] = jnp.zeros(d, jnp.float32)

    params["backbone.embedding.weight"] = 0.02 * jax.random.normal(next(keys), (vocab, d), jnp.float32)
    if cfg["pos"] == "learned":
        params["backbone.pos_embedding.weight"] = 0.02 * jax.random.normal(next(keys), (cfg["max_seq_len"], d), jnp.float32)
    for i in range(cfg["n_layers"]):
        p = f"backbone.layers.{i}."
        if family == "mamba":
            E, N, K = cfg["expand"] * d, cfg["d_state"], cfg["d_conv"]
            R = cfg["dt_rank"] or math.ceil(d / 16)
            norm(p + "norm", True)
            linear(p + "mixer.in_proj", 2 * E, d, False)
            uniform(p + "mixer.conv1d.weight", (E, 1, K), K ** -0.5)
            uniform(p + "mixer.conv1d.bias", (E,), K ** -0.5)
            linear(p + "mixer.x_proj", R + 2 * N, E, False)
            uniform(p + "mixer.dt_proj.weight", (E, R), R ** -0.5)
            u = jax.random.uniform(next(keys), (E,), jnp.float32)
            dt = jnp.maximum(jnp.exp(u * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN)), DT_FLOOR)
            params[p + "mixer.dt_proj.bias"] = dt + jnp.log(-jnp.expm1(-dt))
            params[p + "mixer.A_log"] = jnp.tile(jnp.log(jnp.arange(1, N + 1, dtype=jnp.float32)), (E, 1))
            params[p + "mixer.D"] = jnp.ones(E, jnp.float32)
            linear(p + "mixer.out_proj", d, E, False)
        elif family == "mamba2":
            import jax_ssd
            norm(p + "norm", True)
            jax_ssd.init_params(params, p + "mixer.", cfg, keys, uniform, linear)
        else:
            norm(p + "norm1", False)
            if family in DELTA_FAMILIES:
                import jax_delta
                jax_delta.init_params(params, p + "mixer.", cfg, keys, uniform, linear)
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj") if family not in DELTA_FAMILIES else ():
                linear(p + "mixer." + proj, d, d, cfg["bias"])
            if cfg["mlp"] != "none":
                norm(p + "norm2", False)
                linear(p + "mlp.fc1", 4 * d, d, True)
                linear(p + "mlp.fc2", d, 4 * d, True)
    norm("backbone.norm_f", family in ("mamba", "mamba2"))
    if not cfg["tie_embeddings"]:
        linear("lm_head", vocab, d, False)
    return params


# --- the forward pass

def dense(params, name, x):
    y = x @ params[name + ".weight"].T
    return y + params[name + ".bias"] if name + ".bias" in params else y


def layer_norm(params, name, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + LN_EPS) * params[name + ".weight"] + params[name + ".bias"]


def rms_norm(params, name, x):
    return x * lax.rsqrt((x * x).mean(-1, keepdims=True) + RMS_EPS) * params[name + ".weight"]


def heads_qkv(params, p, x, heads):
    """One product on the concatenated q/k/v weights; each [B, H, T, dh]."""
    B, T, D = x.shape
    w = jnp.concatenate([params[p + n + ".weight"] for n in ("q_proj", "k_proj", "v_proj")])
    qkv = x @ w.T
    if p + "q_proj.bias" in params:
        qkv = qkv + jnp.concatenate([params[p + n + ".bias"] for n in ("q_proj", "k_proj", "v_proj")])
    qkv = qkv.reshape(B, T, 3, heads, D // heads).transpose(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]


def merge_heads(out):
    B, H, T, dh = out.shape
    return out.transpose(0, 2, 1, 3).reshape(B, T, H * dh)


def softmax_attention(params, p, x, heads, variant):
    q, k, v = heads_qkv(params, p, x, heads)
    T = x.shape[1]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    scores = jnp.where(jnp.tril(jnp.ones((T, T), bool)), scores, -jnp.inf)
    out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1), v)
    return dense(params, p + "out_proj", merge_heads(out))


def linear_attention(params, p, x, heads, variant):
    from models import LINEAR_ATTENTION_EPS
    q, k, v = heads_qkv(params, p, x, heads)
    q, k = jax.nn.elu(q) + 1, jax.nn.elu(k) + 1
    B, H, T, dh = q.shape
    C = min(CHUNK, T)
    if variant == "quadratic" or T % C:
        att = jnp.einsum("bhqd,bhkd->bhqk", q, k) * jnp.tril(jnp.ones((T, T), q.dtype))
        out = att @ v / (att.sum(-1, keepdims=True) + LINEAR_ATTENTION_EPS)
    else:
        qc, kc, vc = (t.reshape(B, H, T // C, C, dh) for t in (q, k, v))
        att = jnp.einsum("bhnqd,bhnkd->bhnqk", qc, kc) * jnp.tril(jnp.ones((C, C), q.dtype))
        kv = jnp.einsum("bhnkd,bhnke->bhnde", kc, vc)
        S = jnp.cumsum(kv, 2) - kv                       # the state before each chunk
        ksum = kc.sum(3)
        z = jnp.cumsum(ksum, 2) - ksum
        num = jnp.einsum("bhnqd,bhnde->bhnqe", qc, S) + att @ vc
        den = att.sum(-1) + jnp.einsum("bhnqd,bhnd->bhnq", qc, z) + LINEAR_ATTENTION_EPS
        out = (num / den[..., None]).reshape(B, H, T, dh)
    return dense(params, p + "out_proj", merge_heads(out))


def combine(left, right):
    """Composition of h -> a h + b maps, left one first."""
    return left[0] * right[0], right[0] * left[1] + right[1]


def linear_scan(a, b, variant):
    """h_t = a_t h_{t-1} + b_t along axis 1 of [B, T, ...], h_{-1} = 0."""
    T = a.shape[1]
    if variant == "sequential":
        def time_step(h, ab):
            h = ab[0] * h + ab[1]
            return h, h
        _, h = lax.scan(time_step, jnp.zeros_like(b[:, 0]), (jnp.moveaxis(a, 1, 0), jnp.moveaxis(b, 1, 0)),
                        unroll=8)
        return jnp.moveaxis(h, 0, 1)
    if variant == "associative" or T <= CHUNK or T % CHUNK:  # time-major: contiguous strided slices
        h = lax.associative_scan(combine, (jnp.moveaxis(a, 1, 0), jnp.moveaxis(b, 1, 0)), axis=0)[1]
        return jnp.moveaxis(h, 0, 1)
    n = T // CHUNK
    A, Bv = (t.reshape(t.shape[0], n, CHUNK, *t.shape[2:]) for t in (a, b))
    P, h = lax.associative_scan(combine, (A, Bv), axis=2)   # inside every chunk from a zero state

    def carry_step(state, chunk):
        P_last, h_last = chunk
        new = P_last * state + h_last
        return new, state                                    # emit the state entering the chunk

    _, entering = lax.scan(carry_step, jnp.zeros_like(h[:, 0, -1]),
                           (jnp.moveaxis(P[:, :, -1], 1, 0), jnp.moveaxis(h[:, :, -1], 1, 0)))
    h = h + P * jnp.moveaxis(entering, 0, 1)[:, :, None]
    return h.reshape(b.shape)


def mamba_mixer(params, p, x, variant):
    B, T, _ = x.shape
    A_log = params[p + "A_log"]
    E, N = A_log.shape
    R = params[p + "dt_proj.weight"].shape[1]
    K = params[p + "conv1d.weight"].shape[-1]
    xz = dense(params, p + "in_proj", x)
    u, z = xz[..., :E], xz[..., E:]
    padded = jnp.pad(u, ((0, 0), (K - 1, 0), (0, 0)))          # causal depthwise conv over time
    w = params[p + "conv1d.weight"][:, 0, :]                     # [E, K]
    u = sum(padded[:, j:j + T] * w[:, j] for j in range(K)) + params[p + "conv1d.bias"]
    u = jax.nn.silu(u)
    x_dbl = dense(params, p + "x_proj", u)
    dt, Bm, Cm = x_dbl[..., :R], x_dbl[..., R:R + N], x_dbl[..., R + N:]
    delta = jax.nn.softplus(dense(params, p + "dt_proj", dt))   # [B, T, E]
    a = jnp.exp(delta[..., None] * -jnp.exp(A_log))               # [B, T, E, N]
    b = (delta * u)[..., None] * Bm[:, :, None, :]
    h = linear_scan(a, b, variant)
    y = (h * Cm[:, :, None, :]).sum(-1) + u * params[p + "D"]  # a sum, not a dot: 1 x N per (b, t, e)
    return dense(params, p + "out_proj", y * jax.nn.silu(z))


def forward(params, ids, cfg, variant):
    from models import DEFAULTS
    cfg = dict(DEFAULTS, **cfg)
    T = ids.shape[1]
    x = params["backbone.embedding.weight"][ids]
    if cfg["pos"] == "learned":
        x = x + params["backbone.pos_embedding.weight"][:T]
    mamba = cfg["family"] in ("mamba", "mamba2")
    for i in range(cfg["n_layers"]):
        p = f"backbone.layers.{i}."
        if mamba:
            if cfg["family"] == "mamba2":
                import jax_ssd
                x = x + jax_ssd.mixer(params, p + "mixer.", rms_norm(params, p + "norm", x), cfg, variant)
                continue
            x = x + mamba_mixer(params, p + "mixer.", rms_norm(params, p + "norm", x), variant)
            continue
        mixer = softmax_attention if cfg["family"] == "attention" else linear_attention
        if cfg["family"] in DELTA_FAMILIES:
            import jax_delta
            mixer = lambda params, p, x, heads, variant: jax_delta.mixer(params, p, x, cfg, variant)  # noqa: E731
        x = x + mixer(params, p + "mixer.", layer_norm(params, p + "norm1", x), cfg["n_heads"], variant)
        if cfg["mlp"] != "none":
            hidden = jax.nn.gelu(dense(params, p + "mlp.fc1", layer_norm(params, p + "norm2", x)), approximate=False)
            x = x + dense(params, p + "mlp.fc2", hidden)
    x = (rms_norm if mamba else layer_norm)(params, "backbone.norm_f", x)
    head = params["backbone.embedding.weight"] if cfg["tie_embeddings"] else params["lm_head.weight"]
    return x @ head.T


def loss_fn(params, ids, targets, cfg, variant):
    logits = forward(params, ids, cfg, variant)
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.take_along_axis(logp, targets[..., None], -1).mean()


# --- the training step: torch.optim.AdamW's update and clip_grad_norm_'s clipping

def make_train_step(cfg, variant):
    from models import no_weight_decay
    from torch_models import BETAS, CLIP, EPS, WEIGHT_DECAY

    def step(params, opt, ids, targets, lr):
        loss, grads = jax.value_and_grad(loss_fn)(params, ids, targets, cfg, variant)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))
        scale = jnp.minimum(1.0, CLIP / (norm + 1e-6))
        t = opt["t"] + 1
        bc1, bc2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t
        new_params, m, v = {}, {}, {}
        for name, p in params.items():
            g = grads[name] * scale
            m[name] = BETAS[0] * opt["m"][name] + (1 - BETAS[0]) * g
            v[name] = BETAS[1] * opt["v"][name] + (1 - BETAS[1]) * g * g
            decay = 0.0 if no_weight_decay(name) else WEIGHT_DECAY
            p = p * (1 - lr * decay)
            new_params[name] = p - (lr / bc1) * m[name] / (jnp.sqrt(v[name]) / jnp.sqrt(bc2) + EPS)
        return new_params, {"t": t, "m": m, "v": v}, loss

    return jax.jit(step, donate_argnums=(0, 1))


def default_variant(model, T):
    if model in DELTA_FAMILIES and T <= CHUNK:  # one chunk: the solve costs more than the steps it replaces
        return "sequential"
    return DEFAULT_VARIANT[model]


def bench(a):
    from torch_models import CONFIGS, EXPERIMENT_VOCAB, VOCAB, lr_at, model_config
    d, layers, heads, T, batch = CONFIGS[a.config]
    experiment = a.config.startswith("E")
    cfg = model_config(a.model, d, layers, heads, T, experiment)
    variant = a.variant or default_variant(a.model, T)
    params = init_params(cfg, jax.random.PRNGKey(0))
    opt = {"t": jnp.zeros((), jnp.float32), "m": jax.tree_util.tree_map(jnp.zeros_like, params),
           "v": jax.tree_util.tree_map(jnp.zeros_like, params)}
    n_params = sum(int(p.size) for p in params.values())
    vocab = EXPERIMENT_VOCAB if experiment else VOCAB
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    ids = jax.random.randint(k1, (batch, T), 0, vocab)
    targets = jax.random.randint(k2, (batch, T), 0, vocab)
    step = make_train_step(cfg, variant)
    t0 = time.perf_counter()
    compiled = step.lower(params, opt, ids, targets, jnp.float32(0)).compile()
    compile_s = time.perf_counter() - t0
    total, ms, cpu_ms = a.warmup + a.steps, [], []
    cpu0 = wall0 = None
    for i in range(total):
        if i == a.warmup:
            cpu0, wall0 = time.process_time(), time.perf_counter()
        t0, c0 = time.perf_counter(), time.process_time()
        params, opt, loss = compiled(params, opt, ids, targets, jnp.float32(lr_at(i, total)))
        loss.block_until_ready()
        if i >= a.warmup:
            ms.append(round(1e3 * (time.perf_counter() - t0), 3))
            cpu_ms.append(1e3 * (time.process_time() - c0))
    cpu_per_wall = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    med = statistics.median(ms)
    return {"config": a.config, "model": a.model, "form": "jit", "variant": variant, "params": n_params,
            "ms_median": med, "ms": ms, "tokens_per_s": round(batch * T / med * 1e3, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "jax": jax.__version__, "threads": a.threads, "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "compile_s": round(compile_s, 2), "cpu_per_wall": round(cpu_per_wall, 2),
            "cpu_ms_median": round(statistics.median(cpu_ms), 3),
            "final_loss": round(float(loss), 4)}


def check():
    """JAX against the torch twin (float64) on the same weights; returns the failing tensor count."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_models import VOCAB, build
    tolerance, failures = 1e-4, 0
    d, layers, heads, T, batch = 32, 2, 4, 256, 2
    cases = [(family, T) for family in VARIANTS] + [(family, 100) for family in DELTA_FAMILIES + ("mamba2",)]  # 100: padding
    for family, T in cases:
        variants = VARIANTS[family]
        ref = build(family, d, layers, heads, T)
        with torch.no_grad():
            for p in ref.parameters():
                p.add_(0.02 * torch.randn_like(p))
        cfg = ref.cfg
        g = torch.Generator().manual_seed(2)
        ids = torch.randint(0, VOCAB, (batch, T), generator=g)
        targets = torch.randint(0, VOCAB, (batch, T), generator=g)
        ref = ref.double()
        logits = ref(ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        want = {"logits": logits.detach().numpy(), "loss": loss.detach().numpy().reshape(1)}
        want.update({"grad " + n: p.grad.numpy() for n, p in ref.named_parameters()})
        params = {n: jnp.asarray(p.detach().numpy(), jnp.float32) for n, p in ref.named_parameters()}
        jids, jtargets = jnp.asarray(ids.numpy()), jnp.asarray(targets.numpy())
        grad_scale = max(rms(x) for name, x in want.items() if name.startswith("grad"))
        for variant in variants:
            got_loss, grads = jax.jit(jax.value_and_grad(loss_fn), static_argnums=(3, 4))(
                params, jids, jtargets, _hashable(cfg), variant)
            got = {"logits": jax.jit(forward, static_argnums=(2, 3))(params, jids, _hashable(cfg), variant),
                   "loss": got_loss}
            got.update({"grad " + n: g for n, g in grads.items()})
            worst = 0.0
            for name, x in want.items():
                y = np.asarray(got[name], np.float64)
                scale = max(rms(x), 1e-3 * grad_scale) if name.startswith("grad") else rms(x)
                err = rms(y - x) / scale
                worst = max(worst, err)
                if not err <= tolerance:
                    failures += 1
                    print(f"FAIL {family}/{variant} {name}: RMS relative error {err:.2e} > {tolerance:.0e}")
            print(f"{family}/{variant}{f' T {T}' if T != 256 else ''}: loss {float(got_loss):.6f} (torch float64 {loss.item():.6f}); "
                  f"worst RMS relative error {worst:.1e} over {len(want)} tensors (logits, loss, gradients)")
    return failures


def rms(x):
    import numpy as np
    return float(np.sqrt(np.mean(np.square(x))))


class _hashable(dict):
    """A config dict usable as a static jit argument."""
    def __hash__(self):
        return hash(tuple(sorted(self.items())))


def main():
    from torch_models import add_anchor_arguments, run_anchor  # imports torch: before jax, CPU side only
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_anchor_arguments(p, VARIANTS, "form to use instead of the default (see the docstring)", 1,
                         "XLA CPU threads; 0 = XLA's default", "check against the torch twin (models.py)")
    a = p.parse_args()
    if a.variant and a.variant not in VARIANTS[a.model]:
        p.error(f"--variant {a.variant}: {a.model} has {', '.join(VARIANTS[a.model])}")
    set_threads(a.threads)
    import_jax()
    run_anchor(a, check, bench,
               lambda r: f"{r['config']} {r['model']} jax jit ({r['variant']}): {r['ms_median']:.1f} ms/step, "
                         f"compile {r['compile_s']} s, {r['tokens_per_s']:.0f} tokens/s, {r['params']} params, "
                         f"peak RSS {r['peak_rss_mib']} MiB, cpu/wall {r['cpu_per_wall']}, "
                         f"CPU {r['cpu_ms_median']:.1f} ms/step")


if __name__ == "__main__":
    main()
