"""GraphLowering: walks an aten FX graph and builds the IR (Inductor's ``graph.py``).

Each placeholder becomes an ``InputBuffer``; each ``call_function`` node runs its lowering
(``tilefuse.lowering.lowerings``) or, when there is none, becomes a ``FallbackKernel`` (the aten op
called from the wrapper); each graph output is realized into a buffer. The result is the ordered
list of buffers the scheduler turns into kernels.
"""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from . import config
from . import sizevars as SV
from .ir import graph_context as G
from . import symbolic as S
from .ir import nodes as ir
from .fx_passes import host_work_on_device, online_normalizers
from .layout_opt import channels_last_metas, decide_layout_opt
from .ir.layout_utils import strides_match as _strides_match
from .lowering import EXTERN_OPS, lowerings, max_and_sumexp_pair

log = logging.getLogger("tilefuse")


def _layout_from_meta(t: torch.Tensor) -> ir.FixedLayout:
    """The layout of a (fake) tensor; symbolic sizes become Exprs through the graph's SizeVars."""
    sv = SV.current()
    return ir.FixedLayout(
        t.device, t.dtype, sv.tensor_sizes(t.shape), sv.sizes(t.stride()), sv.size(t.storage_offset())
    )


def _runtime_layout(t: torch.Tensor) -> ir.FixedLayout:
    """Layout of a tensor an extern/fallback call returns at runtime. Kernels index it from its own
    data pointer, which already includes its storage offset (a view such as one output of
    ``split``), so the layout's offset is 0."""
    lay = _layout_from_meta(t)
    lay.offset = 0
    return lay


def _broadcast_dims(size, stride) -> list[bool]:
    """Per dim: stride 0 on a dim longer than 1 (an expanded dim: every element along it is the
    same memory)."""
    return [s != 1 and isinstance(st, int) and st == 0 for s, st in zip(size, stride)]


def _varies_along_broadcast_dims(v: Any, want: tuple[list, list]) -> bool:
    """Whether ``v``, a computed value (an unrealized Pointwise or Reduction), differs along a dim
    that the eager strides ``want`` expand (stride 0 on a dim longer than 1). Such strides can only
    hold a value that is the same along that dim; a value that varies there came from a meta
    function's strides that eager's kernel does not produce. The value's inner function is traced
    and a dim varies when its loop variable appears in a load's index or an ``index_expr`` (random
    ops and indirect indices reach their inputs only through those)."""
    dims = [d for d, b in enumerate(_broadcast_dims(*want)) if b]
    if not dims or not isinstance(v, ir.TensorBox) or not isinstance(v.data, ir.StorageBox):
        return False
    node = v.data.data
    if not isinstance(node, (ir.Pointwise, ir.Reduction)):
        return False
    from .ir.loop_body import LoopBody

    iv = [S.sym(f"o{k}") for k in range(len(node.ranges))]
    if isinstance(node, ir.Reduction):
        rv = [S.sym(f"q{k}") for k in range(len(node.reduction_ranges))]
        body = LoopBody.trace(node.inner_fn, iv, rv, {}, G.dtype_of)
    else:
        body = LoopBody.trace(node.inner_fn, iv, [], {}, G.dtype_of)
    used: set = set()
    for n in body.nodes:
        if n.op == "load":
            used |= set(n.args[1].free_symbols)
        elif n.op == "index_expr":
            used |= set(n.args[0].free_symbols)
    return any(iv[d] in used for d in dims)


def _lazy_view_base(v: Any) -> Any:
    """The StorageBox under a chain of lazy views (``GenericView``) when ``v`` is such a chain and
    that box still holds an unrealized value; else None."""
    x, viewed = v, False
    while True:
        if isinstance(x, ir.TensorBox):
            x = x.data
        elif isinstance(x, ir.GenericView):
            x, viewed = x.data, True
        else:
            break
    if viewed and isinstance(x, ir.StorageBox) and isinstance(x.data, (ir.Pointwise, ir.Reduction)):
        return x
    return None


def _is_host_scalar(t: Any) -> bool:
    """A 0-d CPU tensor (what Dynamo passes for a Python float it does not specialize, and what
    eager lets CUDA ops take as a scalar)."""
    return isinstance(t, torch.Tensor) and t.dim() == 0 and t.device.type == "cpu"


def _graph_device(gm: torch.fx.GraphModule, example_inputs: list) -> torch.device:
    """The device a graph's kernels run on: its first tensor input's that is not a 0-d CPU tensor;
    for a graph without such inputs (only host scalars, or no tensor input: ``torch.zeros(...,
    device="cuda")``, ``torch.arange(t.item(), device="cuda")``), the first device other than
    the CPU among its nodes' fake values, else the first of those values' devices; else the CPU.
    ``cuda`` without an index becomes the current CUDA device."""
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    dev = next((t.device for t in tensors if not _is_host_scalar(t)), None)
    if dev is None:
        devs = [
            v.device
            for n in gm.graph.nodes
            for v in pytree.tree_leaves(n.meta.get("val"))
            if isinstance(v, torch.Tensor)
        ]
        dev = next((d for d in devs if d.type != "cpu"), None) or next(iter(devs), None)
    dev = dev or torch.device("cpu")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _shape_env(example_inputs: list) -> Any:
    """The ShapeEnv behind the symbolic sizes of ``example_inputs`` (None when all are static)."""
    for x in example_inputs:
        syms = (
            [x]
            if isinstance(x, torch.SymInt)
            else ([*x.shape, *x.stride(), x.storage_offset()] if isinstance(x, torch.Tensor) else [])
        )
        for s in syms:
            if isinstance(s, torch.SymInt):
                return s.node.shape_env
    return None


def _graph_shape_env(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
    """The ShapeEnv of a graph: its inputs' (``_shape_env``), else, for a graph of static inputs
    whose ops have data-dependent result sizes (``nonzero``, ``.item()``), the one behind those
    results' unbacked symbols; None when every size is static."""
    env = _shape_env(example_inputs)
    if env is not None:
        return env
    for n in gm.graph.nodes:
        if n.meta.get("unbacked_bindings"):
            for v in pytree.tree_leaves(n.meta.get("val")):
                found = _shape_env([v])
                if found is not None:
                    return found
    return None


class _SizeCondition:
    """A comparison of sizes in the graph (``u0 >= 0``): only read by ``_assert_scalar``, which
    takes its sympy form from the node's meta value; nothing runs it as a tensor op."""

    def __repr__(self) -> str:
        return "<size condition>"


# comparisons of sizes, and the logic on their results (a SymBool each): only ``_assert_scalar``
# reads them, from the meta value's expression
_SIZE_COMPARISONS = {
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.and_,
    operator.or_,
    torch.sym_not,
}
# ops that only narrow a symbol's range: the ShapeEnv already holds the range
_RANGE_CONSTRAINTS = {
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
}

_SIZE_ARITHMETIC = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.floordiv,
    operator.mod,
    operator.neg,
    operator.pow,  # s ** 3: a cube's numel when duck shaping gave its dims one symbol
    torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_stride.int,
    torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_storage_offset.default,  # a data-dependent view's offset (a new unbacked symbol)
    torch.sym_max,
    torch.sym_min,
    torch.sym_sum,
    torch.sym_float,
    operator.truediv,
}
# size arithmetic with a float result (a SymFloat): the SymbolicFloat op it becomes
_FLOAT_ARITHMETIC = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "truediv",
    operator.neg: "neg",
    torch.sym_float: "float",
}


def _size_fact(g: Any, target: Any, args: tuple) -> Any:
    """A comparison of sizes (a ``_SizeCondition``), a range constraint (nothing: the ShapeEnv
    has the range) or ``_assert_scalar`` of a comparison: checked by the wrapper at run time
    unless the symbols' ranges prove it (``SizeVars.condition_terms``). ``g``: the GraphLowering."""
    if target in _SIZE_COMPARISONS:
        if not isinstance(g.current_node.meta.get("val"), torch.SymBool):
            raise SV.SymbolicSizeError(f"comparison {target} of non-size values")
        return _SizeCondition()
    if target is torch.ops.aten._assert_scalar.default:
        cond = g.current_node.args[0]
        meta = cond.meta.get("val") if isinstance(cond, torch.fx.Node) else cond
        if isinstance(meta, torch.SymBool):
            terms = g.sizevars.condition_terms(meta.node.expr)
            if terms:
                g.runtime_asserts.append((terms, str(args[1]) if len(args) > 1 else "assertion failed"))
        elif not meta:
            raise SV.SymbolicSizeError(f"_assert_scalar of {meta!r} always fails")
    return None


def _host_scalar_to_device(g: Any, n: torch.fx.Node) -> bool:
    """Whether the 0-d CPU tensor ``n`` (a graph input or constant) is copied to the graph's
    device when the call starts: when it is host work that only feeds the device
    (``fx_passes.host_work_on_device``). Its readers are the device's kernels, which inline
    the scalar arithmetic on it (a Python float's casts compute inside the kernel that reads
    it); a value of it the graph returns is recomputed on the CPU (``graph._on_host``)."""
    return n in g.host_work


def _on_graph_device(g: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the current node computes on the graph's device, so its kernels can: host work
    moved there (``fx_passes.host_work_on_device``), or a node every IR tensor of which lives
    there, as its result does (eager also lets a CUDA op read CPU indices, or a CPU scalar an
    aten op made). Other ops (CPU work in a CUDA graph) run as their aten kernels, as eager
    runs them."""
    if g.current_node in g.host_work:
        return True
    want = g.default_device.type
    for a in pytree.tree_leaves((args, kwargs)):
        if isinstance(a, ir.TensorBox):
            dev = a.get_device()
            if dev is not None and dev.type != want:
                return False
    return not any(
        isinstance(v, torch.Tensor) and v.device.type != want
        for v in pytree.tree_leaves(g.current_node.meta.get("val"))
    )


def _on_host(g: Any, n: torch.fx.Node, memo: dict) -> Any:
    """The CPU value of node ``n`` of graph ``g`` (a GraphLowering) made by aten calls on the
    CPU, for a graph output eager returns there but which ``g`` computes on its device as host
    work (``fx_passes.host_work_on_device``): a Python float under ``dynamic=True`` whose casts
    a training graph saves for its backward, a factory's value also returned. Host scalar
    inputs are read from the CPU tensor the call keeps beside its device copy
    (``<name>_host``); factories and the ops on them run as their aten kernels, on the CPU as
    in eager. ``memo``: node -> CPU value, shared by one graph's outputs. NotImplementedError
    for another node (the graph then runs eagerly, with one warning)."""
    if n in memo:
        return memo[n]
    meta = n.meta.get("val")
    if n not in g.host_work and n.op != "placeholder":
        raise NotImplementedError(
            f"an output computed on {g.default_device.type} that eager returns on the CPU "
            f"(from {n.name}, not host work)"
        )
    if n.op == "placeholder":
        buf = g.env[n].data.data
        if not isinstance(buf, ir.InputBuffer) or buf.name not in g.host_scalar_inputs:
            raise NotImplementedError(f"graph input {n.name} is not a host scalar")
        if buf.name not in g.host_scalar_twins:
            g.host_scalar_twins.append(buf.name)
        lay = _layout_from_meta(meta)
        lay.offset = 0
        out = ir.TensorBox(ir.StorageBox(ir.InputBuffer(f"{buf.name}_host", lay)))
    elif n.op == "call_function":

        def host(a: Any) -> Any:
            if not isinstance(a, torch.fx.Node):
                return a
            return _on_host(g, a, memo) if isinstance(a.meta.get("val"), torch.Tensor) else g.env[a]

        args, kwargs = pytree.tree_map(host, (n.args, n.kwargs))
        saved, g.current_node = g.current_node, n
        try:
            out = g.fallback(n.target, args, kwargs, meta=meta)
        finally:
            g.current_node = saved
    else:
        raise NotImplementedError(f"an output on the CPU from {n.op} {n.name}")
    memo[n] = out
    return out


def _real_to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A real copy of the constant ``t`` on ``device``, made outside any active FakeTensorMode
    (the backend lowers with AOTAutograd's fake mode on, under which ``.to`` would give a fake
    tensor without data)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return t.to(device)


def _check_device(v: Any, meta: Any) -> None:
    """A graph output must be on its meta value's device: a 0-d CPU value computed from a host
    scalar kept on the device (``_host_scalar_to_device``) would not be. Raises
    NotImplementedError: the graph then runs eagerly, with one warning (``config.fallback_on_error``)."""
    dev = v.get_device()
    if isinstance(meta, torch.Tensor) and dev is not None and dev.type != meta.device.type:
        raise NotImplementedError(f"an output computed on {dev.type} that eager returns on {meta.device.type}")


def _set_exact_strides(box: ir.TensorBox, size: list, stride: list) -> bool:
    """Lay ``box``'s value out with ``stride`` when it is realized, if its layout is still free:
    an unrealized Pointwise or Reduction whose StorageBox has no ``exact_stride`` yet, and
    ``stride`` expands no dim of ``size`` (stride 0 on a dim longer than 1: such a value is
    computed once per broadcast row by a copy instead). Returns whether it was set."""
    sb = box.data
    if (
        not isinstance(sb, ir.StorageBox)
        or not isinstance(sb.data, (ir.Pointwise, ir.Reduction))
        or sb.exact_stride is not None
        or any(_broadcast_dims(size, stride))
    ):
        return False
    sb.exact_stride = list(stride)
    return True


def _kernel_dtypes_only(n: torch.fx.Node) -> bool:
    """True when every tensor ``n`` reads or produces has a dtype generated kernels can hold
    (complex, float8, the wide unsigned types, ... run as the aten op instead)."""
    from .lowering import KERNEL_DTYPES

    vals = [n.meta.get("val")] + [a.meta.get("val") for a in n.all_input_nodes]
    for v in vals:
        if isinstance(v, torch.Tensor):  # the common case, without pytree's flattening
            if v.dtype not in KERNEL_DTYPES:
                return False
        elif isinstance(v, (list, tuple, dict)):
            if not all(t.dtype in KERNEL_DTYPES for t in pytree.tree_leaves(v) if isinstance(t, torch.Tensor)):
                return False
    return True


def _view_of_stored(v: Any, size: list, stride: list, sv: Any) -> ir.ReinterpretView | None:
    """``v``, a chain of lazy views of a stored buffer (a realized value, a graph input, a
    ReinterpretView), as a ReinterpretView with strides ``stride`` of that buffer when the
    views' index map is exactly that strided layout (the offset is the map's); else None."""
    x, reindexes = v, []
    while True:
        if isinstance(x, ir.TensorBox):
            x = x.data
        elif isinstance(x, ir.GenericView):
            reindexes.append(x.reindex)
            x = x.data
        else:
            break
    if isinstance(x, ir.StorageBox):
        x = x.data
    if isinstance(x, ir.ReinterpretView):
        buf, layout = ir.unwrap_storage(x.data), x.layout
    elif isinstance(x, ir.Buffer) and x.layout is not None:
        buf, layout = x, x.layout
    else:
        return None
    if not isinstance(buf, ir.Buffer) or any(isinstance(s, int) and s == 0 for s in size):
        return None
    idx = [S.sym(f"i{d}") for d in range(len(size))]
    index = list(idx)
    for fn in reindexes:
        index = fn(index)
    expr = S.simplify_with_ranges(layout.make_indexer()(index), list(zip(idx, size)))
    strides = S.stride_vars(expr, idx)
    offset = S.offset_var(expr, idx)
    linear = offset
    for i, st in zip(idx, strides):
        linear = linear + i * st
    if linear != expr:
        return None
    strides = [SV.static_or_expr(st) for st in strides]
    if not _strides_match(size, strides, stride, sv):
        return None
    buf.freeze_layout()
    return ir.ReinterpretView(
        buf, ir.FixedLayout(buf.get_device(), buf.get_dtype(), list(size), list(stride), SV.static_or_expr(offset))
    )


def _strided_after_realize(v: Any, stride: list, sv: Any) -> bool:
    """Whether ``v``, strided lazy views of an unrealized value, gets strides ``stride`` when
    that value is realized and the views become a ReinterpretView of it (``ir.realize_input``:
    the value's buffer is then shared with any other output of it)."""
    chain = ir._strided_view_chain(v.data if isinstance(v, ir.TensorBox) else v)
    if chain is None:
        return False
    box, fns = chain
    if not isinstance(box.data, (ir.Pointwise, ir.Reduction)):
        return False
    size = list(box.data.get_size())
    base = box.exact_stride if box.exact_stride is not None else ir.contiguous_strides(size)
    layout: Any = ir.FixedLayout(box.get_device(), box.get_dtype(), size, list(base))
    for fn in fns:
        layout = fn(layout) if layout is not None else None
    return layout is not None and _strides_match(list(layout.size), list(layout.stride), stride, sv)


class GraphLowering(torch.fx.Interpreter):
    """Lower ``gm`` (an aten-level graph from AOTAutograd) with ``example_inputs`` to IR.

    After ``run()``: ``buffers`` (ComputedBuffer / ExternKernel / MultiOutput in creation order),
    ``graph_inputs`` (name -> InputBuffer, in placeholder order), ``constants`` (name -> tensor),
    ``outputs`` (per graph output: an IR node, None, or a Python scalar).
    """

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: list,
        name: str = "graph",
        is_inference: bool = True,
        free_outputs: frozenset[int] = frozenset(),
    ):
        super().__init__(gm, garbage_collect_values=False)
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.name = name
        self.buffers: list[ir.Buffer] = []
        self.name_to_buffer: dict[str, ir.Buffer] = {}
        self.graph_inputs: dict[str, ir.InputBuffer] = {}
        self.graph_input_order: list[str | None] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.outputs: list[Any] = []
        self.current_node: torch.fx.Node | None = None
        self.default_device = _graph_device(gm, self.example_inputs)
        self.fallback_ops: list[str] = []
        # 0-d CPU tensor inputs of a graph on another device, copied to it when the call starts
        # (its kernels cannot read host memory); see ``placeholder``
        self.host_scalar_inputs: list[str] = []
        # those of them whose CPU tensor the call also keeps (as ``<name>_host``): host arithmetic
        # on them that the graph returns is computed on the CPU from it (``_on_host``)
        self.host_scalar_twins: list[str] = []
        self.random_seeds: ir.RandomSeeds | None = None  # created by the first random op
        self._placeholder_idx = 0
        # symbolic sizes (dynamic shapes): the ShapeEnv of the fake inputs, if any is symbolic,
        # or of the graph's data-dependent sizes
        self.sizevars = SV.SizeVars(_graph_shape_env(gm, self.example_inputs))
        # runtime checks of facts about data-dependent sizes (``_assert_scalar``): per check, the
        # [(lhs, op, rhs), ...] that must all hold and its message; the wrapper checks each once
        # the symbols it reads are bound
        self.runtime_asserts: list[tuple[list, str]] = []
        # size symbol name -> where the call's arguments hold it: (argument position, "size" |
        # "stride" | "int", dim)
        self.symbol_sources: dict[str, tuple[int, str, int]] = {}
        # the FX nodes whose values the graph returns: their values are given eager's strides
        self._output_nodes: set[torch.fx.Node] = set()
        for n in gm.graph.nodes:
            if n.op == "output":
                self._output_nodes |= {a for a in pytree.tree_leaves(n.args[0]) if isinstance(a, torch.fx.Node)}
        # amax / sum(exp(x - amax)) node pairs lowered as one row normalizer (see
        # fx_passes.online_normalizers); (x node, dims) -> the lowered (max, sum-exp) pair
        self._normalizer_nodes = online_normalizers(gm)
        # CPU values computed on the device instead (fx_passes.host_work_on_device): 0-d CPU
        # inputs and constants, factories, and the host arithmetic on them
        self.host_work = host_work_on_device(gm, self.default_device, lowerings)
        self._normalizer_pairs: dict = {}
        # layout optimization (tilefuse.layout_opt): per FX node, its value as eager would lay it
        # out in the channels-last model; stored values take those strides, convolutions get
        # channels-last operands (lowering.extern)
        self.layout_opt = decide_layout_opt(gm, is_inference=is_inference, device=self.default_device)
        self.layout_metas: dict[torch.fx.Node, torch.Tensor] = (
            channels_last_metas(gm, self.example_inputs) if self.layout_opt else {}
        )
        # under layout optimization, the positions of the outputs no user sees (a training
        # forward's saved activations): they keep the layout they are computed in, which
        # ``output_strides`` reports, instead of eager's strides
        out_nodes = [a for n in gm.graph.nodes if n.op == "output" for a in pytree.tree_leaves(n.args[0])]
        self._free_output_nodes = (
            {out_nodes[i] for i in free_outputs if i < len(out_nodes) and isinstance(out_nodes[i], torch.fx.Node)}
            - {a for i, a in enumerate(out_nodes) if i not in free_outputs}
            if self.layout_opt
            else set()
        )
        # per graph output, after run(): its strides (ints), None for a non-tensor or symbolic ones
        self.output_strides: list[tuple[int, ...] | None] = []

    # ---------------------------------------------------------------- registry
    def new_buffer_name(self) -> str:
        return f"buf{len(self.buffers)}"

    def register_buffer(self, buf: ir.Buffer) -> None:
        self.buffers.append(buf)
        self.name_to_buffer[buf.name] = buf

    def get_dtype(self, name: str) -> torch.dtype:
        if name in self.graph_inputs:
            return self.graph_inputs[name].get_dtype()
        if name in self.name_to_buffer:
            return self.name_to_buffer[name].get_dtype()
        raise KeyError(f"unknown buffer {name}")

    # ---------------------------------------------------------------- interpreter hooks
    def run(self, *args, **kwargs):
        with G.set_graph(self):
            return super().run(*self.example_inputs)

    def run_node(self, n: torch.fx.Node) -> Any:
        self.current_node = n
        out = super().run_node(n)
        if n.op == "call_function" and isinstance(out, ir.TensorBox):
            if n in self._output_nodes and n not in self._free_output_nodes:
                # before any consumer realizes it (an extern kernel, a view, reuse): the value's
                # buffer gets eager's strides, so no copy is needed at the output
                self._prefer_eager_strides(out, self._eager_layout(n.meta.get("val")))
            elif n in self.layout_metas:
                # stored as in the channels-last model, if its layout is still free
                self._prefer_eager_strides(out, self._eager_layout(self.layout_metas[n]))
            self._maybe_realize_on_reuse(n, out)
        return out

    def placeholder(self, target, args, kwargs):
        idx = self._placeholder_idx
        self._placeholder_idx += 1
        ex = self.example_inputs[idx]
        if isinstance(ex, torch.Tensor):
            name = f"arg{idx}"
            # kernels index an input from its data pointer, which already includes its storage
            # offset: the layout's offset is 0
            lay = _layout_from_meta(ex)
            lay.offset = 0
            if _is_host_scalar(ex) and _host_scalar_to_device(self, self.current_node):
                # a Python float Dynamo passes as a 0-d CPU tensor (or any CPU scalar tensor eager
                # lets CUDA ops take): the call copies it to the graph's device, where it is read
                lay.device = self.default_device
                self.host_scalar_inputs.append(name)
            for what, vals in (("size", lay.size), ("stride", lay.stride)):
                for d, v in enumerate(vals):
                    if isinstance(v, S.Expr) and v.is_symbol:
                        self.symbol_sources.setdefault(v.name, (idx, what, d))
            buf = ir.InputBuffer(name, lay)
            self.graph_inputs[name] = buf
            self.graph_input_order.append(name)
            return ir.TensorBox(ir.StorageBox(buf))
        if isinstance(ex, torch.SymInt):
            v = self.sizevars.size(ex)
            if isinstance(v, S.Expr):
                name = f"sym{idx}"
                self.graph_input_order.append(name)
                if v.is_symbol:
                    self.symbol_sources.setdefault(v.name, (idx, "int", 0))
                return v
            self.graph_input_order.append(None)
            return v
        self.graph_input_order.append(None)
        return ex

    def get_attr(self, target, args, kwargs):
        value = (
            getattr(self.gm, target)
            if not isinstance(target, str) or "." not in target
            else operator.attrgetter(target)(self.gm)
        )
        if not isinstance(value, torch.Tensor):
            return value
        meta = self.current_node.meta.get("val")
        if isinstance(meta, torch.Tensor) and meta.device != value.device:
            # the graph was traced with the constant on the meta value's device (a tensor made
            # under torch.set_default_device can be stored on the CPU): its readers expect it there
            value = _real_to(value, meta.device)
        elif _is_host_scalar(value) and _host_scalar_to_device(self, self.current_node):
            # a 0-d CPU constant (eager lets device ops take it as a scalar): kernels read only
            # their device's memory
            value = _real_to(value, self.default_device)
        name = f"const_{len(self.constants)}"
        self.constants[name] = value
        buf = ir.ConstantBuffer(name, _layout_from_meta(value))
        self.graph_inputs[name] = buf
        return ir.TensorBox(ir.StorageBox(buf))

    def call_function(self, target, args, kwargs):
        if target is operator.getitem:
            return args[0][args[1]]
        if target in _SIZE_ARITHMETIC:
            return self._size_arithmetic(target, args)
        if (
            target in _SIZE_COMPARISONS
            or target in _RANGE_CONSTRAINTS
            or target is torch.ops.aten._assert_scalar.default
        ):
            return _size_fact(self, target, args)
        if self.current_node.meta.get("unbacked_bindings"):
            # a result of data-dependent size or value (nonzero, a boolean mask, unique, .item()):
            # the aten op, whose result the wrapper reads the new size symbols from
            return self.fallback(target, args, kwargs)
        if self.current_node in self._normalizer_nodes:
            pair = self._normalizer_pair(self.current_node, args)
            if pair is not None:
                return pair[0] if target is torch.ops.aten.amax.default else pair[1]
        fn = lowerings.get(target)
        lower_kwargs = kwargs
        node = self.current_node
        if fn is not None and node in self.host_work and not any(a in self.host_work for a in node.all_input_nodes):
            # a factory of host work: made on the device, where its readers compute
            lower_kwargs = {**kwargs, "device": self.default_device}
        elif fn is not None and not _on_graph_device(self, args, kwargs):
            log.debug("tilefuse: %s runs on another device than the graph's; using a fallback kernel", target)
            fn = None
        if fn is not None and not _kernel_dtypes_only(self.current_node):
            log.debug("tilefuse: %s involves a dtype generated kernels cannot hold; using a fallback kernel", target)
            fn = None
        if fn is not None:
            try:
                return fn(*args, **lower_kwargs)
            except NotImplementedError as e:
                log.debug("tilefuse: lowering of %s declined (%s); using a fallback kernel", target, e)
            except TypeError as e:
                # with symbolic sizes, a lowering written for static ones fails on the first
                # comparison of an Expr with a number (no silent guess): that op runs as the aten op
                msg = str(e)
                if self.sizevars.shape_env is None or not any(
                    k in msg for k in ("tilefuse._native.Expr", "symbolic expression", "Integer() takes an int")
                ):
                    raise
                log.debug("tilefuse: lowering of %s needs static sizes (%s); using a fallback kernel", target, e)
        return self.fallback(target, args, kwargs)

    def _normalizer_pair(self, n: torch.fx.Node, args: tuple) -> tuple | None:
        """The lowered (max, sum-exp) pair of the matched normalizer ``n`` belongs to, lowered at
        its amax (which comes first in the graph); None where it cannot be (the pair declines, or
        the amax was lowered another way): ``n`` is then lowered as itself."""
        x_node, dims = self._normalizer_nodes[n]
        key = (x_node, tuple(dims))
        if n.target is torch.ops.aten.amax.default and key not in self._normalizer_pairs:
            try:
                self._normalizer_pairs[key] = max_and_sumexp_pair(args[0], dims)
            except NotImplementedError as e:
                log.debug("tilefuse: amax / sum-exp of %s not lowered as one normalizer (%s)", x_node, e)
                self._normalizer_pairs[key] = None
        return self._normalizer_pairs.get(key)

    def output(self, target, args, kwargs):
        result = args[0]
        metas = [
            (self.layout_metas.get(n, n.meta.get("val")) if n in self._free_output_nodes else n.meta.get("val"))
            if isinstance(n, torch.fx.Node)
            else None
            for n in pytree.tree_leaves(self.current_node.args[0])
        ]
        leaves = pytree.tree_leaves(result)
        memo: dict = {}
        for i, (n, v) in enumerate(zip(pytree.tree_leaves(self.current_node.args[0]), leaves)):
            # a 0-d value eager returns on the CPU, computed on the device from a host scalar
            dev, meta = (
                v.get_device() if isinstance(v, ir.IRNode) else None,
                n.meta.get("val") if isinstance(n, torch.fx.Node) else None,
            )
            if isinstance(meta, torch.Tensor) and dev is not None and dev.type != meta.device.type:
                leaves[i] = _on_host(self, n, memo)
        outs: list[Any] = [None] * len(leaves)
        # a lazy view of an unrealized value the graph also returns comes after that value, so it
        # reads the value's buffer (a view of it, as in eager) instead of computing it again
        returned = {id(v.data) for v in leaves if isinstance(v, ir.TensorBox) and isinstance(v.data, ir.StorageBox)}
        bases = [_lazy_view_base(v) for v in leaves]
        later = [b is not None and id(b) in returned for b in bases]
        for second in (False, True):
            for i, v in enumerate(leaves):
                if later[i] == second:
                    outs[i] = self._realize_output(v, metas[i] if i < len(metas) else None)
        self.outputs.extend(outs)
        for o in outs:
            st = getattr(getattr(o, "layout", None), "stride", None)
            self.output_strides.append(tuple(st) if st is not None and all(isinstance(v, int) for v in st) else None)
        return result

    def _size_arithmetic(self, target, args):
        """Integer arithmetic on sizes in the graph (``s0 * s1`` for a view's shape, ``sym_size``)
        computed on ints / Exprs; the result's meta value fixes what it is."""
        meta = self.current_node.meta.get("val")
        if target in (torch.ops.aten.sym_size.int, torch.ops.aten.sym_stride.int):
            x, d = args
            vals = x.get_size() if target is torch.ops.aten.sym_size.int else None
            if vals is None:
                raise SV.SymbolicSizeError("sym_stride of a lazily computed value")
            return vals[d]
        if target is torch.ops.aten.sym_numel.default:
            return ir.prod(args[0].get_size())
        if isinstance(meta, (torch.SymInt, int)) and not isinstance(meta, bool):
            # the ShapeEnv already knows the value: take its (replaced, simplified) expression
            return self.sizevars.size(meta)
        if isinstance(meta, float):
            return meta
        if isinstance(meta, torch.SymFloat) and target in _FLOAT_ARITHMETIC:
            # a float of symbolic sizes (label smoothing's 0.1 / sym_float(classes)): computed
            # in the kernels that use it, from their size arguments
            return SV.SymbolicFloat(_FLOAT_ARITHMETIC[target], *args)
        raise SV.SymbolicSizeError(f"symbolic {target} with a {type(meta).__name__} result")

    # ---------------------------------------------------------------- helpers
    def _maybe_realize_on_reuse(self, n: torch.fx.Node, box: ir.TensorBox) -> None:
        """Realize a lazily computed value read by several consumers when recomputing it in each
        would cost more than a buffer (Inductor's ``mark_reuse``): it reads more than
        ``realize_reads_threshold`` buffers, or its inner function has more than
        ``realize_opcount_threshold`` ops. Cheap values (a dtype conversion, ``x - max``) are
        inlined into every consumer instead, so no full-size intermediate is written."""
        data = box.data
        if not isinstance(data, ir.StorageBox) or not isinstance(data.data, ir.Pointwise):
            return
        users = len(n.users)
        if users > 1 and (
            data.data.num_reads() > config.realize_reads_threshold
            or data.data.op_count() > config.realize_opcount_threshold
        ):
            data.realize()

    # ---------------------------------------------------------------- graph outputs: eager's strides
    def _eager_layout(self, meta: Any) -> tuple[list, list] | None:
        """(sizes, strides) of a graph output's FX meta value, as the IR's ints / Exprs (the meta's
        SymInts are never compared directly: that would specialize the sizes); None for a
        non-tensor."""
        if not isinstance(meta, torch.Tensor):
            return None
        return self.sizevars.sizes(meta.shape), self.sizevars.sizes(meta.stride())

    def _same_sizes(self, a, b) -> bool:
        return len(a) == len(b) and all(self.sizevars.known_equal(x, y) for x, y in zip(a, b))

    def _prefer_eager_strides(self, box: ir.TensorBox, want: tuple[list, list] | None) -> None:
        """Give a value, while it is still unrealized (its layout free), the strides ``want`` (a
        graph output: eager's; under layout optimization: the channels-last model's): set as the
        StorageBox's ``exact_stride``, used when whoever comes first (an extern kernel, a view,
        the output itself) realizes it. Nothing is set when ``want`` is contiguous (what
        realizing gives anyway), expands a dim (stride 0: handled at the output) or has other
        sizes."""
        if want is None or not isinstance(box.data, ir.StorageBox):
            return
        msize, mstride = want
        size = list(box.data.data.get_size())
        if not self._same_sizes(size, msize) or _strides_match(
            size, ir.contiguous_strides(size), mstride, self.sizevars
        ):
            return
        self.set_exact_strides(box, msize, mstride)

    set_exact_strides = staticmethod(_set_exact_strides)

    def _realize_output(self, v: Any, meta: Any) -> Any:
        """A graph output as a runtime node (a Buffer, or a ReinterpretView of one) with the
        strides of its FX meta value on every dim longer than 1 (Inductor's
        ``keep_output_stride``): callers see eager's strides (``.view`` works or fails as in
        eager; AOTAutograd regenerates aliased outputs from them). In order of preference: the
        value's own buffer, laid out so before it was realized; a strided view of a buffer that
        exists anyway (``softmax(x).diagonal()`` of a stored softmax, views of graph inputs keep
        aliasing them); a copy into a buffer with eager's exact strides (dims eager expands are
        stored once and viewed with stride 0)."""
        if not isinstance(v, ir.IRNode):
            return v
        _check_device(v, meta)
        want = self._eager_layout(meta)
        if want is not None and (
            not self._same_sizes(list(v.get_size()), want[0]) or any(isinstance(s, int) and s == 0 for s in want[0])
        ):
            want = None  # other sizes (not expected), or empty: returned as computed
        if want is not None and _varies_along_broadcast_dims(v, want):
            # a meta function that laid a computed result out like an expanded input (torch's
            # slice_scatter of an expanded tensor: strides (0, 0, 0)) where eager's kernel writes
            # a dense, contiguous tensor: elements that differ cannot share memory
            want = None
        node = self._output_node(v, want)
        layout = getattr(node, "layout", None)
        if (
            want is None
            or layout is None
            or _strides_match(list(layout.size), list(layout.stride), want[1], self.sizevars)
        ):
            return node
        return self._copy_with_strides(node, *want)

    def _output_node(self, v: Any, want: tuple[list, list] | None) -> Any:
        """``v`` realized: a Buffer or a ReinterpretView; eager's strides where this is free."""
        if isinstance(v, ir.TensorBox) and isinstance(v.data, ir.StorageBox):
            sb = v.data
            if isinstance(sb.data, (ir.Pointwise, ir.Reduction)):
                if want is not None and any(_broadcast_dims(*want)):
                    return self._copy_with_strides(v, *want)  # computed once per broadcast row
                self._prefer_eager_strides(v, want)
                sb.realize()
            sb.data.freeze_layout()
            return sb.data
        if isinstance(v, ir.TensorBox) and isinstance(v.data, ir.ReinterpretView):
            return v.data
        # a lazy view
        if want is not None:
            view = _view_of_stored(v, *want, self.sizevars)
            if view is not None:
                return view
            if not _strided_after_realize(v, want[1], self.sizevars):
                return self._copy_with_strides(v, *want)
        node = ir.realize_input(v)
        if isinstance(node, ir.Buffer):
            node.freeze_layout()
        return node

    def _copy_with_strides(self, x: Any, size: list, stride: list) -> Any:
        """``x`` computed into a new buffer with exactly ``stride``: a ComputedBuffer, or, when
        ``stride`` expands dims (0 on a dim longer than 1), a ComputedBuffer holding one element
        along them and a ReinterpretView of it with eager's strides."""
        bcast = _broadcast_dims(size, stride)
        loader = x.make_loader()
        if any(bcast):

            def inner(index, _load=loader, _b=bcast):
                return _load([S.Integer(0) if b else i for b, i in zip(_b, index)])
        else:
            inner = loader
        bsize = [1 if b else s for b, s in zip(bcast, size)]
        box = ir.StorageBox(ir.Pointwise(x.get_device(), x.get_dtype(), inner, bsize))
        box.exact_stride = list(stride)
        box.realize()
        buf = box.data
        if any(bcast):
            return ir.ReinterpretView(
                buf, ir.FixedLayout(buf.get_device(), buf.get_dtype(), list(size), list(stride), 0)
            )
        return buf

    def fallback(self, target, args, kwargs, meta=None):
        """Run ``target`` as an aten call from the wrapper (FallbackKernel / extern kernel).
        ``meta``: the (fake) result when it is not the current node's (a lowering calling an op on
        operands it changed, e.g. padded matrix products)."""
        own_meta = meta is None
        if meta is None:
            if "val" not in self.current_node.meta:  # AOTAutograd's nodes always carry one
                raise NotImplementedError(
                    f"fallback for {target}: node {self.current_node.name} has no meta "
                    f"value, so its outputs' shapes and dtypes are unknown"
                )
            # under layout optimization, the value as the channels-last model computes it: the
            # op's inputs were stored that way (``ensure_strides`` copies where they were not)
            meta = self.layout_metas.get(self.current_node, self.current_node.meta["val"])
        flat, spec = pytree.tree_flatten((args, kwargs))
        if any(isinstance(a, (SV.SymbolicFloat, _SizeCondition)) for a in flat):
            # the wrapper has no value to pass for it: the graph is compiled per shape instead
            raise SV.SymbolicSizeError(f"{target} as a fallback kernel with a float or condition of symbolic sizes")
        defs = self.sizevars.unbacked_defs(self.current_node.meta.get("unbacked_bindings")) if own_meta else {}
        inputs: list = []
        new_flat = []
        for a in flat:
            if isinstance(a, ir.IRNode):
                inputs.append(ir.realize_input(a))
                new_flat.append(ir.TensorArg(len(inputs) - 1))
            else:
                new_flat.append(a)
        cargs, ckwargs = pytree.tree_unflatten(new_flat, spec)
        cls = ir.ExternKernel if target in EXTERN_OPS else ir.FallbackKernel
        if cls is ir.FallbackKernel:
            self.fallback_ops.append(str(target))
            log.debug("tilefuse: no lowering for %s; it runs as a fallback kernel", target)
        name = self.new_buffer_name()
        if isinstance(meta, torch.Tensor):
            k = cls(name, _runtime_layout(meta), target, tuple(cargs), dict(ckwargs), inputs, meta)
            k.unbacked_defs = defs
            self.register_buffer(k)
            return ir.TensorBox(ir.StorageBox(k))
        k = cls(name, None, target, tuple(cargs), dict(ckwargs), inputs, meta)
        k.unbacked_defs = defs
        self.register_buffer(k)
        if isinstance(meta, torch.SymInt):
            # ``.item()`` of an integer tensor: its value is the size symbol bound from the call
            # (or what the ShapeEnv replaced that symbol with)
            return self.sizevars.size(meta)
        metas, mspec = pytree.tree_flatten(meta)

        def make(path, m):
            if not isinstance(m, torch.Tensor):
                return m
            mo = ir.MultiOutput(self.new_buffer_name(), _runtime_layout(m), k, path)
            self.register_buffer(mo)
            return ir.TensorBox(ir.StorageBox(mo))

        if isinstance(meta, (list, tuple)):
            outs = [make((i,), m) for i, m in enumerate(meta)]
            return type(meta)(outs) if isinstance(meta, tuple) else outs
        if meta is None:
            return None
        raise NotImplementedError(f"fallback for {target} with output {type(meta).__name__}")
