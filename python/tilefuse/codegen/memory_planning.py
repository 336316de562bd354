"""Memory planning of a generated graph module: when each buffer dies, which storage a new buffer
takes over, which kernel outputs are stored in place of a dying input, when graph inputs are
released, and which generated kernels are duplicates of one another.

The wrapper (``wrapper.WrapperCodegen``) walks the scheduled items in order and asks the
``MemoryPlanner`` at each step; the planner answers with plain values (names, layouts' reuse
keys, line indices of the call body) and the wrapper writes the lines.

Buffer reuse (Inductor's memory planning, simplified): a freed buffer's storage is taken by the
next allocation of the same device, dtype and storage size instead of a new allocation, unless
an extern call that allocates its own result comes first (``release_pool``). Only
buffers the wrapper allocated, and the fresh results of convolutions and matrix products, of
static layout, read by generated kernels or extern kernels (mm, conv, attention: fresh results,
never views of their inputs) take part, so no live tensor can alias a storage that is handed on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..ir import nodes as ir
from ..scheduler import KernelGroup, item_reads
from .triton_kernel import GeneratedKernel


def reuse_key(L: Any) -> tuple | None:
    """(device, dtype, storage elements, size, stride) of a static layout starting at offset 0
    with no empty dimension, or None: buffers with equal first three fields can share one
    storage."""
    if not all(isinstance(v, int) for v in (*L.size, *L.stride)) or not isinstance(L.offset, int) or L.offset:
        return None
    if any(n == 0 for n in L.size):
        return None
    span = 1 + sum((n - 1) * st for n, st in zip(L.size, L.stride))
    return (str(L.device), L.dtype, span, tuple(L.size), tuple(L.stride))


def readers_of(items: list[Any]) -> dict[str, list[int]]:
    """Buffer name -> positions of the scheduled items that read it, in order."""
    readers: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        for r in item_reads(item):
            readers.setdefault(r, []).append(i)
    return readers


@dataclass
class Allocation:
    """How a new buffer gets its storage: ``reuses`` the freed buffer whose storage it takes
    (None: a fresh allocation), ``same_layout`` whether that buffer had exactly its layout (the
    name is rebound; else a ``reinterpret_tensor`` view), and ``drop_line`` the index of the call
    body's ``del`` of the reused buffer, which the wrapper blanks (the storage lives on)."""

    reuses: str | None = None
    same_layout: bool = False
    drop_line: int | None = None


class MemoryPlanner:
    """Liveness and storage decisions for one graph's call body.

    ``items``: the scheduled items in call order; ``out_names``: the buffers the graph returns
    (never freed or reused). ``readers`` and ``last_use`` give each buffer's reading items;
    ``reusable`` holds the buffers whose storage may be handed on (name -> ``reuse_key``);
    ``consumed`` the inputs whose memory an in-place output took over; ``live`` the buffers made
    and not yet freed."""

    def __init__(self, items: list[Any], out_names: set[str]):
        self.items = items
        self.out_names = out_names
        self.readers = readers_of(items)
        self.last_use = {name: max(rs) for name, rs in self.readers.items()}
        self.reusable: dict[str, tuple] = {}
        self.consumed: set[str] = set()
        self.live: list[str] = []
        self._pool: dict[tuple, list[str]] = {}  # (device, dtype, span) -> freed buffers
        self._del_line: dict[str, int] = {}  # pooled buffer -> index of its `del` line

    def safe_readers(self, name: str) -> bool:
        """Whether every item reading ``name`` is a generated kernel or an extern kernel that is
        no fallback (those never return views of their inputs)."""
        for j in self.readers.get(name, ()):
            it = self.items[j]
            if not isinstance(it, KernelGroup) and (
                not isinstance(it.buf, ir.ExternKernel) or isinstance(it.buf, ir.FallbackKernel)
            ):
                return False
        return True

    def allocate(self, name: str, layout: Any) -> Allocation:
        """Storage for a new buffer ``name`` of ``layout``: a pooled freed buffer of the same
        device, dtype and span if there is one, else a fresh allocation. The buffer becomes
        reusable itself when its layout is static, it is no graph output and only safe readers
        read it."""
        key = reuse_key(layout)
        free = self._pool.get(key[:3]) if key is not None else None
        alloc = Allocation()
        if free:
            old = free.pop()
            alloc = Allocation(old, key[3:] == self.reusable[old][3:], self._del_line.pop(old))
        self.adopt(name, layout)
        return alloc

    def adopt(self, name: str, layout: Any) -> None:
        """Make buffer ``name`` (of ``layout``) reusable when its layout is static, it is no graph
        output and only safe readers read it. Called for every allocated buffer, every in-place
        output, and the fresh result of a convolution or matrix product once the wrapper's
        ``ensure_strides`` gave it exactly ``layout`` (its own storage of that span, aliasing
        nothing): a pointwise kernel reading such a result for the last time can then store its
        output in place (a convolution's batch norm and activation over its result, as Inductor's
        in-place reuse does), and a later allocation can take its storage."""
        key = reuse_key(layout)
        if key is not None and name not in self.out_names and self.safe_readers(name):
            self.reusable[name] = key

    def take_over(self, name: str, src: str, layout: Any) -> bool:
        """Record output ``name`` (of ``layout``) stored in place of the dying input ``src``;
        returns whether the layouts are the same (the output is ``src`` itself, else a view of
        it). The output's storage is reusable in turn under the rule of ``allocate``."""
        self.consumed.add(src)
        self.adopt(name, layout)
        return reuse_key(layout) == self.reusable[src]

    def release_dead(self, i: int, first_line: int) -> list[str]:
        """The live buffers no item after position ``i`` reads (graph outputs excepted), in the
        order they were made, now freed: the wrapper writes one ``del`` line for each, the k-th at
        call-body index ``first_line + k``. Reusable ones join the pool (an in-place output's
        input excepted: its storage lives on in the output)."""
        dead = [n for n in self.live if self.last_use.get(n, -1) <= i and n not in self.out_names]
        for k, n in enumerate(dead):
            self.live.remove(n)
            if n in self.reusable and n not in self.consumed:
                self._del_line[n] = first_line + k
                self._pool.setdefault(self.reusable[n][:3], []).append(n)
        return dead

    def release_pool(self) -> None:
        """Give up the pooled buffers before a call that allocates its own result (an extern
        kernel: a convolution, a matrix product's ``aten`` call, a fallback): their ``del`` lines
        stay, so their storage returns to the device's allocator where they died and that call
        (or any later allocation) can take it. Held for a later same-size allocation instead,
        a freed activation would stay live across the call and raise the peak by its size (a
        ConvNeXt block's normalized input, held through the block's two pointwise convolutions
        until the next block's normalization took it over)."""
        self._pool.clear()
        self._del_line.clear()

    def inplace_candidates(self, item: KernelGroup, i: int) -> dict[str, str]:
        """Output -> input pairs of a pointwise kernel that can share memory (Inductor's in-place
        reuse, ``Scheduler.decide_inplace_update``): the input is a buffer this wrapper allocated
        (``reusable``: static layout, read only by kernels), not a graph output, read for the last
        time here and, in this kernel, only by that output's node, at exactly the memory offset
        the output is stored at, with the same device, dtype and storage size (the sizes may
        differ: a [8192, 8192] product under a [8, 1024, 8192] GELU); the output is read by no
        other node of the kernel. Each element is then loaded before the same lane stores over
        it, so the output needs no memory of its own (an MLP's GELU stored over its matmul's
        result)."""
        if item.rnumel != 1:
            return {}
        pairs: dict[str, str] = {}
        readers_in = {n.name: n.read_names() for n in item.nodes}
        for n in item.nodes:
            if isinstance(n.buf, ir.MutationBuffer) or (n.name not in self.readers and n.name not in self.out_names):
                continue
            key = reuse_key(n.buf.layout) if n.buf.layout is not None else None
            if key is None or any(n.name in r for m, r in readers_in.items() if m != n.name):
                continue
            _, _, loads, stores = item.maps[n]
            if len(stores) != 1:
                continue
            for x, idx in loads:
                if not self._may_take_over(x, i, key, pairs, readers_in):
                    continue
                if any(x in r for m, r in readers_in.items() if m != n.name):
                    continue
                if all(j == stores[0][1] for y, j in loads if y == x):
                    pairs[n.name] = x
                    break
        return pairs

    def _may_take_over(self, x: str, i: int, key: tuple, pairs: dict, readers_in: dict) -> bool:
        """Whether input ``x`` of item ``i`` may give its memory to an output of reuse key
        ``key``: pooled-kind storage of the same device, dtype and span, dying at item ``i``, no
        graph output, not produced in the kernel, and not already given to another output."""
        return not (
            x in pairs.values()
            or x in self.consumed
            or x not in self.reusable
            or x in self.out_names
            or self.last_use.get(x) != i
            or self.reusable[x][:3] != key[:3]
            or x in readers_in
        )


def kernel_dedup_key(gk: GeneratedKernel, name: str) -> tuple:
    """The identity of a generated kernel for deduplication: its source with its name ``name``
    taken out, plus everything its launcher is built from (grid, configs, arguments updated in
    place). Identical kernels (the same layer repeated in a model) are defined, compiled and
    autotuned once."""
    return (
        gk.source.replace(f"def {name}(", "def _(", 1),
        tuple(map(str, gk.grid_axes)),
        repr(gk.configs),
        tuple(i for i, a in enumerate(gk.arg_names) if a in set(gk.mutated_args)),
    )


def free_inputs_after_last_use(body: list[str], inputs: list[str], returned: str) -> list[str]:
    """``body`` with ``del <input>`` after the last line that names each graph input (at the top
    for one no line names), except inputs the return expression names. The call takes its inputs
    in one list it clears (AOTAutograd's boxed convention), so these names hold the only
    references the call has: a training step's backward receives the forward's saved activations
    this way, and each is released as soon as the backward is done with it instead of at the
    end of the call, as Inductor's wrapper does (``del primals_3``). Liveness is textual: the
    body is straight-line code, and a line that makes another name refer to an input (``buf5 =
    arg3``, a view of it) keeps the tensor alive through that name."""
    if not inputs:
        return body
    word = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(inputs, key=len, reverse=True)) + r")\b")
    kept = set(word.findall(returned))
    last: dict[str, int] = {}
    for k, ln in enumerate(body):
        for name in word.findall(ln):
            last[name] = k
    after: dict[int, list[str]] = {}
    for name in inputs:
        if name not in kept:
            after.setdefault(last.get(name, -1), []).append(name)
    out = [f"del {n}" for n in after.get(-1, [])]
    for k, ln in enumerate(body):
        out.append(ln)
        out += [f"del {n}" for n in after.get(k, [])]
    return out
