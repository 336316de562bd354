"""Data-dependent (unbacked) sizes: graphs whose ops produce results of a size or value read from
tensor data (boolean-mask indexing, ``nonzero``, ``masked_select``, ``unique``, ``.item()``),
captured by Dynamo with ``capture_dynamic_output_shape_ops`` / ``capture_scalar_outputs``.

tilefuse compiles such a graph once: the data-dependent op runs as the aten op, the wrapper reads
the new size symbol (``u0``) from its result, and the kernels after it take that size as an
argument. Each test checks values against eager on several inputs, among them an empty result
(``u0 = 0``) and a full one, that Dynamo compiled one graph for all of them, that tilefuse
compiled it (no eager fallback, no per-shape specialization: the autouse fixture raises on
internal errors) and that only the data-dependent ops ran as aten ops.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import tilefuse  # noqa: F401
from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import backend, config, metrics

pytestmark = GPU_MARKS


@pytest.fixture(autouse=True)
def capture_data_dependent_ops():
    """Dynamo keeps data-dependent ops in the graph instead of breaking it there."""
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        yield


def _frames() -> int:
    """Graphs Dynamo compiled since the fixture's reset."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _check(fn, calls, *, frames=1, aten_ops=1, dynamic=None, atol=1e-5, rtol=1e-4):
    """Run ``torch.compile(fn)`` on each argument tuple of ``calls`` and compare with eager; then
    assert ``frames`` Dynamo graphs, tilefuse-compiled graphs only, generated kernels, and
    ``aten_ops`` fallback kernels (the data-dependent ops) in all."""
    cf = torch.compile(fn, backend="tilefuse", dynamic=dynamic)
    for args in calls:
        got, want = cf(*args), fn(*args)
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)  # mean of none: NaN
    assert _frames() == frames
    assert not torch._dynamo.utils.counters["graph_break"]
    assert metrics.generated_graph_count == frames and metrics.eager_graph_count == 0
    assert metrics.specialized_graph_count == 0
    assert metrics.generated_kernel_count >= frames
    assert metrics.fallback_kernel_count == aten_ops * frames


def test_boolean_mask_then_pointwise_and_softmax_over_the_masked_length():
    def f(x):
        return (x[x > 0] * 2).softmax(0)

    n = 40
    mixed = torch.randn(n)
    none = -torch.rand(n) - 0.1  # u0 = 0: an empty result
    every = torch.rand(n) + 0.1  # u0 = n
    _check(f, [(mixed,), (none,), (every,), (torch.randn(n),)])


def test_boolean_mask_under_dynamic_shapes():
    """A backed size (the input's length) and an unbacked one (the mask's count) in one graph."""

    def f(x):
        m = x[x.abs() > 0.5]
        return m.exp() / m.exp().sum(), x.sum()

    _check(f, [(torch.randn(10),), (torch.randn(37),), (torch.zeros(9),), (torch.ones(5),)], dynamic=True)
    assert metrics.symbolic_graph_count == 1


def test_masked_rows_through_layer_norm_and_a_matrix_product():
    def f(x, w):
        rows = x[x[:, 0] > 0]
        return F.layer_norm(rows, (8,)) @ w + 1

    w = torch.randn(8, 3)
    x = torch.randn(12, 8)
    _check(f, [(x, w), (-x.abs(), w), (x.abs() + 0.1, w)], aten_ops=1)
    assert metrics.extern_kernel_count == 1  # the product, over u0 rows


def test_masked_select_reductions():
    def f(x):
        m = x.masked_select(x > 0.3)
        return m.sum(), (m * m).mean(), m.view(-1, 1) * x[:4].view(1, -1)

    _check(f, [(torch.rand(64),), (torch.zeros(64),), (torch.rand(64) + 0.5,)])


def test_index_reduction_of_a_masked_result_with_a_logical_size_check():
    """argmin/argmax of a possibly empty masked result: the graph checks ``not (u0 == 0)`` (a
    ``sym_not`` of a size comparison) before the reduction; eager raises on an empty one."""

    def f(x):
        m = x[x > 0]
        return m.argmin(), m.argmax()

    _check(f, [(torch.randn(33),), (torch.rand(33) + 0.1,), (torch.randn(33),)])


def test_nonzero_coordinates_gather_and_scan():
    def f(x):
        idx = x.nonzero()
        vals = x[idx[:, 0], idx[:, 1]]
        return vals.cumsum(0), idx * 2 + 1

    _check(f, [(torch.randn(4, 5).relu(),), (torch.zeros(4, 5),), (torch.rand(4, 5) + 1,)])


def test_item_as_a_scalar_in_arithmetic():
    def f(x, t):
        k = t.item()
        return x * k + k, (x - k).sum()

    x = torch.randn(6)
    _check(f, [(x, torch.tensor(3)), (x, torch.tensor(-5)), (x, torch.tensor(11))])


def test_item_as_a_size_of_a_slice_and_an_arange():
    def f(x, t):
        n = t.item()
        torch._check(n >= 0)
        torch._check(n <= x.size(0))
        return x[:n] * n, torch.arange(n, device=DEVICE) * 2 + x.sum()

    x = torch.randn(10)
    # Dynamo's own guards specialize an .item() of 0 or 1 (a recompile that is not tilefuse's):
    # the values here are all >= 2, and the empty slice has a test of its own below
    _check(f, [(x, torch.tensor(4)), (x, torch.tensor(7)), (x, torch.tensor(10))], aten_ops=1)


def test_item_of_zero_gives_empty_results():
    def f(x, t):
        n = t.item()
        torch._check(n >= 0)
        torch._check(n <= x.size(0))
        return x[:n] + 1, torch.arange(n, device=DEVICE).float().sum()

    cf = torch.compile(f, backend="tilefuse")
    x = torch.randn(10)
    for n in (0, 3):
        got, want = cf(x, torch.tensor(n)), f(x, torch.tensor(n))
        torch.testing.assert_close(got, want)
    assert metrics.eager_graph_count == 0 and metrics.generated_kernel_count >= 1


def test_item_as_a_size_with_arithmetic_and_a_long_scan():
    """A size computed from an ``.item()`` value (``n // 2``), and a scan over a data-dependent
    length with no upper bound: the kernel loops over it (no persistent block can be sized)."""

    def f(t):
        n = t.item()
        torch._check(n >= 0)
        torch._check(n % 2 == 0)
        return torch.ones(n // 2, device=DEVICE).cumsum(0), torch.arange(n, device=DEVICE).float().cumsum(0)

    _check(f, [(torch.tensor(6),), (torch.tensor(3000),), (torch.tensor(8),)])


def test_unique_then_pointwise():
    def f(x):
        u, counts = torch.unique(x, return_counts=True)
        return u.float() / counts, u * 2

    _check(f, [(torch.randint(0, 4, (20,)),), (torch.zeros(20, dtype=torch.long),), (torch.arange(20),)])


def test_runtime_assertion_on_data_dependent_sizes_is_checked_by_the_wrapper(monkeypatch):
    """An assertion the ShapeEnv cannot prove from ranges (``2*u0 <= s0 + 1``) becomes a check
    in the generated code right after ``u0`` is bound: called directly (Dynamo's guards would
    otherwise stop a bad call first), the compiled graph raises as eager's ``_assert_scalar``."""
    compiled = []
    real = backend._compile

    def keep(*args, **kwargs):
        compiled.append(real(*args, **kwargs))
        return compiled[-1]

    monkeypatch.setattr(backend, "_compile", keep)

    def f(x, t):
        n = t.item()
        torch._check(n >= 0)
        torch.ops.aten._assert_scalar.default(n * 2 <= x.shape[0] + 1, "n is too large")
        return torch.arange(n, device=DEVICE) * 2

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    torch.testing.assert_close(cf(torch.randn(10), torch.tensor(3)), f(torch.randn(10), torch.tensor(3)))
    # the graph's inputs are t (a CPU scalar) and x's size: it runs on the arange's device
    (graph,) = compiled
    # the check, with the graph's message (or, where Dynamo already placed a runtime assertion
    # of the same expression, that one's)
    assert re.search(r"raise RuntimeError\(.*(n is too large|2\*u0 <= s\d+ \+ 1)", graph.source), graph.source
    torch.testing.assert_close(graph([torch.tensor(5), 10]), (torch.arange(5, device=DEVICE) * 2,))
    with pytest.raises(RuntimeError, match=r"n is too large|2\*u0 <= s\d+ \+ 1"):
        graph([torch.tensor(6), 10])


def test_data_dependent_graphs_skip_the_graph_cache():
    """The ranges and facts a compile used about an unbacked size are not in the graph's text:
    such a graph is compiled without the cache."""

    def f(x):
        return x[x > 0].sin()

    with config.patch(graph_cache=True):
        cf = torch.compile(f, backend="tilefuse")
        x = torch.randn(16)
        torch.testing.assert_close(cf(x), f(x))
    assert metrics.graph_cache_hits == 0 and metrics.generated_graph_count == 1


def test_a_lowering_that_needs_an_undecidable_size_fact_runs_as_the_aten_op():
    """``var`` over a masked length divides by ``max(u0 - 1, 0)``, which is not the same
    expression for every ``u0 >= 0``: that op declines and runs as the aten op, and the rest of
    the graph is still compiled (no guard can be taken on a data-dependent size)."""

    def f(x):
        m = x[x > 0]
        return m.var(), m * 3

    _check(f, [(torch.randn(32),), (torch.rand(32) + 0.1,)], aten_ops=2, atol=1e-5, rtol=1e-4)


def test_training_through_a_boolean_mask():
    """Forward and backward graphs: the backward scatters the masked gradient back (an index_put
    with the data-dependent count)."""

    def loss(x, w):
        return ((x[x.sum(1) > 0] @ w).tanh() ** 2).sum()

    cf = torch.compile(loss, backend="tilefuse")
    for x in (torch.randn(10, 4), -torch.rand(10, 4) - 0.1):
        w = torch.randn(4, 3)
        xs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
        ws = [w.clone().requires_grad_(), w.clone().requires_grad_()]
        got, want = cf(xs[0], ws[0]), loss(xs[1], ws[1])
        got.backward()
        want.backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(xs[0].grad, xs[1].grad)
        torch.testing.assert_close(ws[0].grad, ws[1].grad)
    assert metrics.eager_graph_count == 0 and metrics.specialized_graph_count == 0
    assert metrics.generated_graph_count == 2  # forward and backward


def test_padding_and_views_of_a_possibly_empty_masked_result():
    """``pad`` loads its input at a clamped index, which has no valid value when the input is
    empty (``u0 = 0``): the load is masked instead (before, the empty mask read out of bounds
    and crashed the interpreter). Slicing a data-dependent length gives new unbacked sizes
    (the slice's length and offset), bound from the aten view."""

    def f(x, y):
        m = x[x > 0]
        return F.pad(m, (1, 2), value=3.0), torch.cat([m, y]).sigmoid(), m[1:] * 2, m.flip(0)

    y = torch.randn(3)
    _check(f, [(torch.randn(10), y), (-torch.rand(10), y), (torch.tensor([1.0] + [-1.0] * 9), y)], aten_ops=2)


def test_gradient_of_a_slice_of_a_masked_result():
    """Forward and backward of a slice of a masked result, with empty, one-element and longer
    masks: the backward (which recomputes the mask from the saved input) scatters the slice's
    gradient into a buffer of the masked length and that into the input's gradient."""

    def loss(x):
        m = x[x > 0]
        return (m[1:] ** 2).sum() + m.sum()

    cf = torch.compile(loss, backend="tilefuse")
    for x in (torch.randn(12), -torch.rand(12), torch.tensor([2.0] + [-1.0] * 11)):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = cf(a), loss(b)
        got.backward()
        want.backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(a.grad, b.grad)
    assert metrics.eager_graph_count == 0 and metrics.specialized_graph_count == 0


def test_size_questions_about_an_unbacked_symbol_never_guard():
    """``SizeVars`` on a data-dependent symbol: the fallback hint clamped to its range, decisions
    only from facts true for every value (ranges, ``torch._check``), no ShapeEnv guard ever; an
    undecidable comparison raises, and the callers with a safe "no" get False."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from tilefuse.sizevars import DataDependentSizeError, SizeVars

    env = ShapeEnv()
    n = env.create_unbacked_symint()
    torch._check(n >= 0)
    sv = SizeVars(env)
    u = sv.size(n)
    assert sv.unbacked == {u.name} and sv.hint(u) == config.UNBACKED_SYMINT_FALLBACK
    assert sv.tensor_sizes([n, 3]) == [u, 3]  # may be 0: allowed for a data-dependent dim
    with pytest.raises(DataDependentSizeError):
        sv.evaluate_lt(u, 100)
    assert not sv.lt_or_false(u, 2**31 - 1) and not sv.equals_or_false(u, 100)
    assert sv.evaluate_lt(u, u + 1) and not sv.evaluate_equals(u, u + 1)  # proven, for every value
    torch._check(n <= 100)
    assert sv.evaluate_lt(u, 2**31 - 1)  # from the recorded fact
    assert not env.guards and not sv.guards

    m = env.create_unbacked_symint()
    torch._check(m <= 5)
    torch._check(m >= 2)
    v = sv.size(m)
    assert sv.hint(v) == 5 and v.symbol_kind == "size"  # clamped; proven >= 1


def test_a_checked_fact_about_a_data_dependent_size_is_checked_at_run_time():
    """``torch._check(n >= 2)`` narrows the symbol's range to ``[2, inf]``; that range must not be
    taken as proof of the check itself: a call that breaks it raises as eager's runtime assertion
    does, and a reduction over a possibly empty masked result raises for an empty one (torch's
    implied ``u0 >= 1``) instead of returning ``-inf``."""

    def h(x):
        y = x[x > 0]
        torch._check(y.shape[0] >= 2)
        return y * 2

    c = torch.compile(h, backend="tilefuse", fullgraph=True, dynamic=True)
    torch.testing.assert_close(c(torch.ones(4)), torch.full((4,), 2.0))
    with pytest.raises(RuntimeError, match="u0 >= 2"):
        c(torch.tensor([1.0, -1.0, -1.0]))

    g = torch.compile(lambda x: x[x > 0].amax(), backend="tilefuse", fullgraph=True)
    torch.testing.assert_close(g(torch.tensor([1.0, 2.0])), torch.tensor(2.0))
    with pytest.raises(RuntimeError, match="u0 >= 1"):
        g(torch.tensor([-1.0, -2.0]))
    assert metrics.eager_graph_count == 0


def test_nearest_upsampling_to_a_data_dependent_size():
    """``F.interpolate(size=n.item())``: an output size of a data-dependent symbol traces through
    torch's own kernel (the lowering's kernel would guard on the size) and matches eager."""

    def f(x, n):
        return F.interpolate(x.view(1, 1, 20), size=n.item(), mode="nearest")

    x = torch.arange(20.0)
    c = torch.compile(f, backend="tilefuse", fullgraph=True)
    for n in (7, 13):
        torch.testing.assert_close(c(x, torch.tensor(n)), f(x, torch.tensor(n)))
    assert metrics.eager_graph_count == 0
