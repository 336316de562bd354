"""Inductor's CommonTemplate scan tests, rewritten for tilefuse: cumsum / cumprod / logcumsumexp /
cummax along either dim, of 0-d tensors, long (split) scans, integer and low-precision inputs,
infinities, and a scan feeding an indexing. Each test runs compiled with static and with dynamic
shapes (``dyn``) against eager; docs/inductor_templates.md maps every Inductor test to its port
here."""

from __future__ import annotations

import math

import torch
from torch.testing import make_tensor

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, check_each, compiled
from tilefuse import config

pytestmark = [*GPU_MARKS, DYN]


def _cumprod_input(n: int, dtype: torch.dtype, rows: int = 1) -> torch.Tensor:
    """A length-``n`` cumprod input whose running product stays near 1: blocks of factors in
    [1, 4) alternating with their reciprocals, random signs (integers: +-1 only)."""
    if not dtype.is_floating_point:
        return torch.randint(0, 2, (rows, n)).mul(2).sub(1).to(dtype)
    block = 8 if dtype in (torch.float16, torch.bfloat16) else 64
    nb = (n + 2 * block - 1) // (2 * block)
    x = (1 + torch.rand(rows, nb, block, dtype=torch.float64)) * torch.randint(-1, 1, (rows, nb, block)).exp2()
    x = torch.cat([x, x.reciprocal()], dim=2).flatten(1)[:, :n]
    return (x * (torch.randint(0, 2, (rows, n)) * 2 - 1)).to(dtype)


def test_split_cumsum(dyn):
    # a long scan (split into chunks) of a flat input and of rows, of each dtype
    cases = []
    for d in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bool):
        x = make_tensor(3, 40, 40, low=0, dtype=d, device=DEVICE)
        cases += [(x.view(-1),), (x.view(3, -1),)]
    check_each(lambda a: torch.cumsum(a, -1), cases, dynamic=dyn, rtol=1e-4, atol=1e-5)


def test_split_cumsum_low_precision(dyn):
    check(lambda a: torch.cumsum(a.view(-1), 0), torch.rand(3, 40, 40, dtype=torch.float16), dynamic=dyn)


def test_consecutive_split_cumsum(dyn):
    def f(a, b):
        return torch.cumsum(a.view(-1), 0) + torch.cumsum(b.view(-1), 0)

    a = make_tensor(3, 40, 40, low=0, dtype=torch.float32, device=DEVICE)
    b = make_tensor(3, 40, 40, low=0, dtype=torch.float64, device=DEVICE)
    check(f, a, b, dynamic=dyn, rtol=1e-4, atol=1e-5)


def test_split_cumsum_index(dyn):
    # scan results used as gather indices: every index must be right for the gather to be
    lengths = torch.full((2**10,), 4, dtype=torch.int64)
    lengths[-2:] = 3
    check(lambda lengths, data: data[torch.cumsum(lengths, 0)], lengths, torch.randn(2**12), dynamic=dyn)


def test_split_cumprod(dyn):
    cases = [(_cumprod_input(3000, d, rows=3),) for d in (torch.float32, torch.float64, torch.int32, torch.int64)]
    check_each(lambda a: torch.cumprod(a, -1), cases, dynamic=dyn, atol=1e-5, rtol=1e-4)


def test_split_cumprod_low_precision(dyn):
    cases = [(_cumprod_input(3000, d, rows=3),) for d in (torch.float16, torch.bfloat16)]
    check_each(lambda a: torch.cumprod(a.view(-1), 0), cases, dynamic=dyn)


def test_consecutive_split_cumprod(dyn):
    def f(a, b):
        return torch.cumprod(a, 0) + torch.cumprod(b, 0)

    a = _cumprod_input(3000, torch.float32)[0]
    b = _cumprod_input(3000, torch.float64)[0]
    # a float32 running product over 3,000 factors carries rounding that depends on the scan's
    # order (eager's CUDA scan differs from the CPU's too): judged against the float64 product
    # the compiled result is as close as eager's, where float32 holds the product as a normal
    # number (below that, the GPU's kernels flush subnormals to zero and eager's do not)
    exact = f(a.double(), b)
    got, eager = compiled(f, dyn)(a, b), f(a, b)
    assert got.dtype == eager.dtype == torch.float64
    fin = torch.finfo(torch.float32)
    p32 = torch.cumprod(a.double(), 0).abs()
    normal = (p32 >= fin.tiny) & (p32 <= fin.max)
    # error relative to the terms' size, not to their sum (the two products can nearly cancel,
    # which would make any rounding look large)
    scale = p32 + torch.cumprod(b, 0).abs()
    err_got = ((got - exact).abs() / scale)[normal].max().item()
    err_eager = ((eager - exact).abs() / scale)[normal].max().item()
    assert err_got <= max(2 * err_eager, 3000 * torch.finfo(torch.float32).eps), (err_got, err_eager)


def _looped():
    """Rows longer than 64 scanned by the looped (non-persistent) kernel: Inductor's long-row
    cases at a size the interpreter runs quickly."""
    return config.patch(persistent_reduction_threshold=64)


def test_cumsum(dyn):
    f = lambda x: (x.cumsum(0), x.cumsum(1))  # noqa: E731
    check_each(
        f, [(torch.rand(16, 32),), (torch.rand(20, 30),)], dynamic=dyn, more=[(torch.rand(7, 9), torch.rand(3, 50))]
    )
    with _looped():
        check(f, torch.rand(10, 400), dynamic=dyn, atol=1e-5, rtol=1e-5)


def test_scans_of_zero_dim(dyn):
    # test_cumsum_zero_dim, test_cumprod_zero_dim, test_logcumsumexp_zero_dim
    def f(x):
        return x.cumsum(0), x.cumsum(-1), x.cumprod(0), x.cumprod(-1), x.logcumsumexp(0), x.logcumsumexp(-1)

    check(f, torch.rand(()), dynamic=dyn)


def test_cumsum_no_mask(dyn):
    # a row of a power-of-two length (no masked lanes), short and long
    check(lambda x: x.cumsum(-1), torch.rand(1, 1024), dynamic=dyn)
    with _looped():
        check(lambda x: x.cumsum(-1), torch.rand(1, 512), dynamic=dyn, atol=1e-5, rtol=1e-5)


def test_cumsum_inf(dyn):
    cases = [(torch.full((2, n), math.inf, dtype=torch.float64),) for n in (10, 100)]
    check_each(lambda x: x.cumsum(-1), cases, dynamic=dyn)


def test_logcumsumexp(dyn):
    f = lambda x: (x.logcumsumexp(0), x.logcumsumexp(1))  # noqa: E731
    check_each(f, [(torch.rand(16, 32),), (torch.rand(20, 30),)], dynamic=dyn)
    with _looped():
        check(f, torch.rand(3, 100), dynamic=dyn, atol=1e-5, rtol=1e-5)


def test_cumsum_of_ones_long(dyn):
    # test_cumsum_pattern_matcher_issue: an int64 cumsum of a ones mask built from the input's sizes
    def f(ids):
        b, t = ids.size()
        mask = torch.ones(b, t, device=ids.device).long()
        return torch.cumsum(mask, dim=1)

    check(f, torch.randn(2, 2), dynamic=dyn, atol=0, rtol=0)


def test_cummax(dyn):
    # tilefuse has no cummax lowering: it runs as an aten fallback kernel
    check(lambda a: torch.cummax(a, 0), torch.randn(40, 40), dynamic=dyn, native=False)


# associative_scan (a higher-order op): torch runs combine_mode="pointwise" on CUDA only; on the
# CPU the same combine functions go through combine_mode="generic" (a graph of O(n log n) ops:
# short scans keep its compile quick)
_SCAN_MODE = "pointwise" if DEVICE == "cuda" else "generic"


def _assoc_scan(combine, xs, dim):
    from torch._higher_order_ops.associative_scan import associative_scan

    return associative_scan(combine, xs, dim, combine_mode=_SCAN_MODE)


def _add(a, b):
    return a + b


def _logaddexp(a, b):
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    finite = (lo != hi) | ~lo.isinf()
    return torch.where(finite, hi + (lo - hi).exp().log1p(), a)


def _argmax_combine(a, b):
    (av, ai), (bv, bi) = a, b
    take_a = (av > bv) | ((av == bv) & (ai > bi))
    return torch.where(take_a, av, bv), torch.where(take_a, ai, bi)


def _linear_recurrence(left, right):
    (xl, fl), (xr, fr) = left, right
    return xl * fr + xr, fl * fr


def test_associative_scan(dyn):
    # test_custom_scan_op, test_custom_scan_op_compiled, test_custom_scan_op_multi_input and
    # test_custom_scan_would_split in one graph: a sum combine over |a - b| against cumsum (and
    # summed), a log-add-exp combine against logcumsumexp, a (value, index) argmax combine against
    # cummax, and a linear recurrence x_t = x_{t-1} * f_t + x_t against a float64 loop
    def f(a, b, i, x, g):
        s = _assoc_scan(_add, (a - b).abs(), 0)
        return (
            s,
            s.sum(0),
            _assoc_scan(_logaddexp, a, 0),
            *_assoc_scan(_argmax_combine, (a, i), 0),
            *_assoc_scan(_linear_recurrence, (x, g), 1),
        )

    a, b = torch.randn(8, 6), torch.randn(8, 6)
    idx = torch.arange(8).view(8, 1).expand(8, 6)
    x, g = torch.randn(1, 9, 2), torch.randn(1, 9, 2)
    xo, go = x.double(), g.double()
    for t in range(1, x.shape[1]):
        xo[:, t], go[:, t] = _linear_recurrence((xo[:, t - 1], go[:, t - 1]), (xo[:, t], go[:, t]))
    got = compiled(f, dyn)(a, b, idx, x, g)
    d = (a - b).abs()
    want = (d.cumsum(0), d.cumsum(0).sum(0), a.logcumsumexp(0), *torch.cummax(a, 0), xo.float(), go.float())
    for k, (gv, w) in enumerate(zip(got, want)):
        tol = {"atol": 1e-4, "rtol": 1e-4} if k >= 5 else {}
        torch.testing.assert_close(gv, w, **tol)
