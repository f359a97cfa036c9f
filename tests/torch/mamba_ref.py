"""The PyTorch twin of models/mamba.{hpp,cpp}: mamba_ssm's Mamba mixer (its slow path, with
selective_scan_ref for the scan) plus the time-invariant ablations. Parameter names, shapes and
initialisation are mamba_ssm's; see models/mamba.hpp for the glossary and the modes:

  Mamba(d, selective=True,  a_init="s4d-real")    Mamba (S6)
  Mamba(d, selective=False, a_init="s4d-real")    S4D-Real: learned dt_bias, B, C [E, N]
  Mamba(d, selective=False, a_init="hippo-legs")  fixed dense HiPPO-LegS A, bilinear, learned B, C
  Mamba(d, selective=False, a_init="s4d-lin")     fixed S4D-Lin A as 2x2 real blocks, same scan

Channels-first inside, like mamba_ssm ([B, E, T]); forward(x [B, T, d]) -> [B, T, d].
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 1e-1, 1e-4


def upcast(t):
    """mamba_ssm runs the scan in float32 whatever its inputs' dtype; the float64 reference runs
    of tests/torch/gen_*.py stay in float64."""
    return t if t.dtype == torch.float64 else t.float()


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """mamba_ssm.ops.selective_scan_interface.selective_scan_ref (real A, no groups).
    u, delta, z [B, E, T]; A [E, N]; B, C [B, N, T] (selective) or [E, N]; D, delta_bias [E]."""
    u, delta = upcast(u), upcast(delta)
    if delta_bias is not None:
        delta = delta + upcast(delta_bias[..., None])
    if delta_softplus:
        delta = F.softplus(delta)
    batch, dim, dstate = u.shape[0], A.shape[0], A.shape[1]
    variable_B, variable_C = B.dim() >= 3, C.dim() >= 3
    x = A.new_zeros((batch, dim, dstate))
    ys = []
    deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
    if variable_B:
        deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)
    else:
        deltaB_u = torch.einsum("bdl,dn,bdl->bdln", delta, B, u)
    # The time steps taken by unbind, not by slicing as mamba_ssm does: the same values, but
    # backward is one stack instead of T slices each writing a full-size gradient (quadratic in T).
    deltaA, deltaB_u = deltaA.unbind(2), deltaB_u.unbind(2)
    Cs = C.unbind(2) if variable_C else None
    for i in range(u.shape[2]):
        x = deltaA[i] * x + deltaB_u[i]
        if variable_C:
            y = torch.einsum("bdn,bn->bd", x, Cs[i])
        else:
            y = torch.einsum("bdn,dn->bd", x, C)
        ys.append(y)
    y = torch.stack(ys, dim=2)  # [B, E, T]
    out = y if D is None else y + u * D[:, None]
    if z is not None:
        out = out * F.silu(z)
    return out


def hippo_legs(N):
    """The book's HiPPO-LegS (§9.2): -sqrt((2n+1)(2k+1)) below the diagonal, -(n+1) on it."""
    n = torch.arange(N, dtype=torch.float64)
    r = torch.sqrt(2 * n + 1)
    A = -torch.tril(r[:, None] * r[None, :], diagonal=-1) - torch.diag(n + 1)
    return A.float()


def s4d_lin(N):
    """S4D-Lin's A_m = -1/2 + i pi m (m < N/2) as real 2x2 blocks [[-1/2, -pi m], [pi m, -1/2]]."""
    A = torch.zeros(N, N, dtype=torch.float64)
    for m in range(N // 2):
        p, q = 2 * m, 2 * m + 1
        A[p, p] = A[q, q] = -0.5
        A[p, q], A[q, p] = -math.pi * m, math.pi * m
    return A.float()


def bilinear(A, dt):
    """Ad_e = (I - dt_e A/2)^-1 (I + dt_e A/2), Bd_e = (I - dt_e A/2)^-1 dt_e, in float64."""
    A, dt = A.double(), dt.double()[:, None, None]
    eye = torch.eye(A.shape[0], dtype=torch.float64)
    M = eye - dt / 2 * A
    Ad = torch.linalg.solve(M, eye + dt / 2 * A)
    Bd = torch.linalg.solve(M, dt * eye)
    return Ad.float(), Bd.float()


def dense_lti_scan_ref(u, Ad, Bbar, C):
    """h_t = Ad_e h_{t-1} + Bbar_e u_t, y_t = C_e . h_t per channel. u [B, E, T] -> [B, E, T]."""
    h = u.new_zeros(u.shape[0], Ad.shape[0], Ad.shape[1])
    ys = []
    for t in range(u.shape[2]):
        h = torch.einsum("enk,bek->ben", Ad, h) + Bbar[None] * u[:, :, t, None]
        ys.append(torch.einsum("ben,en->be", h, C))
    return torch.stack(ys, dim=2)


def dt_inverse_softplus(E):
    """mamba_ssm's dt init: log-uniform in [dt_min, dt_max], floored, stored through the
    inverse softplus so that softplus(bias) = dt."""
    dt = torch.exp(torch.rand(E) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
    dt = dt.clamp(min=DT_FLOOR)
    return dt + torch.log(-torch.expm1(-dt))


class Mamba(nn.Module):
    def __init__(self, d_model, d_state=16, d_conv=4, expand=2, dt_rank=None, selective=True,
                 a_init="s4d-real"):
        super().__init__()
        if a_init not in ("s4d-real", "s4d-lin", "hippo-legs"):
            raise ValueError(f"a_init {a_init!r} unknown (allowed: s4d-real, s4d-lin, hippo-legs)")
        if a_init != "s4d-real" and selective:
            raise ValueError(f"a_init={a_init} needs selective=False")
        if a_init == "s4d-lin" and d_state % 2:
            raise ValueError(f"a_init=s4d-lin needs an even d_state, got {d_state}")
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = E = expand * d_model
        self.dt_rank = R = dt_rank or math.ceil(d_model / 16)
        self.selective, self.a_init = selective, a_init
        N = d_state
        self.in_proj = nn.Linear(d_model, 2 * E, bias=False)
        self.conv1d = nn.Conv1d(E, E, d_conv, groups=E, padding=d_conv - 1, bias=True)
        if selective:
            self.x_proj = nn.Linear(E, R + 2 * N, bias=False)
            self.dt_proj = nn.Linear(R, E, bias=True)
            nn.init.uniform_(self.dt_proj.weight, -R ** -0.5, R ** -0.5)
            with torch.no_grad():
                self.dt_proj.bias.copy_(dt_inverse_softplus(E))
        else:
            if a_init == "s4d-real":
                self.dt_bias = nn.Parameter(dt_inverse_softplus(E))
            B = torch.ones(E, N)
            if a_init == "s4d-lin":
                B[:, 1::2] = 0  # imaginary parts
            if a_init == "hippo-legs":
                B = torch.sqrt(2 * torch.arange(N, dtype=torch.float32) + 1).repeat(E, 1)
            self.B = nn.Parameter(B)
            self.C = nn.Parameter(torch.randn(E, N) / math.sqrt(N))
        if a_init == "s4d-real":
            self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(E, 1))
        else:
            A = hippo_legs(N) if a_init == "hippo-legs" else s4d_lin(N)
            dt = torch.exp(torch.linspace(math.log(DT_MIN), math.log(DT_MAX), E, dtype=torch.float64)).float()
            Ad, Bd = bilinear(A, dt)
            self.register_buffer("Ad", Ad, persistent=False)
            self.register_buffer("Bd", Bd, persistent=False)
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def forward(self, hidden_states):
        batch, seqlen, _ = hidden_states.shape
        xz = self.in_proj(hidden_states).transpose(1, 2)  # [B, 2E, T]
        x, z = xz.chunk(2, dim=1)
        x = F.silu(self.conv1d(x)[..., :seqlen])
        if self.a_init != "s4d-real":
            Bbar = torch.einsum("enk,ek->en", self.Bd, self.B)
            y = dense_lti_scan_ref(x, self.Ad, Bbar, self.C)
            y = (y + x * self.D[:, None]) * F.silu(z)
        else:
            A = -torch.exp(upcast(self.A_log))
            if self.selective:
                x_dbl = self.x_proj(x.transpose(1, 2).reshape(batch * seqlen, self.d_inner))
                dt, B, C = torch.split(x_dbl, [self.dt_rank, self.d_state, self.d_state], dim=-1)
                dt = self.dt_proj.weight @ dt.t()  # [E, B*T]
                dt = dt.reshape(self.d_inner, batch, seqlen).transpose(0, 1)
                B = B.reshape(batch, seqlen, self.d_state).transpose(1, 2).contiguous()
                C = C.reshape(batch, seqlen, self.d_state).transpose(1, 2).contiguous()
                y = selective_scan_ref(x, dt, A, B, C, upcast(self.D), z=z,
                                       delta_bias=upcast(self.dt_proj.bias), delta_softplus=True)
            else:
                y = selective_scan_ref(x, torch.zeros_like(x), A, self.B, self.C, upcast(self.D),
                                       z=z, delta_bias=upcast(self.dt_bias), delta_softplus=True)
        return self.out_proj(y.transpose(1, 2))
