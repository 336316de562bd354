"""The loop-level IR, after Inductor's ``ir.py`` (modern API).

Values flow through lowerings as ``TensorBox(StorageBox(data))``: ``data`` is a lazily computed
``Pointwise``/``Reduction`` (an inner function over symbolic indices), a view of another node, or a
realized ``Buffer``. Realizing a StorageBox turns its Loops into a ``ComputedBuffer`` registered with
the graph; views of a realized buffer become ``ReinterpretView``s (same storage, new layout); other
views stay lazy and re-index their input's loader.

Shapes are lists of sizes: Python ints, or ``tilefuse.symbolic.Expr`` over size symbols for a
graph compiled with dynamic shapes (``tilefuse.sizevars``; comparisons between symbolic sizes go
through ``SizeVars``, which proves them or records a guard). Indices are Exprs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .. import sizevars as SV
from .. import symbolic as S
from ..virtualized import ops
from . import graph_context as G

Index = list  # list[S.Expr | int]


def prod(xs) -> int:
    """Product of static sizes (1 for none)."""
    r = 1
    for x in xs:
        r *= x
    return r


def as_expr(v) -> S.Expr:
    """A size (int or symbolic Expr) as an Expr."""
    return v if isinstance(v, S.Expr) else S.Integer(v)


def contiguous_strides(size: Sequence[int]) -> list[int]:
    """Row-major strides of ``size`` (a 0-d tensor has none)."""
    out, acc = [], 1
    for s in reversed(list(size)):
        out.append(acc)
        acc = acc * (max(s, 1) if isinstance(s, int) else s)  # symbolic sizes are >= 1
    return list(reversed(out))


def digits(flat, sizes: list[int]) -> list:
    """Row-major digits of ``flat`` (ranging over prod(sizes)): FloorDiv for the outermost digit,
    ModularIndexing for the others, 0 for size-1 dims (Inductor's range-tree construct)."""
    out = []
    stride = 1
    strides = []
    for s in reversed(sizes):
        strides.append(stride)
        stride *= s
    strides.reverse()
    for k, (s, st) in enumerate(zip(sizes, strides)):
        if s == 1:
            out.append(S.Integer(0))
        elif k == 0 or all(x == 1 for x in sizes[:k]):
            out.append(S.FloorDiv(flat, st) if st != 1 else flat)
        else:
            out.append(S.ModularIndexing(flat, st, s))
    return out


# ------------------------------------------------------------------------------------------ layouts


@dataclass
class Layout:
    """Device, dtype, size, stride and storage offset of a buffer (element units)."""

    device: torch.device
    dtype: torch.dtype
    size: list
    stride: list
    offset: int = 0

    def make_indexer(self) -> Callable[[Index], Any]:
        """index -> ``offset + Σ index_i·stride_i`` (size-1 dims skipped), as FixedLayout."""
        size, stride, offset = self.size, self.stride, self.offset

        def indexer(index: Index):
            if len(index) != len(size):
                raise ValueError(f"index of rank {len(index)} used on a layout of rank {len(size)}")
            out = offset if isinstance(offset, S.Expr) else S.Integer(offset)
            for i, s, st in zip(index, size, stride):
                if s != 1 and st != 0:
                    out = out + i * st
            return out

        return indexer

    def storage_size(self) -> int:
        if any(s == 0 for s in self.size):
            return 0
        return self.offset + sum((s - 1) * st for s, st in zip(self.size, self.stride)) + 1

    def is_contiguous(self) -> bool:
        return all(s == 1 or st == c for s, st, c in zip(self.size, self.stride, contiguous_strides(self.size)))


class FixedLayout(Layout):
    """A decided layout: strides will not change."""


class FlexibleLayout(Layout):
    """Not yet decided (contiguous by default); frozen to a FixedLayout when a view or an extern
    kernel needs concrete strides."""


# ------------------------------------------------------------------------------------------ base


class IRNode:
    """Base of every IR node: a tensor of ``get_size()``, ``get_dtype()`` on ``get_device()``."""

    def get_size(self) -> list:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def get_numel(self) -> int:
        return prod(self.get_size())

    def make_loader(self) -> Callable[[Index], Any]:
        raise NotImplementedError(f"{type(self).__name__} has no loader")

    def realize(self) -> str | None:
        return None

    def num_reads(self) -> int:
        return 1


class Loops(IRNode):
    """Lazily computed values over ``ranges``: ``inner_fn(index)`` in ops.* calls."""

    def __init__(self, device: torch.device, dtype: torch.dtype, inner_fn: Callable, ranges: list):
        self.device, self.dtype, self.inner_fn, self.ranges = device, dtype, inner_fn, list(ranges)
        self._op_count: int | None = None

    def get_size(self):
        return self.ranges

    def get_dtype(self):
        return self.dtype

    def get_device(self):
        return self.device

    def op_count(self) -> int:
        """Number of compute ops in the inner function (traced once, cached)."""
        if self._op_count is None:
            from .loop_body import LoopBody

            iv = [S.sym(f"i{k}") for k in range(len(self.ranges))]
            if isinstance(self, Reduction):
                rv = [S.sym(f"r{k}") for k in range(len(self.reduction_ranges))]
                body = LoopBody.trace(self.inner_fn, iv, rv, {}, G.dtype_of)
            else:
                body = LoopBody.trace(self.inner_fn, iv, [], {}, G.dtype_of)
            self._op_count = body.op_count() + len(body.loads())
            self._num_reads = len(set(body.loads()))
        return self._op_count

    def num_reads(self) -> int:
        """Number of distinct (buffer, index) reads of the inner function (Inductor's
        ``num_reads``)."""
        self.op_count()
        return self._num_reads


class Pointwise(Loops):
    """Elementwise values; the loader is the inner function itself (inlining)."""

    def make_loader(self):
        return self.inner_fn

    @staticmethod
    def create(device, dtype, inner_fn, ranges) -> "TensorBox":
        return TensorBox.create(Pointwise(device, dtype, inner_fn, ranges))


REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "sumexp", "sqdev")


def _combine_identity(reduction_type: str, dtype: torch.dtype) -> Any:
    """The value a reduction's combine leaves unchanged (None for arg-reductions): the result of an
    empty sum/prod/any/sumexp/sqdev, and what masked positions of a split chunk contribute (max/min:
    -inf/+inf, or the integer dtype's extremes; sqdev is never split)."""
    if reduction_type in ("sum", "sumexp", "sqdev"):
        return 0
    if reduction_type == "prod":
        return 1
    if reduction_type == "any":
        return False
    if reduction_type in ("max", "min"):
        if dtype.is_floating_point:
            return float("-inf") if reduction_type == "max" else float("inf")
        if dtype == torch.bool:
            return reduction_type == "min"
        info = torch.iinfo(dtype)
        return info.min if reduction_type == "max" else info.max
    return None


# split reductions (Reduction.num_splits)
SPLIT_TARGET_PROGRAMS = 512
SPLIT_OUTER_ROWS = 64
SPLIT_MIN_CHUNK = 2048
SPLIT_MIN_CHUNK_OUTER = 256
# an inner reduction of at most this many elements per output is never split (Inductor's
# inner_reduction_splits rule: one program reduces it faster than two kernels)
SPLIT_MAX_UNSPLIT_INNER = 8192


class Reduction(Loops):
    """``reduction_type`` over ``reduction_ranges`` of ``inner_fn(index, rindex)``, producing a
    tensor of ``ranges`` in ``dtype`` (values of ``src_dtype`` are combined, in fp32 for low
    precision floats). Types: sum, prod, max, min, argmax, argmin, any, and sumexp:
    ``Σ exp(v - max(v))`` over the row computed in one pass with a running maximum (the online
    softmax normalizer; softmax, log_softmax and logsumexp use it with a max reduction of the same
    row, which it does not depend on, so both share one loop over the row instead of the max loop
    feeding a second loop). A row of only ``-inf`` gives 0 when looped or in a persistent kernel
    that stores only per-row results, its length in a persistent kernel that also stores
    per-element values (every consumer then yields NaN or ``-inf`` as eager), a row whose maximum is
    ``+inf`` or that holds a NaN gives NaN. And sqdev: ``Σ (v - mean(v))²``, the row's sum of
    squared deviations from its own mean (Inductor's ``welford_reduce`` M2; variance is it divided
    by ``n - correction``): it does not depend on a mean reduction of the same row, so a looped
    kernel accumulates both in one loop (Welford's update per lane, Chan's combine of the lanes)
    instead of the mean's loop feeding a second loop; never split (its partials are not summable),
    so ``var_mean`` uses it only when the row stays whole (``Reduction.stays_whole``). An infinite
    or NaN element makes it NaN, as eager's variance."""

    def __init__(self, device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype):
        super().__init__(device, dtype, inner_fn, ranges)
        if reduction_type not in REDUCTION_TYPES:
            raise ValueError(f"unknown reduction type {reduction_type!r}; expected one of {REDUCTION_TYPES}")
        self.reduction_ranges = list(reduction_ranges)
        self.reduction_type = reduction_type
        self.src_dtype = src_dtype

    def store_fn(self, name: str, indexer: Callable[[Index], Any]):
        def fn(index, rindex):
            v = self.inner_fn(index, rindex)
            r = ops.reduction(self.dtype, self.src_dtype, self.reduction_type, v)
            ops.store_reduction(name, indexer(index), r)

        return fn

    @staticmethod
    def create(
        device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, allow_split: bool = True
    ) -> "TensorBox":
        """A realized reduction. An empty reduction (rnumel 0) gives the identity as a Pointwise;
        rnumel 1 gives the single element. ``allow_split=False`` keeps it one reduction whatever
        ``num_splits`` says (the max beside a sumexp of the same rows, which is never split: split,
        the max would read the rows once more instead of sharing the sumexp's pass)."""
        rnumel = prod(reduction_ranges)
        if rnumel == 0:
            ident = None if reduction_type in ("max", "min") else _combine_identity(reduction_type, dtype)
            if ident is None:
                raise ValueError(f"{reduction_type} of an empty tensor has no identity (torch raises here too)")
            return Pointwise.create(device, dtype, lambda idx: ops.constant(ident, dtype), ranges)
        if rnumel == 1 and reduction_type in ("argmax", "argmin"):
            return Pointwise.create(device, dtype, lambda idx: ops.constant(0, dtype), ranges)
        if rnumel == 1:
            zeros = [S.Integer(0)] * len(reduction_ranges)

            def single(idx):
                v = inner_fn(idx, zeros)
                if reduction_type == "any":
                    return ops.ne(v, ops.constant(0, v.dtype)) if v.dtype != torch.bool else v
                if reduction_type == "sumexp":  # exp(v - v): 1, NaN for +-inf and NaN as eager
                    v = ops.exp(ops.sub(v, v))
                if reduction_type == "sqdev":  # (v - v)²: 0, NaN for +-inf and NaN as eager
                    v = ops.mul(ops.sub(v, v), ops.sub(v, v))
                return ops.to_dtype(v, dtype) if v.dtype != dtype else v

            return Pointwise.create(device, dtype, single, ranges)
        traced: list = []  # the body traced once, by whichever decision below needs it first

        def trace():
            if not traced:
                traced.append(
                    Reduction._trace(device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype)
                )
            return traced[0]

        if allow_split and Reduction.gathers_for_few_outputs(
            device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, trace
        ):
            vals = Reduction.realize_gathered_values(device, inner_fn, ranges, reduction_ranges, src_dtype)
            return Reduction.create(
                device,
                dtype,
                lambda idx, ridx: vals(list(idx) + list(ridx)),
                ranges,
                reduction_ranges,
                reduction_type,
                src_dtype,
            )
        split = (
            Reduction.num_splits(device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, trace)
            if allow_split
            else 1
        )
        if split > 1:
            return Reduction.create_split(
                device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, split
            )
        box = TensorBox.create(Reduction(device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype))
        box.realize()
        return box

    @staticmethod
    def stays_whole(device, dtype, inner_fn, ranges, reduction_ranges, src_dtype) -> bool:
        """Whether a sum of ``inner_fn`` over ``reduction_ranges`` would be one reduction — neither
        its values realized first (``gathers_for_few_outputs``) nor split (``num_splits``) — the
        condition for ``var_mean`` to use a sqdev reduction (which is never split) beside the
        mean's sum; otherwise it keeps the two-pass form, whose sums split."""
        traced: list = []

        def trace():
            if not traced:
                traced.append(Reduction._trace(device, dtype, inner_fn, ranges, reduction_ranges, "sum", src_dtype))
            return traced[0]

        args = (device, dtype, inner_fn, ranges, reduction_ranges, "sum", src_dtype, trace)
        return not Reduction.gathers_for_few_outputs(*args) and Reduction.num_splits(*args) == 1

    @staticmethod
    def _trace(device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype):
        """The reduction body traced over fresh index symbols (a probe store), for the lowering's
        decisions below."""
        from .loop_body import LoopBody

        iv = [S.sym(f"i{k}") for k in range(len(ranges))]
        rv = [S.sym(f"r{k}") for k in range(len(reduction_ranges))]
        var_ranges = dict(zip(iv, ranges)) | dict(zip(rv, reduction_ranges))
        probe = Reduction(device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype)
        return LoopBody.trace(
            probe.store_fn("split_probe", lambda idx: S.Integer(0)),
            iv,
            rv,
            var_ranges,
            lambda name: dtype if name == "split_probe" else G.dtype_of(name),
        )

    @staticmethod
    def _programs(numel, outer: bool) -> int:
        return -(-numel // (SPLIT_OUTER_ROWS if outer else 1))

    @staticmethod
    def gathers_for_few_outputs(
        device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, trace: Callable
    ) -> bool:
        """Whether the values this reduction combines are gathered (an ``indirect_indexing`` in its
        body: one random access per element, e.g. cross-entropy's target logits, 8192 gathers from
        8192 rows of 32000) while it produces too few outputs to fill the GPU (fewer than
        ``SPLIT_TARGET_PROGRAMS`` programs, the split rule's measure) — then ``create`` realizes
        the values first (``realize_gathered_values``). Symbolic sizes are judged at their hints.
        ``trace``: returns the traced body (``create`` passes one that traces once for both this
        and ``num_splits``)."""
        sv = SV.current()
        numel, rnumel = sv.hint(prod(ranges)), sv.hint(prod(reduction_ranges))
        if rnumel < 2 or numel >= SPLIT_TARGET_PROGRAMS * SPLIT_OUTER_ROWS:
            return False
        body = trace()
        if not any(n.op == "indirect_indexing" for n in body.nodes):
            return False
        return Reduction._programs(numel, body.reduction_hint() == "outer") < SPLIT_TARGET_PROGRAMS

    @staticmethod
    def realize_gathered_values(device, inner_fn, ranges, reduction_ranges, src_dtype) -> Callable[[Index], Any]:
        """Realize a gathering reduction's values as a pointwise buffer of ``ranges +
        reduction_ranges`` in ``src_dtype`` (the values the reduction combines, unchanged) and
        return its loader. The gathers then run in a kernel over all ``numel × rnumel`` elements
        — or in the epilogue of the kernel that produces the values' other inputs: cross-entropy's
        per-row loss joins the row log-sum-exp kernel, which has just read that row —, and the
        reduction reads a contiguous buffer. A reduction over few outputs that gathered itself
        ran its random accesses on few programs: latency-bound (on the H200 cross-entropy's sum
        of the gathered target log-probabilities took 44 µs on 4 programs of 2048 gathers, and
        split 32 × 256 it still cost two kernels beside the count of targets, 5 in all). Costs
        one write and one read of ``numel × rnumel`` elements, small beside the gathers."""
        nk = len(ranges)
        vals = Pointwise.create(
            device,
            src_dtype,
            lambda idx: inner_fn(list(idx[:nk]), list(idx[nk:])),
            list(ranges) + list(reduction_ranges),
        )
        vals.realize()
        return vals.make_loader()

    @staticmethod
    def num_splits(
        device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, trace: Callable
    ) -> int:
        """How many chunks to split the reduction into (1: no split), after Inductor's split
        reductions. A reduction whose kernel would run on fewer than ``SPLIT_TARGET_PROGRAMS``
        programs leaves most of the GPU idle (a full sum of a large tensor runs on one): it is
        split into ``s`` chunks reduced by a first kernel over ``s × numel`` outputs, then a small
        second reduction over the ``s`` partials. Programs are estimated from the reduction hint
        (one output per program for inner reductions, ``SPLIT_OUTER_ROWS`` for outer ones); ``s`` is
        the smallest power of two that reaches the target while chunks keep at least
        ``SPLIT_MIN_CHUNK`` (inner) / ``SPLIT_MIN_CHUNK_OUTER`` elements (a chunk count that does
        not divide rnumel masks the last chunk's tail). Rows of fewer than 4096 elements, and
        inner rows of at most ``SPLIT_MAX_UNSPLIT_INNER`` (Inductor's ``inner_reduction_splits``
        bound), are not split. Only for sum, prod, max, min and any (combinable partials).
        ``trace``: as for ``gathers_for_few_outputs``."""
        if reduction_type not in ("sum", "prod", "max", "min", "any"):
            return 1
        # symbolic sizes are judged at their hints; chunks are CeilDiv(rnumel, s) long with the
        # tail masked whenever s does not divide rnumel statically (create_split), so any s is
        # exact for every size
        sv = SV.current()
        numel, rnumel = sv.hint(prod(ranges)), sv.hint(prod(reduction_ranges))
        if rnumel < 4096 or numel >= SPLIT_TARGET_PROGRAMS * SPLIT_OUTER_ROWS:
            return 1  # too short to split, or enough programs whichever the hint: no body trace
        outer = trace().reduction_hint() == "outer"
        if not outer and rnumel <= SPLIT_MAX_UNSPLIT_INNER:
            return 1
        programs = Reduction._programs(numel, outer)
        if programs >= SPLIT_TARGET_PROGRAMS:
            return 1
        min_chunk = SPLIT_MIN_CHUNK_OUTER if outer else SPLIT_MIN_CHUNK
        best, s = 1, 2
        while rnumel // s >= min_chunk:
            best = s
            if programs * s >= SPLIT_TARGET_PROGRAMS:
                break
            s *= 2
        return best

    @staticmethod
    def create_split(device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, split):
        """Two reductions: partials over ``[split] + ranges`` (chunk k reduces flat reduction indices
        ``k·chunk … (k+1)·chunk - 1``; the split dim is outermost so outputs stay contiguous along
        the original ones), then ``reduction_type`` of the partials over the split dim. Partials
        are kept in ``dtype`` (the accumulation dtype). An rnumel that ``split`` does not divide
        (always assumed for a symbolic one) is cut into chunks of ``CeilDiv(rnumel, split)``:
        positions past rnumel read the last element (in bounds) and contribute the reduction's
        identity instead (``where``), so the split is exact for every size."""
        rnumel = prod(reduction_ranges)
        if isinstance(rnumel, int) and rnumel % split == 0:
            chunk = rnumel // split

            def part_fn(idx, ridx):
                return inner_fn(list(idx[1:]), digits(idx[0] * chunk + ridx[0], list(reduction_ranges)))
        else:
            chunk = -(-rnumel // split) if isinstance(rnumel, int) else SV.static_or_expr(S.CeilDiv(rnumel, split))
            ident = _combine_identity(reduction_type, src_dtype)

            def part_fn(idx, ridx):
                return masked_tail(
                    lambda pos: inner_fn(list(idx[1:]), digits(pos, list(reduction_ranges))),
                    idx[0] * chunk + ridx[0],
                    rnumel,
                    ident,
                )

        part = TensorBox.create(
            Reduction(device, dtype, part_fn, [split] + list(ranges), [chunk], reduction_type, src_dtype)
        )
        part.realize()
        load = part.make_loader()
        box = TensorBox.create(
            Reduction(
                device, dtype, lambda idx, ridx: load([ridx[0]] + list(idx)), ranges, [split], reduction_type, dtype
            )
        )
        box.realize()
        return box


def masked_tail(load_at: Callable, pos, n, fill):
    """The value at position ``pos`` of a run of ``n`` elements read in equal chunks, the last of
    which may run past ``n`` (a split reduction's partials, a long row's normalizer chunks):
    ``load_at(Min(pos, n - 1))`` (always in bounds), replaced by ``fill`` — the reduction's
    identity — where ``pos >= n``. Exact for every ``n``, static or symbolic. ``load_at`` maps a
    position to an ``ops`` value."""
    v = load_at(S.Min(pos, n - 1))
    inside = ops.lt(ops.index_expr(pos, torch.int64), ops.index_expr(as_expr(n), torch.int64))
    return ops.where(inside, v, ops.constant(fill, v.dtype))


class Scan(Reduction):
    """An inclusive scan (``scan_type`` "sum", "prod" or "logsumexp": cumsum / cumprod /
    logcumsumexp) along one dim. Like a
    Reduction it iterates over kept dims ``ranges`` × the scanned dim ``reduction_ranges`` (one
    element), but stores every prefix: the buffer has the input's full shape ``full_size``, with
    the scanned dim at ``dim``. The scan combines values in ``src_dtype`` (float32 for
    half-precision inputs) and the buffer stores them converted to ``dtype``. Persistent (the
    whole row in one block) or looped with a per-row carry, as the kernel decides."""

    def __init__(self, device, dtype, inner_fn, ranges, reduction_ranges, scan_type, src_dtype, full_size, dim):
        Loops.__init__(self, device, dtype, inner_fn, ranges)
        if scan_type not in ("sum", "prod", "logsumexp"):
            raise ValueError(f"unknown scan type {scan_type!r}; expected 'sum', 'prod' or 'logsumexp'")
        self.reduction_ranges = list(reduction_ranges)
        self.reduction_type = scan_type
        self.src_dtype = src_dtype
        self.full_size, self.dim = list(full_size), dim

    def get_size(self):
        return self.full_size

    def store_fn(self, name: str, indexer: Callable[[Index], Any]):
        dim = self.dim

        def fn(index, rindex):
            v = self.inner_fn(index, rindex)
            r = ops.scan(self.src_dtype, self.reduction_type, v)
            if self.dtype != self.src_dtype:
                r = ops.to_dtype(r, self.dtype, self.src_dtype)
            full = list(index[:dim]) + [rindex[0]] + list(index[dim:])
            ops.store(name, indexer(full), r)

        return fn


# ------------------------------------------------------------------------------------------ buffers


class Buffer(IRNode):
    """Named storage with a layout; the loader reads it through the layout's indexer."""

    def __init__(self, name: str, layout: Layout):
        self.name, self.layout = name, layout

    def get_name(self) -> str:
        return self.name

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        indexer = self.layout.make_indexer()
        name = self.name

        def loader(index):
            return ops.load(name, indexer(index))

        return loader

    def realize(self):
        return self.name

    def freeze_layout(self) -> None:
        if isinstance(self.layout, FlexibleLayout):
            L = self.layout
            self.layout = FixedLayout(L.device, L.dtype, L.size, L.stride, L.offset)


class InputBuffer(Buffer):
    """A graph input (placeholder)."""


class ConstantBuffer(Buffer):
    """A tensor constant of the graph (get_attr), passed to the compiled module like an input."""


class ComputedBuffer(Buffer):
    """A buffer computed by a kernel from ``data`` (Pointwise or Reduction)."""

    def __init__(self, name: str, layout: Layout, data: Loops):
        super().__init__(name, layout)
        self.data = data

    def store_fn(self):
        indexer = self.layout.make_indexer()
        if isinstance(self.data, Reduction):
            return self.data.store_fn(self.name, indexer)
        inner, name = self.data.inner_fn, self.name

        def fn(index):
            ops.store(name, indexer(index), inner(index))

        return fn

    def is_reduction(self) -> bool:
        return isinstance(self.data, Reduction)


class MutationBuffer(ComputedBuffer):
    """A kernel that updates an existing buffer in place (Inductor's ``Scatter`` node with a
    mutation layout): over ``data.ranges`` (the source's shape), element ``idx`` combines
    (``mode``: atomic add/max/min) or stores ``data.inner_fn(idx)`` at ``index_fn(idx)`` of
    ``target``. ``target`` is a realized ComputedBuffer (a fresh copy the lowering made), read
    afterwards under its own name; this node's own name is never read and never allocated. The
    scheduler runs it as a kernel of its own, after every kernel that writes or reads the target
    before it in graph order (so the target is fully initialized, earlier passes over it included)
    and before any later reader; with ``config.reorder_for_peak_memory`` such kernels also keep
    their graph order among themselves."""

    def __init__(
        self,
        name: str,
        target: "ComputedBuffer",
        data: "Pointwise",
        index_fn: Callable,
        mode: str | None = "atomic_add",
    ):
        size = list(data.get_size())
        super().__init__(
            name, FixedLayout(target.get_device(), target.get_dtype(), size, contiguous_strides(size)), data
        )
        # mode "atomic_add" accumulates; "atomic_max"/"atomic_min" keep the larger/smaller value
        # (floats: a NaN from data wins, scatter_reduce's amax/amin); None stores (index_put/scatter
        # without accumulation, where torch leaves the winner among duplicate indices undefined)
        self.target, self.index_fn, self.mode = target, index_fn, mode

    def store_fn(self):
        indexer = self.target.layout.make_indexer()
        inner, target, index_fn, mode = self.data.inner_fn, self.target.name, self.index_fn, self.mode

        def fn(index):
            ops.store(target, indexer(index_fn(index)), inner(index), mode)

        return fn


class ExternKernel(Buffer):
    """A buffer produced by calling an aten kernel from the wrapper (mm, addmm, convolution, …, or
    any op without a lowering — FallbackKernel). ``inputs`` are realized buffers or
    ReinterpretViews; ``args``/``kwargs`` are the call's arguments with those inputs in place of
    tensors (as ``TensorArg(i)`` markers)."""

    def __init__(
        self,
        name: str,
        layout: Layout | None,
        op: Any,
        args: tuple,
        kwargs: dict,
        inputs: list,
        outputs_meta: Any = None,
    ):
        super().__init__(name, layout)  # layout None for multi-output kernels
        self.op, self.args, self.kwargs, self.inputs, self.outputs_meta = op, args, kwargs, inputs, outputs_meta

    def get_size(self):
        if self.layout is None:
            raise TypeError("a multi-output kernel has no single size; use its MultiOutputs")
        return self.layout.size


class FallbackKernel(ExternKernel):
    """An aten op with no tilefuse lowering, run as is from the wrapper."""


class RandomSeeds(ExternKernel):
    """The graph's random seeds: an int64 vector drawn from torch's default generator of the
    device once per call (``tilefuse.runtime.random_seeds``), one element per random op of the
    graph. Each random op hashes (its seed, the element's flat offset) with Triton's Philox
    (``tl.rand``/``tl.randn``/``tl.randint``), so ``torch.manual_seed`` makes compiled results
    reproducible (Inductor's ``inductor_seeds`` + ``inductor_random``); the values differ from
    eager's, which uses another stream."""

    def add_seed(self) -> int:
        """A new seed slot for one random op: its index in the vector."""
        i = self.args[0]
        self.args = (i + 1,)
        self.layout.size, self.layout.stride = [i + 1], [1]
        return i


@dataclass(frozen=True)
class TensorArg:
    """Marker for the i-th tensor input inside an ExternKernel's args."""

    i: int


class MultiOutput(Buffer):
    """Output ``path`` (a tuple of indices) of a multi-output extern kernel."""

    def __init__(self, name: str, layout: Layout, parent: ExternKernel, path: tuple):
        super().__init__(name, layout)
        self.parent, self.path = parent, path


# ------------------------------------------------------------------------------------------ views


class BaseView(IRNode):
    """A view of another node: dtype and device are its input's; realizing realizes the input."""

    def __init__(self, data: IRNode):
        self.data = data

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def realize(self):
        return self.data.realize()


class GenericView(BaseView):
    """A lazy view: ``size`` and ``reindex(new_index) -> old_index``. ``layout_fn``, when the view
    is strided, maps the layout of its input (once stored) to the view's layout; it returns None
    when that input layout does not allow it (a reshape of non-contiguous storage)."""

    def __init__(
        self,
        data: IRNode,
        size: list,
        reindex: Callable[[Index], Index],
        layout_fn: Callable[["Layout"], "Layout | None"] | None = None,
    ):
        super().__init__(data)
        self.size, self.reindex = list(size), reindex
        self.layout_fn = layout_fn

    def get_size(self):
        return self.size

    def make_loader(self):
        inner, reindex = self.data.make_loader(), self.reindex
        return lambda index: inner(reindex(index))


class ReinterpretView(BaseView):
    """Storage of ``data`` (a Buffer) under another FixedLayout (as_strided)."""

    def __init__(self, data: Buffer, layout: Layout):
        super().__init__(data)
        self.layout = layout

    def get_size(self):
        return self.layout.size

    def get_name(self):
        return self.data.get_name()

    def make_loader(self):
        indexer, name = self.layout.make_indexer(), self.data.get_name()
        return lambda index: ops.load(name, indexer(index))


def unwrap_storage(x: IRNode) -> IRNode:
    """The node inside any TensorBox/StorageBox wrappers."""
    while isinstance(x, (TensorBox, StorageBox)):
        x = x.data
    return x


def as_storage_and_layout(x: IRNode) -> tuple[Buffer, Layout] | None:
    """(buffer, layout) when ``x`` is a realized buffer or a ReinterpretView of one (freezing a
    flexible layout); None for lazy values and lazy views."""
    if isinstance(x, TensorBox):
        x = x.data
    if isinstance(x, StorageBox):
        if isinstance(x.data, Buffer) and x.data.layout is not None:
            x.data.freeze_layout()
            return x.data, x.data.layout
        return None
    if isinstance(x, ReinterpretView):
        return unwrap_storage(x.data), x.layout
    if isinstance(x, Buffer) and x.layout is not None:
        x.freeze_layout()
        return x, x.layout
    return None


def _view(x: IRNode, size: list, reindex: Callable, layout_fn: Callable[[Layout], Layout] | None) -> "TensorBox":
    """A view of x: a ReinterpretView when x is stored and the view is strided, else lazy."""
    if isinstance(x, TensorBox):
        x = x.data
    sl = as_storage_and_layout(x)
    if sl is not None and layout_fn is not None:
        buf, layout = sl
        new = layout_fn(layout)
        if new is not None:
            return TensorBox(ReinterpretView(buf, new))
    return TensorBox(GenericView(x, size, reindex, layout_fn))


def permute_view(x: IRNode, dims: Sequence[int]) -> "TensorBox":
    """``x.permute(dims)``."""
    size = x.get_size()
    n = len(size)
    dims = [d % n if n else d for d in dims]
    if sorted(dims) != list(range(n)):
        raise ValueError(f"permute dims {list(dims)} are not a permutation of range({n})")
    new_size = [size[d] for d in dims]
    inv = [dims.index(i) for i in range(n)]

    def reindex(index):
        return [index[inv[i]] for i in range(n)]

    def layout_fn(L: Layout):
        return FixedLayout(L.device, L.dtype, new_size, [L.stride[d] for d in dims], L.offset)

    out = _view(x, new_size, reindex, layout_fn)
    if isinstance(out.data, GenericView):
        out.data.permutation = list(dims)  # read by lowerings that treat transposes specially
    return out


def expand_view(x: IRNode, size: Sequence[int]) -> "TensorBox":
    """``x.expand(size)`` (-1 keeps a dim; new leading dims broadcast)."""
    old = x.get_size()
    size = list(size)
    skip = len(size) - len(old)
    if skip < 0:
        raise ValueError(f"cannot expand a tensor of shape {old} to fewer dims {size}")
    new = [old[i - skip] if (i >= skip and isinstance(s, int) and s == -1) else s for i, s in enumerate(size)]
    for i, o in enumerate(old):
        if o != 1 and o != new[i + skip]:
            if isinstance(o, int) and isinstance(new[i + skip], int):
                raise ValueError(f"cannot expand shape {old} to {new}")
            new[i + skip] = SV.current().guard_equals(o, new[i + skip])
    if new == list(old):
        return x if isinstance(x, TensorBox) else TensorBox(x)

    def reindex(index):
        out = list(index[skip:])
        for i, o in enumerate(old):
            if o == 1 and new[i + skip] != 1:
                out[i] = S.Integer(0)
        return out

    def layout_fn(L: Layout):
        st = [0] * skip + [0 if (o == 1 and new[i + skip] != 1) else L.stride[i] for i, o in enumerate(old)]
        return FixedLayout(L.device, L.dtype, new, st, L.offset)

    return _view(x, new, reindex, layout_fn)


def view_strides(old_size: Sequence[int], old_stride: Sequence[int], new_size: Sequence[int]) -> list[int] | None:
    """Strides under which storage laid out as (``old_size``, ``old_stride``) reads as
    ``new_size`` in row-major order, or None when no strides can (``Tensor.view``'s rule: a reshape
    is a strided view when every group of old dims that new dims merge or split is itself
    contiguous in memory). Sizes must have equal products."""
    old_size, old_stride, new_size = list(old_size), list(old_stride), list(new_size)
    sv = SV.current()
    if prod(new_size) == 0 or not old_size:
        return contiguous_strides(new_size)
    new_stride = [0] * len(new_size)
    v = len(new_size) - 1
    # walk the old dims from the innermost, in chunks that are contiguous among themselves
    base = old_stride[-1]
    chunk_numel = 1
    view_numel = 1
    for d in range(len(old_size) - 1, -1, -1):
        chunk_numel *= old_size[d]
        # Symbolic sizes: every decision is taken on the hints without a guard, except the facts
        # the returned strides rely on (a chunk is contiguous; the view dims fill it exactly), which
        # are proven or guarded; a wrong "no" only leaves the reshape a lazy view, correct anyway.
        chunk_ends = d == 0 or (old_size[d - 1] != 1 and not sv.equals_or_false(old_stride[d - 1], chunk_numel * base))
        if not chunk_ends:
            continue
        while v >= 0 and (new_size[v] == 1 or sv.hint(view_numel) < sv.hint(chunk_numel)):
            new_stride[v] = view_numel * base
            view_numel *= new_size[v]
            v -= 1
        if not sv.equals_or_false(view_numel, chunk_numel):
            return None
        if d > 0:
            base = old_stride[d - 1]
            chunk_numel = 1
            view_numel = 1
    return new_stride if v == -1 else None


def reshape_view(x: IRNode, size: Sequence[int]) -> "TensorBox":
    """``x.reshape(size)``: strided when the stored input is contiguous, else a lazy view that maps
    the new index to the flat position and from it to the old index (FloorDiv/ModularIndexing)."""
    old = list(x.get_size())
    size = list(size)
    sv = SV.current()
    k = next((i for i, s in enumerate(size) if isinstance(s, int) and s == -1), None)
    if k is not None:
        rest = prod(s for i, s in enumerate(size) if i != k)
        size[k] = SV.static_or_expr(S.CleanDiv(prod(old), rest)) if rest != 0 else 0
        if isinstance(size[k], S.Expr) and not sv.statically_known_multiple_of(prod(old), rest):
            sv.guard_equals(size[k] * rest, prod(old))
    if prod(size) != prod(old) and not sv.evaluate_equals(prod(size), prod(old)):
        raise ValueError(f"cannot reshape a tensor of shape {old} to {size}")
    if size == old:
        return x if isinstance(x, TensorBox) else TensorBox(x)
    new_strides = contiguous_strides(size)
    old_strides = contiguous_strides(old)
    groups = None
    if not all(isinstance(v, int) for v in (*old, *size)):
        groups = reshape_groups(old, size)

    def reindex(index):
        if prod(old) == 0:  # an empty tensor: nothing is ever read (and a 0 modulus is invalid)
            return [S.Integer(0)] * len(old)
        if groups is not None:
            out = []
            for oi, ni in groups:
                flat = S.Integer(0)
                for j, st in zip(ni, contiguous_strides([size[j] for j in ni])):
                    flat = flat + index[j] * st
                out.extend(digits(flat, [old[i] for i in oi]))
            return out
        flat = S.Integer(0)
        for i, st in zip(index, new_strides):
            flat = flat + i * st
        out = []
        for s, st in zip(old, old_strides):
            if s == 1:
                out.append(S.Integer(0))
            else:
                out.append(S.ModularIndexing(flat, st, s))
        return out

    def layout_fn(L: Layout) -> Layout | None:
        st = view_strides(list(L.size), list(L.stride), size)
        return FixedLayout(L.device, L.dtype, size, st, L.offset) if st is not None else None

    return _view(x, size, reindex, layout_fn)


def reshape_groups(old: list, new: list) -> list | None:
    """The dims of a reshape in matching groups, outermost first: ``[(old dims, new dims), ...]``
    with equal size products per group (a dim kept, several merged, one split), or None when the
    shapes do not decompose so (then the reshape indexes through the flat position). Used for
    symbolic shapes, where the flat position's digits do not simplify without relational facts:
    ``[s0*s1, 64] -> [s0, s1*64]`` does not decompose, ``[s0, s1, 64] -> [s0, s1*64]`` does.
    Products are compared by hints; a group's equality is proven or guarded."""
    sv = SV.current()
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        oi, ni = [], []
        po = pn = 1
        while True:
            if (not oi or sv.hint(po) < sv.hint(pn)) and i < len(old):
                po, i = po * old[i], i + 1
                oi.append(i - 1)
            elif (not ni or sv.hint(pn) < sv.hint(po)) and j < len(new):
                pn, j = pn * new[j], j + 1
                ni.append(j - 1)
            else:
                break
            if oi and ni and sv.hint(po) == sv.hint(pn):
                # size-1 dims that follow join this group (they do not change its product)
                while i < len(old) and old[i] == 1:
                    oi.append(i)
                    i += 1
                while j < len(new) and new[j] == 1:
                    ni.append(j)
                    j += 1
                break
        if not oi or not ni or not sv.equals_or_false(po, pn):
            return None
        groups.append((oi, ni))
    return groups


def slice_bounds(n, start, end) -> tuple:
    """``start``/``end`` (None, negative, or past the end) of a slice of a dim of length ``n``,
    clamped as Python slicing does: ``0 <= start <= end <= n``. With symbolic values each
    comparison is proven or decided by the hints and guarded (the loosest guard that keeps the
    answer: ``end <= n`` rather than ``end < n``)."""
    start = 0 if start is None else start
    end = n if end is None else end
    if all(isinstance(v, int) for v in (n, start, end)):
        start = max(0, min(n, start + n if start < 0 else start))
        return start, max(start, min(n, end + n if end < 0 else end))
    sv = SV.current()

    def clamp(v, lo):
        if isinstance(v, int) and v >= 2**62:  # "to the end" (sys.maxsize)
            return n
        # a negative bound counts from the end: symbolic ones too (-s0, s0 - 8 at a small s0)
        if (v < 0) if isinstance(v, int) else sv.evaluate_lt(v, 0):
            v = v + n
        if sv.evaluate_lt(v, lo):
            return lo
        return v if (v != n and sv.evaluate_leq(v, n)) else n

    start = SV.static_or_expr(clamp(start, 0))
    return start, SV.static_or_expr(clamp(end, start))


def slice_view(x: IRNode, dim: int, start: int, end: int, step: int = 1) -> "TensorBox":
    """``x[..., start:end:step, ...]`` along ``dim`` (negative and out-of-range bounds clamp as
    Python slicing does)."""
    size = list(x.get_size())
    dim = dim % len(size)
    if step <= 0:
        raise ValueError(f"slice step must be positive, got {step}")
    n = size[dim]
    start, end = slice_bounds(n, start, end)
    if isinstance(end - start, int):
        new_n = (end - start + step - 1) // step
    else:
        new_n = SV.static_or_expr(S.FloorDiv(end - start + step - 1, step) if step != 1 else end - start)
    if start == 0 and end == n and step == 1:
        return x if isinstance(x, TensorBox) else TensorBox(x)
    new_size = size[:dim] + [new_n] + size[dim + 1 :]

    def reindex(index):
        out = list(index)
        out[dim] = index[dim] * step + start
        return out

    def layout_fn(L: Layout):
        st = list(L.stride)
        off = L.offset + st[dim] * start
        st[dim] = st[dim] * step
        return FixedLayout(L.device, L.dtype, new_size, st, off)

    return _view(x, new_size, reindex, layout_fn)


def squeeze_view(x: IRNode, dims: Sequence[int] | None = None) -> "TensorBox":
    """Drop size-1 dims (all, or those of ``dims`` that have size 1)."""
    size = list(x.get_size())
    if dims is None:
        drop = [i for i, s in enumerate(size) if s == 1]
    else:
        drop = [d % len(size) for d in dims if size[d % len(size)] == 1] if size else []
    return reshape_view(x, [s for i, s in enumerate(size) if i not in drop])


def unsqueeze_view(x: IRNode, dim: int) -> "TensorBox":
    """``x.unsqueeze(dim)`` (negative dims count from the end of the result)."""
    size = list(x.get_size())
    dim = dim % (len(size) + 1)
    return reshape_view(x, size[:dim] + [1] + size[dim:])


# ------------------------------------------------------------------------------------------ boxes


class MutableBox(IRNode):
    """A box whose content can be replaced (realized) while every holder sees the change."""

    def __init__(self, data: IRNode):
        self.data = data

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        return self.data.make_loader()

    def realize(self):
        return self.data.realize()

    def __repr__(self):
        return f"{type(self).__name__}({self.data!r})"


class StorageBox(MutableBox):
    """Holds a value that may be realized into a buffer in place (all users see the buffer).

    ``exact_stride``: strides the buffer must have once realized (set by GraphLowering on a graph
    output's value, to eager's strides, before any consumer realizes it); None: a FlexibleLayout,
    contiguous."""

    exact_stride: list | None = None

    def realize(self) -> str | None:
        if isinstance(self.data, (Pointwise, Reduction)):
            size = list(self.data.get_size())
            if self.exact_stride is not None:
                layout = FixedLayout(self.data.get_device(), self.data.get_dtype(), size, list(self.exact_stride))
            else:
                layout = FlexibleLayout(self.data.get_device(), self.data.get_dtype(), size, contiguous_strides(size))
            buf = ComputedBuffer(G.graph().new_buffer_name(), layout, self.data)
            G.graph().register_buffer(buf)
            self.data = buf
            return buf.name
        return self.data.realize()

    def is_realized(self) -> bool:
        return isinstance(self.data, Buffer)

    def make_loader(self):
        if isinstance(self.data, Reduction):
            self.realize()
        if isinstance(self.data, Pointwise) and self.data.op_count() > G.config().max_inline_ops:
            self.realize()
        return self.data.make_loader()


class TensorBox(MutableBox):
    """What lowerings pass around: a (possibly viewed) StorageBox."""

    @staticmethod
    def create(data: IRNode) -> "TensorBox":
        return TensorBox(StorageBox(data))


def _strided_view_chain(x: IRNode) -> tuple["StorageBox", list] | None:
    """(storage, layout functions innermost first) when ``x`` is a chain of strided lazy views of
    a StorageBox; None otherwise."""
    fns = []
    while isinstance(x, GenericView) and x.layout_fn is not None:
        fns.append(x.layout_fn)
        x = x.data
        if isinstance(x, TensorBox):
            x = x.data
    if isinstance(x, StorageBox) and fns:
        return x, fns[::-1]
    return None


def realize_input(x: IRNode) -> IRNode:
    """A node an extern kernel can take: a realized buffer or a ReinterpretView of one. A strided
    view (permute, slice, expand, contiguous reshape) of a lazy value realizes the value itself
    and passes a ReinterpretView — as Inductor does, so ``mm(y.t(), w)`` of a computed ``y`` reads
    ``y``'s buffer instead of recomputing ``y`` transposed into a copy; anything else is computed
    into a new contiguous buffer first."""
    if isinstance(x, TensorBox):
        if isinstance(x.data, StorageBox):
            x.data.realize()
            return x.data.data
        if isinstance(x.data, ReinterpretView):
            return x.data
        x = x.data
    if isinstance(x, (Buffer, ReinterpretView)):
        return x
    chain = _strided_view_chain(x)
    if chain is not None:
        box, fns = chain
        box.realize()
        sl = as_storage_and_layout(box)
        if sl is not None:
            buf, layout = sl
            for fn in fns:
                layout = fn(layout) if layout is not None else None
            if layout is not None:
                return ReinterpretView(buf, layout)
    size = list(x.get_size())
    copy = Pointwise(x.get_device(), x.get_dtype(), x.make_loader(), size)
    box = StorageBox(copy)
    box.realize()
    return box.data


def iter_index_product(sizes: Sequence[int]):
    """Every index tuple of ``sizes`` in row-major order."""
    return itertools.product(*(range(s) for s in sizes))
