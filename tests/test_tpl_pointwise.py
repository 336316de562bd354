"""Inductor's CommonTemplate pointwise tests, rewritten for tilefuse: arithmetic and division
(rounding modes, by zero, Python scalars), comparisons, bitwise ops, where / clamp / min / max,
type promotion and layouts of pointwise inputs. Each test runs compiled with static and with
dynamic shapes (``dyn``) against eager; docs/inductor_templates.md maps every
Inductor test to its port here."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import make_tensor

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, check_each
from tilefuse import metrics

pytestmark = [*GPU_MARKS, DYN]
aten = torch.ops.aten


def test_bool_ops(dyn):
    def f(a, b):
        return (a + b, a * b, a & b, a | b, a ^ b, a.logical_and(b), a.logical_or(b), a.logical_not(), b.sign())

    check(f, torch.tensor([True, False, True, False]), torch.tensor([False, False, True, True]), dynamic=dyn)


def test_add_constants(dyn):
    # an int constant, an alpha-scaled one, and (floats only) a fractional one
    def f(a):
        out = (a + 1, torch.add(a, 1, alpha=2))
        return out + ((a + 1.5,) if a.is_floating_point() else ())

    check_each(f, [(torch.arange(32, dtype=d),) for d in (torch.float32, torch.int32, torch.int64)], dynamic=dyn)


def test_add_inplace_permuted(dyn):
    x = torch.ones(2, 12, 13, 17).transpose(1, 2)
    check(lambda x, y: x.add_(y), x, torch.randn(2, 13, 1, 17), dynamic=dyn)


def test_abs_sgn(dyn):
    # abs in a division; sgn on a grid through zero and on nan / +-inf / 0
    def f(a, b):
        return a / (a.abs() + 1), torch.sgn(b), torch.sgn(b + 1) - 1

    b = torch.cat([torch.linspace(-10, 10, 41), torch.tensor([math.nan, math.inf, -math.inf, 0.0])])
    check(f, torch.randn(17), b, dynamic=dyn)


def test_maximum_minimum_with_nan(dyn):
    f = lambda a, b: (torch.maximum(a, b), torch.minimum(a, b))  # noqa: E731
    check(f, torch.randn(8), torch.randn(8), dynamic=dyn)
    a, b = torch.randn(8), torch.randn(8)
    a[0] = b[1] = math.nan
    check(f, a, b, dynamic=dyn)


def test_neg_max_uint8(dyn):
    # negation of uint8 wraps modulo 256 before the maximum
    a = torch.randint(256, (1,), dtype=torch.uint8)
    b = torch.randint(256, (8390,), dtype=torch.uint8)
    check(lambda a, b: torch.maximum(b, -a), a, b, dynamic=dyn)


def test_compare_int_tensor_with_float_scalar(dyn):
    def f(x):
        return x.gt(3.5), x.ge(3.5), x.eq(3.5), x.le(2.5), x.lt(3.5), x.ne(3.5)

    check(f, torch.tensor([3]), dynamic=dyn)


def test_horizontal_fusion(dyn):
    check(
        lambda a, b, c: (a + b, a - c, b * c),
        torch.randn(8, 16, 16),
        torch.randn(8, 16, 16),
        torch.randn(1, 16, 1),
        dynamic=dyn,
    )
    check(
        lambda a, b, c: (a + 1, b + 2, c + 3),
        torch.randn(8, 16, 8),
        torch.randn(8, 16),
        torch.randn(16, 8),
        dynamic=dyn,
    )


def test_vertical_fusion_one_kernel(dyn):
    # a polynomial of broadcast operands (an equation of state) fuses into one kernel
    def f(sa, ct, p):
        t = -3.087032500374211e-7 + ct * (-1.988366587925593e-8 + -1.061519070296458e-11 * ct)
        t = t + 1.550932729220080e-10 * sa
        return 1.0 / t + t * p

    check(f, torch.randn(20, 20, 26), torch.randn(20, 20, 26), torch.randn(26), dynamic=dyn)
    assert metrics.generated_kernel_count == 1


DIV_INPUTS = {
    "float": lambda: (torch.randn(8, 8) * 100, torch.randn(8, 8) * 100),
    "int_by_float": lambda: (torch.randint(-100, 100, [8, 8]), 100 * torch.randn(8, 8)),
    "int_exact": lambda: (lambda a: (a * 2, a))(torch.randint(1, 100, [8, 8])),
    "neg_int": lambda: (torch.randint(-100, 0, [8, 8]), torch.randint(1, 10, [8, 8])),
    "int_by_py_int": lambda: (torch.randint(-100, 0, [8, 8]), 16),
    "bool_by_int": lambda: (torch.ones([8, 8], dtype=torch.bool), torch.randint(-100, -1, [8, 8])),
    "int64_large": lambda: (torch.randint(2**32, 2**40, [20, 20]), torch.randint(-10, -1, [20, 20])),
}


def _divisions(a, b):
    return (
        aten.div(a, b, rounding_mode=None),
        aten.div(a, b, rounding_mode="floor"),
        aten.div(a, b, rounding_mode="trunc"),
        a / b,
        a // b,
    )


def test_div_rounding_modes(dyn):
    check_each(_divisions, [make() for make in DIV_INPUTS.values()], dynamic=dyn)


def test_div_python_ints(dyn):
    # both operands Python ints: the results are scalars computed at trace time
    def f(a, b):
        return (
            aten.div(a, b, rounding_mode=None),
            aten.div(a * 0.5, b, rounding_mode=None),
            aten.div(a, b * 1.0, rounding_mode=None),
            aten.div(a, b, rounding_mode="floor"),
            aten.div(a, b, rounding_mode="trunc"),
            a / b,
            a // b,
        )

    check(f, 1024, 100, dynamic=dyn)


def test_div_scalar_numerator(dyn):
    check(lambda x: (torch.div(42, x), aten.true_divide(42, x), aten.div.Tensor(42, x)), torch.randn(8), dynamic=dyn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_div_zero_dim(dyn, dtype):
    vec = make_tensor(10, device=DEVICE, dtype=dtype)
    s = make_tensor((), device=DEVICE, dtype=dtype, exclude_zero=True)
    check(_divisions, vec, s, dynamic=dyn)
    check(
        _divisions,
        make_tensor((), device=DEVICE, dtype=dtype),
        make_tensor(10, device=DEVICE, dtype=dtype, exclude_zero=True),
        dynamic=dyn,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_div_prim(dyn, dtype):
    a = make_tensor(100, device=DEVICE, dtype=dtype)
    b = make_tensor(100, device=DEVICE, dtype=dtype, exclude_zero=True)
    check(lambda a, b: (torch.ops.prims.div(a, b),), a, b, dynamic=dyn)


def test_floordiv_of_python_number(dyn):
    # a Python int argument (a SymInt under dynamic shapes) floor-divided in float and int
    x = make_tensor(10, device=DEVICE, dtype=torch.float32)
    check(lambda a, i: a + (i * 1.234) // 8.234, x, 33, dynamic=dyn)
    check(lambda a, i: a + i // 8, x, 33, dynamic=dyn)


def test_div_by_zero(dyn):
    def f(x, zero_in, neg_zero_in):
        zero = torch.zeros_like(x)
        return (
            x / 0.0,
            x / -0.0,
            zero / 0.0,
            x / zero,
            x / -zero,
            zero / zero,
            x / zero_in,
            x / neg_zero_in,
            zero_in / neg_zero_in,
        )

    z = torch.zeros(10)
    check(f, torch.randn(10), z, -z, dynamic=dyn)


def test_both_scalars(dyn):
    def f(a, b):
        return aten.add(a, b), aten.add(b, a), aten.sub(a, b), aten.sub(b, a), aten.mul(a, b), aten.mul(b, a)

    check(f, 4, 3.3, dynamic=dyn, ref_in_float=False)


def test_floor_div_by_python_int(dyn):
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), torch.randint(5, (1, 8)), 5400, dynamic=dyn)


def test_fmod(dyn):
    f = lambda a, b: (torch.fmod(a, b), torch.fmod(3.0 * a, b) - 2.0)  # noqa: E731
    check(f, torch.randn(1, 2, 6, 6), torch.randn(1, 2, 6, 6), dynamic=dyn)
    vec, s = make_tensor(10, device=DEVICE, dtype=torch.float32), make_tensor((), device=DEVICE, dtype=torch.float32)
    check(lambda a, b: (torch.fmod(a, b),), vec, s, dynamic=dyn)
    check(lambda a, b: (torch.fmod(a, b),), s, vec, dynamic=dyn)


def test_remainder(dyn):
    def f(a, b):
        return torch.remainder(a, b), torch.remainder(a + 1, b - 1), torch.remainder(a - 1, b + 1)

    check(f, torch.randn(64), torch.randn(64), dynamic=dyn)


def test_inf_constants(dyn):
    check(lambda a: (a + math.inf, a + -math.inf, a * -math.inf), torch.randn(8), dynamic=dyn)


def _bitwise(x, y):
    return torch.bitwise_not(x), torch.bitwise_or(x, y), torch.bitwise_xor(x, y), torch.bitwise_and(x, y)


def test_bitwise_int32(dyn):
    check(
        _bitwise,
        torch.randint(0, 2**30, [64], dtype=torch.int32),
        torch.randint(0, 2**30, [64], dtype=torch.int32),
        dynamic=dyn,
    )


def test_bitwise_bool(dyn):
    check(
        _bitwise,
        torch.randint(0, 2, (2, 20), dtype=torch.bool),
        torch.randint(0, 2, (2, 20), dtype=torch.bool),
        dynamic=dyn,
    )


def _bitwise_then_minmax(x, y):
    return (
        torch.max(torch.bitwise_and(x, y), y),
        torch.clamp_max(torch.bitwise_or(x, y), y),
        torch.clamp_min(torch.bitwise_xor(x, y), y),
    )


def test_bitwise_int8_with_max_and_clamp(dyn):
    # int8 results of &, |, ^ feeding maximum / clamp over broadcast operands: Inductor's inputs
    # (rand().to(int8): all zeros) and operands over the full int8 range
    check(_bitwise_then_minmax, torch.rand(5, 10, 1).to(torch.int8), torch.rand(10, 1).to(torch.int8), dynamic=dyn)
    x = torch.randint(-128, 128, (5, 10, 1), dtype=torch.int8)
    y = torch.randint(-128, 128, (10, 1), dtype=torch.int8)
    x2 = torch.randint(-128, 128, (3, 7, 1), dtype=torch.int8)
    y2 = torch.randint(-128, 128, (7, 1), dtype=torch.int8)
    check(_bitwise_then_minmax, x, y, dynamic=dyn, more=[(x2, y2)])


def test_signbit_and_sign(dyn):
    def f(x):
        return torch.signbit(x), ~torch.signbit(-x) & 1, torch.tanh(torch.sign(x))

    check(f, torch.randn(1, 2, 6, 6), dynamic=dyn)


def test_clamp(dyn):
    def f(a, b):
        return a.clamp(-0.1, 0.1), b.clamp(0), torch.clamp(a + b, max=0)

    check(f, torch.randn(8, 8), torch.randn(8, 8), dynamic=dyn, more=[(torch.randn(5, 11), torch.randn(5, 11))])


def test_clamp_type_promotion(dyn):
    # int input, a float64 0-d min and an int64 tensor max: the result promotes to float64's
    # default-dtype counterpart as eager decides
    def f(a):
        lo = torch.tensor(1.0, dtype=torch.double, device=a.device)
        hi = torch.full((4,), 2, device=a.device)
        return a.clamp(min=lo, max=hi)

    check(f, torch.randint(4, (4,)), dynamic=dyn)


def test_clamp_min_grad(dyn):
    x = (torch.randn(16) * 10).requires_grad_()
    check(lambda x: torch.clamp_min(x, 3), x, dynamic=dyn, grad=True)


def test_fmin_fmax(dyn):
    def f(a, b):
        return torch.fmin(a, b), torch.fmax(a, b), torch.fmax(a + 1, torch.tensor(0.0, device=a.device))

    nan = math.nan
    a = torch.tensor([-10.0, 10.0, nan, nan, nan, 3, 4])
    b = torch.tensor([nan, nan, -10.0, 10.0, nan, 4, 3])
    check(f, a, b, dynamic=dyn)


def test_where_broadcast(dyn):
    check(
        lambda c, p1, p0: torch.where(c, p1, p0),
        torch.tensor([[True]]),
        torch.rand(13, 7, 3),
        torch.rand(1, 1),
        dynamic=dyn,
    )

    def g(x, mask_u8):
        keep = torch.ops.prims.convert_element_type.default(mask_u8, torch.bool).bitwise_not()
        return torch.where(keep, torch.tensor(0.25, device=x.device), x), keep

    m = torch.zeros(1, 1, 16, 16, dtype=torch.uint8)
    m[:, :, :8, :8] = 1
    check(g, torch.randn(1, 4, 16, 16), m, dynamic=dyn)


def test_where_of_logical_op(dyn):
    check(lambda x, y: torch.where(torch.logical_and(x, y), 1.0, 0.0), torch.randn(32), torch.randn(32), dynamic=dyn)
    check(lambda x, y: torch.where(torch.logical_or(x, y), 1.0, 0.0), torch.randn(32), torch.randn(32), dynamic=dyn)


def test_masked_fill(dyn):
    def f(mask, value):
        return aten.masked_fill(value, mask, -10000.0) + 2, aten.masked_fill(value / 2.0, mask.logical_not(), 667)

    check(
        f,
        torch.randint(0, 2, [1, 16], dtype=torch.bool),
        torch.randn(16, 16),
        dynamic=dyn,
        more=[(torch.randint(0, 2, [1, 9], dtype=torch.bool), torch.randn(5, 9))],
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64])
def test_masked_fill_promotion(dyn, dtype):
    # a 0-d float tensor fill value: the result keeps the input's dtype
    def f(mask, value):
        return aten.masked_fill(value, mask, torch.tensor(3.5, device=value.device))

    value = torch.randn(16, 16).to(dtype) if dtype.is_floating_point else torch.randint(16, (16, 16))
    check(f, torch.randint(0, 2, [1, 16], dtype=torch.bool), value, dynamic=dyn, ref_in_float=False)


def test_lerp(dyn):
    check(
        lambda a, b: torch.lerp(b, a.transpose(-2, -3), 70000),
        torch.rand(10, 3, 10),
        torch.rand(3, 10, 10),
        dynamic=dyn,
        rtol=2e-5,
        atol=1e-2,
    )
    check(
        lambda a, b: torch.lerp(b, a, 70000),
        torch.rand(3, 10, 10),
        torch.rand(3, 10, 10),
        dynamic=dyn,
        rtol=2e-5,
        atol=1e-2,
    )


def test_isinf_isnan(dyn):
    vals = [1, math.inf, 2, -math.inf, math.nan]
    for dtype in (torch.float32, torch.float64):
        check(lambda x: (x.isinf(), x.isnan()), torch.tensor(vals, dtype=dtype), dynamic=dyn)
    # equality with a constant tensor: nan != nan
    check(lambda x: x == torch.tensor(vals, device=x.device), torch.tensor(vals), dynamic=dyn)


def test_uint8_negation_compare(dyn):
    def f(z):
        x = torch.tensor(5, device=z.device, dtype=torch.uint8)
        return x < torch.neg(x), z + 1

    check(f, torch.randn(26), dynamic=dyn)


def test_inplace_mixed_dtype(dyn):
    def f(x, y):
        z = x + y.float()
        return z.add_(y).mul_(y)

    check(f, torch.randn(4, 4), torch.randn(4, 4, dtype=torch.double), dynamic=dyn)


def test_zero_dim_tensor_operand(dyn):
    # a 0-d tensor of each dtype on either side (Inductor passes it as a CPU tensor to a GPU graph;
    # here it is on the graph's device): 0-d operands do not promote a dimensioned float
    def f(x, y):
        return x + y, x * y, x / y

    x = torch.rand(2, 3)
    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64]
    ys = [(torch.rand(()) + 0.5).to(d) for d in dtypes]
    check_each(f, [(x, y) for y in ys] + [(y, x) for y in ys], dynamic=dyn, ref_in_float=False)


def test_python_int_scales(dyn):
    check(lambda x, i: x * i, torch.randn(3, 1, 1, 1, 1), 9132, dynamic=dyn)


def test_size_in_float_arith(dyn):
    # 1.0 / size: a float computed from a (possibly symbolic) size promotes the int tensor to float
    check(lambda x: x + 1.0 / x.size(0), torch.arange(10), dynamic=dyn)


def test_sqrt_of_size(dyn):
    # int(N ** 0.5) of a size picks the length of an arange
    def f(x):
        return torch.arange(int(x.shape[1] ** 0.5), device=x.device) + x.sum()

    check(f, torch.randn(8, 4, 4), dynamic=dyn)


def test_rsqrt_of_size_scales_bmm(dyn):
    def f(a, b):
        return torch.bmm(a, b) / (1 / math.sqrt(a.size(1)))

    check(f, torch.randn(2, 4, 4), torch.randn(2, 4, 4), dynamic=dyn)


def test_pow_of_size(dyn):
    check(lambda x: x * math.sqrt(x.size(0)) ** 10, torch.randn(16, 16), dynamic=dyn)


def test_mul_of_iotas(dyn):
    def f(x):
        i = torch.ops.prims.iota.default(16, start=0, step=1, dtype=torch.int64, device=x.device, requires_grad=False)
        return torch.div(-(i.unsqueeze(-1) * i), 16), x + 1

    check(f, torch.randn(2), dynamic=dyn)


def test_python_round_slices(dyn):
    # round() of Python numbers picking a slice length and an offset
    f = lambda x, i: x[: round(i / 2 + 1)] + round(i / 2)  # noqa: E731
    check_each(f, [(torch.zeros(5, dtype=torch.int), i) for i in range(1, 6)], dynamic=dyn)


# ndigits literal in each function (Dynamo specializes a literal; a closure variable would be traced)
ROUND_FLOAT = {
    1: lambda x, i: x + round(i / 2 * 123.4567, 1),
    0: lambda x, i: x + round(i / 2 * 123.4567, 0),
    -1: lambda x, i: x + round(i / 2 * 123.4567, -1),
}
ROUND_INT = {1: lambda x, i: x + round(i, 1), 0: lambda x, i: x + round(i, 0)}


@pytest.mark.parametrize("ndigits", list(ROUND_FLOAT))
def test_python_round_float_ndigits(dyn, ndigits):
    check(ROUND_FLOAT[ndigits], torch.zeros(2), 2, dynamic=dyn)


@pytest.mark.parametrize("ndigits", list(ROUND_INT))
def test_python_round_int_ndigits(dyn, ndigits):
    check(ROUND_INT[ndigits], torch.zeros(2), 123, dynamic=dyn)


def test_angle_of_real_and_int(dyn):
    # test_angle without its complex input (complex tensors are outside tilefuse's scope)
    real = torch.tensor([-1.0, 0.0, 1.0, math.nan])
    check(lambda a, b: (torch.angle(a), torch.angle(b)), real, torch.tensor([-1, 0, 1]), dynamic=dyn)
