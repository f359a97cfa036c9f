"""Mamba 2's fast form for the PyTorch anchor (registered in torch_forms.py's FORMS): the twin
tests/torch/models.py's Mamba2Mixer with the same parameters and other arithmetic. Per head, with
X_t = dt_t x_t and a_t = dt_t A (A = -exp(A_log)), the SSD recurrence is
H_t = exp(a_t) H_{t-1} + X_t B_t^T, y_t = H_t C_t + D x_t; both forms after one in_proj GEMM and
the twin's depthwise conv:
  chunked   Dao & Gu 2024 sec. 6 (the block decomposition): chunks of 64 steps (T padded up to a
            multiple, dt 0 and x 0 in the padding, its outputs dropped). With L_ij = exp(a_{j+1} +
            ... + a_i) for j <= i (0 above the diagonal), summed per segment (a masked cumsum, not
            a difference of the chunk's prefix sums, which reach -100 at A 16 and would lose
            float32 digits), inside a chunk Y = (C B^T * L) X, one C B^T per group of heads; the
            chunk's own state S = (B * L_last)^T X; a loop over the chunks carries the state
            entering each, h <- exp(sum a) h + S; then Y += (C * exp(cumsum a)) h_entering, one
            batched product for every chunk.
  recurrent the twin's step-by-step loop over T.
Measured at 1 thread: torch_models.py's docstring.
"""
import torch
import torch.nn.functional as F

from models import Mamba2Mixer

_MASKS = {}


def _mask(C, dtype, diagonal):
    key = (C, dtype, diagonal)
    if key not in _MASKS:
        _MASKS[key] = torch.ones(C, C, dtype=dtype).tril(diagonal)
    return _MASKS[key]


def ssd_recurrent(x, dt, A, Bm, Cm):
    """x [B, T, H, P], dt [B, T, H] (after softplus), A [H], Bm, Cm [B, T, G, N] -> y without the
    D term [B, T, H, P]: the twin's loop, B and C repeated per head."""
    Bsz, T, H, P = x.shape
    G = Bm.shape[2]
    Bm, Cm = (M.repeat_interleave(H // G, dim=2) for M in (Bm, Cm))
    S = x.new_zeros(Bsz, H, P, Bm.shape[-1])
    ys = []
    for t in range(T):
        a = torch.exp(dt[:, t] * A)[:, :, None, None]
        S = a * S + (dt[:, t, :, None, None] * x[:, t, :, :, None]) * Bm[:, t, :, None, :]
        ys.append((S * Cm[:, t, :, None, :]).sum(-1))
    return torch.stack(ys, 1)


def ssd_chunked(x, dt, A, Bm, Cm, chunk):
    """ssd_recurrent's result by chunks (the module docstring's algebra)."""
    Bsz, T, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    Hg = H // G
    C = min(chunk, T)
    pad = -T % C
    if pad:  # after every real step: a 0 and X 0 leave the kept outputs as they are
        x, Bm, Cm = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (x, Bm, Cm))
        dt = F.pad(dt, (0, 0, 0, pad))
    n = (T + pad) // C
    # heads of a group side by side: [B, G, Hg, n, C, ...]; B and C [B, G, 1, n, C, N]
    X = (x * dt[..., None]).reshape(Bsz, n, C, G, Hg, P).permute(0, 3, 4, 1, 2, 5)
    a = (dt * A).reshape(Bsz, n, C, G, Hg).permute(0, 3, 4, 1, 2)             # [B, G, Hg, n, C]
    Bc, Cc = (M.reshape(Bsz, n, C, G, 1, N).permute(0, 3, 4, 1, 2, 5) for M in (Bm, Cm))
    # segment sums: seg[i, j] = a_{j+1} + ... + a_i for j < i, 0 on the diagonal; exp only where
    # j <= i, the sums above it being positive
    seg = (a[..., :, None] * _mask(C, x.dtype, -1)).cumsum(-2)
    L = seg.masked_fill(_mask(C, x.dtype, 0) == 0, float("-inf")).exp()     # [B, G, Hg, n, C, C]
    y = ((Cc @ Bc.transpose(-2, -1)) * L) @ X                               # inside the chunks
    if n > 1:
        states = Bc.transpose(-2, -1) @ (X * L[..., -1, :, None])            # [B, G, Hg, n, N, P]
        A_cum = a.cumsum(-1)
        decay_chunk = A_cum[..., -1].exp()                                  # [B, G, Hg, n]
        h = states[:, :, :, 0]
        entering = [torch.zeros_like(h), h]
        for i in range(1, n - 1):
            h = decay_chunk[:, :, :, i, None, None] * h + states[:, :, :, i]
            entering.append(h)
        h_in = torch.stack(entering, 3)                                     # [B, G, Hg, n, N, P]
        y = y + (Cc * A_cum.exp()[..., None]) @ h_in
    return y.permute(0, 3, 4, 1, 2, 5).reshape(Bsz, n * C, H, P)[:, :T]


class FastMamba2(Mamba2Mixer):
    form, chunk = "chunked", 64

    def forward(self, u):
        Bsz, T, _ = u.shape
        E, P, N, G, H = self.E, self.P, self.N, self.G, self.H
        z, xBC, dt = torch.split(self.in_proj(u), [E, E + 2 * G * N, H], dim=-1)
        xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :T].transpose(1, 2))
        x, Bm, Cm = torch.split(xBC, [E, G * N, G * N], dim=-1)
        x = x.reshape(Bsz, T, H, P)
        Bm, Cm = Bm.reshape(Bsz, T, G, N), Cm.reshape(Bsz, T, G, N)
        dt = F.softplus(dt + self.dt_bias)
        A = -torch.exp(self.A_log)
        if self.form == "chunked":
            y = ssd_chunked(x, dt, A, Bm, Cm, self.chunk)
        else:
            y = ssd_recurrent(x, dt, A, Bm, Cm)
        # D expanded over T: its gradient, a sum of 10^4 terms cancelling to 10^-4 of their sizes,
        # is then summed per step and over the steps (as the twin's loop sums it), which keeps
        # float32 digits that one flat sum loses
        y = (y + x * self.D.expand(T, H)[..., None]).reshape(Bsz, T, E) * F.silu(z)  # the gate, then the norm
        y = y.reshape(Bsz, T, G, E // G)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.norm.eps)
        return self.out_proj(y.reshape(Bsz, T, E) * self.norm.weight)
