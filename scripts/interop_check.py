"""Replays an evaluated batch in PyTorch: the checkpoint's model rebuilt as tests/torch/models.py's
LanguageModel (the PyTorch twin of models/lm.hpp), its /model datasets loaded as the state_dict
(strict: every name and shape must match), run in float32 on the dump's /inputs and compared with
the dump's /logits, written by `trilemma eval CHECKPOINT --dump DUMP.h5`.

Prints one line per pair: family, max abs error, and that error scaled by max(1, max|reference|).
Exit code 0 when every scaled error is <= 1e-4, 1 otherwise or when a file or field is missing.
Several pairs share one start-up of PyTorch, which takes seconds. The checkpoint is read by
scripts/checkpoint_torch.py (shared with train_parity.py).

Usage: /usr/bin/python3 scripts/interop_check.py CHECKPOINT DUMP.h5 [CHECKPOINT DUMP.h5 ...]
"""
import os
import sys

TOLERANCE = 1e-4


def fail(message):
    print(f"interop_check: {message}", file=sys.stderr)
    sys.exit(1)


def checked_pairs(argv):
    paths = argv[1:]
    if len(paths) < 2 or len(paths) % 2:
        fail("usage: interop_check.py CHECKPOINT DUMP.h5 [CHECKPOINT DUMP.h5 ...]")
    for path in paths:
        if not os.path.isfile(path):
            fail(f"{path}: no such file")
    return [(paths[i], paths[i + 1]) for i in range(0, len(paths), 2)]


if __name__ == "__main__":
    PAIRS = checked_pairs(sys.argv)  # a bad command line fails before the slow imports below

from checkpoint_torch import dataset, load_checkpoint, open_h5  # noqa: E402  (imports torch: seconds)
import numpy as np  # noqa: E402
import torch  # noqa: E402


def check(checkpoint, dump):
    """True when the dump's logits are the reference model's to TOLERANCE; prints one line."""
    model, cfg, _ = load_checkpoint(checkpoint)
    with open_h5(dump) as d:
        inputs = dataset(d, "inputs")
        logits = dataset(d, "logits")
    if inputs.ndim != 2 or logits.shape != (*inputs.shape, cfg["vocab"]):
        fail(f"{dump}: /inputs {inputs.shape} and /logits {logits.shape} do not match vocab {cfg['vocab']}")

    model.eval()
    with torch.no_grad():
        ref = model(torch.from_numpy(inputs.astype(np.int64))).numpy()

    max_abs = float(np.abs(ref - logits).max())
    scaled = max_abs / max(1.0, float(np.abs(ref).max()))
    ok = scaled <= TOLERANCE
    name = cfg["mixers"].replace(",", "+") or cfg["family"]  # a hybrid's mixers, as trilemma names it
    print(f"{name}: max abs error {max_abs:.3g}, scaled {scaled:.3g} (tolerance {TOLERANCE:g}) "
          f"{'ok' if ok else 'FAILED'}  [{checkpoint}, {dump}]")
    return ok


def main(pairs):
    torch.set_num_threads(1)
    results = [check(checkpoint, dump) for checkpoint, dump in pairs]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(PAIRS))
