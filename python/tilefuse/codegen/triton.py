"""Triton kernel codegen for one fused KernelGroup (after Inductor's simd.py / triton.py).

Layout of a generated kernel:

* pointwise (rnumel == 1): 1-D blocks, ``xindex = xoffset + tl.arange(0, XBLOCK)``, ``xmask``;
* reduction: 2-D blocks ``[XBLOCK, RBLOCK]`` with ``xindex`` as a column and ``rindex`` as a row.
  *Persistent* when rnumel ≤ ``config.persistent_reduction_threshold``: one block covers the whole
  row (RBLOCK = next power of 2 ≥ rnumel). Otherwise *looped*: ``for roffset in range(0, rnumel,
  RBLOCK)`` with accumulators; a node that needs a reduction finished earlier in the kernel starts
  a new loop.

Values a node reads from a buffer written earlier in the same kernel come from registers (store →
load forwarding); a buffer only read that way, and not needed elsewhere, is never stored or
allocated. Index expressions are printed by the native core's Triton printer (``texpr``), which
only uses truncating ``//``/``%`` where operands are provably non-negative. Expressions are
common-subexpression-eliminated within a scope (the kernel, or one reduction loop).

Indirect indexing: ``ops.indirect_indexing(value, size)`` in a loop body yields an index symbol
``ind<N>`` (kind ``indirect``) used inside load indices. Codegen defines a variable of that name
from the loaded value (``+ size`` where negative), asserts ``0 <= ind < size`` in unmasked lanes
(``tl.device_assert``, live under the interpreter; on the GPU only in Triton debug mode, as in
Inductor), and masks loads through it with the mask of the lanes that produced the value.

Math: under the Triton interpreter (CPU tensors) ``libdevice`` is unavailable, so ops without a
core ``tl`` builtin use portable formulas there; on the GPU they call libdevice.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import config
from .. import sizevars as SV
from .. import symbolic as S
from ..ir import nodes as ir
from ..ir.loop_body import BodyValue
from ..scheduler import RINDEX, XINDEX, KernelGroup, node_reduction_hint
from .simd import YINDEX, select_tiling, tiled_var_map

TL_DTYPE = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}


# an outer reduction (columns across rows) stays persistent only for rows this short
OUTER_PERSISTENT_MAX = 64
# a looped inner reduction over rows at least this long also tries 4096-element chunks (gpu_configs)
LONG_ROW_MIN = 16384
# a 1-D pointwise kernel with at least this many arithmetic ops per element (``alu_ops``) is
# ALU-bound at 1024 elements per program: it gets 2048 (16 per thread at 4 warps, more independent
# work per thread). H200, 8192^2 bf16 bias + exact GELU (about 30 ops per element with the
# polynomial erf, docs/benchmarks.md): 1024 elements 80.4 us, 2048 71.4 us, 4096 72.2 us; with
# libdevice's erf 107.8 / 100.6 / 99.9 us. Light kernels (SiLU x mul, 6 ops) stay at 1024.
ALU_HEAVY_POINTWISE_OPS = 24

_ALU_OP_LINE = re.compile(r"^\s*tmp\d+ = (?!tl\.load\(|tl\.full\(|tmp\d+\.to\([^()]*\)$)")


def alu_ops(body: list[str]) -> int:
    """Arithmetic ops per element of a kernel body: its ``tmpN = ...`` lines other than loads,
    constants and plain casts."""
    return sum(1 for ln in body if _ALU_OP_LINE.match(ln))


def tl_dtype(dt: torch.dtype) -> str:
    """Triton type name of a torch dtype; NotImplementedError for dtypes kernels cannot hold."""
    try:
        return TL_DTYPE[dt]
    except KeyError:
        raise NotImplementedError(f"dtype {dt} is not supported in generated kernels") from None


def next_pow2(n: int) -> int:
    """Smallest power of 2 >= n (1 for n <= 1): Triton block sizes."""
    return 1 << max(0, (int(n) - 1).bit_length())


def _const_literal(value: Any, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    # integers wrap to the dtype's width, as torch does for an out-of-range scalar
    bits = {torch.int8: 8, torch.uint8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}.get(dtype, 64)
    v = int(value) & ((1 << bits) - 1)
    if dtype != torch.uint8 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return str(v)


_SAME_WIDTH_INT = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def _negative_zero_or_nan(value: Any, dtype: torch.dtype) -> torch.Tensor | None:
    """``value`` rounded to ``dtype`` as torch rounds a fill value (a 0-dim tensor), when that is
    -0.0 or a NaN with its sign bit set; None otherwise (and for dtypes other than float64,
    float32, float16 and bfloat16). torch's float-to-bfloat16 conversion makes every NaN
    positive, so ``-nan`` in bfloat16 is None here, as ``torch.full((1,), -nan, dtype=bf16)`` has
    no sign bit."""
    if dtype not in _SAME_WIDTH_INT or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):  # a symbolic value: neither zero nor NaN at compile time
        return None
    if not (v == 0 or math.isnan(v)) or math.copysign(1.0, v) > 0:
        return None
    t = torch.tensor(v, dtype=dtype)
    return t if bool(torch.signbit(t)) else None


_EP_MARK = "\x00ep\x00"  # a load's eviction-policy slot (see _resolve_eviction)
_EP_SHARED = "\x00eps\x00"  # the same, for a load every row-program of a reduction reads
_LOAD_PTR = re.compile(r"tl\.load\((\w+) \+")


def _identity(rtype: str, dtype: torch.dtype) -> str:
    if rtype == "sum" or rtype == "any":
        return "0"
    if rtype == "prod":
        return "1"
    if rtype in ("max", "argmax"):
        if dtype.is_floating_point:
            return 'float("-inf")'
        return "0" if dtype == torch.bool else str(torch.iinfo(dtype).min)
    if rtype in ("min", "argmin"):
        if dtype.is_floating_point:
            return 'float("inf")'
        return "1" if dtype == torch.bool else str(torch.iinfo(dtype).max)
    raise NotImplementedError(rtype)


@dataclass
class KernelArgs:
    """Pointer arguments of a kernel: buffer name -> parameter name, in first-use order.

    ``inplace`` (output buffer -> input buffer): outputs stored into their input's memory
    (Inductor's ``in_out_ptr``): one parameter serves both, listed under the input's name."""

    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    inplace: dict[str, str] = field(default_factory=dict)

    def input(self, name: str) -> str:
        if name in self.outputs:
            return self.outputs[name]
        if name not in self.inputs:
            shared = name in self.inplace.values()
            self.inputs[name] = f"in_out_ptr{len(self.inputs)}" if shared else f"in_ptr{len(self.inputs)}"
        return self.inputs[name]

    def output(self, name: str) -> str:
        if name in self.inplace:
            return self.input(self.inplace[name])
        if name not in self.outputs:
            self.outputs[name] = f"out_ptr{len(self.outputs)}"
        return self.outputs[name]


class _Scope:
    def __init__(self, parent: "_Scope | None" = None):
        self.cache: dict[str, str] = {}
        self.parent = parent

    def get(self, key: str) -> str | None:
        s = self
        while s is not None:
            if key in s.cache:
                return s.cache[key]
            s = s.parent
        return None


@dataclass
class GeneratedKernel:
    """What the wrapper needs to launch a kernel."""

    name: str
    source: str
    arg_names: list[str]  # buffer names, in parameter order
    numel: int
    rnumel: int
    # launch grid: one (block constexpr, extent) per grid axis, e.g. [("XBLOCK", numel)];
    # grid axis k has ceil(extent / config[block]) programs
    grid_axes: list[tuple[str, int]]
    # candidate launch configs, the heuristic's choice first: block constexprs (XBLOCK, YBLOCK,
    # RBLOCK as the kernel declares them) plus "num_warps" (and optionally "num_stages")
    configs: list[dict[str, int]]
    removed: set[str]  # buffers this kernel made unnecessary
    index_dtype: str
    # symbolic sizes (dynamic shapes): the kernel's integer parameters after the pointers, as
    # Exprs over the graph's size symbols the wrapper evaluates at each call (xnumel, rnumel when
    # symbolic, then one ``ks<i>`` per size symbol the index expressions use, then one ``ps<i>`` per
    # compound divisor hoisted to the host); grid extents that
    # are symbolic name the parameter holding them
    size_args: list = field(default_factory=list)
    size_params: list[str] = field(default_factory=list)
    # entries of arg_names the kernel updates in place (atomic adds into a buffer another kernel
    # initialized): the autotuner restores them after each timed run
    mutated_args: list[str] = field(default_factory=list)
    # output buffer -> the input buffer whose memory it is stored into (an ``in_out_ptr``
    # parameter, listed in arg_names under the input's name); the wrapper makes the output that
    # input's tensor
    inplace: dict[str, str] = field(default_factory=dict)


# body ops that say nothing about what a kernel computes (left out of its name)
_NAME_SKIP = frozenset(
    {
        "load",
        "store",
        "constant",
        "index_expr",
        "to_dtype",
        "indirect_indexing",
        "masked",
        "where",
        "broadcast",
        "reduction",
        "scan",
        "store_reduction",
        "bucketize",
    }
)
# at most this many op names in a kernel's name (Inductor's kernel_name_max_ops is 10)
KERNEL_NAME_MAX_OPS = 6


def kernel_name(group: KernelGroup, index: int, persistent: bool) -> str:
    """The name of a generated kernel, in Inductor's form (``triton_poi_fused_add_mul_0``):
    ``tf_<kind>_fused_<ops>_<index>``, kind ``poi`` (pointwise, tiled or not), ``per`` (a
    persistent reduction: a whole row per block) or ``red`` (a looped reduction); ops the body's
    math ops and reduction types in first-use order (at most ``KERNEL_NAME_MAX_OPS``), index the
    kernel's position in its graph, so the name is unique there. A profiler's kernel list then
    says what each kernel does (``tf_red_fused_max_sumexp_log_sub_3``)."""
    kind = "poi" if group.rnumel == 1 else ("per" if persistent else "red")
    ops: list[str] = []
    for n in group.nodes:
        for bn in n.body.nodes:
            op = bn.args[2] if bn.op == "reduction" and len(bn.args) > 2 else bn.op
            if bn.op == "store":  # an atomic update names the kernel (index_add: atomic_add)
                op = bn.args[3] if len(bn.args) > 3 and bn.args[3] else None
            if not isinstance(op, str) or op in _NAME_SKIP:
                continue
            op = "".join(c if c.isalnum() or c == "_" else "_" for c in op.lower()).strip("_")
            if op and op not in ops:
                ops.append(op)
    ops = ops[:KERNEL_NAME_MAX_OPS]
    return f"tf_{kind}_fused_{'_'.join(ops)}_{index}" if ops else f"tf_{kind}_{index}"


def _index_values_fit_int32(group: KernelGroup) -> bool:
    """Whether every int64 ``index_expr`` value of the group's bodies (an index used as data:
    ``torch.arange``'s ``start + step * i``, an iota) is proven to lie in int32's range over its
    variables' ranges (-2**31 itself excluded: the printer cannot write it as an int32 literal).
    Such values are computed in the kernel's index dtype before their cast, so an int32 kernel
    would wrap ``arange(2**31 - 2, 2**31 + 3)`` (and could not print its 2**31); when one is not
    proven, the kernel indexes in int64. A symbolic range counts as
    up to 2**31 - 2 (the kernel's extent is guarded below 2**31 - 1 for int32 indexing)."""
    for n in group.nodes:
        body = n.body
        ranges = None
        for bn in body.nodes:
            if bn.op != "index_expr" or bn.args[1] != torch.int64:
                continue
            e = bn.args[0]
            if isinstance(e, int) or e.is_number:
                continue  # a constant is emitted as a typed constant (tl.full), not in the index dtype
            if ranges is None:
                ranges = {v: (r if isinstance(r, int) else 2**31 - 1) for v, r in body.var_ranges.items()}
            if not (S.statically_known_lt(e, 2**31 - 1, ranges) and S.statically_known_lt(-(2**31), e, ranges)):
                return False
    return True


def _storages_fit_int32(group: KernelGroup, sv: SV.SizeVars) -> bool:
    """Whether the storage extent (``Layout.storage_size``: ``offset + Σ (size_i - 1)·stride_i +
    1`` elements) of every buffer the group's kernel loads from or stores to is below 2**31 - 1
    (static, proven, or guarded): graph inputs (their offset is their data pointer's, so 0),
    constants, the graph's buffers and the views of them. Every memory offset the kernel
    computes lies below its buffer's extent, so then the offsets fit int32; a small view of a
    large storage (24 elements of a 3 x (2**30 + 8) int8 tensor, a column slice of a big matrix)
    has offsets beyond 2**31 that int32 would wrap. Inductor's ``can_use_32bit_indexing``
    likewise checks the buffers' storage sizes besides the kernel's extent. A name the graph does
    not know (none expected) answers False: int64, to be safe."""
    from ..ir import graph_context as G

    graph = G.graph()
    names = [n.buf.get_name() for n in group.nodes]
    for n in group.nodes:
        names += [name for name, _ in (*n.body.loads(), *n.body.stores())]
    sizes = []
    for name in dict.fromkeys(names):  # in order: any guards are taken in the same order each time
        buf = graph.graph_inputs.get(name, graph.name_to_buffer.get(name))
        if buf is None:
            return False
        if isinstance(buf, ir.MutationBuffer):
            buf = buf.target
        sizes.append(buf.layout.storage_size())
    # symbolic sizes: only those no other one bounds are guarded
    return sv.evaluate_all_lt(sizes, 2**31 - 1)


class TritonKernelCodegen:
    """Generates the source of one kernel for a KernelGroup."""

    def __init__(
        self, group: KernelGroup, name: str, device: torch.device, keep: set[str], inplace: dict[str, str] | None = None
    ):
        self.g, self.name, self.device = group, name, device
        self.interpret = device.type != "cuda"
        # buffers read or returned outside this kernel, and buffers updated in place
        self.keep = set(keep) | {n.buf.target.name for n in group.nodes if isinstance(n.buf, ir.MutationBuffer)}
        self.args = KernelArgs()
        self._inplace_asked = dict(inplace or {})
        self.lines: list[str] = []
        self.indent = 1
        self.counter = 0
        self.reduction = group.rnumel != 1
        self.alu_ops = 0  # arithmetic ops per element of the body, set when it is generated (gpu_configs)
        self.sv = SV.current()
        # symbolic extents are kernel parameters; size symbols in index expressions become ks<i>
        self.dyn_numel = not isinstance(group.numel, int)
        self.dyn_rnumel = not isinstance(group.rnumel, int)
        self.size_symbols: dict = {}  # graph size symbol -> kernel parameter symbol (ks<i>)
        self.precomputed: dict = {}  # compound size expression over ks<i> -> parameter ps<i>
        # Inductor's reduction hint, from the group's reduction nodes (LoopBody.reduction_hint)
        hints = [node_reduction_hint(n) for n in group.nodes if n.is_reduction()]
        self.hint = "inner" if "inner" in hints else ("outer" if "outer" in hints else "default")
        has_scan = self.has_scan = any(bn.op == "scan" for n in group.nodes for bn in n.body.nodes)
        # persistent: the whole row in one block. An outer reduction reads each row once per column
        # block, so it stays persistent only for short rows (then many columns share a program).
        # A symbolic row length is persistent only when its proven upper bound is small enough.
        rmax = self.sv.upper_bound(group.rnumel) if self.reduction else 1
        self.rnumel_max = rmax
        self.persistent = (
            self.reduction
            and rmax is not None
            and (
                rmax <= config.persistent_reduction_threshold
                and (has_scan or self.hint != "outer" or rmax <= OUTER_PERSISTENT_MAX)
            )
        )
        # a reduction kernel storing only per-row results: no pointwise node inside its loop
        # ('xr'), so each element is read once, for the reductions (configs, eviction hints, sumexp)
        self.reduce_only = self.reduction and not has_scan and not any(kind == "xr" for kind, *_ in group.maps.values())
        self.kscope = _Scope()
        self.scope = self.kscope
        self.in_loop = False
        self.loop_pending_reductions: list = []  # finishers of reductions accumulated in the open loop
        # looped float max reductions, (value, dtype) -> (accumulator, redirect), and looped
        # sumexps' running row maxima, (value, dtype) -> variable: one maximum per row for both
        self.looped_max: dict = {}
        self.row_max_of_sumexp: dict = {}
        # sumexps, (value, dtype) -> result variable: softmax and logsumexp of one row share one
        self.sumexp_of: dict = {}
        # other looped reductions, (type, value, dtype) -> result variable: one accumulator for
        # the same reduction of the same value in one loop
        self.looped_of: dict = {}
        self.open_reduction_bufs: set[str] = set()  # their buffers (stored once the loop closes)
        # values in registers: buffer -> (var, 'x' | 'xr', loop id)
        self.forward: dict[str, tuple[str, str, int]] = {}
        self.loop_id = 0
        self.stores: list[tuple[str, int]] = []  # (buffer, line index) for later removal
        self.needs_memory: set[str] = set()
        self.produced = {n.name for n in group.nodes}
        self.indirect_masks: dict = {}  # indirect index symbol -> mask of the value it came from
        # int32 indices when the kernel's extent and every storage extent it addresses are below
        # 2**31 - 1: static, proven, or guarded (a guard: Dynamo recompiles for inputs that make
        # it false)
        total = group.numel * group.rnumel
        self.index_dtype = (
            "tl.int32"
            if (
                self.sv.evaluate_lt(total, 2**31 - 1)
                and _storages_fit_int32(group, self.sv)
                and _index_values_fit_int32(group)
            )
            else "tl.int64"
        )
        # 2-D tile [YBLOCK, XBLOCK] for pointwise kernels with transposed access (codegen/simd.py);
        # not for symbolic extents (the candidates are static dimension boundaries)
        self.tiling = select_tiling(group) if (not self.reduction and config.tiling) else None
        # a tile's extents: kernel parameters when symbolic
        self.dyn_tile = self.tiling is not None and not (
            isinstance(self.tiling.ynumel, int) and isinstance(self.tiling.xnumel, int)
        )
        if self.dyn_tile:
            # the smaller extent goes on grid axis 1 (at most 65535 programs): guarded to fit with
            # blocks of one element, else no tile
            small = min(self.tiling.ynumel, self.tiling.xnumel, key=self.sv.hint)
            if not self.sv.evaluate_leq(small, 65535):
                self.tiling, self.dyn_tile = None, False
        # outputs stored into a dying input's memory (the wrapper's choice, ``inplace_candidates``):
        # only in 1-D pointwise kernels, where every lane loads an element before it stores that
        # same element in the same layout (a 2-D tile or a reduction may lay loads and stores out
        # differently across the program's threads)
        if not self.reduction and self.tiling is None:
            self.args.inplace = self._inplace_asked

    # ------------------------------------------------------------------ emission helpers
    def emit(self, line: str) -> int:
        self.lines.append("    " * self.indent + line)
        return len(self.lines) - 1

    def newvar(self) -> str:
        self.counter += 1
        return f"tmp{self.counter}"

    def cse(self, expr: str) -> str:
        hit = self.scope.get(expr)
        if hit is not None:
            return hit
        v = self.newvar()
        self.emit(f"{v} = {expr}")
        self.scope.cache[expr] = v
        return v

    def shape(self, kind: str) -> str:
        if self.tiling is not None:
            return "[YBLOCK, XBLOCK]"
        if not self.reduction:
            return "[XBLOCK]"
        return "[XBLOCK, 1]" if kind == "x" else "[XBLOCK, RBLOCK]"

    def kernel_expr(self, expr):
        """``expr`` with the graph's size symbols renamed to the kernel's ``ks<i>`` parameters
        (numbered in first-use order, so the same kernel in two graphs has the same source), and
        compound divisors hoisted into ``ps<i>`` parameters (``_precompute``)."""
        if isinstance(expr, int):
            return expr
        fs = [f for f in expr.free_symbols if f.name in self.sv.symbols]
        if not fs:
            return expr
        for f in sorted(fs, key=lambda f: f.name):
            if f not in self.size_symbols:
                self.size_symbols[f] = S.sym(
                    f"ks{len(self.size_symbols)}",
                    kind=f.symbol_kind,
                    lower=f.assumed_range[0],
                    upper=f.assumed_range[1],
                )
        return self._precompute(expr.subs({f: self.size_symbols[f] for f in fs}))

    _DIVISIONS = {"FloorDiv": slice(1, 2), "CleanDiv": slice(1, 2), "ModularIndexing": slice(1, 3)}

    def _precompute(self, expr):
        """Inductor's precomputed size arguments (``IterationRangesEntry.precomputed_args``): a
        divisor or modulus of a FloorDiv / CleanDiv / ModularIndexing that is a compound
        expression of size parameters only (``ks0*ks1``, ``64*ks0``) becomes a ``ps<i>`` kernel
        parameter the wrapper computes once per call on the host, so the kernel divides by one
        value instead of recomputing the product in every lane. Sizes are >= 1, so the products
        are too (``ps`` symbols are positive)."""
        found = []
        stack = [expr]
        while stack:
            e = stack.pop()
            args = e.args
            which = self._DIVISIONS.get(e.kind)
            if which is not None:
                for a in args[which]:
                    if (
                        not a.is_number
                        and not a.is_symbol
                        and a not in found
                        and all(f.symbol_kind == "size" and f in self.size_symbols.values() for f in a.free_symbols)
                    ):
                        found.append(a)
            stack.extend(args)
        if not found:
            return expr
        mapping = {}
        for a in found:
            ps = self.precomputed.get(a)
            if ps is None:
                lo, hi = a.assumed_range
                ps = S.sym(f"ps{len(self.precomputed)}", kind="precomputed", lower=max(lo or 1, 1), upper=hi)
                self.precomputed[a] = ps
            mapping[a] = ps
        return expr.subs(mapping)

    def index_str(self, expr) -> str:
        return S.texpr(self.kernel_expr(expr), self.index_dtype)

    def size_str(self, size) -> str:
        """A size as kernel source: a literal, or an expression over ``ks<i>`` parameters."""
        if isinstance(size, int):
            return str(size)
        return S.texpr(self.kernel_expr(size), self.index_dtype)

    def mask_for(self, expr) -> str | None:
        syms = set(expr.free_symbols)
        parts = []
        if XINDEX in syms:
            parts.append("xmask")
        if RINDEX in syms:
            parts.append("rmask")
        if YINDEX in syms:
            parts.insert(0, "ymask")
        for sym_ in syms:
            m = self.indirect_masks.get(sym_)
            if m:
                parts.extend(p for p in m.split(" & ") if p not in parts)
        if not parts:
            return None
        return " & ".join(parts)

    # ------------------------------------------------------------------ main
    def generate(self) -> GeneratedKernel:
        g = self.g
        # static shapes: the kernel's extents are compile-time constants (Triton specializes on them)
        if self.tiling is None and not self.dyn_numel:
            self.emit(f"xnumel = {g.numel}")
        if self.reduction:
            if not self.dyn_rnumel:
                self.emit(f"rnumel = {g.rnumel}")
            self.emit("xoffset = tl.program_id(0) * XBLOCK")
            self.emit(f"xindex = (xoffset + tl.arange(0, XBLOCK)[:, None]).to({self.index_dtype})")
            self.emit("xmask = xindex < xnumel")
            if self.persistent:
                self.emit(f"rindex = tl.arange(0, RBLOCK)[None, :].to({self.index_dtype})")
                self.emit("rmask = rindex < rnumel")
        elif self.tiling is not None:
            t = self.tiling
            ypid, xpid = self.tile_grid_order()
            if not self.dyn_tile:
                self.emit(f"ynumel = {t.ynumel}")
                self.emit(f"xnumel = {t.xnumel}")
            self.emit(f"yoffset = tl.program_id({ypid}) * YBLOCK")
            self.emit(f"yindex = (yoffset + tl.arange(0, YBLOCK)[:, None]).to({self.index_dtype})")
            self.emit("ymask = yindex < ynumel")
            self.emit(f"xoffset = tl.program_id({xpid}) * XBLOCK")
            self.emit(f"xindex = (xoffset + tl.arange(0, XBLOCK)[None, :]).to({self.index_dtype})")
            self.emit("xmask = xindex < xnumel")
        else:
            self.emit("xoffset = tl.program_id(0) * XBLOCK")
            self.emit(f"xindex = (xoffset + tl.arange(0, XBLOCK)).to({self.index_dtype})")
            self.emit("xmask = xindex < xnumel")
        for node in g.nodes:
            kind, m, _, _ = g.maps[node]
            if self.tiling is not None:
                m = tiled_var_map(node, self.tiling)
            self.codegen_node(node, kind, m)
        self.close_loop()
        removed = set()
        for name, li in self.stores:
            if name not in self.keep and name not in self.needs_memory:
                self.lines[li] = None  # type: ignore[call-overload]
                removed.add(name)
        for name in removed:
            self.args.outputs.pop(name, None)
        body = self._resolve_eviction([ln for ln in self.lines if ln is not None])
        self.alu_ops = alu_ops(body)
        params = list(self.args.inputs.values()) + list(self.args.outputs.values())
        arg_names = list(self.args.inputs.keys()) + list(self.args.outputs.keys())
        configs = self.configs()
        blocks = [k for k in configs[0] if k.endswith("BLOCK")]
        size_params, size_args = [], []
        if self.dyn_tile:
            size_params += ["ynumel", "xnumel"]
            size_args += [self.tiling.ynumel, self.tiling.xnumel]
        elif self.dyn_numel and self.tiling is None:
            size_params.append("xnumel")
            size_args.append(g.numel)
        if self.reduction and self.dyn_rnumel:
            size_params.append("rnumel")
            size_args.append(g.rnumel)
        for gsym, ksym in self.size_symbols.items():
            size_params.append(ksym.name)
            size_args.append(gsym)
        to_graph = {k: g_ for g_, k in self.size_symbols.items()}
        for compound, ps in self.precomputed.items():
            size_params.append(ps.name)
            size_args.append(compound.subs(to_graph))
        # Under the interpreter size parameters are constexprs (a plain int: `range()` cannot take
        # the interpreter's 1-element scalar tensors); on the GPU runtime ints, not specialized on
        # their value (one binary for every size)
        ssig = [f"{p}: tl.constexpr" if self.interpret else p for p in size_params]
        sig = ", ".join(params + ssig + [f"{b}: tl.constexpr" for b in blocks])
        deco = "@_jit" if not size_params or self.interpret else f"@_jit_dynamic({tuple(size_params)!r})"
        src = [deco, f"def {self.name}({sig}):"] + body
        if self.tiling is not None:
            axes = {
                "YBLOCK": "ynumel" if self.dyn_tile else self.tiling.ynumel,
                "XBLOCK": "xnumel" if self.dyn_tile else self.tiling.xnumel,
            }
            ypid, xpid = self.tile_grid_order()
            grid_axes = [("YBLOCK", axes["YBLOCK"]), ("XBLOCK", axes["XBLOCK"])]
            if ypid == 1:
                grid_axes.reverse()
        else:
            grid_axes = [("XBLOCK", "xnumel" if self.dyn_numel else g.numel)]
        inplace = {o: i for o, i in self.args.inplace.items() if o not in removed and o in self.produced}
        return GeneratedKernel(
            self.name,
            "\n".join(src) + "\n",
            arg_names,
            g.numel,
            g.rnumel,
            grid_axes,
            configs,
            removed,
            self.index_dtype,
            size_args,
            size_params,
            inplace=inplace,
        )

    def _resolve_eviction(self, lines: list[str]) -> list[str]:
        """Cache eviction hints on loads (Inductor's rule, a named heuristic):

        * in a reduction kernel, a load whose index does not involve ``xindex`` (a weight row
          every row-program reads, a scalar) is ``evict_last``: it stays in L2 for the others;
        * in a looped reduction, a load inside a loop over the row is ``evict_last`` when a later
          loop of the kernel reads the same buffer again (softmax's output pass re-reads the row
          the max/normalizer pass streamed), else ``evict_first``: read once, it should not push
          out data that is reused;
        * in a persistent reduction that stores only per-row results (``reduce_only``: each
          element is read once, for the reductions), a per-row load is ``evict_first``; H200,
          max and sum-exp of 65536 rows of 4000 bf16: 136.8 -> 133.3 µs;
        * everything else (pointwise kernels, other persistent rows) gets no hint.
        The hints change cache behaviour only, never values (the interpreter ignores them)."""
        first, last = ", eviction_policy='evict_first'", ", eviction_policy='evict_last'"
        looped = self.reduction and not self.persistent
        loop_of: list[int] = []  # per line: index of the loop it is inside, -1 outside
        loop = -1
        inside = False
        for ln in lines:
            st = ln.lstrip()
            ind = len(ln) - len(st)
            if st.startswith("for roffset"):
                loop += 1
                inside = True
                loop_of.append(-1)
                continue
            if inside and ind <= 4:
                inside = False
            loop_of.append(loop if inside else -1)
        loaded_in: dict[str, set[int]] = {}
        for ln, lp in zip(lines, loop_of):
            if _EP_MARK in ln and lp >= 0:
                for ptr in _LOAD_PTR.findall(ln):
                    loaded_in.setdefault(ptr, set()).add(lp)
        out = []
        for ln, lp in zip(lines, loop_of):
            if _EP_SHARED in ln:
                ln = ln.replace(_EP_SHARED, last)
            if _EP_MARK in ln:
                ep = ""
                if looped and lp >= 0:
                    ptrs = _LOAD_PTR.findall(ln)
                    again = any(any(other > lp for other in loaded_in.get(p_, ())) for p_ in ptrs)
                    ep = last if again else first
                elif self.persistent and self.reduce_only:
                    ep = first
                ln = ln.replace(_EP_MARK, ep)
            out.append(ln)
        return out

    # tile configs (YBLOCK, XBLOCK, num_warps), the first the one launched unless
    # autotune_pointwise: measured on an H200 for a bf16 transpose-add (8192^2) and NCHW->NHWC
    # (64x256x56x56) against 8 other shapes, these three were within 2% of the best for both
    # (square 32x32 tiles were 10-40% slower), the first within 0.8% (twenty-third session)
    TILE_CONFIGS = ((64, 64, 4), (128, 64, 8), (64, 128, 8))

    def tile_grid_order(self) -> tuple[int, int]:
        """(program axis of y, program axis of x) for a tiled kernel. Static extents: x (the
        axis the output is contiguous along) on axis 0, so consecutive programs write adjacent
        output tiles (Inductor's order; 5-10% faster than y first on the H200), unless y's
        programs would not fit axis 1 (65535). Symbolic extents: the larger extent on axis 0,
        whose grid limit is 2^31 - 1 (the smaller one is guarded to fit axis 1)."""
        t = self.tiling
        if not self.dyn_tile and not self.interpret:
            yb = min(min(c[0] for c in self.TILE_CONFIGS), next_pow2(self.sv.hint(t.ynumel)))
            if -(-self.sv.hint(t.ynumel) // yb) <= 65535:
                return (1, 0)
        return (0, 1) if self.sv.hint(t.ynumel) >= self.sv.hint(t.xnumel) else (1, 0)

    def configs(self) -> list[dict[str, int]]:
        """Candidate launch configs, the heuristic's choice first (block constexprs + num_warps).
        Under the interpreter one config with large blocks (fewer, bigger programs run faster on
        NumPy). On the GPU: a 2-D tile ``TILE_CONFIGS[0]`` (all three with
        ``config.autotune_pointwise``: Inductor gives a square tile hint one config unless
        ``max_autotune``), other kernels ``gpu_configs``; a tiny kernel (``is_tiny``) its first."""
        if self.tiling is not None:
            t = self.tiling
            yp, xp = next_pow2(self.sv.hint(t.ynumel)), next_pow2(self.sv.hint(t.xnumel))
            if self.interpret:
                xb = min(xp, 1024)
                return [{"YBLOCK": max(1, min(yp, 4096 // xb)), "XBLOCK": xb}]
            out = []
            for yb, xb, w in self.TILE_CONFIGS:
                c = {"YBLOCK": min(yb, yp), "XBLOCK": min(xb, xp), "num_warps": w}
                if c not in out:
                    out.append(c)
            # one tile shape unless autotune_pointwise (Inductor: a square tile hint gets one config
            # unless max_autotune): a tiled kernel is pointwise, bound by memory whatever its shape
            return out if config.autotune_pointwise and not self.is_tiny() else out[:1]
        if not self.interpret:
            out = self.gpu_configs()
            return out[:1] if self.is_tiny() else out
        xblock, rblock, _ = self.block_sizes()
        cfg = {"XBLOCK": xblock}
        if self.reduction:
            cfg["RBLOCK"] = rblock
        return [cfg]

    def is_tiny(self) -> bool:
        """Whether the kernel is too small for its launch config to matter, so it launches with
        the heuristic's first config instead of being autotuned: every extent static (a symbolic
        one may be large at a later call) and at most ``config.tiny_kernel_numel`` elements in its
        iteration space (outputs x reduction length, or the tile's y x x). 65536 bf16 elements are
        128 KiB, about 0.03 µs of the H200's copy bandwidth against a launch of 2-4 µs; each
        skipped candidate is one compile job fewer on the first call (cross-entropy's combine
        kernel, 8192 rows of 8 partial results: its 4 candidates were the slowest jobs of the
        graph's batch, 0.28-0.33 s each, twenty-second session) and one timing fewer. Inductor
        likewise gives most of its reductions a single config unless ``max_autotune``."""
        limit = config.tiny_kernel_numel
        if limit <= 0:
            return False
        if self.tiling is not None:
            extents = (self.tiling.ynumel, self.tiling.xnumel)
        else:
            extents = (self.g.numel, self.g.rnumel) if self.reduction else (self.g.numel,)
        if not all(isinstance(e, int) for e in extents):
            return False
        return math.prod(extents) <= limit

    def block_sizes(self) -> tuple[int, int, int]:
        """(XBLOCK, RBLOCK, num_warps) of the interpreter's single config: large blocks, since
        the interpreter's cost is per program and per loop iteration."""
        numel = self.sv.hint(self.g.numel)
        if not self.reduction:
            return min(next_pow2(numel), 4096), 1, 4
        # looped: chunks of 2048, or the whole row when its size hint is shorter (a symbolic row
        # of 3 elements would otherwise run 4 rows per program in 2048-wide blocks)
        rb = next_pow2(self.rnumel_max) if self.persistent else min(2048, next_pow2(self.sv.hint(self.g.rnumel)))
        return max(1, min(next_pow2(numel), 8192 // rb)), rb, 4

    def gpu_configs(self) -> list[dict[str, int]]:
        """Candidate GPU configs, the heuristic's choice first (Inductor's pointwise / reduction
        config heuristics by hint):

        * pointwise: 1024 elements per program, 4 warps (2048 for a kernel of at least
          ``ALU_HEAVY_POINTWISE_OPS`` arithmetic ops per element); with ``config.autotune_pointwise`` also
          512 and 2048 (Inductor likewise gives a 1-D pointwise kernel one config unless
          ``max_autotune_pointwise``): each extra config is one more compile, and one more timing,
          on the first call, and on the H200 the first config was the fastest for 7 of 9
          pointwise kernels and within 4.8% for the others (docs/benchmarks.md, fifth session);
        * persistent inner: RBLOCK = next_pow2(rnumel), XBLOCK filling ~4096 elements (≥ 1), warps
          growing with the block (2048 elements per 4 warps, 2–16); a kernel that stores only
          per-row results (``reduce_only``) of rows of 2048 or more tries one row at one warp per
          2048 elements (at least 2), and at 4 warps, first;
        * persistent outer (rnumel ≤ OUTER_PERSISTENT_MAX): up to 128 columns per program;
        * looped inner: XBLOCK 1, RBLOCK 2048, 4 warps (plus 1024-element chunks — 4096 for rows
          of ``LONG_ROW_MIN`` or more in a kernel that only reduces —, two rows, and 8 warps);
        * looped outer: XBLOCK 64, RBLOCK 8, 8 warps (wide column blocks, short row chunks);
          a looped scan across rows 8 columns by 128 rows at 4 warps first (narrow column blocks:
          its rows cannot be split between programs).

        Block sizes never exceed the next power of two of their extent."""
        # symbolic extents: sized for the example inputs (hints), persistent rows for their bound
        xp = next_pow2(self.sv.hint(self.g.numel))
        rp = next_pow2(self.rnumel_max if self.persistent else self.sv.hint(self.g.rnumel))
        warps = lambda n: max(2, min(16, n // 512))  # noqa: E731  - 512 elements per warp
        out: list[dict[str, int]] = []

        def add(xb, rb=None, w=None):
            c = {"XBLOCK": max(1, min(xb, xp))}
            if rb is not None:
                c["RBLOCK"] = max(1, min(rb, rp))
            c["num_warps"] = w if w is not None else warps(c["XBLOCK"] * c.get("RBLOCK", 1))
            if c not in out:
                out.append(c)

        if not self.reduction:
            add(2048 if self.alu_ops >= ALU_HEAVY_POINTWISE_OPS else 1024, w=4)
            if config.autotune_pointwise:
                add(1024, w=4)
                add(512, w=4)
                add(2048, w=8)
        elif self.persistent and self.hint == "outer":
            rb = rp
            add(max(1, 4096 // rb), rb, 8)
            add(max(1, 2048 // rb), rb, 4)
            add(64, rb, 4)
        elif self.persistent:
            rb = rp
            if rb >= 2048 and self.reduce_only:
                # only per-row results: a row per program at one warp per 2048 elements (at least
                # 2) first, then 4 warps. H200, max and sum-exp of 65536 rows of 4000 bf16 (a
                # cross-entropy's row chunks): 2 warps 133.3 µs (93% of the copy bandwidth),
                # 4 warps 145.3 µs, 8 warps 165.9 µs
                add(1, rb, max(2, rb // 2048))
                add(1, rb, 4)
            for budget in (4096, 2048, 8192):
                add(max(1, budget // rb), rb)
            add(1, rb, warps(rb) * 2 if rb >= 1024 else warps(rb))
        elif self.has_scan and self.hint == "outer":
            # a looped scan across rows: its row cannot be split between programs, so every
            # program walks the whole column block down all rows and the grid has only
            # columns / XBLOCK programs. Narrow column blocks (4-16 columns, 16-64 bytes of
            # float32 per row) keep the H200's 132 SMs busy, and long row chunks keep bytes in
            # flight per program; the reductions' 64-column blocks gave 1024 columns 16 programs
            # (891 µs against Inductor's 360 for 16384 x 1024 float32, twenty-seventh session)
            add(8, 128, 4)
            add(4, 256, 4)
            add(16, 64, 4)
            add(32, 32, 4)
        elif self.hint == "outer":
            add(64, 8, 8)
            add(32, 16, 4)
            add(128, 8, 8)
            add(64, 32, 8)
        else:
            # measured on the H200 (online log-sum-exp over 8192 rows of 32000 bf16, the shape of
            # a language model's loss): 2048/4 warps 199 µs, 1024/4 235, 2048/8 250, 1024/8 293,
            # 4096/16 320; with one maximum and one exp per element (seventh session, a
            # hand-written kernel of the generated form): 4096/4 150 µs, 2048/4 154, 1024/4 168,
            # so rows of LONG_ROW_MIN elements or more try 4096-element chunks instead of 1024 —
            # in kernels that only reduce (the measured form). A kernel that also stores every
            # element in a second loop (a log-softmax gradient) holds twice the values per thread
            # at 4096: on the H200 host its 4096-element candidate took 0.5-0.8 s to compile
            # against 0.2-0.4 s for 2048, the longest job of its compile batch (twelfth and
            # thirteenth sessions), for at most a few percent of a kernel run once per step
            long_chunk = self.reduce_only and self.sv.hint(self.g.rnumel) >= LONG_ROW_MIN
            add(1, 2048, 4)
            add(1, 4096 if long_chunk else 1024, 4)
            add(2, 1024, 8)
            add(1, 2048, 8)
        return out

    # ------------------------------------------------------------------ loops
    def open_loop(self) -> None:
        if self.persistent or self.in_loop:
            return
        self.loop_id += 1
        self.loop_start = len(self.lines)
        # a literal bound: the interpreter turns a local `rnumel = N` into a tensor, which range()
        # cannot take
        rn = "rnumel" if self.dyn_rnumel else self.g.rnumel
        self.emit(f"for roffset in range(0, {rn}, RBLOCK):")
        self.indent += 1
        self.emit(f"rindex = (roffset + tl.arange(0, RBLOCK)[None, :]).to({self.index_dtype})")
        self.emit("rmask = rindex < rnumel")
        self.scope = _Scope(self.kscope)
        self.in_loop = True

    def close_loop(self) -> None:
        if not self.in_loop:
            return
        self.indent -= 1
        self.scope = self.kscope
        self.in_loop = False
        for finish in self.loop_pending_reductions:
            finish()
        self.loop_pending_reductions = []
        self.open_reduction_bufs = set()
        self.looped_max, self.row_max_of_sumexp, self.sumexp_of, self.looped_of = {}, {}, {}, {}

    # ------------------------------------------------------------------ nodes
    def codegen_node(self, node, kind: str, m: dict) -> None:
        body = node.body
        needs_r = kind in ("xr", "red")
        if self.reduction and not self.persistent:
            reads_open = any(n in self.open_reduction_bufs for n, _ in body.loads())
            if needs_r:
                if reads_open:
                    self.close_loop()
                self.open_loop()
            else:
                self.close_loop()
        vals: dict[int, str] = {}
        value_kind = "xr" if needs_r else "x"
        for i, bn in enumerate(body.nodes):
            vals[i] = self.codegen_op(node, bn, vals, m, value_kind)

    def arg(self, a, vals: dict, kind: str) -> str:
        if isinstance(a, BodyValue):
            return vals[a.idx]
        if isinstance(a, bool):
            return "1" if a else "0"
        if isinstance(a, float):
            return _const_literal(a, torch.float32)
        return str(a)

    def _map_index(self, expr, m):
        if self.tiling is not None:
            ranges = {XINDEX: self.tiling.xnumel, YINDEX: self.tiling.ynumel}
            return S.simplify_with_ranges(expr.subs(m) if m else expr, ranges)
        ranges = {XINDEX: self.g.numel}
        if self.reduction:
            ranges[RINDEX] = self.g.rnumel
        return S.simplify_with_ranges(expr.subs(m) if m else expr, ranges)

    def codegen_op(self, node, bn, vals, m, kind) -> str | None:
        op, a = bn.op, bn.args
        A = lambda k: self.arg(a[k], vals, kind)  # noqa: E731
        if op == "load":
            name, idx = a[0], self._map_index(a[1], m)
            fw = self.forward.get(name)
            if fw is not None:
                var, fkind, lid = fw
                if fkind == "x" or (lid == self.loop_id and (self.persistent or self.in_loop)):
                    return var
            if name in self.produced:
                self.needs_memory.add(name)
            ptr = self.args.input(name)
            mask = self.mask_for(idx)
            if len(a) > 2 and mask is not None:
                # a load inside ops.masked: lanes off its mask read nothing (an index-free load
                # stays unmasked: one address, in bounds whatever the mask)
                mask = f"{mask} & ({vals[a[2].idx]})"
            istr = self.index_str(idx)
            # an eviction-policy marker, resolved once the kernel is complete (_resolve_eviction)
            ep = _EP_SHARED if self.reduction and XINDEX not in idx.free_symbols else _EP_MARK
            if mask is None:
                v = self.cse(f"tl.load({ptr} + ({istr}){ep})")
                return self.cse(f"tl.broadcast_to({v}, {self.shape(kind)})")
            other = ", other=0.0" if bn.dtype.is_floating_point else ", other=0"
            return self.cse(f"tl.load({ptr} + ({istr}), {mask}{other}{ep})")
        if op == "store_reduction" and self.in_loop:
            # the reduced value exists only after its loop: store it then
            self.loop_pending_reductions.append(lambda: self._emit_store(op, a, vals, m, kind))
            self.open_reduction_bufs.add(a[0])
            return None
        if op in ("store", "store_reduction"):
            return self._emit_store(op, a, vals, m, kind)
        if op == "constant":
            value, dt = a
            signed = _negative_zero_or_nan(value, dt)
            if signed is not None:
                # -0.0 and a NaN with its sign bit set: Triton's tl.full builds every zero as +0.0
                # (its null value) and every NaN from float("nan"), so the value is built from its
                # bits in ``dt``, as torch rounds the scalar (x // -0.0 is -inf for x > 0, as in
                # eager; signbit(full(-nan)) is True in float32/float64/float16)
                ft = torch.float32 if dt == torch.bfloat16 and self.interpret else dt
                it = _SAME_WIDTH_INT[ft]
                lit = int(signed.to(ft).view(it).item())
                z = f"tl.full({self.shape(kind)}, {lit}, {tl_dtype(it)}).to({tl_dtype(ft)}, bitcast=True)"
                return self.cse(z if ft == dt else f"{z}.to({tl_dtype(dt)})")
            if dt == torch.bfloat16 and self.interpret:
                # the interpreter cannot build bf16 constants: round in Python (RNE, as torch), build
                # the exactly representable value in fp32 and convert (exact)
                v = float(torch.tensor(float(value), dtype=torch.bfloat16))
                return self.cse(
                    f"tl.full({self.shape(kind)}, {_const_literal(v, torch.float32)}, tl.float32).to(tl.bfloat16)"
                )
            return self.cse(f"tl.full({self.shape(kind)}, {_const_literal(value, dt)}, {tl_dtype(dt)})")
        if op == "index_expr":
            expr, dt = a
            e = self._map_index(expr, m)
            if e.is_number:  # a constant index (a size-1 range): broadcast_to needs a tensor
                return self.cse(f"tl.full({self.shape(kind)}, {e.int_value}, {tl_dtype(dt)})")
            if all(f.name in self.sv.symbols for f in e.free_symbols):
                # sizes only (``x / s0``): a scalar, which broadcast_to cannot take under the interpreter
                return self.cse(f"tl.full({self.shape(kind)}, {self.index_str(e)}, {tl_dtype(dt)})")
            return self.cse(f"tl.broadcast_to(({self.index_str(e)}), {self.shape(kind)}).to({tl_dtype(dt)})")
        if op == "to_dtype":
            x, dt = A(0), a[1]
            src = a[0].dtype if isinstance(a[0], BodyValue) else None
            return self.cse(self.cast(x, src, dt))
        if op == "bitcast":
            return self.cse(self.bitcast(A(0), a[0].dtype, a[1]))
        if op == "reduction":
            return self.codegen_reduction(a, vals)
        if op == "scan":
            return self.codegen_scan(a, vals)
        if op == "indirect_indexing":
            return self.codegen_indirect(a, vals, kind)
        if op == "where":
            return self.cse(f"tl.where({A(0)}, {A(1)}, {A(2)})")
        return self.cse(self.math(op, [self.arg(x, vals, kind) for x in a], bn.dtype, a))

    def _emit_store(self, op, a, vals, m, kind) -> None:
        name, idx, value = a[0], self._map_index(a[1], m), a[2]
        v = vals[value.idx] if isinstance(value, BodyValue) else str(value)
        skind = "x" if op == "store_reduction" or (kind == "x") else "xr"
        dt = G_dtype(name)
        ptr = self.args.output(name)
        mask = self.mask_for(idx) or "xmask"
        if self.tiling is not None:
            mask = " & ".join(["ymask", "xmask"] + [p for p in mask.split(" & ") if p not in ("ymask", "xmask")])
        if skind == "xr" and "rmask" not in mask and self.reduction:
            mask = mask + " & rmask"
        vv = v
        if skind == "xr" or not self.reduction:
            vv = f"tl.broadcast_to({v}, {self.shape(skind)})"
        else:
            vv = f"tl.broadcast_to({v}, [XBLOCK, 1])"
        istr = self.index_str(idx)
        if not self._spans_block(idx, skind):
            # the address misses a block axis (a constant address, or one whose size-1 axis dropped
            # out of the index: a scatter into [1, n]): make the pointer the stored block's shape,
            # which Triton's store and atomics require (the value broadcasts only up to the pointer)
            istr = f"{istr} + tl.zeros({self.shape(skind)}, {self.index_dtype})"
        src = value.dtype if isinstance(value, BodyValue) else None
        mode = a[3] if op == "store" and len(a) > 3 else None
        if mode == "atomic_add":
            # accumulates into a buffer other kernels initialized: never forwarded or removed
            self.emit(f'tl.atomic_add({ptr} + ({istr}), {self.cast(vv, src, dt)}, {mask}, sem="relaxed")')
            return None
        if mode in ("atomic_max", "atomic_min"):
            self._emit_atomic_extremum(mode == "atomic_max", ptr, istr, self.cast(vv, src, dt), dt, mask)
            return None
        li = self.emit(f"tl.store({ptr} + ({istr}), {self.cast(vv, src, dt)}, {mask})")
        self.stores.append((name, li))
        self.forward[name] = (v, skind, self.loop_id)
        return None

    def _spans_block(self, idx, skind: str) -> bool:
        """Whether a store address over ``idx`` is a block of the stored value's whole shape: it
        uses every block axis's index (yindex and xindex in a tiled kernel, xindex, and rindex for
        an ``xr`` store of a reduction kernel). An indirect index alone does not count: its block
        can be narrower (a gather index loaded along one axis only)."""
        syms = idx.free_symbols
        need = [XINDEX]
        if self.tiling is not None:
            need.append(YINDEX)
        if skind == "xr" and self.reduction:
            need.append(RINDEX)
        return all(n in syms for n in need)

    def _emit_atomic_extremum(self, is_max: bool, ptr: str, istr: str, v: str, dt: torch.dtype, mask: str) -> None:
        """``ptr[istr] = max(ptr[istr], v)`` (``min`` unless ``is_max``) atomically. Integers use
        Triton's atomic max/min directly. A float is combined on its bits: where the sign bit is
        clear the bits order as the values do (signed integer max/min), where it is set they
        order reversed (unsigned integer min/max). A NaN in ``v`` is first made the NaN that wins
        that comparison against every other bit pattern of the right sign (for max the positive
        quiet NaN, larger than +inf's bits; for min the negative one, larger unsigned than
        -inf's), so a NaN source propagates as torch's amax/amin. The NaN test is on integer
        bits too, so no float rewrite can drop it. A NaN already in the buffer with the other
        sign bit can be displaced: the lowering restores those from its input."""
        if dt not in (torch.float32, torch.float64):
            fn = "tl.atomic_max" if is_max else "tl.atomic_min"
            self.emit(f'{fn}({ptr} + ({istr}), {v}, {mask}, sem="relaxed")')
            return
        wide = dt == torch.float64
        it, ut = ("tl.int64", "tl.uint64") if wide else ("tl.int32", "tl.uint32")
        magnitude = "0x7FFFFFFFFFFFFFFF" if wide else "0x7FFFFFFF"
        inf_bits = "0x7FF0000000000000" if wide else "0x7F800000"
        # quiet NaN bit patterns, the negative one as a signed literal of the integer type
        nan_bits = (
            ("0x7FF8000000000000" if wide else "0x7FC00000")
            if is_max
            else (str(-(1 << 51)) if wide else str(-(1 << 22)))
        )
        bits = self.cse(f"{v}.to({it}, bitcast=True)")
        is_nan = self.cse(f"({bits} & {magnitude}) > {inf_bits}")
        bits = self.cse(f"tl.where({is_nan}, {nan_bits}, {bits})")
        neg = self.cse(f"{bits} < 0")
        signed_fn, unsigned_fn = ("tl.atomic_max", "tl.atomic_min") if is_max else ("tl.atomic_min", "tl.atomic_max")
        self.emit(f'{signed_fn}({ptr}.to(tl.pointer_type({it})) + ({istr}), {bits}, ({mask}) & ~{neg}, sem="relaxed")')
        self.emit(
            f"{unsigned_fn}({ptr}.to(tl.pointer_type({ut})) + ({istr}), {bits}.to({ut}, bitcast=True), "
            f'({mask}) & {neg}, sem="relaxed")'
        )

    def codegen_indirect(self, a, vals, kind) -> None:
        """Define the indirect index symbol as a variable of the same name: the loaded value,
        ``+ size`` where negative (torch's wrap-around), checked to lie in ``[0, size)`` in every
        unmasked lane (``tl.device_assert``, as Inductor's bounds check)."""
        value, size, symbol, check, wrap = a
        v = vals[value.idx]
        name = str(symbol)
        mask = "xmask" if (kind == "x" or not self.reduction) else "xmask & rmask"
        if self.tiling is not None:
            mask = "ymask & xmask"
        size = self.size_str(size)
        self.emit(f"{name} = tl.where({v} < 0, {v} + {size}, {v})" if wrap else f"{name} = {v}")
        if check:
            self.emit(
                f"tl.device_assert(((0 <= {name}) & ({name} < {size})) | ~({mask}), "
                f'"index out of bounds: a value of an index tensor (gather, index, scatter, embedding or '
                f"a loss's class targets) lies outside [0, {size}) (check 0 <= {name} < {size})\")"
            )
        self.indirect_masks[symbol] = mask
        return None

    def cast(self, x: str, src: torch.dtype | None, dst: torch.dtype) -> str:
        """Source converting ``x`` (of ``src``) to ``dst`` as torch does: float -> int truncates
        toward zero, to bool is ``!= 0``, and float -> bfloat16 rounds to nearest even. Triton's
        interpreter truncates fp32 -> bf16, so there the rounding is done on the bits."""
        if src == dst:
            return x
        if dst == torch.bool:
            return f"({x} != 0)"
        if src == torch.bool:
            return self.cast(f"{x}.to(tl.int8)", torch.int8, dst)
        if dst == torch.bfloat16 and self.interpret and src is not None and not src.is_floating_point:
            # the interpreter reinterprets an integer's bits as bf16: convert through fp32
            return self.cast(f"{x}.to(tl.float32)", torch.float32, dst)
        if dst == torch.bfloat16 and self.interpret and src is not None and src.is_floating_point:
            bits = f"{x}.to(tl.float32).to(tl.uint32, bitcast=True)"
            rounded = f"(({bits} + (0x7FFF + (({bits} >> 16) & 1))) & 0xFFFF0000)"
            nan = f"({x} != {x})"
            return f"tl.where({nan}, {x}.to(tl.float32), {rounded}.to(tl.float32, bitcast=True)).to(tl.bfloat16)"
        return f"{x}.to({tl_dtype(dst)})"

    def bitcast(self, x: str, src: torch.dtype, dst: torch.dtype) -> str:
        """Source reinterpreting ``x``'s bits (of ``src``) as ``dst`` of the same width:
        Triton's ``.to(dst, bitcast=True)``, bfloat16 included (the interpreter holds bfloat16 as
        its 16 bits; going through float32 there would flush subnormals, which its bfloat16 to
        float32 conversion does)."""
        return x if src == dst else f"{x}.to({tl_dtype(dst)}, bitcast=True)"

    def _fmod_float(self, a: str, b: str) -> str:
        """Source of C's ``fmod`` of floats (the remainder of the quotient truncated toward zero,
        exact): libdevice's ``fmod`` on the GPU, where Triton's ``%`` on floats (LLVM ``frem``) is
        expanded by the NVPTX back end as ``a - b * trunc(a / b)`` and so loses the remainder of
        large quotients; ``%`` under the interpreter (numpy's ``fmod``, exact)."""
        return f"libdevice.fmod({a}, {b})" if not self.interpret else f"{a} % {b}"

    def _expm1_without_libdevice(self, v: str) -> str:
        """``expm1(v)`` where libdevice is missing (the interpreter), in Kahan's form ``(u - 1) * v /
        log(u)`` with ``u = exp(v)``, whose rounding errors cancel (``exp(v) - 1`` loses every digit
        for ``|v| < 1e-8``): a few ulp; ``v`` itself where ``u`` rounds to 1 (-0.0 kept), -1 where
        ``u - 1`` does, inf where ``u`` overflows, NaN for NaN."""
        u = self.cse(f"tl.exp({v})")
        return (
            f"tl.where({u} == 1.0, {v}, tl.where({u} - 1.0 == -1.0, -1.0, "
            f'tl.where({u} == float("inf"), {u}, ({u} - 1.0) * ({v} / tl.log({u})))))'
        )

    def _floor_divide_float(self, a: str, b: str) -> str:
        """Source of torch's floor division of floats (``a // b``, ``div(rounding_mode='floor')``)
        as aten computes it (c10's ``div_floor_floating``), not ``floor(a / b)``: the quotient of
        ``a - fmod(a, b)``, one less when the remainder's sign differs from ``b``'s, then rounded
        to the nearest integer below or at it. ``floor(a / b)`` rounds the division first, so
        ``1.0 // 0.1`` came out 10.0 where torch (and Python) give 9.0, and ``inf // 2.0`` inf
        where torch gives nan. A zero divisor gives ``a / b`` (IEEE: ±inf or nan); a zero
        quotient keeps the sign of ``a / b``."""
        mod = self.cse(self._fmod_float(a, b))
        div = self.cse(f"({a} - {mod}) / {b}")
        div = self.cse(f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {div} - 1.0, {div})")
        low = self.cse(f"tl.floor({div})")
        rounded = self.cse(f"tl.where({div} - {low} > 0.5, {low} + 1.0, {low})")
        q = self.cse(f"{a} / {b}")
        # a zero quotient: 0.0 * q is +-0 with q's sign (q is finite there: |a| < |b|)
        return f"tl.where({b} == 0, {q}, tl.where({div} != 0, {rounded}, 0.0 * {q}))"

    # ------------------------------------------------------------------ math
    def math(self, op: str, x: list[str], dtype: torch.dtype, raw) -> str:
        is_float = dtype is not None and dtype.is_floating_point
        in_float = isinstance(raw[0], BodyValue) and raw[0].dtype.is_floating_point
        lib = not self.interpret
        binary = {
            "add": "+",
            "sub": "-",
            "mul": "*",
            "eq": "==",
            "ne": "!=",
            "lt": "<",
            "le": "<=",
            "gt": ">",
            "ge": ">=",
            "bitwise_and": "&",
            "bitwise_or": "|",
            "bitwise_xor": "^",
        }
        if op == "rand":
            return f"tl.rand({x[0]}, {x[1]})"
        if op == "randn":
            return f"tl.randn({x[0]}, {x[1]})"
        if op == "randint64":
            # 64 random bits (two Philox words) reduced modulo the range: bias below range / 2**64
            # (32 bits gave values below 2**32 mod range up to 1.5x too often for ranges near 2**31)
            r4 = self.cse(f"tl.randint4x({x[0]}, {x[1]})")
            bits = self.cse(f"(({r4}[0].to(tl.uint64) << 32) | {r4}[1].to(tl.uint64))")
            return f"({bits} % {raw[3] - raw[2]}).to(tl.int64) + {raw[2]}"
        if op == "add" and dtype == torch.bool:
            # torch's bool + bool is logical or; Triton's int1 add wraps (True + True = False)
            return f"{x[0]} | {x[1]}"
        if op in binary:
            return f"{x[0]} {binary[op]} {x[1]}"
        if op == "truediv":
            return f"{x[0]} / {x[1]}"
        if op == "floordiv":
            if is_float:
                return self._floor_divide_float(*x)
            a, b = x
            return f"tl.where((({a} % {b}) != 0) & (({a} < 0) != ({b} < 0)), {a} // {b} - 1, {a} // {b})"
        if op == "truncdiv":
            if is_float:
                q = f"({x[0]} / {x[1]})"
                return f"tl.where({q} < 0, tl.ceil({q}), tl.floor({q}))"
            return f"{x[0]} // {x[1]}"
        if op == "remainder":
            a, b = x
            if is_float:
                # aten's float remainder: the truncated remainder (fmod; Triton's % on floats),
                # moved by b when its sign differs from b's (1.0 % 0.1 is 0.0999..., not the
                # 0.0 or -5.6e-17 of a - floor(a / b) * b)
                mod = self.cse(self._fmod_float(a, b))
                return f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {mod} + {b}, {mod})"
            return f"tl.where((({a} % {b}) != 0) & ((({a} % {b}) < 0) != ({b} < 0)), ({a} % {b}) + {b}, {a} % {b})"
        if op == "fmod":
            # torch.fmod, C's (truncated) remainder: Triton's % for ints
            return self._fmod_float(*x) if is_float else f"{x[0]} % {x[1]}"
        if op == "ipow":
            # integer power (lowering._pow): the generated module's _ipow, one squaring per bit
            signed = dtype.is_signed
            bits = torch.iinfo(dtype).bits - (1 if signed else 0)
            return f"_ipow({x[0]}, {x[1]}, {bits}, {signed})"
        if op in ("lshift", "rshift"):
            return f"{x[0]} {'<<' if op == 'lshift' else '>>'} {x[1]}"
        if op in _F64_MATH:
            if lib:
                return f"libdevice.{op}({', '.join(x)})"
            # the interpreter has no libdevice: a float64 formula (exact enough for a result of
            # float32 or narrower, which the lowerings guarantee), rounded once
            args = [self.cse(f"{v}.to(tl.float64)") for v in x]
            return f"({_F64_MATH[op](self.cse, *args)}).to({tl_dtype(dtype)})"
        if op == "signbit":
            bits = {torch.float64: "tl.int64", torch.float16: "tl.int16", torch.bfloat16: "tl.int16"}
            if not in_float:
                return f"{x[0]} < 0"
            return f"{x[0]}.to({bits.get(raw[0].dtype, 'tl.int32')}, bitcast=True) < 0"
        if op == "neg":
            # Triton's unary minus of a float is 0 - x, which leaves +0.0 positive (eager: -0.0);
            # x * -1.0 flips the sign bit of every value (LLVM folds it into a negation)
            return f"{x[0]} * -1.0" if is_float else f"-{x[0]}"
        if op == "abs":
            return f"tl.abs({x[0]})"
        if op == "reciprocal":
            return f"1.0 / {x[0]}"
        if op == "relu":
            return f"tl.where({x[0]} < 0, 0, {x[0]})" if in_float else f"tl.maximum({x[0]}, 0)"
        if op in ("maximum", "minimum"):
            cmp = ">" if op == "maximum" else "<"
            if is_float:
                return f"tl.where(({x[0]} {cmp} {x[1]}) | ({x[0]} != {x[0]}), {x[0]}, {x[1]})"
            return f"tl.{op}({x[0]}, {x[1]})"
        if op in ("fmax", "fmin"):
            cmp = ">" if op == "fmax" else "<"
            return f"tl.where(({x[0]} {cmp} {x[1]}) | ({x[1]} != {x[1]}), {x[0]}, {x[1]})"
        if op == "rsqrt" and lib and dtype == torch.float32 and torch.version.hip is None:
            return _PTX_RSQRT.format(x[0])
        if op in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "sigmoid", "erf", "floor", "ceil"):
            if op in ("floor", "ceil") and not is_float:
                return x[0]
            return f"tl.{op}({x[0]})"
        if op == "log10":
            return f"tl.log({x[0]}) * 0.4342944819032518"
        if op == "expm1":
            if lib:
                return f"libdevice.expm1({x[0]})"
            return self._expm1_without_libdevice(x[0])
        if op == "log1p":
            if lib:
                return f"libdevice.log1p({x[0]})"
            # without libdevice: log1p = log(u) * x / (u - 1), u = 1 + x (Goldberg), exact to a few
            # ulp where log(1 + x) loses every digit for |x| < 1e-8; x where u rounds to 1, inf at inf
            u = self.cse(f"1.0 + {x[0]}")
            return (
                f'tl.where({u} == 1.0, {x[0]}, tl.where({u} == float("inf"), {u}, '
                f"tl.log({u}) * ({x[0]} / ({u} - 1.0))))"
            )
        if op == "tanh":
            if lib:
                return f"libdevice.tanh({x[0]})"
            # without libdevice: tanh|x| = -t / (t + 2), t = expm1(-2|x|) in Kahan's form, a few ulp
            # everywhere; 2 * sigmoid(2x) - 1 lost every digit for |x| < 1e-8 (tanh(1e-10) was 0).
            # Zeros keep their sign, NaN stays NaN
            t = self.cse(self._expm1_without_libdevice(self.cse(f"-2.0 * tl.abs({x[0]})")))
            r = self.cse(f"({t} * -1.0) / ({t} + 2.0)")
            return f"tl.where({x[0]} == 0, {x[0]}, tl.where({x[0]} < 0, {r} * -1.0, {r}))"
        if op == "tan":
            return f"libdevice.tan({x[0]})" if lib else f"tl.sin({x[0]}) / tl.cos({x[0]})"
        if op == "trunc":
            if not is_float:
                return x[0]
            return f"libdevice.trunc({x[0]})" if lib else f"tl.where({x[0]} < 0, tl.ceil({x[0]}), tl.floor({x[0]}))"
        if op == "round":
            if not is_float:
                return x[0]
            if lib:
                return f"libdevice.nearbyint({x[0]})"
            f = f"tl.floor({x[0]} + 0.5)"
            return f"tl.where((({f} - {x[0]}) == 0.5) & (({f} % 2) != 0), {f} - 1.0, {f})"
        if op == "sign":
            # as torch: (0 < x) - (x < 0), so sign(nan) is 0
            # (on the GPU a nested tl.where of the literals 1 / -1 / 0 gave 1 for negative inputs)
            if dtype == torch.bool:
                return x[0]
            return f"({x[0]} > 0).to({tl_dtype(dtype)}) - ({x[0]} < 0).to({tl_dtype(dtype)})"
        if op == "pow":
            a, b = x
            if lib:
                return f"libdevice.pow({a}, {b})"
            # |a|^b in float64 (exact enough to round once), the sign of a (-0.0 included, and given
            # by a product: Triton's unary minus is 0 - x, which leaves a zero positive) for an
            # odd integer b, NaN for a negative finite base and a non-integer b; as C's pow,
            # pow(x, 0) = pow(1, y) = pow(-1, +-inf) = 1 and pow(-inf, y) = |(-inf)^y| for y not
            # an odd integer (+inf for y > 0, +0 for y < 0)
            mag = self.cse(f"tl.exp({b}.to(tl.float64) * tl.log(tl.abs({a}).to(tl.float64)))")
            whole = self.cse(f"tl.floor({b}) == {b}")
            odd = self.cse(f"{whole} & ((tl.abs({b}) % 2) == 1)")
            aneg = self.cse(f"({a} < 0) | (({a} == 0) & (1.0 / {a} < 0))")
            signed = f'tl.where({aneg} & {odd}, {mag} * -1.0, tl.where(({a} < 0) & ({a} != -float("inf")) & ~{whole}, float("nan"), {mag}))'
            one = f'({b} == 0) | ({a} == 1) | (({a} == -1) & (tl.abs({b}) == float("inf")))'
            return f"tl.where({one}, 1.0, {signed}).to({tl_dtype(dtype)})"
        if op in ("logical_and", "logical_or", "logical_xor"):
            sym = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}[op]
            return f"({x[0]} != 0) {sym} ({x[1]} != 0)"
        if op == "logical_not":
            return f"{x[0]} == 0"
        if op == "bitwise_not":
            if dtype == torch.bool:
                return f"{x[0]} == 0"
            if not dtype.is_signed:
                # xor with every bit set, of the same unsigned type: the interpreter's ``~`` is an
                # xor with -1, which NumPy refuses for an unsigned array (uint8's ``~200`` failed)
                ones = (1 << (torch.iinfo(dtype).bits)) - 1
                return f"{x[0]} ^ tl.full([], {ones}, {tl_dtype(dtype)})"
            return f"~{x[0]}"
        if op == "isnan":
            return f"{x[0]} != {x[0]}"
        if op == "isinf":
            return f'tl.abs({x[0]}) == float("inf")'
        raise NotImplementedError(f"no Triton codegen for ops.{op}")

    # ------------------------------------------------------------------ scans
    def codegen_scan(self, a, vals) -> str:
        """Inclusive scan (``sum`` / ``prod`` / ``logsumexp``) of a value along the row. Persistent:
        ``tl.cumsum`` / ``tl.cumprod`` / an associative scan with the log-add-exp combine over the
        whole row. Looped: the same scan of each chunk combined with a per-row carry, the
        combination of every earlier chunk (a ``[XBLOCK, 1]`` accumulator made before the loop,
        advanced by the chunk's reduction after its scan), so a row of any length — symbolic
        included — is scanned in one pass (Inductor splits long scans the same way). Under the
        interpreter a float32 scan (sum, product, log-add-exp) combines and carries in float64:
        it scans a row one element after another, so a float32 running sum's error grows with the
        row (2.2e-4 at 3000 elements against eager's 3.8e-6; a logcumsumexp of 5000 rows 2.3e-5
        against 4.8e-7), and eager's CPU kernels accumulate float32 in float64 (ATen's CPU
        acc_type)."""
        dtype, stype, value = a
        vb = self.cse(f"tl.broadcast_to({vals[value.idx]}, [XBLOCK, RBLOCK]).to({tl_dtype(dtype)})")
        ident = {"sum": "0", "prod": "1", "logsumexp": 'float("-inf")'}[stype]
        m = self.cse(f"tl.where(xmask & rmask, {vb}, {ident})")
        wide = self.interpret and dtype == torch.float32
        sdt = "tl.float64" if wide else tl_dtype(dtype)
        if wide:
            m = self.cse(f"{m}.to(tl.float64)")
        if stype == "logsumexp":
            scanned = f"tl.associative_scan({m}, 1, _logaddexp_combine)"
        else:
            scanned = f"tl.{'cumsum' if stype == 'sum' else 'cumprod'}({m}, 1)"
        if self.persistent:
            return self.cse(f"{scanned}.to({tl_dtype(dtype)})" if wide else scanned)
        carry = self.newvar()
        init_at = self.loop_start
        self.lines.insert(init_at, "    " * (self.indent - 1) + f"{carry} = tl.full([XBLOCK, 1], {ident}, {sdt})")
        self._shift_stores(init_at)
        chunk = self.newvar()
        self.emit(f"{chunk} = {scanned}")
        out = self.newvar()
        if stype == "sum":
            self.emit(f"{out} = {chunk} + {carry}")
            self.emit(f"{carry} = {carry} + tl.sum({m}, 1)[:, None]")
        elif stype == "prod":
            self.emit(f"{out} = {chunk} * {carry}")
            self.emit(f"{carry} = {carry} * tl.reduce({m}, 1, _prod_combine)[:, None]")
        else:
            self.emit(f"{out} = _logaddexp_combine({chunk}, {carry})")
            self.emit(f"{carry} = _logaddexp_combine({carry}, tl.reduce({m}, 1, _logaddexp_combine)[:, None])")
        if wide:
            return self.cse(f"{out}.to({tl_dtype(dtype)})")
        return out

    # ------------------------------------------------------------------ reductions
    def codegen_reduction(self, a, vals) -> str:
        dtype, src_dtype, rtype, value = a
        v = vals[value.idx]
        if rtype == "sumexp":
            return self._codegen_sumexp(v, dtype)
        if rtype == "sqdev":
            return self._codegen_sqdev(v, dtype)
        acc_dt = dtype if rtype not in ("argmax", "argmin") else src_dtype
        if rtype in ("argmax", "argmin"):
            acc_dt = torch.float32 if src_dtype in (torch.float16, torch.bfloat16) else src_dtype
        ident = _identity(rtype, acc_dt)
        tdt = tl_dtype(acc_dt)
        vb = self.cse(f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])")
        is_float = acc_dt.is_floating_point
        if self.persistent:
            # CSE'd: two nodes reducing the same value the same way (a softmax's amax and the
            # maximum inside its sumexp) share one reduction
            m = self.cse(f"tl.where(xmask & rmask, {vb}, {ident})")
            return self.cse(self.final_reduce(rtype, m, "rindex", is_float, tdt))
        if (rtype, vb, tdt) in self.looped_of:
            # the same reduction of the same value earlier in this loop (var_mean's and a layer
            # norm's sums of one row): one accumulator
            return self.looped_of[(rtype, vb, tdt)]
        out = self.looped_of[(rtype, vb, tdt)] = self.newvar()
        if rtype == "max" and is_float:
            shared = self.row_max_of_sumexp.get((vb, tdt))
            if shared is not None:
                # a looped sumexp of the same value keeps this row maximum already (its running
                # maximum): no second accumulator, no second maximum per element
                self.loop_pending_reductions.append(lambda: self.emit(f"{out} = {shared}"))
                return out
        # looped: accumulators before the loop, update inside, finish after it
        accv = self.newvar()
        redirect: dict = {}  # "row_max": set when a sumexp of the same value takes this maximum over
        init_at = self.loop_start
        self.lines.insert(init_at, "    " * (self.indent - 1) + f"{accv} = tl.full([XBLOCK, RBLOCK], {ident}, {tdt})")
        self._shift_stores(init_at)
        acci = None
        if rtype in ("argmax", "argmin"):
            acci = self.newvar()
            self.lines.insert(
                init_at + 1, "    " * (self.indent - 1) + f"{acci} = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int64)"
            )
            self._shift_stores(init_at + 1)
        vv = f"{vb}.to({tdt})"
        if rtype == "sum":
            self.emit(f"{accv} = tl.where(xmask & rmask, {accv} + {vv}, {accv})")
        elif rtype == "prod":
            self.emit(f"{accv} = tl.where(xmask & rmask, {accv} * {vv}, {accv})")
        elif rtype == "any":
            self.emit(f"{accv} = tl.where(xmask & rmask, {accv} | ({vv} != 0), {accv})")
        elif rtype in ("max", "min"):
            if is_float:  # NaN-propagating (torch: a NaN is the extreme); one max.NaN instruction
                fn = "maximum" if rtype == "max" else "minimum"
                self.emit(
                    f"{accv} = tl.where(xmask & rmask, tl.{fn}({accv}, {vv}, "
                    f"propagate_nan=tl.PropagateNan.ALL), {accv})"
                )
                if rtype == "max":
                    # a sumexp of the same value later in this loop takes this maximum over
                    # (_codegen_sumexp): it drops the lane accumulator and finishes from its own
                    self.looped_max[(vb, tdt)] = (accv, redirect)
            else:
                cmp = ">" if rtype == "max" else "<"
                self.emit(f"{accv} = tl.where(xmask & rmask & ({vv} {cmp} {accv}), {vv}, {accv})")
        else:
            cmp = ">" if rtype == "argmax" else "<"
            # each lane keeps its first extreme value: the first element it sees (even one equal to
            # the identity, e.g. a row of -inf or of zeros), then strictly better ones, and a NaN
            # once one appears (torch: NaN is the extreme)
            better = f"({vv} {cmp} {accv})"
            if is_float:
                better = f"({better} | (({vv} != {vv}) & ({accv} == {accv})))"
            self.emit(f"_take = xmask & rmask & (({acci} == 2147483647) | {better})")
            self.emit(f"{accv} = tl.where(_take, {vv}, {accv})")
            self.emit(f"{acci} = tl.where(_take, rindex.to(tl.int64), {acci})")

        def finish():
            if "row_max" in redirect:
                self.emit(f"{out} = {redirect['row_max']}")
                return
            self.emit(f"{out} = " + self.final_reduce(rtype, accv, acci, is_float, tdt))

        self.loop_pending_reductions.append(finish)
        return out

    def _codegen_sumexp(self, v: str, dtype: torch.dtype) -> str:
        """``Σ exp(v - max v)`` per row (``Reduction`` type sumexp). Persistent: the row's maximum,
        then the sum, both from registers. Looped: the online-softmax recurrence in one pass — a
        running row maximum ``m`` (one block reduction per iteration) and per-lane sums of
        ``exp(v - m)``, rescaled by ``exp(m_old - m_new)`` when ``m`` grows; a float max
        reduction of the same value in the same loop (the amax beside every softmax, log_softmax
        and logsumexp) is that running maximum, so the row costs one maximum and one ``exp`` per
        element. Masked positions enter as ``-inf`` and the exponent is taken against
        ``m`` with ``-inf`` replaced by 0, so no per-element guard is needed: a looped row of only
        ``-inf`` sums to 0 (never ``exp(-inf + inf)``; persistent: 0 too in a ``reduce_only`` kernel,
        else its length, see below), a row
        whose maximum is ``+inf`` or that holds a NaN gives NaN (eager: ``exp(inf - inf)``)."""
        tdt = tl_dtype(dtype)
        vb0 = self.cse(f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])")
        vb = self.cse(f"{vb0}.to({tdt})")
        key = (vb0, tdt)
        if key in self.sumexp_of:
            # softmax, log_softmax, logsumexp and a cross-entropy of the same rows: one normalizer
            return self.sumexp_of[key]
        out = self.sumexp_of[key] = self.newvar()

        def finish_from(mv: str, terms: str) -> None:
            self.emit(f"{out} = tl.sum({terms}, 1)[:, None]")
            self.emit(f'{out} = tl.where({mv} == float("inf"), float("nan"), {out})')

        if self.persistent and self.reduce_only:
            # no per-element output shares the exp: the exponent against the maximum with -inf
            # replaced by 0, no per-element guard (a row of only -inf sums to 0, as looped). H200,
            # 65536 rows of 4000 bf16: 145.8 -> 133.3 µs against the guarded form below
            mx = self.cse(
                self.final_reduce(
                    "max", self.cse(f'tl.where(xmask & rmask, {vb0}, float("-inf"))'), "rindex", True, tdt
                )
            )
            mx = self.cse(f"{mx}.to({tdt})")
            base = self.cse(f'tl.where({mx} == float("-inf"), 0.0, {mx})')
            finish_from(mx, f"tl.where(xmask & rmask, tl.exp({vb} - {base}), 0.0)")
            return out
        if self.persistent:
            # the row maximum as a max reduction of the same value emits it: shared (CSE) with the
            # amax a softmax or logsumexp computes beside it. NaN-propagating: a NaN row sums to NaN.
            # The terms are exp(v - max) exactly as a softmax's output computes them, so the
            # compiler shares that exp between the sum and the output (one exp per element; a
            # different form here cost a 32768 x 4096 softmax 0.136 -> 0.149 ms on the H200); a
            # row of only -inf then counts 1 per element (exp(-inf + inf) is taken as 1)
            mx = self.cse(
                self.final_reduce(
                    "max", self.cse(f'tl.where(xmask & rmask, {vb0}, float("-inf"))'), "rindex", True, tdt
                )
            )
            mx = self.cse(f"{mx}.to({tdt})")
            finish_from(mx, f"tl.where(xmask & rmask, tl.where({vb} == {mx}, 1.0, tl.exp({vb} - {mx})), 0.0)")
            return out
        # the masked value (-inf off the row), shared with a max reduction of the same value
        m = self.cse(f'tl.where(xmask & rmask, {vb}, float("-inf"))')
        # the running maximum is per row ([XBLOCK, 1], one block reduction per iteration) and the
        # sums per lane, rescaled by the row's exp(m_old - m_new): one exp per element (a per-lane
        # maximum needs two, which made long rows ALU-bound)
        accm, accs, nm = self.newvar(), self.newvar(), self.newvar()
        init_at = self.loop_start
        pad = "    " * (self.indent - 1)
        self.lines.insert(init_at, pad + f'{accm} = tl.full([XBLOCK, 1], float("-inf"), {tdt})')
        self._shift_stores(init_at)
        self.lines.insert(init_at + 1, pad + f"{accs} = tl.full([XBLOCK, RBLOCK], 0, {tdt})")
        self._shift_stores(init_at + 1)
        self.emit(f"{nm} = tl.maximum({accm}, {self._nan_extreme(m, 'max')}, propagate_nan=tl.PropagateNan.ALL)")
        base = self.newvar()
        self.emit(f'{base} = tl.where({nm} == float("-inf"), 0.0, {nm})')
        self.emit(f"{accs} = {accs} * tl.exp({accm} - {base}) + tl.exp({m} - {base})")
        self.emit(f"{accm} = {nm}")
        # a max reduction of the same value: emitted earlier in this loop, its lane accumulator
        # goes (its lines blanked, its finisher reads the running maximum); emitted later, it
        # finds the running maximum here (codegen_reduction)
        earlier = self.looped_max.pop(key, None)
        if earlier is not None:
            accv, redirect = earlier
            redirect["row_max"] = accm
            for i, line in enumerate(self.lines):
                if line is not None and line.lstrip().startswith(f"{accv} = "):
                    self.lines[i] = None  # dropped when the kernel is assembled
        self.row_max_of_sumexp[key] = accm

        def finish():
            finish_from(accm, accs)

        self.loop_pending_reductions.append(finish)
        return out

    def _codegen_sqdev(self, v: str, dtype: torch.dtype) -> str:
        """``Σ (v - mean v)²`` per row (``Reduction`` type sqdev, Inductor's Welford M2), in
        ``dtype``. Persistent: the row's mean from the registers (its sum is the one a mean
        reduction of the same value emits, shared by CSE), then the sum of squared deviations.
        Looped, one pass (Welford) over the values less the row's first one (a shift that keeps
        the running means small, see below): per lane a running mean and M2; at iteration ``k`` every lane
        still inside the row has seen ``k + 1`` elements, so the update weight ``1 / (k + 1)`` is
        one scalar per iteration (no per-element count or division); after the loop the lanes are
        combined by Chan's rule — lane ``j`` holds ``c_j = ceil((rnumel - j) / RBLOCK)`` elements,
        ``mean = Σ c_j·mean_j / rnumel`` and ``M2 = Σ (M2_j + c_j·(mean_j - mean)²)`` — using only
        sums, no custom combine. An infinite or NaN element gives NaN (as eager's variance)."""
        tdt = tl_dtype(dtype)
        vb = self.cse(f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])")
        if self.persistent:
            total = self.cse(
                self.final_reduce("sum", self.cse(f"tl.where(xmask & rmask, {vb}, 0)"), "rindex", True, tdt)
            )
            mean = self.cse(f"{total} / rnumel")
            dev = self.cse(f"tl.where(xmask & rmask, {vb} - {mean}, 0.0)")
            return self.cse(f"tl.sum({dev} * {dev}, 1)[:, None]")
        if ("sqdev", vb, tdt) in self.looped_of:
            return self.looped_of[("sqdev", vb, tdt)]
        out, accmean, accm2, delta = self.newvar(), self.newvar(), self.newvar(), self.newvar()
        shift, dev = self.newvar(), self.newvar()
        self.looped_of[("sqdev", vb, tdt)] = out
        init_at = self.loop_start
        pad = "    " * (self.indent - 1)
        inits = (
            f"{shift} = tl.full([XBLOCK, 1], 0, {tdt})",
            f"{accmean} = tl.full([XBLOCK, RBLOCK], 0, {tdt})",
            f"{accm2} = tl.full([XBLOCK, RBLOCK], 0, {tdt})",
        )
        for k, line in enumerate(inits):
            self.lines.insert(init_at + k, pad + line)
            self._shift_stores(init_at + k)
        vv = self.cse(f"{vb}.to({tdt})")
        # the values are taken relative to the row's first one (only iteration 0's lane 0 adds to
        # the shift): the lanes' running means stay near 0 instead of near the row's mean, so
        # their rounding error scales with the spread, not with the mean (unshifted, rows of mean
        # 1e4 and spread 1 lost 1e-4 to 2e-4 of the variance in float32; two-pass: 7e-7), and a
        # constant row's squared deviations are exactly 0
        self.emit(f"{shift} = {shift} + tl.sum(tl.where(rindex == 0, {vv}, 0.0), 1)[:, None]")
        self.emit(f"{dev} = {vv} - {shift}")
        # the iteration's count as a float of the accumulator's type (under the interpreter the
        # loop index is a Python int, whose 1.0 / count is already a float64)
        count = "(roffset // RBLOCK + 1)"
        if dtype == torch.float64 and not self.interpret:
            count = f"{count}.to(tl.float64)"
        self.emit(f"{delta} = {dev} - {accmean}")
        self.emit(f"{accmean} = tl.where(xmask & rmask, {accmean} + {delta} * (1.0 / {count}), {accmean})")
        self.emit(f"{accm2} = tl.where(xmask & rmask, {accm2} + {delta} * ({dev} - {accmean}), {accm2})")

        def finish():
            cnt, mean = self.newvar(), self.newvar()
            self.emit(f"{cnt} = ((rnumel - tl.arange(0, RBLOCK)[None, :] + (RBLOCK - 1)) // RBLOCK).to({tdt})")
            self.emit(f"{mean} = tl.sum({accmean} * {cnt}, 1)[:, None] / rnumel")
            self.emit(f"{out} = tl.sum({accm2} + {cnt} * ({accmean} - {mean}) * ({accmean} - {mean}), 1)[:, None]")

        self.loop_pending_reductions.append(finish)
        return out

    def _shift_stores(self, at: int) -> None:
        self.stores = [(n, li + 1 if li >= at else li) for n, li in self.stores]

    def _nan_extreme(self, m: str, rtype: str) -> str:
        """Row max/min of float ``m`` (``[XBLOCK, RBLOCK]`` -> ``[XBLOCK, 1]``) with NaN as the
        extreme (torch's rule). On the GPU one reduction tree with a NaN-propagating combine
        (``max.NaN``); under the interpreter, which runs a custom combine element by element in
        Python, NumPy's own max/min plus an is-NaN max (two vectorized reductions)."""
        if self.interpret:
            return f'tl.where(tl.max(({m} != {m}).to(tl.int8), 1) > 0, float("nan"), tl.{rtype}({m}, 1))[:, None]'
        return f"tl.reduce({m}, 1, _{rtype}_nan_combine)[:, None]"

    def final_reduce(self, rtype: str, m: str, idx: str | None, is_float: bool, tdt: str) -> str:
        if rtype == "sum":
            return f"tl.sum({m}, 1)[:, None]"
        if rtype == "prod":
            return f"tl.reduce({m}, 1, _prod_combine)[:, None]"
        if rtype == "any":
            return f"(tl.max(({m} != 0).to(tl.int8), 1) > 0)[:, None]"
        if rtype in ("max", "min"):
            if is_float:
                return self._nan_extreme(m, rtype)
            return f"tl.{rtype}({m}, 1)[:, None]"
        # argmax / argmin: first index of the extreme value; NaN counts as the extreme
        best = f"tl.{'max' if rtype == 'argmax' else 'min'}({m}, 1)[:, None]"
        ids = "tl.broadcast_to(rindex.to(tl.int64), [XBLOCK, RBLOCK])" if idx == "rindex" else idx
        hit = f"({m} == {best})"
        if is_float:
            hit = f"({hit} | ({m} != {m}))"
            anynan = f"(tl.max(({m} != {m}).to(tl.int8), 1) > 0)[:, None]"
            hit = f"tl.where({anynan}, {m} != {m}, {m} == {best})"
        return f"tl.min(tl.where({hit}, {ids}, 9223372036854775807), 1)[:, None]"


def _atan_f64(c, t: str) -> str:
    """atan of a float64 value ``t`` as Triton source (no libdevice), intermediates named through
    ``c`` (the kernel's CSE): |t| > 1 reflects to pi/2 - atan(1/|t|), |t| > tan(pi/8) shifts to
    pi/4 + atan((|t|-1)/(|t|+1)), and the reduced argument (|u| <= 0.4143) goes through 14 terms
    of atan's Taylor series (error < 1e-12)."""
    a = c(f"tl.abs({t})")
    big = c(f"{a} > 1.0")
    r = c(f"tl.where({big}, 1.0 / {a}, {a})")
    mid = c(f"{r} > 0.41421356237309503")
    u = c(f"tl.where({mid}, ({r} - 1.0) / ({r} + 1.0), {r})")
    z = c(f"{u} * {u}")
    poly = "0.0"
    for k in reversed(range(14)):
        poly = c(f"{(-1) ** k / (2 * k + 1)!r} + {z} * {poly}")
    v = c(f"{u} * {poly}")
    v = c(f"tl.where({mid}, 0.7853981633974483 + {v}, {v})")
    v = c(f"tl.where({big}, 1.5707963267948966 - {v}, {v})")
    return f"tl.where({t} < 0, -{v}, {v})"


def _atan2_f64(c, y: str, x: str) -> str:
    """atan2 from atan of |y|/|x| (both infinite: pi/4, both zero: 0), reflected for a negative
    (or -0.0) x and signed as y (signed zeros as C's atan2)."""
    ay, ax = c(f"tl.abs({y})"), c(f"tl.abs({x})")
    ratio = c(
        f"tl.where(({ay} == float('inf')) & ({ax} == float('inf')), 1.0, "
        f"tl.where(({ay} == 0) & ({ax} == 0), 0.0, {ay} / {ax}))"
    )
    r = c(_atan_f64(c, ratio))
    xneg = c(f"({x} < 0) | (({x} == 0) & (1.0 / {x} < 0))")
    yneg = c(f"({y} < 0) | (({y} == 0) & (1.0 / {y} < 0))")
    r = c(f"tl.where({xneg}, 3.141592653589793 - {r}, {r})")
    return f"tl.where({yneg}, -{r}, {r})"


def _asin_f64(c, x: str) -> str:
    return _atan_f64(c, c(f"{x} / tl.sqrt(1.0 - {x} * {x})"))


# float32 rsqrt on NVIDIA GPUs: the instruction libdevice's ``__nv_rsqrtf`` compiles to (Triton
# compiles with ``__CUDA_FTZ`` set, so the flush-to-zero form), emitted directly. Same binary code,
# but a kernel without any libdevice call skips linking libdevice into its LLVM module, which
# Triton does per compile by parsing the whole libdevice bitcode: 0.04-0.08 s of each compile of a
# normalization kernel (measured on sm_90 targets; 0.115 -> 0.072 s for a one-line kernel).
_PTX_RSQRT = (
    'tl.inline_asm_elementwise("rsqrt.approx.ftz.f32 $0, $1;", "=f,f", [({}).to(tl.float32)], '
    "dtype=tl.float32, is_pure=True, pack=1)"
)

# ops with a libdevice function on the GPU and a float64 formula under the interpreter; each takes
# the CSE function and its operands' names
_F64_MATH = {
    "atan": _atan_f64,
    "atan2": _atan2_f64,
    "asin": _asin_f64,
    "acos": lambda c, x: f"1.5707963267948966 - {c(_asin_f64(c, x))}",
    "sinh": lambda c, x: (
        f"tl.where(tl.abs({x}) < 1e-5, {x} + {x} * {x} * {x} / 6.0, 0.5 * (tl.exp({x}) - tl.exp(-{x})))"
    ),
    "cosh": lambda c, x: f"0.5 * (tl.exp({x}) + tl.exp(-{x}))",
    "asinh": lambda c, x: (
        f"tl.where(tl.abs({x}) < 1e-5, {x} - {x} * {x} * {x} / 6.0, "
        f"tl.where({x} < 0, -1.0, 1.0) * tl.log(tl.abs({x}) + tl.sqrt({x} * {x} + 1.0)))"
    ),
    "acosh": lambda c, x: f"tl.where({x} < 1.0, float('nan'), tl.log({x} + tl.sqrt({x} * {x} - 1.0)))",
    "atanh": lambda c, x: (
        f"tl.where(tl.abs({x}) < 1e-5, {x} + {x} * {x} * {x} / 3.0, 0.5 * tl.log((1.0 + {x}) / (1.0 - {x})))"
    ),
    "hypot": lambda c, a, b: f"tl.sqrt({a} * {a} + {b} * {b})",
}


def G_dtype(name: str) -> torch.dtype:
    """dtype of buffer ``name`` in the graph being compiled."""
    from ..ir import graph_context as G

    return G.dtype_of(name)
