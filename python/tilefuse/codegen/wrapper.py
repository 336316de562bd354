"""Wrapper codegen: the Python module that runs one compiled graph (Inductor's wrapper.py).

The module defines the graph's Triton kernels, one ``tilefuse.runtime.KernelLauncher`` per kernel
(grid, candidate configs, arguments updated in place) and ``call(args)``, which allocates buffers
(``torch.empty_strided``), launches kernels, calls extern and fallback kernels through
``torch.ops.aten``, frees each intermediate after its last use (``del``, so the caching allocator
reuses its memory), and returns the graph's outputs.

Symbolic sizes (dynamic shapes): ``call`` first computes each size symbol from the arguments
(``s0 = arg0.size(0)``, ``graph.symbol_sources``); allocations, views, extern calls and kernel
size arguments are Python expressions over those symbols, evaluated at each call.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .. import metrics
from .. import symbolic as S
from ..ir import nodes as ir
from ..scheduler import KernelGroup, graph_output_names, item_reads
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


def _reuse_key(L: Any) -> tuple | None:
    """(device, dtype, storage elements, size, stride) of a static layout, or None: buffers
    with equal first three fields can share one storage."""
    if not all(isinstance(v, int) for v in (*L.size, *L.stride)) or not isinstance(L.offset, int) or L.offset:
        return None
    if any(n == 0 for n in L.size):
        return None
    span = 1 + sum((n - 1) * st for n, st in zip(L.size, L.stride))
    return (str(L.device), L.dtype, span, tuple(L.size), tuple(L.stride))


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


def _free_inputs_after_last_use(body: list[str], inputs: list[str], returned: str) -> list[str]:
    """``body`` with ``del <input>`` after the last line that names each graph input (at the top
    for one no line names), except inputs the return expression names. The call takes its inputs
    in one list it clears (AOTAutograd's boxed convention), so these names hold the only
    references the call has: a training step's backward receives the forward's saved activations
    this way, and each is released as soon as the backward is done with it instead of at the
    end of the call, as Inductor's wrapper does (``del primals_3``). Liveness is textual: the
    body is straight-line code, and a line that makes another name refer to an input (``buf5 =
    arg3``, a view of it) keeps the tensor alive through that name."""
    if not inputs:
        return body
    word = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(inputs, key=len, reverse=True)) + r")\b")
    kept = set(word.findall(returned))
    last: dict[str, int] = {}
    for k, ln in enumerate(body):
        for name in word.findall(ln):
            last[name] = k
    after: dict[int, list[str]] = {}
    for name in inputs:
        if name not in kept:
            after.setdefault(last.get(name, -1), []).append(name)
    out = [f"del {n}" for n in after.get(-1, [])]
    for k, ln in enumerate(body):
        out.append(ln)
        out += [f"del {n}" for n in after.get(k, [])]
    return out


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


def _contiguous(L: Any) -> bool:
    """Whether a layout is static, row-major contiguous (``Layout.is_contiguous``) and starts at
    offset 0."""
    return all(isinstance(v, int) for v in (*L.size, *L.stride, L.offset)) and not L.offset and L.is_contiguous()


# extern matrix products written into a buffer the wrapper allocates (``out=``, as Inductor's
# ``extern_kernels.mm``): the result joins the buffer pool, needs no stride check, and torch's
# own Python binding is about 3 us cheaper per call than calling the OpOverload
_OUT_VARIANTS = {aten.mm.default: "torch.mm", aten.addmm.default: "torch.addmm", aten.bmm.default: "torch.bmm"}


class WrapperCodegen:
    """Builds the module source for a lowered, scheduled graph."""

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
        g = self.graph
        # who reads what: decides which kernel outputs must be stored and when to free buffers
        readers: dict[str, list[int]] = {}
        for i, item in enumerate(self.items):
            for r in item_reads(item):
                readers.setdefault(r, []).append(i)
        out_names = graph_output_names(g)

        body: list[str] = []
        kernel_src: list[str] = []
        launchers: list[str] = []
        unique: dict[tuple, GeneratedKernel] = {}
        live: list[str] = []
        last_use: dict[str, int] = {}
        for name, rs in readers.items():
            last_use[name] = max(rs)
        # buffer reuse (Inductor's memory planning, simplified): a freed buffer's storage is taken
        # by the next allocation of the same dtype and storage size instead of a new allocation.
        # Only buffers this wrapper allocated, of static layout, read by generated kernels or
        # extern kernels (mm, conv, attention: fresh results, never views of their inputs), so
        # no live tensor can alias a storage that is handed on
        pool: dict[tuple, list[str]] = {}
        del_line: dict[str, int] = {}
        reusable: dict[str, tuple] = {}

        def safe_readers(name: str) -> bool:
            for j in readers.get(name, ()):
                it = self.items[j]
                if not isinstance(it, KernelGroup) and (
                    not isinstance(it.buf, ir.ExternKernel) or isinstance(it.buf, ir.FallbackKernel)
                ):
                    return False
            return True

        def allocate(name: str, L: Any) -> None:
            key = _reuse_key(L)
            free = pool.get(key[:3]) if key is not None else None
            if free:
                old = free.pop()
                body[del_line.pop(old)] = ""
                same = key[3:] == reusable[old][3:]
                body.append(
                    f"{name} = {old}"
                    if same
                    else f"{name} = reinterpret_tensor({old}, {_shape(L.size)}, {_shape(L.stride)}, 0)"
                )
                body.append(f"del {old}  # reused")
            elif self.device.type == "cuda":
                # torch's C entry point for a CUDA allocation on the current device (the call runs
                # under the graph's device guard), as Inductor's wrapper: no Python argument
                # parsing or dispatch (512 allocations per step of a 12-layer GPT training step)
                body.append(f"{name} = _empty_strided_cuda({_shape(L.size)}, {_shape(L.stride)}, {L.dtype})")
            else:
                body.append(
                    f"{name} = torch.empty_strided({_shape(L.size)}, {_shape(L.stride)}, "
                    f"dtype={L.dtype}, device=_device)"
                )
            if key is not None and name not in out_names and safe_readers(name):
                reusable[name] = key

        consumed: set[str] = set()  # buffers whose memory an in-place output took over

        def inplace_candidates(item: KernelGroup, i: int) -> dict[str, str]:
            """Output -> input pairs of a pointwise kernel that can share memory (Inductor's
            in-place reuse, ``Scheduler.decide_inplace_update``): the input is a buffer this
            wrapper allocated (``reusable``: static layout, read only by kernels), not a graph
            output, read for the last time here and, in this kernel, only by that output's node,
            at exactly the memory offset the output is stored at, with the same device, dtype and
            storage size (the sizes may differ: a [8192, 8192] product under a [8, 1024, 8192]
            GELU); the output is read by no other node of the kernel. Each
            element is then loaded before the same lane stores over it, so the output needs no
            memory of its own (an MLP's GELU stored over its matmul's result)."""
            if item.rnumel != 1:
                return {}
            pairs: dict[str, str] = {}
            readers_in = {n.name: n.read_names() for n in item.nodes}
            for n in item.nodes:
                if isinstance(n.buf, ir.MutationBuffer) or (n.name not in readers and n.name not in out_names):
                    continue
                key = _reuse_key(n.buf.layout) if n.buf.layout is not None else None
                if key is None or any(n.name in r for m, r in readers_in.items() if m != n.name):
                    continue
                _, _, loads, stores = item.maps[n]
                if len(stores) != 1:
                    continue
                for x, idx in loads:
                    if (
                        x in pairs.values()
                        or x in consumed
                        or x not in reusable
                        or x in out_names
                        or last_use.get(x) != i
                        or reusable[x][:3] != key[:3]
                        or x in readers_in
                    ):
                        continue
                    if any(x in r for m, r in readers_in.items() if m != n.name):
                        continue
                    if all(j == stores[0][1] for y, j in loads if y == x):
                        pairs[n.name] = x
                        break
            return pairs

        for i, item in enumerate(self.items):
            if isinstance(item, KernelGroup):
                keep = {n.name for n in item.nodes if n.name in out_names or n.name in readers}
                cg = TritonKernelCodegen(item, "", self.device, keep, inplace_candidates(item, i))
                cg.name = kname = kernel_name(item, len(self.kernels), cg.persistent)
                gk = cg.generate()
            if isinstance(item, KernelGroup) and not gk.arg_names:
                pass  # every value it computed is unused (indices read only by an empty buffer)
            elif isinstance(item, KernelGroup):
                metrics.generated_kernel_count += 1
                if not gk.mutated_args:
                    # atomic-add targets and in-place outputs' inputs: updated in place, so
                    # restored after each autotuning run
                    targets = {n.buf.target.name for n in item.nodes if isinstance(n.buf, ir.MutationBuffer)}
                    targets |= set(gk.inplace.values())
                    gk.mutated_args = [a for a in gk.arg_names if a in targets]
                # identical kernels (the same layer repeated in a model) are defined, compiled and
                # autotuned once: the key is the source with the kernel's name taken out, plus
                # everything the launcher is built from
                key = (
                    gk.source.replace(f"def {kname}(", "def _(", 1),
                    tuple(map(str, gk.grid_axes)),
                    repr(gk.configs),
                    tuple(i for i, a in enumerate(gk.arg_names) if a in set(gk.mutated_args)),
                )
                first = unique.get(key)
                if first is None:
                    unique[key] = gk
                    self.kernels.append(gk)
                    kernel_src.append(gk.source)
                    launchers.append(self._launcher(gk))
                else:
                    metrics.reused_kernel_count += 1
                    kname = first.name
                for n in item.nodes:
                    if n.name in gk.removed or isinstance(n.buf, ir.MutationBuffer):
                        continue
                    src = gk.inplace.get(n.name)
                    if src is not None:
                        # stored into the dying input's memory: the input's tensor is the output
                        consumed.add(src)
                        L = n.buf.layout
                        own = _reuse_key(L)
                        if own == reusable[src]:
                            body.append(f"{n.name} = {src}  # in place")
                        else:
                            body.append(
                                f"{n.name} = reinterpret_tensor({src}, {_shape(L.size)}, "
                                f"{_shape(L.stride)}, 0)  # in place"
                            )
                        if n.name not in out_names and safe_readers(n.name):
                            reusable[n.name] = own
                    else:
                        allocate(n.name, n.buf.layout)
                    live.append(n.name)
                body.append(f"{kname}_launcher({', '.join(gk.arg_names + [_size(e) for e in gk.size_args])})")
            else:
                buf = item.buf
                if isinstance(buf, ir.MultiOutput):
                    path = "".join(f"[{p}]" for p in buf.path)
                    body.append(f"{buf.name} = {buf.parent.name}{path}")
                    if buf.name in readers or buf.name in out_names:
                        # an unread output is not checked: aten may leave it empty where the meta
                        # kernel gives it a shape (embedding_bag's offset2bag on the CPU)
                        body.append(self._ensure_strides(buf))
                elif isinstance(buf, ir.ExternKernel):
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
                        allocate(buf.name, buf.layout)
                        body.append(f"{out_fn}({a}{', ' if a and kw else ''}{kw}, out={buf.name})  # {op}")
                    else:
                        call = f"{self._const(op)}({a}{', ' if a and kw else ''}{kw})"
                        body.append(f"{buf.name} = {call}  # {op}")
                        if buf.layout is not None:
                            body.append(self._ensure_strides(buf))
                else:  # an empty ComputedBuffer: allocation only
                    allocate(buf.name, buf.layout)
                live.append(buf.name)
            # free what is no longer needed (a reusable buffer's `del` is dropped if it is reused)
            dead = [n for n in live if last_use.get(n, -1) <= i and n not in out_names]
            for n in dead:
                live.remove(n)
                if n in reusable and n not in consumed:
                    del_line[n] = len(body)
                    pool.setdefault(reusable[n][:3], []).append(n)
                body.append(f"del {n}")
        body = [ln for ln in body if ln]

        rets = []
        for o in g.outputs:
            if isinstance(o, ir.IRNode):
                rets.append(_ref(o))
            else:
                rets.append(self._const(o))
        body = _free_inputs_after_last_use(body, [n for n in g.graph_input_order if n], ", ".join(rets))
        head = [
            f"# tilefuse: generated module for graph {g.name}",
            "import functools",
            "import torch",
            "import triton",
            "import triton.language as tl",
            "from triton.language.extra import libdevice  # noqa: F401",
            "from tilefuse.runtime import ensure_strides, jit_for, make_launcher, reinterpret_tensor",
            "",
            f"_device = torch.device({str(self.device)!r})",
            "_empty_strided_cuda = getattr(torch._C._dynamo.guards, '_empty_strided_cuda', None) or (",
            "    lambda size, stride, dtype: torch.empty_strided(size, stride, dtype=dtype, device='cuda'))",
            f"_jit = jit_for({self.device.type!r})",
            f"_jit_dynamic = functools.partial(jit_for, {self.device.type!r})",
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
        sig = [n or f"_unused{k}" for k, n in enumerate(g.graph_input_order)]
        call = ["def call(args):"]
        if sig:
            call.append(f"    {', '.join(sig)}{',' if len(sig) == 1 else ''} = args")
        call.append("    args.clear()")
        used = set(re.findall(r"\bs\d+\b", "\n".join(body + rets)))
        for sname in sorted(used & set(g.sizevars.symbols), key=lambda n: int(n[1:])):
            src = g.symbol_sources.get(sname)
            if src is None:
                from ..sizevars import SymbolicSizeError

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
            call += ["        " + ln for ln in body]
            call.append("        " + ret)
        else:
            call += ["    " + ln for ln in body]
            call.append("    " + ret)
        # launchers after all kernels: a kernel's first line (part of Triton's cache key) does not
        # depend on them
        tail = launchers + [f"_launchers = [{', '.join(k.name + '_launcher' for k in self.kernels)}]", "", "", ""]
        src = "\n".join(head) + "\n\n".join(kernel_src) + "\n\n" + "\n".join(tail) + "\n".join(call) + "\n"
        consts = dict(self.consts)
        consts["_constants"] = dict(g.constants)
        return src, consts
