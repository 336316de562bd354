"""Inductor's CommonTemplate reduction tests, rewritten for tilefuse: sum / mean / prod / amax /
amin / argmax / argmin / var / std / any / all / logsumexp, keepdim, several dims, empty and
size-1 dims, inf / nan inputs, integer and low-precision inputs, split (multi-layer) reductions
and losses. Each test runs compiled with static and with dynamic shapes (``dyn``) against eager;
docs/inductor_templates.md maps every Inductor test to its port here."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, check_each

pytestmark = [*GPU_MARKS, DYN]
aten = torch.ops.aten


def test_sum_of_sum(dyn):
    # test_sum1 .. test_sum5, test_sum_keepdims in one graph: sums of a pointwise result (with
    # keepdim, over two dims, next to a squeeze), chained sums with their intermediates returned
    def chain(a):
        b = a + 1
        c = b.sum(-1)
        d = c + 3
        e = d.sum(-1)
        return e + 5, e, d, c, b

    def f(a1, b1, a2, b2, a3, b3, x4, x5):
        return (
            (a1 + b1).sum(-1),
            (a1 + b1).sum(-1, keepdim=True),
            (a2 + b2).sum([1, 2]),
            (a2 + b2).sum(-1),
            a3 + b3,
            (a3 + b3).sum(-1),
            torch.squeeze(b3) + 10,
            *chain(x4),
            chain(x5)[0],
        )

    args = [
        torch.randn(8, 8),
        torch.randn(8, 8),
        torch.randn(8, 9, 3, 21),
        torch.randn(8, 9, 3, 21),
        torch.randn(10, 10),
        torch.randn(1, 10),
        torch.randn(1, 16, 8, 8),
        torch.randn(1, 17, 8, 9),
    ]
    more = [
        torch.randn(5, 7),
        torch.randn(5, 7),
        torch.randn(3, 4, 5, 6),
        torch.randn(3, 4, 5, 6),
        torch.randn(6, 9),
        torch.randn(1, 9),
        torch.randn(3, 5, 7, 9),
        torch.randn(2, 3, 4, 5),
    ]
    check(f, *args, dynamic=dyn, atol=1e-5, rtol=2e-3, more=[more])


def _all_reductions(a):
    return a.sum(), a.max(), a.min(), a.argmax(), a.argmin()


def test_reductions_of_infinities(dyn):
    # test_reduction1 .. test_reduction3 (and 5): a mix of infinities, all +inf, all -inf
    for x in (torch.tensor([-math.inf, 0.0, math.inf]), torch.full((4,), math.inf), torch.full((4,), -math.inf)):
        check(_all_reductions, x, dynamic=dyn)


def test_argmax_argmin_of_ties(dyn):
    # test_reduction4: all equal, the first index wins
    for x in (torch.ones(128), torch.ones(4, 4, 1)):
        check(lambda a: (a.argmax(-1), a.argmin(-1)), x, dynamic=dyn)


def test_prod(dyn):
    f = lambda a: (a.prod(0), a.prod(1), a.prod())  # noqa: E731
    check(f, torch.rand(10, 10), dynamic=dyn, more=[(torch.rand(7, 13),)])
    check(f, torch.rand(1, 2050), dynamic=dyn)


def test_small_reductions(dyn):
    # test_unroll_small_reduction: many reductions over a length-3 dim
    def f(x):
        v1, i1 = x.min(-1)
        v2, i2 = x.max(-1)
        return (
            v1,
            i1,
            v2,
            i2,
            x.sum(-1),
            (x > 1).any(-1),
            (x > 0).all(-1),
            x.argmin(-1),
            x.argmax(-1),
            x.amin(-1),
            x.amax(-1),
            x.aminmax(),
        )

    check(f, torch.randn(8, 3), dynamic=dyn)


def test_multilayer_sum_low_precision(dyn):
    check(torch.mean, torch.rand(10, 3, 40, 40, dtype=torch.float16), dynamic=dyn)


def test_multilayer_prime_size(dyn):
    # a long int64 reduction of a prime length: the split reduction's last chunk is partial
    x = torch.zeros(39989, dtype=torch.int64)
    x[-1] = 1
    check(lambda a: (torch.max(a), torch.sum(a)), x, dynamic=dyn)


def test_multilayer_var(dyn):
    check(torch.var, torch.rand(10, 3, 40, 40), dynamic=dyn, atol=1e-3, rtol=1e-3)
    check(torch.var, torch.rand(14923), dynamic=dyn, atol=1e-3, rtol=1e-3, more=[(torch.rand(9001),)])


def test_multilayer_var_low_precision(dyn):
    check(torch.var, torch.rand(16, 16, 40, 40, dtype=torch.float16), dynamic=dyn)
    check(torch.var, torch.rand(14923, dtype=torch.float16), dynamic=dyn)


def test_expanded_reduction(dyn):
    check(
        lambda x, y: (x * y).sum((0, 1)),
        torch.randn(2, 197, 256),
        torch.randn(2, 1, 256),
        dynamic=dyn,
        more=[(torch.randn(3, 101, 130), torch.randn(3, 1, 130))],
    )


def test_min_max_reduction(dyn):
    def f(a, b):
        return (a + b).max(), (a + b).min(), torch.amax(a + 1, keepdim=True), torch.amin(b + 1, keepdim=True)

    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    check_each(f, [(torch.randn(8, 8).to(d), torch.randn(8, 8).to(d)) for d in dtypes], dynamic=dyn)


def test_min_max_reduction_nan(dyn):
    x = torch.randn(32)
    x[16] = math.nan
    check(lambda a: (torch.max(a), torch.min(a)), x, dynamic=dyn)


def test_sum_int(dyn):
    cases = [(torch.randint(2, (64,), dtype=d),) for d in (torch.bool, torch.uint8, torch.int)]
    check_each(lambda x: 2 * x.sum(-1) + x.sum(), cases, dynamic=dyn)


def test_sum_dtype(dyn):
    check(lambda x: x * x.sum(-1, dtype=torch.double) + x.sum(dtype=torch.double), torch.ones(32, 32) * 70, dynamic=dyn)


def test_dist(dyn):
    check(lambda a, b: (torch.dist(a, b), torch.dist(a, b, p=1.2)), torch.randn(4, 4), torch.randn(4, 4), dynamic=dyn)
    check(
        lambda a, b: torch.dist(a.to(torch.bfloat16), b.to(torch.bfloat16)),
        torch.randn(4, 4),
        torch.randn(4, 4),
        dynamic=dyn,
    )


def test_mean_var_std(dyn):
    # test_mean, test_var_mean, test_var_correction, test_std
    def f(x):
        return (
            x.mean(),
            x.mean(-1),
            torch.mean(x, -2, keepdim=True),
            x.mean([0, 1]),
            *torch.var_mean(x, -1),
            *torch.var_mean(x, [1, 3]),
        )

    check(f, torch.randn(1, 2, 4, 8), dynamic=dyn)

    def corrections(x):
        return (
            torch.var(x, dim=-1, correction=1.3),
            torch.var(x, dim=-1, correction=3),
            torch.var(x, dim=-1, correction=10),
        )

    check_each(corrections, [(torch.randn(2, 8),), (torch.randn(2, 4),)], dynamic=dyn)

    def std(x):
        return (
            torch.var(x, True),
            torch.var(x, False),
            torch.var(x, -1, True),
            torch.var(x, -1, False),
            torch.std(x, False),
            torch.std(x, [0, 1], True),
            torch.std(x, [0, 1], False),
            torch.std(x, -2, True, keepdim=True),
        )

    check(std, torch.randn(2, 4, 4, 8), dynamic=dyn, more=[(torch.randn(3, 5, 2, 7),)])


def test_logsumexp(dyn):
    check(
        lambda x: (torch.logsumexp(x, -1), torch.logsumexp(x, 0) - 2),
        torch.randn(8, 8) + 10,
        dynamic=dyn,
        more=[(torch.randn(5, 33) + 10,)],
    )


def test_any_all(dyn):
    def f(x):
        return x.any(-1), x.isinf().any(), torch.all(x.isinf(), dim=0), torch.all(torch.logical_not(x.isinf()))

    check(f, -torch.rand(64), dynamic=dyn, more=[(-torch.rand(37),)])
    x = torch.randn(16, 8)
    x[1, 1] = math.inf
    check(f, x, dynamic=dyn)


def test_multilayer_any(dyn):
    f = lambda x: (x.isinf().any(), x.isfinite().all())  # noqa: E731
    x = torch.rand(5, 3, 30, 30)
    check(f, x, dynamic=dyn)
    x.view(-1)[-1] = math.inf
    check(f, x, dynamic=dyn)


def test_argmax_then_min_int32(dyn):
    check(
        lambda a, b: torch.min(b, a.argmax(3)),
        torch.rand(3, 4, 2, 1).int(),
        torch.rand(2, 2, 1, 4, 1).int(),
        dynamic=dyn,
    )


def _arg_both_dims(x):
    return aten.argmax(x, 0), aten.argmin(x, 0), aten.argmax(x, -1), aten.argmin(x, -1)


def test_argmax_argmin(dyn):
    # test_argmax_argmin1 .. 3: whole tensor, each dim, int input
    check(lambda x: (aten.argmax(x), aten.argmin(x)), torch.randn(8, 64, 64), dynamic=dyn)
    check(_arg_both_dims, torch.randn(144, 144), dynamic=dyn, more=[(torch.randn(37, 300),)])
    check(_arg_both_dims, torch.randint(0, 5, [64, 64]), dynamic=dyn)


def test_argmax_argmin_with_duplicates(dyn):
    # short, medium and long rows of many equal values: the first index wins
    cases = [(torch.randint(high, size=(n, n)),) for n, high in [(6, 2), (32, 8), (300, 8)]]
    check_each(_arg_both_dims, cases, dynamic=dyn)


def test_argmax_argmin_with_nan(dyn):
    # nan columns: argmax / argmin pick the first nan
    cases = []
    for n, (c0, c1) in [(6, (1, 3)), (32, (4, 8)), (300, (40, 100))]:
        x = torch.randn(n, n)
        x[:, c0] = x[:, c1] = math.nan
        cases.append((x,))
    check_each(_arg_both_dims, cases, dynamic=dyn)


def test_argmax_to_float_mean(dyn):
    def f(x):
        return torch.zeros(2, 2, device=x.device).argmax(0).float().mean() + x

    check(f, torch.randn(1), dynamic=dyn)


def test_no_op_reduction(dyn):
    # reductions over size-1 dims
    check(lambda a: (a.sum(-1), torch.amax(a + 1, 1, keepdim=True)), torch.randn(8, 1, 1), dynamic=dyn)


def test_mean_of_zero_dim(dyn):
    check(lambda x: x.mean(0), torch.rand(()), dynamic=dyn)


@pytest.mark.parametrize("keepdim", [True, False])
def test_reductions_over_empty_dim(dyn, keepdim):
    # sum / prod / any / all over a dim of size 0 give their identities
    def f(x):
        return aten.sum(x, 1, keepdim), aten.prod(x, 1, keepdim), aten.any(x, 1, keepdim), aten.all(x, 1, keepdim)

    check(f, torch.zeros(2, 0, dtype=torch.float16), dynamic=dyn)


@pytest.mark.parametrize("op", [aten.argmin, aten.argmax, aten.max, aten.min])
def test_reductions_over_empty_dim_raise(dyn, op):
    # argmin / argmax / max / min over an empty dim are errors, compiled as in eager (torch's
    # IndexError from the meta function, or tilefuse's own error for max / min: no identity)
    x = torch.zeros(2, 0, dtype=torch.float16)
    with pytest.raises(Exception, match="to have non-zero size|has no identity"):
        torch.compile(lambda a: op(a, 1), backend="tilefuse", dynamic=dyn)(x)


def test_sum_of_masked_select(dyn):
    # test_dense_mask_index: a long product with a selected element, summed
    check(lambda x, y: (x * y[2]).sum(), torch.randn(10240), torch.randn(3), dynamic=dyn, atol=1e-4, rtol=1.3e-5)


def test_var_of_layer_norm_pieces(dyn):
    # test_tmp_not_defined_issue1: var / sum over the last dim of a hand-written layer norm
    def f(w, b, x, xc, mean, rstd):
        v0 = torch.ops.aten.var(xc, [2], correction=0)
        y = ((x - mean) * rstd) * w + b
        v1 = torch.ops.aten.var(y, [2], correction=0)
        return v0, y.sum(2), v1.reshape(1, 64, 1) + 1e-05

    shapes = [(128,), (128,), (1, 64, 128), (1, 64, 128), (1, 64, 1), (1, 64, 1)]
    check(f, *[torch.randn(s) for s in shapes], dynamic=dyn, atol=1e-05, rtol=2e-05)


def test_sum_of_quotient_with_zero_dim(dyn):
    # test_tmp_not_defined_issue2: inputs requiring grad (no backward), a 0-d divisor
    def f(w, s, g, z):
        return z, (g / s * w).sum()

    args = [torch.randn(shape).requires_grad_(True).add(1) for shape in [(1, 8, 10, 10), (), (1, 8, 10, 10), (3,)]]
    check(f, *args, dynamic=dyn, atol=1e-5, rtol=1e-5)


def test_gather_softmax_var_mean(dyn):
    # test_tmp_not_defined_issue3 in small: index with constant index tensors, an addmm, a softmax
    # and a layer norm of the gathered rows
    idx = torch.randperm(40)[:30]
    idx6 = torch.tensor([3, 1, 4, 1, 5, 9])

    def f(w1, b1, w4, b4, x):
        a = x[:, idx]
        logits = torch.addmm(b1, x[:, idx6], w1.t())
        sm = torch.softmax(logits, -1)
        var, mean = torch.var_mean(a, [1], correction=0, keepdim=True)
        rstd = torch.rsqrt(var + 1e-5)
        return sm, mean, rstd, (a - mean) * rstd * w4 + b4

    check(
        f,
        torch.randn(17, 6),
        torch.randn(17),
        torch.randn(30),
        torch.randn(30),
        torch.randn(24, 40),
        dynamic=dyn,
    )


def test_sum_of_broadcast_reciprocal(dyn):
    # test_cauchy
    check(
        lambda x, y: torch.sum(1 / (torch.unsqueeze(x, -1) - y)),
        torch.randn(32),
        torch.randn(32),
        dynamic=dyn,
        atol=5e-4,
        rtol=5e-5,
    )


def test_l1_mse_loss(dyn):
    check(
        lambda a, b: (F.l1_loss(a, b), F.mse_loss(a, b)),
        torch.randn(2, 3, 16, 16),
        torch.randn(2, 3, 16, 16),
        dynamic=dyn,
    )


@pytest.mark.parametrize("labels", [[0, 0, 0, 0, 0], [-100, -100, 3, -100, -100]])
def test_nll_loss(dyn, labels):
    t = torch.tensor(labels)
    check(lambda a, b: aten.nll_loss_forward(a, b, None, 1, -100), torch.randn(5, 5), t, dynamic=dyn)
    check(
        lambda g, a, b: aten.nll_loss_backward(g, a, b, None, 1, -100, torch.tensor(1.0, device=g.device)),
        torch.randn(()),
        torch.randn(5, 5),
        t,
        dynamic=dyn,
    )


def test_cross_entropy_and_logsumexp(dyn):
    # test_pattern_matcher_multi_user: the same logits feed a loss and a logsumexp; with grads
    def f(x, y):
        logits = x / 64.0
        return [F.cross_entropy(logits, y, ignore_index=5), logits.logsumexp(dim=-1)]

    check(f, torch.randn(64, 512, requires_grad=True), torch.randint(0, 511, (64,)), dynamic=dyn, grad=True)
