"""Ordering collectives for overlap with computation (what Inductor's ``comms.py`` decides with
``raise_comms`` and ``sink_waits``).

A collective inside a compiled graph is a ``_c10d_functional`` op (``all_reduce``,
``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``all_to_all_single``, ...) that returns at
once with its result still being communicated, and a ``wait_tensor`` on that result that blocks
until it is complete (the op's contract: on the GPU the wait makes the current stream wait for
the communication stream; on the CPU it blocks the calling thread). Both are extern (fallback)
calls in the generated wrapper. Work placed between a collective and its wait runs while the
communication proceeds, so ``order_for_overlap`` orders the scheduled items as a list schedule
over their dependencies, taking among the items ready to run:

1. first, the items a collective needs, earliest collective first, and that collective itself:
   each collective is issued as soon as its inputs are computed;
2. then any other item except a wait;
3. a wait only when nothing else is ready: each wait runs as late as its consumers allow (or
   when a later collective needs its result, as early as that collective needs it);

ties in graph order (the order the scheduler produced). The collectives keep their order relative
to each other (every rank must issue the same collectives in the same order, or they pair the
wrong operations, or hang); a wait is ordered by its data only; other fallback calls, the random
seeds and in-place updates keep their order among themselves (``memory._ordered_among_themselves``).

Safety of the buffers in flight: the input of a collective is read by a fallback call, so the
wrapper never hands its storage to another buffer nor stores another kernel's output in place of
it (``codegen.memory_planning``: only buffers read by kernels and non-fallback extern calls are
reused), and the wait counts as a reader of it (``nodes._in_flight_inputs``), so the wrapper
frees it only after the wait; a collective's result is returned by an extern call and never
reused either. Kernels read the collective's result only through the wait's output
buffer, so no kernel is placed, or fused, before the wait it depends on (the wait writes that
buffer: fusion never moves a node before an item writing what it reads).
"""

from __future__ import annotations

import heapq
from typing import Any

from ..logs import log
from .memory import _ordered_among_themselves, item_dependencies
from .nodes import comm_kind as _buf_comm_kind


def comm_kind(item: Any) -> str | None:
    """``"collective"`` for a scheduled item that issues a collective, ``"wait"`` for a
    ``wait_tensor`` call, None for anything else (kernels, other extern calls)."""
    return _buf_comm_kind(getattr(item, "buf", None))


def _chain(item: Any) -> str | None:
    """The chain whose graph order an item keeps (``memory.item_dependencies``): collectives
    among themselves, waits in none, other order-sensitive items among themselves."""
    kind = comm_kind(item)
    if kind is not None:
        return "collectives" if kind == "collective" else None
    return "ordered" if _ordered_among_themselves(item) else None


def order_for_overlap(items: list[Any]) -> list[Any]:
    """``items`` (scheduled KernelGroups and ExternSchedulerNodes in call order) reordered so that
    collectives are issued early and waited on late (see the module doc); the same list when it
    holds no collective."""
    kinds = [comm_kind(it) for it in items]
    if "collective" not in kinds:
        return items
    n = len(items)
    preds = item_dependencies(items, _chain)
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    # per item, the rank of the first collective (in graph order) that needs it (n: none)
    first = [n] * n
    rank = 0
    for i in range(n):
        if kinds[i] != "collective":
            continue
        stack = [i]
        while stack:
            j = stack.pop()
            if first[j] <= rank:
                continue  # it and its ancestors already lead to an earlier collective
            first[j] = rank
            stack.extend(preds[j])
        rank += 1
    waiting = [len(ps) for ps in preds]
    ready = [(first[i], kinds[i] == "wait", i) for i in range(n) if not waiting[i]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)[2]
        order.append(i)
        for s in succs[i]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, (first[s], kinds[s] == "wait", s))
    if len(order) != n:  # a cycle: cannot happen for dependencies taken from graph order
        raise RuntimeError(f"order_for_overlap: {n - len(order)} of {n} items have unmet dependencies")
    moved = sum(1 for k, i in enumerate(order) if k != i)
    if moved:
        log.debug("tilefuse: ordering for communication overlap moves %d of %d items", moved, n)
    return [items[i] for i in order]
