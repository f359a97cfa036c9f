#!/usr/bin/python3
"""A benchmark round's measurements as one markdown table: per (config, model) trilemma's ms per
step, each anchor's, the fastest anchor (the fastest of PyTorch 2 eager, PyTorch 2 compiled and
JAX jit, as measured; PyTorch 1.13 is shown, and counted only in a round that ran none of those),
trilemma's speed-up over it (the anchor's median ms / trilemma's; with several rounds, each
round's in brackets) and the target (bench/vs_torch.py's anchor_target, or speed_target against
PyTorch 1.13).

    scripts/bench_table.py [--configs S,W,...] [--models attention,...] [--no-header] PATH [PATH ...]

PATH is a folder of results/benchmarks/ (its files in name order) or one file:
  *.jsonl  bench/vs_torch.py's records, one per process and round (config, model, system,
           ms_median, compile_s, threads, ...);
  *.txt    bench/vs_torch.py's printed progress ("round R CONFIG MODEL SYSTEM: X ms/step"; a line
           "$ command" starts the next sweep), or bench/decode_anchors.py --compare's tables, one
           per "== label" block, of which the last is taken (decoding rows, ms per token, with the
           ratio and fastest anchor as decode_anchors.py printed them; the target, at T 4096, is
           to be ahead of the fastest anchor).
Each cell is the median of the per-round values with their range in brackets; compile seconds
(median) in square brackets. A (config, model) row found in several PATHs is taken whole from the
first that has it, so a round that re-measured some rows is listed before the round it amends.
The header (a code block before the table) gives what the records say of the machine: its name
(a "Machine:" line of the folder's README.md, or the records' "machine" field), trilemma's GEMM
library and in-process sgemm peak, threads, processes and steps per row, the anchors' versions.
Python 3 standard library only.
"""
import argparse
import glob
import json
import math
import os
import re
import shlex
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from vs_torch import CONFIGS, MODELS, anchor_target, speed_target  # noqa: E402  (one place for the targets)

NEW_ANCHORS = ("torch2", "torch2-compile", "torch2-compile-step", "jax")
COLUMNS = [("torch_tuned", "torch 1.13 tuned"), ("torch2", "torch 2 eager"),
           ("torch2-compile", "torch 2 compile [compile s]"),
           ("torch2-compile-step", "torch 2 compiled step [compile s]"), ("jax", "JAX jit [compile s]")]
NAMES = {"torch_tuned": "torch 1.13 tuned", "torch2": "torch 2 eager", "torch2-compile": "torch 2 compile",
         "torch2-compile-step": "torch 2 compiled step", "jax": "JAX jit"}
PROGRESS = re.compile(r"^round (\d+) (\S+) (\S+) (\S+): ([0-9.]+) ms/step$")
DECODE_SYSTEMS = {"torch-eager": "torch2", "torch-sdpa": "torch2", "torch-compile": "torch2-compile",
                  "jax": "jax"}  # bench/decode_anchors.py's forms, by column
DECODE_NAMES = {"torch-eager": "torch 2 eager", "torch-sdpa": "torch 2 eager (sdpa)",
                "torch-compile": "torch 2 compile", "jax": "JAX jit"}


class Source:
    """The records of one PATH: training rows and decoding rows, and what they say of the machine."""

    def __init__(self, path):
        self.path = path
        self.records = []   # dicts with config, model, system, ms_median (one per process and round)
        self.decode = []    # dicts with seq_len, model, ms {system: ms}, fastest, ratio
        self.decode_label = None
        self.machine = None
        files = sorted(glob.glob(os.path.join(path, "*"))) if os.path.isdir(path) else [path]
        for f in files:
            if f.endswith(".jsonl"):
                self.read_jsonl(f)
            elif f.endswith(".txt"):
                self.read_txt(f)
        readme = os.path.join(path, "README.md") if os.path.isdir(path) else None
        if readme and os.path.exists(readme):
            with open(readme) as f:
                for line in f:
                    if line.startswith("Machine:"):
                        self.machine = line.split(":", 1)[1].strip()
                        break
        if not self.machine:
            named = {r["machine"] for r in self.records if r.get("machine")}
            self.machine = "; ".join(sorted(named)) or None

    def read_jsonl(self, f):
        """A file may hold several sweeps one after another (each numbers its rounds from 1): a new
        one starts where the round number falls or a (config, model, system, round) comes again."""
        sweep, last_round, seen = 0, 0, set()
        with open(f) as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"{f}:{n}: not JSON ({e.msg})")
                if not {"config", "model", "system", "ms_median"} <= r.keys():
                    continue
                key = (r["config"], r["model"], r["system"], r.get("round", 1))
                if r.get("round", 1) < last_round or key in seen:
                    sweep, seen = sweep + 1, set()
                seen.add(key)
                last_round = r.get("round", 1)
                self.records.append(dict(r, run=(f, sweep, r.get("round", 1))))

    def read_txt(self, f):
        with open(f) as fh:
            lines = fh.read().splitlines()
        sweep = 0
        blocks = []
        for line in lines:
            m = PROGRESS.match(line.strip())
            if line.startswith("$ "):
                sweep += 1
            elif m:
                rnd, config, model, system, ms = m.groups()
                self.records.append(dict(config=config, model=model, system=system, ms_median=float(ms),
                                         round=int(rnd), run=(f, sweep, int(rnd))))
            elif line.startswith("== "):
                blocks.append((line[3:].strip(), []))
            elif blocks and line.startswith("|"):
                blocks[-1][1].append(line)
        if blocks:
            self.decode_label, table = blocks[-1]
            self.decode = decode_rows(table, f)


def decode_rows(table, f):
    """decode_anchors.py --compare's table: | model | T | <who> ms (tokens/s) ... | fastest anchor | ratio |."""
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table]
    head, body = cells[0], [c for c in cells[2:] if c]
    who = [h.replace(" ms (tokens/s)", "") for h in head[2:-2]]
    if head[:2] != ["model", "T"] or "trilemma" not in who:
        sys.exit(f"{f}: the last table is not decode_anchors.py --compare's")
    rows = []
    for c in body:
        ms = {w: v.split()[0] for w, v in zip(who, c[2:-2]) if v}  # as printed: 3 decimals
        rows.append(dict(model=c[0], seq_len=int(c[1]), ms=ms, fastest=c[-2], ratio=c[-1]))
    return rows


def fmt(v):
    """Three significant digits, no exponent: 0.223, 12.4, 645."""
    if v == 0:
        return "0"
    places = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{places}f}"


def cell(values, compile_s=()):
    if not values:
        return "-"
    med = statistics.median(values)
    text = fmt(med) + (f" ({fmt(min(values))}-{fmt(max(values))})" if len(values) > 1 else "")
    if compile_s:
        text += f" [{statistics.median(compile_s):.0f}]"
    return text


def training_rows(sources, configs, models):
    """{(config, model): records of that row from the first source that has trilemma's}."""
    rows = {}
    for config in configs:
        for model in models:
            for s in sources:
                recs = [r for r in s.records if (r["config"], r["model"]) == (config, model)]
                if any(r["system"] == "trilemma" for r in recs):
                    rows[(config, model)] = (recs, s)
                    break
    return rows


def values(recs, system, key="ms_median"):
    return [r[key] for r in recs if r["system"] == system and r.get(key) is not None]


def ratio_text(x, want):
    """Two decimals, more where two would round across the target (1.4996 is not 1.50)."""
    places = 2
    while places < 4 and (round(x, places) >= want) != (x >= want):
        places += 1
    return f"{x:.{places}f}"


def round_ratios(recs, anchors):
    """Per round (of each sweep) that ran trilemma and one of the anchors: the round's fastest
    anchor's ms over trilemma's, in the order the rounds ran."""
    runs = {}
    for r in recs:
        runs.setdefault(r["run"], {}).setdefault(r["system"], r["ms_median"])
    return [min(ms[a] for a in anchors if a in ms) / ms["trilemma"] for ms in runs.values()
            if "trilemma" in ms and any(a in ms for a in anchors)]


def row_line(config, model, recs, shown):
    """The fastest of the 2026 anchors; in a round without any, the tuned PyTorch 1.13 with its
    own targets (vs_torch.py's speed_target)."""
    ours = values(recs, "trilemma")
    anchors, want = NEW_ANCHORS, anchor_target(config, model)
    if not any(values(recs, a) for a in NEW_ANCHORS):
        anchors, want = ("torch_tuned",), speed_target(config, model)
    medians = {a: statistics.median(values(recs, a)) for a in anchors if values(recs, a)}
    entries = [cell(values(recs, a), values(recs, a, "compile_s")) for a, _ in shown]
    if medians:
        fastest = min(medians, key=medians.get)
        speed = medians[fastest] / statistics.median(ours)
        met = "yes" if speed >= want else "**no**"
        per_round = round_ratios(recs, anchors)
        shown_speed = ratio_text(speed, want) + "x"
        if len(per_round) > 1:
            shown_speed += " (" + ", ".join(ratio_text(x, want) for x in per_round) + ")"
            held = sum(x >= want for x in per_round)
            if 0 < held < len(per_round):
                met += f" (met in {held} of {len(per_round)} rounds)"
        tail = [NAMES[fastest], shown_speed, f">= {want:.1f}x", met]
    else:
        tail = ["none run", "-", f">= {want:.1f}x", "-"]
    return f"| {config} | {model} | {cell(ours)} | " + " | ".join(entries + tail) + " |"


def decode_line(r, shown):
    def entry(system):
        parts = [(w, v) for w, v in r["ms"].items() if DECODE_SYSTEMS.get(w) == system]
        return ", ".join(v if w != "torch-sdpa" else f"sdpa {v}" for w, v in parts) or "-"
    target = "> 1x" if r["seq_len"] == 4096 else "-"
    ratio = float(r["ratio"].rstrip("x"))
    met = ("yes" if ratio > 1 else "**no**") if target != "-" else "-"
    return (f"| decode T{r['seq_len']} (ms/token) | {r['model']} | {r['ms']['trilemma']} | "
            + " | ".join(entry(a) for a, _ in shown)
            + f" | {DECODE_NAMES.get(r['fastest'], r['fastest'])} | {r['ratio']} | {target} | {met} |")


def spans(pairs):
    """'1 (E64, E256); 2 (S, W)' from (value, config) pairs, values in order of first appearance."""
    groups = {}
    for v, c in pairs:
        groups.setdefault(v, [])
        if c not in groups[v]:
            groups[v].append(c)
    return "; ".join(f"{v} ({', '.join(cs)})" for v, cs in groups.items())


def header(rows, sources, decode_source):
    lines = []
    machines = [s.machine for s in sources if s.machine]
    if machines:
        lines.append("machine: " + " | ".join(dict.fromkeys(machines)))
    ours = [r for recs, _ in rows.values() for r in recs if r["system"] == "trilemma"]
    gemm = sorted({r["gemm"] for r in ours if r.get("gemm")})
    if gemm:
        lines.append("gemm backend: " + ", ".join(gemm))
    peaks = {}
    for r in ours:
        if r.get("sgemm_peak_gflops") and r.get("threads"):
            peaks.setdefault(r["threads"], []).append(r["sgemm_peak_gflops"])
    if peaks:
        lines.append("sgemm peak in the rows' processes (GFLOP/s): " + "; ".join(
            f"{min(v):.0f}-{max(v):.0f} at {t} thread{'s' if t > 1 else ''}" for t, v in sorted(peaks.items())))
    order = sorted(ours, key=lambda r: CONFIGS.index(r["config"]) if r["config"] in CONFIGS else 99)
    if any(r.get("threads") for r in order):
        lines.append("threads per process: " + spans((r["threads"], r["config"]) for r in order if r.get("threads"))
                     + "; processes per cell: " + spans((r.get("processes", 1), r["config"]) for r in order))
    if any(r.get("steps") for r in order):
        lines.append("timed steps (after 2 warm-up): " + spans((r["steps"], r["config"]) for r in order if r.get("steps")))
    if ours:
        counts = {}
        for (c, m), (recs, _) in rows.items():
            counts.setdefault(c, {})[m] = len(values(recs, "trilemma"))
        lines.append("rounds per row: " + spans(
            (n, c if len(set(per.values())) == 1 else f"{c} {m}")
            for c, per in counts.items() for m, n in per.items()))
    versions = []
    every = [r for recs, _ in rows.values() for r in recs]
    for system, key, name in (("torch_tuned", "torch", "torch 1.13 tuned"), ("torch2", "torch", "torch 2"),
                              ("jax", "jax", "jax")):
        found = sorted({r[key] for r in every if r["system"] == system and r.get(key)})
        if found:
            versions.append(f"{name} {', '.join(found)}")
    if versions:
        lines.append("anchors: " + "; ".join(versions))
    if decode_source:
        lines.append(f"decode: ms per token, {decode_source.decode_label} ({decode_source.path})")
    return ["```"] + lines + ["```", ""] if lines else []


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="a folder of results/benchmarks/ or one file")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--no-header", action="store_true", help="the table only")
    a = p.parse_args(argv)
    for path in a.paths:
        if not os.path.exists(path):
            p.error(f"{path}: no such file or folder")
    sources = [Source(path) for path in a.paths]
    rows = training_rows(sources, a.configs.split(","), a.models.split(","))
    decode_source = next((s for s in sources if s.decode), None)
    if not rows and not decode_source:
        sys.exit(f"no benchmark records in {', '.join(a.paths)}")
    every = [r for recs, _ in rows.values() for r in recs]
    decoded = {DECODE_SYSTEMS[w] for r in (decode_source.decode if decode_source else []) for w in r["ms"]
               if w in DECODE_SYSTEMS}
    shown = [(s, name) for s, name in COLUMNS if s in decoded or any(r["system"] == s for r in every)]
    out = [] if a.no_header else header(rows, sources, decode_source)
    out += ["| config | model | trilemma ms | " + " | ".join(name for _, name in shown)
            + " | fastest anchor | speed-up | target | met |",
            "|---|---|---|" + "---|" * len(shown) + "---|---|---|---|"]
    out += [row_line(c, m, recs, shown) for (c, m), (recs, _) in rows.items()]
    if decode_source:
        out += [decode_line(r, shown) for r in decode_source.decode]
    if not a.no_header:
        out += ["", "Made by `scripts/bench_table.py " + shlex.join(argv if argv is not None else sys.argv[1:]) + "`."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
