"""Inductor's common templates with a backward, re-expressed, and the view, indexing, scatter,
cat/pad and pooling templates run forward and backward: the gradients of the compiled graph
against eager's for one random cotangent per output (``_tpl_util_b.check(grad=True)``).

Each test compiles with tilefuse, static and dynamic (``MODES``). The list of
templates and where each went is docs/inductor_templates.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten


def _leaf(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, requires_grad=True)


def test_dtype_sympy_expr(dynamic):
    check(lambda a: a[..., :-1, :].contiguous(), _leaf(1, 2, 16, 4), dynamic=dynamic, grad=True)


def test_input_mutation2_backward(dynamic):
    # test_input_mutation2: an input derived from a leaf is overwritten; the gradient flows to the
    # leaf through the value read before the overwrite
    def f(leaf):
        a = leaf.add(1)
        b = a * 2
        a.view(64).copy_(torch.tensor([66.0], device=DEVICE))
        return b, a + 2

    # the overwritten input's buffer is allocated by aten's new_empty_strided
    check(f, _leaf(1, 64), dynamic=dynamic, grad=True, native=False)


def test_buffer_use_after_remove(dynamic):
    # rotation vectors to matrices (stack of 9 products), an einsum, a sum; gradients of both leaves
    def rotmat(rotvec):
        theta = torch.norm(rotvec, dim=-1)
        axis = rotvec / theta[..., None]
        kx, ky, kz = axis[:, 0], axis[:, 1], axis[:, 2]
        s, c = torch.sin(theta), torch.cos(theta)
        oc = 1 - c
        xs, ys, zs = kx * s, ky * s, kz * s
        xyc, xzc, yzc = kx * ky * oc, kx * kz * oc, ky * kz * oc
        xxc, yyc, zzc = kx**2 * oc, ky**2 * oc, kz**2 * oc
        rows = [
            1 - yyc - zzc,
            xyc - zs,
            xzc + ys,
            xyc + zs,
            1 - xxc - zzc,
            -xs + yzc,
            xzc - ys,
            xs + yzc,
            1 - xxc - yyc,
        ]
        return torch.stack(rows, dim=-1).reshape(-1, 3, 3)

    def f(coord, rot, trans):
        return (torch.einsum("...ij,...bj->...bi", rotmat(rot), coord) + trans).sum()

    check(f, torch.ones(2, 3), _leaf(2, 3), _leaf(2, 3), dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5)


def test_views_backward(dynamic):
    # permute, expand, squeeze, slice with a step, narrow, unfold, diagonal
    def f(x, y):
        p = x.permute(2, 0, 1) * 2
        e = y.expand(3, 4, 5) * x
        s = x[:, ::2, 1:4].squeeze(0) if x.shape[0] == 1 else x[:, ::2, 1:4]
        u = x.reshape(12, 5).unfold(0, 4, 2).sum(-1)
        return p, e, s + 1, aten.narrow(x, 2, 1, 3).exp(), u, x[0].diagonal() * 3

    check(f, _leaf(3, 4, 5), _leaf(4, 1), dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5)


def test_indexing_backward(dynamic):
    # gather, advanced indexing (with a repeated index: accumulating gradient), index_select,
    # embedding, masked_fill
    def f(x, w, i, j, k, mask):
        return (
            torch.gather(x, 1, j),
            x[i, :3] * 2,
            x.index_select(1, k),
            F.embedding(k, w),
            x.masked_fill(mask, 0.0).sin(),
        )

    i, j, k = torch.tensor([0, 2, 2, -1]), torch.randint(0, 6, (4, 3)), torch.tensor([0, 2, 2, 4])
    mask = torch.rand(4, 6) > 0.5
    check(f, _leaf(4, 6), _leaf(5, 3), i, j, k, mask, dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5)


def test_scatter_backward(dynamic):
    # scatter_add, index_put (accumulate), select_scatter, and the slice_scatter whose gradient
    # came back as zeros (issue 42, item 4)
    def f(x, y, src, idx, rows):
        a = torch.zeros(5, 6, device=DEVICE).scatter_add(0, idx, src)
        b = torch.index_put(x, (rows,), src[:3] * 2, accumulate=True)
        c = torch.select_scatter(x, y[:, 0], 1, 2)
        d = torch.slice_scatter(x, y, dim=1, start=0, end=3).sum(dim=1)
        return a, b, c, d

    idx, rows = torch.randint(0, 5, (4, 6)), torch.tensor([1, 1, 3])
    check(f, _leaf(5, 6), _leaf(5, 3), _leaf(4, 6), idx, rows, dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5)


def test_slice_scatter_sum_backward(dynamic):
    # issue 42, item 4 as reported: x's gradient is 1 on the rows not scattered over
    def f(x, y):
        x = x.detach().requires_grad_(True)
        torch.slice_scatter(x, y, dim=1, start=0, end=6).sum(dim=1).sum().backward()
        return x.grad

    check(f, torch.randn(4, 13, 33), torch.randn(4, 6, 33), dynamic=dynamic)


def test_cat_pad_backward(dynamic):
    def f(a, b):
        c = torch.cat([a, b * 2], 1)
        s = torch.stack([a, a.flip(0)], 2)
        return (
            F.pad(c, (1, 2, 0, 1), value=3.0),
            F.pad(c.unsqueeze(0), (2, 1, 1, 2), mode="reflect"),
            F.pad(c.unsqueeze(0), (1, 1, 2, 0), mode="replicate"),
            s.roll(1, 0),
        )

    # replication_pad2d_backward: aten's kernel
    check(f, _leaf(4, 3), _leaf(4, 5), dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5, native=False)


def test_pooling_backward(dynamic):
    def f(x):
        return (
            F.max_pool2d(x, 3, 2, 1),
            F.avg_pool2d(x, 2, 2),
            F.adaptive_avg_pool2d(x, (3, 3)),
            F.interpolate(x, scale_factor=2.0, mode="nearest"),
            F.interpolate(x, size=(9, 11), mode="bilinear", align_corners=False),
        )

    # avg_pool2d_backward and _adaptive_avg_pool2d_backward (and, under symbolic sizes, the
    # upsampling): aten's kernels
    check(f, _leaf(2, 3, 8, 7), dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5, native=False)


def test_inplace_on_intermediates_backward(dynamic):
    # in-place ops on values computed in the graph (the inputs stay untouched)
    def f(x, y):
        a = x * 2
        a.add_(y)
        a[:, 1] = 0.0
        return a.view(-1).mul_(3), (x + 1).sigmoid_()

    # the backward allocates through aten's new_empty_strided (no native lowering)
    check(f, _leaf(4, 5), _leaf(4, 5), dynamic=dynamic, grad=True, atol=1e-5, rtol=1e-5, native=False)
