"""Dynamic shapes: graphs with symbolic sizes compiled once for every size (issue 5).

Each test compiles with Dynamo's dynamic shapes (``dynamic=True``, ``mark_dynamic`` or automatic
dynamic after a shape change), runs several sizes — primes, sizes crossing block boundaries — and
checks the results against eager and that Dynamo did not recompile (its ``unique_graphs`` counter)
and tilefuse did not fall back to per-shape compiles (``metrics.specialized_graph_count``).
Dynamo specializes sizes 0 and 1 (a size-1 input gets its own graph), which is Dynamo's policy,
not the backend's.
"""

from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.nn.functional as F

import tilefuse  # noqa: F401
from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import config, metrics
from tilefuse import symbolic as S
from tilefuse.sizevars import SizeVars

pytestmark = GPU_MARKS


def _frames() -> int:
    """Graphs Dynamo compiled since the last reset (one per (re)compile)."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _close(got, want, atol=1e-5, rtol=1e-4):
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


def test_one_compile_serves_many_sizes():
    def f(x, w):
        y = F.layer_norm(x, (x.shape[-1],))
        return (y @ w).relu().view(-1, 8).sum(0), torch.softmax(x * x.shape[1], -1)

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    # primes, a row count crossing the 1024/4096-element blocks, rows of odd lengths
    for b, t, d in [(3, 5, 16), (7, 13, 16), (2, 31, 24), (37, 129, 40), (5, 3, 8)]:
        x, w = torch.randn(b, t, d), torch.randn(d, 32)
        for got, want in zip(cf(x, w), f(x, w)):
            _close(got, want)
    assert _frames() == 1
    assert metrics.symbolic_graph_count == 1 and metrics.specialized_graph_count == 0


def test_size_one_is_dynamos_specialization_and_other_sizes_reuse_the_graph():
    cf = torch.compile(lambda x: (x.sin() + 1).sum(1), backend="tilefuse", dynamic=True)
    for n in (5, 1, 9, 1, 2):
        x = torch.randn(n, 6)
        _close(cf(x), (x.sin() + 1).sum(1))
    assert _frames() == 2  # the symbolic graph, and Dynamo's specialization for size 1


def test_looped_reduction_over_symbolic_rows():
    # a row length with no proven bound: a looped reduction whose loop bound is a kernel argument
    cf = torch.compile(lambda x: (x.amax(-1), x.mean(-1), x.var(-1)), backend="tilefuse", dynamic=True)
    for r in (3, 500, 2049, 5000):
        x = torch.randn(6, r)
        for got, want in zip(cf(x), (x.amax(-1), x.mean(-1), x.var(-1))):
            _close(got, want)
    assert _frames() == 1 and metrics.specialized_graph_count == 0


def test_automatic_dynamic_after_a_shape_change():
    f = lambda x, y: (x + y).relu() * 2  # noqa: E731
    cf = torch.compile(f, backend="tilefuse")
    for n in (4, 6, 9, 11, 17):
        x, y = torch.randn(n, 33), torch.randn(33)
        _close(cf(x, y), f(x, y))
    # static first graph, then one graph with a symbolic size for every later shape
    assert _frames() == 2
    assert metrics.symbolic_graph_count == 1 and metrics.specialized_graph_count == 0


def test_mark_dynamic():
    f = lambda x: torch.cumsum(x, 0) + x.sum(0)  # noqa: E731  - a scan over a static row length
    cf = torch.compile(f, backend="tilefuse")
    for n in (3, 8, 21):
        x = torch.randn(5, n)
        torch._dynamo.mark_dynamic(x, 1)
        _close(cf(x), f(x))
    assert _frames() == 1 and metrics.symbolic_graph_count == 1 and metrics.fallback_kernel_count == 0


def test_reshape_between_symbolic_shapes():
    def f(x):
        a, b, _ = x.shape
        y = x.reshape(a * b, 64) * 3
        z = y.reshape(a, b * 64).cos()
        return z.reshape(a, b, 64) + y.view(a, b, 64).sum(1, keepdim=True)

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for a, b in [(3, 5), (4, 9), (2, 2), (7, 3)]:
        x = torch.randn(a, b, 64)
        _close(cf(x), f(x))
    assert _frames() == 1 and metrics.specialized_graph_count == 0


def test_symbolic_sizes_as_values_and_slices():
    def f(x):
        n = x.shape[0]
        return x[1:] * n + torch.arange(n - 1, device=x.device).unsqueeze(1), x[:-2].sum(0) / n

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (4, 11, 30):
        x = torch.randn(n, 5)
        for got, want in zip(cf(x), f(x)):
            _close(got, want)
    assert _frames() == 1 and metrics.specialized_graph_count == 0


class MLP(torch.nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(x + self.fc2(F.gelu(self.fc1(x))))


def _train_step_matches(model, make_batch, sizes, atol=1e-5, rtol=1e-4):
    ref = copy.deepcopy(model)
    cm = torch.compile(model, backend="tilefuse", dynamic=True)
    for sz in sizes:
        args = make_batch(*sz)
        model.zero_grad()
        ref.zero_grad()
        loss, rloss = cm(*args), ref(*args)
        loss.backward()
        rloss.backward()
        _close(loss, rloss, atol, rtol)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")


def test_float_of_symbolic_sizes_stays_symbolic():
    """A ``SymFloat`` computed from sizes (``torch.sym_float``, ``/`` of sizes) is computed in the
    kernels from their size arguments (``sizevars.SymbolicFloat``): cross-entropy with label
    smoothing (``0.1 / sym_float(classes)``), forward and backward, a value scaled by
    ``rows / cols`` and ``torch.full`` with a float of sizes as its fill (a float tensor, as in
    eager), for several row and class counts, compile once and give eager's values and dtypes."""

    def ce(a, t):
        return F.cross_entropy(a, t, label_smoothing=0.1)

    def scaled(x):
        return (
            x * (x.shape[0] / x.shape[1]) - torch.sym_float(x.shape[1]) * 0.5,
            x + torch.full((x.shape[1],), x.shape[0] / 3, device=x.device),  # a float fill: float32
            torch.full((3,), float(x.shape[0]), device=x.device),
        )

    cce = torch.compile(ce, backend="tilefuse", dynamic=True)
    cscaled = torch.compile(scaled, backend="tilefuse", dynamic=True)
    for rows, classes in ((5, 37), (9, 37), (13, 100), (6, 7)):
        a = torch.randn(rows, classes, device=DEVICE, requires_grad=True)
        t = torch.randint(0, classes, (rows,), device=DEVICE)
        a2 = a.detach().clone().requires_grad_(True)
        got, want = cce(a, t), ce(a2, t)
        got.backward()
        want.backward()
        _close(got, want)
        _close(a.grad, a2.grad)
        x = torch.randn(rows, classes, device=DEVICE)
        for got, want in zip(cscaled(x), scaled(x)):
            assert got.dtype == want.dtype
            _close(got, want)
        xb = x.to(torch.bfloat16)  # bfloat16 + a float32 fill is float32, as in eager
        for got, want in zip(cscaled(xb), scaled(xb)):
            assert got.dtype == want.dtype
            _close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    assert metrics.specialized_graph_count == 0 and metrics.symbolic_graph_count >= 3  # ce fwd + bwd, scaled


def test_mlp_training_with_dynamic_batch():
    torch.manual_seed(0)
    m = MLP()

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x, y):
            return F.mse_loss(self.m(x), y)

    _train_step_matches(Loss(), lambda b: (torch.randn(b, 32), torch.randn(b, 32)), [(3,), (17,), (64,), (5,)])
    assert _frames() == 1
    assert metrics.symbolic_graph_count == 2 and metrics.specialized_graph_count == 0  # forward + backward


def test_transformer_block_training_with_dynamic_batch_and_sequence():
    from test_backend_models import Block

    torch.manual_seed(0)
    m = Block(T=16)
    # (Dynamo's own trace of ``mask[:T, :T]`` guards T != 16, the mask's length: T stays below it)
    _train_step_matches(
        m, lambda b, t: (torch.randint(0, 11, (b, t)), torch.randint(0, 11, (b, t))), [(2, 8), (3, 5), (4, 13), (2, 11)]
    )
    assert _frames() == 1
    assert metrics.symbolic_graph_count == 2 and metrics.specialized_graph_count == 0
    assert metrics.fallback_kernel_count == 0


def test_graph_that_cannot_be_symbolic_is_specialized_and_logged(caplog):
    # a lowering that declines symbolic sizes (as_strided of a computed value: it cannot prove
    # the view's reads in range) runs as the aten op, and everything else stays symbolic
    g = lambda x: torch.as_strided(x.exp(), (2, 2), (1, 2)) * 2  # noqa: E731
    cf = torch.compile(g, backend="tilefuse", dynamic=True)
    for n in (3, 8, 21):
        x = torch.randn(4, n)
        _close(cf(x), g(x))
    assert _frames() == 1 and metrics.specialized_graph_count == 0 and metrics.fallback_kernel_count > 0
    f = lambda x: torch.cumsum(x.exp(), 1) * 2  # noqa: E731
    # with symbolic shapes off, the graph is compiled per input shape (logged), still one Dynamo frame
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    metrics.reset()
    with config.patch(symbolic_shapes=False), caplog.at_level(logging.INFO, logger="tilefuse"):
        cf = torch.compile(f, backend="tilefuse", dynamic=True)
        for n in (3, 8):
            x = torch.randn(4, n)
            _close(cf(x), f(x))
    assert _frames() == 1 and metrics.symbolic_graph_count == 0
    assert any("per input shape" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------ SizeVars


def _shape_env_with(*hints):
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    syms = [
        env.create_symintnode(env.create_symbol(h, ConstantSource(f"n{i}"), dynamic_dim=DimDynamic.DYNAMIC), hint=h)
        for i, h in enumerate(hints)
    ]
    return env, syms


def test_sizevars_converts_with_ranges_and_hints():
    env, (a, b) = _shape_env_with(6, 10)
    sv = SizeVars(env)
    e = sv.size(a * b + 2 * a)
    assert isinstance(e, S.Expr) and sv.hint(e) == 72
    s0 = sv.size(a)
    assert s0.assumed_range[0] == 2  # Dynamo's backed sizes are >= 2
    assert sv.statically_known_lt(1, s0) and not sv.statically_known_lt(3, s0)
    assert sv.size(7) == 7 and sv.hint(7) == 7
    assert sv.to_sympy(e) == (a * b + 2 * a).node.expr


def test_sizevars_guards_what_it_cannot_prove():
    env, (a, b) = _shape_env_with(6, 10)
    sv = SizeVars(env)
    x, y = sv.size(a), sv.size(b)
    assert sv.evaluate_lt(x, y)  # 6 < 10 only at the hints: a guard
    assert sv.evaluate_lt(x, x + 1)  # proven: no guard
    assert not sv.evaluate_equals(x * 2, y)
    assert len(sv.guards) == 2
    # the guards are the ShapeEnv's now: its guard expressions hold at the hints and not elsewhere
    guards = [g.expr for g in env.guards]
    assert guards and all(bool(g.subs({a.node.expr: 6, b.node.expr: 10})) for g in guards)
    assert not all(bool(g.subs({a.node.expr: 12, b.node.expr: 10})) for g in guards)
    with pytest.raises(ValueError, match="differ"):
        sv.guard_equals(x, y)


def test_sizevars_decides_each_relation_once_per_shape_env():
    """A decision is taken (and its ShapeEnv guard evaluated, ~10 ms) once per ShapeEnv: a second
    SizeVars of the same ShapeEnv (a backward graph), whose native symbols may carry narrower
    ranges than the forward's, reuses it, records it among the guards its graph relies on
    (``guard_exprs``, replayed by the graph cache) and adds no guard; ``b == a`` is ``a == b``."""
    env, (a, b) = _shape_env_with(6, 10)
    sv = SizeVars(env)
    x, y = sv.size(a), sv.size(b)
    assert not sv.evaluate_equals(x * 2, y) and sv.evaluate_lt(x, y)
    assert not sv.evaluate_equals(y, x * 2)  # the other order: the same decision
    assert len(sv.guards) == 2 and len(sv.guard_exprs) == 2  # each decision listed once
    n = len(env.guards)
    bw = SizeVars(env)
    bx, by = bw.size(a), bw.size(b)
    assert not bw.evaluate_equals(by, bx * 2) and bw.evaluate_lt(bx, by)
    assert bw.guards == [] and len(env.guards) == n  # no new ShapeEnv guard
    assert [str(g) for g in bw.guard_exprs] == [str(g) for g in sv.guard_exprs]


def test_sizevars_all_below_guards_only_the_largest_sizes():
    """``evaluate_all_lt``: sizes another one bounds (``s0 <= s0*s1``) need no guard of their own,
    in the same call or once a larger one was decided for this ShapeEnv; every size is still
    below the bound at the hints, and a static size over the bound answers False."""
    env, (a, b) = _shape_env_with(6, 10)
    sv = SizeVars(env)
    x, y = sv.size(a), sv.size(b)
    assert sv.evaluate_all_lt([x, x * y, 4, y, x * y * 3], 2**31 - 1)
    assert [str(g) for g in sv.guards] == [f"{sv.to_sympy(x * y * 3)} < 2147483647"], sv.guards
    bw = SizeVars(env)
    assert bw.evaluate_all_lt([bw.size(a) * 2, bw.size(b)], 2**31 - 1)  # bounded by the decided one
    assert bw.guards == [] and len(bw.guard_exprs) == 1
    assert not sv.evaluate_all_lt([x, 2**31], 2**31 - 1)
    assert not sv.evaluate_all_lt([x * 2**29], 2**31 - 1)  # 6 * 2**29 >= 2**31 - 1 at the hints


def test_a_power_of_a_size_symbol_stays_symbolic():
    """A cube input's dims share one symbol ``s`` (Dynamo's duck shaping), so a view's size
    ``numel // (d1 * d2)`` reaches the graph as ``s ** 3`` (``operator.pow`` on SymInts). It is size
    arithmetic like ``*`` and ``//``, not a reason to compile per shape (were the ``pow`` node
    refused as a fallback with a SymInt output, four sizes would take five per-shape compiles)."""

    def f(x):
        y = x.reshape(-1)
        return y.view(y.shape[0] // (x.shape[1] * x.shape[2]), x.shape[1], -1) * 2

    torch._dynamo.reset()
    metrics.reset()
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (4, 5, 3):
        x = torch.randn(n, n, n, device=DEVICE, requires_grad=True)
        got = cf(x)
        torch.testing.assert_close(got, f(x))
        got.sum().backward()
        torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))
    assert metrics.specialized_graph_count == 0 and metrics.symbolic_graph_count == 2  # forward, backward
    assert metrics.generated_graph_count == 2


def _slice_by_data_count(x, m):
    n = int((m > 0).sum().item())
    return x[:n].exp() * 2, x.sum()


def _run_slice_by_data_count(cf) -> list[str]:
    """Calls ``cf`` (``_slice_by_data_count`` compiled) at several sizes, checking results and
    gradients against eager; returns tilefuse's warnings about running a graph eagerly."""
    import warnings

    with (
        torch._dynamo.config.patch(capture_scalar_outputs=True),
        config.patch(fallback_on_error=True),
        warnings.catch_warnings(record=True) as w,
    ):
        warnings.simplefilter("always")
        for r in (5, 6, 7, 5):
            g = torch.Generator().manual_seed(r)
            x = torch.randn(r, 3, generator=g, device="cpu").to(DEVICE).requires_grad_(True)
            m = torch.randn(r, generator=g, device="cpu").to(DEVICE)
            got, want = cf(x, m), _slice_by_data_count(x, m)
            torch.testing.assert_close(got, want)
            got[0].sum().backward()
            gx = x.grad.clone()
            x.grad = None
            want[0].sum().backward()
            torch.testing.assert_close(gx, x.grad)
    return [str(i.message) for i in w if "tilefuse" in str(i.message) and "eagerly" in str(i.message)]


def test_a_data_dependent_size_compiles_once_for_every_shape():
    """A slice by a count read from the data (``capture_scalar_outputs``: an unbacked size,
    ``tests/test_unbacked.py``) beside dynamic sizes: forward and backward compile once,
    symbolically, with no warning; results and gradients match eager."""
    torch._dynamo.reset()
    metrics.reset()
    failures = _run_slice_by_data_count(torch.compile(_slice_by_data_count, backend="tilefuse", dynamic=True))
    assert not failures, failures
    assert metrics.eager_graph_count == 0 and metrics.specialized_graph_count == 0
    assert metrics.symbolic_graph_count == 2  # forward and backward


def test_a_graph_failing_for_every_shape_runs_eagerly_after_one_warning(monkeypatch):
    """A graph whose symbolic compile fails and whose per-shape compile fails too (here every
    compile is made to fail) runs eagerly after one warning, and later shapes reuse the eager graph without another attempt or warning
    (not one failed compile and one warning per new shape). Results and gradients match eager."""
    from tilefuse import backend

    def fail(*args, **kwargs):
        raise NotImplementedError("refused for the test")

    monkeypatch.setattr(backend, "_compile", fail)
    torch._dynamo.reset()
    metrics.reset()
    failures = _run_slice_by_data_count(torch.compile(_slice_by_data_count, backend="tilefuse", dynamic=True))
    # one warning per graph (the forward's and the backward's), for three sizes
    assert len(failures) == 2 and "forward" in failures[0] and "backward" in failures[1], failures
    assert metrics.eager_graph_count == 2 and metrics.specialized_graph_count == 2


# ops whose lowerings take symbolic sizes (indexing, pooling, padding, flips, repeats, losses):
# each compiled once with dynamic=True, checked at several sizes, no per-shape specialization
_OPS = {
    "avg_pool": (lambda x: F.avg_pool2d(x, 2, ceil_mode=True), lambda n: (torch.randn(2, 3, n, n + 3),)),
    "max_pool": (lambda x: F.max_pool2d(x, 3, 2, 1), lambda n: (torch.randn(2, 3, n, n + 3),)),
    "pad": (lambda x: F.pad(x, (1, 2)) * 2, lambda n: (torch.randn(3, n),)),
    "flip_roll": (lambda x: torch.flip(x, [1]) + torch.roll(x, 2, 1), lambda n: (torch.randn(3, n),)),
    "repeat": (lambda x: x.repeat(2, 3) + 1, lambda n: (torch.randn(3, n),)),
    "interpolate": (
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        lambda n: (torch.randn(1, 2, n, n + 3),),
    ),
    "gather_index_select": (
        lambda x, i: torch.gather(x, 1, i) + x.index_select(1, i[0]).sum(),
        lambda n: (torch.randn(3, n), torch.randint(0, n, (3, 4))),
    ),
    "embedding": (
        lambda w, i: F.embedding(i, w).sum(1),
        lambda n: (torch.randn(n, 6), torch.randint(0, n, (4, n + 3))),
    ),
    "cat_select": (lambda x: torch.cat([x, x[:, -1:] * 2], 1).relu() + x[0, 0], lambda n: (torch.randn(3, n),)),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t), lambda n: (torch.randn(n, 7), torch.randint(0, 7, (n,)))),
    "argmax_var": (lambda x: x.argmax(1) + x.var(0).sum(), lambda n: (torch.randn(n, 6),)),
}


@pytest.mark.parametrize("name", sorted(_OPS))
def test_op_lowerings_with_symbolic_sizes(name):
    f, make = _OPS[name]
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (5, 11, 12):
        args = make(n)
        _close(cf(*args), f(*args))
    assert metrics.symbolic_graph_count >= 1 and metrics.specialized_graph_count == 0
    assert metrics.fallback_kernel_count == 0


# view ops whose output sizes are arithmetic on a symbolic size (a chunk count, a diagonal's
# length, a window count): taken from the FX meta value (``lowering.views._meta_output_sizes``)
_VIEW_OPS = {
    "split": lambda x: [t * 2 for t in x.split(3, 1)],
    "split_returned": lambda x: x.split(4, 0),
    "chunk": lambda x: [t + 1 for t in x.chunk(2, 0)],
    "split_with_sizes": lambda x: [t * 3 for t in x.split_with_sizes([2, x.shape[1] - 2], 1)],
    "diagonal": lambda x: (x.diagonal() * 2, x.diagonal(1), (x + 1).diagonal(-2)),
    "unfold": lambda x: (x.unfold(1, 3, 2) * 2, x.unfold(0, 2, 1).sum(-1)),
}


@pytest.mark.parametrize("name", sorted(_VIEW_OPS))
def test_view_lowerings_with_symbolic_output_sizes(name):
    """split, chunk, diagonal and unfold of symbolic sizes are lazy views, not aten fallback
    kernels (a lowering computing their sizes with ``min``/``range`` cannot take symbolic sizes):
    one graph for every size, eager's values and strides."""
    f = _VIEW_OPS[name]
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n, m in ((6, 8), (9, 7), (11, 13), (8, 8)):
        x = torch.randn(n, m)
        got, want = cf(x), f(x)
        assert len(got) == len(want)
        for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
            _close(g, w)
            assert g.stride() == w.stride(), (g.stride(), w.stride())
    assert metrics.symbolic_graph_count >= 1 and metrics.specialized_graph_count == 0
    assert metrics.fallback_kernel_count == 0


def test_scans_over_symbolic_rows_loop_with_a_carry():
    """cumsum / cumprod / logcumsumexp over a row of symbolic length (no proven bound) loop over
    chunks with a per-row carry: one graph for every length, no fallback to the aten kernels."""
    f = lambda x: (x.cumsum(1), (x * 1e-3 + 1).cumprod(1), torch.logcumsumexp(x, 1), x.cumsum(0))  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (7, 700, 2500, 4500):
        x = torch.randn(3, n)
        for got, want in zip(cf(x), f(x)):
            _close(got, want, atol=1e-4, rtol=1e-4)
    assert _frames() == 1 and metrics.specialized_graph_count == 0
    assert metrics.fallback_kernel_count == 0


def test_integer_arguments_of_any_sign_stay_symbolic():
    # dynamic=True makes an int argument a symbol whose range includes 0 and negatives: it enters
    # the IR with that range (kind "other"), so no proof takes it for a size; tensor dims built
    # from it are guarded >= 1 (x.view(-1, k)), and values computed from it are exact for k <= 0
    f = lambda x, k: x * k + x.sum(0) - torch.arange(3, device=x.device) * k  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n, k in ((5, 3), (7, -2), (9, 0), (4, -7)):
        x = torch.randn(n, 3)
        _close(cf(x, k), f(x, k))
    g = lambda x, k: x.view(-1, k).sum(1)  # noqa: E731
    cg = torch.compile(g, backend="tilefuse", dynamic=True)
    for n, k in ((12, 3), (20, 4), (30, 5)):
        x = torch.randn(n)
        _close(cg(x, k), g(x, k))
    assert metrics.symbolic_graph_count == 2 and metrics.specialized_graph_count == 0


def test_transposed_access_is_tiled_with_symbolic_extents(tmp_path):
    # a + b.t() reads one operand along the outer dim: a 2-D [YBLOCK, XBLOCK] tile whose extents
    # are kernel arguments (codegen/simd.py); one compile for every shape
    f = lambda a, b: a + b.t()  # noqa: E731
    with config.patch(debug_dir=str(tmp_path)):
        cf = torch.compile(f, backend="tilefuse", dynamic=True)
        for m, n in ((33, 40), (50, 70), (129, 65)):
            a, b = torch.randn(m, n), torch.randn(n, m)
            _close(cf(a, b), f(a, b))
    assert _frames() == 1 and metrics.symbolic_graph_count == 1 and metrics.specialized_graph_count == 0
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert "YBLOCK" in src and "('YBLOCK', 'ynumel')" in src  # a tile, its extent a kernel argument


def test_compound_divisors_are_precomputed_on_the_host(tmp_path):
    # a permute of [s0, s1, s2] read by a 1-D kernel: xindex // (s0*s1) and xindex % (s0*s1); the
    # product is a ps<i> argument the wrapper computes once (Inductor's precomputed sizes)
    f = lambda x: x.permute(2, 0, 1).contiguous() * 2  # noqa: E731
    with config.patch(debug_dir=str(tmp_path), tiling=False):
        cf = torch.compile(f, backend="tilefuse", dynamic=True)
        for shape in ((3, 4, 5), (2, 7, 3), (5, 3, 9), (17, 2, 3)):
            x = torch.randn(*shape)
            _close(cf(x), f(x))
    assert _frames() == 1 and metrics.symbolic_graph_count == 1 and metrics.specialized_graph_count == 0
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert "ps0" in src and "// ps0" in src and "% ps0" in src
    assert "ks0*ks1)" not in src and "(ks1*ks2)" not in src  # no lane recomputes the product


def test_few_long_symbolic_rows_are_split_with_a_masked_tail():
    # a full reduction of a symbolic-size tensor runs as partials over CeilDiv(n, s) chunks (the
    # tail masked to the identity) plus a final reduction: two kernels, exact for every size
    def f(x):
        return x.sum(), x.amax(), (x > 2).any(), x.to(torch.int32).amin()

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (5001, 6007, 8195, 16384):  # 2·n > config.SPLIT_MAX_UNSPLIT_INNER: split
        x = torch.randn(2, n)
        x[1, -1] = 9.0  # the last element (in the tail chunk) is the max
        got = cf(x)
        for g, w in zip(got, f(x)):
            _close(g, w, atol=1e-3, rtol=1e-4)
    assert _frames() == 1 and metrics.symbolic_graph_count == 1 and metrics.specialized_graph_count == 0
    assert metrics.generated_kernel_count == 2  # partials (all four reductions), then the final


def test_split_of_a_static_odd_row_length_under_a_symbolic_row_count():
    # rows symbolic, row length static and not a multiple of the split count: the split must not
    # drop the row's tail (softmax's max is such a split reduction)
    fs = (lambda x: x.sum(1), lambda x: x.amax(1), lambda x: F.softmax(x, -1), lambda x: torch.logsumexp(x, -1))
    for f in fs:
        torch._dynamo.reset()
        cf = torch.compile(f, backend="tilefuse")
        for r in (2, 3):
            x = torch.randn(r, 8195)  # split (sum, amax) or chunked (softmax, logsumexp): 4 x 2049
            x[:, -1] = 120.0  # every row's maximum is its last element
            torch._dynamo.mark_dynamic(x, 0)
            _close(cf(x), f(x), atol=1e-3, rtol=1e-4)


def test_negative_symbolic_slice_and_select_bounds_count_from_the_end():
    # x[-n:], x[:-n], x[n - 8:] (negative at small n), x[-n], slice assignment and its backward
    def f(x, y):
        n = y.shape[0]
        return x[-n:] * 2, x[:-n] + 1, x[n - 8 :], x[-n], x.select(0, -n)

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for m, n in ((10, 3), (12, 5), (9, 2)):
        x, y = torch.randn(m, 4), torch.randn(n)
        for got, want in zip(cf(x, y), f(x, y)):
            assert got.shape == want.shape
            _close(got, want)

    def g(x, y):
        x = x.clone()
        x[:, -y.shape[0] :] = 7.0
        return x

    cg = torch.compile(g, backend="tilefuse", dynamic=True)
    for n in (2, 3, 5):
        x, y = torch.randn(4, 9), torch.randn(n)
        _close(cg(x, y), g(x, y))

    def h(x, y):
        return (x[-y.shape[0] :] * y).sum()

    ch = torch.compile(h, backend="tilefuse", dynamic=True)
    for m, n in ((6, 2), (9, 4)):
        x = torch.arange(float(m)).requires_grad_()
        y = torch.ones(n)
        ch(x, y).backward()
        want = torch.zeros(m)
        want[-n:] = 1
        _close(x.grad, want)
    assert metrics.specialized_graph_count == 0


def test_symbolic_pad_amounts_and_dtype_views():
    f = lambda x: F.pad(x, (0, (-x.shape[-1]) % 8)) * 2 + 1  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (5, 11, 16):
        x = torch.randn(3, n)
        _close(cf(x), f(x))
    assert metrics.specialized_graph_count == 0
    # Tensor.view(dtype) is a bitcast: it runs as the aten op (the graph still compiles)
    g = lambda x: x.view(torch.int32) + 1  # noqa: E731
    x = torch.randn(3, 5)
    torch.testing.assert_close(torch.compile(g, backend="tilefuse")(x), g(x))


def test_symbolic_reshape_of_a_lazy_value_indexes_by_dimension_groups(tmp_path):
    # [a, b, 64] -> [a*b, 64] -> [a, b*64] of computed (unstored) values: matched by dimension
    # groups (nodes.reshape_groups), the kernel reads its input at xindex itself, where digits of
    # the flat position would leave nested symbolic ModularIndexing the simplifier cannot remove
    def f(x):
        a, b, _ = x.shape
        return ((x * 3).reshape(a * b, 64) + 1).reshape(a, b * 64).sin()

    with config.patch(debug_dir=str(tmp_path)):
        cf = torch.compile(f, backend="tilefuse", dynamic=True)
        for a, b in ((3, 5), (4, 9)):
            x = torch.randn(a, b, 64)
            _close(cf(x), f(x))
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert "tl.load(in_ptr0 + (xindex), xmask" in src
    assert _frames() == 1 and metrics.specialized_graph_count == 0


def test_transformers_gpt2_training_with_dynamic_batch_and_sequence(caplog):
    # transformers' GPT-2 passes logits_to_keep=0 (an int argument of any sign under dynamic=True)
    transformers = pytest.importorskip("transformers")
    caplog.set_level(logging.INFO, logger="tilefuse")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=1,
        n_head=2,
        n_embd=32,
        vocab_size=64,
        n_positions=64,
        attn_pdrop=0.0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    m = transformers.GPT2LMHeadModel(cfg).to(DEVICE).train()
    ref = copy.deepcopy(m)
    cm = torch.compile(m, backend="tilefuse", dynamic=True)
    for b, t in ((2, 5), (3, 17), (2, 30)):
        ids = torch.randint(0, 64, (b, t))
        m.zero_grad()
        ref.zero_grad()
        loss, rloss = cm(ids, labels=ids).loss, ref(ids, labels=ids).loss
        loss.backward()
        rloss.backward()
        _close(loss, rloss)
        for (name, p), q in zip(m.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=lambda msg: f"{name}: {msg}")
    assert metrics.symbolic_graph_count > 0 and metrics.specialized_graph_count == 0, [
        r.getMessage() for r in caplog.records if "per input shape" in r.getMessage()
    ]


@pytest.mark.parametrize("order", ["tensor_first", "float_first"])
def test_python_float_made_dynamic_scales_a_softmax(order):
    """Under ``dynamic=True`` Dynamo passes a Python float as a 0-d CPU float64 tensor: on a CUDA
    graph the call copies it to the device before a kernel reads it (a kernel cannot read host
    memory), and the graph's device is the CUDA one even when the float comes first. Two values
    through one compiled graph, both equal to eager's."""
    x = torch.randn(8, 33)

    def f(x, s):
        return torch.softmax(x * s, -1)

    fn = (lambda x, s: f(x, s)) if order == "tensor_first" else (lambda s, x: f(x, s))
    compiled = torch.compile(fn, backend="tilefuse", dynamic=True)
    for s in (0.5, 3.7):
        out = compiled(x, s) if order == "tensor_first" else compiled(s, x)
        torch.testing.assert_close(out, f(x, s))
    assert metrics.eager_graph_count == 0


def test_host_scalar_inputs_of_a_cuda_graph_are_copied_to_it():
    """Lowered with fake CUDA inputs (no GPU needed): the 0-d CPU input is read as a device
    tensor and the generated call copies it to the device first; a CPU graph copies nothing."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.codegen.wrapper import WrapperCodegen
    from tilefuse.graph import GraphLowering
    from tilefuse.ir import graph_context as G
    from tilefuse.scheduler import schedule

    def f(s, x):
        return torch.softmax(x * s, -1)

    for dev, copied in (("cuda", True), ("cpu", False)):
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            s = mode.from_tensor(torch.tensor(0.5, dtype=torch.float64, device="cpu"))
            x = torch.empty(8, 33, device=dev)
            gm = make_fx(f)(s, x)
            g = GraphLowering(gm, [s, x], "host_scalar")
            g.run()
            with G.set_graph(g):
                src = WrapperCodegen(g, schedule(g.buffers)).generate()
        src = src if isinstance(src, str) else src[0]
        assert g.default_device.type == dev
        assert (g.host_scalar_inputs == ["arg0"]) == copied
        assert ("arg0 = arg0.to(_device)" in src) == copied


def test_factory_without_a_device_in_a_cuda_graph_runs_as_aten():
    """``aten.full`` called without a device makes a CPU tensor in eager (the default device applies
    to torch's Python factories only): in a graph of CUDA inputs (fake, no GPU needed) it is not a
    CUDA kernel of the graph but its aten kernel, whose result stays on the CPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.graph import GraphLowering

    def f(x):
        return torch.ops.aten.full.default([2, 3], 1.0, dtype=torch.float32), x * 2

    with FakeTensorMode():
        x = torch.empty(4, device="cuda")
        gm = make_fx(f)(x)
        g = GraphLowering(gm, [x], "factory_device")
        g.run()
    assert [op for op in g.fallback_ops if "full" in op], g.fallback_ops


def test_a_size_used_as_a_bfloat16_value():
    """A symbolic size used as data of a bfloat16 tensor (``full`` with a SymInt fill value, a size
    times a tensor): the kernel builds it from the size argument, where the interpreter has no
    bfloat16 scalar constructor (it goes through float32, exact for sizes below 2**24)."""
    fill = torch.compile(lambda x: torch.full((3,), x.shape[0], dtype=torch.bfloat16), backend="tilefuse", dynamic=True)
    scale = torch.compile(lambda x: x * x.shape[0] + x.shape[1], backend="tilefuse", dynamic=True)
    for n in (5, 7, 300):
        x = torch.rand(n, 3, dtype=torch.bfloat16) + 1  # positive: no cancellation in x * n + 3
        torch.testing.assert_close(fill(x), torch.full((3,), n, dtype=torch.bfloat16), atol=0, rtol=0)
        torch.testing.assert_close(scale(x), x * n + 3)
    assert metrics.symbolic_graph_count == 2 and metrics.specialized_graph_count == 0


def test_symbolic_scalar_arithmetic_divides_natively():
    """``linspace`` with a symbolic end: the step is computed from the SymInt in float64 tensor
    ops, a ``true_divide`` among them, which lowers as ``div`` (it ran as an aten kernel)."""
    f = lambda x, end: torch.linspace(-2.0, end, 50, device=x.device) + x  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for end in (-3, 4, 11):
        x = torch.randn(50)
        _close(cf(x, end), f(x, end))
    assert metrics.fallback_kernel_count == 0 and metrics.generated_graph_count >= 1
    assert metrics.specialized_graph_count == 0


def test_floor_division_of_a_negative_symbolic_int():
    """A Python int argument is a symbol under dynamic=True and may be negative: ``n // 2`` and
    ``n % 3`` in the kernel floor as Python does, also where the kernel's size parameters are
    Python ints (constexprs under Triton's interpreter, whose ``//`` already floors)."""
    f = lambda x, n: x * (n // 2) + n % 3 + (n - 7) // -4  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (3, -3, -5, 8, -8):
        x = torch.arange(10) - 4
        torch.testing.assert_close(cf(x, n), f(x, n), atol=0, rtol=0)
    assert metrics.symbolic_graph_count >= 1 and metrics.specialized_graph_count == 0


def test_padding_an_empty_tensor_with_symbolic_sizes():
    """Every element of a padded empty tensor is padding: with symbolic sizes beside the empty dim
    (Dynamo specializes size 0) the result is filled natively, also where it is empty too."""
    f = lambda x: (F.pad(x, (1, 2, 2, 1), value=3.0), F.pad(x.unsqueeze(0), (0, 1), value=-1.0))  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(0, n)
        for got, want in zip(cf(x), f(x)):
            torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert metrics.fallback_kernel_count == 0 and metrics.specialized_graph_count == 0


def test_vector_norm_of_a_symbolic_order():
    """``torch.norm(x, p)`` with an int ``p`` (a symbol under dynamic=True): lowered at ``p``'s
    value with a guard, so another ``p`` compiles its own graph instead of reusing this one."""
    f = lambda x, p: torch.linalg.vector_norm(x, p, dim=-1)  # noqa: E731
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for p, n in ((2, 5), (2, 9), (3, 7), (3, 4), (2, 6)):
        x = torch.randn(3, n)
        _close(cf(x, p), f(x, p))
    assert metrics.fallback_kernel_count == 0 and metrics.specialized_graph_count == 0
    assert _frames() == 2  # one graph per order, each for every size
