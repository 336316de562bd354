"""Type stubs for tilefuse._native, the Rust symbolic-indexing core (see tilefuse.symbolic)."""

from typing import (
    Any,
    Callable,
    Iterable,
    Iterator,
    Literal,
    Mapping,
    NoReturn,
    Sequence,
    SupportsIndex,
    TypeAlias,
    final,
)

__version__: str
__all__ = [
    "Add",
    "CantSplit",
    "CeilDiv",
    "CleanDiv",
    "CseScope",
    "Expr",
    "FloorDiv",
    "Integer",
    "Max",
    "Min",
    "Mod",
    "ModularIndexing",
    "Mul",
    "Pow",
    "SplitResult",
    "__version__",
    "_from_tree",
    "bound",
    "offset_var",
    "pexpr",
    "simplify_with_ranges",
    "split_iteration_ranges",
    "statically_known_equals",
    "statically_known_leq",
    "statically_known_lt",
    "statically_known_multiple_of",
    "stride_vars",
    "sym",
    "texpr",
]

_IntLike = int | SupportsIndex
_ExprLike: TypeAlias = "Expr | int"
_SymbolKind = Literal["size", "precomputed", "index", "indirect", "unbacked", "other"]
_NodeKind = Literal[
    "Integer", "Symbol", "Add", "Mul", "Pow", "FloorDiv", "CleanDiv", "ModularIndexing", "Mod", "Min", "Max"
]

class CantSplit(Exception):
    """split_iteration_ranges could not map a node's sizes onto the kernel's range groups."""

@final
class Expr:
    """Immutable, interned integer index expression with floor semantics.

    Operators: ``+ - * // % **`` (natural exponent) and unary ``-``, each also with a Python int
    on either side. ``==`` is structural (an integer expression equals the int of the same value),
    ``hash`` is deterministic across processes (and ``hash(Integer(v)) == hash(v)``).
    """

    def __add__(self, other: _ExprLike, /) -> Expr: ...
    def __radd__(self, other: _ExprLike, /) -> Expr: ...
    def __sub__(self, other: _ExprLike, /) -> Expr: ...
    def __rsub__(self, other: _ExprLike, /) -> Expr: ...
    def __mul__(self, other: _ExprLike, /) -> Expr: ...
    def __rmul__(self, other: _ExprLike, /) -> Expr: ...
    def __floordiv__(self, other: _ExprLike, /) -> Expr: ...
    def __rfloordiv__(self, other: _ExprLike, /) -> Expr: ...
    def __mod__(self, other: _ExprLike, /) -> Expr: ...
    def __rmod__(self, other: _ExprLike, /) -> Expr: ...
    def __pow__(self, exponent: int, modulo: None = None, /) -> Expr: ...
    def __rpow__(self, base: object, modulo: None = None, /) -> Any:
        """NotImplemented: an expression is never an exponent."""
    def __truediv__(self, other: object, /) -> NoReturn:
        """Always raises TypeError: index expressions have no true division."""
    def __rtruediv__(self, other: object, /) -> NoReturn: ...
    def __neg__(self) -> Expr: ...
    def __pos__(self) -> Expr: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __int__(self) -> int:
        """The value of an integer expression; TypeError for a symbolic one."""
    def __index__(self) -> int: ...
    def __bool__(self) -> bool:
        """As sympy: an integer is true when non-zero; a symbolic expression is always true."""
    def __copy__(self) -> Expr: ...
    def __deepcopy__(self, memo: Any) -> Expr: ...
    def __reduce__(self) -> tuple[Callable[[Any], Expr], tuple[Any]]: ...
    @property
    def kind(self) -> _NodeKind:
        """sympy's view: "Mul" also for coefficient*term, "Pow" for one factor with exponent > 1."""
    @property
    def args(self) -> tuple[Expr, ...]:
        """Each strictly smaller than the node: Add (constant?, term, ...), Mul (coefficient?,
        factor, ...), Pow (base, exponent), functions: operands, atoms: ()."""
    @property
    def func(self) -> Callable[..., Expr]:
        """Constructor of this node kind: ``e.func(*e.args) == e`` for every non-atom."""
    @property
    def constant(self) -> int:
        """Constant term of a sum (value of an integer; 0 otherwise)."""
    @property
    def terms(self) -> tuple[tuple[Expr, int], ...]:
        """``((term, coeff), ...)`` with ``self == constant + sum(coeff * term)``."""
    @property
    def factors(self) -> tuple[tuple[Expr, int], ...]:
        """``((factor, exponent), ...)`` of a product term (empty for integers and sums)."""
    @property
    def is_integer(self) -> bool:
        """True for an integer literal (not sympy's meaning: every Expr is integer-valued)."""
    @property
    def is_number(self) -> bool: ...
    @property
    def is_symbol(self) -> bool: ...
    @property
    def name(self) -> str | None: ...
    @property
    def int_value(self) -> int | None: ...
    @property
    def symbol_kind(self) -> _SymbolKind | None: ...
    @property
    def is_nonnegative(self) -> bool:
        """Provably >= 0 from the symbols' assumptions alone."""
    @property
    def is_positive(self) -> bool:
        """Provably >= 1 from the symbols' assumptions alone."""
    @property
    def assumed_range(self) -> tuple[int | None, int | None]:
        """(lo, hi) the symbols' assumptions allow; None for an unbounded end."""
    @property
    def free_symbols(self) -> frozenset[Expr]: ...
    def sorted_free_symbols(self) -> tuple[Expr, ...]:
        """Free symbols in the deterministic structural order (x2 before x10)."""
    def has(self, sub: _ExprLike) -> bool: ...
    def evaluate(self, mapping: Mapping[Expr | str, _IntLike]) -> int:
        """Value at an integer point (floor semantics). ValueError names a missing symbol;
        ZeroDivisionError; OverflowError when a value leaves int64."""
    def subs(self, mapping: Mapping[Expr | str, _ExprLike]) -> Expr:
        """Simultaneous substitution (keys: sub-expressions or symbol names); rules re-apply."""

def sym(
    name: str,
    *,
    nonnegative: bool | None = None,
    positive: bool | None = None,
    lower: int | None = None,
    upper: int | None = None,
    kind: _SymbolKind | None = None,
) -> Expr: ...
def Integer(value: _IntLike) -> Expr: ...
def FloorDiv(base: _ExprLike, divisor: _ExprLike) -> Expr: ...
def ModularIndexing(base: _ExprLike, divisor: _ExprLike, modulus: _ExprLike) -> Expr: ...
def CleanDiv(base: _ExprLike, divisor: _ExprLike) -> Expr: ...
def CeilDiv(base: _ExprLike, divisor: _ExprLike) -> Expr: ...
def Mod(p: _ExprLike, q: _ExprLike) -> Expr: ...
def Min(*args: _ExprLike) -> Expr: ...
def Max(*args: _ExprLike) -> Expr: ...
def Add(*args: _ExprLike) -> Expr: ...
def Mul(*args: _ExprLike) -> Expr: ...
def Pow(base: _ExprLike, exponent: int) -> Expr: ...
def pexpr(expr: _ExprLike) -> str: ...
def texpr(expr: _ExprLike, index_dtype: str = "tl.int64") -> str: ...
def _from_tree(tree: Any) -> Expr: ...

_Ranges = Mapping[Expr, _ExprLike] | Iterable[tuple[Expr, _ExprLike]] | None

def bound(expr: _ExprLike, ranges: _Ranges = None) -> tuple[int | None, int | None]: ...
def simplify_with_ranges(expr: _ExprLike, ranges: _Ranges = None) -> Expr: ...
def statically_known_equals(a: _ExprLike, b: _ExprLike, ranges: _Ranges = None) -> bool: ...
def statically_known_leq(a: _ExprLike, b: _ExprLike, ranges: _Ranges = None) -> bool: ...
def statically_known_lt(a: _ExprLike, b: _ExprLike, ranges: _Ranges = None) -> bool: ...
def statically_known_multiple_of(a: _ExprLike, b: _ExprLike) -> bool: ...
def stride_vars(expr: _ExprLike, vars: Sequence[_ExprLike]) -> list[Expr]: ...
def offset_var(expr: _ExprLike, vars: Sequence[_ExprLike]) -> Expr: ...
def split_iteration_ranges(groups: Sequence[_ExprLike], lengths: Sequence[Sequence[_ExprLike]]) -> SplitResult:
    """Raises CantSplit when the node's sizes cannot be mapped onto the groups."""

@final
class SplitResult:
    """Result of split_iteration_ranges; unpacks as (new_ranges, getters)."""

    @property
    def new_ranges(self) -> list[list[Expr]]: ...
    @property
    def getters(self) -> list[list[Expr]]:
        """Per node length group, each node variable as an Expr over v0, v1, ..."""
    @property
    def num_vars(self) -> int: ...
    def apply(self, flat_vars: Sequence[_ExprLike]) -> list[list[Expr]]: ...
    def __iter__(self) -> Iterator[list[list[Expr]]]: ...

@final
class CseScope:
    """A kernel's CSE scope: expression text -> variable name, backed by the native text-keyed
    table. ``CseScope(parent)`` is a child whose ``get`` falls through to ``parent`` while its
    writes stay local (one child per reduction loop). The scope is its own ``cache``: item access,
    ``in`` and ``len`` see the scope's own entries only."""

    def __new__(cls, parent: CseScope | None = None) -> CseScope: ...
    def get(self, key: str) -> str | None:
        """The variable cached for ``key`` here or in an enclosing scope, else None."""
    def put(self, key: str, var: str) -> None:
        """Cache ``key -> var`` in this scope."""
    @property
    def parent(self) -> CseScope | None: ...
    @property
    def cache(self) -> CseScope:
        """The scope itself (``cache[key] = var`` is ``put``)."""
    def __getitem__(self, key: str, /) -> str: ...
    def __setitem__(self, key: str, value: str, /) -> None: ...
    def __delitem__(self, key: str, /) -> NoReturn:
        """Always raises NotImplementedError: CSE entries are never removed."""
    def __contains__(self, key: str, /) -> bool: ...
    def __len__(self) -> int: ...
