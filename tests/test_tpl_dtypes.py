"""Inductor's CommonTemplate dtype-conversion and factory tests, rewritten for tilefuse: ``to`` /
``_to_copy`` between float, int and bool types, bit reinterpretation (``view(dtype)``) between
types of equal and of different widths, memory-format conversion, and the tensor factories
(arange / linspace / full / zeros / tensor literals / empty). Each test runs compiled with static
and with dynamic shapes (``dyn``) against eager; docs/inductor_templates.md maps every Inductor
test to its port here."""

from __future__ import annotations

import pytest
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_dtype import all_types

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, check_each, compiled
from tilefuse import metrics

pytestmark = [*GPU_MARKS, DYN]
aten = torch.ops.aten
ON_CUDA = pytest.mark.skipif(DEVICE != "cuda", reason="moves tensors between the CPU and CUDA")


def test_to_dtype(dyn):
    def f(a, b):
        return (
            aten._to_copy(a, dtype=6),
            aten._to_copy(b + 1, dtype=6),
            aten.to(b, torch.float64),
            aten.to(b, torch.bool),
        )

    check(f, torch.randn(2, 2, 10), torch.randn(2, 2, 10, dtype=torch.float64), dynamic=dyn)


def test_view_dtype_same_width(dyn):
    # test_views7, test_float32_to_int32: float32 <-> int32 bits of computed values
    def f(x, y):
        return (x + 1).to(torch.float32).view(torch.int32), (y + 1).to(torch.int32).view(torch.float32)

    check(f, torch.rand(2, 3), torch.randint(10, (2, 3), dtype=torch.int32), dynamic=dyn)
    check(lambda a, b: (a + b).view(dtype=torch.int32).mul(2), torch.ones(4), torch.ones(4), dynamic=dyn)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_view_half_as_int16(dyn, dtype):
    # test_float16_to_int16, test_bfloat16_to_int16, test_dtypeview_fusion (one kernel)
    check(lambda x: x.view(dtype=torch.int16).mul(2), torch.ones(4, dtype=dtype), dynamic=dyn, ref_in_float=False)
    check(
        lambda a, b: (a + b).view(dtype=torch.int16).mul(2),
        torch.ones(4, dtype=dtype),
        torch.ones(4, dtype=dtype),
        dynamic=dyn,
        ref_in_float=False,
    )
    check(
        lambda x: torch.ops.aten.view.dtype(x + 1, torch.int16) * 2,
        torch.randn(1024).to(dtype),
        dynamic=dyn,
        ref_in_float=False,
    )
    assert metrics.generated_kernel_count == 1


# a view target, and an input dtype of the same width holding its bits
_VIEW_PAIRS = [
    (torch.float32, torch.int32),
    (torch.float64, torch.int64),
    (torch.float16, torch.int16),
    (torch.bfloat16, torch.float16),
]


@pytest.mark.parametrize("dtype, src", _VIEW_PAIRS, ids=[str(d).split(".")[1] for d, _ in _VIEW_PAIRS])
def test_view_dtype_then_matmul(dyn, dtype, src):
    # test_dtypeview: an input of another dtype of the same width viewed as a float dtype, then
    # matmuls (the bits are those of small floats of the target dtype)
    def f(x, y, x2):
        x = x.view(dtype)
        return x @ (y.view(dtype) + 1), (x2.view(dtype) + 1) @ x

    x = torch.rand(2, 2).to(dtype).view(src)
    check(f, x, x.clone(), x.clone(), dynamic=dyn, ref_in_float=False, atol=1e-2, rtol=1e-2)


def test_view_dtype_reinterpret_after_reshape(dyn):
    # test_reinterpret_dtypeview: reshape then view(dtype), and the reverse
    f = lambda x, x2: (x.view([10, 10]).view(torch.int32), x2.view(torch.int32).view([10, 10]))  # noqa: E731
    x = torch.randn(100, 1)
    check(f, x, x.clone(), dynamic=dyn, ref_in_float=False)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64])
def test_view_uint8_through_wider_int(dyn, dtype):
    # tilefuse declines a view(dtype) to another element size: both views run as aten views
    x = torch.randint(0, 2**4, [64, 64], dtype=torch.uint8)
    check(lambda x: x.view(dtype).view(torch.uint8), x, dynamic=dyn, native=False)


def test_to_memory_format(dyn):
    check(lambda a: a.to(memory_format=torch.channels_last), torch.randn(2, 2, 10, 10), dynamic=dyn)
    check(
        lambda a: a.to(memory_format=torch.contiguous_format),
        torch.randn(2, 2, 10, 10).to(memory_format=torch.channels_last),
        dynamic=dyn,
    )


def test_const_int32_to_float(dyn):
    def f(x):
        a = torch.zeros([1, 2], dtype=torch.int32, device=x.device)
        return (a + a).to(dtype=torch.float32) * 0.8 + x

    check(f, torch.randn(2), dynamic=dyn)


def test_long_tensor_literals(dyn):
    def f(a):
        return torch.LongTensor([294]).to(a.device) - a, torch.as_tensor([295], device=DEVICE).to(a.device) + a

    # on CUDA the literals are CPU tensors moved to the device: the transfer is an aten op
    check(f, torch.randint(0, 999, size=[8, 8]), dynamic=dyn, native=DEVICE == "cpu")


def test_full_like_truncates_to_dtype(dyn):
    cases = [(make_tensor(8, dtype=d, device=DEVICE),) for d in all_types()]
    check_each(lambda a: a + torch.full_like(a, 7.777), cases, dynamic=dyn)


@ON_CUDA
def test_to_device(dyn):
    def f(a):
        target = "cuda" if a.device.type == "cpu" else "cpu"
        return aten._to_copy(a, device=torch.device(target), dtype=6, layout=0)

    for dev in ("cpu", "cuda"):
        x = torch.randn(2, 2, 10, device=dev)
        torch.testing.assert_close(compiled(f, dyn)(x), f(x))


@ON_CUDA
def test_to_device_constant(dyn):
    def f(a):
        other = "cuda" if a.device.type == "cpu" else "cpu"
        const = torch.as_tensor(list(range(64)), device=other)
        return torch.arange(10, device=other).to(a.device) + a, const.to(a.device), (const + 1).to(a.device)

    x = torch.randn(10)
    for g, w in zip(compiled(f, dyn)(x), f(x)):
        torch.testing.assert_close(g, w)


@ON_CUDA
def test_scalar_cpu_tensor_arg(dyn):
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x, y = torch.rand(20, device="cuda"), torch.rand(4, device="cpu", dtype=dtype)
        torch.testing.assert_close(compiled(lambda x, y: x + y.sum(), dyn)(x, y), x + y.sum())


# ---------------------------------------------------------------------------------- factories
def test_arange(dyn):
    # test_arange1 .. test_arange4, test_arange6
    def f(x, xi, y):
        r1 = torch.arange(8 * 8, dtype=torch.float32, device=x.device).view(8, 8)
        t = x * r1
        return (
            t,
            t + torch.arange(10, 18, device=x.device),
            xi + torch.arange(8, device=x.device),
            y + aten.arange.start_step(0, 53, 4, dtype=torch.int64, device=x.device)[:1],
            y.sum() - torch.arange(512, -512, -1.0, device=x.device),
        )

    check(f, torch.randn(8, 8), torch.randint(4, (8, 8)), torch.randn(14), dynamic=dyn)
    # float bounds with an explicit dtype; tilefuse declines an integer arange of float bounds
    # (an aten fallback kernel)
    for dtype in (torch.float32, torch.int64):
        check(
            lambda x: torch.arange(0.1, 8.0001, 1, dtype=x.dtype, device=x.device),
            make_tensor(1, dtype=dtype, device=DEVICE),
            dynamic=dyn,
            native=dtype.is_floating_point,
        )


def test_arange_with_step_argument(dyn):
    # test_arange5: an int or a float step (the result dtype follows it)
    cf = compiled(lambda step: torch.arange(512, -512, step, device=DEVICE), dyn)
    for step in (-1, -1.0):
        got, want = cf(step), torch.arange(512, -512, step, device=DEVICE)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)


def test_linspace(dyn):
    check(lambda x: torch.linspace(0.125, 0.875, 7, device=x.device) + x, torch.randn(1, 7), dynamic=dyn)
    check(lambda x: torch.linspace(0, 2, 1, device=x.device) + x, torch.randn(1, 1), dynamic=dyn)
    check(lambda x: torch.linspace(0, 2, 0, device=x.device), torch.Tensor([]), dynamic=dyn)


def test_tensor_literals(dyn):
    # test_tensor1 .. test_tensor3
    def f(x, y, z):
        d = x.device
        return (
            torch.tensor([1], device=d) + x,
            torch.tensor(5, device=d),
            torch.tensor(list(range(2, 40, 2)), device=d) + y,
            torch.tensor([], device=d),
            torch.tensor([1, 2], device=d) + 1,
            torch.tensor([1, 2, 3], device=d) + 2,
            torch.tensor([1, 2, 3, 4], device=d) + z,
        )

    check(f, torch.randn(10), torch.randn(1), torch.randn(4), dynamic=dyn)


def test_zeros_ones_full(dyn):
    # test_zeros, test_new_ones, test_full_like, test_fill1, test_fill2
    def f(a, b):
        return (
            a + 1,
            torch.zeros((1, 8, 8, 8), dtype=torch.float32, device=a.device),
            torch.zeros(2, 3, device=DEVICE),
            a + torch.ones(8, device=a.device),
            torch.full((2, 3), 3.1416, device=a.device),
            aten.new_ones(a, [], device=a.device, dtype=6, layout=0, pin_memory=False),
            aten.new_zeros(a, [], device=a.device, dtype=6, layout=0, pin_memory=False),
            torch.full_like(a, 7.777) - 1,
            torch.ones_like(b),
            aten.fill.Scalar(torch.ones_like(b), 2),
            aten.fill.Tensor(torch.ones_like(b), torch.tensor(3.0, device=b.device)),
        )

    check(f, torch.randn(8), torch.randn(16, 16), dynamic=dyn)


@pytest.mark.parametrize("n", [1024, 1023])
def test_full_of_python_bool(dyn, n):
    def f(n):
        x = torch.full((1,), n >= 1024, device=DEVICE)
        return x, x + 1

    check(f, n, dynamic=dyn)


def test_arange_moved_to_device(dyn):
    # test_move_arange: an arange built on the CPU and moved to the input's device fuses
    check(lambda x: torch.arange(len(x), device="cpu").to(x.device) + x, torch.randn(32), dynamic=dyn)
    assert metrics.generated_kernel_count == 1


def test_empty_factories(dyn):
    # test_empty1, test_empty2, test_new_empty, test_empty_strided, test_new_empty_strided:
    # shapes, strides and dtypes (the values are unspecified)
    def f(a):
        return (
            torch.empty((1, 128, 128), device=a.device),
            aten.empty((1, 128, 128), device=a.device),
            aten.new_empty(a, [1, 128, 128]),
            aten.empty_strided([1, 128, 128], [16384, 128, 1], device=a.device),
            aten.new_empty_strided(a, [1, 128, 128], [16384, 128, 1]),
        )

    x = torch.randn(55)
    for g, w in zip(compiled(f, dyn)(x), f(x)):
        assert (g.shape, g.stride(), g.dtype, g.device) == (w.shape, w.stride(), w.dtype, w.device)


@ON_CUDA
def test_multi_device(dyn):
    # additions on CUDA and the CPU alternately, moved between them in one graph
    def f(x):
        x = x + 1 + 2
        x = x.to(device="cuda") + 3 + 4
        x = x.cpu() + 5 + 6
        x = x.to(device="cuda") + 7 + 8
        return x.cpu() + 9 + 10

    x = torch.randn(2, 2, 10, device="cpu")
    torch.testing.assert_close(compiled(f, dyn)(x), f(x))
