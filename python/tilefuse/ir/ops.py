"""The op vocabulary of loop bodies: every ``ops.<name>(...)`` call an inner function may make.

Lowerings write a computed tensor as an inner function over symbolic indices in ``ops.*`` calls
(``tilefuse.virtualized.ops``); the installed handler decides what a call does. The one handler
today is the loop-body tracer (``tilefuse.ir.loop_body``), which records each call as a
``BodyNode`` named after the op; Triton codegen (``tilefuse.codegen.triton``) turns each recorded
node back into source. ``OpsHandler`` below is the contract between the three: its methods are the
ops, with their arguments and meaning (after Inductor's ``torch._inductor.ops_handler``).

``ops.<name>`` for a name outside ``OP_NAMES`` raises AttributeError, and a call with fewer or more
arguments than the op takes raises TypeError, when the inner function runs (at trace time), never
later as a failure inside generated code: importing this module registers the vocabulary and each
op's arity with the ``ops`` proxy.

Conventions: ``V`` is the handler's value type (a traced ``BodyValue`` for the tracer); ``index``
and ``expr`` are ``tilefuse.symbolic.Expr`` over loop variables and size symbols; ``name`` is a
buffer name; dtypes are ``torch.dtype``. Elementwise ops take values and Python scalars of one
dtype (lowerings convert operands first) and return a value of that dtype, except the ops of
``BOOL_RESULT_OPS``, which return ``torch.bool``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from ..virtualized import register_vocabulary

if TYPE_CHECKING:
    import torch

    from ..symbolic import Expr

V = TypeVar("V")


class OpsHandler(Generic[V]):
    """The ops a loop body is written in. A handler implements every method; the bodies here only
    document them. Integer division and remainder follow torch (floor / truncation as named), float
    math follows IEEE 754 as eager does (NaN propagates unless an op says otherwise)."""

    # ------------------------------------------------------------------ memory and index values
    def load(self, name: str, index: Expr) -> V:
        """Element ``index`` (a flat element offset) of buffer or graph input ``name``, in its dtype;
        inside ``masked``, lanes off the mask read no memory."""

    def store(self, name: str, index: Expr, value: V, mode: str | None = None) -> None:
        """Write ``value`` to element ``index`` of ``name``; ``mode`` None overwrites, ``"atomic_add"``
        accumulates, ``"atomic_max"``/``"atomic_min"`` keep the larger/smaller (in place, safe under
        concurrent writes)."""

    def store_reduction(self, name: str, index: Expr, value: V) -> None:
        """Write a reduction's result (one per output element) to element ``index`` of ``name``."""

    def constant(self, value: Any, dtype: torch.dtype) -> V:
        """The Python number ``value`` (or a symbolic size / ``SymbolicFloat``) as a ``dtype`` value."""

    def index_expr(self, expr: Expr, dtype: torch.dtype) -> V:
        """The integer expression ``expr`` of loop variables and sizes, evaluated per lane, as ``dtype``."""

    def indirect_indexing(self, value: V, size: Any, check: bool = True, wrap_negative: bool = True) -> Expr:
        """An index symbol whose value is the integer ``value`` (``v + size`` when negative and
        ``wrap_negative``), bounds-checked against ``size`` when ``check``; usable in load indices."""

    # ------------------------------------------------------------------ dtypes and selection
    def to_dtype(self, x: V, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> V:
        """``x`` converted to ``dtype`` as ``Tensor.to`` converts (``src_dtype``: ``x``'s dtype, if known)."""

    def bitcast(self, x: V, dtype: torch.dtype) -> V:
        """``x``'s bits reinterpreted as ``dtype`` of the same width (``Tensor.view(dtype)``)."""

    def where(self, cond: V, a: V, b: V) -> V:
        """``a`` where the bool ``cond`` holds, else ``b`` (one of ``a``/``b`` must be a value)."""

    def masked(self, mask: V, body: Callable[[], V], other: Any) -> V:
        """``where(mask, body(), other)`` with every load made by ``body`` masked by ``mask``."""

    # ------------------------------------------------------------------ reductions and scans
    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: V) -> V:
        """``value`` (of ``src_dtype``) combined over the reduction variables by ``reduction_type``
        (``tilefuse.ir.loops.REDUCTION_TYPES``), as ``dtype``."""

    def scan(self, dtype: torch.dtype, scan_type: str, value: V) -> V:
        """Inclusive prefix ``scan_type`` ("sum", "prod", "logsumexp") of ``value`` along the
        reduction variable, in ``dtype``."""

    # ------------------------------------------------------------------ random numbers
    def rand(self, seed: V, offset: V) -> V:
        """Uniform float32 in [0, 1) from Philox(``seed`` int64, ``offset`` int32)."""

    def randn(self, seed: V, offset: V) -> V:
        """Standard normal float32 from Philox(``seed``, ``offset``)."""

    def randint64(self, seed: V, offset: V, low: int, high: int) -> V:
        """int64 in ``[low, high)`` from Philox(``seed``, ``offset``); ``high - low`` below 2**31."""

    # ------------------------------------------------------------------ arithmetic
    def add(self, a: V, b: V) -> V:
        """``a + b`` (logical or for bools, as torch)."""

    def sub(self, a: V, b: V) -> V:
        """``a - b``."""

    def mul(self, a: V, b: V) -> V:
        """``a * b``."""

    def truediv(self, a: V, b: V) -> V:
        """``a / b`` of floats."""

    def floordiv(self, a: V, b: V) -> V:
        """``a / b`` rounded toward negative infinity (``torch.div(rounding_mode="floor")``)."""

    def truncdiv(self, a: V, b: V) -> V:
        """``a / b`` rounded toward zero (``torch.div(rounding_mode="trunc")``)."""

    def remainder(self, a: V, b: V) -> V:
        """``a`` modulo ``b`` with the sign of ``b`` (``torch.remainder``)."""

    def fmod(self, a: V, b: V) -> V:
        """``a`` modulo ``b`` with the sign of ``a`` (``torch.fmod``, C's truncated remainder)."""

    def neg(self, x: V) -> V:
        """``-x`` (flips the sign bit of floats: ``-0.0`` for ``0.0``)."""

    def abs(self, x: V) -> V:
        """``|x|``."""

    def reciprocal(self, x: V) -> V:
        """``1 / x``."""

    def sign(self, x: V) -> V:
        """``(0 < x) - (x < 0)`` (``sign(nan)`` is 0, as torch)."""

    def relu(self, x: V) -> V:
        """``max(x, 0)`` (NaN stays NaN)."""

    def maximum(self, a: V, b: V) -> V:
        """The larger of ``a`` and ``b``; NaN if either is (``torch.maximum``)."""

    def minimum(self, a: V, b: V) -> V:
        """The smaller of ``a`` and ``b``; NaN if either is (``torch.minimum``)."""

    def fmax(self, a: V, b: V) -> V:
        """The larger of ``a`` and ``b``, ignoring a NaN operand (``torch.fmax``)."""

    def fmin(self, a: V, b: V) -> V:
        """The smaller of ``a`` and ``b``, ignoring a NaN operand (``torch.fmin``)."""

    def pow(self, a: V, b: V) -> V:
        """``a ** b`` of floats (C's ``pow`` special cases)."""

    def ipow(self, a: V, b: V) -> V:
        """``a ** b`` of integers by squaring (products wrap; a negative ``b`` gives 0 unless ``|a| == 1``)."""

    # ------------------------------------------------------------------ float math
    def exp(self, x: V) -> V:
        """``e ** x``."""

    def exp2(self, x: V) -> V:
        """``2 ** x``."""

    def expm1(self, x: V) -> V:
        """``e ** x - 1``, exact for small ``x``."""

    def log(self, x: V) -> V:
        """Natural logarithm."""

    def log2(self, x: V) -> V:
        """Base-2 logarithm."""

    def log10(self, x: V) -> V:
        """Base-10 logarithm."""

    def log1p(self, x: V) -> V:
        """``log(1 + x)``, exact for small ``x``."""

    def sqrt(self, x: V) -> V:
        """Square root."""

    def rsqrt(self, x: V) -> V:
        """``1 / sqrt(x)``."""

    def sin(self, x: V) -> V:
        """Sine (radians)."""

    def cos(self, x: V) -> V:
        """Cosine (radians)."""

    def tan(self, x: V) -> V:
        """Tangent (radians)."""

    def tanh(self, x: V) -> V:
        """Hyperbolic tangent."""

    def sigmoid(self, x: V) -> V:
        """``1 / (1 + e ** -x)``."""

    def erf(self, x: V) -> V:
        """The error function."""

    def erf_poly(self, x: V) -> V:
        """The error function of a float32 ``x`` from a polynomial (``1 - 2**p(|x|)``, exact
        ``±1`` for ``|x| >= 4``), within 9e-7 of ``erf``: for values that end rounded to
        float16/bfloat16 (half-precision GELU). Cheap arithmetic and one ``exp2``, no libdevice."""

    def atan(self, x: V) -> V:
        """Arc tangent."""

    def asin(self, x: V) -> V:
        """Arc sine."""

    def acos(self, x: V) -> V:
        """Arc cosine."""

    def sinh(self, x: V) -> V:
        """Hyperbolic sine."""

    def cosh(self, x: V) -> V:
        """Hyperbolic cosine."""

    def asinh(self, x: V) -> V:
        """Inverse hyperbolic sine."""

    def acosh(self, x: V) -> V:
        """Inverse hyperbolic cosine."""

    def atanh(self, x: V) -> V:
        """Inverse hyperbolic tangent."""

    def atan2(self, a: V, b: V) -> V:
        """The angle of the point ``(b, a)`` (``torch.atan2(a, b)``)."""

    def hypot(self, a: V, b: V) -> V:
        """``sqrt(a * a + b * b)``."""

    # ------------------------------------------------------------------ rounding
    def floor(self, x: V) -> V:
        """Largest integer not above ``x`` (integers unchanged)."""

    def ceil(self, x: V) -> V:
        """Smallest integer not below ``x`` (integers unchanged)."""

    def trunc(self, x: V) -> V:
        """``x`` rounded toward zero (integers unchanged)."""

    def round(self, x: V) -> V:
        """``x`` rounded to the nearest integer, ties to even (integers unchanged)."""

    # ------------------------------------------------------------------ bits
    def bitwise_and(self, a: V, b: V) -> V:
        """``a & b`` of integers or bools."""

    def bitwise_or(self, a: V, b: V) -> V:
        """``a | b`` of integers or bools."""

    def bitwise_xor(self, a: V, b: V) -> V:
        """``a ^ b`` of integers or bools."""

    def bitwise_not(self, x: V) -> V:
        """``~x`` of integers; ``not x`` of bools."""

    def lshift(self, a: V, b: V) -> V:
        """``a << b`` of integers."""

    def rshift(self, a: V, b: V) -> V:
        """``a >> b`` of integers (arithmetic for signed types)."""

    # ------------------------------------------------------------------ predicates (bool results)
    def eq(self, a: V, b: V) -> V:
        """``a == b``."""

    def ne(self, a: V, b: V) -> V:
        """``a != b``."""

    def lt(self, a: V, b: V) -> V:
        """``a < b``."""

    def le(self, a: V, b: V) -> V:
        """``a <= b``."""

    def gt(self, a: V, b: V) -> V:
        """``a > b``."""

    def ge(self, a: V, b: V) -> V:
        """``a >= b``."""

    def logical_and(self, a: V, b: V) -> V:
        """``a != 0 and b != 0``."""

    def logical_or(self, a: V, b: V) -> V:
        """``a != 0 or b != 0``."""

    def logical_xor(self, a: V, b: V) -> V:
        """``(a != 0) != (b != 0)``."""

    def logical_not(self, x: V) -> V:
        """``x == 0``."""

    def isnan(self, x: V) -> V:
        """Whether ``x`` is NaN."""

    def isinf(self, x: V) -> V:
        """Whether ``x`` is +-infinity."""

    def signbit(self, x: V) -> V:
        """Whether ``x``'s sign bit is set (true for ``-0.0`` and negative NaNs; ``x < 0`` for integers)."""


OP_NAMES: frozenset[str] = frozenset(
    name for name, member in vars(OpsHandler).items() if callable(member) and not name.startswith("_")
)
"""Every op of the vocabulary."""

BOOL_RESULT_OPS: frozenset[str] = frozenset(
    "eq ne lt le gt ge logical_and logical_or logical_xor logical_not isnan isinf signbit".split()
)
"""Elementwise ops whose result is ``torch.bool`` whatever their operands' dtype."""

STRUCTURAL_OPS: frozenset[str] = frozenset(
    "load store store_reduction constant index_expr indirect_indexing to_dtype bitcast where masked "
    "reduction scan rand randn randint64".split()
)
"""Ops with arguments of their own (buffer names, indices, dtypes, callables): a handler implements
each one by hand."""

ELEMENTWISE_OPS: frozenset[str] = OP_NAMES - STRUCTURAL_OPS
"""Ops computed lane by lane from values and scalars only: the result has the dtype of the first
value operand (``torch.bool`` for ``BOOL_RESULT_OPS``)."""


def _arity(name: str) -> tuple[int, int]:
    """The fewest and most arguments (positional and keyword together) ``OpsHandler.<name>`` takes,
    ``self`` left out."""
    params = list(inspect.signature(getattr(OpsHandler, name)).parameters.values())[1:]
    required = sum(1 for p in params if p.default is inspect.Parameter.empty)
    return required, len(params)


OP_ARITY: dict[str, tuple[int, int]] = {name: _arity(name) for name in sorted(OP_NAMES)}
"""``name -> (fewest, most)`` arguments of each op: a call outside the range raises TypeError at
trace time (``tilefuse.virtualized.ops``)."""

register_vocabulary(OP_ARITY)
