"""Training throughput of trilemma against a tuned and an out-of-the-box PyTorch, in one sweep.

For rounds r = 1..R, for each (config, model): trilemma, tuned PyTorch and plain PyTorch, each
in its own process, their order rotated by one per round. trilemma runs `trilemma bench train`
(the same sizes, 2 warm-up steps, its GFLOP/s and share of the sgemm peak); PyTorch runs
bench/torch_models.py:
  tuned  --form tuned, --threads T, with OPENBLAS_CORETYPE=SKYLAKEX (Haswell without avx512f;
         Debian's OpenBLAS otherwise falls back to Prescott), OMP_WAIT_POLICY=PASSIVE,
         OMP_NUM_THREADS=T and tcmalloc through LD_PRELOAD (when installed);
  plain  --form plain, torch's default threads, the inherited environment without those.
trilemma gets the same environment as plain, with --threads T. With the anchors' venv
(bench/anchors_venv.sh; $TRILEMMA_BENCH_VENV, default build/bench-venv) three more processes per
cell, in the same rotation:
  torch2          PyTorch 2.x eager, torch_models.py --form tuned (its 2.x forms), tuned's environment
  torch2-compile  the same under torch.compile (--compile; compile seconds reported apart)
  torch2-compile-step  one torch.compile over the whole step: forward, backward, clipping, AdamW
                  (--compile step)
  jax             bench/jax_models.py, the whole step under jax.jit (XLA_FLAGS from --threads)
--anchors picks them (torch113 = the tuned and plain PyTorch 1.13 above); an anchor whose venv is
missing is reported as absent. The parameter counts of all processes must be equal per cell
(else exit 1). Writes a data folder (--out, default results/benchmarks/sweep-<UTC date>-<time>/),
each file atomically: benchmarks.jsonl (every raw measurement, one JSON line per process and
round), report.md (machine and library versions, one table per config group with medians over
rounds and their spread, the targets, the commands, then any --append markdown files: decoding,
busy machine, profile sections) and README.md (the machine and the command).
scripts/bench_table.py DIR renders the folder's table against the fastest anchor, from which
docs/BENCHMARKS.md's opening table is made.

Usage: /usr/bin/python3 bench/vs_torch.py [--configs S,W,L1024,L2048,L4096]
       [--models attention,linear,mamba,deltanet,gated_deltanet,mamba2] [--rounds 3] [--steps 10] [--threads 2] [--processes 1] [--build build]
       [--anchors torch113,torch2,torch2-compile,torch2-compile-step,jax] [--out DIR] [--append FILE ...]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
TORCH_MODELS = os.path.join(HERE, "torch_models.py")
JAX_MODELS = os.path.join(HERE, "jax_models.py")
VENV = os.environ.get("TRILEMMA_BENCH_VENV", os.path.join(ROOT, "build", "bench-venv"))
VENV_PYTHON = os.path.join(VENV, "bin", "python")
ANCHORS = ("torch113", "torch2", "torch2-compile", "torch2-compile-step", "jax")
NEW_ANCHORS = {"torch2": "torch 2 eager", "torch2-compile": "torch 2 compile", "torch2-compile-step": "torch 2 compiled step",
               "jax": "JAX jit"}
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
TUNING_VARS = ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "LD_PRELOAD", "OMP_NUM_THREADS")
SHOWN_VARS = TUNING_VARS + ("TORCHINDUCTOR_CACHE_DIR",)
WARMUP = 2
CONFIGS = ("S", "W", "L1024", "L2048", "L4096", "E64", "E256", "E1024")  # trilemma bench train's, torch_models.py's
MODELS = ("attention", "linear", "mamba", "deltanet", "gated_deltanet", "mamba2")  # the families every anchor builds
DELTA_FAMILIES = ("deltanet", "gated_deltanet")
THREE_X = DELTA_FAMILIES + ("mamba2",)  # the recurrent families after Mamba: >= 3x over every anchor
GROUPS = [("S: d 128, 2 layers, 4 heads, T 256, B 16", ["S"]),
          ("W: d 512, 4 layers, 8 heads, T 256, B 8", ["W"]),
          ("L: d 128, 2 layers, 4 heads, B 4, T 1024 / 2048 / 4096", ["L1024", "L2048", "L4096"]),
          ("E: the experiments' models, d 64, 2 layers, 1 head (DeltaNet's: 4, Mamba 2's: 2 of 64), no MLP, tied, vocabulary "
           "512, B 64, T 64 / 256 / 1024", ["E64", "E256", "E1024"])]


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in TUNING_VARS}


def openblas_core():
    with open("/proc/cpuinfo") as f:
        return "SKYLAKEX" if " avx512f" in f.read() else "Haswell"


def tuned_env(threads):
    env = dict(clean_env(), OPENBLAS_CORETYPE=openblas_core(), OMP_WAIT_POLICY="PASSIVE",
               OMP_NUM_THREADS=str(threads))
    if os.path.exists(TCMALLOC):
        env["LD_PRELOAD"] = TCMALLOC
    return env


def run(cmd, env, copies=1):
    """Runs `copies` processes of cmd at once (as a sweep's lanes run); returns the first's stdout
    and peak RSS in MiB (wait4's ru_maxrss), and every copy's stdout."""
    files = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")) for _ in range(copies)]
    procs = [subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True) for out, err in files]
    outputs, rss = [], []
    for p, (out, err) in zip(procs, files):
        _, status, usage = os.wait4(p.pid, 0)
        out.seek(0), err.seek(0)
        if os.waitstatus_to_exitcode(status):
            sys.exit(f"failed ({os.waitstatus_to_exitcode(status)}): {shlex.join(cmd)}\n{err.read()}")
        outputs.append(out.read())
        rss.append(usage.ru_maxrss / 1024)
        out.close(), err.close()
    return outputs[0], rss[0], outputs


def trilemma_cmd(a, config, model):
    return [os.path.join(a.build, "trilemma"), "bench", "train", "--configs", config, "--models", model,
            "--repeats", str(a.steps), "--threads", str(a.threads), "--processes", str(a.processes),
            "--micro-batches", str(a.micro_batches), "--precision", a.precision, "--json"]


def run_trilemma(a, config, model):
    out, _, _ = run(trilemma_cmd(a, config, model), clean_env())
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return next(r for r in rows if r.get("config") == config and r.get("model") == model)


def torch_cmd(a, config, model, form):
    return [PYTHON, TORCH_MODELS, "--config", config, "--model", model, "--form", form,
            "--steps", str(a.steps), "--warmup", str(WARMUP),
            "--threads", str(a.threads if form == "tuned" else 0), "--micro-batches", str(a.micro_batches),
            "--precision", a.precision, "--json"]


def anchor_cmd(a, config, model, anchor):
    if anchor == "jax":
        return [VENV_PYTHON, JAX_MODELS, "--config", config, "--model", model, "--steps", str(a.steps),
                "--warmup", str(WARMUP), "--threads", str(a.threads), "--json"]
    cmd = torch_cmd(a, config, model, "tuned")
    cmd[0] = VENV_PYTHON
    return cmd + {"torch2-compile": ["--compile"], "torch2-compile-step": ["--compile", "step"]}.get(anchor, [])


def anchor_env(a, anchor):
    """jax_models.py sets XLA_FLAGS, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS itself from --threads."""
    if anchor == "jax":
        return clean_env()
    env = tuned_env(a.threads)
    if anchor.startswith("torch2-compile"):  # the sweep's own inductor cache: cold in round 1, warm after
        env["TORCHINDUCTOR_CACHE_DIR"] = a.inductor_cache
    return env


def venv_available():
    return os.access(VENV_PYTHON, os.X_OK)


def run_torch(a, config, model, form, cmd=None, env=None):
    env = env or (tuned_env(a.threads) if form == "tuned" else clean_env())
    _, _, outputs = run(cmd or torch_cmd(a, config, model, form), env, a.processes)
    rows = [json.loads(o.strip().splitlines()[-1]) for o in outputs]
    row = rows[0]
    if len(rows) > 1:  # as bench train --processes reports it: the median of the copies' medians
        row["ms_median_per_process"] = [r["ms_median"] for r in rows]
        row["ms_median"] = statistics.median(row["ms_median_per_process"])
    row["processes"] = len(rows)
    return row


def sweep(a, log):
    rows = []
    runners = [("trilemma", lambda c, m: run_trilemma(a, c, m))]
    if "torch113" in a.anchors:
        runners += [("torch_tuned", lambda c, m: run_torch(a, c, m, "tuned")),
                    ("torch_plain", lambda c, m: run_torch(a, c, m, "plain"))]
    for anchor in NEW_ANCHORS:
        if anchor in a.anchors:
            runners.append((anchor, lambda c, m, anchor=anchor: run_torch(
                a, c, m, None, anchor_cmd(a, c, m, anchor), anchor_env(a, anchor))))
    for r in range(1, a.rounds + 1):
        for config in a.configs:
            for model in a.models:
                k = (r - 1) % len(runners)
                params = {}
                for name, fn in runners[k:] + runners[:k]:
                    if name == "torch_plain" and (r > a.plain_rounds or config not in a.plain_configs):
                        continue  # out of the box is slow: quadratic forms, a Python loop over T
                    row = dict(fn(config, model), system=name, round=r)
                    rows.append(row)
                    log.write(json.dumps(row) + "\n")
                    log.flush()
                    params[name] = row["params"]
                    print(f"round {r} {config} {model} {name}: {row['ms_median']:.1f} ms/step", flush=True)
                if len(set(params.values())) != 1:
                    sys.exit(f"{config} {model}: parameter counts differ: {params}")
    return rows


def cell(rows, config, model, system, key="ms_median"):
    return [r[key] for r in rows if (r["config"], r["model"], r["system"]) == (config, model, system)
            and r.get(key) is not None]


def fmt_ms(v):
    if not v:
        return "not run"
    med = statistics.median(v)
    return f"{med:.0f} ({min(v):.0f}-{max(v):.0f})" if len(v) > 1 else f"{med:.0f}"


def ratio(rows, config, model, other):
    ours, theirs = cell(rows, config, model, "trilemma"), cell(rows, config, model, other)
    return f"{statistics.median(theirs) / statistics.median(ours):.2f}x" if ours and theirs else "n/a"


def table(rows, configs, models):
    lines = ["| config | model | trilemma ms | tuned torch ms (form) | speed-up | plain torch ms | speed-up "
             "| trilemma GFLOP/s, % of sgemm peak | peak RSS trilemma / tuned torch (MiB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for config in configs:
        for model in models:
            if not cell(rows, config, model, "trilemma"):
                continue
            gf, share = cell(rows, config, model, "trilemma", "gflops"), cell(rows, config, model, "trilemma", "peak_share")
            flops = f"{statistics.median(gf):.0f}, {100 * statistics.median(share):.0f}%" if gf and share else "n/a"
            forms = sorted(set(cell(rows, config, model, "torch_tuned", "variant")))
            rss = [cell(rows, config, model, s, "peak_rss_mib") for s in ("trilemma", "torch_tuned")]
            rss = [f"{statistics.median(r):.0f}" if r else "n/a" for r in rss]  # torch113 may be left out
            lines.append(f"| {config} | {model} | {fmt_ms(cell(rows, config, model, 'trilemma'))} "
                         f"| {fmt_ms(cell(rows, config, model, 'torch_tuned'))} ({', '.join(forms)}) "
                         f"| {ratio(rows, config, model, 'torch_tuned')} "
                         f"| {fmt_ms(cell(rows, config, model, 'torch_plain'))} "
                         f"| {ratio(rows, config, model, 'torch_plain')} | {flops} | {rss[0]} / {rss[1]} |")
    return lines


# The targets: training speed-up over the tuned PyTorch per (config, model), and peak RSS at
# T 4096 as a fraction of the tuned PyTorch's.
def speed_target(config, model):
    if model in THREE_X:
        return 3.0
    if config.startswith("E"):  # the experiments' sizes: Mamba's small-T step is the one to close
        return (8.0 if config == "E64" else 5.0) if model == "mamba" else 1.5
    if model == "mamba":
        return 5.0
    return 1.3 if config == "W" else 2.0


RSS_TARGET = {"attention": 1 / 5, "linear": 1 / 2, "mamba": 1 / 2, "deltanet": 1 / 2, "gated_deltanet": 1 / 2,
              "mamba2": 1 / 2}


def anchor_target(config, model):
    """The speed-up wanted over the fastest of the anchors beyond PyTorch 1.13."""
    if model == "mamba" or model in THREE_X:
        return 3.0
    return 1.1 if config == "W" else 1.5


def anchor_entry(rows, config, model, anchor, a):
    if anchor not in a.anchors:
        return "absent (no venv)" if anchor in a.absent else "not selected"
    v = cell(rows, config, model, anchor)
    if not v:
        return "not run"
    forms = sorted(set(cell(rows, config, model, anchor, "variant")))
    compile_s = cell(rows, config, model, anchor, "compile_s")
    extra = f", compile {statistics.median(compile_s):.0f} s" if compile_s else ""
    return f"{fmt_ms(v)} ({', '.join(forms)}{extra})"


def anchors_table(rows, configs, models, a):
    names = list(NEW_ANCHORS)
    lines = ["| config | model | trilemma ms | tuned torch 1.13 ms | " + " | ".join(
             f"{NEW_ANCHORS[n]} ms (form)" for n in names) + " | fastest new anchor | speed-up | target | met |",
             "|---|---|---|---|" + "---|" * len(names) + "---|---|---|---|"]
    for config in configs:
        for model in models:
            ours = cell(rows, config, model, "trilemma")
            if not ours:
                continue
            medians = {n: statistics.median(cell(rows, config, model, n)) for n in names
                       if cell(rows, config, model, n)}
            fastest, up, want, met = "none run", "n/a", anchor_target(config, model), "n/a"
            if medians:
                fastest = min(medians, key=medians.get)
                speed = medians[fastest] / statistics.median(ours)
                up, met = f"{speed:.2f}x", "yes" if speed >= want else "**no**"
                fastest = NEW_ANCHORS[fastest]
            lines.append(f"| {config} | {model} | {fmt_ms(ours)} | {fmt_ms(cell(rows, config, model, 'torch_tuned'))} | "
                         + " | ".join(anchor_entry(rows, config, model, n, a) for n in names)
                         + f" | {fastest} | {up} | >= {want:.1f}x | {met} |")
    return lines


def anchors_header(a):
    """Versions, forms and environment of the anchors, for the report."""
    if not any(n in a.anchors for n in NEW_ANCHORS):
        return [f"Anchors beyond PyTorch 1.13: absent (no venv at `{VENV}`; bench/anchors_venv.sh "
                "creates it)." if a.absent else "Anchors beyond PyTorch 1.13: not selected (--anchors).", ""]
    probe = "import torch, jax, sys; print(sys.version.split()[0], torch.__version__, jax.__version__)"
    versions = subprocess.run([VENV_PYTHON, "-c", probe], env=clean_env(), capture_output=True, text=True).stdout.split()
    py, torch2, jax = (versions + ["?"] * 3)[:3]
    env = " ".join(f"{k}={v}" for k, v in anchor_env(a, "torch2").items() if k in TUNING_VARS)
    from jax_models import xla_flags  # the flags jax_models.py sets from --threads
    lines = [f"Anchors beyond PyTorch 1.13 (venv `{os.path.relpath(VENV, ROOT) if VENV.startswith(ROOT) else VENV}`, "
             f"Python {py}, bench/anchors_venv.sh pins the versions):", "",
             f"- torch 2 eager: PyTorch {torch2} from PyPI, torch_models.py --form tuned (sdpa attention, "
             f"chunked linear attention, Mamba scan, delta rule and Mamba 2's SSD), environment `{env}`.",
             f"- torch 2 compile: the same under torch.compile (inductor, C++ kernels on the CPU); compile "
             "seconds (the warm-up steps' time beyond the median step) in brackets, apart from the step time.",
             f"- JAX jit: JAX {jax} (jaxlib from PyPI, CPU), bench/jax_models.py, the whole train step under "
             f"jax.jit; environment `XLA_FLAGS={shlex.quote(xla_flags(a.threads))} OMP_NUM_THREADS={a.threads} "
             f"OPENBLAS_NUM_THREADS={a.threads}`; "
             "compile seconds (lower + compile) in brackets."]
    lines += [f"- {NEW_ANCHORS[n]}: absent (no venv at `{VENV}`)." for n in NEW_ANCHORS if n in a.absent]
    return lines + [""]


def targets(rows, configs, models):
    lines = ["| config | model | speed-up over tuned torch | target | met | peak RSS / tuned torch's | target | met |",
             "|---|---|---|---|---|---|---|---|"]
    for config in configs:
        for model in models:
            ours, theirs = cell(rows, config, model, "trilemma"), cell(rows, config, model, "torch_tuned")
            if not ours or not theirs:
                continue
            up, want = statistics.median(theirs) / statistics.median(ours), speed_target(config, model)
            mem = ["-", "-", "-"]
            if config == "L4096":
                rss = [statistics.median(cell(rows, config, model, s, "peak_rss_mib")) for s in ("trilemma", "torch_tuned")]
                frac = rss[0] / rss[1]
                mem = [f"{frac:.2f}", f"<= {RSS_TARGET[model]:.2f}", "yes" if frac <= RSS_TARGET[model] else "**no**"]
            lines.append(f"| {config} | {model} | {up:.2f}x | >= {want:.1f}x | {'yes' if up >= want else '**no**'} | "
                         + " | ".join(mem) + " |")
    return lines


def machine(a):
    info = subprocess.run([os.path.join(a.build, "trilemma"), "info"], capture_output=True, text=True).stdout
    probe = ("import torch, ctypes\n"
             "lib = next((l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l), None)\n"
             "core = ctypes.CDLL(lib).openblas_get_corename if lib else None\n"
             "if core: core.restype = ctypes.c_char_p\n"
             "print(torch.__version__, core().decode() if core else 'not OpenBLAS')")
    tuned = subprocess.run([PYTHON, "-c", probe], env=tuned_env(a.threads), capture_output=True, text=True).stdout.split()
    plain = subprocess.run([PYTHON, "-c", probe], env=clean_env(), capture_output=True, text=True).stdout.split()
    return info.strip(), tuned, plain


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def shown_path(path):
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def readme(a, info, argv):
    """The folder's README.md: the machine (from `trilemma info`) and the command."""
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    machine = "; ".join(([fields["cpu"]] if "cpu" in fields else [])
                        + [f"{k}: {fields[k]}" for k in ("threads", "onednn") if k in fields])
    return "\n".join([f"# {os.path.basename(os.path.normpath(a.out))}", "",
                      f"Machine: {machine or 'unknown (trilemma info printed no cpu line)'}", "",
                      "Measured by:", "",
                      "```", shlex.join([PYTHON] + argv), "```", "",
                      "`benchmarks.jsonl`: one record per process and round; `report.md`: `trilemma info`, "
                      "the versions, the tables, the targets, every process's command and the appended "
                      "sections. The table against the fastest anchor:", "",
                      "```", f"scripts/bench_table.py {shown_path(a.out)}/", "```", ""])


def report(a, rows, argv):
    info, tuned, plain = machine(a)
    cmds = []
    for config in a.configs:
        for model in a.models:
            cmds += [f"{config} {model}:", "  " + shlex.join(trilemma_cmd(a, config, model)),
                     "  " + " ".join(f"{k}={v}" for k, v in tuned_env(a.threads).items() if k in TUNING_VARS)
                     + " " + shlex.join(torch_cmd(a, config, model, "tuned")),
                     "  " + shlex.join(torch_cmd(a, config, model, "plain"))]
            for anchor in NEW_ANCHORS:
                if anchor in a.anchors:
                    env = " ".join(f"{k}={v}" for k, v in anchor_env(a, anchor).items() if k in SHOWN_VARS)
                    cmds.append("  " + (env + " " if env else "") + shlex.join(anchor_cmd(a, config, model, anchor)))
    md = [f"# Benchmark sweep: {os.path.basename(os.path.normpath(a.out))}", "",
          "Written by bench/vs_torch.py; `scripts/bench_table.py` renders this folder's table against "
          "the fastest anchor.", "",
          "## Training throughput against PyTorch", "",
          f"Median milliseconds per training step (forward, backward, clipping, AdamW) over {a.steps} "
          f"steps after {WARMUP} warm-up steps, each cell in its own process, {a.rounds} rounds "
          "alternating trilemma / tuned torch / plain torch (order rotated per round); each entry is "
          "the median over rounds with the range of the per-round medians in brackets. Speed-up = "
          "torch ms / trilemma ms. The tuned PyTorch is bench/torch_models.py --form tuned "
          "(its docstring says what each form does and what was measured), plain is models.py as "
          "written with torch's defaults. Parameter counts are equal per row (checked).", "",
          "Machine (`trilemma info`):", "", "```", info, "```", "",
          f"PyTorch {tuned[0] if tuned else '?'}; OpenBLAS core: tuned {tuned[1:] and tuned[1]}, "
          f"plain {plain[1:] and plain[1]}; trilemma and tuned torch at {a.threads} threads.", ""]
    for title, configs in GROUPS:
        configs = [c for c in configs if c in a.configs]
        if configs:
            md += [f"### {title}", ""] + table(rows, configs, a.models) + [""]
    md += ["### Against the newer anchors: PyTorch 2 (eager, compiled) and JAX", ""] + anchors_header(a)
    md += ["Speed-up = the fastest new anchor's ms / trilemma ms; targets: attention and linear attention "
           ">= 1.5x (>= 1.1x at W), Mamba, DeltaNet, Gated DeltaNet and Mamba 2 >= 3x everywhere.", ""]
    md += anchors_table(rows, a.configs, a.models, a) + [""]
    md += ["### Targets", "", "The speed-ups and memory ratios above against the targets "
           "(attention and linear attention >= 2x at S and L, >= 1.3x at W, >= 1.5x at E; Mamba >= 5x, and "
           ">= 8x at E64; DeltaNet, Gated DeltaNet and Mamba 2 >= 3x; peak RSS at T 4096 at most 1/5 of the tuned "
           "torch's for attention, 1/2 for the others).", ""]
    md += targets(rows, a.configs, a.models) + [""]
    md += ["Commands: the sweep", "", "```", shlex.join([PYTHON] + argv), "```", "",
           "and per row:", "", "```"] + cmds + ["```", ""]
    md += [f"Raw measurements: `{shown_path(a.out_jsonl)}` (one JSON line per process).", ""]
    for extra in a.append or []:
        with open(extra) as f:
            md += [f.read().rstrip(), ""]
    write_atomically(a.out_md, "\n".join(md))
    write_atomically(os.path.join(a.out, "README.md"), readme(a, info, argv))


def select_anchors(parser, names):
    """(the anchors to run, the asked-for ones whose venv is missing)."""
    asked = [n for n in names.split(",") if n]
    for n in asked:
        if n not in ANCHORS:
            parser.error(f"--anchors: {n} unknown (allowed: {', '.join(ANCHORS)})")
    absent = [] if venv_available() else [n for n in asked if n in NEW_ANCHORS]
    if absent:
        print(f"anchors absent (no venv at {VENV}; bench/anchors_venv.sh creates it): {', '.join(absent)}",
              file=sys.stderr)
    return [n for n in asked if n not in absent], absent


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="S,W,L1024,L2048,L4096,E64,E256,E1024")
    p.add_argument("--models", default="attention,linear,mamba",
                   help=f"families, comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="timed steps per process (after 2 warm-up steps)")
    p.add_argument("--threads", type=int, default=2, help="threads per process")
    p.add_argument("--processes", type=int, default=1,
                   help="copies of every row run at once, as a sweep's lanes (e.g. 2 with --threads 1)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=os.path.join(ROOT, "results", "benchmarks",
                                                 time.strftime("sweep-%Y%m%d-%H%M", time.gmtime())),
                   help="the data folder: benchmarks.jsonl, report.md, README.md")
    p.add_argument("--append", nargs="*", help="markdown files appended as further sections")
    p.add_argument("--plain-rounds", type=int, default=1 << 30,
                   help="rounds that also run the out-of-the-box PyTorch (default: all)")
    p.add_argument("--plain-configs", default="S,W,L1024,L2048,L4096",
                   help="configurations that run the out-of-the-box PyTorch")
    p.add_argument("--micro-batches", type=int, default=1,
                   help="every step, trilemma's and PyTorch's, as K forward and backward passes over B / K rows, "
                        "gradients summed (K must divide each config's batch; not with the jax anchor)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: trilemma's --precision bf16 against PyTorch under torch.autocast bf16 (not with jax)")
    p.add_argument("--anchors", default=",".join(ANCHORS),
                   help="torch113 (tuned and plain PyTorch 1.13), torch2, torch2-compile, torch2-compile-step, jax; the last "
                        "four need bench/anchors_venv.sh's venv and are reported absent without it")
    a = p.parse_args()
    a.anchors, a.absent = select_anchors(p, a.anchors)
    a.configs, a.models = a.configs.split(","), a.models.split(",")
    if a.precision == "bf16" and "jax" in a.anchors:
        sys.exit("--precision bf16: not with the jax anchor (jax_models.py trains in float32); choose --anchors")
    if a.micro_batches > 1 and "jax" in a.anchors:
        sys.exit("--micro-batches: not with the jax anchor (jax_models.py runs whole batches); choose --anchors")
    a.plain_configs = a.plain_configs.split(",")
    for c in a.configs:
        if c not in CONFIGS:
            sys.exit(f"--configs: {c} unknown (allowed: {', '.join(CONFIGS)})")
    for m in a.models:
        if m not in MODELS:
            sys.exit(f"--models: {m} unknown (allowed: {', '.join(MODELS)})")
    os.makedirs(a.out, exist_ok=True)
    a.out_jsonl, a.out_md = os.path.join(a.out, "benchmarks.jsonl"), os.path.join(a.out, "report.md")
    tmp = a.out_jsonl + ".tmp"
    with tempfile.TemporaryDirectory(prefix="trilemma-inductor-") as a.inductor_cache, open(tmp, "w") as log:
        rows = sweep(a, log)
    os.replace(tmp, a.out_jsonl)
    report(a, rows, sys.argv)
    print(f"wrote {a.out_jsonl}, {a.out_md} and README.md; table: scripts/bench_table.py {shown_path(a.out)}/")


if __name__ == "__main__":
    main()
