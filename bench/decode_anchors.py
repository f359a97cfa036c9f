"""The decoding anchors of `trilemma bench decode`: the decode bench's models (d 128, 2 layers,
4 heads, vocabulary 64, no MLP, RoPE for attention and linear attention, no positions for Mamba:
bench/bench_scaling.cpp's scaling_model) stepped token by token in PyTorch 2.x and JAX, each in its
fastest decode form, on the weights of the twin (tests/torch/models.py). Runs in the anchors' venv
(bench/anchors_venv.sh), except --compare, which only starts processes.

Forms (--anchor):
  torch-eager    under torch.inference_mode(): a preallocated KV cache [H, C, Dh] per layer, each
                 step writes row t and attends over rows 0..t by plain matmuls; linear attention
                 updates (S, z) in place; Mamba's step is mamba_ssm's (conv window rolled in
                 place, h = exp(dt A) h + dt B x)
  torch-sdpa     attention only: torch-eager with scaled_dot_product_attention on the cache slice
  torch-compile  the same step under torch.compile, all shapes static: the cache has the fixed
                 capacity C = T + tokens and is masked past the position (a 0-d tensor, so no
                 recompilation per position); compile seconds reported apart (compile_s)
  jax            one jax.jit step, the state a carried pytree (fixed-capacity cache written with
                 dynamic_update_slice at the position index), donated; the prompt goes through
                 lax.scan of the same step

Timing as trilemma's decode_ms_per_token: the state filled to T by the step, then the median ms
per token over --decode-tokens greedy steps (argmax inside the timed step). A warm-up step
first. One JSON line per (model, T) with `trilemma bench decode --json`'s fields where they
apply, plus anchor, form, version, compile_s.

--check: per model and form, the logits of every step of a 40-token prompt against the twin's
full forward on the same weights, RMS relative error <= 1e-4: the recurrent forms reorder float32
sums over <= 40 terms (errors near 1e-6), while a wrong formula or rotation is off by 1e-2 or more.

--compare: trilemma (`bench decode --models M`) and every anchor form in their own processes,
order rotated per round, --rounds rounds; prints the medians as a markdown table.

Usage: VENV/bin/python bench/decode_anchors.py --check
       VENV/bin/python bench/decode_anchors.py --anchor torch-eager|torch-compile|jax
           --model attention|linear|mamba [--seq-lens 1024,4096] [--decode-tokens 32] [--threads 1]
       /usr/bin/python3 bench/decode_anchors.py --compare --python VENV/bin/python
           --trilemma build/trilemma [--rounds 3] [--threads 1] [--seq-lens 1024,4096]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))

MODELS = ["attention", "linear", "mamba"]
ANCHORS = ["torch-eager", "torch-sdpa", "torch-compile", "jax"]
ATTENTION_ONLY = {"torch-sdpa"}
VOCAB, D_MODEL, N_LAYERS, HEADS = 64, 128, 2, 4  # bench_scaling.cpp's kVocab; the bench's command
EPS = 1e-5                # LayerNorm and RMSNorm
LINEAR_EPS = 1e-6         # linear attention's denominator (models.py LINEAR_ATTENTION_EPS)
CHECK_TOKENS, CHECK_TOLERANCE = 40, 1e-4


def twin_config(model, capacity):
    return dict(family=model, vocab=VOCAB, d_model=D_MODEL, n_layers=N_LAYERS, n_heads=HEADS,
                mlp="none", pos="none" if model == "mamba" else "rope", max_seq_len=capacity)


def build_twin(model, capacity, seed=0):
    import torch
    from models import LanguageModel
    torch.manual_seed(seed)
    return LanguageModel(twin_config(model, capacity)).eval()


def rope_tables(capacity, head_dim):
    """cos, sin [capacity, Dh/2] exactly as models.py's rope: angles in float64, then float32."""
    import torch
    half = head_dim // 2
    inv_freq = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / head_dim)
    angle = torch.arange(capacity, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angle.cos().float(), angle.sin().float()


def weights(twin, capacity):
    """The twin's parameters as plain float32 tensors per layer, q/k/v fused into one matrix."""
    import torch
    sd = {k: v.detach().float().contiguous() for k, v in twin.state_dict().items()}
    model = twin.cfg["family"]
    layers = []
    for i in range(N_LAYERS):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        if model == "mamba":
            layers.append(dict(
                norm_w=sd[p + "norm.weight"], in_proj=sd[m + "in_proj.weight"],
                conv_w=sd[m + "conv1d.weight"][:, 0, :].contiguous(), conv_b=sd[m + "conv1d.bias"],
                x_proj=sd[m + "x_proj.weight"], dt_w=sd[m + "dt_proj.weight"], dt_b=sd[m + "dt_proj.bias"],
                A=-torch.exp(sd[m + "A_log"]), D=sd[m + "D"], out_proj=sd[m + "out_proj.weight"]))
        else:
            layers.append(dict(
                ln_w=sd[p + "norm1.weight"], ln_b=sd[p + "norm1.bias"],
                wqkv=torch.cat([sd[m + "q_proj.weight"], sd[m + "k_proj.weight"], sd[m + "v_proj.weight"]]),
                out_proj=sd[m + "out_proj.weight"]))
    W = dict(embedding=sd["backbone.embedding.weight"], layers=layers, head=sd["lm_head.weight"],
             norm_f_w=sd["backbone.norm_f.weight"], norm_f_b=sd.get("backbone.norm_f.bias"))
    if model != "mamba":
        W["cos"], W["sin"] = rope_tables(capacity, D_MODEL // HEADS)
    return W


# --- PyTorch: one step function serves eager (pos an int, cache sliced) and compiled (pos a 0-d
# tensor, cache masked), both writing the state in place.

def torch_step(model, W, masked, sdpa=False):
    import torch
    import torch.nn.functional as F
    H, Dh, d = HEADS, D_MODEL // HEADS, D_MODEL
    half = Dh // 2

    def rotate(x, cos, sin):  # x [H, Dh]
        x1, x2 = x[:, :half], x[:, half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)

    def rms_norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w

    def attention(L, x, pos, cache):
        K, V = cache  # [H, C, Dh]
        q, k, v = F.linear(F.layer_norm(x, (d,), L["ln_w"], L["ln_b"], EPS), L["wqkv"]).view(3, H, Dh)
        cos, sin = W["cos"][pos], W["sin"][pos]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if masked:
            K.index_copy_(1, pos.view(1), k.unsqueeze(1))
            V.index_copy_(1, pos.view(1), v.unsqueeze(1))
            scores = (q.unsqueeze(1) @ K.transpose(1, 2)) * Dh ** -0.5  # [H, 1, C]
            visible = torch.arange(K.shape[1]) <= pos
            out = torch.softmax(scores.masked_fill(~visible, float("-inf")), -1) @ V
        else:
            K[:, pos] = k
            V[:, pos] = v
            Ks, Vs = K[:, : pos + 1], V[:, : pos + 1]
            if sdpa:
                out = F.scaled_dot_product_attention(q.unsqueeze(1), Ks, Vs)
            else:
                out = torch.softmax((q.unsqueeze(1) @ Ks.transpose(1, 2)) * Dh ** -0.5, -1) @ Vs
        return F.linear(out.reshape(1, d), L["out_proj"])

    def linear_attention(L, x, pos, state):
        S, z = state  # S [H, Dh, Dh] (rotated keys x values), z [H, Dh] (unrotated keys)
        q, k, v = F.linear(F.layer_norm(x, (d,), L["ln_w"], L["ln_b"], EPS), L["wqkv"]).view(3, H, Dh)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        cos, sin = W["cos"][pos], W["sin"][pos]
        S.add_(rotate(k, cos, sin).unsqueeze(2) * v.unsqueeze(1))
        z.add_(k)
        numerator = (rotate(q, cos, sin).unsqueeze(1) @ S).squeeze(1)
        denominator = (q * z).sum(-1, keepdim=True) + LINEAR_EPS
        return F.linear((numerator / denominator).reshape(1, d), L["out_proj"])

    def mamba(L, x, pos, state):
        conv, h = state  # conv [E, K] (the last K inputs), h [E, N]
        xi, z = F.linear(rms_norm(x, L["norm_w"]), L["in_proj"])[0].chunk(2)
        conv.copy_(torch.roll(conv, -1, -1))
        conv[:, -1] = xi
        xc = F.silu((conv * L["conv_w"]).sum(-1) + L["conv_b"])
        N = h.shape[1]
        dt, B, C = F.linear(xc, L["x_proj"]).split([L["dt_w"].shape[1], N, N])
        dt = F.softplus(F.linear(dt, L["dt_w"], L["dt_b"]))
        h.mul_(torch.exp(dt.unsqueeze(1) * L["A"])).add_((dt * xc).unsqueeze(1) * B)
        y = (h @ C + L["D"] * xc) * F.silu(z)
        return F.linear(y.unsqueeze(0), L["out_proj"])

    mixer = dict(attention=attention, linear=linear_attention, mamba=mamba)[model]

    def step(token, pos, state):
        x = W["embedding"][token]  # [1, d]
        for L, s in zip(W["layers"], state):
            x = x + mixer(L, x, pos, s)
        if model == "mamba":
            x = rms_norm(x, W["norm_f_w"])
        else:
            x = F.layer_norm(x, (d,), W["norm_f_w"], W["norm_f_b"], EPS)
        logits = F.linear(x, W["head"])
        return logits, logits.argmax(-1)
    return step


def torch_state(model, W, capacity):
    import torch
    Dh = D_MODEL // HEADS
    state = []
    for L in W["layers"]:
        if model == "attention":
            state.append((torch.zeros(HEADS, capacity, Dh), torch.zeros(HEADS, capacity, Dh)))
        elif model == "linear":
            state.append((torch.zeros(HEADS, Dh, Dh), torch.zeros(HEADS, Dh)))
        else:
            state.append((torch.zeros(L["conv_w"].shape), torch.zeros(L["A"].shape)))
    return state


def state_bytes(model, twin, T):
    """The state after T tokens, as trilemma's rows count it (a KV cache of T rows)."""
    return sum(t.numel() * t.element_size() for s in torch_state(model, weights(twin, T), T) for t in s)


class TorchDecoder:
    def __init__(self, model, twin, capacity, form):
        import torch
        self.torch, self.compiled = torch, form == "compile"
        sdpa = form == "sdpa"
        W = weights(twin, capacity)
        self.state = torch_state(model, W, capacity)
        step = torch_step(model, W, masked=self.compiled, sdpa=sdpa)
        self.step = torch.compile(step, fullgraph=True) if self.compiled else step
        self.positions = torch.arange(capacity)
        self.pos, self.compile_s = 0, 0.0

    def feed(self, token):
        """token: an int64 tensor [1]; returns (logits [1, V], the argmax [1])."""
        pos = self.positions[self.pos] if self.compiled else self.pos
        if self.compiled and self.pos == 0:
            t0 = time.perf_counter()
        out = self.step(token, pos, self.state)
        if self.compiled and self.pos == 0:
            self.compile_s = time.perf_counter() - t0
        self.pos += 1
        return out

    def prefill(self, tokens):
        for t in tokens:
            out = self.feed(self.torch.tensor([t]))
        return out


# --- JAX

def import_jax(threads):
    if threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    import jax
    return jax


def jax_decoder_fns(model):
    import jax
    import jax.numpy as jnp
    from jax import lax
    H, Dh, d = HEADS, D_MODEL // HEADS, D_MODEL
    half = Dh // 2

    def rotate(x, cos, sin):
        x1, x2 = x[:, :half], x[:, half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)

    def layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * lax.rsqrt(var + EPS) * w + b

    def rms_norm(x, w):
        return x * lax.rsqrt((x * x).mean(-1, keepdims=True) + EPS) * w

    def attention(W, L, x, pos, cache):
        K, V = cache
        q, k, v = (L["wqkv"] @ layer_norm(x, L["ln_w"], L["ln_b"])).reshape(3, H, Dh)
        cos, sin = W["cos"][pos], W["sin"][pos]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        K = lax.dynamic_update_slice(K, k[:, None], (0, pos, 0))
        V = lax.dynamic_update_slice(V, v[:, None], (0, pos, 0))
        scores = jnp.einsum("hd,hcd->hc", q, K) * Dh ** -0.5
        scores = jnp.where(jnp.arange(K.shape[1]) <= pos, scores, -jnp.inf)
        out = jnp.einsum("hc,hcd->hd", jax.nn.softmax(scores, -1), V)
        return L["out_proj"] @ out.reshape(d), (K, V)

    def linear_attention(W, L, x, pos, state):
        S, z = state
        q, k, v = (L["wqkv"] @ layer_norm(x, L["ln_w"], L["ln_b"])).reshape(3, H, Dh)
        q, k = jax.nn.elu(q) + 1, jax.nn.elu(k) + 1
        cos, sin = W["cos"][pos], W["sin"][pos]
        S = S + rotate(k, cos, sin)[:, :, None] * v[:, None, :]
        z = z + k
        numerator = jnp.einsum("hf,hfd->hd", rotate(q, cos, sin), S)
        denominator = (q * z).sum(-1, keepdims=True) + LINEAR_EPS
        return L["out_proj"] @ (numerator / denominator).reshape(d), (S, z)

    def mamba(W, L, x, pos, state):
        conv, h = state
        xi, z = jnp.split(L["in_proj"] @ rms_norm(x, L["norm_w"]), 2)
        conv = jnp.concatenate([conv[:, 1:], xi[:, None]], 1)
        xc = jax.nn.silu((conv * L["conv_w"]).sum(-1) + L["conv_b"])
        R, N = L["dt_w"].shape[1], h.shape[1]
        x_db = L["x_proj"] @ xc
        dt, B, C = x_db[:R], x_db[R:R + N], x_db[R + N:]
        dt = jax.nn.softplus(L["dt_w"] @ dt + L["dt_b"])
        h = jnp.exp(dt[:, None] * L["A"]) * h + (dt * xc)[:, None] * B
        y = (h @ C + L["D"] * xc) * jax.nn.silu(z)
        return L["out_proj"] @ y, (conv, h)

    mixer = dict(attention=attention, linear=linear_attention, mamba=mamba)[model]

    def step(W, state, token, pos):
        x = W["embedding"][token]
        new_state = []
        for L, s in zip(W["layers"], state):
            out, s = mixer(W, L, x, pos, s)
            x = x + out
            new_state.append(s)
        x = rms_norm(x, W["norm_f_w"]) if model == "mamba" else layer_norm(x, W["norm_f_w"], W["norm_f_b"])
        logits = W["head"] @ x
        return new_state, logits, jnp.argmax(logits).astype(jnp.int32)

    def prefill(W, state, tokens, start):
        def body(s, i_token):
            s, logits, _ = step(W, s, i_token[1], start + i_token[0])
            return s, logits
        idx = jnp.arange(tokens.shape[0], dtype=jnp.int32)
        return lax.scan(body, state, (idx, tokens))

    return jax.jit(step, donate_argnums=1), jax.jit(prefill, donate_argnums=1)


class JaxDecoder:
    def __init__(self, model, twin, capacity):
        import jax
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        Wt = weights(twin, capacity)
        self.W = jax.tree.map(lambda t: jnp.asarray(t.numpy()), {k: v for k, v in Wt.items() if v is not None})
        self.W.setdefault("norm_f_b", None)
        self.state = [tuple(jnp.asarray(t.numpy()) for t in s) for s in torch_state(model, Wt, capacity)]
        self.step, self.prefill_fn = jax_decoder_fns(model)
        self.pos, self.compile_s, self.called = 0, 0.0, False

    def prefill(self, tokens):
        jnp = self.jnp
        t0 = time.perf_counter()
        self.state, logits = self.prefill_fn(self.W, self.state, jnp.asarray(tokens, jnp.int32), jnp.int32(self.pos))
        logits.block_until_ready()
        self.pos += len(tokens)
        return logits, time.perf_counter() - t0

    def feed(self, token):
        first = not self.called
        t0 = time.perf_counter()
        self.state, logits, next_token = self.step(self.W, self.state, token, self.jnp.int32(self.pos))
        next_token.block_until_ready()
        if first:  # the first call compiles (the step's own compile time, apart from the prefill's)
            self.compile_s, self.called = time.perf_counter() - t0, True
        self.pos += 1
        return logits, next_token


def make_decoder(anchor, model, twin, capacity):
    if anchor == "jax":
        return JaxDecoder(model, twin, capacity)
    return TorchDecoder(model, twin, capacity, anchor.split("-")[1])


# --- check and bench

def token_input(anchor, token):
    if anchor == "jax":
        import jax.numpy as jnp
        return jnp.int32(token)
    import torch
    return torch.tensor([token])


def check(anchors):
    import torch
    import numpy as np
    torch.set_num_threads(1)
    failed = False
    for model in MODELS:
        twin = build_twin(model, CHECK_TOKENS)
        tokens = torch.randint(0, VOCAB, (CHECK_TOKENS,), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            ref = twin.double()(tokens[None])[0].float().numpy()
        twin.float()
        for anchor in anchors:
            if anchor in ATTENTION_ONLY and model != "attention":
                continue
            with torch.inference_mode():
                dec = make_decoder(anchor, model, twin, CHECK_TOKENS)
                rows = [np.asarray(dec.feed(token_input(anchor, int(t)))[0]).reshape(-1)
                        for t in tokens]
            err = float(np.sqrt(np.mean((np.stack(rows) - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))
            ok = err <= CHECK_TOLERANCE
            failed |= not ok
            print(f"{model:9s} {anchor:13s} step logits vs the twin's forward (float64): "
                  f"RMS relative error {err:.2e} {'ok' if ok else 'FAILED'} (tolerance {CHECK_TOLERANCE:g})")
    return 1 if failed else 0


def version(anchor):
    if anchor == "jax":
        import jax
        return f"jax {jax.__version__}"
    import torch
    return f"torch {torch.__version__}"


def bench(a):
    import torch
    torch.set_num_threads(a.threads)
    lens = [int(t) for t in a.seq_lens.split(",")]
    prompt = torch.randint(0, VOCAB, (max(lens),), generator=torch.Generator().manual_seed(0)).tolist()
    twin = build_twin(a.model, max(lens) + a.decode_tokens)
    for T in lens:
        with torch.inference_mode():
            capacity = T + a.decode_tokens + 1  # + the warm-up step
            dec = make_decoder(a.anchor, a.model, twin, capacity)
            if a.anchor == "jax":
                logits, prefill_s = dec.prefill(prompt[:T])
                token = dec.jnp.argmax(logits[-1]).astype(dec.jnp.int32)
            else:
                t0 = time.perf_counter()
                logits, token = dec.prefill(prompt[:T])
                prefill_s = time.perf_counter() - t0
            logits, token = dec.feed(token)  # warm-up: compiles the greedy step's first call
            ms = []
            for _ in range(a.decode_tokens):
                t0 = time.perf_counter()
                logits, token = dec.feed(token)
                ms.append(1e3 * (time.perf_counter() - t0))
        row = dict(model=a.model, what="decode", seq_len=T, batch=1, d_model=D_MODEL, n_layers=N_LAYERS,
                   ms=statistics.median(ms), state_bytes=state_bytes(a.model, twin, T), repeats=a.decode_tokens,
                   pos="none" if a.model == "mamba" else "rope", heads=HEADS, vocab=VOCAB,
                   threads=a.threads, anchor=a.anchor.split("-")[0],
                   form="jit" if a.anchor == "jax" else a.anchor.split("-")[1], version=version(a.anchor),
                   compile_s=round(dec.compile_s, 3), prefill_s=round(prefill_s, 3),
                   load_average=os.getloadavg()[0])
        print(json.dumps(row), flush=True)


def compare(a):
    """Rounds of trilemma and every anchor form per model, each run its own process."""
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    runs = [("trilemma", m) for m in MODELS] + [(an, m) for an in ANCHORS for m in MODELS
                                                 if an not in ATTENTION_ONLY or m == "attention"]
    results = {}
    for r in range(a.rounds):
        shift = r % len(runs)
        for who, model in runs[shift:] + runs[:shift]:
            if who == "trilemma":
                cmd = [a.trilemma, "bench", "decode", "--json", "--threads", str(a.threads), "--decode-tokens",
                       str(a.decode_tokens), "--d-model", str(D_MODEL), "--n-layers", str(N_LAYERS),
                       "--heads", str(HEADS), "--seq-lens", a.seq_lens, "--models", model]
            else:
                cmd = [a.python, os.path.abspath(__file__), "--anchor", who, "--model", model, "--threads",
                       str(a.threads), "--seq-lens", a.seq_lens, "--decode-tokens", str(a.decode_tokens)]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.startswith("{"):
                    row = json.loads(line)
                    if row.get("what") == "decode":
                        results.setdefault((model, row["seq_len"], who), []).append(row)
                        print(json.dumps(dict(row, who=who, round=r)), file=sys.stderr, flush=True)
    lens = [int(t) for t in a.seq_lens.split(",")]
    print(f"threads {a.threads}, {a.rounds} rounds, load average {os.getloadavg()[0]:.2f} at the end")
    print("| model | T | " + " | ".join(f"{w} ms (tokens/s)" for w in ["trilemma"] + ANCHORS) +
          " | fastest anchor | trilemma / fastest anchor (tokens/s) |")
    print("|---|---|" + "---|" * (len(ANCHORS) + 3))
    for model in MODELS:
        for T in lens:
            ms = {w: statistics.median(r["ms"] for r in results[(model, T, w)])
                  for w in ["trilemma"] + ANCHORS if (model, T, w) in results}
            fastest = min((w for w in ANCHORS if w in ms), key=ms.get)
            cells = " | ".join(f"{ms[w]:.3f} ({1e3 / ms[w]:.0f})" if w in ms else ""
                               for w in ["trilemma"] + ANCHORS)
            print(f"| {model} | {T} | {cells} | {fastest} | {ms[fastest] / ms['trilemma']:.2f}x |")
    compile_s = {w: max(r.get("compile_s", 0) for k, rs in results.items() if k[2] == w for r in rs) for w in ANCHORS}
    versions = {r["version"] for k, rs in results.items() if k[2] != "trilemma" for r in rs}
    print("compile seconds (largest):", compile_s, "versions:", sorted(versions))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true")
    p.add_argument("--compare", action="store_true")
    p.add_argument("--anchor", choices=ANCHORS, default="torch-eager")
    p.add_argument("--model", choices=MODELS, default="attention")
    p.add_argument("--seq-lens", default="1024,4096")
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--python", default=sys.executable, help="--compare: the venv's interpreter")
    p.add_argument("--trilemma", default=os.path.join(HERE, "..", "build", "trilemma"))
    a = p.parse_args()
    if a.compare:
        return compare(a)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    if a.check or a.anchor == "jax":
        import_jax(a.threads)
    if a.check:
        return check(ANCHORS)
    bench(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
