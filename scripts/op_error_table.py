#!/usr/bin/env python3
"""Per-op error table from the test suites' own output: PyTorch parity (forward, backward)
and finite-difference gradient checks (max abs error), one row per op.
Usage: scripts/op_error_table.py [build-dir]   (after ctest has produced the torch references)"""
import re
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"


def run(name):
    return subprocess.run([f"{build}/tests/{name}"], capture_output=True, text=True).stdout


parity = {}
for line in run("test_parity_ops").splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 5 and re.match(r"^[0-9][0-9.e+-]*$", cells[2]):
        fwd, bwd = float(cells[2]), float(cells[3])
        old = parity.get(cells[1], (0.0, 0.0, 0))
        parity[cells[1]] = (max(old[0], fwd), max(old[1], bwd), old[2] + 1)

grad = {}
for line in run("test_gradcheck").splitlines():
    cells = [c.strip() for c in line.split("|")]
    if len(cells) == 3 and re.match(r"^[0-9][0-9.e+-]*$", cells[1]):
        label = cells[0].removeprefix("large: ")
        op = re.split(r"[ (]", label, maxsplit=1)[0]
        if not re.match(r"^[a-z_0-9]+$", op) or len(op) < 2:
            op = "(composite: input reused)"
        old = grad.get(op, (0.0, 0))
        grad[op] = (max(old[0], float(cells[1])), old[1] + 1)

print("| op | torch cases | forward err | backward err | gradcheck cases | gradcheck max abs err |")
print("|---|---|---|---|---|---|")
for op in sorted(set(parity) | set(grad)):
    p = parity.get(op)
    g = grad.get(op)
    pc = f"{p[2]} | {p[0]:.1e} | {p[1]:.1e}" if p else "- | - | -"
    gc = f"{g[1]} | {g[0]:.1e}" if g else "- | -"
    print(f"| {op} | {pc} | {gc} |")
