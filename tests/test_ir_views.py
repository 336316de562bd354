"""View layouts: ``view_strides`` against ``torch.Tensor.view`` on random strided tensors, and
strided views of computed values passed to extern kernels without copies."""

from __future__ import annotations

import random

import pytest
import torch

from tilefuse import config, metrics
from tilefuse.ir.nodes import view_strides

from _tf_testutil import DEVICE


def _random_case(rng: random.Random):
    nd = rng.randint(1, 4)
    size = [rng.choice([1, 2, 3, 4, 6]) for _ in range(nd)]
    base = torch.empty(*[s * rng.choice([1, 2]) for s in size])
    perm = list(range(nd))
    rng.shuffle(perm)
    x = base[tuple(slice(0, s) for s in size)].permute(perm)
    m, new = x.numel(), []
    while m > 1:
        d = rng.choice([d for d in range(2, m + 1) if m % d == 0])
        new.append(d)
        m //= d
    if rng.random() < 0.3:
        new.insert(rng.randint(0, len(new)), 1)
    return x, new or [1]


def test_view_strides_matches_torch_view():
    rng = random.Random(0)
    for _ in range(3000):
        x, new = _random_case(rng)
        try:
            want = list(x.view(new).stride())
        except RuntimeError:
            want = None
        got = view_strides(list(x.shape), list(x.stride()), new)
        assert (got is None) == (want is None), (x.shape, x.stride(), new, got, want)
        if got is not None:
            # a size-1 dim's stride is never used to address memory
            assert [g for g, s in zip(got, new) if s > 1] == [w for w, s in zip(want, new) if s > 1]


def test_view_strides_examples():
    # split of a sliced (non-contiguous) row: strided
    assert view_strides([8192, 2048], [6144, 1], [8, 1024, 16, 128]) == [6291456, 6144, 128, 1]
    # merging a transposed pair: not a view
    assert view_strides([4, 5], [1, 4], [20]) is None
    assert view_strides([0, 3], [3, 1], [3, 0]) is not None  # empty: any strides


@pytest.fixture
def strict():
    torch._dynamo.reset()
    with config.patch(fallback_on_error=False):
        yield
    torch._dynamo.reset()


def test_attention_inputs_split_from_one_projection_are_views(strict, tmp_path):
    # q, k, v sliced out of one projection and reshaped to heads: strided views of its buffer,
    # so no kernel copies them before attention
    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    x = torch.randn(2, 16, 24, device=DEVICE)
    w = torch.randn(72, 24, device=DEVICE)

    def f(a, m):
        q, k, v = torch.nn.functional.linear(a, m).split(24, dim=-1)
        q, k, v = (t.view(2, 16, 3, 8).transpose(1, 2) for t in (q, k, v))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    metrics.reset()
    with config.patch(debug_dir=str(tmp_path)):
        got = torch.compile(f, backend="tilefuse")(x, w)
    torch.testing.assert_close(got, f(x, w), atol=1e-4, rtol=1e-4)
    assert metrics.generated_kernel_count == 0
