"""Triton kernel emission for one fused KernelGroup (after Inductor's simd.py / triton.py).

Layout of a generated kernel:

* pointwise (rnumel == 1): 1-D blocks, ``xindex = xoffset + tl.arange(0, XBLOCK)``, ``xmask``, or
  2-D ``[YBLOCK, XBLOCK]`` tiles when an access is contiguous along an outer dimension
  (``simd.select_tiling``);
* reduction: 2-D blocks ``[XBLOCK, RBLOCK]`` with ``xindex`` as a column and ``rindex`` as a row,
  persistent or looped (``triton_reductions``).

``TritonKernelCodegen`` is assembled from focused parts: index expressions and masks
(``triton_indexing.IndexingMixin``), loads, stores and constants (``triton_memory.MemoryMixin``),
reductions and scans (``triton_reductions.ReductionMixin``); math ops come from the op table
(``triton_ops``), launch configs and eviction hints from ``heuristics``, and common
subexpressions go through one table (``cse.KernelCSE``). This module holds the kernel's state,
the per-node dispatch, the reduction loops, and the assembly of the source and its launch facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import config
from .. import sizevars as SV
from ..ir import nodes as ir
from ..ir.loop_body import BodyValue
from ..scheduler import KernelGroup
from . import heuristics as H
from . import triton_ops as ops
from .cse import KernelCSE
from .simd import select_tiling, tiled_var_map
from .triton_indexing import IndexingMixin, index_values_fit_int32, storages_fit_int32
from .triton_memory import MemoryMixin
from .triton_reductions import ReductionMixin


@dataclass
class KernelArgs:
    """Pointer arguments of a kernel: buffer name -> parameter name, in first-use order.

    ``inplace`` (output buffer -> input buffer): outputs stored into their input's memory
    (Inductor's ``in_out_ptr``): one parameter serves both, listed under the input's name."""

    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    inplace: dict[str, str] = field(default_factory=dict)

    def input(self, name: str) -> str:
        """The parameter a load of buffer ``name`` reads through (made on first use)."""
        if name in self.outputs:
            return self.outputs[name]
        if name not in self.inputs:
            shared = name in self.inplace.values()
            self.inputs[name] = f"in_out_ptr{len(self.inputs)}" if shared else f"in_ptr{len(self.inputs)}"
        return self.inputs[name]

    def output(self, name: str) -> str:
        """The parameter a store to buffer ``name`` writes through (made on first use)."""
        if name in self.inplace:
            return self.input(self.inplace[name])
        if name not in self.outputs:
            self.outputs[name] = f"out_ptr{len(self.outputs)}"
        return self.outputs[name]


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
    # compound divisor hoisted to the host); grid extents that are symbolic name the parameter
    # holding them
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


def kernel_name(group: KernelGroup, index: int, persistent: bool) -> str:
    """The name of a generated kernel, in Inductor's form (``triton_poi_fused_add_mul_0``):
    ``tf_<kind>_fused_<ops>_<index>``, kind ``poi`` (pointwise, tiled or not), ``per`` (a
    persistent reduction: a whole row per block) or ``red`` (a looped reduction); ops the body's
    math ops and reduction types in first-use order (at most ``config.KERNEL_NAME_MAX_OPS``),
    index the kernel's position in its graph, so the name is unique there. A profiler's kernel
    list then says what each kernel does (``tf_red_fused_max_sumexp_log_sub_3``)."""
    kind = "poi" if group.rnumel == 1 else ("per" if persistent else "red")
    names: list[str] = []
    for n in group.nodes:
        for bn in n.body.nodes:
            op = bn.args[2] if bn.op == "reduction" and len(bn.args) > 2 else bn.op
            if bn.op == "store":  # an atomic update names the kernel (index_add: atomic_add)
                op = bn.args[3] if len(bn.args) > 3 and bn.args[3] else None
            if not isinstance(op, str) or op in _NAME_SKIP:
                continue
            op = "".join(c if c.isalnum() or c == "_" else "_" for c in op.lower()).strip("_")
            if op and op not in names:
                names.append(op)
    names = names[: config.KERNEL_NAME_MAX_OPS]
    return f"tf_{kind}_fused_{'_'.join(names)}_{index}" if names else f"tf_{kind}_{index}"


class TritonKernelCodegen(IndexingMixin, MemoryMixin, ReductionMixin):
    """Generates the source of one kernel for a KernelGroup.

    ``keep``: the group's buffers read or returned outside this kernel (their stores stay);
    ``inplace``: output -> input buffers the wrapper lets share memory (used only by pointwise
    kernels). ``generate()`` returns the ``GeneratedKernel``."""

    def __init__(
        self, group: KernelGroup, name: str, device: torch.device, keep: set[str], inplace: dict[str, str] | None = None
    ):
        self.g, self.name, self.device = group, name, device
        self.interpret = device.type != "cuda"
        # buffers read or returned outside this kernel, and buffers updated in place
        self.keep = set(keep) | {n.buf.target.name for n in group.nodes if isinstance(n.buf, ir.MutationBuffer)}
        self.args = KernelArgs()
        self._inplace_asked = dict(inplace or {})
        self.lines: list[str | None] = []
        self.indent = 1
        self.counter = 0
        self.reduction = group.rnumel != 1
        self.alu_ops = 0  # arithmetic ops per element of the body, set when it is generated
        self.sv = SV.current()
        # symbolic extents are kernel parameters; size symbols in index expressions become ks<i>
        self.dyn_numel = not isinstance(group.numel, int)
        self.dyn_rnumel = not isinstance(group.rnumel, int)
        self.size_symbols: dict = {}  # graph size symbol -> kernel parameter symbol (ks<i>)
        self.precomputed: dict = {}  # compound size expression over ks<i> -> parameter ps<i>
        self.hint = H.reduction_hint(group)
        self.has_scan = any(bn.op == "scan" for n in group.nodes for bn in n.body.nodes)
        # a symbolic row length is persistent only when its proven upper bound is small enough
        self.rnumel_max = self.sv.upper_bound(group.rnumel) if self.reduction else 1
        self.persistent = H.is_persistent(self.reduction, self.rnumel_max, self.hint, self.has_scan)
        # a reduction kernel storing only per-row results: no pointwise node inside its loop
        # ('xr'), so each element is read once, for the reductions (configs, eviction hints, sumexp)
        self.reduce_only = (
            self.reduction and not self.has_scan and not any(kind == "xr" for kind, *_ in group.maps.values())
        )
        self._init_loop_state()
        self.index_dtype = self._choose_index_dtype()
        self._choose_tiling()
        # outputs stored into a dying input's memory (the wrapper's choice, ``inplace_candidates``):
        # only in pointwise kernels (1-D or 2-D tiles), where each output element is computed
        # from the input element at its own position, loaded by the same program (the programs'
        # blocks do not overlap), so the store of an element waits on its load by data
        # dependence whatever layouts Triton gives the loaded and stored blocks; a reduction's
        # loop loads and stores at different times
        if not self.reduction:
            self.args.inplace = self._inplace_asked

    def _init_loop_state(self) -> None:
        """The emitter's state: CSE table, loop bookkeeping, forwarded values, recorded lines."""
        self.cse_table = KernelCSE()
        self.in_loop = False
        self.loop_start = 0
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
        self.load_sites: list[H.LoadSite] = []  # every load line, for its eviction hint
        self.needs_memory: set[str] = set()
        self.produced = {n.name for n in self.g.nodes}
        self.indirect_masks: dict = {}  # indirect index symbol -> mask of the value it came from

    def _choose_index_dtype(self) -> str:
        """int32 indices when the kernel's extent and every storage extent it addresses are below
        2**31 - 1: static, proven, or guarded (a guard: Dynamo recompiles for inputs that make it
        false); else int64 (also for a data-dependent extent the ShapeEnv cannot bound)."""
        g = self.g
        total = g.numel * g.rnumel
        fits = self.sv.lt_or_false(total, 2**31 - 1) and storages_fit_int32(g, self.sv) and index_values_fit_int32(g)
        return "tl.int32" if fits else "tl.int64"

    def _choose_tiling(self) -> None:
        """A 2-D tile [YBLOCK, XBLOCK] for pointwise kernels with transposed access
        (``simd.select_tiling``); symbolic tile extents are kernel parameters, and the smaller one
        (on grid axis 1, at most 65535 programs) is guarded to fit with blocks of one element,
        else no tile."""
        self.tiling = select_tiling(self.g) if (not self.reduction and config.tiling) else None
        self.dyn_tile = self.tiling is not None and not (
            isinstance(self.tiling.ynumel, int) and isinstance(self.tiling.xnumel, int)
        )
        if self.dyn_tile:
            small = min(self.tiling.ynumel, self.tiling.xnumel, key=self.sv.hint)
            if not self.sv.leq_or_false(small, 65535):
                self.tiling, self.dyn_tile = None, False

    # ------------------------------------------------------------------ emission helpers
    def emit(self, line: str) -> int:
        """Append ``line`` at the current indentation; returns its index in ``lines``."""
        self.lines.append("    " * self.indent + line)
        return len(self.lines) - 1

    def _insert_line(self, at: int, line: str) -> None:
        """Insert ``line`` (indented already) at index ``at``, shifting the recorded store and
        load line indices at or after it."""
        self.lines.insert(at, line)
        self.stores = [(n, li + 1 if li >= at else li) for n, li in self.stores]
        for site in self.load_sites:
            if site.line >= at:
                site.line += 1

    def newvar(self) -> str:
        """A fresh variable name ``tmp<N>``."""
        self.counter += 1
        return f"tmp{self.counter}"

    def cse_define(self, expr: str) -> tuple[str, int | None]:
        """The variable holding ``expr`` in the current scope, and the index of the line defining
        it when this call emitted that line (None when an earlier definition is reused)."""
        hit = self.cse_table.lookup(expr)
        if hit is not None:
            return hit, None
        v = self.newvar()
        line = self.emit(f"{v} = {expr}")
        self.cse_table.bind(expr, v)
        return v, line

    def cse(self, expr: str) -> str:
        """The variable holding ``expr``, defined by a new line unless the scope already has it."""
        return self.cse_define(expr)[0]

    def cast(self, x: str, src: torch.dtype | None, dst: torch.dtype) -> str:
        """Source converting ``x`` from ``src`` to ``dst`` as torch does (``triton_ops.cast``)."""
        return ops.cast(x, src, dst, self.interpret)

    def math(self, op: str, x: list[str], dtype: torch.dtype, raw) -> str:
        """Source of math op ``op`` over operand sources ``x`` (``triton_ops.MATH_OPS``)."""
        return ops.math_source(op, ops.MathCall(x, dtype, raw, self.cse, self.interpret))

    # ------------------------------------------------------------------ loops
    def open_loop(self) -> None:
        """Open a loop over the row in ``RBLOCK`` chunks (looped reductions; no-op when one is
        open or the kernel is persistent), with its own CSE scope."""
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
        self.cse_table.enter_loop()
        self.in_loop = True

    def close_loop(self) -> None:
        """Close the open loop (if any): run its reductions' finishers and forget its state."""
        if not self.in_loop:
            return
        self.indent -= 1
        self.cse_table.leave_loop()
        self.in_loop = False
        for finish in self.loop_pending_reductions:
            finish()
        self.loop_pending_reductions = []
        self.open_reduction_bufs = set()
        self.looped_max, self.row_max_of_sumexp, self.sumexp_of, self.looped_of = {}, {}, {}, {}

    # ------------------------------------------------------------------ nodes
    def codegen_node(self, node, kind: str, m: dict) -> None:
        """Emit one scheduler node's body; ``kind`` is its role in the kernel (``"x"``: one value
        per output, ``"xr"`` / ``"red"``: per row element) and ``m`` its loop variables over the
        kernel's block indices. In a looped kernel a node that reads a reduction of the open loop
        starts a new loop; a per-output node closes it."""
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
        """Source of one op argument: a computed value's variable, or a literal."""
        if isinstance(a, BodyValue):
            return vals[a.idx]
        if isinstance(a, bool):
            return "1" if a else "0"
        if isinstance(a, float):
            return ops.const_literal(a, torch.float32)
        return str(a)

    def codegen_op(self, node, bn, vals, m, kind) -> str | None:
        """Emit one loop-body op; returns the variable of its value (None for stores)."""
        op, a = bn.op, bn.args
        if op == "load":
            return self.codegen_load(a, vals, m, kind, bn.dtype)
        if op == "store_reduction" and self.in_loop:
            # the reduced value exists only after its loop: store it then
            self.loop_pending_reductions.append(lambda: self._emit_store(op, a, vals, m, kind))
            self.open_reduction_bufs.add(a[0])
            return None
        if op in ("store", "store_reduction"):
            return self._emit_store(op, a, vals, m, kind)
        if op == "constant":
            return self.codegen_constant(a[0], a[1], kind)
        if op == "index_expr":
            return self.codegen_index_expr(a[0], a[1], m, kind)
        if op == "to_dtype":
            src = a[0].dtype if isinstance(a[0], BodyValue) else None
            return self.cse(self.cast(self.arg(a[0], vals, kind), src, a[1]))
        if op == "bitcast":
            return self.cse(ops.bitcast(self.arg(a[0], vals, kind), a[0].dtype, a[1]))
        if op == "reduction":
            return self.codegen_reduction(a, vals)
        if op == "scan":
            return self.codegen_scan(a, vals)
        if op == "indirect_indexing":
            return self.codegen_indirect(a, vals, kind)
        if op == "where":
            x = [self.arg(a[k], vals, kind) for k in range(3)]
            return self.cse(f"tl.where({x[0]}, {x[1]}, {x[2]})")
        return self.cse(self.math(op, [self.arg(x, vals, kind) for x in a], bn.dtype, a))

    # ------------------------------------------------------------------ main
    def generate(self) -> GeneratedKernel:
        """Emit the whole kernel and return its source with its launch facts."""
        g = self.g
        self._emit_prologue()
        for node in g.nodes:
            kind, m, _, _ = g.maps[node]
            if self.tiling is not None:
                m = tiled_var_map(node, self.tiling)
            self.codegen_node(node, kind, m)
        self.close_loop()
        removed = self._drop_unneeded_stores()
        self._render_loads()
        body = [ln for ln in self.lines if ln is not None]
        self.alu_ops = H.alu_ops(body)
        params = list(self.args.inputs.values()) + list(self.args.outputs.values())
        arg_names = list(self.args.inputs.keys()) + list(self.args.outputs.keys())
        configs = self.configs()
        blocks = [k for k in configs[0] if k.endswith("BLOCK")]
        size_params, size_args = self._size_params()
        # Under the interpreter size parameters are constexprs (a plain int: `range()` cannot take
        # the interpreter's 1-element scalar tensors); on the GPU runtime ints, not specialized on
        # their value (one binary for every size)
        ssig = [f"{p}: tl.constexpr" if self.interpret else p for p in size_params]
        sig = ", ".join(params + ssig + [f"{b}: tl.constexpr" for b in blocks])
        deco = "@_jit" if not size_params or self.interpret else f"@_jit_dynamic({tuple(size_params)!r})"
        src = [deco, f"def {self.name}({sig}):"] + body
        inplace = {o: i for o, i in self.args.inplace.items() if o not in removed and o in self.produced}
        return GeneratedKernel(
            self.name,
            "\n".join(src) + "\n",
            arg_names,
            g.numel,
            g.rnumel,
            self._grid_axes(),
            configs,
            removed,
            self.index_dtype,
            size_args,
            size_params,
            inplace=inplace,
        )

    def _emit_prologue(self) -> None:
        """The block indices and masks every kernel body starts with."""
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

    def _drop_unneeded_stores(self) -> set[str]:
        """Blank the stores of buffers nothing outside the kernel reads and no load of it needed
        from memory (forwarded in registers only); returns those buffers."""
        removed = set()
        for name, li in self.stores:
            if name not in self.keep and name not in self.needs_memory:
                self.lines[li] = None
                removed.add(name)
        for name in removed:
            self.args.outputs.pop(name, None)
        return removed

    def _render_loads(self) -> None:
        """Write each load's eviction hint (``heuristics.eviction_policies``) into its line."""
        looped = self.reduction and not self.persistent
        policies = H.eviction_policies(self.load_sites, looped, bool(self.persistent and self.reduce_only))
        for site, policy in zip(self.load_sites, policies):
            if policy is not None:
                line = self.lines[site.line]
                self.lines[site.line] = f"{line[:-1]}, eviction_policy='{policy}')"

    def _size_params(self) -> tuple[list[str], list]:
        """The kernel's integer parameters (names) and the size expressions the wrapper passes for
        them: symbolic extents, then ``ks<i>`` size symbols, then ``ps<i>`` precomputed divisors."""
        g = self.g
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
        return size_params, size_args

    def _grid_axes(self) -> list[tuple[str, object]]:
        """The launch grid: (block constexpr, extent or the parameter naming it) per grid axis."""
        if self.tiling is None:
            return [("XBLOCK", "xnumel" if self.dyn_numel else self.g.numel)]
        axes = {
            "YBLOCK": "ynumel" if self.dyn_tile else self.tiling.ynumel,
            "XBLOCK": "xnumel" if self.dyn_tile else self.tiling.xnumel,
        }
        ypid, _ = self.tile_grid_order()
        grid_axes = [("YBLOCK", axes["YBLOCK"]), ("XBLOCK", axes["XBLOCK"])]
        if ypid == 1:
            grid_axes.reverse()
        return grid_axes

    # ------------------------------------------------------------------ launch heuristics
    def launch_facts(self) -> H.KernelFacts:
        """What the launch heuristics read about this kernel, as it stands now."""
        return H.KernelFacts(
            numel=self.g.numel,
            rnumel=self.g.rnumel,
            rnumel_max=self.rnumel_max,
            reduction=self.reduction,
            persistent=self.persistent,
            hint=self.hint,
            has_scan=self.has_scan,
            reduce_only=self.reduce_only,
            tiling=self.tiling,
            dyn_tile=self.dyn_tile,
            interpret=self.interpret,
            alu_ops=self.alu_ops,
            sv=self.sv,
        )

    def tile_grid_order(self) -> tuple[int, int]:
        """(program axis of y, program axis of x) of a tiled kernel (``heuristics.tile_grid_order``)."""
        return H.tile_grid_order(self.launch_facts())

    def configs(self) -> list[dict[str, int]]:
        """Candidate launch configs, the heuristic's choice first (``heuristics.configs``)."""
        return H.configs(self.launch_facts())

    def gpu_configs(self) -> list[dict[str, int]]:
        """Candidate GPU configs (``heuristics.gpu_configs``)."""
        return H.gpu_configs(self.launch_facts())

    def is_tiny(self) -> bool:
        """Whether the kernel launches with its first config only (``heuristics.is_tiny``)."""
        return H.is_tiny(self.launch_facts())

    def block_sizes(self) -> tuple[int, int, int]:
        """The interpreter's (XBLOCK, RBLOCK, num_warps) (``heuristics.block_sizes``)."""
        return H.block_sizes(self.launch_facts())
