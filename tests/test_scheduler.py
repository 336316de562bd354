"""Scheduler: dependencies (MemoryDep / StarDep) and the horizontal-fusion rule that a node may
move earlier only past items that write nothing it reads."""

from __future__ import annotations

import logging

import torch

from tilefuse import symbolic as S
from _tf_testutil import scheduled as _scheduled
from tilefuse.scheduler import ExternSchedulerNode, KernelGroup, MemoryDep, StarDep


def scheduled(fn, *args, decompose=False):
    return _scheduled(fn, *args, decompose=decompose)[0]


def test_dependencies_of_a_reduction_and_an_extern_kernel():
    items = scheduled(lambda a, w: ((a * 2).sum(1), a @ w), torch.randn(4, 8), torch.randn(8, 3))
    groups = [i for i in items if isinstance(i, KernelGroup)]
    red = [n for g in groups for n in g.nodes if n.is_reduction()][0]
    i0, r0 = S.sym("i0"), S.sym("r0")
    (load,) = red.read_deps()
    assert isinstance(load, MemoryDep) and load.index == 8 * i0 + r0
    assert dict(load.ranges) == {i0: 4, r0: 8}
    (store,) = red.write_deps()
    assert store.index == i0
    ext = [i for i in items if isinstance(i, ExternSchedulerNode)][0]
    assert ext.read_deps() == [StarDep("arg0"), StarDep("arg1")]
    assert ext.write_deps() == [StarDep(ext.name)]


def test_independent_node_moves_back_past_an_extern_kernel_but_a_dependent_one_does_not():
    def f(a, w):
        b = a.sin() * 2  # pointwise over 32, realized as the mm's input
        c = b @ w  # extern (4 x 5): reads b
        e = c.sum()  # reduction over c's 20 elements
        d = a.cos() + 1  # pointwise over 32, reads only a: moves back into b's kernel
        g = c * 3  # reads the extern's result: stays after it
        return c, d, e, g

    items = scheduled(f, torch.randn(4, 8), torch.randn(8, 5))
    kinds = ["K" if isinstance(i, KernelGroup) else "E" for i in items]
    assert kinds[0] == "K" and kinds[1] == "E"
    first = items[0]
    assert len(first.nodes) == 2 and all(n.numel == 32 for n in first.nodes)
    later = [n for i in items[2:] if isinstance(i, KernelGroup) for n in i.nodes]
    assert {n.numel for n in later} == {1, 20}


def test_a_fused_kernel_takes_at_most_max_fusion_size_nodes():
    """Inductor's max_fusion_size: 150 outputs over one iteration space would all fit one kernel;
    they are cut into kernels of at most MAX_FUSION_SIZE nodes, and the results still match eager."""
    from tilefuse import config

    def f(*xs):
        return tuple(x * (k + 1) + 1 for k, x in enumerate(xs))

    xs = [torch.randn(8, 16) for _ in range(150)]
    items = scheduled(f, *xs)
    sizes = [len(i.nodes) for i in items if isinstance(i, KernelGroup)]
    assert sum(sizes) == 150 and max(sizes) == config.MAX_FUSION_SIZE and len(sizes) == 3

    compiled = torch.compile(f, backend="tilefuse")
    for got, want in zip(compiled(*xs), f(*xs)):
        torch.testing.assert_close(got, want)


def test_an_outer_reduction_takes_no_pointwise_in_loop_node_but_an_inner_one_does():
    """A column sum (outer: contiguous along the outputs) and a pointwise node over the whole
    input: the pointwise node's flat order runs along the rows, so it gets a kernel of its own.
    The same pointwise node beside a row sum (inner) shares the reduction's loop and loads."""
    from tilefuse.scheduler import node_reduction_hint

    def f(x, g, dim):
        y = x * g
        return y.sum(dim), y * 2 + x  # y realized: two readers

    x, g = torch.randn(64, 48), torch.randn(64, 48)
    for dim, hint in ((0, "outer"), (1, "inner")):
        items = scheduled(lambda a, b: f(a, b, dim), x, g)
        groups = [i for i in items if isinstance(i, KernelGroup)]
        red = [gr for gr in groups if any(n.is_reduction() for n in gr.nodes)]
        assert len(red) == 1
        (r,) = [n for n in red[0].nodes if n.is_reduction()]
        assert node_reduction_hint(r) == hint
        xr = [n for gr in groups for n in gr.nodes if gr.rnumel != 1 and gr.maps[n][0] == "xr"]
        if hint == "outer":
            assert not xr and len(groups) == 2  # the pointwise work in a 1-D kernel of its own
        else:
            assert xr and len(groups) == 1
        compiled = torch.compile(lambda a, b: f(a, b, dim), backend="tilefuse")
        for got, want in zip(compiled(x, g), f(x, g, dim)):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_layer_norm_backward_dx_joins_its_row_reduction_not_the_weight_gradient_column_sums():
    import torch.nn.functional as F
    from tilefuse.scheduler import node_reduction_hint

    def f(x, w, b, g):
        x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
        return torch.autograd.grad(F.layer_norm(x, (48,), w, b), (x, w, b), g)

    args = (torch.randn(64, 48), torch.randn(48), torch.randn(48), torch.randn(64, 48))
    groups = [i for i in scheduled(f, *args, decompose=True) if isinstance(i, KernelGroup)]
    hints = [{node_reduction_hint(n) for n in gr.nodes if n.is_reduction()} for gr in groups]
    has_xr = [any(gr.maps[n][0] == "xr" for n in gr.nodes) for gr in groups]
    assert any("outer" in h for h in hints) and any("inner" in h for h in hints)
    # the weight and bias gradients' column sums take no pointwise-in-loop node; dx sits with the
    # per-row sums
    assert not any("outer" in h and x for h, x in zip(hints, has_xr))
    assert any("inner" in h and x for h, x in zip(hints, has_xr))
    # and the compiled gradients match eager
    x, w, b, g = args
    xs = [t.clone().requires_grad_() for t in (x, w, b)]
    out = torch.compile(lambda a, c, d: F.layer_norm(a, (48,), c, d), backend="tilefuse")(*xs)
    got = torch.autograd.grad(out, xs, g)
    for gt, wt in zip(got, f(x, w, b, g)):
        torch.testing.assert_close(gt, wt, atol=1e-4, rtol=1e-4)


def test_a_pointwise_node_joins_its_producer_rather_than_an_unrelated_reduction_loop():
    """Buffers in order: row sums of x (64 rows), a full sum of y (one output, 64 elements), then
    t = 2·rowsum, a graph output. t fits both kernels: inside the full sum's loop (its 64 elements
    are that loop's elements) or as the row-sum kernel's epilogue. The full sum writes nothing t
    reads, so t goes to its producer (``loop_guest``): run in the one-program loop, its work would
    not be spread over the GPU."""

    def f(x, y):
        s = x.sum(1)
        c = y.sum()
        return c, s * 2

    x, y = torch.randn(64, 300), torch.randn(64)
    groups = [i for i in scheduled(f, x, y) if isinstance(i, KernelGroup)]
    assert sorted((g.numel, g.rnumel, len(g.nodes)) for g in groups) == [(1, 64, 1), (64, 300, 2)]
    (rows,) = [g for g in groups if g.numel == 64]
    assert [rows.maps[n][0] for n in rows.nodes if not n.is_reduction()] == ["x"]
    compiled = torch.compile(f, backend="tilefuse")
    for got, want in zip(compiled(x, y), f(x, y)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_node_joins_a_kernel_beyond_the_lookback_that_shares_its_buffers():
    """Ten kernels over other iteration spaces separate the row sums of x from two late nodes:
    t = 2·rowsum (reads the sums) and u = 3·x (reads x, which the row-sum kernel reads). Both are
    beyond FUSION_LOOKBACK, nothing after the row-sum kernel writes what they read, so they join
    it (``Placement.far_kernel``: t as its epilogue, u in its loop) instead of a new kernel at the end —
    AOTAutograd's saved values and converted gradients sit that far from their producers. The
    results match eager."""
    from tilefuse import config

    def f(x, *ys):
        s = x.sum(1)
        outs = [y.cos().sum(0) for y in ys]
        return (s * 2, x * 3, *outs)

    x = torch.randn(64, 300)
    ys = [torch.randn(3, 5 + k) for k in range(config.FUSION_LOOKBACK + 2)]
    groups = [i for i in scheduled(f, x, *ys) if isinstance(i, KernelGroup)]
    assert len(groups) == 1 + len(ys)
    (rows,) = [g for g in groups if (g.numel, g.rnumel) == (64, 300)]
    assert sorted(rows.maps[n][0] for n in rows.nodes) == ["red", "x", "xr"]
    compiled = torch.compile(f, backend="tilefuse")
    for got, want in zip(compiled(x, *ys), f(x, *ys)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def test_a_far_node_does_not_join_the_loop_of_a_reduction_over_few_rows():
    """The far-kernel rule keeps ``loop_guest``'s reason: y·2 shares y with the full sum of y
    (one output) ten kernels back, but inside that sum's loop it would run on one program; it
    gets a kernel of its own (or another fit), never the one-output reduction's loop."""
    from tilefuse import config

    def f(y, *zs):
        c = y.sum()
        outs = [z.cos().sum(0) for z in zs]
        return (c, y * 2, *outs)

    y = torch.randn(8, 300)  # 2400 elements: one unsplit reduction
    zs = [torch.randn(3, 5 + k) for k in range(config.FUSION_LOOKBACK + 2)]
    groups = [i for i in scheduled(f, y, *zs) if isinstance(i, KernelGroup)]
    (full,) = [g for g in groups if g.numel == 1 and g.rnumel == 8 * 300]
    assert len(full.nodes) == 1
    compiled = torch.compile(f, backend="tilefuse")
    for got, want in zip(compiled(y, *zs), f(y, *zs)):
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-5)


# ------------------------------------------------------------------- ordering for peak memory


def _two_products(g, w, h):
    """A linear layer's backward in graph order: the input gradient ([T, H]) before the weight
    gradient ([C, H]), whose product is the last use of the saved activation ``h`` ([T, H])."""
    gi = g @ w.t()
    gw = g.t() @ h
    return gi, gw, w  # w returned: held by the caller, never freed


def _mm_inputs():
    T, C, H = 64, 16, 48
    return torch.randn(T, C), torch.randn(H, C), torch.randn(T, H)


def test_the_weight_gradient_runs_first_when_it_frees_the_saved_activation(caplog):
    from tilefuse import config
    from tilefuse.scheduler import memory as SCH
    from tilefuse.ir import graph_context as G

    args = _mm_inputs()
    with config.patch(reorder_for_peak_memory=False):
        items, graph = _scheduled(_two_products, *args)
    externs = [i for i in items if isinstance(i, ExternSchedulerNode)]
    assert [sorted(i.read_names()) for i in externs] == [["arg0", "arg1"], ["arg0", "arg2"]]
    with G.set_graph(graph):
        model = SCH._memory_model(items, graph)
        greedy = SCH._least_peak_first(model)
        in_graph_order = SCH.estimate_peak_memory(list(range(len(items))), model)
        # graph order: [T, H] and [C, H] allocated, then h ([T, H]) freed
        assert in_graph_order == (64 * 48 + 16 * 48) * 4
        # reordered: [C, H] allocated, h freed, then [T, H] in its place
        assert SCH.estimate_peak_memory(greedy, model) == 16 * 48 * 4
        assert SCH._graph_order_hoisting_frees(model) == [1, 0]
        # with every input held by the caller the two orders peak alike: the reorder is allowed
        assert (
            SCH.estimate_peak_memory(greedy, model, inputs_freed=False)
            == SCH.estimate_peak_memory([0, 1], model, inputs_freed=False)
            == (64 * 48 + 16 * 48) * 4
        )
        with caplog.at_level(logging.DEBUG, logger="tilefuse"):
            reordered = SCH.order_for_peak_memory(items, graph)
    assert [sorted(i.read_names()) for i in reordered if isinstance(i, ExternSchedulerNode)] == [
        ["arg0", "arg2"],
        ["arg0", "arg1"],
    ]
    # the reorder is logged at debug level with the items moved and both estimated peaks (MiB)
    (msg,) = [r.getMessage() for r in caplog.records if "peak-memory order" in r.getMessage()]
    moved = sum(1 for a, b in zip(items, reordered) if a is not b)
    assert f"moves {moved} of {len(items)} items" in msg and moved >= 2
    assert "15.0 KiB -> 3.0 KiB" in msg and in_graph_order == 15 * 1024, msg
    assert [SCH._readable_bytes(n) for n in (0, 1023, 1536, 128 * 2**20, -3 * 2**30)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "128.0 MiB",
        "-3.0 GiB",
    ]
    with config.patch(reorder_for_peak_memory=True):  # schedule() applies it when the option is on
        items2, _ = _scheduled(_two_products, *args)
        out = torch.compile(_two_products, backend="tilefuse")(*args)
    assert [sorted(i.read_names()) for i in items2 if isinstance(i, ExternSchedulerNode)] == [
        ["arg0", "arg2"],
        ["arg0", "arg1"],
    ]
    for a, b in zip(out, _two_products(*args)):
        torch.testing.assert_close(a, b)


def test_no_reorder_that_would_raise_the_peak_when_the_caller_holds_the_inputs():
    """Freeing a graph input early saves memory only if the caller holds no other reference. Here
    the greedy order would run ``p`` first (the last use of ``x``) and keep its result alive across
    the [512, 512] temporaries: lower if ``x`` is freed, higher while the caller holds ``x`` (2.5
    against 2.0 MiB allocated by the call). Graph order stays."""
    from tilefuse import config
    from tilefuse.scheduler import memory as SCH
    from tilefuse.ir import graph_context as G

    def f(x, y):
        q = y[:, None] * y[None, :] + 1
        r = torch.mm(q, q).sum(1)
        p = x[:, :32] * 2
        return r, p

    args = (torch.randn(4096, 64), torch.randn(512))
    with config.patch(reorder_for_peak_memory=False):
        items, graph = _scheduled(f, *args)
    with G.set_graph(graph):
        model = SCH._memory_model(items, graph)
        greedy = SCH._least_peak_first(model)
        graph_order = list(range(len(items)))
        assert greedy != graph_order
        assert SCH.estimate_peak_memory(greedy, model) < SCH.estimate_peak_memory(graph_order, model)
        assert SCH.estimate_peak_memory(greedy, model, inputs_freed=False) > SCH.estimate_peak_memory(
            graph_order, model, inputs_freed=False
        )
        assert SCH.order_for_peak_memory(items, graph) is items


def test_graph_order_is_kept_when_the_greedy_order_is_no_better():
    from tilefuse.scheduler import order_for_peak_memory

    def f(a, b):
        return (a.sin() @ b).cos(), (a * 2).sum()

    items, graph = _scheduled(f, torch.randn(8, 8), torch.randn(8, 8))
    from tilefuse.ir import graph_context as G

    with G.set_graph(graph):
        assert order_for_peak_memory(items, graph) is items


def _brute_force_peak(order, model, inputs_freed=True):
    """The peak as a set of live buffers recomputed at every step (no running sums)."""
    pos = {p: k for k, p in enumerate(order)}
    created = {}
    for p in order:
        for b in model.produced[p]:
            created[b] = pos[p]
    peak = 0
    for k, p in enumerate(order):

        def last(b):
            rs = model.readers.get(b)
            return max(pos[r] for r in rs) if rs else created.get(b, -1)

        live = sum(model.alloc[q] for q in order[: k + 1])
        # freed before or at this step: buffers (and inputs) whose last reader ran earlier
        live -= sum(
            s
            for b, s in model.size_free.items()
            if last(b) < k and (b in created or b in model.readers) and (inputs_freed or b not in model.inputs)
        )
        # in place: a dying input of this step whose memory an output takes
        live -= sum(model.size_free[r] for r in model.inplace[p] if last(r) == k)
        peak = max(peak, live)
    return peak


def test_peak_estimate_and_greedy_order_on_random_graphs_against_brute_force():
    """Random DAGs of items (each producing one buffer read by later items, some graph inputs):
    the greedy and the hoisting orders are topological orders of the dependencies, and the peak
    estimate (inputs freed or held) equals a brute-force recomputation of the live set at each
    step."""
    import random

    from tilefuse.scheduler.memory import (
        _graph_order_hoisting_frees,
        _least_peak_first,
        _MemoryModel,
        estimate_peak_memory,
    )

    rng = random.Random(0)
    for trial in range(200):
        n = rng.randint(2, 6)
        reads = [set() for _ in range(n)]
        preds = [set() for _ in range(n)]
        for i in range(n):
            for j in range(i):
                if rng.random() < 0.4:
                    reads[i].add(f"b{j}")
                    preds[i].add(j)
            if rng.random() < 0.5:
                reads[i].add(f"in{i % 2}")
        alloc = [rng.choice([0, 4, 16, 64]) for _ in range(n)]
        size_free = {f"b{i}": alloc[i] for i in range(n) if rng.random() < 0.8}
        size_free.update({"in0": 32, "in1": 8})
        readers = {}
        for i, rs in enumerate(reads):
            for r in rs:
                readers.setdefault(r, set()).add(i)
        produced = [{f"b{i}"} for i in range(n)]
        inplace = [
            [r for r in sorted(reads[i]) if r.startswith("b") and size_free.get(r) == alloc[i] and alloc[i]][:1]
            for i in range(n)
        ]
        model = _MemoryModel(preds, alloc, reads, size_free, readers, produced, inplace, {"in0", "in1"})
        greedy = _least_peak_first(model)
        hoisted = _graph_order_hoisting_frees(model)
        for order in (greedy, hoisted):
            assert sorted(order) == list(range(n))
            assert all(preds[p] <= set(order[:k]) for k, p in enumerate(order)), (trial, order, preds)
            for freed in (True, False):
                assert estimate_peak_memory(order, model, inputs_freed=freed) == _brute_force_peak(
                    order, model, inputs_freed=freed
                ), (trial, freed)
        assert sorted(greedy) == list(range(n))
        seen = set()
        for p in greedy:
            assert preds[p] <= seen, (trial, greedy, preds)
            seen.add(p)
        assert estimate_peak_memory(greedy, model) == _brute_force_peak(greedy, model), trial
        assert estimate_peak_memory(list(range(n)), model) == _brute_force_peak(list(range(n)), model), trial


def test_fallback_kernels_keep_their_graph_order_and_results_match_eager():
    """Two draws from torch's generator by fallback kernels (``multinomial`` has no lowering) with
    an independent product between them that the memory order runs first (its input's last use
    frees more than it allocates): the product moves, the fallbacks keep their graph order, so
    seeded results equal eager's."""

    def f(p, q, a, b):
        x = torch.multinomial(p, 50)  # [2048, 50] int64: 800 KiB
        small = a.t() @ b  # [4, 1024]: the last use of b (1 MiB)
        y = torch.multinomial(q, 50)
        return x, small, y, a

    from tilefuse import config

    args = (torch.rand(2048, 50), torch.rand(2048, 50), torch.randn(256, 4), torch.randn(256, 1024))
    with config.patch(reorder_for_peak_memory=True):
        items, graph = _scheduled(f, *args)
        torch.manual_seed(3)
        out = torch.compile(f, backend="tilefuse")(*args)
    kinds = [
        "multinomial" if "multinomial" in str(i.buf.op) else "mm"
        for i in items
        if isinstance(i, ExternSchedulerNode) and hasattr(i.buf, "op")
    ]
    names = [
        i.name for i in items if isinstance(i, ExternSchedulerNode) and "multinomial" in str(getattr(i.buf, "op", ""))
    ]
    assert kinds[0] == "mm" and kinds.count("multinomial") == 2  # the product moved first
    assert names == sorted(names, key=lambda n: int(n[3:]))  # the draws in graph order
    torch.manual_seed(3)
    ref = f(*args)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
