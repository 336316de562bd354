"""Inductor's common templates for pooling and resampling, re-expressed: max_pool2d with
indices (padding, ceil mode, dilation) and its backward, avg_pool2d/3d and their backwards,
adaptive average/max pools, fractional max pool, nearest/bilinear/bicubic upsampling and
grid sampling.

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager (``_tpl_util_b.check``). The list of templates and where each went is
docs/inductor_templates.md.
"""

from __future__ import annotations

import pytest
import torch

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten


def _ramp(h, w):
    return -torch.arange(h * w, dtype=torch.float32).view(1, 1, h, w)


def test_max_pool2d1(dynamic):
    check(lambda x: aten.max_pool2d_with_indices(x, [3, 3], [2, 2]), torch.randn(2, 4, 16, 16), dynamic=dynamic)


def test_max_pool2d2(dynamic):
    check(lambda x: aten.max_pool2d_with_indices(x, [3, 3], [2, 2]), torch.randn(2, 3, 11, 11), dynamic=dynamic)


def test_max_pool2d3(dynamic):
    # padding, and one-element lists for kernel, stride and padding
    def f(x):
        return aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1]), aten.max_pool2d_with_indices(x, [3], [2], [1])

    check(f, _ramp(8, 8), dynamic=dynamic)


def test_max_pool2d4(dynamic):
    check(
        lambda x: aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [0, 0], [1, 1], True),
        torch.randn(2, 2, 11, 11),
        dynamic=dynamic,
    )


def test_max_pool2d5(dynamic):
    # an empty stride: the kernel size
    check(lambda x: aten.max_pool2d_with_indices(x, [3, 3], []), torch.randn(2, 3, 11, 11), dynamic=dynamic)


def test_max_pool2d6(dynamic):
    # a window as large as the input is wide
    check(
        lambda x: aten.max_pool2d_with_indices(x, [13, 13], []),
        torch.randn(1, 2, 27, 27),
        dynamic=dynamic,
        native=False,
    )


def test_max_pool2d7(dynamic):
    # ceil mode with a 1x1 window and stride 2
    f = lambda x: torch.nn.functional.max_pool2d(x, 1, stride=(2, 2), padding=0, ceil_mode=True)  # noqa: E731
    check(f, torch.randn(1, 1, 6, 7), dynamic=dynamic)


def test_max_pool2d8(dynamic):
    # dilation
    check(
        lambda x: aten.max_pool2d_with_indices(x, [3, 2], [2, 1], [1, 1], [1, 2]),
        torch.randn(2, 2, 3, 6),
        dynamic=dynamic,
        native=False,
    )


def test_alexnet_prefix(dynamic):
    def f(b, w, x):
        y = torch.relu(aten.convolution(x, w, b, [4, 4], [2, 2], [1, 1], False, [0, 0], 1))
        return (aten.max_pool2d_with_indices(y, [3, 3], [2, 2])[0],)

    check(
        f, torch.randn(8), torch.randn(8, 3, 11, 11), torch.randn(1, 3, 23, 23), dynamic=dynamic, atol=1e-3, rtol=1e-3
    )


def test_avg_pool2d1(dynamic):
    check(lambda x: aten.avg_pool2d(x, [3, 3], [2, 2]), torch.randn(2, 4, 16, 16), dynamic=dynamic)


def test_avg_pool2d2(dynamic):
    check(lambda x: aten.avg_pool2d(x, [3, 3], [2, 2]), torch.randn(2, 3, 11, 11), dynamic=dynamic)


def test_avg_pool2d3(dynamic):
    check(
        lambda x: (aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1]), aten.avg_pool2d(x, [3], [2], [1])),
        _ramp(8, 8),
        dynamic=dynamic,
    )


def test_avg_pool2d4(dynamic):
    check(lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [0, 0], True), torch.randn(2, 2, 11, 11), dynamic=dynamic)


def test_avg_pool2d5(dynamic):
    check(lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1], count_include_pad=False), _ramp(8, 8), dynamic=dynamic)


def test_avg_pool2d6(dynamic):
    check(lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1], divisor_override=3), _ramp(8, 8), dynamic=dynamic)


def test_avg_pool2d7(dynamic):
    check(lambda x: aten.avg_pool2d(x, [13, 13], [1, 1], [0, 0]), _ramp(16, 16), dynamic=dynamic, native=False)


def test_avg_pool2d8(dynamic):
    f = lambda x: aten.avg_pool2d(x, kernel_size=3, stride=2, padding=1, ceil_mode=True)  # noqa: E731
    check(f, torch.randn(1, 3, 6, 6), dynamic=dynamic)


def test_adaptive_avg_pool2d1(dynamic):
    def f(x):
        return aten._adaptive_avg_pool2d(x, (6, 6)), aten._adaptive_avg_pool2d(x + 1, (2, 5))

    for hw in (13, 3, 6):  # overlapping windows, the avg_pool2d case, the identity
        check(f, torch.randn(1, 3, hw, hw), dynamic=dynamic)


def test_adaptive_avg_pool2d2(dynamic):
    check(lambda x: aten._adaptive_avg_pool2d(x, (4, 4)), torch.randn(2, 4, 21, 21), dynamic=dynamic)


def test_adaptive_avg_pool2d_low_prec(dynamic):
    pool = torch.nn.AdaptiveAvgPool2d((1, 1))
    for dt in (torch.half, torch.bfloat16):
        check(pool, torch.randn(4, 3, 7, 7).to(dt), dynamic=dynamic)


def test_adaptive_avg_pool_with_output_size_0(dynamic):
    check(torch.nn.AdaptiveAvgPool1d(0), torch.randn(1, 2), dynamic=dynamic)
    check(torch.nn.AdaptiveAvgPool2d(0), torch.randn(1, 2, 3), dynamic=dynamic)


def test_adaptive_avg_pool1d_argmax(dynamic):
    f = lambda x: torch.argmax(torch.adaptive_avg_pool1d(x, output_size=2))  # noqa: E731
    check(f, torch.rand(4, 4, 3, dtype=torch.float64), dynamic=dynamic)


def test_adaptive_max_pool2d1(dynamic):
    f = lambda *xs: [aten.adaptive_max_pool2d(x, (6, 6)) for x in xs]  # noqa: E731
    # under symbolic sizes: aten's kernel
    check(f, *[torch.randn(2, 4, hw, hw) for hw in (16, 3, 6)], dynamic=dynamic, native=not dynamic)


def test_adaptive_max_pool2d2(dynamic):
    check(lambda x: aten.adaptive_max_pool2d(x, (4, 4)), torch.randn(2, 4, 21, 21), dynamic=dynamic, native=False)


@pytest.mark.parametrize("case", ["3x3_2x2", "6x5_3x3", "1x1_16x16"])
def test_fractional_max_pool2d(case, dynamic):
    # test_fractional_max_pool2d1..3: the samples that place the windows are an input
    k, o, shape = {
        "3x3_2x2": ((3, 3), (2, 2), (1, 4, 16, 16)),
        "6x5_3x3": ((6, 5), (3, 3), (2, 4, 18, 18)),
        "1x1_16x16": ((1, 1), (16, 16), (2, 4, 16, 16)),
    }[case]
    f = lambda x, s: aten.fractional_max_pool2d(x, k, o, s)  # noqa: E731
    check(f, torch.randn(shape), torch.rand(shape[0], shape[1], 2), dynamic=dynamic, native=False)


def _pool_backward_case(pool_args, x):
    out, idx = aten.max_pool2d_with_indices(x, *pool_args)
    return torch.randn_like(out), x, idx


@pytest.mark.parametrize(
    "pool_args, shape",
    [
        (([2, 2], [2, 2], [0, 0], [1, 1], False), (2, 4, 18, 14)),
        (([3, 3], [2, 2], [1, 1], [1, 1], True), (2, 2, 10, 14)),
        (([1, 1], [2, 2], [0, 0], [1, 1], False), (2, 3, 9, 10)),
        (([5, 5], [1, 1], [2, 2], [1, 1], False), (2, 8, 3, 4)),
        (([13, 13], [1, 1], [2, 2], [1, 1], False), (1, 4, 16, 16)),
        (([3, 2], [2, 1], [1, 1], [1, 2], False), (2, 2, 3, 6)),
    ],
    ids=["1", "2", "3", "4", "5", "6"],
)
def test_max_pool2d_with_indices_backward(pool_args, shape, dynamic):
    def f(g, x, idx):
        return aten.max_pool2d_with_indices_backward(g, x, *pool_args, idx)

    # a window wider than 9 or a dilation: aten's kernel
    native = pool_args[0][0] <= 5 and pool_args[3] == [1, 1]
    check(f, *_pool_backward_case(pool_args, torch.randn(shape)), dynamic=dynamic, native=native)


@pytest.mark.parametrize(
    "args, gshape, xshape",
    [
        (([2, 2], [2, 2], [0, 0]), (2, 4, 7, 7), (2, 4, 14, 14)),
        (([3, 3], [1, 1], [1, 1]), (1, 1, 20, 15), (1, 1, 20, 15)),
        (([1, 1], [2, 2], [0, 0]), (1, 16, 11, 11), (1, 16, 21, 21)),
        (([13, 13], [1, 1], [0, 0]), (1, 4, 12, 12), (1, 4, 24, 24)),
    ],
    ids=["1", "2", "3", "4"],
)
def test_avg_pool2d_backward(args, gshape, xshape, dynamic):
    f = lambda g, x: aten.avg_pool2d_backward(g, x, *args, args[0] != [1, 1], False, None)  # noqa: E731
    # no native lowering of avg_pool2d_backward: aten's kernel
    check(f, torch.randn(gshape), torch.randn(xshape), dynamic=dynamic, native=False)


@pytest.mark.parametrize(
    "args, gshape, xshape",
    [
        (([2, 2, 2], [2, 2, 2], [0, 0, 0]), (1, 2, 3, 3, 3), (1, 2, 6, 6, 6)),
        (([3, 3, 3], [1, 1, 1], [1, 1, 1]), (1, 1, 5, 6, 4), (1, 1, 5, 6, 4)),
        (([1, 1, 1], [2, 2, 2], [0, 0, 0]), (1, 4, 4, 4, 4), (1, 4, 7, 7, 7)),
        (([5, 5, 5], [1, 1, 1], [0, 0, 0]), (1, 2, 3, 3, 3), (1, 2, 7, 7, 7)),
    ],
    ids=["1", "2", "3", "4"],
)
def test_avg_pool3d_backward(args, gshape, xshape, dynamic):
    f = lambda g, x: aten.avg_pool3d_backward(g, x, *args, args[0] != [1, 1, 1], False, None)  # noqa: E731
    check(f, torch.randn(gshape), torch.randn(xshape), dynamic=dynamic, native=False)


def test_upsample_nearest1d(dynamic):
    def f(a):
        return tuple(aten.upsample_nearest1d(a, [n], None) for n in (74, 70, 45, 36)) + (
            aten.upsample_nearest1d(a, None, [2.0]),
        )

    # under symbolic sizes: aten's kernel (no symbolic lowering)
    check(f, torch.randn(2, 4, 37), dynamic=dynamic, native=not dynamic)


def test_upsample_nearest2d(dynamic):
    def f(a):
        sizes = ([24, 26], [20, 25], [15, 24], [12, 13])
        return tuple(aten.upsample_nearest2d(a, s) for s in sizes) + (aten.upsample_nearest2d(a, None, [2.0, 2.0]),)

    # under symbolic sizes: aten's kernel (no symbolic lowering)
    check(f, torch.randn(1, 2, 13, 12), dynamic=dynamic, native=not dynamic)


def test_upsample_nearest3d(dynamic):
    def f(a):
        sizes = ([14, 16, 18], [10, 15, 20], [5, 14, 23], [6, 9, 10])
        return tuple(aten.upsample_nearest3d(a, s, None) for s in sizes) + (
            aten.upsample_nearest3d(a, None, [2.0] * 3),
        )

    # under symbolic sizes: aten's kernel (no symbolic lowering)
    check(f, torch.randn(1, 2, 7, 8, 9), dynamic=dynamic, native=not dynamic)


def test_upsample_nearest2d_backward(dynamic):
    def f(a):
        g = aten.upsample_nearest2d_backward
        return tuple(g(a, output_size=[6, 12], input_size=[3, 3, h, w]) for h, w in ((3, 6), (4, 5), (2, 8), (4, 7)))

    # aten's upsample_nearest2d_backward (no native lowering)
    check(f, torch.randn(3, 3, 6, 12), dynamic=dynamic, native=False)


def test_upsample_bilinear2d_a(dynamic):
    def f(a):
        return aten.upsample_bilinear2d(a, [25, 25], False, None), aten.upsample_bilinear2d(a, None, True, [2.0, 2.0])

    # under symbolic sizes: aten's kernel (no symbolic lowering)
    check(f, torch.randn(2, 2, 17, 18), dynamic=dynamic, native=not dynamic, atol=2.5e-5, rtol=1.3e-6)


def test_upsample_bilinear2d_b(dynamic):
    f = lambda a: aten.upsample_bilinear2d(a, None, True, [2.0, 2.0])  # noqa: E731
    # under symbolic sizes: aten's kernel (no symbolic lowering)
    check(f, torch.randn(1, 2, 10, 19), dynamic=dynamic, native=not dynamic, atol=2.5e-5, rtol=1.3e-6)


def test_upsample_bicubic2d(dynamic):
    def f(a):
        return aten.upsample_bicubic2d(a, (10, 10), True), aten.upsample_bicubic2d(a, (10, 16), False)

    # under symbolic sizes: aten's kernel (no symbolic lowering)
    check(f, torch.randn(1, 2, 6, 5), dynamic=dynamic, native=not dynamic, atol=2e-5, rtol=1e-3)


def test_grid_sampler_2d(dynamic):
    def f(a, b):
        return aten.grid_sampler_2d(a, b, 0, 0, True), aten.grid_sampler_2d(a, b, 0, 1, False)

    # aten's grid_sampler_2d (no native lowering)
    check(
        f,
        torch.randn(1, 2, 8, 8),
        torch.rand(1, 8, 8, 2) * 2 - 1,
        dynamic=dynamic,
        atol=2e-4,
        rtol=1.3e-6,
        native=False,
    )


def test_upsample_cat_conv(dynamic):
    up = torch.nn.UpsamplingNearest2d(scale_factor=2)
    conv = torch.nn.Conv2d(8, 5, kernel_size=1)
    f = lambda x, y: conv(torch.cat([up(x), y], dim=1))  # noqa: E731
    with torch.no_grad():
        check(
            f,
            torch.randn(1, 2, 4, 5),
            torch.randn(1, 6, 8, 10),
            dynamic=dynamic,
            atol=1e-4,
            rtol=1e-4,
            native=not dynamic,
        )
