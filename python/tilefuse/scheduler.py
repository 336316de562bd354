"""Scheduler: buffers -> fused kernel groups (Inductor's ``scheduler.py`` with simd.py's rules).

Every ComputedBuffer becomes a ``SchedulerNode``: its store function traced into a LoopBody over
index variables ``i*`` (and reduction variables ``r*``), with its group ``(numel, rnumel)``. Extern
and fallback kernels are ``ExternSchedulerNode``s and are never fused.

Fusion (in graph order, which is topological): a node joins the current kernel when its group
fits the kernel's ``(numel, rnumel)`` — the same group; a pointwise node of ``numel·rnumel``
elements in a reduction kernel (a prologue / main-body node, computed inside the reduction loop);
a pointwise node of ``numel`` elements after a reduction (an epilogue) — and every value it reads
from a buffer written earlier in the kernel is read at exactly the index it was written (the
MemoryDep of the read equals that of the write), so the value can stay in registers.

Indices of every node are rewritten over the kernel's two flat index symbols ``xindex`` (range
numel) and ``rindex`` (range rnumel) and simplified with ``simplify_with_ranges`` (native core).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from . import sizevars as SV
from . import symbolic as S
from .ir import nodes as ir
from .ir.nodes import digits  # noqa: F401  (re-exported: codegen and tests use it from here)
from .ir.loop_body import LoopBody
from .ir import graph_context as G

log = logging.getLogger("tilefuse")

XINDEX = S.sym("xindex")
# reductions with fewer output rows than FEW_ROWS, each longer than LONG_ROW, run on too few programs
# to carry fused pointwise work (a split reduction would parallelize them; see docs/backend.md)
FEW_ROWS = 64
LONG_ROW = 32768
RINDEX = S.sym("rindex")


@dataclass(frozen=True)
class MemoryDep:
    """A read or write of buffer ``name`` at ``index`` (an Expr over the node's loop variables),
    the loop variables ranging over ``ranges`` ((var, size) pairs) — Inductor's MemoryDep. Fusion
    compares them after mapping both sides onto the kernel's index symbols: a value can stay in
    registers only when the read's index equals the write's."""

    name: str
    index: Any
    ranges: tuple


@dataclass(frozen=True)
class StarDep:
    """A dependency on the whole of buffer ``name`` (Inductor's StarDep): the inputs of an extern
    or fallback kernel, the target of an in-place (atomic) update, an extern op that mutates its
    arguments. No index, so never satisfied from registers.

    (Inductor's WeakDep — "run after the readers of the old value" — has no counterpart: nodes
    only ever move earlier than graph order, never past an item that writes what they read, and
    in-place kernels never move.)"""

    name: str


@dataclass(eq=False)
class SchedulerNode:
    """A ComputedBuffer to be generated as (part of) a Triton kernel."""

    buf: ir.ComputedBuffer
    body: LoopBody
    sizes: list[int]
    rsizes: list[int]

    @property
    def name(self) -> str:
        return self.buf.name

    @property
    def numel(self) -> int:
        return ir.prod(self.sizes)

    @property
    def rnumel(self) -> int:
        return ir.prod(self.rsizes) if self.rsizes else 1

    def is_reduction(self) -> bool:
        return bool(self.rsizes)

    def read_deps(self) -> list:
        """MemoryDeps of the loads, plus a StarDep on the target of an in-place update (it must
        exist, initialized, and stay alive here)."""
        ranges = tuple(self.body.var_ranges.items())
        deps: list = [MemoryDep(n, e, ranges) for n, e in self.body.loads()]
        if self.is_mutation():
            deps.append(StarDep(self.buf.target.name))
        return deps

    def write_deps(self) -> list:
        """MemoryDeps of the stores, plus a StarDep on the target of an in-place update."""
        ranges = tuple(self.body.var_ranges.items())
        deps: list = [MemoryDep(n, e, ranges) for n, e in self.body.stores()]
        if self.is_mutation():
            deps.append(StarDep(self.buf.target.name))
        return deps

    def read_names(self) -> set[str]:
        return {d.name for d in self.read_deps()}

    def is_mutation(self) -> bool:
        return isinstance(self.buf, ir.MutationBuffer)

    @staticmethod
    def create(buf: ir.ComputedBuffer) -> "SchedulerNode":
        # a reduction (or scan) iterates over its kept dims; a scan's buffer is larger than that
        sizes = list(buf.data.ranges) if buf.is_reduction() else list(buf.get_size())
        iv = [S.sym(f"i{k}") for k in range(len(sizes))]
        ranges = dict(zip(iv, sizes))
        if buf.is_reduction():
            rsizes = list(buf.data.reduction_ranges)
            rv = [S.sym(f"r{k}") for k in range(len(rsizes))]
            ranges.update(zip(rv, rsizes))
            body = LoopBody.trace(buf.store_fn(), iv, rv, ranges, G.dtype_of)
        else:
            rsizes = []
            body = LoopBody.trace(buf.store_fn(), iv, [], ranges, G.dtype_of)
        return SchedulerNode(buf, body, sizes, rsizes)

    def mapping(self, numel: int, rnumel: int) -> tuple[str, dict] | None:
        """How this node sits in a kernel of (numel, rnumel): (kind, var -> kernel index expr),
        kind 'x' (pointwise over xindex), 'xr' (pointwise over xindex·rnumel + rindex) or 'red'
        (a reduction); None when it does not fit."""
        iv, rv = self.body.iter_vars, self.body.reduce_vars
        if self.is_reduction():
            if (self.numel, self.rnumel) != (numel, rnumel):
                return None
            m = dict(zip(iv, digits(XINDEX, self.sizes)))
            m.update(zip(rv, digits(RINDEX, self.rsizes)))
            return "red", m
        if self.numel == numel:
            return "x", dict(zip(iv, digits(XINDEX, self.sizes)))
        if rnumel != 1 and self.numel == numel * rnumel:
            # one output row: xindex is 0 (so that the node's index equals a reduction's rindex)
            flat = RINDEX if numel == 1 else XINDEX * rnumel + RINDEX
            return "xr", dict(zip(iv, digits(flat, self.sizes)))
        return None


@dataclass(eq=False)
class ExternSchedulerNode:
    """An extern / fallback kernel call, or one output of a multi-output one."""

    buf: ir.Buffer

    @property
    def name(self) -> str:
        return self.buf.name

    def read_deps(self) -> list[StarDep]:
        """A StarDep per input buffer (a MultiOutput reads its parent kernel's result)."""
        if isinstance(self.buf, ir.MultiOutput):
            return [StarDep(self.buf.parent.name)]
        return [
            StarDep(i.get_name() if isinstance(i, ir.ReinterpretView) else i.name)
            for i in getattr(self.buf, "inputs", [])
        ]

    def write_deps(self) -> list[StarDep]:
        """Its own buffer, and every input when the op's schema mutates its arguments
        (conservatively: which argument is not tracked)."""
        deps = [StarDep(self.name)]
        schema = getattr(getattr(self.buf, "op", None), "_schema", None)
        if schema is not None and schema.is_mutable:
            deps += self.read_deps()
        return deps

    def read_names(self) -> set[str]:
        return {d.name for d in self.read_deps()}


@dataclass(eq=False)
class KernelGroup:
    """Nodes fused into one Triton kernel over (numel, rnumel)."""

    nodes: list[SchedulerNode]
    numel: int
    rnumel: int
    # node -> (kind, var map); index expressions over xindex/rindex
    maps: dict = field(default_factory=dict)

    def names(self) -> set[str]:
        return {n.name for n in self.nodes}


def _mapped(expr, m: dict, numel: int, rnumel: int):
    e = expr.subs(m) if m else expr
    ranges = {XINDEX: numel}
    if rnumel != 1:
        ranges[RINDEX] = rnumel
    return S.simplify_with_ranges(e, ranges)


def _index_map(node: SchedulerNode, numel: int, rnumel: int):
    """(kind, var map, loads, stores) of ``node`` in a kernel of (numel, rnumel), or None; cached
    on the node (fusion tries the same node against several groups)."""
    cache = node.__dict__.setdefault("_index_maps", {})
    key = (numel, rnumel)
    if key not in cache:
        mp = node.mapping(numel, rnumel)
        if mp is None:
            cache[key] = None
        else:
            kind, m = mp
            loads = [(n, _mapped(e, m, numel, rnumel)) for n, e in node.body.loads()]
            stores = [(n, _mapped(e, m, numel, rnumel)) for n, e in node.body.stores()]
            cache[key] = (kind, m, loads, stores)
    return cache[key]


def _outer_mix(group: KernelGroup, node: SchedulerNode, maps: dict) -> bool:
    """Whether ``node`` would bring a pointwise-in-loop node to a kernel with an outer reduction,
    or an outer reduction to a kernel with pointwise-in-loop nodes."""
    if maps[node][0] == "xr":
        return any(n.is_reduction() and node_reduction_hint(n) == "outer" for n in group.nodes)
    if node.is_reduction() and node_reduction_hint(node) == "outer":
        return any(maps[n][0] == "xr" for n in group.nodes)
    return False


def node_reduction_hint(node: SchedulerNode) -> str:
    """``node.body.reduction_hint()`` (Inductor's ReductionHint: inner, outer or default), cached
    on the node."""
    h = node.__dict__.get("_reduction_hint")
    if h is None:
        h = node.__dict__["_reduction_hint"] = node.body.reduction_hint()
    return h


# At most this many nodes per fused kernel (Inductor's ``config.max_fusion_size``, default 64).
# Triton's compile time grows faster than the kernel's size: in the 12-layer GPT training step the
# forward graph's stores of saved statistics, fused across all 12 layers into one kernel of 149
# arguments, took 2.07 s per config to compile on the H200 host, the longest job of the whole
# compile; its memory traffic is the same split over several kernels.
MAX_FUSION_SIZE = 64


def _try_fuse(group: KernelGroup, node: SchedulerNode) -> KernelGroup | None:
    """The group extended by ``node``, or None when they cannot share a kernel (different
    iteration spaces, a read that cannot stay in registers, or ``MAX_FUSION_SIZE`` nodes already)."""
    if len(group.nodes) >= MAX_FUSION_SIZE:
        return None
    if node.is_reduction():
        numel, rnumel = node.numel, node.rnumel
        if group.rnumel != 1 and (group.numel, group.rnumel) != (numel, rnumel):
            return None
        if group.rnumel == 1 and group.numel != numel * rnumel:
            return None
    else:
        numel, rnumel = group.numel, group.rnumel
    nodes = group.nodes + [node]
    maps = {}
    for n in nodes:
        mp = _index_map(n, numel, rnumel)
        if mp is None:
            return None
        maps[n] = mp
    # A looped reduction over few rows runs on few programs (one per XBLOCK rows): pointwise work
    # fused into its loop would run on those few programs too, instead of the whole GPU. Keep such
    # pointwise nodes in their own kernels (measured: a 16.7M-element mean over one row with the
    # transformer block's pointwise work fused in took 23 ms on an H200).
    # (a heuristic: symbolic sizes are judged by their hints)
    sv = SV.current()
    if (
        rnumel != 1
        and sv.hint(numel) < FEW_ROWS
        and sv.hint(rnumel) > LONG_ROW
        and any(maps[n][0] == "xr" for n in nodes)
    ):
        return None
    # A pointwise-in-loop ('xr') node and an outer reduction (it reads columns across rows:
    # contiguous along xindex) share a kernel only when the new one touches a buffer at an index
    # the kernel already does (Inductor's fusion score, here where it matters). The 'xr' node's
    # flat index xindex·rnumel + rindex runs along rindex: when the reduction's iteration space
    # is not the node's own (columns of a split or transposed reduction), the two read every
    # element at different positions and no tile shape coalesces both. Kept apart, the pointwise
    # node finds a kernel whose order matches (a LayerNorm backward's dx: its per-row reduction,
    # not the weight-gradient column sums, which cost 0.125 and 0.111 ms on the H200 fused with
    # it, about a quarter of the copy bandwidth). A row softmax of a transposed input (an outer
    # hint, but the division reads the input where the reductions do) stays one kernel.
    if _outer_mix(group, node, maps):
        mine = set(maps[node][2] + maps[node][3])
        if not any(d in mine for n in group.nodes for d in maps[n][2] + maps[n][3]):
            return None
    # every read of a buffer written in the kernel must be at the written index, and an x-only
    # node cannot read a buffer that varies along rindex
    written: dict[str, tuple[Any, str]] = {}
    for n in nodes:
        kind, _, loads, stores = maps[n]
        for name, idx in loads:
            if name in written:
                widx, wkind = written[name]
                if idx != widx:
                    return None
                if kind == "x" and wkind == "xr":
                    return None
        for name, idx in stores:
            written[name] = (idx, "x" if kind in ("x", "red") else "xr")
    return KernelGroup(nodes, numel, rnumel, maps)


# how many scheduled items back a node may move to join an earlier kernel (horizontal fusion)
FUSION_LOOKBACK = 8


def _writes(item: Any) -> set[str]:
    """Buffers an item writes (the names of its write deps)."""
    nodes = item.nodes if isinstance(item, KernelGroup) else [item]
    return {d.name for n in nodes for d in n.write_deps()}


def _fits(group: KernelGroup, node: SchedulerNode) -> bool:
    """Cheap pre-check of the (numel, rnumel) rule of _try_fuse."""
    if node.is_reduction():
        return (group.numel, group.rnumel) == (node.numel, node.rnumel) or (
            group.rnumel == 1 and group.numel == node.numel * node.rnumel
        )
    return node.numel in (group.numel, group.numel * group.rnumel)


def _loop_guest(fused: KernelGroup, node: SchedulerNode, reads: set[str]) -> bool:
    """Whether ``node`` joined ``fused`` as a pointwise node inside another reduction's loop
    (kind 'xr') without reading anything the kernel writes: horizontal fusion into a loop. Such a
    node runs on the reduction's programs — few, when the reduction has few outputs — so the
    scheduler prefers, within the lookback, the kernel that produces the node's inputs, where the
    node becomes an epilogue or joins its own loop (vertical fusion first, as Inductor's fusion
    score ranks it). Cross-entropy's per-row target losses (8192 gathers) would otherwise join the
    one-program count of non-ignored targets instead of the row log-sum-exp kernel that computes
    their normalizers."""
    if node.is_reduction() or fused.maps[node][0] != "xr":
        return False
    return not any(reads & {d.name for d in n.write_deps()} for n in fused.nodes if n is not node)


def schedule(buffers: list[ir.Buffer]) -> list[Any]:
    """Fuse the graph's buffers into an ordered list of KernelGroup / ExternSchedulerNode.

    Nodes are taken in graph order. A node joins the latest kernel it fits (``_try_fuse``); if
    that fails it may move back to join one of the ``FUSION_LOOKBACK`` kernels before, when no
    item in between writes a buffer it reads (so running it earlier reads the same values) —
    horizontal fusion of independent work over the same iteration space (e.g. the partial sums
    of several split reductions of one tensor, or bias gradients in a backward graph). A pointwise
    node whose first fit puts it inside another reduction's loop without reading what that kernel
    writes goes instead to a kernel within the lookback that writes a buffer it reads, when one
    takes it (``_loop_guest``). Kernels with in-place (atomic) updates never take other nodes."""
    items: list[Any] = []
    last_writer: dict[str, int] = {}  # buffer name -> position of the item that last wrote it
    touching: dict[str, set[int]] = {}  # buffer name -> positions of the kernels reading or writing it

    def wrote(j: int, node: Any) -> None:
        """``node`` (a SchedulerNode, or an extern / empty item) now sits in item ``j``."""
        writes = {d.name for d in node.write_deps()}
        for name in writes:
            last_writer[name] = j
        if isinstance(node, SchedulerNode):
            for name in node.read_names() | writes:
                touching.setdefault(name, set()).add(j)

    for buf in buffers:
        if not isinstance(buf, ir.ComputedBuffer):
            items.append(ExternSchedulerNode(buf))
            wrote(len(items) - 1, items[-1])
            continue
        node = SchedulerNode.create(buf)
        if node.numel == 0 and node.is_mutation():
            continue  # nothing to accumulate
        if node.numel == 0:
            # nothing to compute: the buffer is allocated (empty) by the wrapper
            items.append(ExternSchedulerNode(buf))
            wrote(len(items) - 1, items[-1])
            continue
        if node.is_mutation():
            # atomic updates of another buffer: a kernel of its own, ordered after the kernel
            # that initializes the target and before every reader
            items.append(_try_fuse(KernelGroup([], node.numel, node.rnumel), node))
            wrote(len(items) - 1, node)
            continue
        reads = node.read_names()
        far = _far_kernel(items, last_writer, touching, node, reads)
        if far is not None:
            items[far[0]] = far[1]
            wrote(far[0], node)
            continue
        written_after: set[str] = set()
        placed = False
        into_loop = None  # (position, fused group): the first fit, as a pointwise node in a loop
        for j in range(len(items) - 1, max(-1, len(items) - 1 - FUSION_LOOKBACK), -1):
            it = items[j]
            if (
                isinstance(it, KernelGroup)
                and not (reads & written_after)
                and _fits(it, node)
                and not any(n.is_mutation() for n in it.nodes)
            ):
                fused = _try_fuse(it, node)
                if fused is not None:
                    if into_loop is None and _loop_guest(fused, node, reads):
                        # keep looking for the kernel that produces what the node reads
                        into_loop = (j, fused)
                    elif into_loop is None or reads & _writes(it):
                        items[j] = fused
                        wrote(j, node)
                        placed = True
                        break
            written_after |= _writes(it)
        if not placed and into_loop is not None:
            items[into_loop[0]] = into_loop[1]
            wrote(into_loop[0], node)
            placed = True
        if not placed:
            group = _try_fuse(KernelGroup([], node.numel, node.rnumel), node)
            assert group is not None
            items.append(group)
            wrote(len(items) - 1, node)
    from . import config

    if config.reorder_for_peak_memory:
        items = order_for_peak_memory(items, G.graph())
    return items


def _far_kernel(
    items: list[Any], last_writer: dict[str, int], touching: dict[str, set[int]], node: SchedulerNode, reads: set[str]
) -> tuple[int, KernelGroup] | None:
    """``(position, fused group)`` when ``node`` joins a kernel beyond the ``FUSION_LOOKBACK``
    that shares a buffer with it, at or after the last writer of everything it reads; None
    otherwise (the lookback decides). Nothing after that writer writes a buffer the node reads,
    so the node computes the same values there. Candidates are ranked by how many of the node's
    reads they touch (Inductor's fusion score: shared memory), the earliest first among equals —
    vertical fusion and fusion with a kernel reading the same inputs at any distance, as
    Inductor fuses wherever the graph put a node. AOTAutograd's graphs put nodes far from their
    producers: the forward's residual-stream values saved for the backward are realized at the
    graph's end, the backward's bias gradients are converted to bfloat16 there. Within the
    lookback they only found each other: in the 12-layer GPT training step, 64 unrelated nodes
    in one kernel of 136 arguments (2 s per config to compile on the H200 host, the longest job
    of the forward graph; each re-read the inputs of a value an earlier kernel had computed) and
    64 conversions in the backward (1.1 s). A pointwise node does not join the loop of a
    reduction over few rows (fewer than ``FEW_ROWS``) this way unless it reads what that kernel
    writes (``_loop_guest``: it would run on few programs)."""
    p = max((last_writer.get(r, -1) for r in reads), default=-1)
    limit = len(items) - FUSION_LOOKBACK
    if p >= limit:
        return None
    score: dict[int, int] = {}
    for r in reads:
        for q in touching.get(r, ()):
            if p <= q < limit:
                score[q] = score.get(q, 0) + 1
    sv = SV.current()
    for q in sorted(score, key=lambda q: (-score[q], q)):
        it = items[q]
        if not isinstance(it, KernelGroup) or any(n.is_mutation() for n in it.nodes) or not _fits(it, node):
            continue
        fused = _try_fuse(it, node)
        if fused is None:
            continue
        if _loop_guest(fused, node, reads) and sv.hint(fused.numel) < FEW_ROWS:
            continue
        return q, fused
    return None


# ------------------------------------------------------------------------------ memory ordering


def item_reads(item: Any) -> set[str]:
    """Buffers a scheduled item (KernelGroup or ExternSchedulerNode) reads that it does not
    produce itself (the wrapper's liveness and the memory ordering use the same sets)."""
    if isinstance(item, KernelGroup):
        produced = item.names()
        return {r for n in item.nodes for r in n.read_names() if r not in produced}
    return item.read_names()


def graph_output_names(graph: Any) -> set[str]:
    """Names of the buffers the graph returns (a returned view counts as its base buffer): never
    freed by the generated call."""
    names: set[str] = set()
    for o in getattr(graph, "outputs", []):
        if isinstance(o, ir.ReinterpretView):
            names.add(o.data.get_name())
        elif isinstance(o, ir.Buffer):
            names.add(o.name)
    return names


def _ordered_among_themselves(item: Any) -> bool:
    """Items that keep their graph order relative to each other whatever the buffers say: fallback
    kernels (any aten op, possibly drawing from torch's generator or with side effects), the
    graph's random seeds, extern ops that mutate their arguments and in-place (atomic) update
    kernels. Everything else is a pure function of the buffers it reads."""
    if isinstance(item, KernelGroup):
        return any(n.is_mutation() for n in item.nodes)
    buf = item.buf
    if isinstance(buf, (ir.FallbackKernel, ir.RandomSeeds)):
        return True
    schema = getattr(getattr(buf, "op", None), "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def _buffer_bytes(buf: Any) -> int:
    """Storage bytes of a buffer's layout (size hints for symbolic sizes); 0 without a layout."""
    L = getattr(buf, "layout", None)
    if L is None or not hasattr(L, "storage_size"):
        return 0
    sv = SV.current()
    try:
        n = L.storage_size()
        return int(sv.hint(n) if not isinstance(n, int) else n) * L.dtype.itemsize
    except Exception:  # noqa: BLE001 - an unknown size counts as nothing (an estimate)
        return 0


@dataclass
class _MemoryModel:
    """What ``order_for_peak_memory`` knows of each item: ``preds`` (positions that must run
    before it), ``alloc`` (bytes its outputs allocate), ``reads`` (buffers it reads), and per
    buffer its ``size_free`` (bytes released after its last reader: 0 for graph outputs and
    constants) and its ``readers`` (positions)."""

    preds: list[set[int]]
    alloc: list[int]
    reads: list[set[str]]
    size_free: dict[str, int]
    readers: dict[str, set[int]]
    produced: list[set[str]]
    # per item, computed buffers it reads whose memory one of its outputs may take over when it is
    # their last reader (an approximation of the wrapper's in-place stores: a pointwise kernel,
    # equal storage bytes; the wrapper also asks for equal dtype, static layout and index)
    inplace: list[list[str]]
    # graph inputs among size_free: freed after their last reader only if the caller holds no
    # other reference (a backward's saved tensors), so orders are also compared with them held
    inputs: set[str] = field(default_factory=set)
    # bytes of every graph input (held or not): what is alive when the call starts
    input_bytes: int = 0


def _memory_model(items: list[Any], graph: Any) -> _MemoryModel:
    n = len(items)
    reads = [item_reads(it) for it in items]
    writes = [_writes(it) for it in items]
    preds: list[set[int]] = [set() for _ in range(n)]
    last_writer: dict[str, int] = {}
    readers_since: dict[str, set[int]] = {}
    chain = -1
    for i, it in enumerate(items):
        for r in reads[i]:
            if r in last_writer:
                preds[i].add(last_writer[r])  # read after write
        for w in writes[i]:
            if w in last_writer:
                preds[i].add(last_writer[w])  # write after write
            preds[i] |= readers_since.get(w, set())  # write after read
        for r in reads[i]:
            readers_since.setdefault(r, set()).add(i)
        for w in writes[i]:
            last_writer[w] = i
            readers_since[w] = set()
        if _ordered_among_themselves(it):
            if chain >= 0:
                preds[i].add(chain)
            chain = i
        preds[i].discard(i)

    outputs = graph_output_names(graph)
    size_free: dict[str, int] = {}
    produced: list[set[str]] = [set() for _ in range(n)]
    alloc = [0] * n
    readers: dict[str, set[int]] = {}
    for i in range(n):
        for r in reads[i]:
            readers.setdefault(r, set()).add(i)
    # the buffers each item creates (an in-place update's node creates none)
    created = [
        [m.buf for m in it.nodes if not m.is_mutation()] if isinstance(it, KernelGroup) else [it.buf] for it in items
    ]
    position = {b.name: i for i, bufs in enumerate(created) for b in bufs}
    for i, it in enumerate(items):
        for b in created[i]:
            if isinstance(it, KernelGroup) and b.name not in readers and b.name not in outputs:
                continue  # kept in registers: never stored
            size = _buffer_bytes(b)
            # a multi-output kernel's results are allocated by its call, and live as its outputs
            owner = position.get(b.parent.name, i) if isinstance(b, ir.MultiOutput) else i
            alloc[owner] += size
            produced[i].add(b.name)
            size_free[b.name] = 0 if b.name in outputs else size
    inputs: set[str] = set()
    input_bytes = 0
    for name in getattr(graph, "graph_input_order", []):
        if name and name in graph.graph_inputs:
            input_bytes += _buffer_bytes(graph.graph_inputs[name])
            if name not in outputs:
                size_free[name] = _buffer_bytes(graph.graph_inputs[name])
                inputs.add(name)
    inplace: list[list[str]] = [[] for _ in range(n)]
    computed = {name for names in produced for name in names}
    for i, it in enumerate(items):
        if not isinstance(it, KernelGroup) or it.rnumel != 1:
            continue
        sizes = sorted(size_free.get(b, 0) for b in produced[i] if b not in outputs)
        for r in sorted(reads[i]):
            if r in computed and r not in outputs and size_free.get(r, 0) in sizes:
                sizes.remove(size_free[r])
                inplace[i].append(r)
    return _MemoryModel(preds, alloc, reads, size_free, readers, produced, inplace, inputs, input_bytes)


def estimate_peak_memory(order: list[int], model: _MemoryModel, inputs_freed: bool = True) -> int:
    """Peak bytes allocated while running the items in ``order`` (positions into the model's
    items), relative to the start of the call: each item's outputs are allocated when it runs and
    freed after their last reader in that order (with the graph inputs when ``inputs_freed``:
    the caller holds no other reference to them); unread outputs that are not graph outputs die
    right after their item."""
    step = {pos: k for k, pos in enumerate(order)}
    made_at = {name: step[pos] for pos in order for name in model.produced[pos]}
    freed_after: dict[int, int] = {}
    for name, size in model.size_free.items():
        if not inputs_freed and name in model.inputs:
            continue
        rs = model.readers.get(name)
        if rs:
            last = max(step[r] for r in rs)
        elif name in made_at:
            last = made_at[name]
        else:
            continue  # an input nothing reads
        freed_after[last] = freed_after.get(last, 0) + size
    live = peak = 0
    for k, pos in enumerate(order):
        # an output stored in place of an input read for the last time here takes its memory
        early = sum(model.size_free[r] for r in model.inplace[pos] if max(step[q] for q in model.readers[r]) == k)
        live += model.alloc[pos] - early
        peak = max(peak, live)
        live -= freed_after.get(k, 0) - early
    return peak


def _release_successors(pick: int, succs: list[list[int]], indegree: list[int], ready: set[int]) -> None:
    """A greedy topological sort's step after running ``pick``: each successor with no
    predecessor left to run becomes ready."""
    for s_ in succs[pick]:
        indegree[s_] -= 1
        if indegree[s_] == 0:
            ready.add(s_)


def _complete(order: list[int], n: int) -> list[int]:
    """``order`` when it holds all ``n`` items; AssertionError otherwise (a dependency cycle)."""
    if len(order) != n:
        raise AssertionError("order_for_peak_memory: the items' dependencies have a cycle")
    return order


def _topological_state(model: _MemoryModel) -> tuple[list[int], list[list[int]], dict[str, int]]:
    """For a greedy topological sort: each item's count of predecessors not yet run, each item's
    successors, and each buffer's count of readers not yet run."""
    indegree = [len(p) for p in model.preds]
    succs: list[list[int]] = [[] for _ in model.preds]
    for i, ps in enumerate(model.preds):
        for p in ps:
            succs[p].append(i)
    return indegree, succs, {name: len(rs) for name, rs in model.readers.items()}


def _least_peak_first(model: _MemoryModel) -> list[int]:
    """A topological order chosen greedily, least peak memory first (the rule of Inductor's
    ``topological_sort_lpmf``, after the Simulink buffer-scheduling paper it cites): among the
    items whose predecessors all ran, one whose outputs fit under the peak reached so far is
    preferred, and among those the one that leaves the least memory allocated after it (its
    outputs minus what it frees, being the last reader); when none fits, the one allocating least.
    Ties go to graph order."""
    n = len(model.alloc)
    indegree, succs, remaining = _topological_state(model)
    # bytes an item frees when it runs now: buffers it is the last remaining reader of
    to_free = [0] * n
    for name, rs in model.readers.items():
        if len(rs) == 1:
            to_free[next(iter(rs))] += model.size_free.get(name, 0)
    ready = {i for i in range(n) if indegree[i] == 0}
    order: list[int] = []
    done: set[int] = set()
    live = peak = 0
    while ready:
        gap = peak - live

        def need(i: int) -> int:
            """Bytes item i adds while it runs now (in-place outputs take dying inputs' memory)."""
            return model.alloc[i] - sum(model.size_free[r] for r in model.inplace[i] if remaining[r] == 1)

        pick = min(ready, key=lambda i: (need(i) if need(i) > gap else 0, model.alloc[i] - to_free[i], i))
        ready.remove(pick)
        order.append(pick)
        done.add(pick)
        early = model.alloc[pick] - need(pick)
        live += model.alloc[pick] - early
        peak = max(peak, live)
        live -= to_free[pick] - early
        for name in model.produced[pick]:
            if name not in model.readers:
                live -= model.size_free.get(name, 0)  # never read: dies at once
        for name in model.reads[pick]:
            remaining[name] -= 1
            if remaining[name] == 1:
                last = next(r for r in model.readers[name] if r not in done)
                to_free[last] += model.size_free.get(name, 0)
        _release_successors(pick, succs, indegree, ready)
    return _complete(order, n)


# an order other than graph order must lower the estimated peak by this fraction of the memory in
# play (the graph's inputs plus graph order's peak) to be taken
MIN_PEAK_GAIN = 0.05


def _graph_order_hoisting_frees(model: _MemoryModel) -> list[int]:
    """Graph order, except that a ready item whose run frees more memory than it allocates (the
    last reader of large buffers) runs before the next item of graph order: the earliest such
    item first. The smallest change to graph order that lets a dying buffer go before a new one
    of its size is allocated."""
    n = len(model.alloc)
    indegree, succs, remaining = _topological_state(model)
    ready = {i for i in range(n) if indegree[i] == 0}
    order: list[int] = []

    def frees(i: int) -> int:
        return sum(model.size_free.get(r, 0) for r in model.reads[i] if remaining[r] == 1)

    while ready:
        freeing = [i for i in ready if frees(i) > model.alloc[i]]
        pick = min(freeing) if freeing else min(ready)
        ready.remove(pick)
        order.append(pick)
        for name in model.reads[pick]:
            remaining[name] -= 1
        _release_successors(pick, succs, indegree, ready)
    return _complete(order, n)


def _readable_bytes(n: int) -> str:
    """``n`` bytes as B, KiB, MiB or GiB with one decimal (negative when below the start)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def order_for_peak_memory(items: list[Any], graph: Any) -> list[Any]:
    """``items`` (the fused schedule, in graph order) in the order of lowest estimated peak memory
    among graph order, graph order hoisting memory-freeing items (``_graph_order_hoisting_frees``)
    and the least-peak-first greedy order (``_least_peak_first``; Inductor's
    ``reorder_for_peak_memory``, which also tries BFS and DFS orders). An order other than graph
    order is taken only when its estimate is lower with the graph inputs freed after their last
    reader (a backward's saved tensors: the generated call drops them) and not higher with every
    input held by the caller (parameters, a forward's inputs: dropping them frees nothing), and
    only when it saves at least ``MIN_PEAK_GAIN`` of the memory in play (the graph's inputs plus
    graph order's peak): the greedy order moved every one of a 12-layer GPT forward's 139 items
    for 0.8 of 2100 MiB. Ties go to the order closer to graph order. Dependencies kept: read after
    write, write after write and write after read on every buffer name, and graph order among
    fallback kernels, random seeds, mutating extern ops and in-place update kernels
    (``_ordered_among_themselves``). Sizes
    are storage bytes (size hints for symbolic sizes). In a transformer block's backward the
    MLP's weight gradient then runs before its input gradient, so the saved GELU output
    (``[tokens, 4·hidden]``) is freed before that gradient's buffer of the same size is
    allocated."""
    if len(items) < 2:
        return items
    model = _memory_model(items, graph)
    graph_order = list(range(len(items)))
    in_graph_order = estimate_peak_memory(graph_order, model)
    best, best_freed = graph_order, in_graph_order
    held = estimate_peak_memory(graph_order, model, inputs_freed=False)
    needed = best_freed - MIN_PEAK_GAIN * (model.input_bytes + max(best_freed, 0))
    for make in (_graph_order_hoisting_frees, _least_peak_first):
        order = make(model)
        if order == graph_order:
            continue
        freed = estimate_peak_memory(order, model)
        if freed < best_freed and freed <= needed and estimate_peak_memory(order, model, inputs_freed=False) <= held:
            best, best_freed = order, freed
    if best is graph_order:
        return items
    moved = sum(1 for i, j in enumerate(best) if i != j)
    log.debug(
        "tilefuse: peak-memory order moves %d of %d items (estimated peak above the call's start %s -> %s)",
        moved,
        len(items),
        _readable_bytes(in_graph_order),
        _readable_bytes(best_freed),
    )
    return [items[i] for i in best]
