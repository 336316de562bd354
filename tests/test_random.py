"""Random ops lowered natively through Philox (``tl.rand``/``tl.randn``/``tl.randint``) with per-call
seeds from torch's default generator: statistical checks of the distributions, reproducibility
under ``torch.manual_seed``, and dropout's forward/backward agreeing on one mask.

The statistical bounds are 6 standard errors (or a chi-square far in the tail), so a correct
generator fails them with probability below 1e-6 per check; a wrong one (a constant, a shifted
range, a dependence on the seed only, a reused stream) fails them outright.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tilefuse  # noqa: F401
from tilefuse import config, metrics

from _tf_testutil import DEVICE, GPU_MARKS

pytestmark = GPU_MARKS
N = (300, 400)  # 120000 samples per check


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    metrics.reset()
    with config.patch(fallback_on_error=False):
        yield
    torch._dynamo.reset()


def _compiled(fn):
    return torch.compile(fn, backend="tilefuse")


def _chi_square_uniform(u: torch.Tensor, bins: int = 20) -> float:
    counts = torch.histc(u.double().flatten().cpu(), bins=bins, min=0.0, max=1.0)
    expected = u.numel() / bins
    return float(((counts - expected) ** 2 / expected).sum())


def test_rand_randn_randint_bernoulli_distributions_in_one_kernel():
    x = torch.randn(*N, device=DEVICE)
    f = _compiled(
        lambda a: (
            torch.rand(*N, device=DEVICE),
            torch.randn_like(a),
            torch.randint(3, 9, N, device=DEVICE),
            a.bernoulli(0.2),
            torch.bernoulli(torch.full_like(a, 0.7)),
        )
    )
    torch.manual_seed(0)
    u, z, k, b2, b7 = f(x)
    assert metrics.fallback_kernel_count == 0 and metrics.generated_kernel_count == 1
    n = u.numel()
    # uniform [0, 1): mean 1/2, variance 1/12, flat histogram (chi-square, 19 dof: 1e-6 tail ~ 62)
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    assert abs(u.mean().item() - 0.5) < 6 * math.sqrt(1 / 12 / n)
    assert abs(u.var().item() - 1 / 12) < 0.003
    assert _chi_square_uniform(u) < 62
    # normal: mean 0, std 1, 68.27% within one sigma, symmetric
    assert abs(z.mean().item()) < 6 / math.sqrt(n)
    assert abs(z.std().item() - 1) < 0.02
    assert abs((z.abs() < 1).double().mean().item() - 0.6827) < 6 * math.sqrt(0.6827 * 0.3173 / n)
    # randint(3, 9): int64, every value of [3, 8] with frequency 1/6
    assert k.dtype == torch.int64 and k.min().item() == 3 and k.max().item() == 8
    freq = torch.bincount(k.flatten().cpu() - 3, minlength=6).double() / n
    assert (freq - 1 / 6).abs().max().item() < 6 * math.sqrt(1 / 6 * 5 / 6 / n)
    # bernoulli: values 0/1 with the given probability
    for b, p in ((b2, 0.2), (b7, 0.7)):
        assert set(b.unique().tolist()) <= {0.0, 1.0}
        assert abs(b.mean().item() - p) < 6 * math.sqrt(p * (1 - p) / n)
    # the ops use distinct seeds: their streams are uncorrelated
    corr = torch.corrcoef(torch.stack([u.flatten(), z.flatten(), b2.flatten()]).double())
    assert corr.sub(torch.eye(3, dtype=corr.dtype, device=corr.device)).abs().max().item() < 6 / math.sqrt(n)


def test_manual_seed_reproduces_and_each_call_draws_anew():
    f = _compiled(lambda a: a + torch.rand_like(a))
    x = torch.zeros(64, 33, device=DEVICE)
    torch.manual_seed(123)
    r1, r2 = f(x), f(x)
    torch.manual_seed(123)
    r3 = f(x)
    torch.manual_seed(124)
    r4 = f(x)
    assert torch.equal(r1, r3)
    assert not torch.equal(r1, r2) and not torch.equal(r1, r4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_forward_scales_kept_values_and_backward_uses_the_same_mask(dtype):
    p = 0.3
    x = (torch.rand(*N, device=DEVICE) + 0.5).to(dtype).requires_grad_()
    g = torch.randn(*N, device=DEVICE, dtype=dtype)
    f = _compiled(lambda a: F.dropout(a, p, training=True) * 2)
    torch.manual_seed(0)
    y = f(x)
    y.backward(g)
    keep = y != 0
    n = keep.numel()
    assert abs(1 - keep.double().mean().item() - p) < 6 * math.sqrt(p * (1 - p) / n)
    scale = 1 / (1 - p)
    torch.testing.assert_close(
        y[keep], (x.detach()[keep].float() * scale * 2).to(dtype), atol=0, rtol=1e-2 if dtype != torch.float32 else 1e-6
    )
    want_grad = torch.where(keep, g.float() * scale * 2, 0.0).to(dtype)
    torch.testing.assert_close(x.grad, want_grad, atol=0, rtol=1e-2 if dtype != torch.float32 else 1e-6)
    assert metrics.fallback_kernel_count == 0


def test_random_op_with_explicit_generator_falls_back_to_aten():
    gen = torch.Generator(device=DEVICE)
    f = _compiled(lambda a: a + torch.rand(a.shape, generator=gen, device=a.device))
    x = torch.zeros(5, 7, device=DEVICE)
    gen.manual_seed(3)
    got = f(x)
    gen.manual_seed(3)
    want = torch.rand(5, 7, generator=gen, device=DEVICE)
    # the fallback draws from the user's generator exactly as eager does
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_rand_stays_below_one(dtype):
    # float32 uniforms above the type's largest value below 1 used to round up to exactly 1.0
    torch.manual_seed(0)
    u = _compiled(lambda: torch.rand(300, 400, dtype=dtype, device=DEVICE))()
    assert u.max().item() < 1.0 and u.min().item() >= 0.0


def test_randint_is_uniform_over_a_range_near_2_31():
    # 32 random bits modulo 3*2**29 made the lower third 1.5x too likely (P(k >= 2**30) = 0.25)
    r = 3 * 2**29
    torch.manual_seed(0)
    k = _compiled(lambda: torch.randint(0, r, N, device=DEVICE))()
    n = k.numel()
    assert abs((k >= 2**30).double().mean().item() - 1 / 3) < 6 * math.sqrt(1 / 3 * 2 / 3 / n)
    assert abs(k.double().mean().item() / r - 0.5) < 6 * math.sqrt(1 / 12 / n)


def test_randint_bounds_outside_the_dtype_raise_as_eager():
    f = _compiled(lambda: torch.randint(0, 200, (100,), dtype=torch.int8, device=DEVICE))
    with pytest.raises(RuntimeError, match="out of bounds"):
        f()
