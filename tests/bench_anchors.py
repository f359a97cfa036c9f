"""bench/vs_torch.py's anchors without their venv: a missing venv makes the PyTorch 2 and JAX
anchors absent (never an error), the report says so, the anchors table picks the fastest anchor
that ran, and torch_models.py refuses --compile under PyTorch 1.13. Runs with /usr/bin/python3,
no PyPI package needed."""
import argparse
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
os.environ["TRILEMMA_BENCH_VENV"] = os.path.join(ROOT, "no-such-venv")

import jax_models  # noqa: E402  (imports no jax until asked)
import vs_torch  # noqa: E402


def row(system, ms, **extra):
    return dict(config="E64", model="mamba", system=system, ms_median=ms, params=1, **extra)


class AnchorsWithoutVenv(unittest.TestCase):
    def select(self, names):
        return vs_torch.select_anchors(argparse.ArgumentParser(), names)

    def test_missing_venv_marks_new_anchors_absent(self):
        run, absent = self.select("torch113,torch2,torch2-compile,jax")
        self.assertEqual(run, ["torch113"])
        self.assertEqual(absent, ["torch2", "torch2-compile", "jax"])

    def test_unknown_anchor_is_an_error(self):
        with self.assertRaises(SystemExit):
            self.select("torch113,tensorflow")

    def test_report_says_absent(self):
        a = argparse.Namespace(threads=1)
        a.anchors, a.absent = self.select("torch113,jax")
        header = " ".join(vs_torch.anchors_header(a))
        self.assertIn("absent", header)
        table = "\n".join(vs_torch.anchors_table([row("trilemma", 10.0)], ["E64"], ["mamba"], a))
        self.assertIn("absent (no venv)", table)
        self.assertIn("not selected", table)
        self.assertIn("none run", table)

    def test_fastest_anchor_and_target(self):
        a = argparse.Namespace(anchors=["torch113", "torch2", "jax"], absent=[])
        rows = [row("trilemma", 10.0), row("torch2", 50.0, variant="chunked"),
                row("jax", 25.0, variant="associative", compile_s=3.0)]
        line = vs_torch.anchors_table(rows, ["E64"], ["mamba"], a)[-1]
        self.assertIn("| JAX jit | 2.50x | >= 3.0x | **no** |", line)
        self.assertIn("25 (associative, compile 3 s)", line)

    def test_xla_flags_for_one_thread(self):
        self.assertIn("intra_op_parallelism_threads=1", jax_models.xla_flags(1))
        self.assertIn("--xla_cpu_multi_thread_eigen=false", jax_models.xla_flags(1))
        self.assertEqual(jax_models.xla_flags(0), "")

    def test_compile_needs_torch_2(self):
        import torch
        if hasattr(torch, "compile"):
            self.skipTest(f"torch {torch.__version__} has torch.compile")
        out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "torch_models.py"), "--compile"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--compile needs", out.stderr)


if __name__ == "__main__":
    unittest.main()
