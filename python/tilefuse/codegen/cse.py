"""Common-subexpression table of one generated kernel.

A kernel's values are named ``tmp<N>`` and defined once per scope: an expression emitted a second
time in the same scope, or in an enclosing one, reuses the first definition's name. Scopes nest in
two levels: the kernel's own, and one per reduction loop (a value defined inside a loop body is
not visible after the loop closes, a value defined before the loop is visible inside it).

Keys are the expressions' Triton source text. This class is the one interface the kernel emitter
uses for CSE (``TritonKernelCodegen.cse`` and its load sites), so a structural table (the native
core's ``rust/src/cse.rs``) can replace the text keys here without touching the emitter.
"""

from __future__ import annotations


class _Scope:
    """One level of the table: its own entries and the scope it is nested in."""

    def __init__(self, parent: _Scope | None = None):
        self.cache: dict[str, str] = {}
        self.parent = parent

    def get(self, key: str) -> str | None:
        s: _Scope | None = self
        while s is not None:
            if key in s.cache:
                return s.cache[key]
            s = s.parent
        return None


class KernelCSE:
    """Expression -> variable table of a kernel, with one nested scope per open reduction loop.

    ``lookup`` answers the variable an equal expression was bound to in the current scope or the
    kernel's; ``bind`` records a new definition in the current scope; ``enter_loop`` and
    ``leave_loop`` open and drop a loop body's scope (its definitions are forgotten on leaving)."""

    def __init__(self) -> None:
        self._kernel = _Scope()
        self._current = self._kernel

    def lookup(self, expr: str) -> str | None:
        """The variable ``expr`` is bound to in the current scope or an enclosing one, else None."""
        return self._current.get(expr)

    def bind(self, expr: str, var: str) -> None:
        """Bind ``expr`` to ``var`` in the current scope."""
        self._current.cache[expr] = var

    def enter_loop(self) -> None:
        """Open a loop body's scope, nested in the kernel's."""
        self._current = _Scope(self._kernel)

    def leave_loop(self) -> None:
        """Drop the loop body's scope: back to the kernel's."""
        self._current = self._kernel
