"""PyTorch references for the Mamba mixer (models/mamba.cpp) in each SSM mode: writes
<outdir>/mamba.h5.

One group per mode (selective, lti_s4d_real, hippo_legs, s4d_lin), built by mamba_ref.Mamba:
  attrs  selective (0/1), a_init, d_model, d_state, d_conv, expand, dt_rank
  params/<name>   the mixer's state_dict (mamba_ssm's names), after a small random nudge away
                  from the init's symmetric values (A_log, D and B repeat across channels there,
                  so a channel mix-up would not show)
  x [2, 24, 32], gout     input and a random upstream gradient
  out                     forward output
  grad_x, grads/<name>    d sum(out * gout) / d x and / d every parameter (torch autograd)
  out64, grad_x64, grads64/<name>
                          the same computed in float64 from the same weights and input: the
                          exact result to float32 precision, against which torch's own float32
                          error is known

Usage: /usr/bin/python3 tests/torch/gen_mamba.py <outdir>
"""
import copy
import os
import sys

import h5py
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mamba_ref import Mamba  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)  # a fixed summation order: the file is the same on every run

MODES = {  # group -> (selective, a_init)
    "selective": (True, "s4d-real"),
    "lti_s4d_real": (False, "s4d-real"),
    "hippo_legs": (False, "hippo-legs"),
    "s4d_lin": (False, "s4d-lin"),
}
BATCH, T, D_MODEL = 2, 24, 32


def write_mode(f, name, selective, a_init):
    m = Mamba(D_MODEL, d_state=16, d_conv=4, expand=2, selective=selective, a_init=a_init)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randn(BATCH, T, D_MODEL, requires_grad=True)
    out = m(x)
    gout = torch.randn_like(out)
    out.backward(gout)
    g = f.create_group(name)
    for k, v in {"selective": int(selective), "a_init": a_init, "d_model": D_MODEL,
                 "d_state": m.d_state, "d_conv": m.d_conv, "expand": m.d_inner // D_MODEL,
                 "dt_rank": m.dt_rank}.items():
        g.attrs[k] = v
    g.create_dataset("x", data=x.detach().numpy())
    g.create_dataset("gout", data=gout.numpy())
    g.create_dataset("out", data=out.detach().numpy())
    g.create_dataset("grad_x", data=x.grad.numpy())
    for pname, p in m.named_parameters():
        g.create_dataset(f"params/{pname}", data=p.detach().numpy())
        g.create_dataset(f"grads/{pname}", data=p.grad.numpy())
    m64 = copy.deepcopy(m).double()
    m64.zero_grad()
    x64 = x.detach().double().requires_grad_()
    out64 = m64(x64)
    out64.backward(gout.double())
    g.create_dataset("out64", data=out64.detach().numpy())
    g.create_dataset("grad_x64", data=x64.grad.numpy())
    for pname, p in m64.named_parameters():
        g.create_dataset(f"grads64/{pname}", data=p.grad.numpy())
    assert set(dict(m.named_parameters())) == set(m.state_dict()), name  # no persistent buffers


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_mamba.py <outdir>")
    os.makedirs(sys.argv[1], exist_ok=True)
    path = os.path.join(sys.argv[1], "mamba.h5")
    f = h5py.File(path + ".tmp", "w")
    try:
        for name, (selective, a_init) in MODES.items():
            write_mode(f, name, selective, a_init)
    except BaseException:
        f.close()
        os.remove(path + ".tmp")
        raise
    f.close()
    os.replace(path + ".tmp", path)  # readers never see a half-written file
    print(f"wrote {len(MODES)} modes to {path}")


if __name__ == "__main__":
    main()
