"""Integer index expressions: the Python face of tilefuse's native symbolic core.

Everything here is a thin wrapper over ``tilefuse._native`` (Rust). An :class:`Expr` is an
immutable, interned integer expression over symbols; equal expressions are the same node in the
native core, so ``==`` and ``hash`` are O(1) and ``hash`` is deterministic across processes.

Semantics
---------
* Values are Python ints that fit in int64. Any int argument outside int64, and any result or
  intermediate value (during construction or :meth:`Expr.evaluate`) that leaves int64, raises
  ``OverflowError``; nothing wraps.
* Floor semantics everywhere, as Python's ``//`` and ``%``: ``FloorDiv(a, b) == a // b``,
  ``Mod(a, b) == a % b`` (the sign of ``b``), ``ModularIndexing(a, b, c) == (a // b) % c``,
  ``CeilDiv(a, b) == -((-a) // b)``, ``CleanDiv(a, b)`` is an exact division the caller promises
  (it evaluates as floor division).
* Symbols carry a kind and a range (see :func:`sym`). Index variables (``x0``, ``y1``, ``r0_0``,
  ...) are ``>= 0``, sizes (``s0``, ``ks0``, ``ps0``) ``>= 1``; the rewriting rules use these
  facts for their preconditions.
* Construction applies the rewriting rules of Inductor's ``torch.utils._sympy.functions``
  (``FloorDiv``/``ModularIndexing`` eval: gcd cancel, splitting off exactly divisible terms, nested
  divisions, dropping multiples of the modulus), with two deliberate, sound differences: a term
  is split off a division's base only when the surviving base is provably non-negative (which is
  what lets the Triton printer emit plain truncating ``//``/``%``, Triton issue 619), and exact
  terms also split off a positive monomial divisor (``(x + s1*y) // s1 -> y + x // s1``).
* Sums are expanded polynomials with integer coefficients; products of sums are expanded.
  True division ``/`` raises ``TypeError``.

Errors
------
``ZeroDivisionError`` (a zero divisor, at construction or evaluation), ``ValueError`` (a
non-positive ModularIndexing modulus, a negative divisor of ModularIndexing, a bad symbol name,
an empty symbol range, an unknown symbol in :meth:`Expr.evaluate` — the message names it),
``OverflowError`` (int64), ``TypeError`` (a non-integer operand), :class:`CantSplit`
(iteration-range splitting). A bug in the native core raises ``RuntimeError`` instead of
aborting the process (only expressions nested tens of thousands of levels deep can exhaust the
native stack in ``evaluate``/printing).

Range-aware operations
----------------------
``ranges`` arguments are ``{index symbol: length}`` (a mapping, or ``(symbol, length)`` pairs;
lengths are Exprs or ints): each symbol ranges over ``0..length`` (``0 <= v <= length - 1``),
as Inductor's ``var_ranges``. Other symbols keep their assumed ranges.

* :func:`bound` → ``(lo, hi)`` with ``None`` for an infinite end (Inductor's ``bound_sympy``).
* :func:`simplify_with_ranges` (Inductor's ``SizeVarAllocator.simplify_with_ranges``: drops
  ModularIndexing / FloorDiv that cannot wrap, joins div/mod digits; the result equals the input
  at every point of the domain).
* ``statically_known_{equals,leq,lt,gt,geq,multiple_of}`` return True only with a proof; False
  means "not proven" (sound, incomplete), as Inductor's, but decided without a ShapeEnv: sizes
  are only known to be ``>= 1`` (Dynamo's backed sizes are ``>= 2``).
* :func:`stride_vars` (the stride of each variable: a finite difference at 0) and
  :func:`offset_var` (the index with the variables set to 0).
* :func:`split_iteration_ranges(groups, lengths) <split_iteration_ranges>` (Inductor's
  ``SIMDKernel._split_iteration_ranges``) returns a :class:`SplitResult` that unpacks as
  ``(new_ranges, getters)``: ``new_ranges[g]`` lists the node's new loop sizes in kernel group
  ``g``; ``getters[k]`` gives each variable of node length group ``k`` as an Expr over the flat
  new variables ``v0, v1, ...`` (``SplitResult.apply(symbols)`` substitutes actual symbols).
  Raises :class:`CantSplit` when a size cannot be mapped (including a node that covers fewer
  elements than the kernel, which Inductor asserts on).

The native core also implements Inductor's loop simplification (``_simplify_loops``),
``expand_floor_div``, ``combine_modular_indexing_pairs``, ``is_compatible`` and the range trees
(``IterationRangesRoot``/``Entry``), tested in ``rust/tests``; they are not bound to Python
because the product does not call them (kernels index through the flat ``xindex``/``rindex``
digits of ``tilefuse.ir.nodes.digits``; see ``docs/backend.md``).

Sympy appears only at the boundary (Dynamo's symbolic sizes in, guards out): :func:`from_sympy`
and :func:`to_sympy` convert, in pure Python, and import torch/sympy only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from tilefuse._native import (
    Add,
    CantSplit,
    CeilDiv,
    CleanDiv,
    Expr,
    FloorDiv,
    Integer,
    Max,
    Min,
    Mod,
    ModularIndexing,
    Mul,
    Pow,
    SplitResult,
    bound,
    offset_var,
    pexpr,
    simplify_with_ranges,
    split_iteration_ranges,
    statically_known_equals,
    statically_known_leq,
    statically_known_lt,
    statically_known_multiple_of,
    stride_vars,
    sym,
    texpr,
)

if TYPE_CHECKING:
    import sympy

__all__ = [
    "Expr",
    "CantSplit",
    "sym",
    "symbols",
    "Integer",
    "Add",
    "Mul",
    "Pow",
    "FloorDiv",
    "ModularIndexing",
    "CleanDiv",
    "CeilDiv",
    "Mod",
    "Min",
    "Max",
    "pexpr",
    "texpr",
    "from_sympy",
    "to_sympy",
    # range-aware simplification and static queries
    "bound",
    "simplify_with_ranges",
    "statically_known_equals",
    "statically_known_leq",
    "statically_known_lt",
    "statically_known_geq",
    "statically_known_gt",
    "statically_known_multiple_of",
    "stride_vars",
    "offset_var",
    # iteration-range splitting
    "split_iteration_ranges",
    "SplitResult",
]


def statically_known_gt(a: Expr | int, b: Expr | int, ranges: Mapping[Expr, Expr | int] | None = None) -> bool:
    """True only when ``a > b`` is proven on the domain (``statically_known_lt(b, a, ranges)``)."""
    return statically_known_lt(b, a, ranges)


def statically_known_geq(a: Expr | int, b: Expr | int, ranges: Mapping[Expr, Expr | int] | None = None) -> bool:
    """True only when ``a >= b`` is proven on the domain (``statically_known_leq(b, a, ranges)``)."""
    return statically_known_leq(b, a, ranges)


def symbols(names: str, **assumptions: Any) -> tuple[Expr, ...]:
    """Several symbols at once: ``x0, x1 = symbols("x0 x1")`` (names split on spaces/commas).

    ``assumptions`` are passed to :func:`sym` for every name.
    """
    return tuple(sym(n, **assumptions) for n in names.replace(",", " ").split())


# --------------------------------------------------------------------------- sympy boundary

_FROM: dict[type, Any] | None = None


def _from_table() -> dict[type, Any]:
    """type -> converter(expr, conv) for every supported sympy / torch node class."""
    global _FROM
    if _FROM is not None:
        return _FROM
    import sympy

    def _pow(e: Any, conv: Any) -> Expr:
        base, exp = e.args
        if not (exp.is_Integer and int(exp) >= 0):
            raise ValueError(f"from_sympy: only non-negative integer powers are supported, got {e} (exponent {exp})")
        return conv(base) ** int(exp)

    table: dict[type, Any] = {
        sympy.Add: lambda e, conv: Add(*[conv(a) for a in e.args]),
        sympy.Mul: lambda e, conv: Mul(*[conv(a) for a in e.args]),
        sympy.Pow: _pow,
        # sympy's Mod on integers is Python's floor modulus (sign of the divisor)
        sympy.Mod: lambda e, conv: Mod(conv(e.args[0]), conv(e.args[1])),
        sympy.Min: lambda e, conv: Min(*[conv(a) for a in e.args]),
        sympy.Max: lambda e, conv: Max(*[conv(a) for a in e.args]),
    }
    try:
        from torch.utils._sympy import functions as F
    except ImportError:  # pragma: no cover - torch is a dependency
        F = None
    if F is not None:
        table.update(
            {
                F.FloorDiv: lambda e, conv: FloorDiv(conv(e.args[0]), conv(e.args[1])),
                F.CleanDiv: lambda e, conv: CleanDiv(conv(e.args[0]), conv(e.args[1])),
                F.ModularIndexing: lambda e, conv: ModularIndexing(conv(e.args[0]), conv(e.args[1]), conv(e.args[2])),
                # torch's Mod is only defined on non-negative operands, where it is floor mod
                F.Mod: lambda e, conv: Mod(conv(e.args[0]), conv(e.args[1])),
                F.PythonMod: lambda e, conv: Mod(conv(e.args[0]), conv(e.args[1])),
                F.Min: lambda e, conv: Min(*[conv(a) for a in e.args]),
                F.Max: lambda e, conv: Max(*[conv(a) for a in e.args]),
                F.PowByNatural: _pow,
                F.Identity: lambda e, conv: conv(e.args[0]),
            }
        )

        def _to_int(div: Any, name: str) -> Any:
            # CeilToInt / FloorToInt of an IntTrueDiv (torch's sizes of the form ceil(a / b), e.g.
            # the logsumexp rows of CUDA's efficient attention: 32*CeilToInt(IntTrueDiv(s0, 32)))
            # are CeilDiv / FloorDiv; of an integer, the integer itself
            def f(e: Any, conv: Any) -> Expr:
                (arg,) = e.args
                if isinstance(arg, getattr(F, "IntTrueDiv", ())):
                    return div(conv(arg.args[0]), conv(arg.args[1]))
                if getattr(arg, "is_integer", False):
                    return conv(arg)
                raise TypeError(
                    f"from_sympy: unsupported sympy node {name} of {arg!s} (only of IntTrueDiv or an integer)"
                )

            return f

        for cls_name, div in (("CeilToInt", CeilDiv), ("FloorToInt", FloorDiv)):
            cls = getattr(F, cls_name, None)
            if isinstance(cls, type):
                table[cls] = _to_int(div, cls_name)
        if hasattr(F, "CeilDiv") and isinstance(F.CeilDiv, type):
            table[F.CeilDiv] = lambda e, conv: CeilDiv(conv(e.args[0]), conv(e.args[1]))
    _FROM = table
    return table


def _symbol_from_sympy(s: Any) -> Expr:
    if s.is_integer is False:
        raise TypeError(f"from_sympy: symbol {s.name!r} is not integer-valued")
    positive = True if s.is_positive else (False if s.is_nonpositive else None)
    nonnegative = True if s.is_nonnegative else (False if s.is_negative else None)
    return sym(s.name, positive=positive, nonnegative=nonnegative)


def from_sympy(expr: Any, symbol: Any = None) -> Expr:
    """Convert a sympy expression (as Inductor and Dynamo build them) to an :class:`Expr`.

    ``symbol``: optional ``sympy.Symbol -> Expr`` used for every symbol instead of the default
    mapping below (``SizeVars`` passes its own, to give Dynamo's size symbols their ShapeEnv
    ranges).

    Supported nodes: ``sympy.Integer`` (and Python ints), ``sympy.Symbol`` (assumptions map to
    the symbol's range: ``positive`` → ``>= 1`` and size-like, ``nonnegative`` → ``>= 0`` and
    index-like, ``negative``/``nonpositive`` → ``<= -1``/``<= 0``; otherwise the kind follows the
    name prefix, see :func:`sym`), ``Add``, ``Mul``, ``Pow`` and ``PowByNatural`` with a
    non-negative integer exponent, ``sympy.Mod``, and from ``torch.utils._sympy.functions``:
    ``FloorDiv``, ``CleanDiv``, ``ModularIndexing``, ``Mod``, ``PythonMod``, ``Min``, ``Max``,
    ``Identity`` (unwrapped), ``CeilToInt``/``FloorToInt`` of an ``IntTrueDiv`` (as ``CeilDiv``/
    ``FloorDiv``); sympy's ``Min``/``Max`` too. The result is rebuilt through the
    native constructors, so it is in tilefuse's canonical, simplified form (equal in value, not
    necessarily in shape, to the input).

    Raises ``TypeError`` naming the node for anything else (floats, relationals, other
    functions, non-integer symbols), ``ValueError`` for a non-integer rational or a negative /
    symbolic exponent, ``OverflowError`` for an integer outside int64, and whatever the
    constructors raise (``ZeroDivisionError``, ...).
    """
    if isinstance(expr, Expr):
        return expr
    if isinstance(expr, int):
        return Integer(expr)
    import sympy

    table = _from_table()
    memo: dict[Any, Expr] = {}

    def conv(e: Any) -> Expr:
        r = memo.get(e)
        if r is not None:
            return r
        f = table.get(type(e))
        if f is not None:
            r = f(e, conv)
        elif isinstance(e, sympy.Integer):
            r = Integer(int(e))
        elif isinstance(e, sympy.Symbol):
            r = symbol(e) if symbol is not None else _symbol_from_sympy(e)
        elif isinstance(e, sympy.Rational):
            raise ValueError(f"from_sympy: non-integer rational {e} in an integer expression")
        elif isinstance(e, int):
            r = Integer(e)
        else:
            for cls, g in table.items():
                if isinstance(e, cls):
                    r = g(e, conv)
                    break
            else:
                raise TypeError(
                    f"from_sympy: unsupported sympy node {type(e).__name__} in {e!s}; "
                    "supported: Integer, Symbol, Add, Mul, Pow (natural exponent), FloorDiv, "
                    "CleanDiv, ModularIndexing, Mod, PythonMod, Min, Max, CeilToInt/FloorToInt of IntTrueDiv"
                )
        memo[e] = r
        return r

    return conv(sympy.sympify(expr) if not isinstance(expr, sympy.Basic) else expr)


def _symbol_to_sympy(e: Expr) -> Any:
    import sympy

    lo, hi = e.assumed_range
    kw: dict[str, bool] = {"integer": True}
    if lo is not None and lo >= 1:
        kw["positive"] = True
    elif lo is not None and lo >= 0:
        kw["nonnegative"] = True
    elif hi is not None and hi <= -1:
        kw["negative"] = True
    elif hi is not None and hi <= 0:
        kw["nonpositive"] = True
    return sympy.Symbol(e.name, **kw)


def to_sympy(expr: Expr | int, *, evaluate: bool = False) -> sympy.Expr:
    """Convert an :class:`Expr` to sympy, using torch's ``torch.utils._sympy.functions`` nodes.

    Symbols become ``sympy.Symbol(name, integer=True, ...)`` with ``positive=True`` for a range
    starting at ``>= 1``, ``nonnegative=True`` for ``>= 0`` (``negative``/``nonpositive`` for
    ranges ending at ``<= -1``/``<= 0``), as Inductor's ``sympy_index_symbol`` and Dynamo's size
    symbols are; finer ranges (``lower=3``, ``upper=...``) and an explicit kind are not
    representable and are lost. Sums and products become sympy ``Add``/``Mul``; ``FloorDiv``,
    ``CleanDiv``, ``ModularIndexing`` map to torch's classes of the same name, ``Mod`` (floor
    modulus with a divisor of unknown sign) to ``PythonMod``, ``Min``/``Max`` to torch's.

    With ``evaluate=False`` (default) the function nodes are built unevaluated, so the result has
    exactly tilefuse's structure and ``from_sympy(to_sympy(e)) == e`` (for symbols created
    without a finer range or explicit kind); with ``evaluate=True`` torch's own ``eval`` rules
    run on each node (slower; may rewrite further, never changes the value).
    Torch is imported only when the expression contains a function node.
    """
    import sympy

    memo: dict[Expr, Any] = {}
    F = None

    def funcs() -> Any:
        nonlocal F
        if F is None:
            from torch.utils._sympy import functions

            F = functions
        return F

    def conv(e: Expr) -> Any:
        r = memo.get(e)
        if r is not None:
            return r
        k = e.kind
        if k == "Integer":
            r = sympy.Integer(e.int_value)
        elif k == "Symbol":
            r = _symbol_to_sympy(e)
        elif k == "Add":
            r = sympy.Add(*[conv(a) for a in e.args])
        elif k == "Mul":
            r = sympy.Mul(*[conv(a) for a in e.args])
        elif k == "Pow":
            base, exp = e.args
            r = sympy.Pow(conv(base), sympy.Integer(exp.int_value))
        else:
            fns = funcs()
            cls = {
                "FloorDiv": fns.FloorDiv,
                "CleanDiv": fns.CleanDiv,
                "ModularIndexing": fns.ModularIndexing,
                "Mod": fns.PythonMod,
                "Min": fns.Min,
                "Max": fns.Max,
            }[k]
            r = cls(*[conv(a) for a in e.args], evaluate=evaluate)
        memo[e] = r
        return r

    if isinstance(expr, int):
        return sympy.Integer(expr)
    return conv(expr)
