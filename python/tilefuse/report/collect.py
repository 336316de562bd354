"""Collecting the kernel report's data: what each compiled graph launches and how long each launch takes.

While a ``Collector`` runs (``tilefuse.report.collect()``), every graph tilefuse compiles is
recorded by a compile hook (``tilefuse.backend.compile_hooks``):

* per kernel launch of the graph's ``call``: the kernel's name, the buffers (scheduler nodes) it
  fuses, the FX nodes whose values it computes (``tilefuse.ir.loops.buffer_origins``: the aten ops
  it fused, inlined ones included), its iteration space and an estimate of its arithmetic (each
  node's compute ops per element, ``LoopBody.op_count``, times its elements: size hints for
  symbolic sizes);
* per extern or fallback call (mm, convolution, attention, aten ops without a lowering): the op;
* the fusions the scheduler refused while scheduling the graph, with the rule and its reason (the
  ``tilefuse.fusion`` log's ``cannot fuse`` records, captured at DEBUG).

The graph's ``call`` is then replaced by an instrumented copy (its source parsed with ``ast``,
each launcher call and extern call wrapped by a timing function; the kernels and launchers are
the module's own). Each launch is timed: with CUDA events around it on a CUDA graph, with
``time.perf_counter`` otherwise (Triton's interpreter on CPU tensors). Bytes moved are measured
from the launch's actual arguments (every tensor argument read or written once, an argument the
kernel updates in place twice: the traffic of a perfect kernel); an extern call's FLOPs come
from torch's FLOP formulas (``torch.utils.flop_counter``) on its actual arguments.

Collection turns the graph cache off (a graph taken from it would not be lowered, so nothing
would be known about it) and resets Dynamo when it starts (``reset_dynamo``), so functions
compiled before it are compiled again and seen. Under CUDA graphs (``mode="reduce-overhead"``)
the recording runs untimed and replays run no Python, so only the calls before the recording
are timed: run the report without that mode.
"""

from __future__ import annotations

import ast
import gc
import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import backend, config, metrics
from .. import sizevars as SV
from ..ir import loops as ir_loops
from ..logs import fusion_log


# the timings kept per launch site: a long run keeps its first call and its latest calls (CUDA
# event pairs hold device resources until they are read)
MAX_SAMPLES = 1000


@dataclass
class ItemRecord:
    """One launch site of a compiled graph: a Triton kernel launch (``kind`` "kernel") or an
    extern / fallback call ("extern"). ``name``: the kernel's name or the aten op; ``buf``: the
    buffer it writes (a kernel's first node); ``nodes``: the buffers a kernel computes;
    ``origins``: ``"<fx node>: <aten op>"`` of the values it computes; ``flops``: arithmetic per
    call (None: unknown); ``bytes``: bytes moved per call, measured at the first call;
    ``samples``: seconds per call (floats), or CUDA event pairs until ``Collector.stop``: the first
    call's and the latest ``MAX_SAMPLES - 1``; ``calls``: every call counted."""

    kind: str
    graph: str
    name: str
    buf: str
    device: str
    nodes: list = field(default_factory=list)
    origins: list = field(default_factory=list)
    space: str = ""
    flops: float | None = None
    bytes: int | None = None
    samples: list = field(default_factory=list)
    calls: int = 0
    mutated: tuple = ()
    op: Any = None

    def seconds(self) -> tuple[float, int, bool]:
        """(seconds per call, calls, steady): the median of the kept calls after the first (the
        first compiles, autotunes and warms caches) when there are several, else the one call's
        time with ``steady`` False. (0, 0, False) when it never ran."""
        s = [x for x in self.samples if isinstance(x, float)]
        if not s:
            return 0.0, 0, False
        rest = sorted(s[1:]) if len(s) > 1 else s
        return rest[len(rest) // 2], max(self.calls, len(s)), len(s) > 1

    def add(self, sample: Any) -> None:
        """Keep one call's sample (the first call's always, then the latest ``MAX_SAMPLES - 1``)."""
        self.calls += 1
        if len(self.samples) >= MAX_SAMPLES:
            del self.samples[1]
        self.samples.append(sample)


@dataclass
class RefusalRecord:
    """One fusion the scheduler refused: ``node`` (a buffer; ``origins``: the FX nodes and ops it
    computes) did not join ``target`` (the kernel or extern call as the fusion log describes it at
    that moment: its position in the schedule then, its buffers then, its iteration space) by
    ``rule`` (a function of ``scheduler/fusion.py``) for ``reason``. ``by``: the index in the
    graph's ``items`` of the launch or call ``target`` became; ``ended``: that of the kernel
    ``node`` ended in (None where that is no item of the report: a kernel left with nothing to
    compute, a multi-output call's element)."""

    node: str
    origins: list
    target: str
    rule: str
    reason: str
    by: int | None = None
    ended: int | None = None


@dataclass
class GraphRecord:
    """One compiled graph: its kernel launches and extern calls in call order (an item's index
    in ``items`` is its number on the page), and the fusions its scheduling refused
    (``RefusalRecord``)."""

    name: str
    device: str
    items: list = field(default_factory=list)
    refusals: list = field(default_factory=list)


def _tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the elements a tensor view covers, at most its storage (a broadcast view reads
    each stored element once)."""
    n = t.numel() * t.element_size()
    try:
        return min(n, t.untyped_storage().nbytes())
    except RuntimeError:  # no storage (a meta or sparse tensor)
        return n


def _flat_tensors(xs: Any) -> list:
    return [x for x in torch.utils._pytree.tree_leaves(xs) if isinstance(x, torch.Tensor)]


class _Timer:
    """Start and stop marks for one launch: CUDA events recorded on the current stream, or
    ``time.perf_counter`` readings (CPU)."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def start(self) -> Any:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        # on the CPU a cyclic collection would land in whichever launch is being timed (a full
        # one takes hundreds of ms): none runs inside a timed launch
        self._gc = gc.isenabled()
        gc.disable()
        return time.perf_counter()

    def stop(self, mark: Any, rec: ItemRecord) -> None:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            rec.add((mark, e))
        else:
            rec.add(time.perf_counter() - mark)

    def release(self) -> None:
        """The collector as it was before ``start`` (CPU), also after a launch that raised."""
        if not self.cuda and getattr(self, "_gc", False):
            self._gc = False
            gc.enable()


class _GraphTimers:
    """The timing functions an instrumented ``call`` invokes (``_tf_report_kernel``,
    ``_tf_report_extern``), bound to one graph's records."""

    def __init__(self, rec: GraphRecord, kernels: list[ItemRecord], externs: dict[str, ItemRecord], cuda: bool):
        self.rec, self.kernels, self.externs, self.timer = rec, kernels, externs, _Timer(cuda)

    def _capturing(self) -> bool:
        """Whether a CUDA graph is being captured (CUDA graph trees recording the call): timing
        events cannot be recorded into it, so such a call runs untimed."""
        return self.timer.cuda and torch.cuda.is_current_stream_capturing()

    def kernel(self, i: int, launcher: Any, *args: Any) -> None:
        if self._capturing():
            launcher(*args)
            return
        rec = self.kernels[i]
        if rec.bytes is None:
            rec.bytes = sum(_tensor_bytes(a) for a in args if isinstance(a, torch.Tensor)) + sum(
                _tensor_bytes(args[p]) for p in rec.mutated if isinstance(args[p], torch.Tensor)
            )
        mark = self.timer.start()
        try:
            launcher(*args)
            self.timer.stop(mark, rec)
        finally:
            self.timer.release()

    def extern(self, buf: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._capturing():
            return fn(*args, **kwargs)
        rec = self.externs[buf]
        mark = self.timer.start()
        try:
            out = fn(*args, **kwargs)
            self.timer.stop(mark, rec)
        finally:
            self.timer.release()
        if rec.bytes is None:
            ins = _flat_tensors((args, {k: v for k, v in kwargs.items() if k != "out"}))
            outs = _flat_tensors(out if out is not None else kwargs.get("out"))
            rec.bytes = sum(_tensor_bytes(t) for t in ins + outs)
            rec.flops = _extern_flops(rec.op, args, kwargs, out)
        return out


def _extern_flops(op: Any, args: tuple, kwargs: dict, out: Any) -> float | None:
    """FLOPs of one extern call from torch's FLOP formulas (``torch.utils.flop_counter``,
    FlopCounterMode's registry), on the call's arguments; None for an op without a formula."""
    from torch.utils.flop_counter import flop_registry

    packet = getattr(op, "overloadpacket", None)
    fn = flop_registry.get(packet)
    if fn is None:
        return None
    try:
        kw = {k: v for k, v in kwargs.items() if k != "out"}
        return float(fn(*args, **kw, out_val=out if out is not None else kwargs.get("out")))
    except Exception:  # noqa: BLE001 - a formula that does not take these arguments: unknown
        return None


def _kernel_flops(group: Any) -> float:
    """Arithmetic of one launch of a kernel group: per node, its compute ops per element
    (``LoopBody.op_count``: loads, stores, constants and index computations excluded) times the
    elements it runs over (size hints for symbolic sizes)."""
    sv = SV.current()
    total = 0
    for n in group.nodes:
        total += n.body.op_count() * sv.hint(n.numel) * sv.hint(n.rnumel)
    return float(total)


class _Instrument(ast.NodeTransformer):
    """Rewrites ``call``'s body: ``<kernel>_launcher(args)`` (on CUDA ``<kernel>_launcher.run(_stream,
    args)``) → ``_tf_report_kernel(i, <kernel>_launcher, args)`` (``i``: the launch's place in call order), and the call that defines an extern buffer
    (``bufN = _cK(...)``, or ``torch.mm(..., out=bufN)``) → ``_tf_report_extern("bufN", <callee>, ...)``."""

    def __init__(self, externs: set[str]):
        self.externs = set(externs)
        self.launches = 0

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        args = node.args
        if isinstance(f, ast.Attribute) and f.attr == "run" and isinstance(f.value, ast.Name):
            # the CUDA wrapper's lean launch, ``<kernel>_launcher.run(_stream, args)``: timed
            # through the launcher's general call, which finds the stream itself
            f, args = f.value, args[1:]
        if isinstance(f, ast.Name) and f.id.endswith("_launcher"):
            i = self.launches
            self.launches += 1
            return ast.Call(ast.Name("_tf_report_kernel", ast.Load()), [ast.Constant(i), f, *args], [])
        return node

    def _extern(self, name: str, call: ast.Call) -> ast.Call:
        self.externs.discard(name)  # only the defining call (``ensure_strides`` may follow)
        return ast.Call(
            ast.Name("_tf_report_extern", ast.Load()), [ast.Constant(name), call.func, *call.args], call.keywords
        )

    def visit_Assign(self, node: ast.Assign) -> Any:
        t, v = node.targets[0], node.value
        if (
            len(node.targets) == 1
            and isinstance(t, ast.Name)
            and t.id in self.externs
            and isinstance(v, ast.Call)
            and isinstance(v.func, ast.Name)
            and v.func.id.startswith("_c")
        ):
            node.value = self._extern(t.id, v)
            return node
        return self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> Any:
        v = node.value
        if isinstance(v, ast.Call):
            out = next((k.value for k in v.keywords if k.arg == "out"), None)
            if isinstance(out, ast.Name) and out.id in self.externs:
                node.value = self._extern(out.id, v)
                return node
        return self.generic_visit(node)


def instrument_call(module: Any, source: str, timers: _GraphTimers, n_kernels: int) -> Any:
    """Replace ``module.call`` by a copy whose launches and extern calls go through ``timers``;
    returns the original ``call`` (to put back). ValueError when the source's launches do not
    match the ``n_kernels`` the wrapper recorded (a module of another shape than expected)."""
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "call")
    tr = _Instrument(set(timers.externs))
    fn = tr.visit(fn)
    if tr.launches != n_kernels:
        raise ValueError(f"the module's call launches {tr.launches} kernels, the wrapper recorded {n_kernels}")
    mod_ast = ast.fix_missing_locations(ast.Module([fn], []))
    code = compile(mod_ast, f"<tilefuse report: {getattr(module, '__name__', '?')}>", "exec")
    original = module.call
    ns = module.__dict__
    ns["_tf_report_kernel"] = timers.kernel
    ns["_tf_report_extern"] = timers.extern
    exec(code, ns)
    return original


class _RefusalHandler(logging.Handler):
    """Keeps the ``cannot fuse`` records of the fusion log (``scheduler.fusion.log_refusal``:
    node, kernel description, rule, reason, and the kernel's buffers then) until the graph they
    belong to is recorded."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.pending: list[tuple] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("cannot fuse ") and isinstance(record.args, tuple) and len(record.args) == 4:
            target = list(getattr(record, "tilefuse_target", ()))
            self.pending.append((*(str(a) for a in record.args), target))


class Collector:
    """Records every graph tilefuse compiles while it runs, and times their launches. Use
    ``tilefuse.report.collect()``; ``graphs`` holds the ``GraphRecord``s, ``stop()`` resolves
    the CUDA timings and restores what ``start()`` changed."""

    def __init__(self, reset_dynamo: bool = True):
        self.graphs: list[GraphRecord] = []
        # graphs handed to tilefuse that ran eagerly while collecting (``metrics.eager_graph_count``
        # grew by that much): a CPU graph without Triton's interpreter, or a failed compile
        self.eager_graphs = 0
        self._eager_at_start = 0
        self.reset_dynamo = reset_dynamo
        self._handler = _RefusalHandler()
        self._restore: list[tuple[Any, Any]] = []
        self._saved: dict = {}
        self.running = False

    def start(self) -> Collector:
        """Install the compile hook, turn on origin tracking and the fusion log (kept from the
        application's handlers unless it was on already), turn the graph cache off."""
        if self.running:
            raise RuntimeError("this tilefuse report collector is running already")
        if self.reset_dynamo:
            torch._dynamo.reset()
            backend.install_dynamo_gc_pause()
        self._saved = {
            "graph_cache": config.graph_cache,
            "track": ir_loops.track_origins,
            "level": fusion_log.level,
            "propagate": fusion_log.propagate,
        }
        if not fusion_log.isEnabledFor(logging.DEBUG):
            fusion_log.propagate = False  # the application asked for no fusion log
        fusion_log.setLevel(logging.DEBUG)
        fusion_log.addHandler(self._handler)
        config.graph_cache = False
        ir_loops.track_origins = True
        backend.compile_hooks.append(self._on_graph)
        self._eager_at_start = metrics.eager_graph_count
        self.running = True
        return self

    def stop(self) -> Collector:
        """Undo ``start`` (the compiled graphs run their own ``call`` again) and turn CUDA event
        pairs into seconds."""
        if not self.running:
            return self
        self.running = False
        self.eager_graphs += max(0, metrics.eager_graph_count - self._eager_at_start)
        if self._on_graph in backend.compile_hooks:
            backend.compile_hooks.remove(self._on_graph)
        fusion_log.removeHandler(self._handler)
        fusion_log.setLevel(self._saved["level"])
        fusion_log.propagate = self._saved["propagate"]
        config.graph_cache = self._saved["graph_cache"]
        ir_loops.track_origins = self._saved["track"]
        for module, call in self._restore:
            module.call = call
        self._restore.clear()
        if any(isinstance(s, tuple) for g in self.graphs for it in g.items for s in it.samples):
            torch.cuda.synchronize()
            for g in self.graphs:
                for it in g.items:
                    it.samples = [s if isinstance(s, float) else s[0].elapsed_time(s[1]) / 1e3 for s in it.samples]
        return self

    def __enter__(self) -> Collector:
        return self if self.running else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _on_graph(self, compiled: Any, graph: Any, items: list, wrapper: Any) -> None:
        """The compile hook: record the graph's launches, extern calls and refused fusions, and
        instrument its ``call``. A graph it cannot record runs as compiled, left out of the
        report with one warning (the report must not change what the workload does)."""
        refused, self._handler.pending = self._handler.pending, []
        try:
            self._record(compiled, graph, items, wrapper, refused)
        except Exception as e:  # noqa: BLE001 - see above
            warnings.warn(
                f"tilefuse report: graph '{compiled.name}' is left out of the report ({type(e).__name__}: {e})",
                stacklevel=2,
            )

    def _record(self, compiled: Any, graph: Any, items: list, wrapper: Any, refused: list) -> None:
        device = str(graph.default_device)
        rec = GraphRecord(compiled.name, device)
        origins: dict[str, list[str]] = {}
        kernels = []
        for kname, group, gk in wrapper.launches:
            names = [n.name for n in group.nodes]
            org: list[str] = []
            for n in group.nodes:
                origins[n.name] = ir_loops.buffer_origins(n.buf, n.body.iter_vars, n.body.reduce_vars)
                org += origins[n.name]
            hint = SV.current().hint
            k = ItemRecord(
                "kernel",
                compiled.name,
                kname,
                names[0],
                device,
                nodes=names,
                origins=list(dict.fromkeys(org)),
                space=f"{hint(group.numel)} x {hint(group.rnumel)}" if group.rnumel != 1 else f"{hint(group.numel)}",
                flops=_kernel_flops(group),
                mutated=tuple(i for i, a in enumerate(gk.arg_names) if a in set(gk.mutated_args)),
            )
            kernels.append(k)
        externs = {}
        for buf in wrapper.extern_calls:
            externs[buf.name] = ItemRecord("extern", compiled.name, str(buf.op), buf.name, device, op=buf.op)
        # call order: the scheduled items' order, which the wrapper's launches and calls follow
        place: dict[Any, int] = {}
        for p, it in enumerate(items):
            place[id(it) if hasattr(it, "nodes") else it.name] = p
        at = [place.get(id(group), len(items)) for _, group, _ in wrapper.launches]
        at += [place.get(b, len(items)) for b in externs]
        order = sorted(range(len(at)), key=lambda i: at[i])
        every = kernels + list(externs.values())
        rec.items = [every[i] for i in order]
        # every buffer of a kernel or call -> the item's index (its number on the page)
        index = {name: i for i, it in enumerate(rec.items) for name in (it.nodes if it.kind == "kernel" else [it.buf])}
        for node, target, rule, reason, names in refused:
            by = next((index[n] for n in names if n in index), None)
            rec.refusals.append(
                RefusalRecord(node, origins.get(node, []), target, rule, reason, by=by, ended=index.get(node))
            )
        timers = _GraphTimers(rec, kernels, externs, cuda=device.startswith("cuda"))
        self._restore.append((compiled.module, instrument_call(compiled.module, compiled.source, timers, len(kernels))))
        self.graphs.append(rec)
