"""scripts/bench_table.py on the committed rounds of results/benchmarks/ (each with a README) and
on folders written here: one table row per (config, model) of the records, each cell the median of its rounds, the
fastest 2026 anchor and the speed-up over it computed from the records, a re-measured round listed
first taking its rows whole, vs_torch.py's printed progress and decode_anchors.py's tables read,
and a folder without records refused. Runs with /usr/bin/python3, standard library only."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "bench_table.py")
ROUNDS = os.path.join(ROOT, "results", "benchmarks")
NEW = {"torch2": "torch 2 eager", "torch2-compile": "torch 2 compile", "jax": "JAX jit"}


def run(*paths, ok=True):
    out = subprocess.run([sys.executable, SCRIPT, *paths], capture_output=True, text=True)
    if ok and out.returncode:
        raise AssertionError(f"bench_table.py {paths} failed ({out.returncode}): {out.stderr}")
    return out


def table(text):
    """{(config, model): {column: cell}} of the markdown table in text."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[(cells[0], cells[1])] = dict(zip(head, cells))
    return rows


def records(folder):
    with open(os.path.join(folder, "benchmarks.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def medians(recs, config, model):
    by = {}
    for r in recs:
        if (r["config"], r["model"]) == (config, model):
            by.setdefault(r["system"], []).append(r["ms_median"])
    return {s: statistics.median(v) for s, v in by.items()}


class CommittedRounds(unittest.TestCase):
    def test_every_round_renders(self):
        folders = sorted(d for d in os.listdir(ROUNDS) if os.path.isdir(os.path.join(ROUNDS, d)))
        rendered = 0
        for d in folders:
            with self.subTest(round=d):
                self.assertTrue(os.path.exists(os.path.join(ROUNDS, d, "README.md")))
                if any(f.endswith((".jsonl", ".txt")) for f in os.listdir(os.path.join(ROUNDS, d))):
                    self.assertTrue(table(run(os.path.join(ROUNDS, d)).stdout))
                    rendered += 1
        self.assertGreaterEqual(rendered, 12)

    def test_rows_and_speedups_match_the_records(self):
        folder = os.path.join(ROUNDS, "epyc-zen5-e-rows")
        recs = records(folder)
        rows = table(run(folder).stdout)
        self.assertEqual(set(rows), {(r["config"], r["model"]) for r in recs})
        for (config, model), row in rows.items():
            m = medians(recs, config, model)
            fastest = min((s for s in NEW if s in m), key=m.get)
            self.assertEqual(row["fastest anchor"], NEW[fastest], (config, model))
            self.assertTrue(row["speed-up"].startswith(f"{m[fastest] / m['trilemma']:.2f}x"), (config, model, row))
            low = min(r["ms_median"] for r in recs if (r["config"], r["model"], r["system"]) ==
                      (config, model, "trilemma"))
            self.assertIn("-", row["trilemma ms"])  # two rounds: median (min-max)
            self.assertAlmostEqual(float(row["trilemma ms"].split("(")[1].split("-")[0]), low, delta=0.05 * low)

    def test_first_path_takes_its_rows_whole(self):
        e_rows, sweep = os.path.join(ROUNDS, "epyc-zen5-e-rows"), os.path.join(ROUNDS, "epyc-zen5-anchors")
        both = table(run(e_rows, sweep).stdout)
        alone = table(run(e_rows).stdout)
        for key, row in alone.items():
            self.assertEqual(both[key], row, key)
        self.assertIn(("W", "mamba"), both)  # and the sweep's rows the re-measured round lacks
        self.assertNotEqual(table(run(sweep).stdout)[("E64", "attention")], both[("E64", "attention")])

    def test_printed_progress_and_decode_tables(self):
        rows = table(run(os.path.join(ROUNDS, "xeon-round-5")).stdout)
        # E1024 attention ran in three sweeps of two rounds: six per-round ratios, pooled medians
        self.assertEqual(rows[("E1024", "attention")]["speed-up"].count(","), 5)
        self.assertEqual(rows[("S", "attention")]["trilemma ms"], "54.5")
        decode = table(run(os.path.join(ROUNDS, "epyc-zen5-decode")).stdout)
        row = decode[("decode T4096 (ms/token)", "mamba")]
        self.assertEqual((row["trilemma ms"], row["speed-up"], row["met"]), ("0.041", "2.41x", "yes"))


class WrittenHere(unittest.TestCase):
    def write(self, folder, rows):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "benchmarks.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    def test_fastest_anchor_target_and_rounds(self):
        def rec(system, ms, rnd, **extra):
            return dict(config="E64", model="linear", system=system, ms_median=ms, round=rnd, **extra)
        with tempfile.TemporaryDirectory() as tmp:
            self.write(tmp, [rec("trilemma", 10.0, 1, threads=1, gemm="dnnl"), rec("torch2", 30.0, 1),
                             rec("jax", 16.0, 1, compile_s=2.0),
                             rec("trilemma", 12.0, 2, threads=1, gemm="dnnl"), rec("torch2", 28.0, 2),
                             rec("jax", 14.0, 2, compile_s=4.0)])
            out = run(tmp).stdout
            row = table(out)[("E64", "linear")]
            self.assertEqual(row["trilemma ms"], "11.0 (10.0-12.0)")
            self.assertEqual(row["JAX jit [compile s]"], "15.0 (14.0-16.0) [3]")
            self.assertEqual(row["fastest anchor"], "JAX jit")
            self.assertEqual(row["speed-up"], "1.36x (1.60, 1.17)")  # 15 / 11; per round 16 / 10, 14 / 12
            self.assertEqual(row["met"], "**no** (met in 1 of 2 rounds)")
            self.assertNotIn("torch 2 compile", out)  # a column nobody ran is left out
            self.assertIn("gemm backend: dnnl", out)

    def test_folder_without_records_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            open(os.path.join(tmp, "README.md"), "w").close()
            out = run(tmp, ok=False)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("no benchmark records", out.stderr)


if __name__ == "__main__":
    unittest.main()
