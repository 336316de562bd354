"""Scheduler: buffers -> fused kernel groups (Inductor's ``scheduler.py`` with simd.py's rules).

``schedule`` turns the graph's buffers into an ordered list of ``KernelGroup`` (nodes fused into
one Triton kernel) and ``ExternSchedulerNode`` (extern and fallback calls). The package:

- ``nodes``: dependencies (``MemoryDep``, ``StarDep``), ``SchedulerNode``,
  ``ExternSchedulerNode``, ``KernelGroup`` and the index maps onto ``XINDEX`` / ``RINDEX``;
- ``fusion``: the fusion rules, each a named function returning None or a ``Refusal`` with its
  reason, and ``try_fuse``;
- ``memory``: the peak-memory model and the order of the scheduled items
  (``order_for_peak_memory``);
- ``comms``: collectives issued early and waited on late (``order_for_overlap``).

The package's own module holds ``schedule`` and ``Placement``: where each node goes, the kernel it
joins or a kernel of its own. Nodes are taken in graph order (topological). A node joins the latest kernel it fits
(``fusion.try_fuse``); if that fails it may move back to join one of the
``config.FUSION_LOOKBACK`` items before, when no item in between writes a buffer it reads (so
running it earlier reads the same values): horizontal fusion of independent work over the same
iteration space (the partial sums of several split reductions of one tensor, bias gradients in a
backward graph). A pointwise node whose first fit puts it inside another reduction's loop without
reading what that kernel writes goes instead to a kernel within the lookback that writes a buffer
it reads, when one takes it (``fusion.loop_guest``). Beyond the lookback, a node joins the kernel
sharing the most buffers with it (``Placement.far_kernel``). Kernels with in-place (atomic)
updates never take other nodes.

Every candidate kernel a node meets is accepted or refused by a named rule (``fusion.RULES``),
logged at DEBUG on ``tilefuse.fusion`` (or torch's ``fusion`` artifact; ``tilefuse.logs``).
"""

from __future__ import annotations

from typing import Any

from .. import config
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.nodes import digits
from .. import logs
from .fusion import (
    CANDIDATE_RULES,
    KERNEL_RULES,
    RULES,
    Refusal,
    debug_enabled,
    describe,
    extern_call,
    far_guest_few_rows,
    in_place_update,
    iteration_space,
    log_fused,
    log_refusal,
    loop_guest,
    producer_first,
    try_fuse,
    written_in_between,
)
from .comms import comm_kind, order_for_overlap
from .memory import estimate_peak_memory, graph_output_names, order_for_peak_memory
from .nodes import (
    RINDEX,
    XINDEX,
    ExternSchedulerNode,
    KernelGroup,
    MemoryDep,
    SchedulerNode,
    StarDep,
    index_map,
    item_reads,
    item_writes,
    node_reduction_hint,
)

__all__ = [
    "RINDEX",
    "RULES",
    "XINDEX",
    "ExternSchedulerNode",
    "comm_kind",
    "KernelGroup",
    "MemoryDep",
    "Placement",
    "Refusal",
    "SchedulerNode",
    "StarDep",
    "digits",
    "estimate_peak_memory",
    "graph_output_names",
    "index_map",
    "item_reads",
    "item_writes",
    "node_reduction_hint",
    "order_for_overlap",
    "order_for_peak_memory",
    "schedule",
    "try_fuse",
]


def schedule(buffers: list[ir.Buffer]) -> list[Any]:
    """Fuse the graph's buffers (in graph order, which is topological) into an ordered list of
    KernelGroup / ExternSchedulerNode; needs the graph context (``graph_context.set_graph``).

    Extern and fallback calls are items of their own. A computed buffer of no elements is an
    (empty) item of its own, allocated by the wrapper, or nothing at all when it is an in-place
    update. An in-place (atomic) update gets a kernel of its own, after the kernel that
    initializes its target and before every reader. Every other node is placed by
    ``Placement.place`` (fusion rules in ``fusion.py``). With ``config.reorder_for_peak_memory``
    the items are then ordered for peak memory (``order_for_peak_memory``), and with
    ``config.reorder_for_comm_overlap`` collectives are issued early and waited on late
    (``order_for_overlap``)."""
    placement = Placement()
    for buf in buffers:
        if not isinstance(buf, ir.ComputedBuffer):
            placement.append_extern(ExternSchedulerNode(buf))
            continue
        node = SchedulerNode.create(buf)
        if node.numel == 0 and node.is_mutation():
            continue  # nothing to accumulate
        if node.numel == 0:
            placement.append_extern(ExternSchedulerNode(buf))  # allocated (empty) by the wrapper
        elif node.is_mutation():
            placement.new_kernel(node, "an in-place update runs alone")
        else:
            placement.place(node)
    items = placement.items
    if config.reorder_for_peak_memory:
        items = order_for_peak_memory(items, G.graph())
    if config.reorder_for_comm_overlap:
        items = order_for_overlap(items)
    return items


# the rules a fusion passed, as the log lists them
_LOOKBACK_PASSED = tuple(dict.fromkeys(CANDIDATE_RULES + KERNEL_RULES + (loop_guest,)))
_PENDING_PASSED = tuple(dict.fromkeys(CANDIDATE_RULES + KERNEL_RULES + (producer_first,)))
_GUEST_PASSED = tuple(dict.fromkeys(CANDIDATE_RULES + KERNEL_RULES))
_FAR_PASSED = tuple(
    dict.fromkeys((extern_call, in_place_update, iteration_space) + KERNEL_RULES + (far_guest_few_rows,))
)


class Placement:
    """The scheduled items so far (KernelGroup / ExternSchedulerNode, in order) and the indexes
    placement consults: ``last_writer`` (buffer name -> position of the item that last wrote it)
    and ``touching`` (buffer name -> positions of the kernels reading or writing it)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.last_writer: dict[str, int] = {}
        self.touching: dict[str, set[int]] = {}
        self.verbose = debug_enabled()

    def record(self, j: int, node: Any) -> None:
        """``node`` (a SchedulerNode, or an extern / empty item) now sits in item ``j``."""
        writes = node.write_names
        for name in writes:
            self.last_writer[name] = j
        if isinstance(node, SchedulerNode):
            for name in node.read_names() | writes:
                self.touching.setdefault(name, set()).add(j)

    def append_extern(self, item: Any) -> None:
        """An extern call (or an empty buffer's item) at the end of the schedule."""
        self.items.append(item)
        self.record(len(self.items) - 1, item)

    def new_kernel(self, node: SchedulerNode, why: str) -> None:
        """A kernel of ``node``'s own at the end of the schedule."""
        group = try_fuse(KernelGroup([], node.numel, node.rnumel), node)
        assert isinstance(group, KernelGroup), group
        self.items.append(group)
        self.record(len(self.items) - 1, node)
        if self.verbose:
            logs.log_fusion(node.name, "new %s for %s: %s", describe(group, len(self.items) - 1), node.name, why)

    def _take(self, j: int, node: SchedulerNode, fused: KernelGroup, how: str, passed: tuple) -> None:
        """``node`` joins item ``j``, which becomes ``fused``."""
        if self.verbose:
            log_fused(node, self.items[j], fused, j, how, passed)
        self.items[j] = fused
        self.record(j, node)

    def place(self, node: SchedulerNode) -> None:
        """Put a (non-mutating, non-empty) node into a kernel: beyond the lookback
        (``far_kernel``), within it (``lookback``), or a new one."""
        reads = node.read_names()
        far = self.far_kernel(node, reads)
        if far is not None:
            self._take(far[0], node, far[1], "beyond the lookback, sharing the most buffers", _FAR_PASSED)
        elif not self.lookback(node, reads):
            self.new_kernel(node, "no kernel took it")

    def lookback(self, node: SchedulerNode, reads: set[str]) -> bool:
        """Whether ``node`` joined one of the last ``config.FUSION_LOOKBACK`` items: the latest
        that takes it, except that a fit as an unrelated guest in a reduction's loop
        (``loop_guest``) is taken only when no earlier kernel within the lookback that writes a
        buffer the node reads takes it (``producer_first``)."""
        items = self.items
        written_after: set[str] = set()
        guest = None  # (position, fused group): the first fit, as a pointwise node in a loop
        last = len(items) - 1
        for j in range(last, max(-1, last - config.FUSION_LOOKBACK), -1):
            it = items[j]
            r = (
                extern_call(it)
                or written_in_between(reads, written_after)
                or iteration_space(it, node)
                or in_place_update(it)
            )
            if r is None:
                fused = try_fuse(it, node)
                if isinstance(fused, Refusal):
                    r = fused
                elif guest is None:
                    r = loop_guest(fused, node, reads)
                    if r is None:
                        self._take(j, node, fused, f"{last - j} items back" if j < last else "latest", _LOOKBACK_PASSED)
                        return True
                    guest = (j, fused)  # kept as the last resort
                    r = Refusal(r.rule, r.fmt + "; kept as the last resort", r.args)
                else:
                    r = producer_first(it, reads, guest[0])
                    if r is None:
                        self._take(j, node, fused, f"{last - j} items back, its producer", _PENDING_PASSED)
                        return True
            if r is not None and self.verbose:
                log_refusal(node, it, j, r)
            written_after |= item_writes(it)
        if guest is not None:
            how = "a loop guest: no kernel within the lookback that writes what it reads took it"
            self._take(guest[0], node, guest[1], how, _GUEST_PASSED)
            return True
        return False

    def far_kernel(self, node: SchedulerNode, reads: set[str]) -> tuple[int, KernelGroup] | None:
        """``(position, fused group)`` when ``node`` joins a kernel beyond the
        ``config.FUSION_LOOKBACK`` that shares a buffer with it, at or after the last writer of
        everything it reads; None otherwise (the lookback decides). Nothing after that writer
        writes a buffer the node reads, so the node computes the same values there. Candidates
        are ranked by how many of the node's reads they touch (Inductor's fusion score: shared
        memory), the earliest first among equals: vertical fusion, and fusion with a kernel
        reading the same inputs, at any distance, as Inductor fuses wherever the graph put a
        node. AOTAutograd's graphs put nodes far from their producers (the forward's
        residual-stream values saved for the backward are realized at the graph's end, the
        backward's bias gradients are converted to bfloat16 there); within the lookback only,
        such nodes would find each other and pile up into one large kernel that re-reads the
        inputs of values earlier kernels computed, and compiles slowly. A pointwise node does not
        join the loop of a reduction over few rows this way unless it reads what that kernel
        writes (``far_guest_few_rows``)."""
        items = self.items
        p = max((self.last_writer.get(r, -1) for r in reads), default=-1)
        limit = len(items) - config.FUSION_LOOKBACK
        if p >= limit:
            return None
        score: dict[int, int] = {}
        for r in reads:
            for q in self.touching.get(r, ()):
                if p <= q < limit:
                    score[q] = score.get(q, 0) + 1
        for q in sorted(score, key=lambda q: (-score[q], q)):
            it = items[q]
            r = extern_call(it) or in_place_update(it) or iteration_space(it, node)
            if r is None:
                fused = try_fuse(it, node)
                if isinstance(fused, Refusal):
                    r = fused
                else:
                    r = far_guest_few_rows(fused, node, reads)
                    if r is None:
                        return q, fused
            if self.verbose:
                log_refusal(node, it, q, r)
        return None
