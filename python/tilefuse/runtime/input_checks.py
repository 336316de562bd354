"""The entry check of a compiled graph: its tensor inputs in the layouts its kernels index.

A compiled graph's kernels index each tensor input with the strides it was compiled for. An input
that arrives with other strides on a dim the kernels index (a transposed tangent, a view) is
copied into the compiled layout (``ensure_strides``), and a lazily negated or conjugated view
(``z.conj().imag``) is resolved first, since kernels read memory as it is. Inductor guards on
strides instead (a mismatch recompiles); here the copy keeps one graph correct for any input.

Checking every input in Python costs about 0.35 µs a tensor (``is_neg``, ``is_conj``,
``stride``): 18 µs a call for a 50-parameter graph, at batch 1 a visible share of a step. So
after a call whose inputs all passed unchanged, the check of the static-layout inputs becomes one
C++ call: a ``TensorGuards`` of Dynamo's guard library (``torch._C._dynamo.guards``), built from
those inputs, which compares each input's dispatch keys (the negative and conjugate bits among
them), dtype, device, requires_grad, sizes and strides with theirs (about 0.1 µs a tensor). When
it says no (another requires_grad, a transposed input), the call takes the per-input path, and
the guard is dropped after ``_GUARD_MISSES`` such calls, so a graph whose inputs keep changing
pays the per-input path only.
"""

from __future__ import annotations

from typing import Any

from .helpers import ensure_strides

# calls the fast guard may refuse before it is dropped for good
_GUARD_MISSES = 2


def _build_guard(tensors: list) -> Any:
    """A ``TensorGuards`` of ``tensors`` (static sizes and strides), or None where torch lacks it
    or refuses them (a tensor subclass)."""
    try:
        from torch._C._dynamo.guards import TensorGuards

        return TensorGuards(
            *tensors,
            dynamic_dims_sizes=[list(t.size()) for t in tensors],
            dynamic_dims_strides=[list(t.stride()) for t in tensors],
        )
    except Exception:  # noqa: BLE001 - an optimization only: the per-input path stays
        return None


class InputChecks:
    """The entry check of one compiled graph.

    ``input_layouts``: per graph input, ``(sizes, strides)`` (ints, or ``tilefuse.symbolic.Expr``
    of size symbols) for a tensor, None otherwise. ``symbol_sources``: size symbol name ->
    ``(argument position, "size" | "stride" | "int", dim)``, where a call's value of each symbol
    is read. ``apply(args)`` replaces, in the list ``args``, each tensor input whose layout
    differs from the compiled one (on a dim of more than one element) by a copy in that layout."""

    def __init__(self, input_layouts: list, symbol_sources: dict | None = None):
        self.symbol_sources = symbol_sources or {}
        static, symbolic = [], []
        for i, lay in enumerate(input_layouts):
            if lay is None:
                continue
            if all(isinstance(v, int) for v in (*lay[0], *lay[1])):
                static.append((i, tuple(lay[0]), tuple(lay[1])))
            else:
                symbolic.append((i, lay[0], lay[1]))
        self.static = static  # (position, sizes, strides) with no symbol: the same every call
        self.symbolic = symbolic  # (position, sizes, strides) holding a symbol
        self._positions = [i for i, _, _ in static]
        self._guard: Any = None  # TensorGuards of the static inputs, once a call passed unchanged
        self._misses = 0

    def apply(self, args: list) -> None:
        """Bring ``args`` (the call's inputs, replaced in place) to the compiled layouts."""
        if self._guard is not None:
            if self._guard.check(*[args[i] for i in self._positions]):
                if self.symbolic:
                    _fix(args, self._evaluated(args))
                return
            self._misses += 1
            if self._misses >= _GUARD_MISSES:
                self._guard = None
        changed = _fix(args, self.static)
        if self.symbolic:
            _fix(args, self._evaluated(args))
        if not changed and self._misses < _GUARD_MISSES and self._guard is None and self.static:
            self._guard = _build_guard([args[i] for i in self._positions])

    def _evaluated(self, args: list) -> list:
        """The symbolic-layout inputs' (position, sizes, strides) at this call's sizes."""
        vals = {}
        for name, (pos, what, d) in self.symbol_sources.items():
            a = args[pos]
            vals[name] = int(a) if what == "int" else (a.size(d) if what == "size" else a.stride(d))

        def ev(xs):
            return tuple(x if isinstance(x, int) else x.evaluate(vals) for x in xs)

        return [(i, ev(size), ev(stride)) for i, size, stride in self.symbolic]


def _fix(args: list, checks: list) -> bool:
    """Copy each input of ``checks`` whose strides differ (or that is a lazily negated or
    conjugated view) into its compiled layout; whether any was replaced."""
    changed = False
    for i, size, stride in checks:
        a = args[i]
        if a.is_neg() or a.is_conj():
            a = args[i] = a.resolve_neg().resolve_conj()
            changed = True
        if a.stride() != stride and a.numel() > 1:
            args[i] = ensure_strides(a, size, stride)
            changed = True
    return changed
