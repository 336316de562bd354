"""Inductor's CommonTemplate random-number tests, rewritten for tilefuse: rand / randn / randint /
bernoulli / dropout. tilefuse draws its own Philox streams, so values are not compared with
eager's: the tests check shapes, dtypes, ranges, statistics (bounds a correct generator misses
with negligible probability), determinism under ``torch.manual_seed`` and fresh values on every
call. Each test runs compiled with static and with dynamic shapes (``dyn``);
docs/inductor_templates.md maps every Inductor test to its port here."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, compiled
from tilefuse import metrics

pytestmark = [*GPU_MARKS, DYN]


def _seeded(fn, *args, seed=1234):
    torch.manual_seed(seed)
    return fn(*args)


def _native():
    assert metrics.fallback_kernel_count == 0, "a random op ran as an aten fallback kernel"


def test_randn_shape_without_generator(dyn):
    # test_randn_generator: shape / dtype / statistics with generator=None; an explicit
    # torch.Generator is not traceable by Dynamo (it raises there, as Inductor's test expects)
    cf = compiled(lambda a, g: torch.randn([200, 200], generator=g, device=a.device), dyn)
    out = cf(torch.linspace(-10, 10, 41), None)
    assert out.shape == (200, 200) and out.dtype == torch.float32
    assert abs(out.mean().item()) < 0.03 and abs(out.std().item() - 1) < 0.03
    _native()
    with pytest.raises(Exception, match="Generator"):
        compiled(lambda a, g: torch.randn([20, 20], generator=g, device=a.device), dyn, fullgraph=True)(
            torch.ones(3), torch.Generator(DEVICE)
        )


def test_randn_with_dtype_and_device_plus_one(dyn):
    def f(v):
        r = torch.randn((12, v.shape[-1], 1, 64), device=v.device, dtype=v.dtype)
        r += 1
        return r

    out = compiled(f, dyn)(torch.randn(4, 12, 2, 64))
    assert out.shape == (12, 64, 1, 64) and abs(out.mean().item() - 1) < 0.03
    _native()


def test_bernoulli(dyn):
    # test_bernoulli1 (in place on an empty_like) and test_bernoulli2 (of probabilities 0 / 1)
    def f(a):
        b = torch.empty_like(a)
        return torch.ops.aten.bernoulli_(b, 0.5), b

    r, b = compiled(f, dyn)(torch.randn(10000))
    assert torch.equal(r, b) and set(r.unique().tolist()) <= {0.0, 1.0} and abs(r.mean().item() - 0.5) < 0.03
    p = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    check(torch.ops.aten.bernoulli, p, dynamic=dyn)  # probabilities 0 and 1: no randomness left


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dropout_trivial(dyn, p):
    check(lambda a: F.dropout(a, p, True) + a, torch.randn(55), dynamic=dyn)


def test_dropout(dyn):
    # two sizes through one compiled function (under dynamic shapes, one graph of a symbolic size
    # whose element offsets key the Philox stream): each draws a fresh, unbiased mask
    for fn in (lambda a: F.dropout(a), lambda a: F.dropout(a, 0.5, True)):
        cf = compiled(fn, dyn)
        for n in (1000, 1500):
            r = _seeded(cf, torch.ones(n))
            assert 0.4 * n < r.nonzero().shape[0] < 0.6 * n and 0.9 < r.mean().item() < 1.1
            assert set(r.unique().tolist()) <= {0.0, 2.0}
            assert not torch.equal(r[: n // 2], r[n // 2 : 2 * (n // 2)])
    _native()


def _same_seed_same_values_new_call_new_values(cf, x):
    torch.manual_seed(1234)
    a = [cf(x).clone() for _ in range(3)]
    torch.manual_seed(1234)
    b = [cf(x).clone() for _ in range(3)]
    for u, v in zip(a, b):
        assert torch.equal(u, v)
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[1], a[2])


def test_dropout_deterministic(dyn):
    _same_seed_same_values_new_call_new_values(compiled(lambda a: F.dropout(a, 0.55, True), dyn), torch.ones(1024))
    _native()


def test_rand_like_deterministic(dyn):
    cf = compiled(lambda a: (torch.rand_like(a), torch.rand_like(a)), dyn)
    _same_seed_same_values_new_call_new_values(lambda a: cf(a)[0], torch.ones(1024))
    c, d = cf(torch.ones(1024))
    assert not torch.equal(c, d)
    assert ((c >= 0) & (c < 1)).all() and ((d >= 0) & (d < 1)).all()
    _native()


def test_rand_like_times_rand_like(dyn):
    # test_philox_rand: two draws in one graph, seeded; also an odd element count
    cf = compiled(lambda x: torch.rand_like(x) * (torch.rand_like(x) * x), dyn)
    for n in (1024, 3):
        x = torch.ones(n)
        a, b, c = _seeded(cf, x, seed=123), _seeded(cf, x, seed=1234), _seeded(cf, x, seed=123)
        assert torch.equal(a, c) and not torch.equal(a, b)
    _native()


def test_randn_like_of_empty(dyn):
    check(lambda v: torch.randn_like(v.min(dim=1).values), torch.rand(10, 3, 0), dynamic=dyn)


def test_randint(dyn):
    def f(x):
        return (
            torch.randint(10, [1024], device=x.device),
            torch.randint(-4, 7, [1024], dtype=torch.int32, device=x.device),
            torch.randint_like(x, 2**50),
        )

    cf = compiled(f, dyn)
    a0, b0, c0 = _seeded(cf, torch.zeros(40, 40), seed=12345)
    a1, b1, c1 = _seeded(cf, torch.zeros(40, 40), seed=12345)
    assert a0.shape == (1024,) and b0.shape == (1024,) and c0.shape == (40, 40)
    assert b0.dtype == torch.int32 and c0.dtype == torch.float32
    assert torch.equal(a0, a1) and torch.equal(b0, b1) and torch.equal(c0, c1)
    assert (a0.min(), a0.max()) == (0, 9) and (b0.min(), b0.max()) == (-4, 6)
    assert c0.min() >= 0 and 2**40 < c0.max() < 2**50
    # a range of 2**31 values or more is declined by the lowering: randint_like(x, 2**50) runs as
    # the aten kernel, the two others natively
    assert metrics.fallback_kernel_count == 1


def test_rand_like_randn_like(dyn):
    # test_like_rands / test_like_rands2 (device given as a string)
    cf = compiled(lambda x: (torch.rand_like(x), torch.randn_like(x), torch.rand_like(x, device=DEVICE)), dyn)
    u, z, v = cf(torch.zeros(200, 200))
    assert u.shape == z.shape == v.shape == (200, 200)
    assert ((u >= 0) & (u < 1)).all() and abs(u.mean().item() - 0.5) < 0.01 and abs(z.std().item() - 1) < 0.03
    assert not torch.equal(u, v)
    _native()


def test_dropout_backward_uses_forward_mask(dyn):
    # test_dropout2: eval mode is the identity (gradient 1); training drops ~33% with the same
    # mask in the gradient, the same values after re-seeding
    n = 20000
    weight = torch.ones(n, requires_grad=True)
    cf = compiled(lambda x, train: F.dropout(x * weight, 0.33, train), dyn)
    ones = torch.ones(n)
    r = cf(ones, False)
    r.sum().backward()
    assert torch.equal(r, ones) and torch.equal(weight.grad, ones)
    results = []
    for _ in range(2):
        weight.grad = None
        r = _seeded(cf, ones, True)
        r.sum().backward()
        kept = r != 0
        assert torch.equal(kept, weight.grad != 0) and torch.equal(r, weight.grad)
        assert 0.64 * n < kept.sum().item() < 0.70 * n and abs(r.mean().item() - 1) < 0.02
        results.append((r, weight.grad.clone()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    _native()


def test_dropout_between_linears(dyn):
    # test_dropout3: forward and backward of Linear / Dropout twice, gradients flow through the
    # kept elements only
    m = torch.nn.Sequential(
        torch.nn.Linear(32, 32, bias=False), torch.nn.Dropout(), torch.nn.Linear(32, 32, bias=False), torch.nn.Dropout()
    )
    x = torch.randn(8, 32, requires_grad=True)
    out = _seeded(compiled(m, dyn), x)
    assert out.shape == (8, 32) and 0.1 < (out == 0).float().mean().item() < 0.9
    out.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    _native()


def test_three_randints_one_graph(dyn):
    # test_randint_kernel_count: three draws, independent values
    cf = compiled(
        lambda: (
            torch.randint(10, [32], device=DEVICE),
            torch.randint(10, [32], device=DEVICE),
            torch.randint(10, [32], device=DEVICE),
        ),
        dyn,
    )
    a, b, c = cf()
    assert not (torch.equal(a, b) and torch.equal(b, c))
    _native()


def test_randint_int64_mod(dyn):
    out = compiled(lambda n: torch.randint(low=-5, high=5, size=(n,), dtype=torch.int64, device=DEVICE) % 10, dyn)(20)
    assert out.shape == (20,) and ((0 <= out) & (out < 10)).all()


def test_rand_like_keeps_channels_last(dyn):
    # test_like_channels_last: like-factories of a channels-last tensor keep its strides
    def f():
        x = torch.randn((4, 3, 8, 8), device=DEVICE)
        xc = x.contiguous(memory_format=torch.channels_last)
        return xc, torch.zeros_like(xc, memory_format=torch.preserve_format), torch.rand_like(xc)

    want = f()
    got = compiled(f, dyn)()
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.stride() == w.stride()


@pytest.mark.skipif(DEVICE != "cuda", reason="draws on the CPU and on CUDA")
def test_rand_like_onto_another_device(dyn):
    # test_like_rands3: rand_like with a device other than the input's
    cf = compiled(lambda x, device: torch.rand_like(x, device=device), dyn)
    assert cf(torch.ones(10, device="cpu"), "cuda").device.type == "cuda"
    assert cf(torch.ones(10, device="cuda"), "cpu").device.type == "cpu"
