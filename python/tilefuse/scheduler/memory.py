"""Ordering the scheduled items for peak memory (Inductor's ``reorder_for_peak_memory``).

``order_for_peak_memory`` builds a model of the fused schedule (``_memory_model``: each item's
dependencies, the bytes it allocates, the buffers it reads and frees), estimates the peak of an
order (``estimate_peak_memory``) and compares graph order with two alternatives: graph order
hoisting memory-freeing items (``_graph_order_hoisting_frees``) and the least-peak-first greedy
order (``_least_peak_first``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

from .. import config
from .. import sizevars as SV
from ..ir import nodes as ir
from ..logs import log
from .nodes import KernelGroup, item_reads, item_writes


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


def item_dependencies(items: list[Any], chain_of: Callable[[Any], Any] | None = None) -> list[set[int]]:
    """Per item of ``items`` (scheduled items in graph order), the positions of the items that
    must run before it in any reordering: read after write, write after write and write after
    read on every buffer name, and graph order within each chain: the items for which
    ``chain_of(item)`` returns the same value other than None (default: one chain of the items
    ``_ordered_among_themselves``)."""
    if chain_of is None:
        chain_of = _side_effect_chain
    reads = [item_reads(it) for it in items]
    writes = [item_writes(it) for it in items]
    preds: list[set[int]] = [set() for _ in items]
    last_writer: dict[str, int] = {}
    readers_since: dict[str, set[int]] = {}
    chains: dict[Any, int] = {}
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
        chain = chain_of(it)
        if chain is not None:
            if chain in chains:
                preds[i].add(chains[chain])
            chains[chain] = i
        preds[i].discard(i)
    return preds


def _side_effect_chain(item: Any) -> str | None:
    return "ordered" if _ordered_among_themselves(item) else None


def _memory_model(items: list[Any], graph: Any) -> _MemoryModel:
    """The ``_MemoryModel`` of ``items`` (scheduled items in graph order) in ``graph`` (its
    outputs are never freed; its inputs are alive at the start)."""
    n = len(items)
    reads = [item_reads(it) for it in items]
    preds = item_dependencies(items)

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
        """Bytes item i frees when it runs now (it is the last remaining reader)."""
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
    only when it saves at least ``config.MIN_PEAK_GAIN`` of the memory in play (the graph's
    inputs plus graph order's peak): a reorder that moves every item of a large graph for a
    fraction of a percent of its memory is not worth the change of kernel order. Ties go to the
    order closer to graph order. Dependencies kept: read after write, write after write and write
    after read on every buffer name, and graph order among fallback kernels, random seeds,
    mutating extern ops and in-place update kernels (``_ordered_among_themselves``). Sizes are
    storage bytes (size hints for symbolic sizes). In a transformer block's backward the
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
    needed = best_freed - config.MIN_PEAK_GAIN * (model.input_bytes + max(best_freed, 0))
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
