"""Fusion rules: whether a node may join a kernel group, each decision a named rule.

A rule is a function that returns None when it lets the fusion through, or a ``Refusal`` naming
itself and the concrete values that refused (sizes, buffer names). ``try_fuse`` runs the kernel
rules (``KERNEL_RULES``) in order and stops at the first refusal; the scheduler's placement
(``Placement`` in the package's ``__init__``) runs the cheap candidate rules before it and the preference rules after it.
``RULES`` lists every rule in the order a candidate meets them.

A kernel group covers one iteration space ``(numel, rnumel)``. A node fits it when its group is
the same; when it is a pointwise node of ``numel·rnumel`` elements in a reduction kernel (a
prologue / main-body node, computed inside the reduction loop: kind 'xr'); or a pointwise node of
``numel`` elements after a reduction (an epilogue: kind 'x'). Every value a node reads from a
buffer written earlier in the kernel must be read at exactly the index it was written (the
MemoryDep of the read equals that of the write), so the value stays in registers.

Refusals and fusions are logged at DEBUG on the ``tilefuse.fusion`` logger, or on torch's ``fusion``
artifact (``TORCH_LOGS=fusion``), through ``tilefuse.logs.log_fusion``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import config
from .. import sizevars as SV
from .. import logs
from .nodes import ExternSchedulerNode, KernelGroup, SchedulerNode, index_map, item_writes, node_reduction_hint


class Refusal(NamedTuple):
    """A fusion rule's refusal: ``rule`` is the refusing rule's function name, ``reason`` the
    message ``fmt % args`` with the concrete values (built only when read: a compile without the
    debug log never formats it)."""

    rule: str
    fmt: str
    args: tuple = ()

    @property
    def reason(self) -> str:
        """The message, with the concrete values."""
        return self.fmt % self.args


# ------------------------------------------------------------------ candidate rules (placement)


def extern_call(item: Any) -> Refusal | None:
    """Extern and fallback kernels (matrix products, convolutions, aten fallbacks, random seeds)
    are calls into code tilefuse does not generate: they take no node."""
    if isinstance(item, KernelGroup):
        return None
    return Refusal("extern_call", "%s is an extern or fallback call", (item.name,))


def written_in_between(reads: set[str], written_after: set[str]) -> Refusal | None:
    """A node moves earlier than graph order only past items that write nothing it reads
    (``written_after``: the buffers written by the items between the candidate kernel and the
    node's place in graph order): then it reads the same values in the kernel it joins."""
    hit = reads & written_after
    if not hit:
        return None
    return Refusal("written_in_between", "it reads %s, written by an item in between", (sorted(hit),))


def iteration_space(group: KernelGroup, node: SchedulerNode) -> Refusal | None:
    """The node's iteration space fits the kernel's (numel, rnumel): a reduction joins a kernel of
    its own (numel, rnumel), or a pointwise kernel of numel·rnumel elements (whose nodes then run
    inside its loop); a pointwise node joins a kernel of its numel (an epilogue, or a kernel of the
    same pointwise space) or a reduction kernel of numel·rnumel (inside the loop). Nothing else has
    one index space that both cover."""
    if node.is_reduction():
        if (group.numel, group.rnumel) == (node.numel, node.rnumel) or (
            group.rnumel == 1 and group.numel == node.numel * node.rnumel
        ):
            return None
    elif node.numel in (group.numel, group.numel * group.rnumel):
        return None
    return Refusal(
        "iteration_space",
        "node (numel, rnumel) = (%s, %s), kernel (%s, %s)",
        (node.numel, node.rnumel, group.numel, group.rnumel),
    )


def in_place_update(group: KernelGroup) -> Refusal | None:
    """A kernel holding an in-place (atomic or scatter) update of another buffer takes no other
    node: it must run after every kernel that initializes or reads the target's old value and
    before every reader of the new one, so it stays at its place in graph order, alone."""
    if not group.has_mutation():
        return None
    target = next(n.buf.target.name for n in group.nodes if n.is_mutation())
    return Refusal("in_place_update", "the kernel updates %s in place", (target,))


# ------------------------------------------------------------------------------ kernel rules


def max_fusion_size(group: KernelGroup) -> Refusal | None:
    """At most ``config.MAX_FUSION_SIZE`` nodes per kernel (Inductor's ``max_fusion_size``):
    Triton's compile time grows faster than a kernel's size, while the memory traffic of the same
    nodes split over several kernels is the same."""
    limit = config.MAX_FUSION_SIZE
    if len(group.nodes) < limit:
        return None
    return Refusal("max_fusion_size", "the kernel has %d nodes, MAX_FUSION_SIZE is %d", (len(group.nodes), limit))


def every_node_maps(nodes: list[SchedulerNode], numel: Any, rnumel: Any, maps: dict) -> Refusal | None:
    """Every node of the fused kernel sits in its iteration space (``SchedulerNode.mapping``):
    a reduction joining a pointwise kernel turns it into a reduction kernel, where each node
    already there must map onto (numel, rnumel) too. Fills ``maps`` (node -> ``index_map``)."""
    for n in nodes:
        mp = index_map(n, numel, rnumel)
        if mp is None:
            return Refusal(
                "every_node_maps",
                "%s (numel %s, rnumel %s) does not map onto the kernel's (%s, %s)",
                (n.name, n.numel, n.rnumel, numel, rnumel),
            )
        maps[n] = mp
    return None


def few_rows_long_loop(nodes: list[SchedulerNode], numel: Any, rnumel: Any, maps: dict) -> Refusal | None:
    """No pointwise node inside the loop of a reduction over fewer than ``config.FEW_ROWS``
    output rows each longer than ``config.LONG_ROW``: such a reduction runs on few programs (one
    per XBLOCK rows), and pointwise work in its loop would run on those few programs instead of
    the whole GPU. (A split reduction would parallelize it; see docs/backend.md. Symbolic sizes
    are judged by their size hints.)"""
    if rnumel == 1:
        return None
    sv = SV.current()
    rows, length = sv.hint(numel), sv.hint(rnumel)
    if rows >= config.FEW_ROWS or length <= config.LONG_ROW:
        return None
    guests = [n.name for n in nodes if maps[n][0] == "xr"]
    if not guests:
        return None
    return Refusal(
        "few_rows_long_loop",
        "%s would run inside a loop over %d rows of %d elements (FEW_ROWS %d, LONG_ROW %d)",
        (guests, rows, length, config.FEW_ROWS, config.LONG_ROW),
    )


def _outer_mix(group: KernelGroup, node: SchedulerNode, maps: dict) -> bool:
    """Whether ``node`` would bring a pointwise-in-loop node to a kernel with an outer reduction,
    or an outer reduction to a kernel with pointwise-in-loop nodes."""
    if maps[node][0] == "xr":
        return any(n.is_reduction() and node_reduction_hint(n) == "outer" for n in group.nodes)
    if node.is_reduction() and node_reduction_hint(node) == "outer":
        return any(maps[n][0] == "xr" for n in group.nodes)
    return False


def outer_reduction_mix(group: KernelGroup, node: SchedulerNode, maps: dict) -> Refusal | None:
    """A pointwise-in-loop ('xr') node and an outer reduction (it reads columns across rows:
    contiguous along xindex) share a kernel only when the new node touches a buffer at an index
    the kernel already does (Inductor's fusion score, applied where it matters). The 'xr' node's
    flat index xindex·rnumel + rindex runs along rindex: when the reduction's iteration space is
    not the node's own (columns of a split or transposed reduction) the two read every element at
    different positions, and no tile shape coalesces both. Kept apart, the pointwise node finds a
    kernel whose order matches (a LayerNorm backward's dx joins its per-row reduction, not the
    weight-gradient column sums); a row softmax of a transposed input (an outer hint, but its
    division reads the input where its reductions do) stays one kernel."""
    if not _outer_mix(group, node, maps):
        return None
    mine = set(maps[node][2] + maps[node][3])
    if any(d in mine for n in group.nodes for d in maps[n][2] + maps[n][3]):
        return None
    return Refusal(
        "outer_reduction_mix",
        "%s (%s) would meet an outer reduction and reads or writes no buffer at an index the kernel does",
        (node.name, maps[node][0]),
    )


def read_at_written_index(nodes: list[SchedulerNode], maps: dict) -> Refusal | None:
    """Every read of a buffer written earlier in the kernel is at the index it was written (the
    MemoryDeps equal after mapping onto xindex/rindex): the value then comes from the writing
    node's registers, in the same program and iteration. A read elsewhere would need the value of
    another program or iteration, which is only in memory after the kernel ends."""
    written: dict[str, tuple[Any, str]] = {}
    for n in nodes:
        _, _, loads, stores = maps[n]
        for name, idx in loads:
            if name in written and idx != written[name][0]:
                return Refusal(
                    "read_at_written_index",
                    "%s reads %s at %s, written at %s by %s",
                    (n.name, name, idx, written[name][0], written[name][1]),
                )
        for name, idx in stores:
            written[name] = (idx, n.name)
    return None


def x_reads_loop_value(nodes: list[SchedulerNode], maps: dict) -> Refusal | None:
    """A node outside the reduction loop (kind 'x': once per output row) reads no buffer written
    by a node inside the loop (kind 'xr'): that value varies along rindex, and only its last
    iteration's would be in registers after the loop."""
    if not any(maps[n][0] == "xr" for n in nodes):
        return None  # no value varies along rindex
    written: dict[str, tuple[str, str]] = {}
    for n in nodes:
        kind, _, loads, stores = maps[n]
        if kind == "x":
            for name, _ in loads:
                if name in written and written[name][0] == "xr":
                    return Refusal(
                        "x_reads_loop_value",
                        "%s (once per row) reads %s, written inside the loop by %s",
                        (n.name, name, written[name][1]),
                    )
        for name, _ in stores:
            written[name] = ("x" if kind in ("x", "red") else "xr", n.name)
    return None


KERNEL_RULES = (
    max_fusion_size,
    iteration_space,
    every_node_maps,
    few_rows_long_loop,
    outer_reduction_mix,
    read_at_written_index,
    x_reads_loop_value,
)


def try_fuse(group: KernelGroup, node: SchedulerNode) -> KernelGroup | Refusal:
    """The group extended by ``node``, or the ``Refusal`` of the first of ``KERNEL_RULES`` that
    refuses (different iteration spaces, a read that cannot stay in registers, a full kernel...).
    ``KernelGroup([], node.numel, node.rnumel)`` takes any node: a kernel of its own."""
    r = max_fusion_size(group)
    if r is None:
        r = iteration_space(group, node)
    if r is not None:
        return r
    if node.is_reduction():
        numel, rnumel = node.numel, node.rnumel
    else:
        numel, rnumel = group.numel, group.rnumel
    nodes = group.nodes + [node]
    maps: dict = {}
    r = every_node_maps(nodes, numel, rnumel, maps)
    if r is None:
        r = few_rows_long_loop(nodes, numel, rnumel, maps)
    if r is None:
        r = outer_reduction_mix(group, node, maps)
    if r is None:
        r = read_at_written_index(nodes, maps)
    if r is None:
        r = x_reads_loop_value(nodes, maps)
    if r is not None:
        return r
    return KernelGroup(nodes, numel, rnumel, maps)


# -------------------------------------------------------------------------- preference rules


def loop_guest(fused: KernelGroup, node: SchedulerNode, reads: set[str]) -> Refusal | None:
    """A pointwise node does not join a kernel as a guest in another reduction's loop (kind
    'xr') without reading anything the kernel writes (horizontal fusion into a loop) while the
    kernel producing its inputs may take it: such a node runs on the reduction's programs (few,
    when the reduction has few outputs), while with its producer it becomes an epilogue or joins
    its own loop (vertical fusion first, as Inductor's fusion score ranks it). Cross-entropy's
    per-row target losses would otherwise join the one-program count of non-ignored targets
    instead of the row log-sum-exp kernel that computes their normalizers. Within the lookback
    such a fit is kept as the last resort."""
    if node.is_reduction() or fused.maps[node][0] != "xr":
        return None
    if any(not reads.isdisjoint(n.write_names) for n in fused.nodes if n is not node):
        return None
    return Refusal(
        "loop_guest",
        "%s would run inside the loop over (%s, %s) and reads nothing the kernel writes",
        (node.name, fused.numel, fused.rnumel),
    )


def producer_first(item: KernelGroup, reads: set[str], guest_at: int) -> Refusal | None:
    """Once a loop-guest fit (``loop_guest``) is pending, an earlier kernel takes the node only
    if it writes a buffer the node reads: the search goes on for its producer, not for another
    unrelated kernel."""
    if reads & item_writes(item):
        return None
    return Refusal(
        "producer_first",
        "the kernel writes none of %s, and a loop-guest fit at item #%d is pending",
        (sorted(reads), guest_at),
    )


def far_guest_few_rows(fused: KernelGroup, node: SchedulerNode, reads: set[str]) -> Refusal | None:
    """Beyond the lookback a node does not join the loop of a reduction over fewer than
    ``config.FEW_ROWS`` rows unless it reads what that kernel writes (``loop_guest``): it would
    run on few programs."""
    guest = loop_guest(fused, node, reads)
    if guest is None:
        return None
    rows = SV.current().hint(fused.numel)
    if rows >= config.FEW_ROWS:
        return None
    return Refusal(
        "far_guest_few_rows",
        "%s; %d rows, fewer than FEW_ROWS %d",
        (guest.reason, rows, config.FEW_ROWS),
    )


# every rule, in the order a candidate kernel meets them
CANDIDATE_RULES = (extern_call, written_in_between, iteration_space, in_place_update)
PREFERENCE_RULES = (loop_guest, producer_first, far_guest_few_rows)
RULES = tuple(dict.fromkeys(CANDIDATE_RULES + KERNEL_RULES + PREFERENCE_RULES))


# ---------------------------------------------------------------------------------- logging


def describe(item: Any, pos: int | None = None) -> str:
    """A kernel group or extern call as the fusion log names it: its position among the scheduled
    items, its nodes' buffer names (the first four) and its (numel, rnumel)."""
    at = "" if pos is None else f" #{pos}"
    if isinstance(item, ExternSchedulerNode):
        return f"extern{at} {item.name}"
    names = [n.name for n in item.nodes]
    shown = ", ".join(names[:4]) + (f", +{len(names) - 4} more" if len(names) > 4 else "")
    return f"kernel{at} [{shown}] over ({item.numel}, {item.rnumel})"


def debug_enabled() -> bool:
    """Whether fusion decisions are wanted (``logs.fusion_enabled``; checked once per
    ``schedule`` call)."""
    return logs.fusion_enabled()


def log_refusal(node: SchedulerNode, item: Any, pos: int | None, refusal: Refusal) -> None:
    """``cannot fuse <node> into <item>: <rule>: <reason>`` on the fusion log. The record's
    ``tilefuse_target`` attribute holds the buffer names of ``item`` at that moment (a kernel's
    nodes, or the extern call's buffer): every one of them stays in the item ``item`` becomes, so
    a reader finds the kernel or call that refused the node in the scheduled graph."""
    names = [item.name] if isinstance(item, ExternSchedulerNode) else [n.name for n in item.nodes]
    logs.log_fusion(
        node.name,
        "cannot fuse %s into %s: %s: %s",
        node.name,
        describe(item, pos),
        refusal.rule,
        refusal.reason,
        extra={"tilefuse_target": names},
    )


def log_fused(node: SchedulerNode, group: KernelGroup, fused: KernelGroup, pos: int, how: str, rules: tuple) -> None:
    """``fused <node> into <kernel> as <kind> (<how>; passed <rules>)`` on the fusion log,
    ``group`` being the kernel before and ``fused`` after."""
    logs.log_fusion(
        node.name,
        "fused %s into %s as %s (%s; passed %s)",
        node.name,
        describe(group, pos),
        fused.maps[node][0],
        how,
        ", ".join(r.__name__ for r in rules),
    )
