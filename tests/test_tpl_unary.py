"""Inductor's CommonTemplate tests of unary math and activations, rewritten for tilefuse: exp /
log / trig / rounding families, activations (in-place ones included), torch.special, nan_to_num,
pow, and the float and integer dtypes they take. Each test runs compiled with static and with
dynamic shapes (``dyn``) against eager; docs/inductor_templates.md maps every Inductor test to its
port here."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import make_tensor

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, check_each

pytestmark = [*GPU_MARKS, DYN]
aten = torch.ops.aten


def test_exp_family(dyn):
    # test_exp, test_exp2 (and 2 ** -|a - b|), test_sigmoid, test_relu
    def f(a, b):
        return (
            a.exp(),
            (a + b).exp(),
            torch.exp2(a),
            torch.exp2(a + b),
            torch.pow(2, -(a - b).abs()),
            a.sigmoid(),
            (a + b).sigmoid(),
            a.relu(),
            (a + b).relu() / 10,
        )

    check(f, torch.randn(8, 8), torch.randn(8, 8), dynamic=dyn)


def test_trig_and_friends(dyn):
    # test_sin, test_cos, test_tan, test_tanh
    def f(x):
        return (
            aten.sin(x) + 2,
            aten.sin(x + 1),
            aten.cos(x) + 2,
            aten.cos(x + 1),
            aten.tan(x) + 2,
            aten.tan(x + 1),
            aten.tanh(x) + 2,
            aten.tanh(x + 1),
        )

    check(f, torch.randn(16, 16), dynamic=dyn)


def test_lgamma_erfc_erfinv(dyn):
    # tilefuse has no lowering for these three: they run as aten fallback kernels (the cos around
    # them is compiled)
    def f(x, u):
        return aten.lgamma(x) + 2, aten.cos(x + 1), torch.erfc(x), torch.erfinv(u)

    check(f, torch.randn(16, 16), torch.empty(8, 8).uniform_(-1, 1), dynamic=dyn, native=False)


def test_activations(dyn):
    # test_silu, test_elu, test_leaky_relu, test_gelu, test_hardtanh, test_hardsigmoid,
    # test_hardswish, test_glu
    def f(x, y):
        return (
            F.silu(x),
            aten.elu(x, 1.6732632423543772, 1.0507009873554805) + 2,
            aten.elu(x + 1, 2, 3, 4),
            aten.leaky_relu(x, 0.2) + 2,
            aten.leaky_relu(x + 1),
            aten.gelu(x) + 2,
            aten.gelu(x + 1),
            F.hardtanh(x),
            F.hardtanh(x + 1),
            F.hardsigmoid(x + 3),
            F.hardswish(x - 3),
            aten.glu(y, -1),
            aten.glu(y, 1),
            aten.glu(y, 2),
        )

    check(f, torch.randn(16, 16) * 3, torch.randn(4, 8, 4, 4), dynamic=dyn, atol=1e-4, rtol=1e-4)


def test_inplace_activations(dyn):
    def f(x):
        a = aten.hardswish_(x + 1)
        b = aten.hardtanh_(x + 1)
        c = aten.leaky_relu_(x + 1)
        d = aten.silu_(x + 1)
        e = aten.log1p(x + 1)
        g = aten.masked_fill_(x + 1, torch.zeros_like(x, dtype=torch.bool), 99.0)
        h = aten.masked_fill_(x + 1, torch.ones_like(x, dtype=torch.bool), 99.0)
        return a, b, c, d, e, g, h

    check(f, torch.randn(64) * 10, dynamic=dyn)


def test_inplace_leaky_relu_of_empty(dyn):
    m = torch.nn.LeakyReLU(negative_slope=5.2955089, inplace=True)
    check(lambda x: m(x), torch.randn(0), dynamic=dyn)


def test_rsqrt_log2_log_fp64(dyn):
    def f(x, y, d):
        return torch.rsqrt(x), torch.rsqrt(x + 1) - 2, torch.log2(y), torch.log2(y + 1) - 2, d.log(), d.log2()

    check(f, torch.randn(64), torch.randn(64) + 10, torch.randn(128, dtype=torch.float64) + 10, dynamic=dyn)


def test_expm1_log1p(dyn):
    # random values and a grid of tiny ones (where exp(x) - 1 and log(1 + x) lose precision)
    def f(x):
        return torch.expm1(x), torch.expm1(x) * 2, torch.log1p(x), torch.log1p(x) * 2

    x = torch.cat([torch.randn(64), torch.arange(-1e-5, 1e-5, 1e-7)])
    dtypes = [torch.float16, torch.float32, torch.float64, torch.int32, torch.int64]
    check_each(f, [(x.to(d),) for d in dtypes], dynamic=dyn)


def test_round(dyn):
    # half-way cases round to even; decimals=2 scales by 100 and back
    def f(a, b):
        return torch.round(a), torch.round(b + 1), torch.round(a, decimals=2)

    torch.manual_seed(0)
    check(f, torch.randn(8, 8) * 100, torch.randn(8, 8) * 10, dynamic=dyn)
    check(torch.round, torch.arange(-10, 10, 0.1, dtype=torch.float64), dynamic=dyn)


def test_clone(dyn):
    check(lambda x: (aten.clone(x) + 2, aten.clone(x + 1)), torch.randn(16, 16), dynamic=dyn)


def test_nan_to_num(dyn):
    def f(a):
        return (
            torch.nan_to_num(a),
            torch.nan_to_num(a, nan=3.0),
            torch.nan_to_num(a, nan=None),
            torch.nan_to_num(a, posinf=4.0),
            torch.nan_to_num(a, neginf=5.0),
            torch.nan_to_num(a, nan=3.0, posinf=4.0, neginf=5.0),
        )

    check(f, torch.tensor((float("nan"), float("inf"), float("-inf"), 1.0)), dynamic=dyn)


def test_pow_integer_exponents(dyn):
    check(lambda x: [aten.pow(x, e) for e in range(-8, 9)], torch.randn(16, 16), dynamic=dyn)


def test_pow_large(dyn):
    # 1000 ** x and x ** 1000: overflow to inf, underflow to 0, nan for negative bases
    check(lambda x: (aten.pow(1000, x), aten.pow(x, 1000)), torch.randn(16, 16), dynamic=dyn, atol=1e-5, rtol=3e-5)


def test_pow_half_of_constant_plus_input(dyn):
    def f(x):
        return torch.pow(torch.tensor(0.123, device=x.device) + x, 0.5)

    check(f, torch.rand(()), dynamic=dyn)


def test_pow_int(dyn):
    # integer powers of every integer dtype wrap as eager's do
    def f(x, y):
        return torch.pow(x, 0x57), torch.pow(x, y)

    cases = []
    for d in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        hi = torch.iinfo(d).max
        cases.append(
            (make_tensor(16, 16, dtype=d, device=DEVICE), make_tensor(16, 16, dtype=d, device=DEVICE, high=hi))
        )
    check_each(f, cases, dynamic=dyn)


def test_one_hot(dyn):
    check(lambda a: F.one_hot(a, 8) + 1, torch.arange(100).view(4, 5, 5) % 8, dynamic=dyn)


# torch.special's elementwise functions (Inductor's parametrized test_pointwise), grouped by the
# arguments they take
_SPECIAL_UNARY = sorted(
    n
    for n in torch.special.__all__
    if n
    not in {
        "softmax",
        "log_softmax",
        "logsumexp",
        "gammainc",
        "gammaincc",
        "xlog1py",
        "xlogy",
        "zeta",
        "multigammaln",
        "polygamma",
    }
    and "_polynomial_" not in n
)
_SPECIAL_POLY = sorted(n for n in torch.special.__all__ if "_polynomial_" in n)


def test_special_unary(dyn):
    # every one-argument function in one graph (several run as aten fallback kernels)
    ops = [getattr(torch.special, n) for n in _SPECIAL_UNARY]
    check(lambda x: [op(x) for op in ops], torch.randn(8, 8), dynamic=dyn, atol=1e-4, rtol=1e-4, native=False)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc", "xlog1py", "xlogy", "zeta"])
def test_special_binary(dyn, name):
    # gammainc, gammaincc and zeta run as aten fallback kernels
    op = getattr(torch.special, name)
    check(
        lambda x, y: op(x, y),
        torch.randn(8, 8),
        torch.empty(8, 8).uniform_(1, 2),
        dynamic=dyn,
        atol=1e-4,
        rtol=1e-4,
        native=name in ("xlog1py", "xlogy"),
    )


def test_special_multigammaln_polygamma(dyn):
    def f(x, y):
        return torch.special.multigammaln(x, 2), torch.special.polygamma(1, y)

    check(
        f,
        torch.empty(8, 8).uniform_(1, 2),
        torch.empty(8, 8).uniform_(1, 10),
        dynamic=dyn,
        atol=1e-4,
        rtol=1e-4,
        native=False,
    )


def test_special_polynomial(dyn):
    ops = [getattr(torch.special, n) for n in _SPECIAL_POLY]
    check(lambda x: [op(x, 2) for op in ops], torch.randn(8, 8), dynamic=dyn, atol=1e-4, rtol=1e-4, native=False)
