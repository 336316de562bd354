"""Scheduler: buffers -> fused kernel groups (Inductor's ``scheduler.py`` with simd.py's rules).

``schedule`` turns the graph's buffers into an ordered list of ``KernelGroup`` (nodes fused into
one Triton kernel) and ``ExternSchedulerNode`` (extern and fallback calls). The package:

- ``nodes``: dependencies (``MemoryDep``, ``StarDep``), ``SchedulerNode``,
  ``ExternSchedulerNode``, ``KernelGroup`` and the index maps onto ``XINDEX`` / ``RINDEX``;
- ``fusion``: the fusion rules, each a named function returning None or a ``Refusal`` with its
  reason, and ``try_fuse``;
- ``placement``: which kernel each node joins (the latest, one within the lookback, or one
  beyond it sharing its buffers);
- ``memory``: the peak-memory model and the order of the scheduled items
  (``order_for_peak_memory``).

Fusion decisions are logged at DEBUG on the ``tilefuse.fusion`` logger (``tilefuse.logs``).
"""

from __future__ import annotations

from typing import Any

from .. import config
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.nodes import digits
from .fusion import RULES, Refusal, try_fuse
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
from .placement import Placement

__all__ = [
    "RINDEX",
    "RULES",
    "XINDEX",
    "ExternSchedulerNode",
    "KernelGroup",
    "MemoryDep",
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
    the items are then ordered for peak memory (``order_for_peak_memory``)."""
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
    return items
