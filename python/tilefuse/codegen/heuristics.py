"""Launch heuristics of generated kernels: which reduction form, which launch configs, which grid
order, which cache eviction hints.

Every function here decides from plain facts about a kernel (``KernelFacts``, ``LoadSite``) and
returns plain values, so a decision can be read and tested without generating a kernel. The
tunable numbers are in ``tilefuse.config`` (section ``codegen``), read at each call.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .. import config
from ..scheduler import KernelGroup, node_reduction_hint
from .simd import Tiling


def next_pow2(n: int) -> int:
    """Smallest power of 2 >= n (1 for n <= 1): Triton block sizes."""
    return 1 << max(0, (int(n) - 1).bit_length())


_ALU_OP_LINE = re.compile(r"^\s*tmp\d+ = (?!tl\.load\(|tl\.full\(|tmp\d+\.to\([^()]*\)$)")


def alu_ops(body: list[str]) -> int:
    """Arithmetic ops per element of a kernel body: its ``tmpN = ...`` lines other than loads,
    constants and plain casts."""
    return sum(1 for ln in body if _ALU_OP_LINE.match(ln))


# ---------------------------------------------------------------------------------- reduction form
def reduction_hint(group: KernelGroup) -> str:
    """Inductor's reduction hint of a kernel from its reduction nodes (``LoopBody.reduction_hint``):
    ``"inner"`` when any node reduces along contiguous memory, else ``"outer"`` when any reduces
    across it, else ``"default"``."""
    hints = [node_reduction_hint(n) for n in group.nodes if n.is_reduction()]
    return "inner" if "inner" in hints else ("outer" if "outer" in hints else "default")


def is_persistent(reduction: bool, rnumel_max: int | None, hint: str, has_scan: bool) -> bool:
    """Whether a reduction kernel keeps the whole row in one block: its row length (the proven
    upper bound of a symbolic one; None: unbounded) is at most
    ``config.persistent_reduction_threshold``. An outer reduction reads each row once per column
    block, so it stays persistent only for rows up to ``config.OUTER_PERSISTENT_MAX`` (then many
    columns share a program); a scan's rows cannot be split, so scans ignore that limit."""
    return bool(
        reduction
        and rnumel_max is not None
        and (
            rnumel_max <= config.persistent_reduction_threshold
            and (has_scan or hint != "outer" or rnumel_max <= config.OUTER_PERSISTENT_MAX)
        )
    )


# ---------------------------------------------------------------------------------- launch configs
@dataclass
class KernelFacts:
    """What the launch heuristics read about one kernel.

    ``numel`` / ``rnumel``: output elements and row length (ints, or Exprs for symbolic sizes,
    sized by their hints through ``sv``); ``rnumel_max``: the row length's upper bound (persistent
    blocks cover it); ``reduction``, ``persistent``, ``hint`` (inner / outer / default),
    ``has_scan`` and ``reduce_only`` (only per-row results stored) describe the reduction form;
    ``tiling`` / ``dyn_tile``: a 2-D tile and whether its extents are symbolic; ``interpret``:
    the kernel runs under Triton's interpreter; ``alu_ops``: arithmetic ops per element of its
    body; ``sv``: the graph's SizeVars."""

    numel: Any
    rnumel: Any
    rnumel_max: Any
    reduction: bool
    persistent: bool
    hint: str
    has_scan: bool
    reduce_only: bool
    tiling: Tiling | None
    dyn_tile: bool
    interpret: bool
    alu_ops: int
    sv: Any


def tile_grid_order(k: KernelFacts) -> tuple[int, int]:
    """(program axis of y, program axis of x) for a tiled kernel. Static extents: x (the axis the
    output is contiguous along) on axis 0, so consecutive programs write adjacent output tiles
    (Inductor's order, measurably faster than y first), unless y's programs would not fit axis 1
    (65535). Symbolic extents: the larger extent on axis 0, whose grid limit is 2^31 - 1 (the
    smaller one is guarded to fit axis 1)."""
    t = k.tiling
    if not k.dyn_tile and not k.interpret:
        yb = min(min(c[0] for c in config.TILE_CONFIGS), next_pow2(k.sv.hint(t.ynumel)))
        if -(-k.sv.hint(t.ynumel) // yb) <= 65535:
            return (1, 0)
    return (0, 1) if k.sv.hint(t.ynumel) >= k.sv.hint(t.xnumel) else (1, 0)


def configs(k: KernelFacts) -> list[dict[str, int]]:
    """Candidate launch configs, the heuristic's choice first (block constexprs + num_warps).
    Under the interpreter one config with large blocks (fewer, bigger programs run faster on
    NumPy). On the GPU: a 2-D tile ``config.TILE_CONFIGS[0]`` (all of them with
    ``config.autotune_pointwise``: Inductor gives a square tile hint one config unless
    ``max_autotune``), other kernels ``gpu_configs``; a tiny kernel (``is_tiny``) its first."""
    if k.tiling is not None:
        t = k.tiling
        yp, xp = next_pow2(k.sv.hint(t.ynumel)), next_pow2(k.sv.hint(t.xnumel))
        if k.interpret:
            xb = min(xp, 1024)
            return [{"YBLOCK": max(1, min(yp, 4096 // xb)), "XBLOCK": xb}]
        out = []
        for yb, xb, w in config.TILE_CONFIGS:
            c = {"YBLOCK": min(yb, yp), "XBLOCK": min(xb, xp), "num_warps": w}
            if c not in out:
                out.append(c)
        # one tile shape unless autotune_pointwise: a tiled kernel is pointwise, bound by memory
        # whatever its shape
        return out if config.autotune_pointwise and not is_tiny(k) else out[:1]
    if not k.interpret:
        out = gpu_configs(k)
        return out[:1] if is_tiny(k) else out
    xblock, rblock, _ = block_sizes(k)
    cfg = {"XBLOCK": xblock}
    if k.reduction:
        cfg["RBLOCK"] = rblock
    return [cfg]


def is_tiny(k: KernelFacts) -> bool:
    """Whether the kernel is too small for its launch config to matter, so it launches with the
    heuristic's first config instead of being autotuned: every extent static (a symbolic one may
    be large at a later call) and at most ``config.tiny_kernel_numel`` elements in its iteration
    space (outputs x reduction length, or the tile's y x x). 65536 bf16 elements are 128 KiB, a
    small fraction of a microsecond of an H100/H200's copy bandwidth against a launch of 2-4 µs;
    each skipped candidate is one compile job fewer on the first call and one timing fewer.
    Inductor likewise gives most of its reductions a single config unless ``max_autotune``."""
    limit = config.tiny_kernel_numel
    if limit <= 0:
        return False
    if k.tiling is not None:
        extents = (k.tiling.ynumel, k.tiling.xnumel)
    else:
        extents = (k.numel, k.rnumel) if k.reduction else (k.numel,)
    if not all(isinstance(e, int) for e in extents):
        return False
    return math.prod(extents) <= limit


def block_sizes(k: KernelFacts) -> tuple[int, int, int]:
    """(XBLOCK, RBLOCK, num_warps) of the interpreter's single config: large blocks, since the
    interpreter's cost is per program and per loop iteration."""
    numel = k.sv.hint(k.numel)
    if not k.reduction:
        return min(next_pow2(numel), 4096), 1, 4
    # looped: chunks of 2048, or the whole row when its size hint is shorter (a symbolic row of 3
    # elements would otherwise run 4 rows per program in 2048-wide blocks)
    rb = next_pow2(k.rnumel_max) if k.persistent else min(2048, next_pow2(k.sv.hint(k.rnumel)))
    return max(1, min(next_pow2(numel), 8192 // rb)), rb, 4


def gpu_configs(k: KernelFacts) -> list[dict[str, int]]:
    """Candidate GPU configs, the heuristic's choice first (Inductor's pointwise / reduction config
    heuristics by hint):

    * pointwise: 1024 elements per program, 4 warps (2048 for a kernel of at least
      ``config.ALU_HEAVY_POINTWISE_OPS`` arithmetic ops per element); with
      ``config.autotune_pointwise`` also 512 and 2048 (Inductor likewise gives a 1-D pointwise
      kernel one config unless ``max_autotune_pointwise``): each extra config is one more
      compile, and one more timing, on the first call, and the first config is the fastest or
      within a few percent for the pointwise kernels measured (docs/benchmarks.md);
    * persistent inner: RBLOCK = next_pow2(rnumel), XBLOCK filling ~4096 elements (≥ 1), warps
      growing with the block (2048 elements per 4 warps, 2–16); a kernel that stores only
      per-row results (``reduce_only``) of rows of 2048 or more tries one row at one warp per
      2048 elements (at least 2), and at 4 warps, first;
    * persistent outer (rnumel ≤ ``config.OUTER_PERSISTENT_MAX``): up to 128 columns per program;
    * looped inner: XBLOCK 1, RBLOCK 2048, 4 warps (plus 1024-element chunks — 4096 for rows of
      ``config.LONG_ROW_MIN`` or more in a kernel that only reduces —, two rows, and 8 warps);
    * looped outer: XBLOCK 64, RBLOCK 8, 8 warps (wide column blocks, short row chunks); a looped
      scan across rows 8 columns by 128 rows at 4 warps first (narrow column blocks: its rows
      cannot be split between programs).

    Block sizes never exceed the next power of two of their extent."""
    # symbolic extents: sized for the example inputs (hints), persistent rows for their bound
    xp = next_pow2(k.sv.hint(k.numel))
    rp = next_pow2(k.rnumel_max if k.persistent else k.sv.hint(k.rnumel))
    warps = lambda n: max(2, min(16, n // 512))  # noqa: E731  - 512 elements per warp
    out: list[dict[str, int]] = []

    def add(xb, rb=None, w=None):
        c = {"XBLOCK": max(1, min(xb, xp))}
        if rb is not None:
            c["RBLOCK"] = max(1, min(rb, rp))
        c["num_warps"] = w if w is not None else warps(c["XBLOCK"] * c.get("RBLOCK", 1))
        if c not in out:
            out.append(c)

    if not k.reduction:
        add(2048 if k.alu_ops >= config.ALU_HEAVY_POINTWISE_OPS else 1024, w=4)
        if config.autotune_pointwise:
            add(1024, w=4)
            add(512, w=4)
            add(2048, w=8)
    elif k.persistent and k.hint == "outer":
        rb = rp
        add(max(1, 4096 // rb), rb, 8)
        add(max(1, 2048 // rb), rb, 4)
        add(64, rb, 4)
    elif k.persistent:
        rb = rp
        if rb >= 2048 and k.reduce_only:
            # only per-row results: a row per program at one warp per 2048 elements (at least 2)
            # first, then 4 warps (fewer warps keep a long row's reductions near the copy
            # bandwidth; more warps add cross-warp reduction steps)
            add(1, rb, max(2, rb // 2048))
            add(1, rb, 4)
        for budget in (4096, 2048, 8192):
            add(max(1, budget // rb), rb)
        add(1, rb, warps(rb) * 2 if rb >= 1024 else warps(rb))
    elif k.has_scan and k.hint == "outer":
        # a looped scan across rows: its row cannot be split between programs, so every program
        # walks the whole column block down all rows and the grid has only columns / XBLOCK
        # programs. Narrow column blocks (4-16 columns, 16-64 bytes of float32 per row) keep
        # every SM busy, and long row chunks keep bytes in flight per program (the reductions'
        # 64-column blocks would give 1024 columns only 16 programs)
        add(8, 128, 4)
        add(4, 256, 4)
        add(16, 64, 4)
        add(32, 32, 4)
    elif k.hint == "outer":
        add(64, 8, 8)
        add(32, 16, 4)
        add(128, 8, 8)
        add(64, 32, 8)
    else:
        # 2048-element chunks at 4 warps measured fastest for long rows (an online log-sum-exp
        # over a language model's loss rows); with one maximum and one exp per element, 4096
        # elements are faster still, so rows of LONG_ROW_MIN elements or more try 4096-element
        # chunks instead of 1024, in kernels that only reduce. A kernel that also stores every
        # element in a second loop (a log-softmax gradient) would hold twice the values per
        # thread at 4096, which makes that candidate the slowest compile of its batch for at most
        # a few percent of the kernel's time
        long_chunk = k.reduce_only and k.sv.hint(k.rnumel) >= config.LONG_ROW_MIN
        add(1, 2048, 4)
        add(1, 4096 if long_chunk else 1024, 4)
        add(2, 1024, 8)
        add(1, 2048, 8)
    return out


# ---------------------------------------------------------------------------------- eviction hints
@dataclass
class LoadSite:
    """One ``tl.load`` of a kernel body: the index of its line in the kernel's line list, the
    pointer parameter it reads, the ordinal of the reduction loop it is inside (-1: outside every
    loop) and whether its index misses ``xindex`` in a reduction kernel (``shared``: every
    row-program reads the same elements)."""

    line: int
    ptr: str
    loop: int
    shared: bool


def eviction_policies(sites: list[LoadSite], looped: bool, persistent_reduce_only: bool) -> list[str | None]:
    """The cache eviction policy of each load site (None: no hint), Inductor's rule:

    * a ``shared`` load (in a reduction kernel, an index without ``xindex``: a weight row every
      row-program reads, a scalar) is ``evict_last``: it stays in L2 for the others;
    * in a looped reduction (``looped``), a load inside a loop over the row is ``evict_last`` when
      a later loop of the kernel loads through the same pointer again (softmax's output pass
      re-reads the row the max/normalizer pass streamed), else ``evict_first``: read once, it
      should not push out data that is reused;
    * in a persistent reduction that stores only per-row results (``persistent_reduce_only``:
      each element is read once, for the reductions), a per-row load is ``evict_first``;
    * everything else (pointwise kernels, other persistent rows) gets no hint.

    The hints change cache behaviour only, never values (the interpreter ignores them)."""
    loaded_in: dict[str, set[int]] = {}
    for s in sites:
        if not s.shared and s.loop >= 0:
            loaded_in.setdefault(s.ptr, set()).add(s.loop)
    out: list[str | None] = []
    for s in sites:
        policy = None
        if s.shared:
            policy = "evict_last"
        elif looped and s.loop >= 0:
            again = any(other > s.loop for other in loaded_in.get(s.ptr, ()))
            policy = "evict_last" if again else "evict_first"
        elif persistent_reduce_only:
            policy = "evict_first"
        out.append(policy)
    return out
