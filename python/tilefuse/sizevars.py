"""Symbolic sizes of a graph compiled with dynamic shapes (Inductor's ``SizeVarAllocator``).

When Dynamo marks a dimension dynamic (``dynamic=True``, ``mark_dynamic`` or automatic dynamic
shapes after a recompile), the fake tensors AOTAutograd hands the backend have ``torch.SymInt``
sizes backed by sympy expressions in a ``ShapeEnv``. They enter tilefuse once, here: each
``SymInt`` becomes a native :class:`tilefuse.symbolic.Expr` over size symbols whose range is the
ShapeEnv's value range of the symbol (Dynamo's backed sizes are ``>= 2``) and whose *hint* is the
value it had in the example inputs. Everything downstream (IR sizes, index expressions, kernel
arguments, the wrapper's allocations) works on those Exprs; sympy appears again only when a guard
is handed back to the ShapeEnv.

Sizes in the IR are ``int | Expr``: a size that is not symbolic stays a plain Python int, so static
graphs pay nothing. Questions about sizes go through the graph's ``SizeVars``:

* ``statically_known_*`` — True only with a proof from the symbols' ranges (never a guard);
* ``evaluate_*`` / ``guard_*`` — decide a comparison from the hints and record it as a guard in
  the ShapeEnv (``ShapeEnv.evaluate_expr``), so Dynamo recompiles when a later input makes the
  fact false. Inductor's rule: prove statically when possible, guard otherwise.
* ``hint`` — the example value, for heuristics (block sizes) that must not change correctness.

A graph without symbolic inputs gets a ``SizeVars`` without a ShapeEnv: every size is an int and
every question is answered by plain arithmetic.

Data-dependent (unbacked) sizes: with ``capture_dynamic_output_shape_ops`` /
``capture_scalar_outputs`` an op whose result size or value depends on tensor data (``nonzero``,
boolean-mask indexing, ``unique``, ``.item()``) gets a fresh ShapeEnv symbol ``u0``, ``u1``, ...
with a value range but no example value. Such a symbol enters as any other (``unbacked`` lists
them), with the hint ``config.UNBACKED_SYMINT_FALLBACK`` clamped to its range, for heuristics
only. A decision about an expression over it is taken only when it holds for every value the
ShapeEnv admits (its ranges and the facts ``torch._check`` recorded, ``_maybe_evaluate_static``):
nothing can be guarded on a value the inputs do not determine. Otherwise it raises
``DataDependentSizeError``; callers whose "no" is correct for every size (``equals_or_false``,
the int32 indexing check ``evaluate_all_lt``) take that branch instead. A tensor dim over an
unbacked symbol may be 0 (an empty mask), unlike a backed one.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Iterable

from . import symbolic as S

log = logging.getLogger("tilefuse")

Size = Any  # int | S.Expr


def is_static(x: Size) -> bool:
    """True for a plain int (or a constant Expr)."""
    return isinstance(x, int) or (isinstance(x, S.Expr) and x.is_number)


def static_or_expr(x: Size) -> Size:
    """``x`` with constant Exprs folded to Python ints (so static code paths see ints)."""
    if isinstance(x, S.Expr) and x.is_number:
        return x.int_value
    return x


def _finite_int(v: Any) -> int | None:
    """A ValueRanges end as an int (None for ±oo / int_oo)."""
    try:
        if getattr(v, "is_finite", True) is False:
            return None
        return int(v)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


class SymbolicFloat:
    """A float computed from symbolic sizes: Dynamo's ``SymFloat`` in a graph with dynamic shapes,
    e.g. ``torch.sym_float(s0)`` and ``0.1 / sym_float(s0)`` (cross-entropy's label smoothing
    divides by the class count). ``op`` is "float" (``args``: one int-valued ``Expr``) or one of
    "add", "sub", "mul", "truediv", "neg" (``args``: operands, each a ``SymbolicFloat``, a Python
    number or an ``Expr``). A kernel computes it from its size arguments (``emit``), in float64
    as Python computes the ``SymFloat``, then converts it to the kernel's dtype, as eager converts
    a Python scalar operand. It has no value at compile time: ``float()`` raises TypeError (a
    lowering that needs one declines, and the op runs as the aten op)."""

    OPS = ("float", "add", "sub", "mul", "truediv", "neg")
    __slots__ = ("op", "args")

    def __init__(self, op: str, *args: Any):
        if op not in self.OPS:
            raise ValueError(f"unknown SymbolicFloat op {op!r}; expected one of {self.OPS}")
        self.op = op
        self.args = args

    def emit(self, dtype: Any) -> Any:
        """The value as an ``ops`` value of ``dtype`` (inside a loop body being traced)."""
        import torch

        from .virtualized import ops

        f64 = torch.float64

        def value(a: Any) -> Any:
            if isinstance(a, SymbolicFloat):
                return a.emit(f64)
            if isinstance(a, S.Expr) and not a.is_number:
                return ops.index_expr(a, f64)
            if isinstance(a, S.Expr):
                a = a.int_value
            return ops.constant(float(a), f64)

        if self.op == "float":
            v = value(self.args[0])
        elif self.op == "neg":
            v = ops.neg(value(self.args[0]))
        else:
            v = getattr(ops, self.op)(value(self.args[0]), value(self.args[1]))
        return v if dtype == f64 else ops.to_dtype(v, dtype)

    def __float__(self) -> float:
        raise TypeError("symbolic expression: a float computed from symbolic sizes has no value when compiling")

    def __repr__(self) -> str:
        return f"SymbolicFloat({self.op}, {', '.join(map(repr, self.args))})"


class SymbolicSizeError(NotImplementedError):
    """A size question the backend cannot answer symbolically (a decision on a data-dependent
    size, a sympy node the native core has no counterpart for). Raised by a lowering, the op runs
    as the aten op; raised elsewhere, the graph is compiled per concrete shape instead
    (``backend.SpecializingGraph``), which is logged."""


class DataDependentSizeError(SymbolicSizeError):
    """A decision that depends on the value of a data-dependent (unbacked) size, which the ShapeEnv
    cannot settle from its ranges and recorded facts (no guard can be taken on it)."""


def _is_unbacked_int(sympy_sym: Any) -> bool:
    """Whether a ShapeEnv symbol is an unbacked integer (``u0``: a data-dependent size or
    ``.item()`` value)."""
    try:
        from torch.utils._sympy.symbol import SymT, symbol_is_type
    except ImportError:  # pragma: no cover - an older torch: its naming convention
        return sympy_sym.name.startswith("u")
    return symbol_is_type(sympy_sym, SymT.UNBACKED_INT)


class SizeVars:
    """The size symbols of one graph: conversion from ``SymInt``, hints, proofs and guards.

    ``shape_env``: the ShapeEnv of the graph's fake inputs (None for a static graph).
    """

    def __init__(self, shape_env: Any = None):
        self.shape_env = shape_env
        self.symbols: dict[str, S.Expr] = {}  # name -> native symbol (with its range)
        self._sympy_symbols: dict[str, Any] = {}  # name -> the ShapeEnv's sympy symbol
        self.hints: dict[str, int] = {}  # name -> example value
        self.guards: list[str] = []  # guards this graph added (for logs and tests)
        # the guarded decisions this graph relied on (sympy relations true at the hints), whether
        # decided here or by an earlier graph of the same ShapeEnv: the graph cache replays them
        self.guard_exprs: list[Any] = []
        # decisions already taken: (op, a, b) -> bool (a guard is recorded once; sympy is slow);
        # shared by the graphs of one ShapeEnv (a forward and its backward)
        self._decided: dict = {}
        self._relied: set = set()  # keys of the decisions in guard_exprs (each listed once)
        self.unbacked: set[str] = set()  # names of the data-dependent (unbacked) symbols
        if shape_env is not None:
            try:
                self._decided = _DECIDED.setdefault(shape_env, {})
            except TypeError:  # not weak-referenceable
                pass

    # ------------------------------------------------------------------ conversion
    def symbol(self, sympy_sym: Any) -> S.Expr:
        """The native symbol for one of the ShapeEnv's symbols (created on first use with the
        ShapeEnv's value range and hint). Raises SymbolicSizeError for a symbol without a hint
        (an unbacked, data-dependent size)."""
        name = sympy_sym.name
        e = self.symbols.get(name)
        if e is not None:
            return e
        env = self.shape_env
        vals = getattr(env, "backed_var_to_val", None) if env is not None else None
        if vals is None and env is not None:
            vals = env.var_to_val
        hint = vals.get(sympy_sym) if vals is not None else None
        if hint is None:
            if env is None or not _is_unbacked_int(sympy_sym):
                raise SymbolicSizeError(f"symbol {name} has no hint (a data-dependent value of an unsupported kind)")
            return self._unbacked_symbol(name, sympy_sym)
        vr = env.var_to_range.get(sympy_sym)
        lo = _finite_int(vr.lower) if vr is not None else None
        hi = _finite_int(vr.upper) if vr is not None else None
        hi = hi if hi is not None and hi < 2**62 else None
        if lo is not None and hi is not None and lo > hi:
            raise SymbolicSizeError(f"symbol {name} has an empty range {vr}")
        if lo is None or lo < 1:
            # an integer that may be 0 or negative (an int argument under dynamic=True, such as
            # transformers' logits_to_keep): a symbol of kind "other" with its true range, so no
            # proof assumes it is a size; a tensor dim that may be empty is refused where sizes
            # enter the IR (``tensor_sizes``)
            if int(hint) < (lo if lo is not None else int(hint)):
                raise SymbolicSizeError(f"symbol {name} has hint {hint} outside its range {vr}")
            e = S.sym(name, kind="other", lower=lo, upper=hi)
            self.symbols[name] = e
            self._sympy_symbols[name] = sympy_sym
            self.hints[name] = int(hint)
            return e
        if int(hint) < lo:
            raise SymbolicSizeError(f"size symbol {name} has hint {hint} below its range [{lo}, ...]")
        e = S.sym(name, lower=lo, upper=hi)
        self.symbols[name] = e
        self._sympy_symbols[name] = sympy_sym
        self.hints[name] = int(hint)
        return e

    def _unbacked_symbol(self, name: str, sympy_sym: Any) -> S.Expr:
        """The native symbol of an unbacked integer: the ShapeEnv's range (a size from
        ``nonzero`` is ``>= 0``; an ``.item()`` value may be unbounded), kind ``size`` when the
        range proves it ``>= 1``, ``unbacked`` (the native core's non-negative kind) when it
        proves it ``>= 0``, else ``other``, and the fallback hint ``config.UNBACKED_SYMINT_FALLBACK``
        clamped to the range."""
        from . import config

        vr = self.shape_env.var_to_range.get(sympy_sym)
        lo = _finite_int(vr.lower) if vr is not None else None
        hi = _finite_int(vr.upper) if vr is not None else None
        hi = hi if hi is not None and hi < 2**62 else None
        if lo is not None and hi is not None and lo > hi:
            raise SymbolicSizeError(f"symbol {name} has an empty range {vr}")
        hint = config.UNBACKED_SYMINT_FALLBACK
        hint = max(hint, lo) if lo is not None else hint
        hint = min(hint, hi) if hi is not None else hint
        if lo is not None and lo >= 1:
            e = S.sym(name, lower=lo, upper=hi, kind="size")
        elif lo is not None and lo >= 0:
            e = S.sym(name, lower=lo, upper=hi, kind="unbacked")  # the native kind: >= 0
        else:
            e = S.sym(name, kind="other", lower=lo, upper=hi)
        self.symbols[name] = e
        self._sympy_symbols[name] = sympy_sym
        self.hints[name] = hint
        self.unbacked.add(name)
        return e

    def has_unbacked(self, e: Size) -> bool:
        """Whether ``e`` involves a data-dependent (unbacked) symbol."""
        if not self.unbacked or not isinstance(e, S.Expr):
            return False
        return any(f.name in self.unbacked for f in e.free_symbols)

    def unbacked_defs(self, bindings: Any) -> dict:
        """The data-dependent symbols an FX node's result defines, from its ``unbacked_bindings``
        meta (sympy symbol -> pytree key path into the result): native symbol name -> key path.
        The ShapeEnv's renamings and replacements are applied first (the graph's sizes use the
        replaced symbol); a symbol the ShapeEnv expresses by other sizes needs no binding."""
        import sympy

        env = self.shape_env
        if not bindings or env is None:
            return {}
        from torch.fx.experimental.symbolic_shapes import resolve_unbacked_bindings

        out: dict = {}
        for sym, path in resolve_unbacked_bindings(env, bindings).items():
            r = env.replace(sym)
            if not isinstance(r, sympy.Symbol) or not _is_unbacked_int(r):
                continue
            out[self.symbol(r).name] = path
        return out

    def condition_terms(self, cond: Any) -> list:
        """A runtime assertion's condition (a sympy relation, or a conjunction of them, over the
        ShapeEnv's symbols) as ``[(lhs, op, rhs), ...]`` with native sizes and Python comparison
        operators, all of which must hold; an empty list when the symbols' ranges prove it (the
        ShapeEnv's axioms are not used: the assertion is one of them). A condition on a
        data-dependent symbol is never taken as proven: its range already includes what
        ``torch._check`` asserted (``u0 >= 2`` narrows u0's range to ``[2, inf]``), so the range
        would prove the very assertion that has to be checked. SymbolicSizeError for another
        form."""
        import sympy
        from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

        env = self.shape_env
        if env is not None:
            cond = env.replace(cond)
        if env is not None and not free_unbacked_symbols(cond):
            try:
                if env._maybe_evaluate_static(cond, axioms=()) == sympy.true:
                    return []
            except Exception:  # noqa: BLE001 - not provable here: checked at run time
                pass
        comparisons = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
        parts = cond.args if isinstance(cond, sympy.And) else (cond,)
        out = []
        for c in parts:
            op = comparisons.get(type(c))
            if op is None:
                raise SymbolicSizeError(f"runtime assertion {cond}: no Python form for {type(c).__name__}")
            out.append((self.from_sympy(c.lhs), op, self.from_sympy(c.rhs)))
        return out

    def from_sympy(self, expr: Any) -> Size:
        """A sympy size expression of the ShapeEnv as ``int | Expr`` (replacements the ShapeEnv
        knows — ``s1 == s0`` — applied first)."""
        import sympy

        if isinstance(expr, int):
            return expr
        if self.shape_env is not None:
            expr = self.shape_env.replace(expr)
        if isinstance(expr, sympy.Integer) or getattr(expr, "is_number", False):
            return int(expr)
        try:
            e = S.from_sympy(expr, symbol=self.symbol)
        except (TypeError, ValueError) as err:
            raise SymbolicSizeError(f"size {expr} has no native form: {err}") from err
        return static_or_expr(e)

    def size(self, x: Any) -> Size:
        """A size from a graph value: an int, a ``torch.SymInt`` or an Expr."""
        import torch

        if isinstance(x, torch.SymInt):
            node = x.node
            if node.is_nested_int():
                raise SymbolicSizeError("nested (jagged) sizes")
            return self.from_sympy(node.expr)
        if isinstance(x, S.Expr):
            return static_or_expr(x)
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"expected a size (int or SymInt), got {type(x).__name__}")
        return x

    def sizes(self, xs: Any) -> list:
        """``[self.size(x) for x in xs]``."""
        return [self.size(x) for x in xs]

    def tensor_sizes(self, xs: Any) -> list:
        """Sizes of a tensor's dims: as ``sizes``; a symbolic dim not proven >= 1 (one built from
        an integer argument) is guarded >= 1, or refused (SymbolicSizeError) when it is empty at
        the hints — the IR takes symbolic dims to be >= 1."""
        out = self.sizes(xs)
        for e in out:
            if isinstance(e, S.Expr) and not S.statically_known_leq(1, e):
                if self.has_unbacked(e):
                    # a data-dependent dim may be empty (a mask with no true element); the IR
                    # takes no fact about it beyond its range, but it must not be negative
                    if not (S.statically_known_leq(0, e) or self._static_fact("ge", e, 0)):
                        raise DataDependentSizeError(f"tensor dim {e} is not known to be >= 0")
                    continue
                if self.hint(e) < 1 or not self.evaluate_leq(1, e):
                    raise SymbolicSizeError(f"tensor dim {e} is empty at the example inputs")
        return out

    def to_sympy(self, e: Size) -> Any:
        """``e`` as a sympy expression over the ShapeEnv's own symbols."""
        import sympy

        if isinstance(e, int):
            return sympy.Integer(e)
        out = S.to_sympy(e)
        sub = {s: self._sympy_symbols[s.name] for s in out.free_symbols if s.name in self._sympy_symbols}
        return out.xreplace(sub) if sub else out

    # ------------------------------------------------------------------ hints
    def hint(self, e: Size) -> int:
        """The value of ``e`` at the example inputs (for heuristics only)."""
        if isinstance(e, int):
            return e
        if e.is_number:
            return e.int_value
        return e.evaluate(self.hints)

    def upper_bound(self, e: Size) -> int | None:
        """A proven upper bound of ``e`` over the symbols' ranges (None: unbounded)."""
        if isinstance(e, int):
            return e
        return S.bound(e)[1]

    # ------------------------------------------------------------------ proofs (never guard)
    def statically_known_equals(self, a: Size, b: Size) -> bool:
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return S.statically_known_equals(a, b)

    def known_equal(self, a: Size, b: Size) -> bool:
        """Whether ``a == b`` for every size the graph's guards admit, with no new guard: proven by
        the native core, or, when that cannot and both agree at the hints, by the ShapeEnv from
        the guards it already holds (``ShapeEnv._maybe_evaluate_static`` with its axioms). A
        graph whose code writes ``t.view(6, 4)`` of a ``[s0, s1, 4]`` input has lowered sizes
        ``[6, 4]`` where its FX meta values say ``[s0*s1, 4]``; Dynamo guarded ``s0*s1 == 6``.
        For the few size comparisons where a false negative costs a copy or eager's strides
        (graph outputs' layouts), not for hot paths: the ShapeEnv query is sympy work."""
        if self.statically_known_equals(a, b):
            return True
        env = self.shape_env
        if env is None or self.hint(a) != self.hint(b):
            return False
        import sympy

        try:
            return bool(env._maybe_evaluate_static(sympy.Eq(self.to_sympy(a), self.to_sympy(b))) == sympy.true)
        except Exception:  # noqa: BLE001 - unprovable: treated as different (a copy, always correct)
            return False

    def statically_known_leq(self, a: Size, b: Size) -> bool:
        if isinstance(a, int) and isinstance(b, int):
            return a <= b
        return S.statically_known_leq(a, b)

    def statically_known_lt(self, a: Size, b: Size) -> bool:
        if isinstance(a, int) and isinstance(b, int):
            return a < b
        return S.statically_known_lt(a, b)

    def statically_known_multiple_of(self, a: Size, b: Size) -> bool:
        if isinstance(a, int) and isinstance(b, int):
            return b != 0 and a % b == 0
        return S.statically_known_multiple_of(a, b)

    def _static_fact(self, op: str, a: Size, b: Size) -> bool | None:
        """``a == b`` (op "eq"), ``a < b`` ("lt") or ``a >= b`` ("ge") decided by the ShapeEnv for
        every value it admits (ranges, replacements and the facts ``torch._check`` recorded), with
        no guard; None when it cannot tell."""
        import sympy

        env = self.shape_env
        if env is None:
            return None
        rel = {"eq": sympy.Eq, "lt": sympy.Lt, "ge": sympy.Ge}[op](self.to_sympy(a), self.to_sympy(b))
        try:
            got = env._maybe_evaluate_static(rel)
        except Exception:  # noqa: BLE001 - undecidable here: the caller's data-dependent path
            return None
        if got == sympy.true:
            return True
        if got == sympy.false:
            return False
        return None

    def _decide_unbacked(self, op: str, a: Size, b: Size) -> tuple[bool, Any]:
        """A decision over a data-dependent size (``_memo``'s form: no guard), or
        DataDependentSizeError when it is not the same for every value the ShapeEnv admits."""
        got = self._static_fact(op, a, b)
        if got is None:
            sign = {"eq": "==", "lt": "<"}[op]
            raise DataDependentSizeError(f"{a} {sign} {b} depends on a data-dependent size")
        return got, None

    # ------------------------------------------------------------------ decisions (guard when needed)
    def _guard(self, cond: Any, value: bool, what: str) -> tuple[bool, Any]:
        """Record ``cond`` (a sympy relational that holds at the hints when ``value``) as a guard;
        returns ``(value, relation true at the hints)``."""
        import sympy

        env = self.shape_env
        if env is None:
            raise AssertionError(f"tilefuse internal error: {what} on static sizes needs no guard")
        rel = cond if value else sympy.Not(cond)
        got = env.evaluate_expr(cond)
        if bool(got) != value:
            raise AssertionError(f"tilefuse internal error: ShapeEnv evaluates {cond} as {got}, hints say {value}")
        self.guards.append(str(rel))
        log.debug("tilefuse: guard %s (%s)", rel, what)
        return value, rel

    def evaluate_equals(self, a: Size, b: Size) -> bool:
        """Whether ``a == b`` at the hints, proven or recorded as a guard."""
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if a == b:
            return True
        return self._memo("eq", a, b, self._decide_equals)

    def _memo(self, op: str, a: Size, b: Size, decide) -> bool:
        """``decide(a, b)`` once per (op, a, b): its guard is recorded once (sympy is slow).
        ``decide`` returns ``(value, guard relation or None when proven)``. Keyed by the
        expressions' text, not the native expressions, whose symbols carry their value ranges: a
        backward graph's symbols, made after the forward's guards narrowed a range, differ from
        the forward's, and keyed by them every decision would be taken (and its costly ShapeEnv
        guard evaluated) a second time; ``a == b`` and ``b == a`` are one decision."""
        ka, kb = str(a), str(b)
        key = (op,) + ((kb, ka) if op == "eq" and kb < ka else (ka, kb))
        got = self._decided.get(key)
        if got is None:
            got = self._decided[key] = decide(a, b)
        if got[1] is not None and key not in self._relied:
            self._relied.add(key)
            self.guard_exprs.append(got[1])
        return got[0]

    def _decide_equals(self, a: Size, b: Size) -> tuple[bool, Any]:
        if S.statically_known_equals(a, b):
            return True, None
        if self.has_unbacked(a) or self.has_unbacked(b):
            if S.statically_known_lt(a, b) or S.statically_known_lt(b, a):
                return False, None
            return self._decide_unbacked("eq", a, b)
        import sympy

        value = self.hint(a) == self.hint(b)
        if not value and (S.statically_known_lt(a, b) or S.statically_known_lt(b, a)):
            return False, None
        return self._guard(sympy.Eq(self.to_sympy(a), self.to_sympy(b)), value, f"{a} == {b}")

    def equals_or_false(self, a: Size, b: Size) -> bool:
        """True when ``a == b`` is proven, or holds at the hints (then guarded); False otherwise,
        *without* a guard — for callers whose False branch is correct for every size (a reshape
        that is not a strided view stays a lazy view)."""
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if a == b:
            return True
        if self.hint(a) != self.hint(b):
            return False
        try:
            return self.evaluate_equals(a, b)
        except DataDependentSizeError:
            return False  # equal only for some values of a data-dependent size

    def evaluate_lt(self, a: Size, b: Size) -> bool:
        """Whether ``a < b`` at the hints, proven or recorded as a guard."""
        if isinstance(a, int) and isinstance(b, int):
            return a < b
        return self._memo("lt", a, b, self._decide_lt)

    def _decide_lt(self, a: Size, b: Size) -> tuple[bool, Any]:
        if S.statically_known_lt(a, b):
            return True, None
        if S.statically_known_leq(b, a):
            return False, None
        if self.has_unbacked(a) or self.has_unbacked(b):
            return self._decide_unbacked("lt", a, b)
        import sympy

        value = self.hint(a) < self.hint(b)
        return self._guard(sympy.Lt(self.to_sympy(a), self.to_sympy(b)), value, f"{a} < {b}")

    def evaluate_all_lt(self, sizes: Iterable[Size], bound: int) -> bool:
        """Whether every size in ``sizes`` is below the integer ``bound`` at the hints, guarding
        only the largest: a symbolic size proven ``<=`` another one that is below ``bound`` (kept
        here, or decided earlier for a graph of the same ShapeEnv) needs no guard of its own
        (``s0*s1 < 2**31 - 1`` follows from ``s0*s1*s2 < 2**31 - 1``). Each ShapeEnv guard is
        costly to evaluate, and a kernel's int32 check (``_storages_fit_int32``) would otherwise
        take one per buffer size."""
        below = self._decided.setdefault(("below", bound), [])  # sizes decided < bound, shared
        kept: list = []
        for e in dict.fromkeys(sizes):
            if isinstance(e, int) or e.is_number:
                if int(e) >= bound:
                    return False
                continue
            if any(S.statically_known_leq(e, k) for k in kept):
                continue
            done = next((k for k in below if S.statically_known_leq(e, k)), None)
            if done is not None:
                self.evaluate_lt(done, bound)  # memoized: records the guard this graph relies on
                continue
            kept = [k for k in kept if not S.statically_known_leq(k, e)] + [e]
        for e in kept:
            try:
                if not self.evaluate_lt(e, bound):
                    return False
            except DataDependentSizeError:
                return False  # a data-dependent size not bounded below ``bound``: the "no" branch
            below.append(e)
        return True

    def lt_or_false(self, a: Size, b: Size) -> bool:
        """``evaluate_lt``, but False (no guard, no error) when the answer depends on a
        data-dependent size the ShapeEnv cannot bound: for callers whose "no" branch is correct
        for every size (int64 indexing, no 2-D tile)."""
        try:
            return self.evaluate_lt(a, b)
        except DataDependentSizeError:
            return False

    def leq_or_false(self, a: Size, b: Size) -> bool:
        """``evaluate_leq`` with ``lt_or_false``'s rule for data-dependent sizes."""
        try:
            return self.evaluate_leq(a, b)
        except DataDependentSizeError:
            return False

    def evaluate_leq(self, a: Size, b: Size) -> bool:
        """Whether ``a <= b`` at the hints, proven or recorded as a guard."""
        return not self.evaluate_lt(b, a)

    def guard_equals(self, a: Size, b: Size) -> Size:
        """Assert ``a == b`` (guarding if needed) and return ``a``; ValueError when the hints
        differ (the sizes are not equal for these inputs)."""
        if not self.evaluate_equals(a, b):
            raise ValueError(f"sizes {a} and {b} differ ({self.hint(a)} vs {self.hint(b)})")
        return a

    def evaluate_min(self, a: Size, b: Size) -> Size:
        """``min(a, b)``, decided by the hints (guarded)."""
        return a if self.evaluate_leq(a, b) else b

    def evaluate_max(self, a: Size, b: Size) -> Size:
        """``max(a, b)``, decided by the hints (guarded)."""
        return b if self.evaluate_leq(a, b) else a


_DECIDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_STATIC = SizeVars()


def current() -> SizeVars:
    """The SizeVars of the graph being lowered (a static one outside a graph)."""
    from .virtualized import _state

    g = getattr(_state, "graph", None)
    return getattr(g, "sizevars", None) or _STATIC
