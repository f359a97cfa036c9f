#!/usr/bin/env python3
"""The layering as a test: every #include "<folder>/..." in a layer's sources names that layer
or one below it, and inside framework/ every #include "framework/<part>/..." names the file's own
part or one on a lower floor. Exit code 1, with each offending line, on an include that points up.

    framework/                  tensor, autograd, ops, kernels, I/O, in floors (FRAMEWORK_FLOORS)
    models/, data/              framework/ only (peers: neither includes the other)
    train/                      run config, trainer, checkpoints
    sweep/, report/, bench/     train/ and below (peers)
    cli/                        everything

Usage: check_layers.py SOURCE_DIR
"""
import os
import re
import sys

BELOW = {
    "framework": set(),
    "models": {"framework"},
    "data": {"framework"},
    "train": {"framework", "models", "data"},
    "sweep": {"framework", "models", "data", "train"},
    "report": {"framework", "models", "data", "train"},
    "bench": {"framework", "models", "data", "train"},
    "cli": {"framework", "models", "data", "train", "sweep", "report", "bench"},
}

# framework/'s parts from the ground up; a part includes its own floor's folder and the floors
# below, never a peer on its own floor.
FRAMEWORK_FLOORS = [
    ["base"],              # Error
    ["simd", "system"],    # header-only vector code; processes, signals, MPI
    ["runtime"],           # threads, GEMM, the profiler
    ["core"],              # Tensor, the tape, Module, random numbers
    ["ops"],               # the differentiable ops
    ["kernels"],           # the fused kernels and their naive twins
    ["config"],            # typed options, registries
    ["optim", "io"],       # optimizers; HDF5, state, atomic files
]
FRAMEWORK_BELOW = {
    part: {lower for floor in FRAMEWORK_FLOORS[:level] for lower in floor}
    for level, floor in enumerate(FRAMEWORK_FLOORS)
    for part in floor
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
FRAMEWORK_INCLUDE = re.compile(r'^\s*#\s*include\s+"framework/([a-z_]+)/')


def violations(path, lines):
    """(line number, text) of each include in `lines`, the source at `path` (relative to the
    repository, e.g. framework/simd/lanes.hpp), that names a layer or framework part above it."""
    parts = path.split("/")
    layer = parts[0]
    allowed = BELOW[layer] | {layer}
    inner = None
    if layer == "framework":
        part = parts[1] if len(parts) > 2 else ""
        inner = FRAMEWORK_BELOW.get(part, set()) | {part}  # a part not in the floors: nothing
    found = []
    for n, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        if m.group(1) in BELOW and m.group(1) not in allowed:
            found.append((n, line.rstrip()))
        elif inner is not None:
            f = FRAMEWORK_INCLUDE.match(line)
            if f and f.group(1) not in inner:
                found.append((n, line.rstrip()))
    return found


def self_check():
    """The check must be able to fail: an upward include is found, a downward one is not."""
    assert violations("framework/core/x.hpp", ['#include "models/lm.hpp"']) == [(1, '#include "models/lm.hpp"')]
    assert violations("bench/x.cpp", ['  #include "cli/cli.hpp"'])
    assert violations("models/x.cpp", ['#include "data/tasks.hpp"'])
    assert not violations("cli/x.cpp", ['#include "bench/bench.hpp"', '#include "framework/core/tensor.hpp"'])
    assert not violations("train/x.cpp", ['#include <vector>', '#include "framework/io/h5.hpp"'])
    # Inside framework/: up a floor, to a peer, or to a part outside the floors is found.
    up = '#include "framework/core/tensor.hpp"'
    assert violations("framework/simd/x.hpp", [up]) == [(1, up)]
    assert violations("framework/runtime/x.cpp", ['#include "framework/ops/ops.hpp"'])
    assert violations("framework/simd/x.hpp", ['#include "framework/system/process.hpp"'])
    assert violations("framework/io/x.cpp", ['#include "framework/optim/optim.hpp"'])
    assert violations("framework/ops/x.cpp", ['#include "framework/misc/x.hpp"'])
    assert violations("framework/misc/x.cpp", ['#include "framework/base/error.hpp"'])
    # Down a floor, or within the part, is not.
    assert not violations("framework/kernels/x.cpp", [up, '#include "framework/simd/lanes.hpp"',
                                                      '#include "framework/kernels/attention.hpp"'])
    assert not violations("framework/runtime/x.cpp", ['#include "framework/base/error.hpp"',
                                                      '#include "framework/system/distributed.hpp"'])


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    self_check()
    bad, files = [], 0
    for layer in BELOW:
        for dirpath, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                files += 1
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for n, text in violations(path, f.read().splitlines()):
                        where = "/".join(path.split("/")[:2 if layer == "framework" else 1])
                        bad.append(f"{path}:{n}: {text}  (points up from {where}/)")
    for line in bad:
        print(line)
    parts = sum(len(floor) for floor in FRAMEWORK_FLOORS)
    print(f"{files} files in {len(BELOW)} layers, framework/ in {parts} parts on "
          f"{len(FRAMEWORK_FLOORS)} floors: {len(bad)} include(s) pointing up")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
