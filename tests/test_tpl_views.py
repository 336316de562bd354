"""Inductor's common templates for views, re-expressed: view/reshape (sizes and dtypes),
permute/transpose, expand, squeeze/unsqueeze, slice/select/narrow, split/unbind, as_strided,
unfold, diagonal, repeat, contiguous and output strides.

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager (``_tpl_util_b.check``). The list of templates and where each went is
docs/inductor_templates.md.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES, run_compiled

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten

# (input size, viewed size) pairs; each is tried in both directions
_VIEW_PAIRS = [
    ([35], [5, 7]),
    ([2 * 3 * 4 * 5 * 2], [2, 3, 4, 5, 2]),
    ([6, 4, 5, 6], [2, 3, 4, 5, 2, 3]),
    ([50, 20], [10, 5, 20]),
    ([1, 10, 1], [10]),
    ([10, 1, 10, 1, 3], [10, 30]),
    ([2, 2, 2, 2], [4, 4]),
]


@pytest.mark.parametrize("pair", range(len(_VIEW_PAIRS)))
def test_views1(pair, dynamic):
    a, b = _VIEW_PAIRS[pair]
    for src, dst in ((a, b), (b, a)):
        check(
            lambda x, y, dst=dst: (x.view(dst) + y, (x + 1).view(dst) + y),
            torch.randn(src),
            torch.randn(dst),
            dynamic=dynamic,
        )


def test_views2(dynamic):
    cases = [([2, 2, 2, 2], [4, -1]), ([10, 1, 10, 1, 3], [-1, 30]), ([50, 20], [10, -1, 20])]

    def f(*xs):
        return [v for x, (_, dst) in zip(xs, cases) for v in (x.view(dst) + 1, (x * 2).view(dst) + 1)]

    check(f, *[torch.randn(src) for src, _ in cases], dynamic=dynamic)


def test_views3(dynamic):
    # rows gathered by an index, then viewed twice
    def f(w, i):
        return aten.index(w, [i]).view(1, 186, 16).view(1, 6, 31, 16)

    check(f, torch.randn(16, 16), torch.randint(0, 16, (186,)), dynamic=dynamic)


def test_views4(dynamic):
    def f(x, i):
        y = x.index_select(0, i)
        return y.view(2, 3, 4, 5, 5).view(2, 3, 2, 10, -1)

    check(f, torch.randn(12, 5, 5), torch.randint(0, 11, (24,)), dynamic=dynamic)


def test_views5(dynamic):
    # a slice that leaves a size-0 dim, then viewed with -1
    def f(x):
        y = x[:, 4:]
        return y.view(len(y), -1, 4)

    check(f, torch.randn(4, 4, 4, 4), dynamic=dynamic)


def test_views6(dynamic):
    def f(x):
        s = aten.slice(aten.slice(torch.relu(x), 0, 0, 2**63 - 1), 1, 0, 2**63 - 1)
        return aten.slice(s, 3, 0, 0).view(4, 2, -1)

    check(f, torch.randn(4, 2, 4, 4), dynamic=dynamic)


def test_views7(dynamic):
    # bitcast views: float32 <-> int32
    def f(x, y):
        return (x + 1).to(torch.float32).view(torch.int32), (y + 1).to(torch.int32).view(torch.float32)

    check(f, torch.rand(2, 3), torch.randint(10, (2, 3), dtype=torch.int32), dynamic=dynamic)


def test_bitcast_views_of_computed_values(dynamic):
    # test_float16_to_int16, test_float32_to_int32, test_bfloat16_to_int16, test_dtypeview_fusion
    def f(h, a, b, bf):
        return (
            h.view(torch.int16) * 2,
            (a + b).view(torch.int32) * 2,
            (bf + bf).view(torch.int16) * 2,
            ((h + 1).view(torch.int16) * 2),
        )

    h = torch.randn(64, dtype=torch.float16)
    a, b = torch.ones(4), torch.ones(4)
    check(f, h, a, b, torch.ones(4, dtype=torch.bfloat16), dynamic=dynamic)


def test_reinterpret_dtypeview(dynamic):
    def f(x, x2):
        return x.view([10, 10]).view(torch.int32), x2.view(torch.int32).view([10, 10])

    x = torch.randn(100, 1)
    check(f, x, x.clone(), dynamic=dynamic)


def test_view_uint8_through_differing_bitwidths(dynamic):
    x = torch.randint(0, 16, [64, 64], dtype=torch.uint8)
    # a bitcast to a wider dtype changes the last size: aten's view kernel (no native lowering)
    f = lambda x: [x.view(dt).view(torch.uint8) for dt in (torch.int16, torch.int32, torch.int64)]  # noqa: E731
    check(f, x, dynamic=dynamic, native=False)


def test_dtypeview(dynamic):
    # bitcast views feeding matrix products (a few dtype combinations of the template's sweep)
    def f(x, y, x2):
        x = x.view(torch.float32)
        return x @ (y.view(torch.float32) + 1), (x2.view(torch.float32) + 1) @ x

    x = torch.randint(0, 2**20, (2, 2), dtype=torch.int32)
    check(f, x, torch.randint(0, 2**20, (2, 2), dtype=torch.int32), x.clone(), dynamic=dynamic)


def test_transpose(dynamic):
    check(
        lambda a, b: (a.t() + b, torch.transpose(b * 2, 0, 1) + 10),
        torch.randn(8, 8),
        torch.randn(8, 8),
        dynamic=dynamic,
    )


def test_transpose_add(dynamic):
    check(lambda a, b: a.t() + b, torch.randn(16, 32), torch.randn(32, 16), dynamic=dynamic, kernels=1)


def test_permute1(dynamic):
    def f(a):
        return torch.permute(a + 1, [2, 1, 4, 0, 3]) + 2, torch.permute(a, [2, 1, 4, 0, 3]) + 2

    check(f, torch.randn(2, 2, 2, 2, 2), dynamic=dynamic)


def test_permute2(dynamic):
    def f(a):
        return (torch.permute(torch.unsqueeze(a.unfold(0, 2, 1), 1), [0, 2, 3, -3]),)

    check(f, torch.randn(4, 4), dynamic=dynamic)


def test_expand(dynamic):
    def f(a):
        return ((a + 1).expand(3, 4, 2, 3, 2) + 2, a.expand(2, 1, 2, 3, 2) + 2), a.expand(2, -1, 5, -1)

    check(f, torch.randn(2, 1, 2), dynamic=dynamic)


def test_expand_as(dynamic):
    def f(a, b):
        return aten.expand_as(a, b), aten.expand_as(a + 1, b + 1) + 1

    check(f, torch.randn(6, 1, 20), torch.randn(6, 12, 20), dynamic=dynamic)


def test_squeeze1(dynamic):
    check(lambda a: ((a + 1).squeeze() + 2, a.squeeze() + 2), torch.randn(1, 2, 1, 2, 2, 1, 1), dynamic=dynamic)


def test_squeeze2(dynamic):
    def f(a):
        return (a + 1).squeeze(-1).squeeze(2) + 2, a.squeeze(0) + 2

    check(f, torch.randn(1, 2, 1, 2, 2, 2, 1), dynamic=dynamic)


def test_squeeze_varargs(dynamic):
    check(lambda x: x.squeeze(1, 2).clone(), torch.randn(64, 1, 1), dynamic=dynamic)


def test_unsqueeze(dynamic):
    def f(a):
        return (
            torch.unsqueeze(a + 1, -1) + 2,
            torch.unsqueeze(a, 2) + 2,
            torch.unsqueeze(a + 1, 0) + 2,
            torch.unsqueeze(a, -2) + 2,
        )

    check(f, torch.randn(2, 2, 2, 2), dynamic=dynamic)


def test_unsqueeze_inplace(dynamic):
    def f(a):
        t = a + 1
        aten.unsqueeze_(t, 2)
        return t, aten.unsqueeze_(a + 1, 0) + 2

    check(f, torch.randn(2, 2, 2, 2), dynamic=dynamic)


def test_simplify_loops(dynamic):
    check(
        lambda a, b: a + b,
        torch.randn(2, 3, 4, 5, 6),
        torch.randn(4, 2, 3, 5, 6).permute(1, 2, 0, 3, 4),
        dynamic=dynamic,
    )


def test_strided_inputs(dynamic):
    x = torch.randn(8, 32)[:, ::2]
    check(lambda x, y: x + y, x, torch.randn(8, 16), dynamic=dynamic)


def test_transposed_propagates(dynamic):
    # the output keeps the (permuted) layout eager gives
    a = torch.randn(1, 4, 4, 4).permute(0, 2, 3, 1)
    b = torch.randn(4, 4, 4).permute(1, 2, 0)
    got = check(lambda x, y: x + y, a, b, dynamic=dynamic)
    assert got.stride() == (a + b).stride()


def test_insignificant_strides(dynamic):
    x = torch.arange(8, dtype=torch.float32)
    got = check(lambda x: (x + 1).view(-1, 1, 2), x, dynamic=dynamic)
    assert got.stride() == (x + 1).view(-1, 1, 2).stride()


def test_output_strides(dynamic):
    def f(x):
        y = x.permute(0, 2, 3, 1).contiguous()
        torch._dynamo.graph_break()
        return y.view(-1, 4)

    x = torch.rand(4, 4, 4, 4)
    got = check(f, x, dynamic=dynamic)
    assert got.stride() == f(x).stride()
    # a chain of views of an input is returned as a view of it, with no copy
    out = run_compiled(lambda x: x[0:2:2].T[3:].squeeze(0), x, dynamic=dynamic)
    assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_adding_tensor_offsets(dynamic):
    x = torch.randn(256)
    cf = torch.compile(lambda x: x[16:32], backend="tilefuse", dynamic=dynamic, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(cf(x[0:]), x[16:32])
        torch.testing.assert_close(cf(x[128:]), x[144:160])


def test_view_detach(dynamic):
    check(lambda a: a[0].detach(), torch.randn(4, 4, requires_grad=True), dynamic=dynamic)


def test_slice1(dynamic):
    def f(a):
        return (
            a[:, :10, 0] + a[:, 10:, 0],
            (a + 1)[:, :10, 0] + (a + 1)[:, 10:, 0],
            a[:, -30:, 0],  # start past the front: clamped
            a[:, :-30, 0],  # empty
        )

    check(f, torch.randn(2, 20, 2), dynamic=dynamic)


def test_slice2(dynamic):
    def f(a):
        return a[:-1, ::2, -1] + a[-1:, 1::2, -2], (a + 1)[:-1, ::2, -1] + (a + 2)[-1:, 1::2, -2]

    check(f, torch.randn(2, 20, 2), dynamic=dynamic)


def test_slice3(dynamic):
    check(lambda a, b: aten.slice.Tensor(a, 0, 0, -b), torch.rand(6, 3, 4, 4), 2, dynamic=dynamic)


def test_slice4(dynamic):
    # empty slices whose start or end must be clamped
    def f(a):
        return (
            aten.slice.Tensor(a, 0, 2, 0, 1),
            aten.slice.Tensor(a, 0, a.shape[0], a.shape[0] + 10, 1),
            aten.slice.Tensor(a, 0, -20, 0, 1),
            aten.slice.Tensor(a, 0, -20, -16, 1),
        )

    check(f, torch.rand(10), dynamic=dynamic)


def test_dense_mask_index(dynamic):
    check(
        lambda x, y: (x * aten.select.int(y, 0, 2)).sum(),
        torch.randn(1000),
        torch.randn(3),
        dynamic=dynamic,
        atol=1e-4,
        rtol=1e-5,
    )


def test_narrow(dynamic):
    def f(x):
        return aten.narrow(x, 1, 10, 16), aten.narrow(x + 2, 0, 10, 16) + 1, aten.narrow_copy(x, 1, 10, 16)

    check(f, torch.randn(32, 32), dynamic=dynamic)


def test_split_with_list(dynamic):
    def f(a):
        b = a * 2.0
        return [[t + 1.0 for t in torch.split(b, sizes, -1)] for sizes in ([3, 3, 4], [4, 3, 3], [1, 2, 3, 4])]

    check(f, torch.randn(2, 2, 10), dynamic=dynamic)


def test_split_with_integer(dynamic):
    cf = torch.compile(lambda x, n: torch.split(x, n, -1), backend="tilefuse", dynamic=dynamic)
    for width, n, shapes in [(10, 5, [5, 5]), (12, 4, [4, 4, 4]), (10, 3, [3, 3, 3, 1])]:
        x = torch.randn(2, width)
        got = cf(x, n)
        assert [t.shape[1] for t in got] == shapes
        torch.testing.assert_close(torch.cat(got, -1), x)


def test_split_failed(dynamic):
    cf = torch.compile(lambda a: torch.split(a, [2, 1, 1], dim=1), backend="tilefuse", dynamic=dynamic)
    with pytest.raises(RuntimeError):
        cf(torch.randn(1, 5))


def test_split(dynamic):
    def f(a):
        t = torch.split(a, 3, -1)
        return t[0], t[1], t[2], t[3]

    check(f, torch.randn(2, 2, 10), dynamic=dynamic)
    check(lambda a: f(a + 1), torch.randn(2, 2, 10), dynamic=dynamic)


def test_unbind(dynamic):
    check(lambda a: (torch.unbind(a), torch.unbind(a, -1)), torch.randn(4, 4, 4), dynamic=dynamic)


def test_to_memory_format(dynamic):
    check(lambda a: a.to(memory_format=torch.channels_last), torch.randn(2, 2, 4, 4), dynamic=dynamic)
    x = torch.randn(2, 2, 4, 4).to(memory_format=torch.channels_last)
    check(lambda a: a.to(memory_format=torch.contiguous_format), x, dynamic=dynamic)


def test_as_strided(dynamic):
    def f(x):
        return aten.as_strided(x, (4, 4, 16), (64, 16, 1), 0), aten.as_strided(x + 1, (4, 4, 16), (64, 16, 1), 0) + 2

    # with symbolic input sizes, as_strided of constant sizes runs as aten's view (no native lowering)
    check(f, torch.randn(16, 16), dynamic=dynamic, native=not dynamic)

    def g(x):  # a channels-last input, viewed as a 5-d channels-last window
        size, stride = (2, 8, 2, 4, 3), (384, 1, 192, 8, 64)
        return aten.as_strided(x, size, stride, 0), aten.as_strided(x + 1, size, stride, 0) + 2

    check(g, torch.randn(2, 8, 6, 8).to(memory_format=torch.channels_last), dynamic=dynamic, native=not dynamic)


def test_exact_stride(dynamic):
    full = torch.randn(16, 16)
    view = torch.as_strided(full, (16, 8), full.stride())

    def f(x):
        out = torch.empty_strided(x.size(), x.stride(), device=DEVICE)
        out[:] = x + x
        return out

    got = check(f, view, dynamic=dynamic)
    assert got.stride() == f(view).stride()


def test_repeat(dynamic):
    def f(x):
        return x.repeat(0, 1, 1, 1), x.repeat(2, 2, 3, 1), x.repeat(8, 1, 1, 1), x.repeat(2, 1, 1, 1, 1, 1)

    check(f, torch.randn(1, 2, 4, 8), dynamic=dynamic)


def test_repeat_as_strided(dynamic):
    def f(x):
        full = x.repeat((3, 2))
        v = torch.as_strided(full, (3, 2), full.stride())
        return v + v

    check(f, torch.randn(1, 1), dynamic=dynamic)


def test_repeat_interleave(dynamic):
    def f(x):
        return x.repeat_interleave(2), x.repeat_interleave(3, dim=0), x.repeat_interleave(x.size(1), dim=1)

    check(f, torch.randn(1, 2, 4, 8), dynamic=dynamic)


def test_repeat_interleave_2(dynamic):
    # repeats given as a tensor, with the output size known
    check(
        lambda x: aten.repeat_interleave.Tensor(x, output_size=12),
        torch.tensor([2, 4, 6]),
        dynamic=dynamic,
        native=False,
    )


def test_diagonal_copy(dynamic):
    def f(*xs):
        return [(torch.diagonal_copy(x), x.diagonal(1) * 2, (x + 1).diagonal(-1)) for x in xs]

    check(f, torch.randn(2, 3), torch.randn(2, 2), torch.randn(3, 2), dynamic=dynamic)


def test_unfold_zero_dimension_tensor(dynamic):
    check(lambda x: torch.unfold_copy(dimension=1, input=x, size=0, step=7), torch.rand(1, 0), dynamic=dynamic)


def test_sizehint_issue1(dynamic):
    # im2col with a kernel equal to its stride
    x = torch.randn(2, 6, 8, 8, requires_grad=True)
    check(
        lambda x: F.unfold(x, kernel_size=[4, 4], dilation=1, padding=0, stride=[4, 4]), x, dynamic=dynamic, grad=True
    )


def test_pixel_shuffle_channels_last(dynamic):
    x = torch.randn(1, 16, 6, 8).to(memory_format=torch.channels_last)
    check(lambda x: F.relu(F.pixel_shuffle(x, 2)), x, dynamic=dynamic)


def test_clone(dynamic):
    check(lambda x: (aten.clone(x) + 2, aten.clone(x + 1)), torch.randn(16, 16), dynamic=dynamic)


def test_mm_views(dynamic):
    def f(a, b):
        return torch.mm(a.view(16, 16), b.view(16, 16))

    check(
        f,
        torch.randn(16, 16).transpose(0, 1),
        torch.randn(1, 16, 16).transpose(0, 1),
        dynamic=dynamic,
        atol=1e-4,
        rtol=1e-4,
    )


def test_conv_with_as_strided(dynamic):
    conv = torch.nn.Conv2d(16, 24, kernel_size=1, bias=False)

    def f(x):
        p = aten.constant_pad_nd.default(conv(x), [2, 2, 2, 2], 0.0)
        w = aten.as_strided.default(p, [2, 24, 2, 8, 6], [2400, 100, 40, 1, 8])
        w = aten.as_strided.default(w, [2, 24, 2, 2, 6, 6], [2400, 100, 40, 4, 8, 1])
        return aten.clone.default(w, memory_format=torch.contiguous_format)

    with torch.no_grad():
        check(f, torch.randn(2, 16, 6, 6), dynamic=dynamic, atol=1e-4, rtol=1e-4, native=not dynamic)


def test_require_stride_expanded(dynamic):
    # a convolution of an unsqueezed channels-last input: the size-1 dim needs no copy to lay out
    w = torch.randn(8, 3, 5, 5).to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 24, 24).to(memory_format=torch.channels_last).squeeze(0)

    def f(w, x):
        return (aten.convolution(x.unsqueeze(0), w, None, [4, 4], [2, 2], [1, 1], False, [0, 0], 1),)

    check(f, w, x, dynamic=dynamic, atol=1e-4, rtol=1e-4)
