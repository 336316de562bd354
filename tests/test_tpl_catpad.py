"""Inductor's common templates for cat/stack, padding (constant, reflection), flip and roll,
re-expressed.

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager (``_tpl_util_b.check``). The list of templates and where each went is
docs/inductor_templates.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES, run_compiled

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten


def test_cat(dynamic):
    def f(a):
        t = a * 2
        return torch.cat((a, a[:, :4] + 1, a + 2), -1), torch.cat((t, t), 0), torch.cat((t, t.double()), 0)

    check(f, torch.randn(8, 16), dynamic=dynamic)
    check(f, torch.randn(1, 3, 3, 16).to(memory_format=torch.channels_last), dynamic=dynamic)


def test_cat_uint8(dynamic):
    def f(x):
        return torch.cat([x.new_zeros(1).expand(x.shape[:1] + (1,)), x], dim=-1)

    check(f, torch.randint(0, 256, size=(3, 255), dtype=torch.uint8), dynamic=dynamic)


def test_cat_empty(dynamic):
    # a legacy 1-d empty tensor among the inputs is skipped
    f = lambda *ts: torch.cat(ts)  # noqa: E731
    x, e = torch.randn(1, 3, 3, 16), torch.ones(0)
    check(f, x, e, dynamic=dynamic)
    check(f, x, e, torch.randn(1, 3, 3, 16), dynamic=dynamic)
    check(f, e, x, dynamic=dynamic)


def test_cat_empty_index(dynamic):
    check(lambda out, x: torch.cat([out[0], x], dim=0), torch.randn(1, 0, 64), torch.randn(16, 64), dynamic=dynamic)


def test_cat_negative_dim(dynamic):
    f = lambda *ts: torch.cat(ts, dim=-1)  # noqa: E731
    check(f, torch.randn(2, 3), torch.randn(2, 4), dynamic=dynamic)
    check(f, torch.randn(2, 3), torch.randn(0), torch.randn(2, 4), dynamic=dynamic)
    check(f, torch.randn(0), torch.randn(2, 3), torch.randn(2, 4), dynamic=dynamic)


def test_cat_single_empty(dynamic):
    # a cat of one empty tensor: aten's cat (nothing to lower)
    check(lambda *ts: torch.cat(ts), torch.ones(0), dynamic=dynamic, native=False)


def test_cat_upcasting(dynamic):
    check(
        lambda a, b: (aten.cat.default([a, b], 1),),
        torch.randn(8, 16),
        torch.randn(8, 20, dtype=torch.float16),
        dynamic=dynamic,
    )


def test_cat_extern_kernel(dynamic):
    def f(x1, x2, x3, x4):
        s = torch.narrow(torch.mm(x2, x3), 1, 0, 20)
        return (torch.cat((torch.mm(s, x4), x1), 1),)

    args = (torch.randn(16, 16), torch.randn(16, 32), torch.randn(32, 40), torch.randn(20, 16))
    check(f, *args, dynamic=dynamic, atol=1e-4, rtol=1e-4)


def test_aliased_buffer_reuse(dynamic):
    def f(x, y):
        x, y = 2 * x, 2 * y
        d = 1 + torch.cat([x, y], dim=-1)
        return torch.mm(d, d)[:, :2] + x

    check(f, torch.randn(4, 2), torch.randn(4, 2), dynamic=dynamic, atol=1e-4, rtol=1e-4)


def test_cat_of_loops_and_extern_kernel(dynamic):
    conv = torch.nn.Conv2d(16, 5, 1)
    pool = torch.nn.MaxPool2d(2)
    x = torch.randn(1, 16, 8, 8).to(memory_format=torch.channels_last)
    y = torch.randn(1, 16, 16, 16).to(memory_format=torch.channels_last)
    f = lambda x, y: torch.cat([conv(x), pool(y)], 1)  # noqa: E731
    got = check(f, x, y, dynamic=dynamic, atol=1e-4, rtol=1e-4)
    assert got.stride() == f(x, y).stride()


def test_stack(dynamic):
    check(
        lambda a, b: torch.stack([a.expand(12, 16), b.expand(12, 16)], 2),
        torch.randn(1, 16),
        torch.randn(12, 1),
        dynamic=dynamic,
    )


def test_view_on_aliased(dynamic):
    def f1(a, b):
        a = a.max(0).values
        c = torch.cat((a, b)).round()
        b >= a[0]  # noqa: B015
        return c

    check(f1, torch.tensor([[4.0]]), torch.tensor([5.0]), dynamic=dynamic)

    def f2(x):
        a = torch.tensor([[0.6324]], device=DEVICE)
        ret = torch.cat((a, a), dim=0)
        torch.tensor(6324, device=DEVICE) >= a[0]  # noqa: B015
        return ret + x

    check(f2, torch.zeros(1), dynamic=dynamic)


def test_flip(dynamic):
    check(lambda x: (torch.flip(x, (-1,)), torch.flip(x, (0, 2)) - 2), torch.randn(1, 2, 6, 6), dynamic=dynamic)


def test_flip_cat(dynamic):
    def f(a, b):
        v = aten.cat.default([a, b], 1).view(4)
        return (aten.flip.default(aten.slice.Tensor(v, 0, 0, 3), [0]),)

    check(f, torch.randn(2, 1, requires_grad=True), torch.randn(2, 1, requires_grad=True), dynamic=dynamic, grad=True)


def test_roll(dynamic):
    check(lambda a: (aten.roll(a, [-3, 10], [1, 2]), aten.roll(a, [5])), torch.randn(2, 9, 11, 4), dynamic=dynamic)


def test_constant_pad_1d(dynamic):
    def f(a):
        return aten.constant_pad_nd(a, [0, 1], 6.0), aten.constant_pad_nd(a, [2, 3], 99.0)

    check(f, torch.randint(0, 999, size=[2, 16, 31], dtype=torch.float32), dynamic=dynamic)


def test_constant_pad_fill_dtype(dynamic):
    def f(a, b):
        return aten.constant_pad_nd(a, (1, 1), 1.0) & b, aten.constant_pad_nd(a, (1, 1), 0.0) & b

    check(f, torch.randint(2, (4,), dtype=torch.bool), torch.ones(6, dtype=torch.bool), dynamic=dynamic)


def test_constant_pad_2d(dynamic):
    def f(a):
        return aten.constant_pad_nd(a, [1, 1, 1, 1], 6.0), aten.constant_pad_nd(a, [1, 2, 3, 4], 99.0)

    check(f, torch.randint(0, 999, size=[1, 1, 8, 8], dtype=torch.float32), dynamic=dynamic)


def test_constant_pad_3d(dynamic):
    def f(a):
        return aten.constant_pad_nd(a, [1, 2, 3, 4, 5, 6], 6.0), aten.constant_pad_nd(a, [0, 0, 3, 4, 0, 0], 6.0)

    check(f, torch.randint(0, 999, size=[2, 4, 4, 4], dtype=torch.float32), dynamic=dynamic)


def test_constant_pad_float64(dynamic):
    check(lambda x: torch.gt(F.pad(x, pad=(1, 0)), x), torch.rand(1, 2, 2, 1, dtype=torch.float64), dynamic=dynamic)


def test_constant_pad_nd_inplace(dynamic):
    # a zero-width pad still returns a new tensor, not its input
    x = torch.randn(2)
    y = run_compiled(lambda a: aten.constant_pad_nd(a, [0, 0]), x, dynamic=dynamic)
    assert y is not x
    torch.testing.assert_close(y, x)


def test_pad_view(dynamic):
    def f(a):
        y = F.pad(a, (0, 0, 0, 1))
        return y.view(*y.size()[:-2], y.size(-1), y.size(-2))

    check(f, torch.rand(2, 3, 6, 5), dynamic=dynamic)


def test_pad_cast(dynamic):
    for dt in (torch.int32, torch.int64):
        check(lambda x: F.pad(x.to(torch.float32), (0, 3, 0, 0)), torch.ones(1, 1, 13, dtype=dt), dynamic=dynamic)


def test_dtype_mismatch_issue(dynamic):
    check(lambda x: F.pad(x, [0, 1]).softmax(dim=-1), torch.rand(4, 8, 63), dynamic=dynamic)


def test_reflection_pad2d(dynamic):
    def f(a, pad):
        return aten.reflection_pad2d(a, [1, 1, 1, 1]), aten.reflection_pad2d(a, pad)

    check(f, torch.randint(0, 999, size=[1, 1, 8, 8], dtype=torch.float32), [5, 2, 3, 4], dynamic=dynamic)


def test_reflection_pad2d_backward(dynamic):
    f = lambda g, x, pad: aten.reflection_pad2d_backward(g, x, pad)  # noqa: E731
    for pad in ([0, 0, 0, 0], [1, 1, 1, 1], [1, 2, 3, 4], [0, -1, 2, 2], [-1, 0, 2, 2], [2, 2, 0, -1], [2, 2, -1, 0]):
        x = torch.randint(0, 999, size=[1, 1, 8, 8], dtype=torch.float32)
        check(f, torch.randn_like(aten.reflection_pad2d(x, pad)), x, pad, dynamic=dynamic)


def test_uint4x2_mixed_mm(dynamic):
    # two 4-bit halves of each byte concatenated, reshaped and converted, then a matrix product
    def f(a, b):
        w = torch.cat((b & 0xF, b >> 4), 1).reshape(-1, b.shape[1]).to(a.dtype).sub(8)
        return torch.mm(a, w)

    check(f, torch.randn(8, 8), torch.randint(0, 255, (4, 8), dtype=torch.uint8), dynamic=dynamic, atol=1e-4, rtol=1e-4)
