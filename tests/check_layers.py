#!/usr/bin/env python3
"""The layering as a test: every #include "<folder>/..." in a layer's sources names that layer
or one below it. Exit code 1, with each offending line, on an include that points up.

    framework/                  tensor, autograd, ops, kernels, I/O
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
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def violations(layer, lines):
    """(line number, text) of each include in `lines` that names a layer above `layer`."""
    allowed = BELOW[layer] | {layer}
    found = []
    for n, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if m and m.group(1) in BELOW and m.group(1) not in allowed:
            found.append((n, line.rstrip()))
    return found


def self_check():
    """The check must be able to fail: an upward include is found, a downward one is not."""
    assert violations("framework", ['#include "models/lm.hpp"']) == [(1, '#include "models/lm.hpp"')]
    assert violations("bench", ['  #include "cli/cli.hpp"'])
    assert violations("models", ['#include "data/tasks.hpp"'])
    assert not violations("cli", ['#include "bench/bench.hpp"', '#include "framework/core/tensor.hpp"'])
    assert not violations("train", ['#include <vector>', '#include "framework/io/h5.hpp"'])


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    self_check()
    bad, files = [], 0
    for layer in BELOW:
        for dirpath, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                files += 1
                with open(path, encoding="utf-8") as f:
                    for n, text in violations(layer, f.read().splitlines()):
                        bad.append(f"{os.path.relpath(path, root)}:{n}: {text}  (points up from {layer}/)")
    for line in bad:
        print(line)
    print(f"{files} files in {len(BELOW)} layers: {len(bad)} include(s) pointing up")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
