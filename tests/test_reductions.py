"""Reduction kinds: reduction hints (inner / outer), split reductions for few long rows, horizontal
fusion of independent reductions, and the GPU launch-config candidates per kind. Compiled results
are compared with eager (CPU, Triton interpreter in CI; CUDA with TRITON_INTERPRET=0)."""

from __future__ import annotations

import re

import pytest
import torch

from tilefuse import config, metrics
from tilefuse.codegen.triton import TritonKernelCodegen, next_pow2
from tilefuse.ir import graph_context as G

from _tf_testutil import DEVICE, GPU_MARKS, groups_of

pytestmark = GPU_MARKS


@pytest.fixture(autouse=True)
def _strict():
    torch._dynamo.reset()
    with config.patch(fallback_on_error=False):
        yield
    torch._dynamo.reset()


def hints(fn, *args) -> list[str]:
    gs, _ = groups_of(fn, *args)
    return [n.body.reduction_hint() for g in gs for n in g.nodes if n.is_reduction()]


def test_reduction_hints():
    x = torch.randn(64, 48)
    assert hints(lambda a: a.sum(1), x) == ["inner"]
    assert hints(lambda a: a.sum(0), x) == ["outer"]
    assert hints(lambda a: a.t().sum(1), x) == ["outer"]
    # the transposed copy is inlined: summing its columns reads rows of ``a`` contiguously
    assert hints(lambda a: a.t().contiguous().sum(0), x) == ["inner"]
    # a reduction over a middle dim of a 3-D tensor reads rows with stride 5 and columns
    # contiguously: outer
    assert hints(lambda a: a.sum(1), torch.randn(4, 30, 5)) == ["outer"]


def test_split_happens_only_for_few_programs():
    # few rows, long: split (partials + final); many rows: not split
    gs, _ = groups_of(lambda a: a.sum(1), torch.randn(2, 16384))
    assert [(g.numel, g.rnumel) for g in gs] == [(2 * 8, 2048), (2, 8)]
    gs, _ = groups_of(lambda a: a.sum(1), torch.randn(1024, 4096))
    assert [(g.numel, g.rnumel) for g in gs] == [(1024, 4096)]
    # an odd length is cut into CeilDiv(9999, 4) = 2500-long chunks, the last one's tail masked
    gs, _ = groups_of(lambda a: a.sum(), torch.randn(9999))
    assert [(g.numel, g.rnumel) for g in gs] == [(4, 2500), (1, 4)]
    # arg-reductions are never split
    gs, _ = groups_of(lambda a: a.argmax(), torch.randn(16384))
    assert [(g.numel, g.rnumel) for g in gs] == [(1, 16384)]


def _decomposed_groups(fn, *args) -> list[tuple[int, int]]:
    """(numel, rnumel) of each kernel group of ``fn`` traced with tilefuse's decomposition table
    on meta tensors (sizes only, nothing runs)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.graph import GraphLowering
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings
    from tilefuse.scheduler import KernelGroup, schedule

    gm = make_fx(fn, decomposition_table=decompositions(lowered=lowerings))(*args)
    graph = GraphLowering(gm, list(args), "test")
    graph.run()
    with G.set_graph(graph):
        return [(i.numel, i.rnumel) for i in schedule(graph.buffers) if isinstance(i, KernelGroup)]


def test_gathering_reductions_realize_their_values():
    """A reduction over few outputs whose elements are gathered (one random access each) has its
    values realized first, and the realized values join the kernel that produces their other
    inputs: cross-entropy's per-row target losses become the epilogue of the row log-sum-exp
    kernel, and the loss's sum, the count of non-ignored targets and the division share one
    kernel over the 8192 rows — 2 kernels, as Inductor (5 before: the gathering sum split in
    256-long chunks, the count in 2048-long ones, each with a final kernel)."""

    x = torch.empty(8192, 32000, device="meta", dtype=torch.bfloat16)
    t = torch.empty(8192, dtype=torch.int64, device="meta")
    assert 8192 <= config.SPLIT_MAX_UNSPLIT_INNER
    from _tf_testutil import scheduled
    from tilefuse.scheduler import KernelGroup

    with config.patch(split_long_normalizers=False):
        items, _ = scheduled(lambda a, b: torch.nn.functional.cross_entropy(a, b), x, t, decompose=True)
    groups = [i for i in items if isinstance(i, KernelGroup)]
    assert [(g.numel, g.rnumel) for g in groups] == [(8192, 32000), (1, 8192)]
    # the gathering pointwise node (its values) is the row kernel's epilogue ('x'), not a guest
    # in the one-program loop over the 8192 rows
    rows, total = groups
    # (and the per-row max + log-sum, stored once per row: lowering.common._realize_costly_broadcast)
    assert {rows.maps[n][0] for n in rows.nodes if not n.is_reduction()} == {"x"}
    assert all(n.is_reduction() for n in total.nodes if total.maps[n][0] != "x")
    # rows cut into 8 chunks of 4000 (the default): the per-row losses join the kernel that
    # combines the chunks
    items, _ = scheduled(lambda a, b: torch.nn.functional.cross_entropy(a, b), x, t, decompose=True)
    groups = [i for i in items if isinstance(i, KernelGroup)]
    assert [(g.numel, g.rnumel) for g in groups] == [(8192 * 8, 4000), (8192, 8), (1, 8192)]
    _, rows, total = groups
    assert {rows.maps[n][0] for n in rows.nodes if not n.is_reduction()} == {"x"}
    assert all(n.is_reduction() for n in total.nodes if total.maps[n][0] != "x")
    # a gathering sum with no producer kernel: its realized values sit in the sum's own loop
    idx = torch.empty(1000, dtype=torch.int64, device="meta")
    y = torch.empty(50, 1000, device="meta")
    assert _decomposed_groups(lambda a, i: a[i, torch.arange(1000, device="meta")].sum(), y, idx) == [(1, 1000)]
    # longer than config.SPLIT_MAX_UNSPLIT_INNER: the realized values are split like any other sum
    idx = torch.empty(20000, dtype=torch.int64, device="meta")
    y = torch.empty(50, 20000, device="meta")
    groups = _decomposed_groups(lambda a, i: a[i, torch.arange(20000, device="meta")].sum(), y, idx)
    assert len(groups) == 2 and groups[1][0] == 1 and groups[0][0] == groups[1][1] > 1


def test_inner_reductions_up_to_the_unsplit_bound_are_not_split():
    """Inductor's inner_reduction_splits bound: a full sum of config.SPLIT_MAX_UNSPLIT_INNER elements is
    one kernel; one element more is split (CeilDiv chunks, masked tail)."""
    n = config.SPLIT_MAX_UNSPLIT_INNER

    assert _decomposed_groups(lambda a: a.sum(), torch.empty(n, device="meta")) == [(1, n)]
    groups = _decomposed_groups(lambda a: a.sum(), torch.empty(n + 1, device="meta"))
    assert len(groups) == 2
    # an outer reduction of the same length still splits (its programs cover 64 columns each)
    assert len(_decomposed_groups(lambda a: a.sum(0), torch.empty(n, 8, device="meta"))) == 2
    x = torch.rand(n + 1, device=DEVICE)
    check(lambda a: (a.sum(), a[:n].sum()), x, tol=1e-3, kernels=3)


@pytest.mark.parametrize("rows", [600, 1000, 8192, 9000])
def test_gathering_reductions_match_eager(rows):
    x = torch.randn(rows, 37, device=DEVICE)
    t = torch.randint(0, 37, (rows,), device=DEVICE)
    t[::7] = -100  # ignored targets
    # the row log-sum-exp with the per-row losses, then the sum / count (split beyond 8192 rows)
    check(lambda a, b: torch.nn.functional.cross_entropy(a, b), x, t, kernels=2 if rows <= 8192 else 3)
    check(lambda a, b: a.gather(1, b.clamp(min=0)[:, None]).sum(), x, t)
    check(lambda a, b: torch.nn.functional.cross_entropy(a, b, reduction="sum", label_smoothing=0.1), x, t)


def check(fn, *args, tol=1e-4, kernels=None):
    metrics.reset()
    got = torch.compile(fn, backend="tilefuse")(*args)
    want = fn(*args)
    torch.testing.assert_close(got, want, atol=tol, rtol=tol, equal_nan=True)
    if kernels is not None:
        assert metrics.generated_kernel_count == kernels


def test_few_long_rows_keep_the_softmax_max_unsplit_beside_its_sumexp():
    """16 rows of 16384: a lone amax is split (few programs), but the amax beside a softmax's or
    logsumexp's sumexp of the same rows is not — the sumexp is never split, so a split max would
    read the rows once more in two extra kernels instead of sharing the sumexp's loop (3 kernels
    before, now 1). With ``split_long_normalizers`` (the default) the rows are cut into 4 chunks
    instead: chunk max / sum-exp, their combination, then the softmax's output (3 kernels; 2
    for logsumexp, whose result is per row)."""
    x = torch.randn(16, 16384, device=DEVICE)
    x[3, :5000] = float("-inf")
    torch._dynamo.reset()
    check(lambda a: a.amax(-1), x, kernels=2)  # split: partial maxima, then their max
    fns = (
        lambda a: torch.softmax(a, -1),
        lambda a: torch.logsumexp(a, -1),
        lambda a: (torch.log_softmax(a, -1), torch.logsumexp(a, -1)),
    )
    with config.patch(split_long_normalizers=False):
        for f in fns:
            torch._dynamo.reset()
            check(f, x, kernels=1)
    for f, kernels in zip(fns, (3, 2, 3)):
        torch._dynamo.reset()
        check(f, x, kernels=kernels)


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "mean", "any"])
def test_split_reductions_match_eager(op):
    x = torch.rand(3, 8193, device=DEVICE) * 0.002 + 0.999  # just past the unsplit bound: 4 chunks
    if op == "any":
        x = x > 1.000998
        check(lambda a: (a.any(1), a.any()), x)
        return
    fn = getattr(torch, op)
    check(lambda a: (fn(a, 1), fn(a)), x)


@pytest.mark.parametrize("n", [9999, 50257, 4099])
def test_split_of_lengths_without_a_power_of_two_divisor(n):
    x = torch.randn(2, n, device=DEVICE)
    x[:, -1] = 50.0  # the extreme in the masked tail chunk
    i = (x * 100).to(torch.int32)
    check(
        lambda a, b: (
            a.sum(1),
            a.amax(1),
            a.amin(),
            (a > 49).any(1),
            b.amax(1),
            b.amin(1),
            a.sum(),
            (a > 0).float().prod(1),
        ),
        x,
        i,
        tol=1e-3,
    )
    col = torch.randn(n, 3, device=DEVICE)
    col[-1] = 50.0
    check(lambda c: (c.sum(0), c.amax(0)), col, tol=1e-3)


def test_split_max_propagates_nan_from_one_chunk():
    x = torch.randn(16384, device=DEVICE)
    x[9000] = float("nan")
    check(lambda a: (a.amax(), a.amin(), a.sum()), x)


def test_split_over_several_reduced_dims_with_keepdim():
    x = torch.randn(8, 3, 2048, device=DEVICE)
    check(lambda a: (a.sum((0, 2), keepdim=True), a.amax((0, 2))), x)


def test_split_low_precision_and_integer_sums():
    x = torch.randn(2, 8192, device=DEVICE).to(torch.bfloat16)
    check(lambda a: a.sum(1), x, tol=2e-2)
    i = torch.randint(-1000, 1000, (16384,), device=DEVICE)
    check(lambda a: (a.sum(), a.amax()), i, tol=0)


def test_outer_reduction_column_sums():
    x = torch.randn(4096, 33, device=DEVICE)
    check(lambda a: (a.sum(0), a.amax(0), a.mean(0)), x)


def test_layer_norm_backward_column_reductions_match_eager():
    ln = torch.nn.LayerNorm(24).to(DEVICE)
    x = torch.randn(4096, 24, device=DEVICE, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    ln2 = torch.nn.LayerNorm(24).to(DEVICE)
    ln2.load_state_dict(ln.state_dict())
    torch.compile(ln, backend="tilefuse")(x).square().sum().backward()
    ln2(y).square().sum().backward()
    torch.testing.assert_close(x.grad, y.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ln.weight.grad, ln2.weight.grad, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(ln.bias.grad, ln2.bias.grad, atol=1e-3, rtol=1e-4)


def test_independent_reductions_fuse_horizontally():
    x = torch.randn(64, 100, device=DEVICE)
    # sum and max of the same rows, and a pointwise output: one kernel
    check(lambda a: (a.sum(1), a.amax(1), a * 2), x, kernels=1)


@pytest.mark.parametrize(
    "shape,dim", [((4096, 48), 1), ((4096, 48), 0), ((8, 20000), 1), ((64, 2048), 0), ((2, 100), 1)]
)
def test_gpu_config_candidates(shape, dim):
    """Configs are generated without a GPU (codegen only needs the device type): blocks never
    exceed the extents' next power of two, the heuristic's choice comes first, outer reductions
    cover many columns per program and persistent ones the whole row."""
    gs, graph = groups_of(lambda a: a.sum(dim), torch.randn(*shape))
    with G.set_graph(graph), config.patch(tiny_kernel_numel=0):  # small shapes: every candidate
        for i, g in enumerate(gs):
            cg = TritonKernelCodegen(g, f"k{i}", torch.device("cuda"), keep=set(g.names()))
            gk = cg.generate()
            assert len(gk.configs) >= 2
            for c in gk.configs:
                assert c["XBLOCK"] <= next_pow2(g.numel) and c["RBLOCK"] <= next_pow2(g.rnumel)
                assert 1 <= c["num_warps"] <= 16
                if cg.persistent:
                    assert c["RBLOCK"] >= g.rnumel
            first = gk.configs[0]
            if cg.hint == "outer" and not cg.persistent:
                assert first["XBLOCK"] >= min(32, next_pow2(g.numel))
            if cg.hint == "outer" and g.rnumel > config.OUTER_PERSISTENT_MAX:
                assert not cg.persistent


def _cuda_configs(fn, *args, **options):
    """Each kernel's (codegen, candidate configs) for CUDA, with the config ``options`` patched."""
    gs, graph = groups_of(fn, *args)
    out = []
    with G.set_graph(graph), config.patch(**options):
        for i, g in enumerate(gs):
            cg = TritonKernelCodegen(g, f"k{i}", torch.device("cuda"), keep=set(g.names()))
            out.append((cg, cg.generate().configs))
    return out


@pytest.mark.parametrize(
    "fn,shape,tiny,tiled",
    [
        (lambda a: a.sum(1), (256, 256), True, False),  # 65536 elements: tiny
        (lambda a: a.sum(1), (257, 256), False, False),  # one row more: autotuned
        (lambda a: a.sum(0), (64, 1024), True, False),  # an outer reduction
        (lambda a: torch.logsumexp(a, 1), (16, 4096), True, False),
        (lambda a: a.t() + a, (256, 256), True, True),  # a 2-D tiled kernel
        (lambda a: a.t() + a, (512, 512), False, True),
    ],
)
def test_tiny_kernels_launch_with_the_first_config_only(fn, shape, tiny, tiled):
    """A kernel of at most ``config.tiny_kernel_numel`` (65536) elements (outputs x reduction
    length, or the tile's extents) keeps only the heuristic's first config (no autotuning: the
    launch sets its time); a larger one, or any with ``tiny_kernel_numel=0``, keeps every
    candidate."""
    assert config.tiny_kernel_numel == 65536
    x = torch.randn(*shape)
    # tiles have candidates only with autotune_pointwise (their shape barely matters on the GPU:
    # docs/benchmarks.md, autotune_report.py)
    full = _cuda_configs(fn, x, tiny_kernel_numel=0, autotune_pointwise=True)
    got = _cuda_configs(fn, x, autotune_pointwise=True)
    assert len(got) == len(full) >= 1
    for (cg, configs), (_, every) in zip(got, full):
        assert len(every) >= 2, every  # reductions and tiles have candidates to drop
        assert cg.is_tiny() == tiny
        assert configs == (every[:1] if tiny else every)
        assert (cg.tiling is not None) == tiled


def test_tiny_kernel_rule_needs_static_extents():
    """A symbolic extent may be large at a later call: such a kernel is never tiny, whatever its
    size hint."""
    from tilefuse import symbolic as S

    ((cg, _),) = _cuda_configs(lambda a: a.sum(1), torch.randn(64, 64))
    assert cg.is_tiny()
    (s0,) = S.symbols("s0")
    cg.g.numel = s0
    assert not cg.is_tiny()
    with config.patch(tiny_kernel_numel=0):
        cg.g.numel = 64
        assert not cg.is_tiny()


def test_looped_inner_reductions_try_2048_element_chunks_with_4_warps_first():
    """On the GPU an online log-sum-exp over 32000-wide rows ran fastest at 2048 elements / 4 warps
    among the chunk and warp counts timed (benches/sumexp_variants.py, docs/benchmarks.md), so it is
    the heuristic's first choice."""
    with config.patch(split_long_normalizers=False):
        gs, graph = groups_of(lambda a: torch.logsumexp(a, 1), torch.randn(1024, 8192))
    with G.set_graph(graph):
        (g,) = gs
        cg = TritonKernelCodegen(g, "k0", torch.device("cuda"), keep=set(g.names()))
        gk = cg.generate()
    assert not cg.persistent and cg.hint == "inner"
    assert gk.configs == [
        {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 4},
        {"XBLOCK": 1, "RBLOCK": 1024, "num_warps": 4},
        {"XBLOCK": 2, "RBLOCK": 1024, "num_warps": 8},
        {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8},
    ]


def test_looped_rows_of_a_language_models_vocabulary_also_try_4096_element_chunks():
    """Rows of ``config.LONG_ROW_MIN`` (16384) elements or more swap the 1024-element candidate
    for 4096 (faster for such rows on the GPU); the candidate count stays four, so compiling
    ahead costs the same."""
    long_row = config.LONG_ROW_MIN
    for cols, second in ((32000, 4096), (long_row, 4096), (long_row - 1, 1024)):
        with config.patch(split_long_normalizers=False):
            gs, graph = groups_of(lambda a: torch.logsumexp(a, 1), torch.randn(64, cols))
        with G.set_graph(graph):
            g = next(g for g in gs if g.rnumel == cols)
            cg = TritonKernelCodegen(g, "k0", torch.device("cuda"), keep=set(g.names()))
            gk = cg.generate()
        assert not cg.persistent and cg.hint == "inner"
        assert gk.configs == [
            {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 4},
            {"XBLOCK": 1, "RBLOCK": second, "num_warps": 4},
            {"XBLOCK": 2, "RBLOCK": 1024, "num_warps": 8},
            {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8},
        ], cols


def test_looped_rows_that_also_store_every_element_keep_1024_element_chunks():
    """A long-row kernel that stores every element in a second loop (a softmax, a log-softmax
    gradient) is not ``reduce_only``: its 4096-element candidate would hold twice the values per
    thread and was the slowest compile job of a GPT training step, so it keeps 1024."""
    with config.patch(split_long_normalizers=False):
        gs, graph = groups_of(lambda a: torch.softmax(a, 1), torch.randn(64, 32000))
    with G.set_graph(graph):
        g = next(g for g in gs if g.rnumel == 32000)
        cg = TritonKernelCodegen(g, "k0", torch.device("cuda"), keep=set(g.names()))
        gk = cg.generate()
    assert not cg.persistent and not cg.reduce_only
    assert [c["RBLOCK"] for c in gk.configs] == [2048, 1024, 1024, 2048]
    assert max(c["XBLOCK"] * c["RBLOCK"] / c["num_warps"] for c in gk.configs) == 512


def test_chunked_row_normalizers_are_reduce_only_persistent_kernels():
    """A logsumexp over 32000-wide rows is cut into 8 chunks of 4000 (``split_long_normalizers``):
    the chunk kernel stores only per-row results (``reduce_only``), so it tries a row per program
    at 2 warps, then 4, before the usual persistent candidates; its loads are ``evict_first``;
    its sum-exp has no per-element guard. The combining kernel (8 chunks per row) follows."""
    gs, graph = groups_of(lambda a: torch.logsumexp(a, 1), torch.randn(64, 32000))
    assert [(g.numel, g.rnumel) for g in gs] == [(64 * 8, 4000), (64, 8)]
    with G.set_graph(graph):
        cg = TritonKernelCodegen(gs[0], "k0", torch.device("cuda"), keep=set(gs[0].names()))
        gk = cg.generate()
    assert cg.persistent and cg.reduce_only
    assert gk.configs[:2] == [
        {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 2},
        {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 4},
    ]
    loads = [ln for ln in gk.source.splitlines() if "tl.load(" in ln]
    assert loads and all("evict_first" in ln for ln in loads)
    assert "1.0, tl.exp(" not in gk.source
    # a softmax's persistent kernel also stores the output: not reduce_only, the guarded exp that
    # the output shares, no hint on its loads
    gs, graph = groups_of(lambda a: torch.softmax(a, 1), torch.randn(64, 4000))
    with G.set_graph(graph):
        cg = TritonKernelCodegen(gs[0], "k0", torch.device("cuda"), keep=set(gs[0].names()))
        gk = cg.generate()
    assert cg.persistent and not cg.reduce_only and "1.0, tl.exp(" in gk.source
    assert gk.configs[0]["num_warps"] >= 4


def test_reduction_hint_simplifies_reshaped_indices_and_ignores_broadcast_loads():
    from tilefuse import symbolic as S
    from tilefuse.ir.loop_body import LoopBody

    i0, r0 = S.sym("i0"), S.sym("r0")
    # a (2, 32, 128) tensor reshaped to (64, 128) and summed over rows: the reshape's digits
    # simplify to i0 + 128*r0 over the ranges: columns across rows
    b = LoopBody([i0], [r0], {i0: 128, r0: 64})
    flat = i0 + 128 * r0
    b.add(
        "load",
        (
            "buf0",
            S.ModularIndexing(i0, 1, 128)
            + 128 * S.ModularIndexing(flat, 128, 32)
            + 4096 * S.ModularIndexing(flat, 4096, 2),
        ),
        torch.float32,
    )
    assert b.reduction_hint() == "outer"
    # a per-row vector (LayerNorm's mean) read next to the column data does not make it inner
    b.add("load", ("mean", r0), torch.float32)
    b.add("load", ("buf1", i0 + 128 * r0), torch.float32)
    assert b.reduction_hint() == "outer"
    # a full reduction of contiguous data is inner
    c = LoopBody([], [r0], {r0: 64})
    c.add("load", ("buf0", r0), torch.float32)
    assert c.reduction_hint() == "inner"


def test_linear_bias_gradient_is_an_outer_reduction():
    x = torch.randn(2, 32, 64, device=DEVICE, requires_grad=True)
    lin = torch.nn.Linear(64, 128).to(DEVICE)
    ref = torch.nn.Linear(64, 128).to(DEVICE)
    ref.load_state_dict(lin.state_dict())
    torch.compile(lambda a: torch.nn.functional.gelu(lin(a), approximate="tanh"), backend="tilefuse")(
        x
    ).square().mean().backward()
    xr = x.detach().clone().requires_grad_()
    torch.nn.functional.gelu(ref(xr), approximate="tanh").square().mean().backward()
    torch.testing.assert_close(lin.bias.grad, ref.bias.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(x.grad, xr.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("shape,dim", [((2, 5000), 1), ((100, 3), 0), ((6000,), None)])
def test_looped_arg_reductions_nan_and_rows_equal_to_the_identity(shape, dim):
    # looped (long rows, outer columns, whole tensors): a NaN is the extreme (first one wins),
    # and a row that never beats the accumulator's start (-inf for argmax, +inf for argmin, all
    # zeros in uint8) still gives its first index, as eager does
    x = torch.randn(*shape, device=DEVICE)
    flat = x.view(-1)
    flat[len(flat) // 3] = float("nan")
    flat[len(flat) // 2] = float("nan")
    fn = (lambda a: (a.argmax(), a.argmin())) if dim is None else (lambda a: (a.argmax(dim), a.argmin(dim)))
    check(fn, x, tol=0)
    torch._dynamo.reset()
    ninf = torch.full(shape, float("-inf"), device=DEVICE)
    check(lambda a: a.argmax() if dim is None else a.argmax(dim), ninf, tol=0)
    torch._dynamo.reset()
    check(lambda a: a.argmin() if dim is None else a.argmin(dim), -ninf, tol=0)
    torch._dynamo.reset()
    z = torch.zeros(shape, dtype=torch.uint8, device=DEVICE)
    check(lambda a: a.argmax() if dim is None else a.argmax(dim), z, tol=0)
    torch._dynamo.reset()
    check(
        lambda a: torch.max(a, dim if dim is not None else 0), ninf.view(shape[0], -1) if dim is None else ninf, tol=0
    )


# ------------------------------------------------------------------ online softmax (sumexp)
def _softmax_family(x):
    return (
        torch.softmax(x, -1),
        torch.log_softmax(x, -1),
        torch.logsumexp(x, -1),
        torch.nn.functional.cross_entropy(x.float(), torch.arange(x.shape[0], device=x.device) % x.shape[1]),
    )


def _rows_with_extremes(rows, cols, dtype):
    x = (torch.randn(rows, cols, device=DEVICE) * 4).to(dtype)
    inf = float("inf")
    x[1, : cols // 2] = -inf  # -inf before the finite values of the row
    x[2, :] = -inf  # only -inf
    x[3, cols - 3] = inf  # a +inf
    x[4, 5] = float("nan")  # a NaN
    x[5, :] = 7.0  # all equal
    x[6, : cols * 5 // 6] = -inf  # -inf over whole chunks of a looped row, finite values after
    x[7, cols - 2] = float("nan")  # a NaN near the end (in a looped row's last chunk)
    return x


@pytest.mark.parametrize(
    "mode, cols",
    [("persistent", 300), ("looped", 300), ("looped", 3000), ("chunked", 300), ("chunked", 3000), ("chunked", 3001)],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_family_online_normalizer_matches_eager(mode, cols, dtype, tmp_path):
    """softmax / log_softmax / logsumexp / cross-entropy lower to max + sumexp (one pass over a
    looped row for both), with eager's NaN / inf results on extreme rows. Rows of 3000 take two
    iterations of the CPU's 2048-element chunks, so the running maximum grows between chunks
    (the rescale), a chunk can be all -inf, and a NaN or +inf can arrive in the last chunk.
    Chunked (rows longer than the persistent threshold, ``split_long_normalizers``): per-chunk
    maxima and sums combined through the chunks' log-sum-exps, the same extremes in whole
    chunks; 300 = 8 chunks of 38 and 3001 = 4 chunks of 751, the last chunk's 4 / 3 positions
    past the row masked."""
    x = _rows_with_extremes(9, cols, dtype)
    opts = dict(debug_dir=str(tmp_path))
    persistent = mode == "persistent"
    if mode == "looped":
        opts.update(persistent_reduction_threshold=16, split_long_normalizers=False)  # rows of 300: looped
    if mode == "chunked":
        opts.update(persistent_reduction_threshold=64 if cols == 300 else 1024)  # 8 / 4 chunks
    with config.patch(**opts):
        metrics.reset()
        got = torch.compile(_softmax_family, backend="tilefuse")(x)
    want = _softmax_family(x)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, **tol)
    assert metrics.fallback_kernel_count == 0
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    if mode == "chunked":
        # no loop over a row: per-chunk max / sum-exp kernels (the chunk's length) and their
        # combination (over the chunks)
        assert "for roffset" not in src
        chunks = 8 if cols == 300 else 4
        assert f"rnumel = {-(-cols // chunks)}\n" in src and f"rnumel = {chunks}\n" in src
    elif not persistent:
        # the sumexp recurrence runs inside a loop over the row, next to the max
        loops = src.split("for roffset")
        assert any("tl.maximum(" in body and "tl.exp(" in body for body in loops[1:])
        # softmax's max and normalizer share a loop: the kernel computing both has one loop
        # before its output loop, not two
        k = next(part for part in src.split("@_jit") if "tl.maximum(" in part)
        assert k.count("for roffset") <= 2
        # ... and inside that loop the four normalizers of the same rows (softmax, log_softmax,
        # logsumexp, cross-entropy) and the amax beside each are one running row maximum and one
        # sum: one maximum, and two exps (the element's and the rescale), per iteration
        k = next(part for part in src.split("@_jit") if "for roffset" in part and "tl.maximum(" in part)
        first_loop = k.split("for roffset")[1]
        assert first_loop.count("tl.maximum(") == 1, first_loop
        assert first_loop.count("tl.exp(") == 2, first_loop


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_normalizers_keep_every_chunk_of_rows_of_huge_values(dtype):
    """Rows longer than the persistent threshold are cut into chunks; the chunks combine against
    the row's maximum, so rows of huge values (an attention row masked with -1e9 or the dtype's
    minimum, a constant 1e30, logits offset by 1e4 or 1e5) keep every chunk's share. Combining
    the chunks' log-sum-exps rounded ``log s`` away there: 5000 × -1e9 in 2 chunks gave a softmax
    summing to 2500."""
    n = 5000  # 2 chunks of 2500 at the default threshold
    x = torch.randn(8, n, device=DEVICE)
    x[0] = -1e9
    x[1] = torch.finfo(dtype).min
    x[2] = 1e30
    x[3] += 1e4
    x[4] = x[4] * 1e9
    x[5, : n // 2] = -1e9  # one chunk masked, the other finite
    x[6] += 1e5
    x = x.to(dtype)
    got = torch.compile(lambda a: (torch.softmax(a, -1), torch.logsumexp(a, -1)), backend="tilefuse")(x)
    want = (torch.softmax(x, -1), torch.logsumexp(x, -1))
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got[0], want[0], atol=tol, rtol=tol)
    torch.testing.assert_close(got[0].float().sum(-1), torch.ones(8, device=DEVICE), atol=tol * 10, rtol=0)
    torch.testing.assert_close(got[1], want[1], atol=tol, rtol=tol)


@pytest.mark.parametrize("n", [100, 5000])  # one persistent kernel; 2 chunks of 2500
def test_log_softmax_and_cross_entropy_are_exact_at_large_logits(n):
    """log_softmax is ``(x - max) - log Σ exp(x - max)`` (torch's decomposition, its max and
    sum-exp lowered as one normalizer), rounded at the size of ``x - max`` as eager's kernel is:
    logits offset by 1e4 / 1e5 and rows masked with -1e9 give eager's values to float32 rounding
    (``x - logsumexp(x)``, the earlier decomposition, was off by 2.8e-4 at 1e4 and by 8.5 on a
    row of -1e9). Rows of only -inf / holding +inf / NaN are NaN, as eager's; cross-entropy's
    loss and gradient at the same logits match too."""
    x = torch.randn(8, n, device=DEVICE)
    x[0] += 1e4
    x[1] += 1e5
    x[2] = -1e9
    x[3, : n // 2] = -1e9
    x[4, : n // 2] = float("-inf")
    x[5] = float("-inf")
    x[6, 7] = float("inf")
    x[7, 1] = float("nan")
    got = torch.compile(lambda a: torch.log_softmax(a, -1), backend="tilefuse")(x)
    want = torch.log_softmax(x, -1)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=0, equal_nan=True)
    rows = x[:5].clone().requires_grad_()
    target = torch.randint(0, n // 2, (5,), device=DEVICE) + n // 2  # not a masked position
    loss = torch.compile(lambda a, t: torch.nn.functional.cross_entropy(a, t), backend="tilefuse")(rows, target)
    loss.backward()
    ref_rows = x[:5].clone().requires_grad_()
    ref = torch.nn.functional.cross_entropy(ref_rows, target)
    ref.backward()
    torch.testing.assert_close(loss, ref, atol=2e-6, rtol=1e-6)
    torch.testing.assert_close(rows.grad, ref_rows.grad, atol=1e-7, rtol=1e-5)


def test_decomposed_max_and_sumexp_is_one_normalizer():
    """``Σ exp(x - amax(x))`` written out (as torch's log_softmax decomposition and user code write
    it) is matched (``online_normalizers``) and lowered as the one-pass max / sum-exp pair: one
    kernel for rows of 100, a chunk kernel and its combination for rows of 5000, with eager's
    values, NaN for rows of only -inf or holding +inf. Other dims, a different tensor under the
    max, a sum without keepdim or a float16 input are not matched and still give eager's values."""
    from tilefuse.fx_passes import online_normalizers

    def f(t):
        return torch.exp(t - t.amax(-1, keepdim=True)).sum(-1, keepdim=True)

    for n, kernels in ((100, 1), (5000, 2)):
        x = torch.randn(3, n, device=DEVICE)
        x[1] = float("-inf")
        x[2, 3] = float("inf")
        torch._dynamo.reset()
        k0 = metrics.generated_kernel_count
        got = torch.compile(f, backend="tilefuse")(x)
        assert metrics.generated_kernel_count - k0 == kernels
        torch.testing.assert_close(got, f(x), equal_nan=True)
    others = (
        lambda t: torch.exp(t - t.amax(0, keepdim=True)).sum(-1, keepdim=True),
        lambda t: torch.exp(t - (t * 2).amax(-1, keepdim=True)).sum(-1, keepdim=True),
        lambda t: torch.exp(t - t.amax(-1, keepdim=True)).sum(-1),
        lambda t: torch.exp(t.half() - t.half().amax(-1, keepdim=True)).sum(-1, keepdim=True),
    )
    x = torch.randn(6, 50, device=DEVICE)
    for g in others:
        gm = torch.fx.experimental.proxy_tensor.make_fx(g, tracing_mode="fake")(x)
        assert not online_normalizers(gm)
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(g, backend="tilefuse")(x), g(x), atol=1e-3, rtol=1e-3)
    gm = torch.fx.experimental.proxy_tensor.make_fx(f, tracing_mode="fake")(x)
    assert len(online_normalizers(gm)) == 2  # the amax and the sum


def test_softmax_family_under_dynamic_shapes_and_backward():
    def f(x):
        return (torch.log_softmax(x, -1) * torch.softmax(x, 0)).sum()

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (5, 37, 300):
        x = torch.randn(6, n, device=DEVICE, requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        out = cf(x)
        out.backward()
        ref = f(x2)
        ref.backward()
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(x.grad, x2.grad, atol=1e-5, rtol=1e-5)


def test_softmax_of_scalars_and_empty_tensors():
    for x, dim in [
        (torch.tensor(3.0, device=DEVICE), 0),
        (torch.randn(5, 0, 0, device=DEVICE), -1),
        (torch.randint(0, 9, (4, 6), device=DEVICE), 1),
    ]:
        torch._dynamo.reset()
        if x.dtype.is_floating_point:
            torch.testing.assert_close(
                torch.compile(lambda t: torch.softmax(t, dim), backend="tilefuse")(x), torch.softmax(x, dim)
            )
        torch._dynamo.reset()
        torch.testing.assert_close(
            torch.compile(lambda t: torch.logsumexp(t, dim), backend="tilefuse")(x), torch.logsumexp(x, dim)
        )


def test_eviction_hints_keep_reread_rows_and_shared_weights_in_cache(tmp_path):
    """Looped rows read again by a later loop are evict_last where first read and evict_first
    where last read; a weight every row-program reads is evict_last; pointwise kernels get none."""
    x, w, b = torch.randn(64, 300, device=DEVICE), torch.randn(300, device=DEVICE), torch.randn(300, device=DEVICE)

    y = torch.randn(7, 11, device=DEVICE)

    def f(x, w, b):
        return torch.nn.functional.layer_norm(x, (300,), w, b), (y * 2).sin()

    with config.patch(persistent_reduction_threshold=16, debug_dir=str(tmp_path)):
        got = torch.compile(f, backend="tilefuse")(x, w, b)
    for g, want in zip(got, f(x, w, b)):
        torch.testing.assert_close(g, want, atol=1e-5, rtol=1e-5)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    kernels = [k.split("_launcher = ")[0] for k in re.split(r"def tf_(?:poi|per|red)_", src)[1:]]
    red = next(k for k in kernels if "for roffset" in k)
    loops = red.split("for roffset")[1:]
    row = "rindex + 300*xindex"
    assert all("evict_last" in ln for lp in loops[:-1] for ln in lp.splitlines() if row in ln and "tl.load" in ln)
    assert any("evict_first" in ln for ln in loops[-1].splitlines() if row in ln and "tl.load" in ln)
    assert all("evict_last" in ln for ln in red.splitlines() if "tl.load" in ln and "(rindex)" in ln)
    pointwise = [k for k in kernels if "RBLOCK" not in k]
    assert pointwise and not any("eviction_policy" in k for k in pointwise)


def test_any_all_of_uint8_are_uint8_as_eager():
    x = torch.tensor([[0, 3, 0], [0, 0, 0]], dtype=torch.uint8, device=DEVICE)
    for f in (lambda t: t.any(1) - 1, lambda t: t.all(1) * 300, lambda t: t.any()):
        torch._dynamo.reset()
        got, want = torch.compile(f, backend="tilefuse")(x), f(x)
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def test_alu_heavy_pointwise_kernels_get_2048_elements_per_program():
    """A 1-D pointwise kernel of at least ``config.ALU_HEAVY_POINTWISE_OPS`` arithmetic ops per
    element (bias + exact GELU in bf16, with the polynomial erf) launches 2048 elements per
    program at 4 warps; a light one (SiLU x mul) keeps 1024 (the constant's comment says why)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.codegen.heuristics import alu_ops
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings

    x, b = torch.randn(64, 256, dtype=torch.bfloat16), torch.randn(256, dtype=torch.bfloat16)
    for fn, heavy in (
        (lambda a, c: torch.nn.functional.gelu(a + c), True),
        (lambda a, c: torch.nn.functional.silu(a) * c, False),
    ):
        # traced with the backend's decompositions, as AOTAutograd does
        gs, graph = groups_of(make_fx(fn, decomposition_table=decompositions(lowered=lowerings))(x, b), x, b)
        with G.set_graph(graph):
            (g,) = gs
            cg = TritonKernelCodegen(g, "k0", torch.device("cuda"), keep=set(g.names()))
            gk = cg.generate()
        ops = alu_ops(gk.source.splitlines())
        assert (ops >= config.ALU_HEAVY_POINTWISE_OPS) == heavy, ops
        assert gk.configs[0] == {"XBLOCK": 2048 if heavy else 1024, "num_warps": 4}, (ops, gk.configs)
    assert (
        alu_ops(
            [
                "    tmp0 = tl.load(in_ptr0 + (xindex), xmask)",
                "    tmp1 = tmp0.to(tl.float32)",
                "    tmp2 = tl.full([XBLOCK], 0.5, tl.float32)",
                "    tmp3 = tmp1 * tmp2",
                "    tmp4 = tl.exp2(tmp3)",
                "    tl.store(out_ptr0 + (xindex), tmp4, xmask)",
            ]
        )
        == 2
    )


def test_interpreted_looped_reduction_over_a_short_symbolic_row_takes_the_row_in_one_block(tmp_path):
    # a symbolic row (dynamic=True) is looped; under the interpreter its block is sized for the
    # row's hint (3 -> 4), not 2048, and the rows per program grow instead
    import torch.nn.functional as F

    if DEVICE != "cpu":
        pytest.skip("the interpreter's single config")
    fn = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)  # noqa: E731
    with config.patch(debug_dir=str(tmp_path)):
        f = torch.compile(fn, backend="tilefuse", dynamic=True)
        for n in (3, 5):
            x, w, b = torch.randn(6, 40, n), torch.randn(n), torch.randn(n)
            torch.testing.assert_close(f(x, w, b), fn(x, w, b), atol=1e-5, rtol=1e-5)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    blocks = [int(b) for b in re.findall(r"'RBLOCK': (\d+)", src)]
    assert blocks and max(blocks) <= 4, blocks


def _variance_family(x):
    return (
        torch.var_mean(x, -1, correction=0),
        torch.var(x, -1, keepdim=True),
        torch.std(x, 0),
        torch.nn.functional.layer_norm(x, x.shape[-1:]),
    )


@pytest.mark.parametrize("mode, cols", [("persistent", 300), ("looped", 300), ("looped", 3000), ("looped", 4097)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_variance_is_a_one_pass_welford_reduction_that_matches_eager(mode, cols, dtype, tmp_path):
    """var / std / var_mean / layer_norm reduce the squared deviations as a sqdev reduction beside
    the mean's sum. Looped, both accumulate in one loop over the row (Welford's update per lane,
    Chan's combine of the lanes after it): a layer norm's kernel has two loops, not three. Rows of
    3000 and 4097 take two and three iterations of the CPU's 2048-element chunks, so the lanes
    hold different counts (the combine's weights). The rows sit far from 0 (mean 1000, spread 1,
    where a one-pass Σx² - (Σx)²/n loses every digit in float32), one row is constant (variance
    exactly 0 in eager; at rounding level on the GPU, below), and rows holding an inf or a NaN
    give a NaN variance as eager. Columns (``std(x, 0)``)
    are an outer reduction over 9 rows."""
    x = (torch.randn(9, cols, dtype=torch.float64) + 1000).to(dtype)
    x[2] = 1000.5
    x[4, cols - 1] = float("inf")
    x[6, cols // 2] = float("nan")
    x = x.to(DEVICE)
    opts = dict(debug_dir=str(tmp_path))
    if mode == "looped":
        opts.update(persistent_reduction_threshold=16)
    with config.patch(**opts):
        metrics.reset()
        got = torch.compile(_variance_family, backend="tilefuse")(x)
    want = _variance_family(x)
    # the mean of the row holding inf is inf (eager on the CPU too); eager's CUDA Welford kernel
    # gives NaN there (inf - inf in its combine)
    assert got[0][1][4].item() == float("inf") and not want[0][1][4].isfinite().item()
    want[0][1][4] = got[0][1][4]
    # the constant row: its variance is exactly 0 on the CPU (exact division). On the GPU Triton's
    # float32 division is not correctly rounded, so its mean may be off by an ulp of 1000.5: the
    # variance is then at rounding level, and the layer norm's (x - mean) / sqrt(eps) up to
    # ulp(1000.5) * 316 ~ 0.02 where eager gives 0 (as the two-pass form did before)
    const_var = (got[0][0][2].item(), got[1][2].item())
    if x.device.type == "cpu" or dtype == torch.float64:
        assert const_var == (0, 0), const_var
    else:
        assert all(0 <= v <= 1e-12 * 1000.5**2 for v in const_var), const_var
        assert got[3][2].abs().max().item() <= 0.05
        want[3][2] = got[3][2]
    # float32: a row's sum near 1000 * cols rounds to ~1e-4 of its mean, which the layer norm's
    # output (x - mean) / std, with std 1, shows as is
    atol, rtol = {torch.float32: (1e-3, 1e-4), torch.bfloat16: (2e-2, 2e-2), torch.float64: (1e-10, 1e-10)}[dtype]
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)
    assert metrics.fallback_kernel_count == 0
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    # each kernel's definition: from its def to the first line back at column 0
    kernels = re.findall(r"^def tf_\w+\(.*?(?=^\S)", src, flags=re.M | re.S)
    ln = [k for k in kernels if "sqdev" in k.split("(")[0] and "rsqrt" in k]
    assert len(ln) == 1, "the layer norm's kernel reduces a sqdev"
    if mode == "looped":
        # the mean's sum and the sqdev in the first loop, the normalized output in the second;
        # var_mean's, var's and the layer norm's reductions of the same row share accumulators
        assert ln[0].count("for roffset") == 2, ln[0]
        assert ln[0].count("roffset // RBLOCK + 1") == 1, ln[0]  # Welford's per-iteration weight
    else:
        assert "for roffset" not in src


def test_variance_of_few_long_rows_splits_its_two_pass_sums():
    """A variance whose sums split (few long rows: one program each would leave the GPU idle)
    keeps the two-pass form, mean then Σ(x - mean)², both split — a sqdev is never split — and
    matches eager; many rows use sqdev."""
    x = torch.randn(2, 16384, device=DEVICE) * 3 + 7
    gs, _ = groups_of(lambda a: torch.var_mean(a, 1), x)
    types = [bn.args[2] for g in gs for n in g.nodes for bn in n.body.nodes if bn.op == "reduction"]
    assert "sqdev" not in types and types.count("sum") >= 4, types  # two split sums: partials + final each
    check(lambda a: torch.var_mean(a, 1), x)
    check(lambda a: torch.var(a), x)
    gs, _ = groups_of(lambda a: torch.var_mean(a, 1), torch.randn(1024, 300))
    types = [bn.args[2] for g in gs for n in g.nodes for bn in n.body.nodes if bn.op == "reduction"]
    assert sorted(types) == ["sqdev", "sum"], types


def _nll_family(x, t, w, x1, t1):
    out = []
    t_default = torch.where(torch.arange(t.shape[0], device=t.device) == 4, -100, t)  # row 4: the default ignore_index
    for red in ("none", "mean", "sum"):
        for weight in (None, w):
            for ign in (-100, 3):
                target = t_default if ign == -100 else t
                out.append(torch.nn.functional.nll_loss(x, target, weight=weight, reduction=red, ignore_index=ign))
                out.append(torch.nn.functional.nll_loss(x1, t1, weight=weight, reduction=red, ignore_index=ign))
    out.append(
        torch.nn.functional.nll_loss(x[:2], torch.full((2,), 3, device=t.device), reduction="mean", ignore_index=3)
    )  # NaN
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("dynamic", [False, True])
def test_nll_loss_forward_is_lowered_whole_and_matches_eager(dtype, dynamic):
    """``nll_loss_forward`` reaches tilefuse's lowering (no fallback, no decomposition): every
    reduction, with and without class weights, a batch [N, C] and a single [C] row, targets equal
    to ``ignore_index`` (one row ignored; a batch whose every target is ignored gives NaN for
    the mean, as eager), in float32, bfloat16 and float64, static and symbolic sizes."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 10, generator=g, dtype=torch.float64).log_softmax(-1).to(dtype).to(DEVICE)
    t = torch.randint(0, 10, (7,), generator=g).to(DEVICE)
    t[2] = 3
    w = torch.rand(10, generator=g, dtype=torch.float64).to(dtype).to(DEVICE)
    x1, t1 = x[5].clone(), torch.tensor(3, device=DEVICE)
    metrics.reset()
    got = torch.compile(_nll_family, backend="tilefuse", dynamic=dynamic)(x, t, w, x1, t1)
    want = _nll_family(x, t, w, x1, t1)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-6
    torch.testing.assert_close(got, want, atol=tol, rtol=tol, equal_nan=True)
    assert torch.isnan(got[-1]).item()
    assert metrics.fallback_kernel_count == 0


def test_cross_entropy_gradient_through_the_nll_loss_lowering():
    """A training cross-entropy: the forward's nll_loss_forward is lowered (its total_weight feeds
    the decomposed backward), loss and gradient match eager, with weights and an ignored row."""
    x = torch.randn(9, 33, device=DEVICE, requires_grad=True)
    t = torch.randint(0, 33, (9,), device=DEVICE)
    t[1] = 5
    w = torch.rand(33, device=DEVICE)
    f = lambda a, b, c: torch.nn.functional.cross_entropy(a, b, weight=c, ignore_index=5)  # noqa: E731
    metrics.reset()
    got = torch.compile(f, backend="tilefuse")(x, t, w)
    want = f(x, t, w)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    (gg,) = torch.autograd.grad(got, x)
    (gw,) = torch.autograd.grad(want, x)
    torch.testing.assert_close(gg, gw, atol=1e-5, rtol=1e-5)
    assert metrics.fallback_kernel_count == 0


def _layer_norms(x, w, b, w2):
    aten = torch.ops.aten
    return (
        aten.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5),
        aten.native_layer_norm(x, [x.shape[-1]], None, b, 1e-3),
        aten.native_layer_norm(x, [x.shape[-1]], w, None, 1e-5),
        aten.native_layer_norm(x, list(x.shape[-2:]), w2, None, 1e-5),
        torch.nn.functional.layer_norm(x.transpose(0, 1), (x.shape[-1],)),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("dynamic", [False, True])
def test_native_layer_norm_lowered_whole_matches_eager(dtype, dynamic):
    """An inference graph's ``native_layer_norm`` reaches ``_native_layer_norm`` whole: output,
    mean and rstd (their dtype too: the computation dtype, or ``x``'s on the CPU) match eager
    with and without weight and bias, over one and two trailing dims, and of a transposed input,
    static and symbolic; a half input with float32 weight and bias too (its mean and rstd stay
    float32, not converted to the half dtype)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4, 6, 48, generator=g, dtype=torch.float64) * 2 + 3).to(dtype).to(DEVICE)
    w, b = [torch.randn(48, generator=g, dtype=torch.float64).to(dtype).to(DEVICE) for _ in range(2)]
    w2 = torch.randn(6, 48, generator=g, dtype=torch.float64).to(dtype).to(DEVICE)
    metrics.reset()
    got = torch.compile(_layer_norms, backend="tilefuse", dynamic=dynamic)(x, w, b, w2)
    want = _layer_norms(x, w, b, w2)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float64: 1e-10}[dtype]
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    assert [t.dtype for t in got[0]] == [t.dtype for t in want[0]]
    assert metrics.fallback_kernel_count == 0
    if dtype in (torch.bfloat16, torch.float16) and x.device.type == "cpu":
        # a half input with float32 weight and bias: mean and rstd as eager's CPU kernel gives them
        # (float32); eager's CUDA kernel rejects the mixed dtypes
        f = lambda a, c, d: torch.ops.aten.native_layer_norm(a, [a.shape[-1]], c, d, 1e-5)  # noqa: E731
        torch._dynamo.reset()
        got = torch.compile(f, backend="tilefuse", dynamic=dynamic)(x, w.float(), b.float())
        want = f(x, w.float(), b.float())
        assert [t.dtype for t in got] == [t.dtype for t in want], ([t.dtype for t in got], [t.dtype for t in want])
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_looped_variance_is_accurate_far_from_zero_and_exact_on_constant_rows():
    """A looped sqdev takes the values relative to the row's first one. Unshifted, float32 lanes
    whose running means sat near 1e4 lost up to 2e-4 of the variance of rows with spread 1 (a
    ``dynamic=True`` graph first compiled for rows of 17, so later rows of 3000 run in 32-element
    chunks; the two-pass form had 7e-7). Shifted, the error is at float32 rounding, and a looped
    constant row's variance is exactly 0."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 3000, generator=g, dtype=torch.float64) + 1e4).float().to(DEVICE)
    x[5] = 10000.1
    ref = torch.var(x.double(), -1)
    cf = torch.compile(lambda a: torch.var(a, -1), backend="tilefuse", dynamic=True)
    cf(torch.randn(64, 17, device=DEVICE))  # sizes the looped kernel's chunks for short rows
    # symbolic rows are looped (exactly 0 for the constant row); static rows of 3000 are
    # persistent, two-pass from the registers (the mean's float32 division may leave the
    # constant row at rounding level on the GPU, see the variance test above)
    for got, looped in ((cf(x), True), (torch.compile(lambda a: torch.var(a, -1), backend="tilefuse")(x), False)):
        spread = torch.arange(x.shape[0], device=x.device) != 5  # row 5 is constant: checked below
        rel = ((got.double() - ref).abs() / ref.clamp(min=1e-30))[spread].max().item()
        assert rel <= 2e-6, (rel, looped)
        assert got[5].item() == 0 if looped or x.device.type == "cpu" else 0 <= got[5].item() <= 1e-4
    with config.patch(persistent_reduction_threshold=16):
        torch._dynamo.reset()
        got = torch.compile(lambda a: torch.var(a, -1), backend="tilefuse")(x)
    assert ((got.double() - ref).abs() / ref.clamp(min=1e-30)).max().item() <= 2e-6
    assert got[5].item() == 0


@pytest.mark.parametrize("mode", ["persistent", "looped", "dynamic"])
def test_variance_and_layer_norm_of_rows_with_a_first_element_outlier_match_eager(mode):
    """A row whose first element is far from the rest (a large activation in channel 0) keeps
    float32's accuracy: mean, variance and layer norm within a few 1e-7 of float64, as eager. A
    mean taken relative to the first element (x0 + Σ(x - x0) / n, which would make constant rows
    exact) sums n values of about -x0 and gives layer norm errors of 1e-2 relative and var_mean's
    mean off by 1e-3 relative, which is why the mean is not shifted. Values near float32's
    largest, whose differences overflow, give the CPU kernel's var inf and mean 0."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3000, generator=g, dtype=torch.float64).float()
    x[:4, 0] = 1e4
    x[4:, 0] = 1e7
    x[4:, 1:] = x[4:, 1:] * 0.01 + 1e4
    x = x.to(DEVICE)
    ref_var, ref_mean = torch.var_mean(x.double(), -1)
    ln = lambda a: torch.nn.functional.layer_norm(a, a.shape[-1:])  # noqa: E731
    opts = dict(persistent_reduction_threshold=16) if mode == "looped" else {}
    with config.patch(**opts):
        torch._dynamo.reset()
        (var, mean), out = torch.compile(
            lambda a: (torch.var_mean(a, -1), ln(a)), backend="tilefuse", dynamic=mode == "dynamic"
        )(x)
    assert ((mean.double() - ref_mean).abs() / ref_mean.abs()).max().item() <= 1e-6
    assert ((var.double() - ref_var).abs() / ref_var).max().item() <= 1e-5
    ref_out = ln(x.double())
    assert (out.double() - ref_out)[:4, 1:].abs().max().item() <= 1e-7  # outputs of about 0.02
    assert ((out.double() - ref_out).abs() / ref_out.abs().clamp(min=1e-3)).max().item() <= 1e-5
    big = torch.tensor([[3e38, -3e38], [-3e38, 3e38]], device=DEVICE)
    torch._dynamo.reset()
    got = torch.compile(lambda a: torch.var_mean(a, -1), backend="tilefuse")(big)
    # against the CPU kernel's (var inf, mean 0): CUDA's Welford combine overflows in the mean too
    # (its mean of 3e38 and -3e38 is infinite)
    torch.testing.assert_close([t.cpu() for t in got], list(torch.var_mean(big.cpu(), -1)))


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")  # eager's, for 3.7 on rows of 3
@pytest.mark.parametrize("correction", [0.5, 2.5, 3.7])
def test_fractional_corrections_divide_by_a_float(correction):
    """torch takes any float ``correction``: the divisor is ``max(n - correction, 0)``, not
    truncated to an integer (rows of 3: 0.5 divided by 2 instead of 2.5, 2.5 by 0)."""
    x = torch.randn(4, 3, device=DEVICE)
    for dynamic in (False, True):
        torch._dynamo.reset()
        f = lambda a: (torch.var(a, 1, correction=correction), torch.std_mean(a, 1, correction=correction))  # noqa: E731
        got = torch.compile(f, backend="tilefuse", dynamic=dynamic)(x)
        torch.testing.assert_close(got, f(x), equal_nan=True)


def test_variance_of_an_integer_tensor_raises_eagers_error():
    """var / std of an integer tensor are refused by eager; the lowering leaves them to the aten
    kernel, which raises the same error when the graph runs (it returned an integer tensor)."""
    x = torch.arange(12, device=DEVICE).reshape(3, 4)
    for f in (lambda a: torch.var(a, -1), lambda a: torch.std(a.to(torch.int32), 0)):
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match="std and var only support floating point"):
            f(x)
        with pytest.raises(RuntimeError, match="std and var only support floating point"):
            torch.compile(f, backend="tilefuse")(x)
