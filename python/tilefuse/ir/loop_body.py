"""LoopBody: the traced body of one loop nest (Inductor's ``loop_body.LoopBody``).

A lowering describes a computed tensor by an inner function ``inner_fn(index) -> value`` written in
``ops.*`` calls. Tracing that function once, with symbolic loop variables, records every op in
order; the scheduler reads the loads and stores (the buffer dependencies) and codegen replays the
ops as Triton source. Index arguments are ``tilefuse.symbolic.Expr`` in the loop variables.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .. import symbolic as S
from ..sizevars import SymbolicFloat
from ..virtualized import set_ops_handler
from .ops import BOOL_RESULT_OPS, ELEMENTWISE_OPS


@dataclass(eq=False)
class BodyValue:
    """A value in a loop body: the result of node ``idx``; ``dtype`` is its torch dtype."""

    body: "LoopBody"
    idx: int
    dtype: torch.dtype

    def __repr__(self) -> str:
        return f"%{self.idx}"


@dataclass
class BodyNode:
    """One op: ``op(*args)``. Args are BodyValues, Python scalars, dtypes, Exprs or strings."""

    op: str
    args: tuple
    dtype: torch.dtype | None


@dataclass
class LoopBody:
    """The ops of one loop nest in order, traced from an inner function.

    ``var_ranges`` maps each loop variable (an index symbol) to its length; ``iter_vars`` are the
    pointwise variables, ``reduce_vars`` the reduction variables (empty for pointwise nodes).
    """

    iter_vars: list
    reduce_vars: list
    var_ranges: dict
    nodes: list[BodyNode] = field(default_factory=list)

    @staticmethod
    def trace(
        fn: Callable[..., Any],
        iter_vars: Sequence,
        reduce_vars: Sequence,
        var_ranges: dict,
        dtype_of: Callable[[str], torch.dtype],
    ) -> "LoopBody":
        body = LoopBody(list(iter_vars), list(reduce_vars), dict(var_ranges))
        with set_ops_handler(_Tracer(body, dtype_of)):
            if reduce_vars:
                fn(list(iter_vars), list(reduce_vars))
            else:
                fn(list(iter_vars))
        return body

    def add(self, op: str, args: tuple, dtype: torch.dtype | None) -> BodyValue | None:
        self.nodes.append(BodyNode(op, args, dtype))
        return BodyValue(self, len(self.nodes) - 1, dtype) if dtype is not None else None

    # ---- what the scheduler needs
    def loads(self) -> list[tuple[str, Any]]:
        """(buffer name, index expression) of every load, in order."""
        return [(n.args[0], n.args[1]) for n in self.nodes if n.op == "load"]

    def stores(self) -> list[tuple[str, Any]]:
        """(buffer name, index expression) of every store / store_reduction."""
        return [(n.args[0], n.args[1]) for n in self.nodes if n.op in ("store", "store_reduction")]

    def reduction_hint(self) -> str:
        """How a reduction body reads memory (Inductor's ReductionHint). Each load index,
        simplified over the variables' ranges, is *inner* when it is contiguous along the innermost
        reduction variable and moves with the output (or the output is a scalar) — rows reduced
        along memory — and *outer* when it is contiguous along the innermost pointwise variable and
        moves along the reduction — columns reduced across rows, so a program must cover many
        outputs to coalesce. Loads that are constant along one of the two (a per-row mean in a
        column reduction) are neither. ``"outer"`` when outer loads outnumber inner ones,
        ``"inner"`` when there is an inner one, else ``"default"`` (and for pointwise bodies).
        Size-1 variables are ignored."""
        rv = [v for v in self.reduce_vars if self.var_ranges.get(v, 2) != 1]
        iv = [v for v in self.iter_vars if self.var_ranges.get(v, 2) != 1]
        if not rv:
            return "default"
        ranges = {v: n for v, n in self.var_ranges.items() if isinstance(n, (int, S.Expr))}
        inner = outer = 0
        for _, idx in self.loads():
            if ranges:
                idx = S.simplify_with_ranges(idx, ranges)
            sr = S.stride_vars(idx, [rv[-1]])[0]
            sx = S.stride_vars(idx, [iv[-1]])[0] if iv else 0
            if sr == 1 and (sx != 0 or not iv):
                inner += 1
            elif sx == 1 and sr != 0:
                outer += 1
        if outer > inner:
            return "outer"
        return "inner" if inner else "default"

    def op_count(self) -> int:
        return sum(
            1
            for n in self.nodes
            if n.op not in ("load", "store", "store_reduction", "constant", "index_expr", "indirect_indexing")
        )


_indirect_ids = itertools.count()


def new_indirect_symbol(body: "LoopBody", value, size: int, check: bool, wrap_negative: bool = True):
    """Record an ``indirect_indexing`` node in ``body`` and return its fresh symbol
    (``ind<N>``, unique in the process so nodes fused into one kernel never collide; kind
    ``indirect``, range ``0..size-1``)."""
    if not isinstance(value, BodyValue) or value.dtype.is_floating_point or value.dtype == torch.bool:
        raise TypeError("indirect_indexing needs an integer traced value")
    if isinstance(size, S.Expr) and size.is_number:
        size = size.int_value
    if isinstance(size, int) and size < 1:
        raise ValueError(f"indirect_indexing into a dimension of size {size}")
    name = f"ind{next(_indirect_ids)}"
    # a symbolic size (dynamic shapes): the symbol's range is its size's proven upper bound
    upper = size - 1 if isinstance(size, int) else S.bound(size)[1]
    upper = upper - 1 if upper is not None and not isinstance(size, int) else upper
    symbol = S.sym(name, lower=0, upper=upper, kind="indirect")
    body.add("indirect_indexing", (value, size, symbol, bool(check), bool(wrap_negative)), None)
    return symbol


# how a store combines with what the buffer holds: None overwrites; the atomic modes update in
# place (MutationBuffer) and are safe under concurrent writes to one element
STORE_MODES = (None, "atomic_add", "atomic_max", "atomic_min")


class _Tracer:
    """ops handler that records each call into a LoopBody: one method per op of the vocabulary
    (``tilefuse.ir.ops.OpsHandler``), the structural ones below and the elementwise ones generated
    after the class (``_elementwise``)."""

    def __init__(self, body: LoopBody, dtype_of: Callable[[str], torch.dtype]):
        self.body = body
        self.dtype_of = dtype_of
        self.load_mask: BodyValue | None = None  # set inside ``masked``

    def load(self, name: str, index) -> BodyValue:
        """A load of ``name`` at ``index``; inside ``masked`` the node carries the mask as a third
        argument (codegen adds it to the load's mask: lanes off the mask read nothing)."""
        if self.load_mask is not None:
            return self.body.add("load", (name, index, self.load_mask), self.dtype_of(name))
        return self.body.add("load", (name, index), self.dtype_of(name))

    def masked(self, mask, body_fn: Callable[[], Any], other) -> BodyValue:
        """``where(mask, body_fn(), other)`` with every load made by ``body_fn`` masked by
        ``mask`` (Inductor's ``ops.masked``): a lane off the mask reads no memory, as a
        ``torch.cat`` input outside its slice. ``mask``: a traced bool value; ``other``: a traced
        value, or a Python number (a constant of the body's dtype). Nested calls AND their
        masks."""
        if not isinstance(mask, BodyValue):
            raise TypeError("ops.masked needs a traced boolean mask")
        outer = self.load_mask
        self.load_mask = mask if outer is None else self.body.add("logical_and", (outer, mask), torch.bool)
        try:
            value = body_fn()
        finally:
            self.load_mask = outer
        if not isinstance(other, BodyValue):
            if not isinstance(value, BodyValue):
                raise TypeError("ops.masked needs a traced value from its body or as `other`")
            other = self.constant(other, value.dtype)
        return self.where(mask, value, other)

    def store(self, name: str, index, value, mode: str | None = None) -> None:
        """``mode``: None (plain store), ``"atomic_add"`` (accumulate into the buffer) or
        ``"atomic_max"`` / ``"atomic_min"`` (keep the larger / smaller of the two)."""
        if mode not in STORE_MODES:
            raise ValueError(f"unknown store mode {mode!r}")
        self.body.add("store", (name, index, value, mode), None)

    def store_reduction(self, name: str, index, value) -> None:
        self.body.add("store_reduction", (name, index, value), None)

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value) -> BodyValue:
        return self.body.add("reduction", (dtype, src_dtype, reduction_type, value), dtype)

    def scan(self, dtype: torch.dtype, scan_type: str, value) -> BodyValue:
        """Inclusive prefix ``scan_type`` ("sum"/"prod") of ``value`` along the reduction dim."""
        return self.body.add("scan", (dtype, scan_type, value), dtype)

    def constant(self, value, dtype: torch.dtype) -> BodyValue:
        if isinstance(value, SymbolicFloat):
            # a float computed from symbolic sizes (``x * (0.1 / s0)``), from the size arguments
            return value.emit(dtype)
        if isinstance(value, S.Expr):
            # a symbolic size used as a value (``x * s0``): computed from the kernel's size arguments
            if value.is_number:
                value = value.int_value
            else:
                return self.index_expr(value, dtype)
        return self.body.add("constant", (value, dtype), dtype)

    def index_expr(self, expr, dtype: torch.dtype) -> BodyValue:
        return self.body.add("index_expr", (expr, dtype), dtype)

    def to_dtype(self, x, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> BodyValue:
        return self.body.add("to_dtype", (x, dtype), dtype)

    def bitcast(self, x, dtype: torch.dtype) -> BodyValue:
        """``x``'s bits reinterpreted as ``dtype`` of the same width (``Tensor.view(dtype)``;
        Inductor's ``to_dtype_bitcast``)."""
        return self.body.add("bitcast", (x, dtype), dtype)

    def indirect_indexing(self, value, size: int, check: bool = True, wrap_negative: bool = True):
        """An index symbol whose value is the loaded ``value`` (an integer tensor value), wrapped
        when negative (``v + size``) and bounds-checked against ``size`` by codegen. Returned to
        the lowering as an Expr so it can appear inside load indices (Inductor's
        ``ops.indirect_indexing``). ``wrap_negative=False``: negative values are out of bounds
        (``index_select``/``gather`` semantics)."""
        return new_indirect_symbol(self.body, value, size, check, wrap_negative)

    def rand(self, seed, offset) -> BodyValue:
        """Uniform float32 in [0, 1) from Philox(``seed`` int64, ``offset`` int32)."""
        return self.body.add("rand", (seed, offset), torch.float32)

    def randn(self, seed, offset) -> BodyValue:
        """Standard normal float32 from Philox(``seed``, ``offset``)."""
        return self.body.add("randn", (seed, offset), torch.float32)

    def randint64(self, seed, offset, low: int, high: int) -> BodyValue:
        """Integer in ``[low, high)`` (int64) from Philox(``seed``, ``offset``); ``high - low``
        must be below 2**31."""
        return self.body.add("randint64", (seed, offset, int(low), int(high)), torch.int64)

    def where(self, cond, a, b) -> BodyValue:
        dt = a.dtype if isinstance(a, BodyValue) else (b.dtype if isinstance(b, BodyValue) else None)
        if dt is None:
            raise TypeError("ops.where needs at least one traced value among its branches")
        return self.body.add("where", (cond, a, b), dt)


def _elementwise(op: str) -> Callable[..., BodyValue]:
    """The tracer's method for elementwise ``op``: a node of ``op`` over the arguments as given,
    of ``torch.bool`` for ``BOOL_RESULT_OPS``, else of the first traced argument's dtype."""
    if op in BOOL_RESULT_OPS:

        def call(self: _Tracer, *args) -> BodyValue:
            return self.body.add(op, tuple(args), torch.bool)
    else:

        def call(self: _Tracer, *args) -> BodyValue:
            dt = next((a.dtype for a in args if isinstance(a, BodyValue)), None)
            if dt is None:
                raise TypeError(f"ops.{op} needs at least one traced value argument")
            return self.body.add(op, tuple(args), dt)

    call.__name__ = call.__qualname__ = op
    return call


for _op in sorted(ELEMENTWISE_OPS):
    setattr(_Tracer, _op, _elementwise(_op))
del _op
