"""The sections of docs/BENCHMARKS.md that measure trilemma alone: decoding speed against the
context length, the OpenMP wait policy on an idle and on a busy machine, and where a training
step's time goes (--profile). Each writes one markdown file; bench/vs_torch.py --append puts them
after the comparison with PyTorch.

Usage: /usr/bin/python3 bench/sections.py decode|busy|profile --out FILE [--build build]
       [--threads 2] [--repeats N]
"""
import argparse
import json
import os
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
            hog = subprocess.Popen(["sh", "-c", BUSY_LOOP]) if busy else None
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
           "and the gradient clipping.", ""]
    for cell in ["S:attention", "W:attention", "S:linear", "L4096:linear", "S:mamba", "W:mamba"]:
        config, model = cell.split(":")
        args = ["bench", "train", "--configs", config, "--models", model, "--repeats", "5",
                "--threads", str(a.threads), "--profile", "--json"]
        r = json_rows(trilemma(a.build, args))[0]
        out += [f"### {config}, {model}: {r['ms_median']:.1f} ms per step", "",
                "`" + shown(args) + "`", "",
                "| op | calls | forward ms | backward ms | share |", "|---|---|---|---|---|"]
        total = sum(p["forward_ms"] + p["backward_ms"] for p in r["profile"])
        for p in r["profile"][:10]:
            t = p["forward_ms"] + p["backward_ms"]
            out.append(f"| {p['op']} | {p['calls']:.0f} | {p['forward_ms']:.2f} | "
                       f"{p['backward_ms']:.2f} | {100 * t / total:.1f}% |")
        out.append("")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("section", choices=["decode", "busy", "profile"])
    p.add_argument("--out", required=True)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    lines = {"decode": decode_section, "busy": busy_section, "profile": profile_section}[a.section](a)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)) or ".")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, a.out)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
