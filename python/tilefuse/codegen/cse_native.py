"""Kernel CSE scopes backed by the native core's CSE table (``rust/src/cse.rs``).

The Triton codegen emits each value once per scope: ``cse(text)`` looks the expression text up in
the current scope, reuses the variable (``tmp<N>``) cached for it, or emits ``tmp<N> = text`` and
caches it. A kernel has one root scope; each reduction loop opens a child scope whose lookups fall
through to the root while its entries stay local (a value computed inside the loop is not visible
after it closes).

:class:`Scope` is that scope, held by the native text-keyed table (``TextCseTable``, one
``scoped_copy`` per child), with the interface of the codegen's dict-chain scope:

* ``Scope()`` — a root scope; ``Scope(parent)`` — a child of ``parent``;
* ``scope.get(key) -> str | None`` — the variable cached for ``key`` (the expression text) in the
  scope or an enclosing one;
* ``scope.put(key, var)`` — cache ``key -> var`` in this scope (``var`` is the caller's variable
  name; the table never names variables itself here);
* ``scope.cache[key] = var`` — the same write through a view of the scope's own entries (reads
  and ``in`` on ``cache`` see this scope only, like the dict it replaces);
* ``scope.parent`` — the enclosing scope or None; ``key in scope`` and ``len(scope)`` count the
  entries visible from the scope.

Keys and names must be ``str`` (``TypeError`` otherwise). ``get`` returns the very string object
passed to ``put``, so a hit allocates nothing. The cost per call is one native method call
(``benches/cse_scope.py`` replays a real compile's lookups against both implementations).

Switching the codegen over is one line where it defines its scope class
(``from .cse_native import Scope as _Scope``); ``cse()`` then calls ``scope.put(expr, v)`` or keeps
``scope.cache[expr] = v``.
"""

from __future__ import annotations

from tilefuse._native import CseScope as Scope

__all__ = ["Scope"]
