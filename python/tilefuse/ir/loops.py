"""Lazily computed values and the boxes that realize them, after Inductor's ``ir.py``.

Values flow through lowerings as ``TensorBox(StorageBox(data))``: ``data`` is a lazily computed
``Pointwise``/``Reduction``/``Scan`` (an inner function over symbolic indices written in ``ops.*``
calls), a view of another node (``tilefuse.ir.views``), or a realized ``Buffer``. Realizing a
StorageBox turns its Loops into a ``ComputedBuffer`` registered with the graph; every holder of the
box sees the buffer. ``Reduction.create`` decides how a reduction is realized (whole, split into
partials, or after its gathered values are stored).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .. import config
from .. import sizevars as SV
from .. import symbolic as S
from ..virtualized import ops
from . import graph_context as G
from .buffers import (
    Buffer,
    FixedLayout,
    FlexibleLayout,
    Index,
    IRNode,
    Layout,
    as_expr,
    contiguous_strides,
    digits,
    prod,
)


# Origins: which FX nodes' values a buffer's kernel computes (``buffer_origins``; the kernel
# report, ``tilefuse.report``, lists them). Off unless ``track_origins`` is set before lowering: then
# each Loops records the FX node being lowered when it was made, and a Pointwise's loader (the
# inlined value) adds that node to ``_origin_sink`` when called during ``buffer_origins``' trace.
track_origins: bool = False
_origin_sink: list | None = None


def _current_origin() -> str | None:
    """``"<fx node name>: <target>"`` of the FX node being lowered, or None outside a lowering."""
    from ..virtualized import _state

    g = getattr(_state, "graph", None)
    n = getattr(g, "current_node", None)
    if n is None:
        return None
    target = n.target
    return f"{n.name}: {getattr(target, '__name__', target) if not hasattr(target, '_schema') else target}"


def buffer_origins(buf: "ComputedBuffer", iter_vars: list, reduce_vars: list) -> list[str]:
    """The FX nodes (``"<name>: <aten op>"``) whose values ``buf``'s store function computes: the
    one that made its Loops and those of every inlined Pointwise its trace calls, in first-call
    order. ``iter_vars``/``reduce_vars``: the loop variables its store function takes (a
    SchedulerNode's ``body.iter_vars`` and ``body.reduce_vars``). Empty unless ``track_origins``
    was on while the graph was lowered; needs the graph context (dtypes)."""
    global _origin_sink
    from .loop_body import LoopBody

    data = buf.data
    sink: list = [data.origin] if getattr(data, "origin", None) else []
    prev, _origin_sink = _origin_sink, sink
    try:
        LoopBody.trace(buf.store_fn(), list(iter_vars), list(reduce_vars), {}, G.dtype_of)
    finally:
        _origin_sink = prev
    return list(dict.fromkeys(sink))


class Loops(IRNode):
    """Lazily computed values over ``ranges``: ``inner_fn(index)`` in ops.* calls. ``origin``: the
    FX node being lowered when it was made (``track_origins``), else None."""

    def __init__(self, device: torch.device, dtype: torch.dtype, inner_fn: Callable, ranges: list):
        self.device, self.dtype, self.inner_fn, self.ranges = device, dtype, inner_fn, list(ranges)
        self._op_count: int | None = None
        self.origin = _current_origin() if track_origins else None

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
            self._read_names = frozenset(name for name, _ in body.loads())
            self._op_names = frozenset(n.op for n in body.nodes)
        return self._op_count

    def read_names(self) -> frozenset:
        """Names of the buffers the inner function loads from."""
        self.op_count()
        return self._read_names

    def op_names(self) -> frozenset:
        """The ``ops`` names the inner function calls (``load``, ``mul``, ``cos``, ...)."""
        self.op_count()
        return self._op_names

    def num_reads(self) -> int:
        """Number of distinct (buffer, index) reads of the inner function (Inductor's
        ``num_reads``)."""
        self.op_count()
        return self._num_reads


class Pointwise(Loops):
    """Elementwise values; the loader is the inner function itself (inlining)."""

    def make_loader(self):
        if self.origin is None:
            return self.inner_fn
        inner, origin = self.inner_fn, self.origin

        def load(*args):
            if _origin_sink is not None:
                _origin_sink.append(origin)
            return inner(*args)

        return load

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
        return -(-numel // (config.SPLIT_OUTER_ROWS if outer else 1))

    @staticmethod
    def gathers_for_few_outputs(
        device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, trace: Callable
    ) -> bool:
        """Whether the values this reduction combines are gathered (an ``indirect_indexing`` in its
        body: one random access per element, e.g. cross-entropy's target logits, 8192 gathers from
        8192 rows of 32000) while it produces too few outputs to fill the GPU (fewer than
        ``config.SPLIT_TARGET_PROGRAMS`` programs, the split rule's measure) — then ``create`` realizes
        the values first (``realize_gathered_values``). Symbolic sizes are judged at their hints.
        ``trace``: returns the traced body (``create`` passes one that traces once for both this
        and ``num_splits``)."""
        sv = SV.current()
        numel, rnumel = sv.hint(prod(ranges)), sv.hint(prod(reduction_ranges))
        if rnumel < 2 or numel >= config.SPLIT_TARGET_PROGRAMS * config.SPLIT_OUTER_ROWS:
            return False
        body = trace()
        if not any(n.op == "indirect_indexing" for n in body.nodes):
            return False
        return Reduction._programs(numel, body.reduction_hint() == "outer") < config.SPLIT_TARGET_PROGRAMS

    @staticmethod
    def realize_gathered_values(device, inner_fn, ranges, reduction_ranges, src_dtype) -> Callable[[Index], Any]:
        """Realize a gathering reduction's values as a pointwise buffer of ``ranges +
        reduction_ranges`` in ``src_dtype`` (the values the reduction combines, unchanged) and
        return its loader. The gathers then run in a kernel over all ``numel × rnumel`` elements
        — or in the epilogue of the kernel that produces the values' other inputs: cross-entropy's
        per-row loss joins the row log-sum-exp kernel, which has just read that row —, and the
        reduction reads a contiguous buffer. A reduction over few outputs that gathered itself
        would run its random accesses on few programs, each gathering thousands of elements one
        after another: latency-bound (cross-entropy's sum of the gathered target log-probabilities),
        and splitting it still costs two kernels beside the count of targets. Costs one write and
        one read of ``numel × rnumel`` elements, small beside the gathers."""
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
        reductions. A reduction whose kernel would run on fewer than ``config.SPLIT_TARGET_PROGRAMS``
        programs leaves most of the GPU idle (a full sum of a large tensor runs on one): it is
        split into ``s`` chunks reduced by a first kernel over ``s × numel`` outputs, then a small
        second reduction over the ``s`` partials. Programs are estimated from the reduction hint
        (one output per program for inner reductions, ``config.SPLIT_OUTER_ROWS`` for outer ones); ``s`` is
        the smallest power of two that reaches the target while chunks keep at least
        ``config.SPLIT_MIN_CHUNK`` (inner) / ``config.SPLIT_MIN_CHUNK_OUTER`` elements (a chunk count that does
        not divide rnumel masks the last chunk's tail). Rows of fewer than 4096 elements, and
        inner rows of at most ``config.SPLIT_MAX_UNSPLIT_INNER`` (Inductor's ``inner_reduction_splits``
        bound), are not split. Only for sum, prod, max, min and any (combinable partials).
        ``trace``: as for ``gathers_for_few_outputs``."""
        if reduction_type not in ("sum", "prod", "max", "min", "any"):
            return 1
        # symbolic sizes are judged at their hints; chunks are CeilDiv(rnumel, s) long with the
        # tail masked whenever s does not divide rnumel statically (create_split), so any s is
        # exact for every size
        sv = SV.current()
        numel, rnumel = sv.hint(prod(ranges)), sv.hint(prod(reduction_ranges))
        if rnumel < 4096 or numel >= config.SPLIT_TARGET_PROGRAMS * config.SPLIT_OUTER_ROWS:
            return 1  # too short to split, or enough programs whichever the hint: no body trace
        outer = trace().reduction_hint() == "outer"
        if not outer and rnumel <= config.SPLIT_MAX_UNSPLIT_INNER:
            return 1
        programs = Reduction._programs(numel, outer)
        if programs >= config.SPLIT_TARGET_PROGRAMS:
            return 1
        min_chunk = config.SPLIT_MIN_CHUNK_OUTER if outer else config.SPLIT_MIN_CHUNK
        best, s = 1, 2
        while rnumel // s >= min_chunk:
            best = s
            if programs * s >= config.SPLIT_TARGET_PROGRAMS:
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


# ------------------------------------------------------------------------------------------ computed buffers


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
