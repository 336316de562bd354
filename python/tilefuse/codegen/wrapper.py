"""Wrapper codegen: the Python module that runs one compiled graph (Inductor's wrapper.py).

The module defines the graph's Triton kernels, one ``tilefuse.runtime.KernelLauncher`` per kernel
(grid, candidate configs, arguments updated in place) and ``call(args)``, which allocates buffers
(``_empty_strided_cuda`` / ``_empty_strided_cpu``, torch's C entry points), launches kernels (on
CUDA through ``launcher.run(_stream, ...)``, the stream fetched once per call), calls extern and
fallback kernels through ``torch.ops.aten``, frees each intermediate after its last use (``del``,
so the caching allocator reuses its memory), and returns the graph's outputs. What is freed when, which storage a buffer
takes over and which kernels are duplicates is decided by ``memory_planning.MemoryPlanner``; this
module writes the lines.

Symbolic sizes (dynamic shapes): ``call`` first computes each size symbol from the arguments
(``s0 = arg0.size(0)``, ``graph.symbol_sources``); allocations, views, extern calls and kernel
size arguments are Python expressions over those symbols, evaluated at each call. A
data-dependent (unbacked) symbol is bound right after the extern call whose result defines it
(``u0 = buf1.size()[0]``, ``u1 = buf3`` for ``.item()``), followed by the graph's runtime checks
on it (``_assert_scalar``) once every symbol they read is bound.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.utils._pytree as pytree

from .. import metrics
from .. import symbolic as S
from ..sizevars import SymbolicSizeError
from ..ir import nodes as ir
from ..scheduler import KernelGroup, graph_output_names
from .memory_planning import MemoryPlanner, free_inputs_after_last_use, kernel_dedup_key
from .triton_kernel import GeneratedKernel, TritonKernelCodegen, kernel_name

aten = torch.ops.aten


def _size(x) -> str:
    """A size as Python source: a literal, or an expression over the call's size symbols."""
    if isinstance(x, S.Expr):
        return str(x.int_value) if x.is_number else S.pexpr(x)
    return str(int(x))


def _shape(xs) -> str:
    xs = [_size(x) for x in xs]
    return "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"


def _ref(node: Any) -> str:
    """Python expression for an IR node that exists at runtime."""
    if isinstance(node, ir.ReinterpretView):
        L = node.layout
        base = node.data.get_name()
        # offsets are relative to the base tensor's own start (its storage offset included)
        return f"reinterpret_tensor({base}, {_shape(L.size)}, {_shape(L.stride)}, {_size(L.offset)})"
    if isinstance(node, ir.Buffer):
        return node.name
    raise TypeError(f"no runtime reference for {type(node).__name__}")


def _same_layout(a: Any, b: Any) -> bool:
    """Whether two layouts are the same static view: size, stride and offset (0 for both)."""
    vals = (*a.size, *a.stride, *b.size, *b.stride, a.offset, b.offset)
    return (
        all(isinstance(v, int) for v in vals)
        and a.offset == 0
        and b.offset == 0
        and tuple(a.size) == tuple(b.size)
        and tuple(a.stride) == tuple(b.stride)
    )


def _is_zero(x: Any) -> bool:
    """Whether a size expression is the constant 0."""
    if isinstance(x, S.Expr):
        return x.is_number and x.int_value == 0
    return int(x) == 0


def _contiguous(L: Any) -> bool:
    """Whether a layout is row-major contiguous (``Layout.is_contiguous``, its strides the products
    of the sizes after them, symbolic ones included) and starts at offset 0."""
    return _is_zero(L.offset) and L.is_contiguous()


def _keypath_source(expr: str, path: tuple) -> str:
    """Python source reading a value at pytree key ``path`` of the value named ``expr``: how an
    unbacked symbol is read from the extern result that defines it (Dynamo's
    ``unbacked_bindings`` key paths)."""
    from torch.fx.experimental.symbolic_shapes import CallMethodKey, ConvertIntKey, DivideByKey

    for k in path:
        if isinstance(k, pytree.SequenceKey):
            expr = f"{expr}[{k.idx}]"
        elif isinstance(k, CallMethodKey):
            expr = f"{expr}.{k.name}()"
        elif isinstance(k, ConvertIntKey):
            expr = f"int({expr})"
        elif isinstance(k, DivideByKey) and isinstance(k.divisor, int):
            expr = f"({expr} // {k.divisor})"
        else:
            raise SymbolicSizeError(f"a data-dependent size at key path {path}: no Python form for {k!r}")
    return expr


def _assert_source(terms: list) -> str:
    """A runtime check's condition: its ``(lhs, op, rhs)`` terms as one Python expression."""
    return " and ".join(f"{_size(a)} {op} {_size(b)}" for a, op, b in terms)


# extern matrix products written into a buffer the wrapper allocates (``out=``, as Inductor's
# ``extern_kernels.mm``), symbolic row-major layouts included: the result joins the buffer pool,
# needs no stride check, and torch's own Python binding is about 3 us cheaper per call than
# calling the OpOverload
_OUT_VARIANTS = {aten.mm.default: "torch.mm", aten.addmm.default: "torch.addmm", aten.bmm.default: "torch.bmm"}
# extern ops whose result is a fresh tensor of exactly its layout's storage (no view of an input,
# no larger storage): after its stride check it may give its storage on, like an allocated buffer
_FRESH_RESULTS = frozenset({aten.convolution.default, *_OUT_VARIANTS})


class WrapperCodegen:
    """Builds the module source for a lowered, scheduled graph (``graph``: the GraphLowering,
    ``items``: the scheduler's kernel groups and extern nodes in call order); ``generate()``
    returns the source and its constants."""

    def __init__(self, graph, items: list[Any]):
        self.graph, self.items = graph, items
        self.kernels: list[GeneratedKernel] = []
        self.consts: dict[str, Any] = {}
        self.device = graph.default_device

    def _const(self, value: Any) -> str:
        """A literal for simple values, else a module-level constant holding the object."""
        if isinstance(value, S.Expr):  # a symbolic size argument: computed at each call
            return _size(value)
        if value is None or isinstance(value, (bool, int, float, str)):
            if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
                k = f"_c{len(self.consts)}"
                self.consts[k] = value
                return k
            return repr(value)
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self._const(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
        k = f"_c{len(self.consts)}"
        self.consts[k] = value
        return k

    def _extern_arg(self, a: Any, inputs: list) -> str:
        if isinstance(a, ir.TensorArg):
            node = inputs[a.i]
            # a view equal to its base's own layout is the base itself (aten kernels read any
            # strides; this only saves making the view, about 1.5 us)
            base = getattr(node, "data", None) if isinstance(node, ir.ReinterpretView) else None
            if isinstance(base, ir.Buffer) and base.layout is not None and _same_layout(node.layout, base.layout):
                return base.get_name()
            return _ref(node)
        if isinstance(a, (list, tuple)) and any(isinstance(x, ir.TensorArg) for x in a):
            inner = ", ".join(self._extern_arg(x, inputs) for x in a)
            return f"[{inner}]"
        return self._const(a)

    @staticmethod
    def _ensure_strides(buf: ir.Buffer) -> str:
        """Kernels index an extern/fallback result with the strides its meta tensor had; an aten
        kernel that returns other strides at runtime is copied into that layout."""
        L = buf.layout
        return f"{buf.name} = ensure_strides({buf.name}, {_shape(L.size)}, {_shape(L.stride)})"

    def _launcher(self, gk: GeneratedKernel) -> str:
        """Module-level statement building the kernel's ``KernelLauncher`` (grid, configs, argument
        dtypes for compiling ahead, positions of arguments updated in place)."""
        grid = [(str(b), n if isinstance(n, str) else int(n)) for b, n in gk.grid_axes]
        configs = [{str(k): int(v) for k, v in c.items()} for c in gk.configs]
        dtypes = [str(self.graph.get_dtype(a)) for a in gk.arg_names] + ["int"] * len(gk.size_args)
        dtypes_src = "(" + ", ".join(dtypes) + ("," if len(dtypes) == 1 else "") + ")"
        mutated = tuple(i for i, a in enumerate(gk.arg_names) if a in set(gk.mutated_args))
        return (
            f"{gk.name}_launcher = make_launcher({gk.name}, {grid!r}, {configs!r}, {dtypes_src}, {mutated!r}, "
            f"_device.type)"
        )

    def generate(self) -> tuple[str, dict[str, Any]]:
        """The module source and its constants (module globals injected at load time)."""
        g = self.graph
        self.plan = MemoryPlanner(self.items, graph_output_names(g))
        self.body: list[str] = []
        self.kernel_src: list[str] = []
        self.launchers: list[str] = []
        self.unique: dict[tuple, GeneratedKernel] = {}
        # in call order: each launch (kernel name, its KernelGroup, the kernel generated for it)
        # and each extern or fallback call's buffer, for the kernel report (``tilefuse.report``)
        self.launches: list[tuple[str, KernelGroup, GeneratedKernel]] = []
        self.extern_calls: list[ir.ExternKernel] = []
        # per scheduled item that became a kernel: the kernel it launches (the debug folder's
        # kernel groups); per kernel defined: what it computes and moves (the module's _kernel_info)
        self.item_kernels: dict[int, str] = {}
        self.kernel_info: dict[str, dict] = {}
        # runtime checks not yet emitted, each with the data-dependent symbols it reads
        unbacked = g.sizevars.unbacked
        self.pending_asserts = [
            (
                terms,
                msg,
                {f.name for a, _, b in terms for e in (a, b) if isinstance(e, S.Expr) for f in e.free_symbols}
                & unbacked,
            )
            for terms, msg in getattr(g, "runtime_asserts", ())
        ]
        # data-dependent symbols defined so far: a backward graph's come in as arguments
        self.bound: set[str] = {n for n in unbacked if n in g.symbol_sources}
        self._emit_ready_asserts()
        for i, item in enumerate(self.items):
            if isinstance(item, KernelGroup):
                self._emit_kernel_group(item, i)
            else:
                self._emit_extern_item(item)
            # free what is no longer needed (a reusable buffer's `del` is dropped if it is reused)
            for n in self.plan.release_dead(i, len(self.body)):
                self.body.append(f"del {n}")
        if self.pending_asserts:
            raise SymbolicSizeError(f"runtime check {self.pending_asserts[0][1]!r} reads a symbol no call binds")
        body = [ln for ln in self.body if ln]
        rets = [_ref(o) if isinstance(o, ir.IRNode) else self._const(o) for o in g.outputs]
        body = free_inputs_after_last_use(body, [n for n in g.graph_input_order if n], ", ".join(rets))
        head = _module_header(g.name, self.device)
        call = self._call_function(body, rets)
        # launchers after all kernels: a kernel's first line (part of Triton's cache key) does not
        # depend on them
        tail = self.launchers + [
            f"_launchers = [{', '.join(k.name + '_launcher' for k in self.kernels)}]",
            "",
            "",
            "",
        ]
        src = "\n".join(head) + "\n\n".join(self.kernel_src) + "\n\n" + "\n".join(tail) + "\n".join(call) + "\n"
        src += module_trailer(g.name, self.input_specs(), self.kernel_info)
        consts = dict(self.consts)
        consts["_constants"] = dict(g.constants)
        return src, consts

    def _emit_kernel_group(self, item: KernelGroup, i: int) -> None:
        """Generate the group's kernel (or reuse an identical one), give its outputs storage and
        launch it."""
        plan = self.plan
        keep = {n.name for n in item.nodes if n.name in plan.out_names or n.name in plan.readers}
        cg = TritonKernelCodegen(item, "", self.device, keep, plan.inplace_candidates(item, i))
        cg.name = kname = kernel_name(item, len(self.kernels), cg.persistent)
        gk = cg.generate()
        if not gk.arg_names:
            return  # every value it computed is unused (indices read only by an empty buffer)
        metrics.generated_kernel_count += 1
        if not gk.mutated_args:
            # atomic-add targets and in-place outputs' inputs: updated in place, so restored after
            # each autotuning run
            targets = {n.buf.target.name for n in item.nodes if isinstance(n.buf, ir.MutationBuffer)}
            targets |= set(gk.inplace.values())
            gk.mutated_args = [a for a in gk.arg_names if a in targets]
        key = kernel_dedup_key(gk, kname)
        first = self.unique.get(key)
        if first is None:
            self.unique[key] = gk
            self.kernels.append(gk)
            self.kernel_src.append(gk.source)
            self.launchers.append(self._launcher(gk))
            self.kernel_info[kname] = self._kernel_info(item, gk)
        else:
            metrics.reused_kernel_count += 1
            kname = first.name
        self.item_kernels[i] = kname
        for n in item.nodes:
            if n.name in gk.removed or isinstance(n.buf, ir.MutationBuffer):
                continue
            src = gk.inplace.get(n.name)
            if src is not None:
                # stored into the dying input's memory: the input's tensor is the output
                L = n.buf.layout
                if plan.take_over(n.name, src, L):
                    self.body.append(f"{n.name} = {src}  # in place")
                else:
                    self.body.append(
                        f"{n.name} = reinterpret_tensor({src}, {_shape(L.size)}, {_shape(L.stride)}, 0)  # in place"
                    )
            else:
                self._allocate(n.name, n.buf.layout)
            plan.live.append(n.name)
        call_args = ", ".join(gk.arg_names + [_size(e) for e in gk.size_args])
        if self.device.type == "cuda":
            # the lean launch (``KernelLauncher.run``) on the stream the call fetched once
            self.body.append(f"{kname}_launcher.run(_stream, {call_args})")
        else:
            self.body.append(f"{kname}_launcher({call_args})")
        self.launches.append((kname, item, gk))

    def _kernel_info(self, item: KernelGroup, gk: GeneratedKernel) -> dict:
        """What a kernel computes and moves, for the module's ``_kernel_info``: the buffers of
        the nodes fused into it, their body ops in order, the buffers it reads and writes, and
        ``bytes``: the whole storage of each buffer argument read, plus that of each written
        (an argument updated in place counts twice), an int for static sizes, else None (the
        benchmark harness then sums the launch's own tensors); ``twice``: positions of the
        arguments counted twice."""
        g = self.graph
        written = {n.name for n in item.nodes if n.name in gk.arg_names}
        twice = set(gk.mutated_args) | set(gk.inplace.values())
        ops: list[str] = []
        for n in item.nodes:
            for bn in n.body.nodes:
                op = bn.args[2] if bn.op == "reduction" and len(bn.args) > 2 else bn.op
                if isinstance(op, str) and op not in _INFO_SKIP and op not in ops:
                    ops.append(op)
        total: Any = 0
        for a in gk.arg_names:
            buf = g.graph_inputs.get(a) or g.name_to_buffer.get(a)
            L = getattr(buf, "layout", None)
            size = L.storage_size() if L is not None else None
            if not isinstance(size, int) or total is None:
                total = None
                continue
            total += size * L.dtype.itemsize * (2 if a in twice else 1)
        return {
            "nodes": [n.name for n in item.nodes],
            "ops": ops,
            "reads": [a for a in gk.arg_names if a not in written or a in twice],
            "writes": [a for a in gk.arg_names if a in written or a in twice],
            "bytes": total,
            "twice": [i for i, a in enumerate(gk.arg_names) if a in twice],
            "numel": gk.numel if isinstance(gk.numel, int) else _size(gk.numel),
            "rnumel": gk.rnumel if isinstance(gk.rnumel, int) else _size(gk.rnumel),
        }

    def input_specs(self) -> list:
        """The recorded inputs of ``call`` for the benchmark harness, one per argument:
        ``("tensor", size, stride, dtype, device, storage offset)`` at the example inputs' sizes
        (a symbolic size at its hint), ``("int", value)`` for a size argument, ``("float", text)``
        for a float that is not finite, ``("value", v)`` for any other argument (a Python scalar,
        or None when it cannot be written as one)."""
        out: list = []
        for ex in self.graph.example_inputs:
            if isinstance(ex, torch.Tensor) and ex.layout == torch.strided:
                out.append(
                    (
                        "tensor",
                        tuple(_hint(v) for v in ex.shape),
                        tuple(_hint(v) for v in ex.stride()),
                        str(ex.dtype),
                        str(ex.device),
                        _hint(ex.storage_offset()),
                    )
                )
            elif isinstance(ex, (int, torch.SymInt)) and not isinstance(ex, bool):
                out.append(("int", _hint(ex)))
            elif isinstance(ex, float) and not math.isfinite(ex):
                out.append(("float", str(ex)))  # float("nan"): repr(nan) is no Python literal
            else:
                out.append(("value", ex if ex is None or isinstance(ex, (bool, int, float)) else None))
        return out

    def _emit_extern_item(self, item: Any) -> None:
        """A MultiOutput's element, an extern or fallback kernel's call, or an empty buffer's
        allocation."""
        buf = item.buf
        body = self.body
        if isinstance(buf, ir.MultiOutput):
            path = "".join(f"[{p}]" for p in buf.path)
            body.append(f"{buf.name} = {buf.parent.name}{path}")
            if buf.name in self.plan.readers or buf.name in self.plan.out_names:
                # an unread output is not checked: aten may leave it empty where the meta kernel
                # gives it a shape (embedding_bag's offset2bag on the CPU)
                body.append(self._ensure_strides(buf))
        elif isinstance(buf, ir.ExternKernel):
            self.extern_calls.append(buf)
            if isinstance(buf, ir.FallbackKernel):
                metrics.fallback_kernel_count += 1
            elif not isinstance(buf, ir.RandomSeeds):
                metrics.extern_kernel_count += 1
            op = buf.op
            a = ", ".join(self._extern_arg(x, buf.inputs) for x in buf.args)
            kw = ", ".join(f"{k}={self._extern_arg(v, buf.inputs)}" for k, v in buf.kwargs.items())
            out_fn = _OUT_VARIANTS.get(op) if not isinstance(buf, ir.FallbackKernel) else None
            if (
                out_fn is not None
                and buf.layout is not None
                and _contiguous(buf.layout)
                and set(buf.kwargs) <= {"beta", "alpha"}
            ):
                self._allocate(buf.name, buf.layout)
                body.append(f"{out_fn}({a}{', ' if a and kw else ''}{kw}, out={buf.name})  # {op}")
            else:
                # the call allocates its result itself: pooled storage goes back to the allocator
                self.plan.release_pool()
                call = f"{self._const(op)}({a}{', ' if a and kw else ''}{kw})"
                body.append(f"{buf.name} = {call}  # {op}")
                self._bind_unbacked(buf)
                if buf.layout is not None:
                    body.append(self._ensure_strides(buf))
                    if op in _FRESH_RESULTS:
                        self.plan.adopt(buf.name, buf.layout)
        else:  # an empty ComputedBuffer: allocation only
            self._allocate(buf.name, buf.layout)
        self.plan.live.append(buf.name)

    def _bind_unbacked(self, buf: Any) -> None:
        """After an extern call: bind the data-dependent size symbols its result defines, then
        emit the runtime checks whose symbols are now all bound."""
        defs = getattr(buf, "unbacked_defs", None)
        if not defs:
            return
        for name, path in defs.items():
            self.body.append(f"{name} = {_keypath_source(buf.name, tuple(path))}")
            self.bound.add(name)
        self._emit_ready_asserts()

    def _emit_ready_asserts(self) -> None:
        """The pending runtime checks whose data-dependent symbols are all bound, in graph order."""
        left = []
        for terms, msg, syms in self.pending_asserts:
            if syms <= self.bound:
                self.body.append(f"if not ({_assert_source(terms)}): raise RuntimeError({msg!r})")
            else:
                left.append((terms, msg, syms))
        self.pending_asserts = left

    def _allocate(self, name: str, L: Any) -> None:
        """The lines giving buffer ``name`` its storage (``MemoryPlanner.allocate``): a freed
        buffer's storage (its ``del`` line blanked), or a fresh allocation."""
        alloc = self.plan.allocate(name, L)
        if alloc.reuses is not None:
            old = alloc.reuses
            self.body[alloc.drop_line] = ""
            self.body.append(
                f"{name} = {old}"
                if alloc.same_layout
                else f"{name} = reinterpret_tensor({old}, {_shape(L.size)}, {_shape(L.stride)}, 0)"
            )
            self.body.append(f"del {old}  # reused")
        elif self.device.type == "cuda":
            # torch's C entry point for a CUDA allocation on the current device (the call runs
            # under the graph's device guard), as Inductor's wrapper: no Python argument parsing
            # or dispatch, which a training step's hundreds of allocations per call notice
            self.body.append(f"{name} = _empty_strided_cuda({_shape(L.size)}, {_shape(L.stride)}, {L.dtype})")
        elif self.device.type == "cpu":
            # the CPU's C entry point (Inductor's ``empty_strided_cpu``): no argument parsing
            self.body.append(f"{name} = _empty_strided_cpu({_shape(L.size)}, {_shape(L.stride)}, {L.dtype})")
        else:
            self.body.append(
                f"{name} = torch.empty_strided({_shape(L.size)}, {_shape(L.stride)}, dtype={L.dtype}, device=_device)"
            )

    def _call_function(self, body: list[str], rets: list[str]) -> list[str]:
        """``def call(args)``: unpack and clear the boxed inputs, copy the 0-d CPU tensor inputs of a
        CUDA graph to its device (``GraphLowering.host_scalar_inputs``; the CPU tensor stays as
        ``<name>_host`` where host arithmetic the graph returns reads it), compute the size symbols and
        constants it uses, run ``body`` (under the graph's device guard on CUDA) and return."""
        g = self.graph
        sig = [n or f"_unused{k}" for k, n in enumerate(g.graph_input_order)]
        call = ["def call(args):"]
        if sig:
            call.append(f"    {', '.join(sig)}{',' if len(sig) == 1 else ''} = args")
        call.append("    args.clear()")
        for name in g.host_scalar_inputs:
            if name in g.host_scalar_twins:
                call.append(f"    {name}_host = {name}")
            call.append(f"    {name} = {name}.to(_device)")
        used = set(re.findall(r"\b[su]\d+\b", "\n".join(body + rets)))
        for sname in sorted(used & set(g.sizevars.symbols), key=lambda n: (n[0], int(n[1:]))):
            src = g.symbol_sources.get(sname)
            if src is None and sname in self.bound:
                continue  # a data-dependent size, bound after the call that defines it
            if src is None:
                raise SymbolicSizeError(f"size symbol {sname} cannot be computed from the graph's inputs")
            pos, what, d = src
            call.append(f"    {sname} = {sig[pos]}" if what == "int" else f"    {sname} = {sig[pos]}.{what}({d})")
        for cname in g.constants:
            call.append(f"    {cname} = _constants[{cname!r}]")
        ret = f"return ({', '.join(rets)}{',' if len(rets) == 1 else ''})"
        if self.device.type == "cuda":
            # kernels launch on, and buffers are allocated on, the current device: the graph's
            # device while the call runs (its tensors may live on another GPU than the current one)
            idx = self.device.index if self.device.index is not None else 0
            call.append(f"    with torch.cuda._DeviceGuard({idx}):")
            if any("_launcher.run(_stream," in ln for ln in body):
                call.append(f"        _stream = launch_stream({idx})")
            call += ["        " + ln for ln in body]
            call.append("        " + ret)
        else:
            call += ["    " + ln for ln in body]
            call.append("    " + ret)
        return call


# body ops that move or name values rather than compute them (left out of _kernel_info's ops)
_INFO_SKIP = frozenset({"load", "store", "store_reduction", "constant", "index_expr", "to_dtype", "indirect_indexing"})


def _hint(v: Any) -> int:
    """A size as an int: a SymInt at its hint (8 when it has none: a data-dependent size)."""
    if isinstance(v, torch.SymInt):
        hint = v.node.hint
        return int(hint) if hint is not None else 8
    return int(v)


def module_trailer(graph_name: str, input_specs: list, kernel_info: dict) -> str:
    """The generated module's last lines: what its benchmark harness needs (``_input_specs``,
    ``_kernel_info``; see ``WrapperCodegen.input_specs`` and ``_kernel_info``) and the
    ``__main__`` block that runs it (``tilefuse.runtime.benchmark``): ``python module.py``
    times the graph on random inputs of the recorded layouts, per call and per kernel."""
    info = "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in kernel_info.items()) + "}"
    return (
        "\n\n# what `python <this file>` runs on (tilefuse.runtime.benchmark)\n"
        f"_graph_name = {graph_name!r}\n"
        f"_input_specs = {input_specs!r}\n"
        f"_kernel_info = {info}\n"
        "\n\n"
        'if __name__ == "__main__":\n'
        "    from tilefuse.runtime.benchmark import compiled_module_main\n"
        "\n"
        "    compiled_module_main(globals())\n"
    )


# the generated module's imports and the Triton helpers its kernels call (combine functions of
# reductions and scans, integer power)
_HELPERS = [
    "",
    "",
    "@_jit",
    "def _prod_combine(a, b):",
    "    return a * b",
    "",
    "",
    "@_jit",
    "def _max_nan_combine(a, b):",
    "    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)",
    "",
    "",
    "@_jit",
    "def _min_nan_combine(a, b):",
    "    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)",
    "",
    "",
    "@_jit",
    "def _ipow(a, b, BITS: tl.constexpr, SIGNED: tl.constexpr):",
    "    # integer a ** b as torch's powi: squaring over the exponent's bits (products wrap),",
    "    # and for b < 0: 1 for a == 1, +-1 for a == -1, else 0",
    "    r = a * 0 + 1",
    "    x = a",
    "    e = b",
    "    for _ in range(BITS):",
    "        r = tl.where((e & 1) != 0, r * x, r)",
    "        x = x * x",
    "        e = e >> 1",
    "    if SIGNED:",
    "        unit = tl.where((b & 1) != 0, r * 0 - 1, r * 0 + 1)",
    "        r = tl.where(b < 0, tl.where(a == 1, r * 0 + 1, tl.where(a == -1, unit, r * 0)), r)",
    "    return r",
    "",
    "",
    "@_jit",
    "def _logaddexp_combine(a, b):",
    "    # log(exp(a) + exp(b)); equal operands (both +-inf included) give m + log 2",
    "    m = tl.maximum(a, b)",
    "    mn = tl.minimum(a, b)",
    "    r = tl.where(mn == m, m + 0.6931471805599453, m + tl.log(1.0 + tl.exp(mn - m)))",
    "    return tl.where((a != a) | (b != b), a + b, r)",
    "",
    "",
]


# a CPU module run as a script (``python module.py``): its kernels need Triton's interpreter,
# which must be switched on before triton is imported
_RUN_AS_SCRIPT_ON_CPU = [
    "if __name__ == '__main__':",
    "    import os",
    "",
    "    os.environ.setdefault('TRITON_INTERPRET', '1')",
]


def _module_header(graph_name: str, device: torch.device) -> list[str]:
    """The generated module's first lines: its title, imports, the graph's device, the allocation
    and JIT entry points, and the Triton helper functions (``_HELPERS``)."""
    alloc = "cuda" if device.type == "cuda" else "cpu"
    return (
        [
            f"# tilefuse: generated module for graph {graph_name}",
            "import functools",
            "import torch",
        ]
        + (_RUN_AS_SCRIPT_ON_CPU if device.type != "cuda" else [])
        + [
            "import triton",
            "import triton.language as tl",
            "from triton.language.extra import libdevice  # noqa: F401",
            "from tilefuse.runtime import ensure_strides, jit_for, launch_stream, make_launcher, reinterpret_tensor",
            "",
            f"_device = torch.device({str(device)!r})",
            # the device's allocation entry point (two lines either way: the kernels' first lines,
            # part of Triton's cache key, stay where they were)
            f"_empty_strided_{alloc} = getattr(torch._C._dynamo.guards, '_empty_strided_{alloc}', None) or (",
            f"    lambda size, stride, dtype: torch.empty_strided(size, stride, dtype=dtype, device='{alloc}'))",
            f"_jit = jit_for({device.type!r})",
            f"_jit_dynamic = functools.partial(jit_for, {device.type!r})",
        ]
        + _HELPERS
    )
