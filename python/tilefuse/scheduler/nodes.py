"""What the scheduler schedules: dependencies, nodes and kernel groups.

Every ComputedBuffer becomes a ``SchedulerNode``: its store function traced into a LoopBody over
index variables ``i*`` (and reduction variables ``r*``), with its group ``(numel, rnumel)``. Extern
and fallback kernels are ``ExternSchedulerNode``s and are never fused. A ``KernelGroup`` is the
nodes fused into one Triton kernel, each node's indices rewritten over the kernel's two flat index
symbols ``XINDEX`` (range numel) and ``RINDEX`` (range rnumel) and simplified with
``simplify_with_ranges`` (native core).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .. import sizevars as SV
from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.loop_body import LoopBody
from ..ir.nodes import digits

XINDEX = S.sym("xindex")
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

    Inductor's WeakDep ("run after the readers of the old value") has no counterpart: nodes only
    ever move earlier than graph order, never past an item that writes what they read, and
    in-place kernels never move."""

    name: str


@dataclass(eq=False)
class SchedulerNode:
    """A ComputedBuffer to be generated as (part of) a Triton kernel: ``body`` is its store
    function traced over ``sizes`` (the output's iteration space, or a reduction's kept dims)
    and ``rsizes`` (a reduction's reduced dims; empty for a pointwise node). ``unbacked``: the
    data-dependent size symbols its sizes, layout or indices use; each is read as a StarDep on
    the symbol's name, which the extern call that binds it writes, so the node is never placed
    before that call."""

    buf: ir.ComputedBuffer
    body: LoopBody
    sizes: list[int]
    rsizes: list[int]
    unbacked: frozenset = frozenset()

    @property
    def name(self) -> str:
        """The buffer's name (``buf<k>``)."""
        return self.buf.name

    @cached_property
    def numel(self) -> int:
        """Elements of the iteration space (outputs of a reduction); an int or a size Expr.
        Cached: ``sizes`` is fixed once the node is created, and fusion asks often."""
        return ir.prod(self.sizes)

    @cached_property
    def rnumel(self) -> int:
        """Elements reduced per output (1 for a pointwise node); cached as ``numel``."""
        return ir.prod(self.rsizes) if self.rsizes else 1

    def is_reduction(self) -> bool:
        """Whether the node reduces (or scans) over ``rsizes``."""
        return bool(self.rsizes)

    def read_deps(self) -> list:
        """MemoryDeps of the loads, plus a StarDep on the target of an in-place update (it must
        exist, initialized, and stay alive here)."""
        ranges = tuple(self.body.var_ranges.items())
        deps: list = [MemoryDep(n, e, ranges) for n, e in self.body.loads()]
        if self.is_mutation():
            deps.append(StarDep(self.buf.target.name))
        deps += [StarDep(u) for u in sorted(self.unbacked)]
        return deps

    def write_deps(self) -> list:
        """MemoryDeps of the stores, plus a StarDep on the target of an in-place update."""
        ranges = tuple(self.body.var_ranges.items())
        deps: list = [MemoryDep(n, e, ranges) for n, e in self.body.stores()]
        if self.is_mutation():
            deps.append(StarDep(self.buf.target.name))
        return deps

    def read_names(self) -> set[str]:
        """Names of the buffers it reads."""
        return {d.name for d in self.read_deps()}

    @cached_property
    def write_names(self) -> frozenset[str]:
        """Names of the buffers it writes (of ``write_deps``); cached: placement asks for every
        candidate kernel."""
        return frozenset(d.name for d in self.write_deps())

    def is_mutation(self) -> bool:
        """Whether it is an in-place (atomic or scatter) update of another buffer."""
        return isinstance(self.buf, ir.MutationBuffer)

    @staticmethod
    def create(buf: ir.ComputedBuffer) -> "SchedulerNode":
        """The node of ``buf``, its store function traced (needs the graph context: dtypes)."""
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
            order = stored_loop_order(buf)
            if order is None:
                body = LoopBody.trace(buf.store_fn(), iv, [], ranges, G.dtype_of)
            else:
                # loop k runs over dim order[k]: the output is written in its storage order
                sizes = [sizes[d] for d in order]
                ranges = dict(zip(iv, sizes))
                pos = {d: k for k, d in enumerate(order)}
                store = buf.store_fn()

                def fn(loops, _store=store, _pos=pos):
                    _store([loops[_pos[d]] for d in range(len(loops))])

                body = LoopBody.trace(fn, iv, [], ranges, G.dtype_of)
        return SchedulerNode(buf, body, sizes, rsizes, _unbacked_uses(buf, body, sizes + rsizes))

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


def stored_loop_order(buf: ir.ComputedBuffer) -> list[int] | None:
    """The loop order of a pointwise node whose output is stored in another order than row-major
    (a channels-last buffer, a graph output with eager's transposed strides): its dims from the
    largest stride to the smallest, so the innermost loop walks the stride-1 dim and consecutive
    elements of a kernel's flat index are consecutive in memory (coalesced stores, and coalesced
    loads from inputs stored the same way). None keeps the logical (row-major) order: a reduction,
    a mutation (its index goes through ``index_fn``), symbolic strides, or strides that are
    already in row-major order once dims of size 1 are set aside. Inductor reorders loops by the
    strides of all of a node's accesses (``pick_loop_order``); this rule looks at the store only,
    the access that every consumer fused into the kernel shares."""
    if buf.is_reduction() or isinstance(buf, ir.MutationBuffer):
        return None
    lay = buf.layout
    size, stride = list(lay.size), list(getattr(lay, "stride", None) or [])
    if len(size) < 2 or len(stride) != len(size) or not all(isinstance(v, int) for v in (*size, *stride)):
        return None
    dims = [d for d in range(len(size)) if size[d] != 1]
    if any(stride[d] == 0 for d in dims) or all(stride[a] >= stride[b] for a, b in zip(dims, dims[1:])):
        return None
    # a dim of size 1 adds nothing to any index: where it lands in the order does not matter
    return sorted(range(len(size)), key=lambda d: (-stride[d], d))


def _unbacked_uses(buf: ir.Buffer, body: LoopBody | None, sizes: list) -> frozenset:
    """Names of the data-dependent (unbacked) size symbols a node uses: in its loop sizes, its
    layout and any Expr among its body's op arguments (indices, ``index_expr``, bounds of
    indirect indices) or an extern call's arguments. Empty at no cost in a graph without such
    symbols."""
    unbacked = SV.current().unbacked
    if not unbacked:
        return frozenset()
    found: set = set()

    def visit(a: Any) -> None:
        if isinstance(a, S.Expr):
            found.update(f.name for f in a.free_symbols if f.name in unbacked)
        elif isinstance(a, (list, tuple)):
            for x in a:
                visit(x)
        elif isinstance(a, dict):
            visit(list(a.values()))

    visit(sizes)
    if buf.layout is not None:
        visit((list(buf.layout.size), list(buf.layout.stride), buf.layout.offset))
    for n in body.nodes if body is not None else ():
        visit(n.args)
    visit((getattr(buf, "args", ()), getattr(buf, "kwargs", {})))
    return frozenset(found) - set(getattr(buf, "unbacked_defs", ()))


# the namespaces of torch.distributed's collective ops as AOTAutograd's graphs hold them
COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "c10d")


def comm_kind(buf: Any) -> str | None:
    """``"collective"`` for an extern call that issues a collective (a ``_c10d_functional`` op
    such as ``all_reduce``), ``"wait"`` for a ``wait_tensor`` call, None for any other buffer."""
    if not isinstance(buf, ir.ExternKernel):
        return None
    op = getattr(buf, "op", None)
    if getattr(op, "namespace", None) not in COLLECTIVE_NAMESPACES:
        return None
    return "wait" if getattr(op, "_opname", "") == "wait_tensor" else "collective"


def _in_flight_inputs(wait: ir.ExternKernel) -> list[str]:
    """The inputs of the collective whose result ``wait`` waits on (the collective's own buffer,
    or its multi-output parent's: all of its inputs). The communication may read them until the
    wait returns, so the wait counts as one of their readers (Inductor's ``get_volatile_reads`` of
    its wait kernel): the wrapper frees them only after it."""
    src = wait.inputs[0] if wait.inputs else None
    if isinstance(src, ir.ReinterpretView):
        src = src.data
    if isinstance(src, ir.MultiOutput):
        src = src.parent
    if comm_kind(src) != "collective":
        return []
    return [i.get_name() if isinstance(i, ir.ReinterpretView) else i.name for i in src.inputs]


@dataclass(eq=False)
class ExternSchedulerNode:
    """An extern / fallback kernel call, or one output of a multi-output one."""

    buf: ir.Buffer
    # data-dependent size symbols its arguments or layout use (read as StarDeps, see SchedulerNode)
    unbacked: frozenset = field(init=False)

    def __post_init__(self) -> None:
        self.unbacked = _unbacked_uses(self.buf, None, [])

    @property
    def name(self) -> str:
        """The buffer's name."""
        return self.buf.name

    def read_deps(self) -> list[StarDep]:
        """A StarDep per input buffer (a MultiOutput reads its parent kernel's result; a wait on a
        collective's result also reads the collective's inputs: ``_in_flight_inputs``), and per
        data-dependent size symbol it uses."""
        syms = [StarDep(u) for u in sorted(self.unbacked)]
        if isinstance(self.buf, ir.MultiOutput):
            return [StarDep(self.buf.parent.name)] + syms
        deps = [
            StarDep(i.get_name() if isinstance(i, ir.ReinterpretView) else i.name)
            for i in getattr(self.buf, "inputs", [])
        ]
        if comm_kind(self.buf) == "wait":
            deps += [StarDep(n) for n in _in_flight_inputs(self.buf) if StarDep(n) not in deps]
        return deps + syms

    def write_deps(self) -> list[StarDep]:
        """Its own buffer, and every input when the op's schema mutates its arguments
        (conservatively: which argument is not tracked)."""
        deps = [StarDep(self.name)] + [StarDep(u) for u in getattr(self.buf, "unbacked_defs", ())]
        schema = getattr(getattr(self.buf, "op", None), "_schema", None)
        if schema is not None and schema.is_mutable:
            deps += self.read_deps()
        return deps

    def read_names(self) -> set[str]:
        """Names of the buffers it reads."""
        return {d.name for d in self.read_deps()}

    @cached_property
    def write_names(self) -> frozenset[str]:
        """Names of the buffers it writes (of ``write_deps``), cached."""
        return frozenset(d.name for d in self.write_deps())


@dataclass(eq=False)
class KernelGroup:
    """Nodes fused into one Triton kernel over (numel, rnumel)."""

    nodes: list[SchedulerNode]
    numel: int
    rnumel: int
    # node -> (kind, var map, loads, stores) from ``index_map``; indices over xindex/rindex
    maps: dict = field(default_factory=dict)

    def names(self) -> set[str]:
        """Names of the buffers its nodes compute."""
        return {n.name for n in self.nodes}

    def has_mutation(self) -> bool:
        """Whether the kernel holds an in-place (atomic) update: such a kernel takes no other node."""
        return any(n.is_mutation() for n in self.nodes)


def _mapped(expr: Any, m: dict, numel: int, rnumel: int) -> Any:
    """``expr`` with the node's loop variables replaced by ``m`` (their kernel index expressions),
    simplified over the kernel's ranges."""
    e = expr.subs(m) if m else expr
    ranges = {XINDEX: numel}
    if rnumel != 1:
        ranges[RINDEX] = rnumel
    return S.simplify_with_ranges(e, ranges)


def index_map(node: SchedulerNode, numel: int, rnumel: int) -> tuple | None:
    """(kind, var map, loads, stores) of ``node`` in a kernel of (numel, rnumel), or None when it
    does not fit (``SchedulerNode.mapping``); loads and stores are (buffer name, index over
    xindex/rindex) pairs. Cached on the node: fusion tries the same node against several groups."""
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


def node_reduction_hint(node: SchedulerNode) -> str:
    """``node.body.reduction_hint()`` (Inductor's ReductionHint: inner, outer or default), cached
    on the node."""
    h = node.__dict__.get("_reduction_hint")
    if h is None:
        h = node.__dict__["_reduction_hint"] = node.body.reduction_hint()
    return h


def item_writes(item: Any) -> set[str]:
    """Buffers a scheduled item (KernelGroup, SchedulerNode or ExternSchedulerNode) writes: the
    names of its write deps."""
    if not isinstance(item, KernelGroup):
        return set(item.write_names)
    return set().union(*(n.write_names for n in item.nodes))


def item_reads(item: Any) -> set[str]:
    """Buffers a scheduled item (KernelGroup or ExternSchedulerNode) reads that it does not
    produce itself (the wrapper's liveness and the memory ordering use the same sets)."""
    if isinstance(item, KernelGroup):
        produced = item.names()
        return {r for n in item.nodes for r in n.read_names() if r not in produced}
    return item.read_names()
