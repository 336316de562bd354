"""Common-subexpression table of one generated kernel, held by the native core.

A kernel's values are named ``tmp<N>`` and defined once per scope: an expression emitted a second
time in the same scope, or in an enclosing one, reuses the first definition's name. Scopes nest in
two levels: the kernel's own, and one per reduction loop (a value defined inside a loop body is
not visible after the loop closes, a value defined before the loop is visible inside it).

Keys are the expressions' Triton source text. Each scope is a native ``CseScope``
(``rust/src/cse.rs``, the text-keyed table; a loop body's scope is a scoped copy of the kernel's
whose lookups fall through to it): a hit returns the very ``str`` that was bound, so a lookup
allocates nothing. :class:`KernelCSE` is the one interface the kernel emitter uses for CSE
(``TritonKernelCodegen.cse`` and its load sites). :class:`DictScope` is the same scope in plain
Python, the reference the native one is tested against (``tests/test_cse_native.py``) and timed
against (``benches/cse_scope.py``).
"""

from __future__ import annotations

from tilefuse._native import CseScope as Scope

__all__ = ["DictScope", "KernelCSE", "Scope"]


class DictScope:
    """One level of a dict-chain table: its own entries (``cache``) and the scope it is nested in
    (``parent``); ``get`` walks outwards. The interface of :class:`Scope` (``Scope()``,
    ``Scope(parent)``, ``get``, ``put``, ``cache[key] = var``)."""

    def __init__(self, parent: DictScope | None = None):
        self.cache: dict[str, str] = {}
        self.parent = parent

    def get(self, key: str) -> str | None:
        """The variable bound to ``key`` here or in an enclosing scope, else None."""
        s: DictScope | None = self
        while s is not None:
            if key in s.cache:
                return s.cache[key]
            s = s.parent
        return None

    def put(self, key: str, var: str) -> None:
        """Bind ``key`` to ``var`` in this scope."""
        self.cache[key] = var


class KernelCSE:
    """Expression -> variable table of a kernel, with one nested scope per open reduction loop.

    ``lookup`` answers the variable an equal expression was bound to in the current scope or the
    kernel's; ``bind`` records a new definition in the current scope; ``enter_loop`` and
    ``leave_loop`` open and drop a loop body's scope (its definitions are forgotten on leaving).
    ``scope_class`` (default the native :class:`Scope`) builds the scopes."""

    def __init__(self, scope_class: type | None = None) -> None:
        self._scope_class = Scope if scope_class is None else scope_class
        self._kernel = self._scope_class()
        self._current = self._kernel

    def lookup(self, expr: str) -> str | None:
        """The variable ``expr`` is bound to in the current scope or an enclosing one, else None."""
        return self._current.get(expr)

    def bind(self, expr: str, var: str) -> None:
        """Bind ``expr`` to ``var`` in the current scope."""
        self._current.put(expr, var)

    def enter_loop(self) -> None:
        """Open a loop body's scope, nested in the kernel's."""
        self._current = self._scope_class(self._kernel)

    def leave_loop(self) -> None:
        """Drop the loop body's scope: back to the kernel's."""
        self._current = self._kernel
