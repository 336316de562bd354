"""Inductor's common templates for indexing, re-expressed: aten.index with tensor indices
(broadcast, None, negative), index_select, gather, embedding, masked_fill, index_put (plain,
accumulate, boolean masks), the masked index ops, and indices computed from arange.

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager (``_tpl_util_b.check``). The list of templates and where each went is
docs/inductor_templates.md.
"""

from __future__ import annotations

import math

import pytest
import torch

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten


def test_index_propagation(dynamic):
    # indices that are affine (or abs/floordiv/remainder) functions of arange
    def f(x, y, n: int):
        i = torch.arange(x.size(0), device=DEVICE)
        flip = torch.arange(x.size(0) - 1, -1, -1, device=DEVICE)
        rep = torch.arange(y.shape[0] * n, device=DEVICE)
        pad = torch.arange(x.shape[0] + n, device=DEVICE)
        return x[i], x[flip], y[rep // n], y[rep % y.shape[0]], x[(pad - n).abs()]

    check(f, torch.randn(8), torch.randn(8, 16), 3, dynamic=dynamic)


def test_computed_buffer_inlining(dynamic):
    def f(x):
        idx = torch.arange(x.size(0) - 1, -1, -1, device=DEVICE)
        return x[idx], idx

    check(f, torch.randn(8), dynamic=dynamic)


def test_index_propagation_device_assert_masked(dynamic):
    def f(a):
        idx = torch.constant_pad_nd(torch.arange(a.size(0), device=DEVICE), (1050, 0))
        return a[torch.where(idx >= 0, idx, idx)]

    check(f, torch.randn(1024), dynamic=dynamic)


def test_neg_index(dynamic):
    # negative indices wrap around, whether known at compile time or only at run time
    def f(a, b, c, d):
        return (
            a[b - 1],
            c[:, -1],
            a[d],
            a[torch.arange(start=-1, end=-a.numel() - 1, step=-1, device=DEVICE)],
            a[torch.arange(start=1, end=-a.numel() - 1, step=-1, device=DEVICE)],
            a[(1.0 * torch.arange(start=-1, end=-a.numel() - 1, step=-1, device=DEVICE)).int()],
            aten._unsafe_index(a, (d,)),
            a[torch.tensor([2], device=DEVICE)],
            a[torch.tensor([-2], device=DEVICE)],
        )

    a = torch.rand(64)
    d = torch.arange(start=-1, end=-a.numel() - 1, step=-1)
    check(f, a, torch.zeros(16, dtype=torch.long), torch.rand(1, 8, 4), d, dynamic=dynamic)


def test__unsafe_masked_index(dynamic):
    def f(a, mask, idx):
        return aten._unsafe_masked_index(a, mask, idx, 1)

    check(f, torch.randn(8), torch.tensor([True, False, True]), [torch.tensor([3, 9, -2])], dynamic=dynamic)


def test__unsafe_masked_index_put_accumulate(dynamic):
    def f(a, mask, idx, values):
        return aten._unsafe_masked_index_put_accumulate(a, mask, idx, values)

    args = (torch.randn(8), torch.tensor([True, False, True]), [torch.tensor([3, 9, -2])], torch.randn(3))
    check(f, *args, dynamic=dynamic)


def test_vectorized_ops_masked(dynamic):
    def f(x):
        index = torch.arange(16, device=DEVICE)
        return aten._unsafe_masked_index(x, index.view(1, 1, 16) < 15, [None, None, index], 7)

    check(f, torch.rand(4, 8, 15), dynamic=dynamic)


def test_vectorized_ops_masked_var_novec(dynamic):
    def f(x):
        index = torch.arange(10, device=DEVICE)
        return aten._unsafe_masked_index(x, (index < 5).view(1, 1, 1, 10), [None, None, None, index], 7)

    check(f, torch.rand(1, 1, 8, 8), dynamic=dynamic)


def test_index1(dynamic):
    f = lambda a, b, c: aten.index(a, [b, c])  # noqa: E731
    a = torch.randn(8, 8, 12)
    check(f, a, torch.tensor([0, 0, 2, 2]), torch.tensor([3, 4, 4, 3]), dynamic=dynamic)
    check(f, a, torch.tensor([[0, 0, 2, 2]]), torch.tensor([[3], [4], [4], [3]]), dynamic=dynamic)


def test_index2(dynamic):
    check(
        lambda a, b: (aten.index(a, [b]), aten.index(a, [None, b])),
        torch.randn(8, 8, 8),
        torch.tensor([[0, 0, 2, 2]]),
        dynamic=dynamic,
    )


def test_index3(dynamic):
    i = torch.tensor([0, 2, 1])
    check(lambda x, ia, ib: (x[:, ia, None, ib, 0],), torch.randn(3, 4, 4, 4, 3), i, i.clone(), dynamic=dynamic)


def test_single_elem_indirect(dynamic):
    check(lambda a, b: (a[b] + 1,), torch.randn(1), torch.tensor([0]), dynamic=dynamic)


def test_tensor_index_slice(dynamic):
    def f(a):
        x, y = torch.tensor([1, 2], device=DEVICE), torch.tensor([2, 3], device=DEVICE)
        xx, yy = torch.tensor([1, 2], device=DEVICE).view(1, 2), torch.tensor([1, 2, 3], device=DEVICE).view(3, 1)
        return [
            a[x, y],
            a[:, x, y],
            a[:, x, y, :],
            a[x, :, y],
            a[:, x, :, y, :],
            a[xx, yy],
            a[:, xx, yy],
            a[xx, :, yy],
            a[xx, yy, :],
            a[:, xx, :, yy],
        ]

    check(f, torch.arange(3 * 4 * 5 * 6 * 7).view(3, 4, 5, 6, 7), dynamic=dynamic)


_PUT_KEYS = [
    lambda x, y, xx, yy: (x, y),
    lambda x, y, xx, yy: (slice(None), x, y),
    lambda x, y, xx, yy: (slice(None), x, y, slice(None)),
    lambda x, y, xx, yy: (x, slice(None), y),
    lambda x, y, xx, yy: (slice(None), x, slice(None), y, slice(None)),
    lambda x, y, xx, yy: (xx, yy),
    lambda x, y, xx, yy: (slice(None), xx, yy),
    lambda x, y, xx, yy: (xx, slice(None), yy),
    lambda x, y, xx, yy: (xx, yy, slice(None)),
    lambda x, y, xx, yy: (slice(None), xx, slice(None), yy),
]


@pytest.mark.parametrize("versions", [(0, 1, 2, 5, 6, 8), (3, 4, 7, 9)], ids=["adjacent", "split"])
def test_tensor_index_put_slice(versions, dynamic):
    # the template's ten assignments, one after another into the input, each writing its own value
    # (-1, -2, ...) so that a misplaced write shows through a later one
    def f(a):
        x, y = (
            torch.tensor([1, 2], dtype=torch.int32, device=DEVICE),
            torch.tensor([2, 3], dtype=torch.int32, device=DEVICE),
        )
        xx, yy = torch.tensor([1, 2], device=DEVICE).view(1, 2), torch.tensor([1, 2, 3], device=DEVICE).view(3, 1)
        for v in versions:
            key = _PUT_KEYS[v](x, y, xx, yy)
            a[key] = torch.full_like(a[key], -1 - v)
        return a

    # index tensors separated by a slice (the indexed dims move to the front): aten's index_put_
    split = versions[0] == 3
    check(f, torch.arange(3 * 4 * 5 * 6 * 7, dtype=torch.int32).view(3, 4, 5, 6, 7), dynamic=dynamic, native=not split)


def test_index_select(dynamic):
    def f(a, b):
        return (
            torch.index_select(a, 0, b),
            torch.index_select(a, 1, b),
            torch.index_select(torch.index_select(a, 2, b), 1, b),
        )

    g = lambda a, b32, b64: (f(a, b32), f(a, b64))  # noqa: E731
    b = torch.tensor([0, 0, 2, 1])
    check(g, torch.randn(8, 8, 8), b.to(torch.int32), b, dynamic=dynamic)


def test_gather1(dynamic):
    def f(a, b):
        return torch.gather(a.expand([4, 5, 10, 6]), 3, b + 1), torch.gather(a.expand([4, 5, 10, 6]), -1, b + 1)

    check(f, torch.randn(1, 1, 10, 6), torch.randint(5, [4, 5, 10, 1]), dynamic=dynamic)


def test_gather2(dynamic):
    # 0-d source and index: aten's gather
    f = lambda a, b: torch.gather(a, 0, b) + torch.gather(a, -1, b)  # noqa: E731
    check(f, torch.tensor(123.0), torch.tensor(0), dynamic=dynamic, native=False)


def test_gather3(dynamic):
    a = torch.randn(4, 5, 10, 6, requires_grad=True)
    # sparse_grad: aten's gather
    f = lambda a, b: torch.gather(a, 1, b, sparse_grad=True)  # noqa: E731
    check(f, a, torch.randint(5, [4, 5, 10, 1]), dynamic=dynamic, native=False)


def test_device_assert(dynamic):
    def f(x, y):
        x = torch.sum(x.view(int(x.shape[0] / 6), 6), dim=1)
        return torch.gather(x, 0, torch.trunc(y).to(torch.int64))

    y = torch.ones(1, dtype=torch.float64)
    check(f, torch.randn(30), y, dynamic=dynamic)
    check(f, torch.randn(36), y, dynamic=dynamic)


def test_indirect_load_broadcast(dynamic):
    idx = torch.zeros(21, 32, dtype=torch.int64).t()  # (32, 21), column-major
    check(lambda a, b, i: torch.gather(b, 0, i) + a, torch.randn(32, 1), torch.randn(300, 64), idx, dynamic=dynamic)


def test_misaligned_address_issue1(dynamic):
    check(
        lambda x, i: aten.gather.default(x, 1, i), torch.randn(1, 1000), torch.randint(0, 1000, (1, 1)), dynamic=dynamic
    )


def test_embedding(dynamic):
    m = torch.nn.Sequential(torch.nn.Embedding(10, 4, padding_idx=0), torch.nn.ReLU())
    check(lambda i: (m(i),), torch.randint(10, [2, 8]), dynamic=dynamic)


def test_embedding_bag(dynamic):
    def f(w, i, o):
        return aten._embedding_bag(w, i, o, False, 0, False, None)

    # the bags' offsets make the output sizes data-dependent: aten's kernel
    check(f, torch.randn(10, 4), torch.randint(10, [8]), torch.tensor([0, 2, 6]), dynamic=dynamic, native=False)


def test_scalar_output(dynamic):
    # a graph returning a size (a Python int) along with an embedding lookup
    def f(w, ids):
        n = ids.size(1)
        emb = aten.embedding.default(w, aten.view.default(ids, [-1, n]))
        return aten.full.default([1, n], 1, dtype=torch.float32, device=w.device), n, emb

    check(f, torch.randn(64, 16), torch.randint(0, 64, (1, 22)), dynamic=dynamic)


def test_index_tensor(dynamic):
    # test_index_tensor: the last non-zero position of each row, found by a reduction, indexes rows
    def f(x, y):
        last = aten.sum.dim_IntList(aten.ne.Scalar(x, 0), [-1]) - 1
        iota = torch.ops.prims.iota.default(1, start=0, step=1, dtype=torch.int64, device=x.device, requires_grad=False)
        return aten.index.Tensor(y, [iota, last])

    check(f, torch.randn(1, 256), torch.randn(1, 256, 2), dynamic=dynamic)


def test_index_dynamic_shapes(dynamic):
    # bilinear-resize coordinates computed from sizes in float arithmetic (issue 42 item 3)
    def f(x):
        h, w = x.size(1), x.size(2)
        oh = math.ceil(h * 1.8735363483428955)
        ow = math.ceil(math.floor(w * 1.8735363483428955))
        ys = (torch.arange(oh, device=DEVICE).to(torch.float32) + 0.5) * (h / oh) - 0.5
        xs = (torch.arange(ow, device=DEVICE).to(torch.float32) + 0.5) * (w / math.floor(w * 1.8735363483428955)) - 0.5
        y0 = ys.clamp_min(0.0)
        x0 = xs.clamp_min(0.0)
        yi, xi = y0.to(torch.int64), x0.to(torch.int64)
        y1 = y0.ceil().clamp_max(h - 1).to(torch.int64)
        u = x.unsqueeze(0)
        top = aten.index.Tensor(u, [None, None, yi.unsqueeze(1), xi])
        bot = aten.index.Tensor(u, [None, None, y1.unsqueeze(1), xi])
        wy = y0.unsqueeze(1) - yi.unsqueeze(1)
        return ((top * (1.0 - wy) + bot * wy) * (1.0 - (x0 - xi)))[0]

    check(f, torch.randn(15, 20, 3), dynamic=dynamic)


def test_masked_fill(dynamic):
    def f(mask, value):
        return aten.masked_fill(value, mask, -10000.0) + 2, aten.masked_fill(value / 2.0, torch.logical_not(mask), 667)

    check(f, torch.randint(0, 2, [1, 16], dtype=torch.bool), torch.randn(16, 16), dynamic=dynamic)


def test_masked_fill_promotion(dynamic):
    mask = torch.randint(0, 2, [1, 16], dtype=torch.bool)
    for value in (
        torch.randn(16, 16, dtype=torch.float16 if DEVICE == "cuda" else torch.float32),
        torch.randint(16, (16, 16)),
    ):
        check(lambda m, v: aten.masked_fill(v, m, torch.tensor(3.5, device=DEVICE)), mask, value, dynamic=dynamic)


def test_masked_scatter(dynamic):
    value = torch.randn(10, 10)
    mask = torch.rand(10, 10) > 0.5
    source = torch.randn(int(mask.count_nonzero()))
    # how many source elements a row takes is data-dependent: aten's kernel
    check(lambda v, m, s: torch.masked_scatter(v, m, s), value, mask, source, dynamic=dynamic, native=False)


def test_index_put1(dynamic):
    def f(a, b, c):
        return torch.index_put(a, [b], c), torch.index_put_(a + 1, [b + 1], c + 1) + 1

    check(f, torch.randn(40, 8, 3, 3), torch.randperm(31), torch.randn(31, 8, 3, 3), dynamic=dynamic)
    check(f, torch.randn(64, 4, 2), torch.arange(4), torch.randn(4, 1, 1), dynamic=dynamic)


def test_index_put2(dynamic):
    # accumulate with repeated indices
    a, b, c = torch.randn(20, 8, 3, 3), torch.randint(0, 20, size=[60]), torch.randn(60, 8, 3, 3)
    check(lambda a, b, c: torch.index_put(a, [b], c, True), a, b, c, dynamic=dynamic, atol=1e-5, rtol=1e-5)


def test_index_put3(dynamic):
    def f(a, b, c):
        aten.index_put_(a, (None, b, None), c)
        a1 = a + 1
        aten.index_put_(a1, (None, b + 1, None), c + 1)
        return a, a1

    check(f, torch.randn(64, 4, 2), torch.arange(3), torch.randn(64, 1, 2), dynamic=dynamic)


def test_index_put4(dynamic):
    # a boolean mask over the first dim, a 0-d value
    check(
        lambda a, b, c: torch.index_put(a, [b], c),
        torch.rand(8, 2),
        torch.rand(8) > 0.5,
        torch.rand([]),
        dynamic=dynamic,
    )


def _put_both_ways(indices):
    """A function writing ``c`` into two copies of ``a`` (assigned, then accumulated) at the index
    tensors it is given, placed where ``indices`` has a non-None slot."""

    def f(a, c, *index_tensors):
        it = iter(index_tensors)
        idx = [None if slot is None else next(it) for slot in indices]
        a0, a1 = a.clone(), a.clone()
        aten.index_put_(a0, idx, c, False)
        aten.index_put_(a1, idx, c, True)
        return a0, a1

    return f


def test_index_put_as_masked_fill(dynamic):
    f = _put_both_ways([True])
    check(f, torch.randn(64, 4, 2), torch.randn([]), torch.randn(64, 4, 2) > 0, dynamic=dynamic)


def test_index_put_fallback1(dynamic):
    # a mask selecting as many places as c has values: aten's kernel (data-dependent count)
    f = _put_both_ways([True])
    check(f, torch.randn(3), torch.randn(2), torch.tensor([True, True, False]), dynamic=dynamic, native=False)


def test_index_put_fallback2(dynamic):
    f = _put_both_ways([None, True, True])
    args = (torch.randn(1, 2, 3), torch.randn([]), torch.tensor([0, 1]), torch.tensor([True, True, False]))
    check(f, *args, dynamic=dynamic, native=False)


def test_index_put_deterministic_fallback(dynamic):
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        a, b, c = torch.randn(20, 32), torch.randint(0, 20, size=[60]), torch.randn(60, 32)
        check(
            lambda a, b, c: torch.index_put(a, [b], c, True),
            a,
            b,
            c,
            dynamic=dynamic,
            atol=1e-5,
            rtol=1e-5,
            native=False,
        )
    finally:
        torch.use_deterministic_algorithms(prev)


def test_index_put_index(dynamic):
    def f(ind, x, src):
        return aten.index.Tensor(aten.index_put.default(x, [ind], src), [ind])

    check(f, torch.tensor([1]), torch.randn(8, 4), torch.randn(4), dynamic=dynamic)


def test_index_put_reinplace(dynamic):
    def f(x, idx):
        x.index_put_((idx,), torch.ones(idx.size(0), device=DEVICE))
        return x.expand((2, x.shape[0]))

    check(f, torch.randn(1024), torch.arange(10), dynamic=dynamic)


def test_index_put_failed_reinplace(dynamic):
    def f(x, idx):
        return x, x.index_put((idx,), torch.ones(idx.size(0), device=DEVICE))

    check(f, torch.randn(1024), torch.arange(10), dynamic=dynamic)


def test_setitem_with_int_parameter(dynamic):
    def f(n: int, a):
        a[n] = -1
        return a

    for n in (2, 6, -7):
        check(f, n, torch.zeros(7), dynamic=dynamic)


def test_one_hot(dynamic):
    check(lambda a: torch.nn.functional.one_hot(a, 8) + 1, torch.arange(100).view(4, 5, 5) % 8, dynamic=dynamic)
