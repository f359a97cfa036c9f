"""Replays an evaluated batch in PyTorch: the checkpoint's model rebuilt as tests/torch/models.py's
LanguageModel (the PyTorch twin of models/lm.hpp), its /model datasets loaded as the state_dict
(strict: every name and shape must match), run in float32 on the dump's /inputs and compared with
the dump's /logits, written by `trilemma eval CHECKPOINT --dump DUMP.h5`.

Prints one line per pair: family, max abs error, and that error scaled by max(1, max|reference|).
Exit code 0 when every scaled error is <= 1e-4, 1 otherwise or when a file or field is missing.
Several pairs share one start-up of PyTorch, which takes seconds.

Usage: /usr/bin/python3 scripts/interop_check.py CHECKPOINT DUMP.h5 [CHECKPOINT DUMP.h5 ...]
"""
import os
import sys

TOLERANCE = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))


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

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:
    fail(f"{e} (run with /usr/bin/python3, which has torch and h5py)")
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
from models import FAMILY_OPTIONS, SHARED, LanguageModel  # noqa: E402


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def model_config(saved, path):
    """ModelConfig's shared fields and the family's options (models.SHARED, FAMILY_OPTIONS) from
    the checkpoint's /config, whose attributes are text under the CLI names: model -> family,
    dashes -> underscores. Conventions the twin follows are checked too (rope-style)."""
    family = text(saved["model"]) if "model" in saved else fail(f"{path}: /config has no attribute 'model'")
    if family not in FAMILY_OPTIONS:
        fail(f"{path}: /config model = '{family}' has no PyTorch twin (known: {', '.join(FAMILY_OPTIONS)})")
    if "rope-style" in saved and text(saved["rope-style"]) != "half":
        fail(f"{path}: /config rope-style = '{text(saved['rope-style'])}'; the twin rotates the pairs (i, i + Dh/2): half")
    cfg = {}
    for field, default in dict(SHARED, **FAMILY_OPTIONS[family]).items():
        key = "model" if field == "family" else field.replace("_", "-")
        if key not in saved:
            fail(f"{path}: /config has no attribute '{key}' (ModelConfig.{field})")
        value = text(saved[key])
        try:
            if isinstance(default, bool):
                if value not in ("0", "1"):
                    raise ValueError(value)
                cfg[field] = value == "1"
            elif isinstance(default, int):
                cfg[field] = int(value)
            else:
                cfg[field] = value
        except ValueError:
            fail(f"{path}: /config {key} = '{value}' is not a {type(default).__name__}")
    return cfg


def open_h5(path):
    try:
        return h5py.File(path, "r")
    except OSError as e:
        fail(f"{path}: not a readable HDF5 file ({e})")


def dataset(f, name):
    if name not in f:
        fail(f"{f.filename}: missing dataset /{name}")
    return f[name][()]


def check(checkpoint, dump):
    """True when the dump's logits are the reference model's to TOLERANCE; prints one line."""
    with open_h5(checkpoint) as ck:
        if "config" not in ck or "model" not in ck:
            fail(f"{checkpoint}: missing group /config or /model (not a trilemma checkpoint)")
        cfg = model_config(ck["config"].attrs, checkpoint)
        state = {name: torch.from_numpy(np.asarray(ds[()], dtype=np.float32)) for name, ds in ck["model"].items()}
    with open_h5(dump) as d:
        inputs = dataset(d, "inputs")
        logits = dataset(d, "logits")
    if inputs.ndim != 2 or logits.shape != (*inputs.shape, cfg["vocab"]):
        fail(f"{dump}: /inputs {inputs.shape} and /logits {logits.shape} do not match vocab {cfg['vocab']}")

    model = LanguageModel(cfg)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        fail(f"{checkpoint}: /model does not match the {cfg['family']} model of /config: " + " ".join(str(e).split()))
    model.float().eval()
    with torch.no_grad():
        ref = model(torch.from_numpy(inputs.astype(np.int64))).numpy()

    max_abs = float(np.abs(ref - logits).max())
    scaled = max_abs / max(1.0, float(np.abs(ref).max()))
    ok = scaled <= TOLERANCE
    print(f"{cfg['family']}: max abs error {max_abs:.3g}, scaled {scaled:.3g} (tolerance {TOLERANCE:g}) "
          f"{'ok' if ok else 'FAILED'}  [{checkpoint}, {dump}]")
    return ok


def main(pairs):
    torch.set_num_threads(1)
    results = [check(checkpoint, dump) for checkpoint, dump in pairs]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(PAIRS))
