"""Inductor's common templates for scatter/gather, re-expressed: scatter (values, scalars,
reduce=add/multiply), scatter_add, scatter_reduce (include_self or not), index_add,
slice_scatter, select_scatter, as_strided_scatter and gather-then-scatter graphs.

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager (``_tpl_util_b.check``). The list of templates and where each went is
docs/inductor_templates.md.
"""

from __future__ import annotations

import torch

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten


def test_scatter_bf16(dynamic):
    for dt in (torch.int64, torch.bool, torch.bfloat16):
        args = (torch.zeros(3, 5, dtype=dt), torch.ones(2, 5, dtype=dt), torch.tensor([[0, 1, 2, 0, 0]]))
        # bfloat16 has no native atomic add here: aten's scatter_add
        f = lambda inp, src, index: inp.scatter_add(0, index, src)  # noqa: E731
        check(f, *args, dynamic=dynamic, native=dt != torch.bfloat16)


def test_scatter1(dynamic):
    check(
        lambda a, i, b: aten.scatter(a, -1, i, b),
        torch.zeros(2, 3),
        torch.tensor([[0]]),
        torch.ones(2, 3),
        dynamic=dynamic,
    )


def test_scatter2(dynamic):
    # every element added into row 0: a long chain of additions into one place
    f = lambda a, i, b: aten.scatter.reduce(a, 0, i, b, reduce="add")  # noqa: E731
    check(f, torch.zeros(64, 32), torch.zeros(64, 32, dtype=torch.int64), torch.ones(64, 32), dynamic=dynamic)


def test_scatter3(dynamic):
    # a scalar source, reduce="add"
    f = lambda a, i: aten.scatter(a, 2, i, 0.8, reduce="add")  # noqa: E731
    check(f, torch.randn(5, 29, 13), torch.tensor([[[3, 5, 7, 9]]]), dynamic=dynamic, atol=2e-4, rtol=1e-3)


def test_scatter4(dynamic):
    # one index row: each column writes one place, so there are no competing writers
    idx = torch.randint(24, (1, 40))
    check(lambda x, i, s: torch.scatter(x, 0, i, s), torch.randn(24, 40), idx, torch.randn(1, 40), dynamic=dynamic)


def test_scatter5(dynamic):
    def f(a, index, b, reduce: str):
        a = a.clone()
        a.scatter_(0, index, b, reduce=reduce)
        a1 = a + 1.0
        a1.scatter_(0, index, b, reduce=reduce)
        return a, a1

    for reduce in ("add", "multiply"):
        # a product scatter under symbolic sizes runs as aten's kernel (lowered when static)
        native = not (dynamic and reduce == "multiply")
        check(
            f,
            torch.ones(4, 5),
            torch.tensor([[1], [2], [3]]),
            torch.randn(4, 5),
            reduce,
            dynamic=dynamic,
            native=native,
        )


def test_scatter6(dynamic):
    check(
        lambda a, i: aten.scatter(a, 2, i, 0.8), torch.randn(5, 8, 13), torch.tensor([[[3, 5, 7, 9]]]), dynamic=dynamic
    )


def test_scatter_add1(dynamic):
    check(
        lambda a, i, b: aten.scatter_add(a, 0, i, b),
        torch.randn(2, 3),
        torch.tensor([[0]]),
        torch.randn(2, 3),
        dynamic=dynamic,
    )


def test_scatter_add2(dynamic):
    args = (torch.randn(2, 3), torch.tensor([[0, 0, 0], [1, 1, 1]]), torch.randn(2, 3))
    check(lambda a, i, b: aten.scatter_add(a, 0, i, b), *args, dynamic=dynamic)


def test_scatter_add3(dynamic):
    args = (torch.randn(5, 29, 13), torch.tensor([[[3, 5, 7, 9]]]), torch.randn(1, 1, 10))
    check(lambda a, i, b: aten.scatter_add(a, 2, i, b), *args, dynamic=dynamic)


def test_scatter_reduce1(dynamic):
    args = (torch.randn(5, 29, 13), torch.tensor([[[3, 5, 7, 9]]]), torch.randn(1, 1, 10))
    check(lambda a, i, b: aten.scatter_reduce(a, 2, i, b, "sum"), *args, dynamic=dynamic)


def test_scatter_reduce2(dynamic):
    f = lambda a, i, b, r: aten.scatter_reduce(a, 0, i, b, r, include_self=False)  # noqa: E731
    for reduce in ("sum", "amax"):
        check(f, torch.randn(2, 3), torch.zeros(2, 3, dtype=torch.int64), torch.randn(2, 3), reduce, dynamic=dynamic)


def test_scatter_reduce3(dynamic):
    def f(a, index, b, reduce: str):
        a = a.clone()
        a.scatter_reduce_(0, index, b, reduce=reduce)
        a1 = a + 1.0
        a1.scatter_reduce_(0, index, b, reduce=reduce)
        return a, a1

    for reduce in ("sum", "prod"):
        # a product scatter under symbolic sizes runs as aten's kernel (lowered when static)
        native = not (dynamic and reduce == "prod")
        check(
            f,
            torch.ones(4, 5),
            torch.tensor([[1], [2], [3]]),
            torch.randn(4, 5),
            reduce,
            dynamic=dynamic,
            native=native,
        )


def test_gather_scatter(dynamic):
    # message passing: gather node features along edges, scatter-add them back to nodes
    def f(feat, edges):
        msg = feat[edges[0]] - feat[edges[1]] + 1
        out = torch.zeros_like(feat)
        out.scatter_add_(0, edges[1].unsqueeze(-1).expand_as(msg), msg)
        return out

    check(f, torch.randn(16, 8), torch.randint(0, 16, size=(2, 80)), dynamic=dynamic, atol=1e-5, rtol=1e-5)


def test_mutations_loop_fusion(dynamic):
    f = lambda t, i, s: t.index_add(0, i, s, alpha=2.0) / 2  # noqa: E731
    d = torch.float64
    check(f, torch.rand(1, dtype=d), torch.tensor([0]), torch.rand(1, dtype=d), dynamic=dynamic)


def test_select_scatter(dynamic):
    def f(x, a, b):
        return aten.select_scatter(x, a, 1, 0), aten.select_scatter(x, b, 0, 1)

    check(f, torch.randn(8, 19, 38), torch.randn(8, 38), torch.randn(19, 38), dynamic=dynamic)


def test_slice_scatter(dynamic):
    def f(x, a):
        return aten.slice_scatter(x, a, 2, 10, -10), aten.slice_scatter(x, a[:, :, :40], 2, 10, -10, 2)

    check(f, torch.randn(4, 8, 100), torch.randn(4, 8, 80), dynamic=dynamic)


def test_slice_scatter2(dynamic):
    check(
        lambda a, b: aten.slice_scatter(a, b, 0, 0, 2**63 - 1),
        torch.randn(8, 19, 38),
        torch.randn(8, 19, 38),
        dynamic=dynamic,
    )


def test_slice_scatter3(dynamic):
    check(
        lambda a, b: aten.slice_scatter.default(a, b, 1, 1, 2**63 - 1, 2),
        torch.randn(1, 4),
        torch.randn(1, 2),
        dynamic=dynamic,
    )


def test_slice_scatter4(dynamic):
    check(
        lambda a, b: aten.slice_scatter.default(a, b, 1, 2, 2**63 - 1, 3),
        torch.randn(1, 9),
        torch.randn(1, 3),
        dynamic=dynamic,
    )


def test_slice_scatter5(dynamic):
    # empty slices whose start or end must be clamped
    def f(a, b):
        return (
            aten.slice_scatter.default(a, b, 0, 2, 0, 1),
            aten.slice_scatter.default(a, b, 0, a.shape[0], a.shape[0] + 10, 1),
            aten.slice_scatter.default(a, b, 0, -20, 0, 1),
            aten.slice_scatter.default(a, b, 0, -20, -16, 1),
        )

    check(f, torch.arange(10, dtype=torch.float), torch.empty(0), dynamic=dynamic)


def test_as_strided_scatter(dynamic):
    def f(a, b):
        size, stride = (a.shape[0], a.shape[1] // 2), (a.shape[1], 2)
        return aten.as_strided_scatter(a * 8 + 10, b * 2 - 4, size=size, stride=stride, storage_offset=0)

    # aten's as_strided_scatter (no native lowering)
    check(f, torch.randn(10, 64), torch.randn(10, 32), dynamic=dynamic, native=False)


def test_invalid_operand_issue1(dynamic):
    # token ids assembled by nested slice/select scatters, then an embedding lookup
    def f(table, ids, shifted, first, other):
        inner = aten.slice_scatter.default(aten.slice.Tensor(ids, 0, 0, 2**63 - 1), shifted, 1, 1, 2**63 - 1)
        outer = aten.slice_scatter.default(ids, inner, 0, 0, 2**63 - 1)
        sel = aten.select_scatter.default(aten.slice.Tensor(outer, 0, 0, 2**63 - 1), first, 1, 0)
        full = aten.slice_scatter.default(outer, sel, 0, 0, 2**63 - 1)
        return [aten.embedding.default(table, full.view(-1, 16), 1), other]

    args = (
        torch.randn(50, 8),
        torch.randint(0, 50, (4, 16)),
        torch.randint(0, 50, (4, 15)),
        torch.randint(0, 50, (4,)),
        torch.randint(0, 50, (32,)),
    )
    check(f, *args, dynamic=dynamic)


def test_slice_scatter_reinplace(dynamic):
    # a key cache updated in place under no_grad, then read back
    lin = torch.nn.Linear(16, 16, bias=False)
    cache = torch.zeros(4, 24, 2, 16)

    def f(x, start: int, cache):
        b, n = x.shape[0], x.shape[1]
        xk = lin(x)
        with torch.no_grad():
            cache[:b, start : start + n] = xk
        keys = cache[:b, : start + n]
        return torch.matmul(xk.transpose(1, 2), keys.transpose(1, 2).transpose(2, 3))

    with torch.no_grad():
        check(f, torch.randn(1, 8, 2, 16), 1, cache, dynamic=dynamic, atol=1e-4, rtol=1e-4)
