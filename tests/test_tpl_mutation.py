"""Inductor's common templates for mutation, re-expressed: in-place ops on graph inputs and on
their views, copy_, slice assignment, in-place ops on intermediates, module buffers mutated in
the forward, resize.

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager, the inputs after the call included (``_tpl_util_b.check``). The list of templates
and where each went is docs/inductor_templates.md.
"""

from __future__ import annotations

import copy

import torch

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES, run_compiled

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten


def test_add_inplace_permuted(dynamic):
    x = torch.ones(2, 12, 13, 5).transpose(1, 2)
    check(lambda x, y: x.add_(y), x, torch.randn(2, 13, 1, 5), dynamic=dynamic)


def test_concat_add_inplace(dynamic):
    f = lambda x, y, z: torch.cat([x, y], dim=1).add_(z)  # noqa: E731
    check(f, torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4), torch.randn(2, 6, 4, 4), dynamic=dynamic)


def test_inplace_add(dynamic):
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    want = x + y
    out = run_compiled(lambda x, y: x.add_(y), x, y, dynamic=dynamic)
    assert out is x  # the input itself is returned, updated
    torch.testing.assert_close(x, want)


def test_inplace_mixed_dtype_ops(dynamic):
    def f(x, y):
        return (x + y.float()).add_(y).mul_(y)

    check(f, torch.randn(4, 4), torch.randn(4, 4, dtype=torch.double), dynamic=dynamic)


def test_input_mutation1(dynamic):
    def f(a):
        b = a + 1
        a.copy_(b)
        return a * b / (a + 2)

    cf = torch.compile(f, backend="tilefuse", dynamic=dynamic)
    for _ in range(2):  # a second call through the same compiled graph
        x = torch.randn(64)
        xe = x.clone()
        want = f(xe)
        torch.testing.assert_close(cf(x), want)
        torch.testing.assert_close(x, xe)


def test_input_mutation2(dynamic):
    def f(a):
        b = a + 1
        a.view(64).copy_(torch.tensor([66.0], device=DEVICE))
        return b, a + 2

    # an input that is not a leaf (it requires grad): its mutation is still the caller's. The
    # graph allocates the mutated input's new value through aten's new_empty_strided
    x = torch.randn(1, 64).requires_grad_(True).add(1)
    check(f, x, dynamic=dynamic, native=False)


def test_input_mutation3(dynamic):
    def f(a):
        a += 1
        a *= 2
        aten.sigmoid_(a)
        a = a.view(64)
        a += 3
        a *= 4
        aten.relu_(a)
        return a

    check(f, torch.randn(1, 64), dynamic=dynamic)


def test_input_mutation4(dynamic):
    def f(a):
        torch.relu_(a)
        return a

    check(f, torch.randn(1, 64), dynamic=dynamic)


def test_input_mutation5(dynamic):
    def f(x):
        t = x.ceil()
        x.add_(10)
        return t

    check(f, torch.zeros((), dtype=torch.int64), dynamic=dynamic)


def test_slice_mutation1(dynamic):
    def f(a):
        x = torch.zeros_like(a)
        b = x + 1
        x[:, 3] = 3.0
        c = torch.clone(x)
        x[4, :] = 4.0
        return x, b, c, x + 1

    check(f, torch.randn(8, 8), dynamic=dynamic)


def test_slice_mutation2(dynamic):
    def f(a):
        a[:, 20:40] = a[:, 20:40] + 1
        a[:, 2:11] = a[:, 1:10] + 2  # reads and writes overlap

    check(f, torch.randn(1, 64), dynamic=dynamic)


def test_slice_mutation3(dynamic):
    def f(a):
        a[:2, :2].fill_(10)

    check(f, torch.randn(8, 8), dynamic=dynamic)


def test_fusing_write_into_disjoint_read(dynamic):
    check(lambda a: a.copy_(torch.flip(a, (0,))), torch.rand(20), dynamic=dynamic)

    def g(a):
        a[:, 20:40] = a[:, 20:40] + 1
        a[:, 2:900] = a[:, 1:899] + 2

    check(g, torch.rand(1, 1000), dynamic=dynamic)


def test_slice_view_with_graph_break(dynamic):
    def f(x):
        a = torch.tensor([1], device=DEVICE) + x
        a = a[0:1]
        b = a.squeeze()
        a[0] = 0
        if a[0] < 1e5:
            pass
        a[0] = 2
        return b

    # the comparison's scalar is read back to Python (aten's _local_scalar_dense)
    check(f, torch.zeros(1, dtype=torch.int64), dynamic=dynamic, native=False)


def test_inplace_where_pointwise(dynamic):
    def f(a, b):
        a[0] = 2
        return a * b

    check(f, torch.rand(1), torch.rand(2), dynamic=dynamic)


def test_remove_noop_copy(dynamic):
    def f(x, y):
        return x.cos().copy_(y).sin()

    check(f, torch.randn(8, 8), torch.randn(8), dynamic=dynamic)

    def g(a, b):
        b[0] = torch.abs(a).max().to(a.dtype)
        return b

    check(g, torch.randn(8, 8, dtype=torch.float16), torch.randn(8), dynamic=dynamic)


def test_remove_noop_clone(dynamic):
    def f(x):
        y = x.clone().reshape(-1, 4)
        y[:, [2, 0]] = y[:, [0, 2]]
        return y + x

    check(f, torch.randn(2, 4), dynamic=dynamic)


def test_cat_inplace(dynamic):
    def f(x):
        rt = torch.cat([x])
        x.sin_()
        return rt

    check(f, torch.ones(2), dynamic=dynamic)


def test_inplace_activations(dynamic):
    def f(x):
        return (
            aten.hardswish_(x + 1),
            aten.hardtanh_(x + 1),
            aten.leaky_relu_(x + 1),
            aten.silu_(x + 1),
            aten.log1p(x + 1),
            aten.masked_fill_(x + 1, torch.zeros_like(x, dtype=torch.bool), 99.0),
            aten.masked_fill_(x + 1, torch.ones_like(x, dtype=torch.bool), 99.0),
        )

    check(f, torch.randn(64) * 10, dynamic=dynamic)


def test_zero_element_mutation(dynamic):
    m = torch.nn.LeakyReLU(negative_slope=5.2955089, inplace=True)
    check(m, torch.randn(0), dynamic=dynamic)


def test_setitem_into_new_zeros(dynamic):
    # test_AllenaiLongformerBase_repro: slices of a zero tensor assigned from another tensor, a
    # transposed view of it then partly overwritten with -inf
    def f(query, scores, w: int):
        b, n, h, _ = query.size()
        chunks = n // w - 1
        diag = scores.new_zeros((b * h, chunks + 1, w, w * 2 + 1))
        diag[:, :-1, :, w:] = scores[:, :, :w, : w + 1]
        t = diag.view(b, h, n, 2 * w + 1).transpose(2, 1)
        t[:, :w, :, : w + 1] = torch.full_like(t[:, :w, :, : w + 1], -float("inf"))
        return t

    check(f, torch.randn(1, 16, 2, 4), torch.randn(2, 3, 8, 9), 4, dynamic=dynamic)


class _BufferModel(torch.nn.Module):
    def __init__(self, shape, w):
        super().__init__()
        self.buf = torch.nn.Buffer(torch.zeros(shape))
        self.w = torch.nn.Parameter(w)

    def forward(self, x):
        self.buf.add_(1)
        return (self.w @ x).sum() + self.buf.sum() if self.w.dim() == 2 else (self.w * x).sum() + self.buf.sum()


def _check_buffer_model(model, x, dynamic):
    eager, compiled = model, copy.deepcopy(model)
    before = [b._version for b in compiled.buffers()]
    want = eager(x.clone())
    got = torch.compile(compiled, backend="tilefuse", dynamic=dynamic)(x.clone())
    torch.testing.assert_close(got, want)
    for b_got, b_want in zip(compiled.buffers(), eager.buffers()):
        torch.testing.assert_close(b_got, b_want)
    # each buffer mutated once, as eager mutates it (its version counter moved by one)
    assert [b._version - v for b, v in zip(compiled.buffers(), before)] == [1] * len(before)


def test_buffer_copied_in_graph(dynamic):
    _check_buffer_model(_BufferModel(1, torch.zeros(1)), torch.ones(1, requires_grad=True), dynamic)


def test_buffer_copied_in_graph_with_different_shapes(dynamic):
    w = torch.tensor([[4.0, 5.0], [1.0, 2.0], [6.0, 7.0], [8.0, 9.0]])
    _check_buffer_model(_BufferModel((4, 4), w), torch.ones(2, 4, requires_grad=True), dynamic)


def test_buffer_batch_norm(dynamic):
    eager = torch.nn.BatchNorm1d(10)
    compiled = copy.deepcopy(eager)
    x = torch.randn(20, 10, requires_grad=True)
    want = eager(x)
    got = torch.compile(compiled, backend="tilefuse", dynamic=dynamic)(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for name, b in compiled.named_buffers():
        torch.testing.assert_close(b, dict(eager.named_buffers())[name], atol=1e-5, rtol=1e-5)


def test_inplace_resize_as(dynamic):
    def f(x, y):
        x.resize_as_(y)
        return x

    x, y = torch.randn(2, 3), torch.randn(20, 30)
    got = run_compiled(f, x, y, dynamic=dynamic)
    assert got.shape == y.shape
    torch.testing.assert_close(got.flatten()[:6], x.clone().flatten()[:6])


def test_resize(dynamic):
    # values of the kept prefix and the strides; the grown part is uninitialized in both
    def f(x, size: list[int], fmt):
        return aten.resize(x, size, memory_format=fmt)

    for xs, ys, fmt in [((2,), (1, 3, 2, 3), torch.contiguous_format), ((100,), (1, 3, 2, 3), torch.channels_last)]:
        x = torch.randn(xs)
        want = f(x.clone(), list(ys), fmt)
        got = run_compiled(f, x.clone(), list(ys), fmt, dynamic=dynamic)
        n = min(x.numel(), want.numel())
        torch.testing.assert_close(got.as_strided((n,), (1,)), want.as_strided((n,), (1,)))
        assert got.stride() == want.stride()


def test_resize_as(dynamic):
    def f(x, y, fmt):
        return aten.resize_as(x, y, memory_format=fmt)

    x = torch.randn(100)
    for y, fmt in [(torch.randn(1, 3, 2, 3), torch.contiguous_format), (torch.randn(1, 3, 2, 3), torch.channels_last)]:
        want = f(x.clone(), y, fmt)
        got = run_compiled(f, x.clone(), y, fmt, dynamic=dynamic)
        n = want.numel()
        torch.testing.assert_close(got.as_strided((n,), (1,)), want.as_strided((n,), (1,)))
        assert got.stride() == want.stride()


def test_mutable_custom_op_fixed_layout(dynamic):
    with torch.library._scoped_library("tpl_b", "DEF") as lib:
        lib.define("copy_(Tensor(a!) dst, Tensor src) -> ()", tags=torch.Tag.needs_fixed_stride_order)
        torch.library.impl(lib, "copy_", "Meta")(lambda dst, src: None)

        @torch.library.impl(lib, "copy_", "CompositeExplicitAutograd")
        def _(dst, src):
            dst.copy_(src)

        def f(x):
            full = torch.full([3], 7.0, device=DEVICE)
            torch.ops.tpl_b.copy_.default(full, x)
            return torch.mul(full, full)

        check(f, torch.arange(3, dtype=torch.float), dynamic=dynamic, native=False)


def test_fallback_mutable_op(dynamic):
    # test_fallback_mutable_op_basic, _with_return, _no_mutated_tensors, _list: an op that mutates
    # some of its arguments (one optional, one a list) runs as aten's kernel, ordered with the
    # graph's own copies into those arguments
    with torch.library._scoped_library("tpl_b_mut", "DEF") as lib:
        lib.define("inplace_(Tensor(a!) a, Tensor[] b, SymInt c, *, Tensor(b!)? d, SymInt e=2) -> Tensor")
        lib.define("add_to_all_(Tensor a, Tensor(a!)[] b) -> ()")

        @torch.library.impl(lib, "inplace_", "CompositeExplicitAutograd")
        def _(a, b, c, d, e=2):
            a.add_(b[0] * c * e)
            if d is not None:
                d.add_(b[1])
            return b[0] + b[1]

        @torch.library.impl(lib, "add_to_all_", "CompositeExplicitAutograd")
        def _(a, b):
            for t in b:
                t.add_(a)

        def f(a, b1, b2, c: int, d):
            a_, d_ = a.clone(), d.clone()
            res = torch.ops.tpl_b_mut.inplace_(a_, (b1, b2), c, d=d_)
            none_given = torch.ops.tpl_b_mut.inplace_(a_ * 1, (b1, b2), c, d=None)
            a.copy_(a_)
            d.copy_(d_)
            torch.ops.tpl_b_mut.add_to_all_(res, [b1, b2])
            return res, none_given

        args = (
            torch.tensor([0.0, 1.0, 2]),
            torch.tensor([2.0, 3.0, 5.0]),
            torch.tensor([1.0, 4.0, 6.0]),
            4,
            torch.tensor([2.0, 1, 0]),
        )
        check(f, *args, dynamic=dynamic, native=False)


def test_inductor_layout_optimization_input_mutations(dynamic):
    conv = torch.nn.Conv2d(3, 16, 1, stride=1, bias=False)

    def f(x):
        x.mul_(2)
        return conv(x)

    with torch.no_grad():
        got = check(f, torch.rand(2, 3, 8, 8), dynamic=dynamic, atol=1e-4, rtol=1e-4)
        assert got.stride() == conv(torch.rand(2, 3, 8, 8)).stride()
