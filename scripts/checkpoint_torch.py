"""A trilemma checkpoint as tests/torch/models.py's PyTorch LanguageModel (the twin of
models/lm.hpp): its /config read into the twin's config (models.SHARED, FAMILY_OPTIONS), its
/model datasets loaded as the state_dict (strict: every name and shape must match).
Shared by scripts/interop_check.py and scripts/train_parity.py; needs torch and h5py
(/usr/bin/python3). Every failure is one line on stderr and exit code 1 (fail).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    script = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "trilemma"
    print(f"{script}: {message}", file=sys.stderr)
    sys.exit(1)


try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:
    fail(f"{e} (run with /usr/bin/python3, which has torch and h5py)")
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
from models import ADDED_LATER, FAMILY_OPTIONS, SHARED, LanguageModel  # noqa: E402


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def model_config(saved, path):
    """ModelConfig's shared fields and the family's options (models.SHARED, FAMILY_OPTIONS) from
    the checkpoint's /config, whose attributes are text under the CLI names: model -> family,
    dashes -> underscores, and the options of every family a hybrid's mixers name; an option of
    ADDED_LATER that a config saved before it lacks takes its default (attention's window: 0;
    short-conv and feature-dim: 0). Conventions the twin follows are checked too (rope-style)."""
    family = text(saved["model"]) if "model" in saved else fail(f"{path}: /config has no attribute 'model'")
    if family not in FAMILY_OPTIONS:
        fail(f"{path}: /config model = '{family}' has no PyTorch twin (known: {', '.join(FAMILY_OPTIONS)})")
    if "rope-style" in saved and text(saved["rope-style"]) != "half":
        fail(f"{path}: /config rope-style = '{text(saved['rope-style'])}'; the twin rotates the pairs (i, i + Dh/2): half")
    mixers = text(saved["mixers"]) if "mixers" in saved else ""
    families = [family] + [f for f in mixers.replace("+", ",").replace(" ", ",").split(",") if f]
    for f in families:
        if f not in FAMILY_OPTIONS:
            fail(f"{path}: /config mixers = '{mixers}' names '{f}', which has no PyTorch twin (known: {', '.join(FAMILY_OPTIONS)})")
    fields = dict(SHARED)
    for f in families:  # an option two families share has one value
        fields.update(FAMILY_OPTIONS[f])
    cfg = {}
    for field, default in fields.items():
        key = "model" if field == "family" else field.replace("_", "-")
        if key not in saved and field in ADDED_LATER:
            cfg[field] = default
            continue
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


def load_checkpoint(path):
    """(model, cfg, config): the twin in float32 with the checkpoint's parameters, its config
    dict, and every /config attribute as text (the run's whole resolved config)."""
    with open_h5(path) as ck:
        if "config" not in ck or "model" not in ck:
            fail(f"{path}: missing group /config or /model (not a trilemma checkpoint)")
        config = {k: text(v) for k, v in ck["config"].attrs.items()}
        cfg = model_config(ck["config"].attrs, path)
        state = {name: torch.from_numpy(np.asarray(ds[()], dtype=np.float32)) for name, ds in ck["model"].items()}
    model = LanguageModel(cfg)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        fail(f"{path}: /model does not match the {cfg['family']} model of /config: " + " ".join(str(e).split()))
    return model.float(), cfg, config
