"""Linear recurrence h_t = a_t * h_{t-1} + b_t (h_{-1} = 0) along dim 0 of [T, ...] tensors, as a
torch.autograd.Function with three interchangeable kernels. Every kernel runs without autograd
on contiguous [T, M] rows (time outermost, so a step is one contiguous row of M = B*E*N floats).

  sequential  one in-place addcmul per time step: T small kernels.
  chunked     chunks of L steps: a sequential pass inside all chunks at once (L ops on [T/L, M]),
              the chunk-boundary states by a short sequential pass (T/L ops on [M]), then one
              fix-up h += P * carry, P the running product of a inside the chunk.
  blelloch    Blelloch's work-efficient up-sweep / down-sweep (2 log2 T levels of strided
              in-place ops); T must be a power of two.

Backward is the adjoint recurrence run backwards in time, g_t = a_{t+1} g_{t+1} + dL/dh_t, by the
same kernel (reverse=True: h_t = a_t h_{t+1} + b_t on a copy of a shifted by one step); then
dL/db = g and dL/da_t = g_t * h_{t-1}.
"""
import torch


def _sequential(a, b, reverse):
    h = torch.empty_like(b)
    T = b.shape[0]
    steps = range(T - 2, -1, -1) if reverse else range(1, T)
    first = T - 1 if reverse else 0
    h[first] = b[first]
    d = 1 if reverse else -1
    for t in steps:
        torch.addcmul(b[t], a[t], h[t + d], out=h[t])
    return h


def _chunked(a, b, reverse, L=64):
    T = b.shape[0]
    L = min(L, T)
    if T % L:
        return _sequential(a, b, reverse)
    n = T // L
    A, Bv = a.view(n, L, -1), b.view(n, L, -1)
    h, P = torch.empty_like(Bv), torch.empty_like(A)
    first, d = (L - 1, 1) if reverse else (0, -1)
    h[:, first], P[:, first] = Bv[:, first], A[:, first]
    for j in (range(L - 2, -1, -1) if reverse else range(1, L)):
        torch.addcmul(Bv[:, j], A[:, j], h[:, j + d], out=h[:, j])
        torch.mul(A[:, j], P[:, j + d], out=P[:, j])
    last = 0 if reverse else L - 1  # the chunk's state handed to its neighbour
    carry = h[:, last].clone()      # carry[k]: the true state at chunk k's boundary
    for k in (range(n - 2, -1, -1) if reverse else range(1, n)):
        carry[k].addcmul_(P[k, last], carry[k + d])
    if reverse:
        h[:-1].addcmul_(P[:-1], carry[1:, None])
    else:
        h[1:].addcmul_(P[1:], carry[:-1, None])
    return h.view_as(b)


def _blelloch(a, b, reverse):
    if reverse:
        return _blelloch(a.flip(0), b.flip(0), False).flip(0)
    T = b.shape[0]
    if T & (T - 1):
        return _sequential(a, b, False)
    A, h = a.clone(), b.clone()
    s = 1
    while s < T:  # up-sweep: position 2s k + 2s - 1 holds the composition of its 2s steps
        r, l = h[2 * s - 1::2 * s], h[s - 1::2 * s][: (T // (2 * s))]
        r.addcmul_(A[2 * s - 1::2 * s], l)
        A[2 * s - 1::2 * s].mul_(A[s - 1::2 * s][: (T // (2 * s))])
        s *= 2
    s = T // 4
    while s >= 1:  # down-sweep: position 2s k + 3s - 1 takes the full prefix at 2s k + 2s - 1
        tgt = h[3 * s - 1::2 * s]
        tgt.addcmul_(A[3 * s - 1::2 * s], h[2 * s - 1::2 * s][: tgt.shape[0]])
        s //= 2
    return h


KERNELS = {"sequential": _sequential, "chunked": _chunked, "blelloch": _blelloch}


class LinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, kernel):
        shape = b.shape
        a2, b2 = a.reshape(shape[0], -1).contiguous(), b.reshape(shape[0], -1).contiguous()
        h = KERNELS[kernel](a2, b2, False)
        ctx.kernel = kernel
        ctx.save_for_backward(a2, h)
        return h.view(shape)

    @staticmethod
    def backward(ctx, grad_h):
        a, h = ctx.saved_tensors
        gh = grad_h.reshape(h.shape).contiguous()
        a_next = torch.empty_like(a)
        a_next[:-1] = a[1:]
        a_next[-1] = 0
        g = KERNELS[ctx.kernel](a_next, gh, True)
        ga = torch.empty_like(a)
        ga[0] = 0
        torch.mul(g[1:], h[:-1], out=ga[1:])
        shape = grad_h.shape
        return ga.view(shape), g.view(shape), None


def linear_scan(a, b, kernel="chunked"):
    return LinearScan.apply(a, b, kernel)


if hasattr(torch, "compiler"):  # PyTorch 2.x: dynamo cannot trace out= into strided rows, so under
    linear_scan = torch.compiler.disable(linear_scan)  # torch.compile the scan stays these kernels'

