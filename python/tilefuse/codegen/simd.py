"""Tiling choice for pointwise kernels (after Inductor's simd.py candidate tilings).

A pointwise kernel iterates over one flat index ``xindex`` in ``[0, numel)``. When one of its
accesses is contiguous along an *outer* dimension of the iteration space — ``x + y.t()``, an
NCHW → NHWC copy — every program of a 1-D kernel reads that operand with a stride, one element per
memory transaction. A 2-D tiling splits the iteration space at a dimension boundary into
``ynumel × xnumel`` (``numel = ynumel · xnumel``, ``y`` the outer part): each program covers a
``[YBLOCK, XBLOCK]`` tile, so accesses contiguous along ``x`` and accesses contiguous along ``y``
are both coalesced (Triton converts between the two layouts through shared memory).

How the split is chosen (:func:`select_tiling`):

* **Candidates** — for every node of the kernel, every boundary between two of its (non-1) loop
  dimensions: ``xnumel`` = product of the sizes inside the boundary. This is Inductor's rule of
  taking candidate tilings from the nodes' own dimensions.
* **Node variables on the tile** — each node's loop variables are expressed over ``yindex`` and
  ``xindex`` by the native core's ``split_iteration_ranges([ynumel, xnumel], [sizes])`` (Inductor's
  ``SIMDKernel.split_and_set_ranges``); a node whose sizes do not split at the boundary uses the
  digits of ``yindex·xnumel + xindex`` (correct, only less simplified).
* **Score** — every load and store index is mapped onto the tile and its strides along ``xindex``
  and ``yindex`` are taken with ``stride_vars``. An access is *coalesced* when its stride along
  ``xindex`` is 1, or its stride along ``xindex`` is not 1 but along ``yindex`` is 1. The score of
  a candidate is the number of coalesced accesses minus the number coalesced by the flat 1-D
  kernel (stride 1 along the flat index); broadcast accesses (stride 0 everywhere) count for
  neither. The best positive score wins; ties go to the most balanced split. No positive score →
  no tiling (a 1-D kernel is as good and has fewer masks).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import sizevars as SV
from .. import symbolic as S
from ..ir.nodes import prod
from ..scheduler import XINDEX, KernelGroup, SchedulerNode, digits

YINDEX = S.sym("yindex")


@dataclass(frozen=True)
class Tiling:
    """A 2-D split of a pointwise kernel's iteration space: ``numel = ynumel · xnumel``, ``y`` the
    outer (slower-varying) part of the flat index."""

    ynumel: int  # or an Expr (symbolic sizes)
    xnumel: int


def tiled_var_map(node: SchedulerNode, tiling: Tiling) -> dict:
    """Each loop variable of pointwise ``node`` as an expression over ``yindex`` (range ynumel) and
    ``xindex`` (range xnumel), simplified. Uses ``split_iteration_ranges`` when the node's sizes
    split at the tile boundary, else the row-major digits of ``yindex·xnumel + xindex``."""
    iv = node.body.iter_vars
    ranges = {YINDEX: tiling.ynumel, XINDEX: tiling.xnumel}
    try:
        split = S.split_iteration_ranges([tiling.ynumel, tiling.xnumel], [node.sizes])
    except S.CantSplit:
        flat = YINDEX * tiling.xnumel + XINDEX
        exprs = digits(flat, node.sizes)
    else:
        sub_vars: list = []
        for gvar, sizes in zip((YINDEX, XINDEX), split.new_ranges):
            sub_vars.extend(digits(gvar, [SV.static_or_expr(s) for s in sizes]))
        vs = [S.sym(f"v{k}") for k in range(split.num_vars)]
        sub = dict(zip(vs, sub_vars))
        exprs = [e.subs(sub) if sub else e for e in split.getters[0]]
    return {v: S.simplify_with_ranges(e, ranges) for v, e in zip(iv, exprs)}


def _accesses(node: SchedulerNode):
    return list(node.body.loads()) + list(node.body.stores())


def _stride1(expr, var) -> bool:
    return S.stride_vars(expr, [var])[0] == 1


def _candidates(group: KernelGroup) -> list:
    """Inner extents ``xnumel`` at the nodes' dimension boundaries (symbolic sizes compared by
    their hints: the choice is a heuristic, any split of the flat range is correct)."""
    sv = SV.current()
    out: dict = {}
    numel = sv.hint(group.numel)
    for n in group.nodes:
        sizes = list(n.sizes)
        for k in range(1, len(sizes)):
            if sizes[k - 1] == 1:
                continue
            x = SV.static_or_expr(prod(sizes[k:]))
            if 1 < sv.hint(x) < numel:
                out.setdefault(x, None)
    return sorted(out, key=lambda x: (sv.hint(x), str(x)))


def select_tiling(group: KernelGroup) -> Tiling | None:
    """The 2-D tiling for a pointwise ``group`` (rnumel 1), or None to keep the flat 1-D kernel;
    see the module docstring for the rule. Deterministic for a given group."""
    if group.rnumel != 1 or not group.nodes:
        return None
    # the flat kernel's coalesced accesses, from the scheduler's own index maps
    base = 0
    for n in group.nodes:
        _, _, loads, stores = group.maps[n]
        base += sum(1 for _, e in loads + stores if _stride1(e, XINDEX))
    sv = SV.current()
    best: tuple[tuple[int, int], Tiling] | None = None
    for x in _candidates(group):
        y = (
            group.numel // x
            if isinstance(group.numel, int) and isinstance(x, int)
            else SV.static_or_expr(S.CleanDiv(group.numel, x))
        )
        tiling = Tiling(y, x)
        ranges = {YINDEX: tiling.ynumel, XINDEX: tiling.xnumel}
        score = 0
        for n in group.nodes:
            m = tiled_var_map(n, tiling)
            for _, e in _accesses(n):
                idx = S.simplify_with_ranges(e.subs(m) if m else e, ranges)
                sx, sy = S.stride_vars(idx, [XINDEX, YINDEX])
                if sx == 1 or sy == 1:
                    score += 1
        score -= base
        if score <= 0:
            continue
        key = (score, min(sv.hint(tiling.xnumel), sv.hint(tiling.ynumel)))
        if best is None or key > best[0]:
            best = (key, tiling)
    return best[1] if best else None
