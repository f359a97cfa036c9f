"""The sections of a benchmark round's report that measure trilemma alone: decoding speed against
the context length, the OpenMP wait policy on an idle and on a busy machine, where a training
step's time goes (--profile), and data-parallel training over MPI ranks. Each writes one markdown
file; bench/vs_torch.py --append puts them after the comparison with PyTorch, in the round's
report.md (results/benchmarks/<round>/; bench/benchmarks.sh runs both).

Usage: /usr/bin/python3 bench/sections.py decode|busy|profile|mpi --out FILE [--build build]
       [--threads 2] [--repeats N]
"""
import argparse
import csv
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def trilemma(build, args, env=None):
    cmd = [os.path.join(build, "trilemma")] + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return out.stdout


def json_rows(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def shown(args):
    return "build/trilemma " + " ".join(args)


def decode_section(a):
    args = ["bench", "decode", "--json", "--threads", str(a.threads), "--decode-tokens", "32",
            "--d-model", "128", "--n-layers", "2", "--heads", "4"]
    rows = [r for r in json_rows(trilemma(a.build, args)) if r["what"] == "decode"]
    lens = sorted({r["seq_len"] for r in rows})
    models = list(dict.fromkeys(r["model"] for r in rows))
    ms = {(r["model"], r["seq_len"]): r["ms"] for r in rows}
    out = ["## Decoding: tokens per second against the context", "",
           "One sequence, fed token by token through the recurrent step (attention: its KV cache; "
           "linear attention: the state (S, z); Mamba: the conv state and h), then timed while it "
           "generates 32 tokens greedily; the median time per token. d 128, 2 layers, 4 heads, no MLP "
           "(the scaling benchmark's models).", "", "`" + shown(args) + "`", "",
           "| model | " + " | ".join(f"T={t}" for t in lens) +
           " | fit ms/token = a + b T: a (ms), b (ms per 1000 tokens) | largest residual |",
           "|---|" + "---|" * (len(lens) + 2)]
    for m in models:
        ys = [ms[(m, t)] for t in lens]
        n, sx, sy = len(lens), sum(lens), sum(ys)
        sxx, sxy = sum(t * t for t in lens), sum(t * y for t, y in zip(lens, ys))
        b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
        a0 = (sy - b * sx) / n
        worst = max(abs(y - (a0 + b * t)) / y for t, y in zip(lens, ys))
        out.append(f"| {m} | " + " | ".join(f"{1e3 / y:.0f}" for y in ys) +
                   f" | {a0:.3f}, {1e3 * b:.4f} | {100 * worst:.0f}% |")
    out += ["", "Tokens per second (1000 / median ms per token), and a least-squares line through the "
            "milliseconds per token: a slope b near 0 means the cost does not grow with the context; "
            "a line that fits (small residual) with b > 0 means it grows linearly."]
    return out


BUSY_LOOP = "while :; do :; done"


def die_with_parent():
    """In the child: killed when this script ends in any way, so no busy loop outlives it."""
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def busy_section(a):
    # libgomp's own default when neither variable is set: spin 300000 rounds, then sleep.
    policies = [("passive (trilemma's default)", {}),
                ("active", {"OMP_WAIT_POLICY": "active"}),
                ("libgomp's default (spin, then sleep)", {"GOMP_SPINCOUNT": "300000"})]
    cells = ["S:attention", "S:mamba", "W:attention"]
    out = ["## A busy machine: the OpenMP wait policy", "",
           "Median ms per training step (`bench train`), with the machine idle and with one CPU-bound "
           f"process (`sh -c '{BUSY_LOOP}'`) running beside it on this 2-core machine; "
           f"median over {a.repeats} alternating rounds.", "",
           "| threads | wait policy | " + " | ".join(f"{c} idle | {c} busy" for c in cells) + " |",
           "|---|---|" + "---|---|" * len(cells)]
    results = {}
    for _ in range(a.repeats):
        for busy in (False, True):
            hog = subprocess.Popen(["sh", "-c", BUSY_LOOP], preexec_fn=die_with_parent) if busy else None
            try:
                for threads in (1, 2):
                    for name, extra in policies:
                        if threads == 1 and name != policies[0][0]:
                            continue  # one thread never waits at a barrier
                        env = {k: v for k, v in os.environ.items()
                               if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
                        env.update(extra)
                        for cell in cells:
                            config, model = cell.split(":")
                            args = ["bench", "train", "--configs", config, "--models", model,
                                    "--repeats", "5", "--threads", str(threads), "--json"]
                            r = json_rows(trilemma(a.build, args, env))[0]
                            results.setdefault((threads, name, cell, busy), []).append(r["ms_median"])
            finally:
                if hog:
                    hog.kill()
                    hog.wait()
    for threads in (1, 2):
        for name, _ in policies:
            if (threads, name, cells[0], False) not in results:
                continue
            vals = []
            for cell in cells:
                for busy in (False, True):
                    vals.append(f"{statistics.median(results[(threads, name, cell, busy)]):.0f}")
            out.append(f"| {threads} | {name} | " + " | ".join(vals) + " |")
    out += ["", "Command per cell: `OMP_WAIT_POLICY=... build/trilemma bench train --configs C "
            "--models M --repeats 5 --threads N --json`."]
    return out


def profile_section(a):
    out = ["## Where the time goes: `--profile`", "",
           "Time per op kind per training step (forward: the time since the previous op was recorded; "
           "backward: the op's backward closure). `adamw` and `clip_grad_norm` are the optimizer step "
           "and the gradient clipping. GFLOP/s: the FLOPs counted in the op's windows (its GEMMs' "
           "2 m n k, the attention kernel's own count) over its time, and their share of the sgemm "
           "peak measured in the row's process (square 2048).", ""]
    for cell in ["S:attention", "W:attention", "S:linear", "L4096:linear", "S:mamba", "W:mamba"]:
        config, model = cell.split(":")
        args = ["bench", "train", "--configs", config, "--models", model, "--repeats", "5",
                "--threads", str(a.threads), "--profile", "--json"]
        r = json_rows(trilemma(a.build, args))[0]
        out += [f"### {config}, {model}: {r['ms_median']:.1f} ms per step", "",
                "`" + shown(args) + "`", "",
                "| op | calls | forward ms | backward ms | share | GFLOP/s | of the peak |",
                "|---|---|---|---|---|---|---|"]
        total = sum(p["forward_ms"] + p["backward_ms"] for p in r["profile"])
        for p in r["profile"][:10]:
            t = p["forward_ms"] + p["backward_ms"]
            rate = p.get("gflop", 0) / t * 1e3 if t > 0 else 0
            cells = f"{rate:.0f} | {100 * rate / r['sgemm_peak_gflops']:.0f}%" if rate > 0 else " | "
            out.append(f"| {p['op']} | {p['calls']:.0f} | {p['forward_ms']:.2f} | "
                       f"{p['backward_ms']:.2f} | {100 * t / total:.1f}% | {cells} |")
        out.append("")
    return out


# bench train's S and W sizes as `trilemma train` runs (bench/bench_train.cpp kSizes).
TRAIN_SIZES = {"S": (128, 2, 4, 256, 16), "W": (512, 4, 8, 256, 8)}
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl_vader_single_copy_mechanism", "none"]


def train_args(config, model, threads, out, steps):
    d, layers, heads, seq, batch = TRAIN_SIZES[config]
    args = ["train", "--model", model, "--task", "induction", "--vocab", "64",
            "--d-model", str(d), "--n-layers", str(layers), "--seq-len", str(seq), "--batch", str(batch),
            "--steps", str(steps), "--warmup", "1", "--eval-every", "1000", "--log-every", "1",
            "--checkpoint-every", "1000", "--threads", str(threads), "--progress", "none", "--profile",
            "--out", out]
    if model == "mamba":
        return args + ["--mlp", "none"]
    return args + ["--bias", "1", "--n-heads", str(heads), "--pos", "learned", "--max-seq-len", str(seq)]


def mpi_run(a, ranks, args):
    """ms per step (median over the steps after the first two) and the all-reduce's ms per step."""
    binary = os.path.join(a.build, "trilemma")
    cmd = ([*MPIRUN, "-np", str(ranks), binary] if ranks > 1 else [binary]) + args
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    text = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    out_dir = args[args.index("--out") + 1]
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        ms = [r["ms_per_step"] for r in map(json.loads, f) if r["split"] == "train"][2:]
    reduce_ms = 0.0
    for line in text.splitlines():
        if line.startswith("allreduce"):
            reduce_ms = float(line.split()[2])  # calls, then forward ms per step
    with open(os.path.join(out_dir, "summary.json")) as f:
        params = json.load(f)["parameters"]
    return statistics.median(ms), reduce_ms, params


# Links for the estimate across machines: bandwidth in bytes/s and a per-message latency.
LINKS = [("10 Gbit/s Ethernet", 10e9 / 8, 20e-6), ("100 Gbit/s", 100e9 / 8, 5e-6)]


def allreduce_seconds(params, ranks, bandwidth, latency):
    """Reduce-scatter + all-gather of 4-byte gradients: each rank sends and receives 2 (P - 1) / P
    of the buffer, in 2 (P - 1) messages."""
    return 2 * (ranks - 1) / ranks * 4 * params / bandwidth + 2 * (ranks - 1) * latency


def largest_experiment_model():
    """The experiments' largest model and its ms per step, as its sweep ran it."""
    best = None
    results = os.path.join(HERE, "..", "results")
    for name in sorted(os.listdir(results)):
        path = os.path.join(results, name, "results.csv")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for r in csv.DictReader(f):
                if r.get("parameters") and r.get("ms_per_step") and (best is None or int(r["parameters"]) > best[1]):
                    best = (f"{name}: {r['model']}, batch {r['batch']}", int(r["parameters"]), float(r["ms_per_step"]))
    return best


def mpi_section(a):
    cells = [("S", "attention", 12), ("S", "mamba", 12), ("W", "attention", 8), ("W", "mamba", 8)]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.repeats):
            for config, model, steps in cells:
                for ranks, threads in ((1, 2), (2, 1)):
                    out = os.path.join(tmp, f"{config}-{model}-{ranks}-{rnd}")
                    results.setdefault((config, model, ranks), []).append(
                        mpi_run(a, ranks, train_args(config, model, threads, out, steps)))
    out = ["## Data-parallel training over MPI", "",
           "One training run as P MPI ranks (`mpirun -np P trilemma train`) on this 2-core machine: "
           "P = 2 ranks of 1 thread each against P = 1 process of 2 threads, the same global batch. "
           "Median ms per training step (the steps after the first two of each run, median over "
           f"{a.repeats} alternating rounds); the all-reduce (one flat buffer of every gradient, "
           "reduce-scatter and all-gather through shared memory) in ms per step and its share.", "",
           "| config | model | P = 1 x 2 threads ms | P = 2 x 1 thread ms | speed-up of P = 2 | "
           "all-reduce ms (P = 2) | all-reduce share |", "|---|---|---|---|---|---|---|"]
    shares = []
    for config, model, _ in cells:
        one = statistics.median(r[0] for r in results[(config, model, 1)])
        two = statistics.median(r[0] for r in results[(config, model, 2)])
        red = statistics.median(r[1] for r in results[(config, model, 2)])
        shares.append(100 * red / two)
        out.append(f"| {config} | {model} | {one:.0f} | {two:.0f} | {one / two:.2f}x | {red:.1f} | "
                   f"{100 * red / two:.1f}% |")
    example = train_args("W", "attention", 1, "OUT", 8)
    out += ["", "Command per cell (P = 2; P = 1 runs the binary alone with `--threads 2`):", "",
            "`" + " ".join(MPIRUN[:1] + ["-np", "2"] + MPIRUN[1:]) + " build/trilemma " + " ".join(example) + "`"]
    # On paper: machines like this one (its P = 1 step time), joined by a network.
    models = [(f"{c} {m}", results[(c, m, 1)][0][2], statistics.median(r[0] for r in results[(c, m, 1)]))
              for c, m, _ in cells]
    exp = largest_experiment_model()
    if exp:
        models.append(exp)
    out += ["", "### On paper: across machines", "",
            "Machines like this one (2 cores, the P = 1 step time above), one rank each, joined by a "
            "network: the all-reduce moves 2 (P - 1) / P x 4 bytes per parameter in and out of each "
            "rank in 2 (P - 1) messages (20 us each on 10 Gbit/s Ethernet, 5 us on 100 Gbit/s), and "
            "the step's compute divides by P (the per-rank batch shrinks with it, so this is an upper "
            "bound once B / P is a few rows). Speed-up over one machine, without overlapping the "
            "all-reduce with the backward pass:", "",
            "| model | parameters | ms per step, one machine | link | all-reduce ms, P = 8 | "
            "speed-up P = 8 | all-reduce ms, P = 64 | speed-up P = 64 |", "|---|---|---|---|---|---|---|---|"]
    for name, params, ms in models:
        for link, bandwidth, latency in LINKS:
            cols = []
            for p in (8, 64):
                red = 1e3 * allreduce_seconds(params, p, bandwidth, latency)
                cols += [f"{red:.1f}", f"{ms / (ms / p + red):.1f}x"]
            out.append(f"| {name} | {params} | {ms:.0f} | {link} | " + " | ".join(cols) + " |")
    w_params = results[("W", "attention", 1)][0][2]
    w_ms = 1e3 * allreduce_seconds(w_params, 8, *LINKS[0][1:])
    out += ["", "A model of the experiments' size is bound by its global batch, not by the network: "
            "its gradients are a megabyte or so and its all-reduce is mostly message latency. At W "
            f"({w_params} parameters) one all-reduce takes {w_ms:.0f} ms on 10 Gbit/s at P = 8, a large "
            "share of the step once its compute is split 8 ways: there the all-reduce would have to "
            "overlap the backward pass (buckets of layers, each reduced as soon as its gradients are "
            "final), or the link be faster. On one machine the all-reduce goes through shared memory "
            f"and takes {min(shares):.1f}-{max(shares):.1f}% of the step (above, waiting for the other "
            "rank included), which is all an overlap could save here; trilemma does not overlap it."]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("section", choices=["decode", "busy", "profile", "mpi"])
    p.add_argument("--out", required=True)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    lines = {"decode": decode_section, "busy": busy_section, "profile": profile_section,
             "mpi": mpi_section}[a.section](a)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)) or ".")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, a.out)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
