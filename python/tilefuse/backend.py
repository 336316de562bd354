"""The ``torch.compile`` backend: ``torch.compile(model, backend="tilefuse")``.

Registered through the ``torch_dynamo_backends`` entry point (pyproject.toml), so it is found
without importing tilefuse. Dynamo hands the backend a torch-level FX graph; AOTAutograd (with
tilefuse's decomposition table) turns it into aten-level forward and backward graphs, and each is
compiled by ``compile_graph``: GraphLowering → scheduler → Triton + wrapper codegen → module.

Dynamic shapes: a graph Dynamo hands over with symbolic sizes (``dynamic=True``, ``mark_dynamic``,
or automatic dynamic shapes after a recompile) is compiled once for every size: the sizes enter
the IR as native Exprs (``tilefuse.sizevars``), kernels take them as arguments, and whatever the
compiled code assumes about them is proven or recorded as a guard in Dynamo's ShapeEnv. A graph
that cannot be compiled symbolically (``config.symbolic_shapes`` off, a size the native core cannot
express) is compiled lazily once per concrete input signature instead (``SpecializingGraph``),
which is logged. Data-dependent (unbacked) sizes (``nonzero``, boolean masks, ``.item()``) are
symbolic sizes too, bound at run time from the op's result (``tilefuse.sizevars``).

Options: ``torch.compile(m, backend="tilefuse", options={...})`` with the keys of
``tilefuse.config``. An exception while compiling a graph emits one warning naming the graph and
the cause and runs that graph eagerly, unless ``fallback_on_error`` is False (then it raises).
``mode="reduce-overhead"`` (or option ``cudagraphs``) runs each compiled graph under torch's CUDA
graph trees (``tilefuse.runtime.cudagraphs``).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import os
import sys
import time
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from . import config, metrics
from . import runtime as _runtime
from .runtime import cache_artifacts as _cache_artifacts  # noqa: F401  (torch learns the "tilefuse" artifact type)
from .layout_opt import report_output_strides, saved_output_positions
from .runtime.input_checks import InputChecks

log = logging.getLogger("tilefuse")
_graph_ids = itertools.count()

# Called as ``hook(compiled, graph, items, wrapper)`` after each graph is generated and loaded
# (not on a graph cache hit): the CompiledGraph, its GraphLowering, the scheduled items and the
# WrapperCodegen that wrote its module. The kernel report (``tilefuse.report``) adds one while it
# collects; a hook that raises fails that graph's compile as any compile error does.
compile_hooks: list = []

# Without a GPU, Triton kernels run only in Triton's interpreter, switched on before triton is
# imported (it decorates its standard library then): when this import comes first
# (``python -m tilefuse.report``) and TRITON_INTERPRET is unset, here (``interpreter_switched_on``).
interpreter_switched_on = False
if "triton" not in sys.modules and not torch.cuda.is_available() and "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "1"
    interpreter_switched_on = True


class CompiledGraph:
    """A compiled aten graph: call with the graph's inputs (boxed: one list, which the call
    empties, as AOTAutograd's boxed convention allows), get its outputs. ``compile_seconds``
    covers everything up to the loaded module, ``precompile_seconds`` the part spent compiling
    its kernels ahead of their first launch (CUDA)."""

    def __init__(
        self,
        module: Any,
        source: str,
        input_layouts: list,
        name: str,
        compile_seconds: float,
        precompile_seconds: float = 0.0,
        symbol_sources: dict | None = None,
        cache_key: str | None = None,
        pending: Any = None,
    ):
        # AOTAutograd calls a compiled graph with one list only when it has ``_boxed_call``. Dynamo
        # wraps the backward's compiled callable in ``torch._dynamo.disable`` (functools.wraps), which
        # copies the instance ``__dict__`` and nothing from the class: so an instance attribute.
        self._boxed_call = True
        self.module, self.source, self.name = module, source, name
        self.input_layouts = input_layouts  # (size, stride) per tensor input, None otherwise
        self.compile_seconds = compile_seconds
        self.precompile_seconds = precompile_seconds
        # symbolic graphs: size symbol name -> (argument position, "size" | "stride" | "int", dim)
        self.symbol_sources = symbol_sources or {}
        # the entry check: inputs copied into the layouts the kernels index (runtime.input_checks)
        self._inputs = InputChecks(input_layouts, self.symbol_sources)
        # the graph cache key whose launch records the first call stores (then None)
        self.cache_key = cache_key
        # a laid-out forward graph's output strides, reported to AOTAutograd (layout_opt.report_output_strides)
        self.output_strides: list | None = None
        # this graph's kernels still compiling in workers (runtime.PendingPrecompile, or None),
        # and whether its first call waits for every pending batch or for this one only
        # (config.precompile_wait_all, read at compile time: the call runs outside the options)
        self._pending = pending
        self._wait_all = config.precompile_wait_all
        self._ran = False  # the first call is timed (phase "first_run")
        # the aten graph, run eagerly if a kernel fails to build at the first call (set by
        # compile_graph when config.fallback_on_error is on; see _first_call), dropped once the
        # first call has built every kernel
        self.eager_graph: torch.fx.GraphModule | None = None
        # whether the first call keeps its inputs to run that graph on after a failed kernel build
        # (not a GPU backward's: see _keep_eager_fallback)
        self.hold_first_inputs = True
        self._eager_call: Any = None  # that graph's boxed callable, once fallen back to
        # the precompile batch to ask, before the first call runs anything, for kernels none of
        # whose configs compiled (runtime.unbuildable_kernels)
        self._precompile = pending

    def __call__(self, *call_args: Any) -> Any:
        # boxed (one list, AOTAutograd's convention) or plain positional arguments
        if len(call_args) == 1 and isinstance(call_args[0], list):
            args = call_args[0]
        else:
            args = list(call_args)
        if _runtime.PENDING_PRECOMPILES:
            if self._wait_all:
                _finish_pending_precompiles()
            elif self._pending is not None:
                _finish_pending_precompiles(self._pending)
                self._pending = None
        if self._eager_call is not None:
            return self._eager_call(args)
        if self._precompile is not None:
            pending, self._precompile = self._precompile, None
            bad = _runtime.unbuildable_kernels(getattr(self.module, "_launchers", ()), getattr(pending, "failures", ()))
            if bad and self.eager_graph is not None:
                self._ran = True
                name, err = next(iter(bad.items()))
                last = (err.strip().splitlines() or [""])[-1][:300]
                return self._fall_back_to_eager(
                    args, RuntimeError(f"{len(bad)} kernel(s) did not compile, e.g. {name}: {last}")
                )
        # inputs whose strides differ from the ones compiled for, on a dim the kernels index, are
        # copied into that layout, so indexing stays correct (Inductor guards on strides instead);
        # the list holds the inputs' only references here: the call frees each after its last use
        self._inputs.apply(args)
        if self._ran:
            return self.module.call(args)
        return self._first_call(args)

    def _first_call(self, args: list) -> Any:
        """The module's first run, timed as phase ``first_run`` (its kernels' first launches: CUDA
        module loads, launcher set-up; autotuning has a phase of its own and is not counted), then
        the launch records stored (phase ``cache_store``) when the graph cache wants them."""
        self._ran = True
        tuned = metrics.phase_seconds.get("autotune", 0.0)
        # the inputs, kept for the eager graph until the call ends (the module frees each input
        # after its last use): only the first call, and only with a fallback to run
        held = list(args) if self.eager_graph is not None and self.hold_first_inputs else None
        t0 = time.perf_counter()
        try:
            out = self.module.call(args)
        except Exception as e:
            if held is None or not _is_kernel_build_error(e):
                raise
            return self._fall_back_to_eager(held, e)
        # every kernel built: the aten graph (its nodes and their fake-tensor values, which every
        # later garbage collection would walk) is not needed any more
        held = self.eager_graph = None
        t1 = time.perf_counter()
        metrics.add_phase("first_run", t1 - t0 - (metrics.phase_seconds.get("autotune", 0.0) - tuned))
        if self.cache_key is not None:
            self._store_launch_records()
            metrics.add_phase("cache_store", time.perf_counter() - t1)
        return out

    def _fall_back_to_eager(self, args: list, error: BaseException) -> Any:
        """A kernel of this graph failed to build at its first launch (Triton rejected the
        generated code: a tilefuse bug, as a compile error is): warn once, run this call and every
        later one with the aten graph eagerly. The graph is functional (AOTAutograd applies input
        mutations after it returns; tilefuse's kernels never store over an input), so running it
        again from its inputs is correct whatever kernels ran before the failure; a random op
        draws again."""
        from torch._functorch.aot_autograd import make_boxed_func

        warnings.warn(
            f"tilefuse: a kernel of graph '{self.name}' failed to build at its first run "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
            f"running that graph eagerly",
            stacklevel=_runtime.user_stacklevel(),
        )
        metrics.eager_graph_count += 1
        log.debug("tilefuse: kernel build failure at the first run", exc_info=error)
        self._eager_call = make_boxed_func(self.eager_graph.forward)
        self.cache_key = None  # no launch records for a graph that does not run its kernels
        return self._eager_call(args)

    def _store_launch_records(self) -> None:
        """After the first call: every kernel has launched (and autotuned), so its launch
        record (``KernelLauncher.launch_record``) is complete; stored beside the graph cache
        entry for a later process's hit. Once per CompiledGraph, only for CUDA modules."""
        from .runtime import graph_cache

        key, self.cache_key = self.cache_key, None
        launchers = getattr(self.module, "_launchers", [])
        if not any(ln.cuda for ln in launchers):
            return
        try:
            graph_cache.store_launches(key, [ln.launch_record() for ln in launchers])
        except Exception as e:  # noqa: BLE001 - an optimization only
            log.debug("tilefuse: launch records of '%s' not stored (%s: %s)", self.name, type(e).__name__, e)


def _is_kernel_build_error(e: BaseException) -> bool:
    """Whether ``e``, raised by a compiled graph's first run, says one of its kernels could not be
    built (generated code Triton rejects), as opposed to an error of the call itself:

    * on the GPU, Triton's ``CompilationError`` (a kernel compiled at its launch, after its
      compile in the workers failed) anywhere in the exception's chain;
    * under the interpreter, which builds each kernel as it runs it, an ``InterpreterError``
      whose cause is not an ``AssertionError``: a device assert (an index out of bounds) is the
      caller's error, as eager's ``IndexError`` is; a ``ValueError``/``TypeError`` from Triton's
      semantics (shapes that do not broadcast) is tilefuse's.

    CUDA errors, out-of-memory and errors of extern (aten) kernels are none of these."""
    try:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import InterpreterError
    except ImportError:  # no Triton: nothing was built by it
        return False
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, CompilationError):
            return True
        if isinstance(e, InterpreterError):
            cause = e.__cause__ or e.__context__
            return cause is not None and not isinstance(cause, AssertionError)
        e = e.__cause__ or e.__context__
    return False


def _finish_pending_precompiles(own: Any = None) -> None:
    """Before a compiled graph's first call: wait for every graph's kernels still compiling in
    forked workers (``config.precompile_overlap``), or with ``own`` (a PendingPrecompile;
    ``config.precompile_wait_all`` off) for that batch only; the seconds are added to the
    ``precompile_wait`` phase and ``metrics.precompile_seconds``. All of them by default, not only
    this graph's: kernels launched (and configs timed by the autotuner) while the workers occupy
    every core would be slowed."""
    waited = _runtime.finish_pending() if own is None else own.wait()
    metrics.precompile_seconds += waited
    metrics.add_phase("precompile_wait", waited)


def _is_symbolic(x: Any) -> bool:
    if isinstance(x, torch.SymInt):
        return True
    if isinstance(x, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride()))
    return False


class SpecializingGraph:
    """A graph with symbolic sizes (Dynamo's dynamic shapes), compiled once per concrete input
    signature: on the first call with given shapes/strides/dtypes and integer arguments, the aten
    graph is re-traced with those concrete values (``make_fx``, fake tensors), which gives a
    static graph tilefuse compiles as usual; later calls with the same signature reuse it. A
    graph whose re-trace or compile fails runs eagerly from then on, for every signature, after
    one warning.
    (Inductor compiles one kernel set for all sizes instead; tilefuse's IR has static shapes.)"""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, name: str):
        self._boxed_call = True  # an instance attribute, as CompiledGraph's
        self.gm, self.kind, self.name = gm, kind, name
        self.cache: dict = {}
        # the options in force now (per-compile overrides included) also govern the later compiles
        self.options = {k: getattr(config, k) for k in config._OPTIONS}
        # the graph run eagerly once a specialization failed (a failure that does not depend on
        # the shape: every shape would fail alike): later signatures use it without another
        # attempt or warning
        self.eager_fn: Any = None

    def _eager(self) -> Any:
        """The symbolic aten graph as a boxed callable: eager kernels, for every signature."""
        from torch._functorch.aot_autograd import make_boxed_func

        return make_boxed_func(self.gm.forward)

    @staticmethod
    def _key(args: list) -> tuple:
        return tuple(
            (tuple(a.shape), tuple(a.stride()), a.dtype, a.device.type)
            if isinstance(a, torch.Tensor)
            else (type(a).__name__, a)
            for a in args
        )

    def __call__(self, *call_args: Any) -> Any:
        args = call_args[0] if len(call_args) == 1 and isinstance(call_args[0], list) else list(call_args)
        key = self._key(args)
        fn = self.cache.get(key) or self.eager_fn
        if fn is None:
            from torch.fx.experimental.proxy_tensor import make_fx

            with config.patch(**self.options):
                try:
                    static = make_fx(self.gm, tracing_mode="fake")(*args)
                except Exception as e:  # noqa: BLE001 - as compile_graph: warn, run eagerly
                    _failed_to_eager(f"specializing graph '{self.name}'", e)
                    fn = self.eager_fn = self._eager()
                else:
                    failed = metrics.eager_graph_count
                    fn = compile_graph(static, list(args), self.kind, specialized_from=self.name)
                    if metrics.eager_graph_count > failed:
                        # compile_graph warned and fell back: the next shapes would fail
                        # and warn alike
                        self.eager_fn = self._eager()
            self.cache[key] = fn
        out = fn(list(args))
        args.clear()
        return out


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector paused for the block when ``config.pause_gc`` is on and
    the collector is enabled (re-enabled after, also on error; nested blocks and a collector the
    user disabled are left alone). A compile allocates hundreds of thousands of short-lived
    objects, enough to trigger several full collections over the process's whole heap (torch,
    Dynamo, the model), each as slow as that heap is large, during partitioning and scheduling
    among others. Their garbage is collected after the block as usual."""
    if not (config.pause_gc and gc.isenabled()):
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# whether the start callback below paused the collector (its end callback re-enables only then)
_DYNAMO_GC_PAUSE = {"paused": False}


def _options_if_compiling_for_tilefuse() -> dict | None:
    """The ``options`` of the ``torch.compile(..., backend="tilefuse")`` whose frame Dynamo is
    compiling now ({} when none were given), or None when the frame is compiled for another
    backend or cannot be identified. Dynamo's compile callbacks are told no backend, so this
    looks up the stack for Dynamo's frame compile (``torch._dynamo.convert_frame._compile``, its
    ``compiler_fn``) and unwraps that backend (Dynamo's ``_torchdynamo_orig_backend`` wrappers,
    ``torch.compile``'s wrapper with its ``compiler_fn`` and ``kwargs``, a ``functools.partial``)
    to ``tilefuse_backend``. A torch whose frame compile looks otherwise gives None: the pause is
    an optimization only."""
    f = sys._getframe(1)
    for _ in range(64):
        if f is None:
            return None
        code = f.f_code
        if code.co_name == "_compile" and f.f_globals.get("__name__") == "torch._dynamo.convert_frame":
            fn, opts = f.f_locals.get("compiler_fn"), None
            for _ in range(16):
                if fn is tilefuse_backend:
                    return opts or {}
                for kw in (getattr(fn, "kwargs", None), getattr(fn, "keywords", None)):
                    # the outermost wrapper's options win, as its call's keywords override an
                    # inner functools.partial's
                    if opts is None and isinstance(kw, Mapping) and isinstance(kw.get("options"), Mapping):
                        opts = kw["options"]
                fn = (
                    getattr(fn, "_torchdynamo_orig_backend", None)
                    or getattr(fn, "compiler_fn", None)
                    or getattr(fn, "func", None)
                )
                if fn is None:
                    return None
            return None
        f = f.f_back
    return None


def _pause_gc_at_frame_compile(_args: Any = None) -> None:
    """Dynamo's compile-start callback (``torch._dynamo.callback_handler``): pause the collector
    for the whole frame compile (bytecode tracing, guards and the backend call) when the frame
    is compiled for tilefuse with ``pause_gc`` on (its ``options``, else ``config.pause_gc``)
    and the collector is enabled. Dynamo's tracing of a model's training step (a 12-layer GPT-2)
    allocates enough long-lived objects to run several full collections over the whole heap:
    most of those a first call would run."""
    if _DYNAMO_GC_PAUSE["paused"] or not gc.isenabled():
        return
    opts = _options_if_compiling_for_tilefuse()
    if opts is None:
        return
    pause = opts.get("pause_gc", config.pause_gc)
    if pause is True or (not isinstance(pause, bool) and config.pause_gc):
        # again, should other code have put an end callback before it since
        _put_resume_first(getattr(sys.modules.get("torch._dynamo"), "callback_handler", None))
        gc.disable()
        _DYNAMO_GC_PAUSE["paused"] = True


def _resume_gc_after_frame_compile(_args: Any = None) -> None:
    """Dynamo's compile-end callback: re-enable the collector if the start callback paused it
    (also after a failed compile: Dynamo runs end callbacks in a ``finally``)."""
    if _DYNAMO_GC_PAUSE["paused"]:
        _DYNAMO_GC_PAUSE["paused"] = False
        gc.enable()


def _put_resume_first(handler: Any) -> None:
    """``_resume_gc_after_frame_compile`` first in Dynamo's end callbacks (added if missing): an
    end callback that raises stops Dynamo's list there."""
    ends = getattr(handler, "end_callbacks", None)
    if not isinstance(ends, list) or (ends and ends[0] is _resume_gc_after_frame_compile):
        return
    if _resume_gc_after_frame_compile in ends:
        ends.remove(_resume_gc_after_frame_compile)
    ends.insert(0, _resume_gc_after_frame_compile)


def install_dynamo_gc_pause() -> bool:
    """Register ``_pause_gc_at_frame_compile`` / ``_resume_gc_after_frame_compile`` with Dynamo's
    public compile callbacks (``torch._dynamo.callback_handler``, importing Dynamo if needed)
    unless they are registered already; returns whether they are registered. Called when this
    module is imported (Dynamo's backend lookup, or an earlier ``import tilefuse.backend``) and at
    every backend call. ``torch._dynamo.reset()`` clears Dynamo's callbacks, and tilefuse is not
    told: the first frame compiled after a reset is traced with the collector running (paused
    again from its backend call) unless this is called after the reset. The end callback goes
    first in Dynamo's list (put back there by the start callback at each paused frame), so
    another end callback that raises cannot leave the collector off."""
    try:
        import torch._dynamo as dynamo
    except Exception:  # noqa: BLE001 - an optimization only
        return False
    handler = getattr(dynamo, "callback_handler", None)
    if handler is None or not isinstance(getattr(handler, "end_callbacks", None), list):
        return False
    if _pause_gc_at_frame_compile not in handler.start_callbacks:
        handler.register_start_callback(_pause_gc_at_frame_compile)
    _put_resume_first(handler)
    return True


def compile_graph(
    gm: torch.fx.GraphModule, example_inputs: list, kind: str = "forward", specialized_from: str | None = None
) -> Any:
    """Compile one aten graph to a boxed callable; on error warn and fall back to eager. A graph
    with symbolic sizes becomes a SpecializingGraph (compiled per concrete shape at call time).
    The garbage collector is paused meanwhile (``gc_paused``)."""
    with gc_paused():
        return _compile_graph(gm, example_inputs, kind, specialized_from)


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list, kind: str, specialized_from: str | None) -> Any:
    name = f"{kind}_{next(_graph_ids)}"
    if _cpu_graph_without_interpreter(gm, example_inputs, name):
        from torch._functorch.aot_autograd import make_boxed_func

        return make_boxed_func(gm.forward)
    if specialized_from is None and any(_is_symbolic(x) for x in example_inputs):
        if not config.symbolic_shapes:
            metrics.specialized_graph_count += 1
            log.info(
                "tilefuse: graph '%s' has symbolic sizes; compiling it per input shape (symbolic_shapes is off)", name
            )
            return SpecializingGraph(gm, kind, name)
        counts = metrics.snapshot()
        try:
            compiled = _compile(gm, example_inputs, name)
        except Exception as e:  # noqa: BLE001 - the per-shape path still compiles the graph
            metrics.restore(counts)
            metrics.specialized_graph_count += 1
            log.info(
                "tilefuse: graph '%s' cannot be compiled for symbolic sizes (%s: %s); compiling it "
                "per input shape instead",
                name,
                type(e).__name__,
                e,
            )
            log.debug("tilefuse: symbolic compile failure", exc_info=True)
            return SpecializingGraph(gm, kind, name)
        metrics.symbolic_graph_count += 1
        return _keep_eager_fallback(compiled, gm, kind)
    counts = metrics.snapshot()
    try:
        return _keep_eager_fallback(_compile(gm, example_inputs, name), gm, kind)
    except Exception as e:  # noqa: BLE001 - any internal error must not break the user's model
        metrics.restore(counts)  # the graph runs eagerly: nothing it generated is in use
        _failed_to_eager(f"compiling {kind} graph '{name}'", e)
        from torch._functorch.aot_autograd import make_boxed_func

        return make_boxed_func(gm.forward)


_warned_cpu_graph = False


def _cpu_graph_without_interpreter(gm: torch.fx.GraphModule, example_inputs: list, name: str) -> bool:
    """Whether graph ``name`` computes on the CPU while Triton's interpreter is off (a CPU part
    of a model on a GPU machine): tilefuse generates GPU kernels, and runs CPU kernels only
    through the interpreter, so the graph runs eagerly, counted in ``metrics.eager_graph_count``;
    the first such graph of the process gives one warning that says how to compile it."""
    global _warned_cpu_graph
    from .graph import _graph_device

    if _graph_device(gm, example_inputs).type != "cpu":
        return False
    import triton

    if triton.knobs.runtime.interpret:
        return False
    metrics.eager_graph_count += 1
    if not _warned_cpu_graph:
        _warned_cpu_graph = True
        warnings.warn(
            f"tilefuse: graph '{name}' computes on the CPU, where tilefuse runs Triton kernels only "
            "through Triton's interpreter (TRITON_INTERPRET=1 set before importing torch); it and "
            "other CPU graphs run eagerly",
            stacklevel=_runtime.user_stacklevel(),
        )
    log.info("tilefuse: graph '%s' computes on the CPU without Triton's interpreter; it runs eagerly", name)
    return True


def _failed_to_eager(what: str, e: Exception) -> None:
    """An internal error while ``what`` (a compile step of one graph): raised again when
    ``config.fallback_on_error`` is off; else one warning naming it and the error, counted in
    ``metrics.eager_graph_count`` (the caller then runs the graph eagerly)."""
    if not config.fallback_on_error:
        raise e
    first = str(e).splitlines()[0] if str(e) else ""
    warnings.warn(
        f"tilefuse: {what} failed ({type(e).__name__}: {first}); running that graph eagerly",
        stacklevel=_runtime.user_stacklevel(),
    )
    metrics.eager_graph_count += 1
    log.debug("tilefuse: %s failed", what, exc_info=e)


def _keep_eager_fallback(compiled: CompiledGraph, gm: torch.fx.GraphModule, kind: str) -> CompiledGraph:
    """With ``config.fallback_on_error`` (read now: the call runs outside the compile's
    options), the compiled graph keeps its aten graph to run eagerly if one of its kernels fails
    to build: on the GPU, a kernel none of whose configs compiled in the workers is found before
    the first call runs anything (``runtime.unbuildable_kernels``); a kernel that fails only when
    the first run builds it (under the interpreter, every kernel) is caught there, and for that
    the first run keeps its inputs until it returns (``hold_first_inputs``). Not a training
    graph's backward on the GPU: its inputs are the saved activations, which the run frees as it
    goes, so keeping them would raise the first step's peak memory; there only the check before
    the run applies."""
    if config.fallback_on_error:
        compiled.eager_graph = gm
        compiled.hold_first_inputs = not (
            kind == "backward" and any(ln.cuda for ln in getattr(compiled.module, "_launchers", ()))
        )
    return compiled


def _compile(gm: torch.fx.GraphModule, example_inputs: list, name: str) -> CompiledGraph:
    from .graph import _shape_env
    from .runtime import graph_cache

    t0 = time.perf_counter()
    kind = name.rsplit("_", 1)[0]  # graphs are named "<kind>_<n>" (_compile_graph)
    env = _shape_env(example_inputs)
    key = None
    if config.graph_cache:
        try:
            tk = time.perf_counter()
            key = graph_cache.graph_key(gm, example_inputs, env, {k: getattr(config, k) for k in config._OPTIONS}, kind)
        except Exception as e:  # noqa: BLE001 - Uncacheable, or a key part that failed: compile uncached
            log.debug("tilefuse: graph '%s' is not cached: %s: %s", name, type(e).__name__, e)
            key = None
        else:
            tl = time.perf_counter()
            metrics.add_phase("cache_key", tl - tk)
            try:
                entry = graph_cache.lookup(key, env)
            except Exception as e:  # noqa: BLE001 - a cache problem is a miss, never an error
                log.warning("tilefuse: graph cache lookup failed (%s: %s); compiling", type(e).__name__, e)
                entry = None
            metrics.add_phase("cache_lookup", time.perf_counter() - tl)
            if entry is not None:
                from .runtime import DebugDirError

                try:
                    compiled = _from_cache(entry, name, t0, key)
                    report_output_strides(getattr(compiled, "output_strides", None))
                    return compiled
                except DebugDirError:
                    raise  # the user's debug_dir, not the entry: reported as such, the entry kept
                except Exception as e:  # noqa: BLE001 - an unusable entry is a miss
                    log.warning(
                        "tilefuse: graph cache entry for '%s' could not be used (%s: %s); compiling",
                        name,
                        type(e).__name__,
                        e,
                    )
                    graph_cache.discard(key)
    before = metrics.snapshot()
    n_guards = len(env.guards) if env is not None else 0
    compiled, graph, consts = _lower_and_generate(gm, example_inputs, name, t0, kind)
    if key is not None:
        after = metrics.snapshot()
        guards = [g.expr for g in env.guards[n_guards:]] if env is not None else []
        for rel in graph.sizevars.guard_exprs:
            if rel not in guards:
                guards.append(rel)
        delta = {k: after[k] - before[k] for k in _REPLAYED_COUNTERS}
        delta["fallback_ops"] = [str(op) for op in graph.fallback_ops]  # named again on a hit
        ts = time.perf_counter()
        if graph_cache.store(
            key,
            graph_cache.CacheEntry(
                compiled.source,
                consts,
                compiled.input_layouts,
                compiled.symbol_sources,
                guards,
                delta,
                compiled.module,
                output_strides=compiled.output_strides,
            ),
        ):
            compiled.cache_key = key  # the first call stores the kernels' launch records beside it
        metrics.add_phase("cache_store", time.perf_counter() - ts)
    report_output_strides(getattr(compiled, "output_strides", None))
    return compiled


# counters a cache hit adds again (they describe the graph in use; generated_graph_count and the
# compile timings count work actually done)
_REPLAYED_COUNTERS = ("generated_kernel_count", "reused_kernel_count", "fallback_kernel_count", "extern_kernel_count")


def _from_cache(entry: Any, name: str, t0: float, key: str) -> CompiledGraph:
    """A CompiledGraph from a graph cache entry: the module loaded (and its kernels compiled) by
    this process already, else loaded from the entry's source (Triton's disk cache has the
    binaries)."""
    from .runtime import graph_cache, load_module, precompile, write_debug_source

    pre_s = 0.0
    module = entry.module
    if module is not None and config.debug_dir:
        write_debug_source(entry.source, config.debug_dir, name, entry.constants)
    missing_records = False
    if module is None:
        # kernels launched by an earlier process: their cubins load directly, without Triton's
        # JIT, so the module loads without waiting for the JIT's warm-up
        t1 = time.perf_counter()
        records = graph_cache.load_launches(key)
        module = load_module(entry.source, entry.constants, config.debug_dir, name, wait=records is None)
        metrics.add_phase("load", time.perf_counter() - t1)
        launchers = [ln for ln in module._launchers if ln.cuda]
        if launchers and records is not None and len(records) == len(module._launchers):
            t1 = time.perf_counter()
            restored = {id(ln) for ln, rec in zip(module._launchers, records) if rec is not None and ln.restore(rec)}
            metrics.add_phase("restore", time.perf_counter() - t1)
            launchers = [ln for ln in launchers if id(ln) not in restored]
        missing_records = bool(launchers)
        if launchers:
            # the rest were compiled when the entry was made: each is a load from Triton's disk
            # cache, which this process does itself anyway (forked workers would only add their start)
            pre_s = precompile(launchers, workers=min(1, config.compile_workers))
            metrics.precompile_seconds += pre_s
            metrics.add_phase("precompile", pre_s)
        entry.module = module
    for k, v in entry.metrics.items():
        if k == "fallback_ops":  # as lowering logs them, so a reader of the log sees them on a hit too
            for op in v:
                log.debug(
                    "tilefuse: no lowering for %s; it runs as a fallback kernel (graph '%s' from the graph cache)",
                    op,
                    name,
                )
            continue
        setattr(metrics, k, getattr(metrics, k) + v)
    metrics.graph_cache_hits += 1
    log.info("tilefuse: graph '%s' reused from the graph cache", name)
    from .debug import emit_output_code

    emit_output_code(name, entry.source, entry.constants, getattr(module, "__file__", None))
    compiled = CompiledGraph(
        module,
        entry.source,
        entry.input_layouts,
        name,
        time.perf_counter() - t0,
        pre_s,
        entry.symbol_sources,
        cache_key=key if missing_records else None,
    )
    compiled.output_strides = entry.output_strides
    return compiled


def _lower_and_generate(gm: torch.fx.GraphModule, example_inputs: list, name: str, t0: float, kind: str = "inference"):
    """GraphLowering → scheduler → codegen → loaded module with its kernels compiled; returns the
    CompiledGraph, the GraphLowering and the module's constants."""
    from .codegen.wrapper import WrapperCodegen
    from .graph import GraphLowering
    from .runtime import load_module, precompile, start_deferred_warmup, start_precompile
    from .scheduler import schedule
    from .ir import graph_context as G

    from .debug import GraphDebug

    start_deferred_warmup()  # Triton's compiler set-up, if held back for expected cache hits
    t_lower = time.perf_counter()  # after the graph cache's key and lookup (phases of their own)
    dbg = GraphDebug(gm, name)  # TORCH_TRACE / TORCH_COMPILE_DEBUG outlets (nothing made when off)
    graph = GraphLowering(
        gm, example_inputs, name, is_inference=kind == "inference", free_outputs=saved_output_positions(kind, gm)
    )
    graph.run()
    dbg.pre_fusion(graph)
    t1 = time.perf_counter()
    with G.set_graph(graph):
        with dbg.fusion_capture() as decisions:
            items = schedule(graph.buffers)
        t2 = time.perf_counter()
        wrapper = WrapperCodegen(graph, items)
        src, consts = wrapper.generate()
    dbg.post_fusion(items, wrapper.item_kernels, decisions)
    t3 = time.perf_counter()
    module = load_module(src, consts, config.debug_dir, name)
    dbg.output_code(src, consts, getattr(module, "__file__", None))
    t4 = time.perf_counter()
    # CUDA: every kernel (every autotuning candidate) compiled ahead of its first launch, in
    # parallel; with precompile_overlap the workers run on while the next graph is lowered, and
    # the first call of any compiled graph waits for them (_finish_pending_precompiles)
    pending = None
    if config.precompile_overlap:
        pending = start_precompile(module._launchers)
        pre_s = pending.seconds
        if pending.done:
            pending = None
    else:
        pre_s = precompile(module._launchers)
    metrics.precompile_seconds += pre_s
    for phase, sec in (
        ("lower", t1 - t_lower),
        ("schedule", t2 - t1),
        ("codegen", t3 - t2),
        ("load", t4 - t3),
        ("precompile", pre_s),
    ):
        metrics.add_phase(phase, sec)
    metrics.generated_graph_count += 1
    layouts = [
        (tuple(graph.graph_inputs[n].layout.size), tuple(graph.graph_inputs[n].layout.stride))
        if n in graph.graph_inputs
        else None
        for n in graph.graph_input_order
    ]
    compiled = CompiledGraph(
        module, src, layouts, name, time.perf_counter() - t0, pre_s, graph.symbol_sources, pending=pending
    )
    # saved activations stored channels-last: their strides go to the backward's compile
    compiled.output_strides = list(graph.output_strides) if graph.layout_opt and kind == "forward" else None
    for hook in compile_hooks:
        with G.set_graph(graph):
            hook(compiled, graph, items, wrapper)
    return compiled, graph, consts


_IGNORED_MODES_WARNED: set = set()
# torch.compile's modes (Inductor's) in torch 2.11; another torch's list is asked for when a mode
# is not among these (_inductor_modes)
_INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _inductor_modes() -> set:
    """The modes this torch's ``torch.compile`` knows (Inductor's ``list_mode_options``); the
    2.11 list when it cannot say."""
    try:
        from torch._inductor import list_mode_options

        return set(list_mode_options())
    except Exception:  # noqa: BLE001 - an older or newer torch without that function
        return set(_INDUCTOR_MODES)


def _mode_turns_on_cudagraphs(mode: str | None) -> bool:
    """Whether Inductor's ``mode`` turns CUDA graphs on (``"reduce-overhead"``,
    ``"max-autotune"``): tilefuse's ``cudagraphs`` option follows it."""
    if mode in (None, "default"):
        return False
    try:
        from torch._inductor import list_mode_options

        return bool(list_mode_options(mode).get("triton.cudagraphs", False))
    except Exception:  # noqa: BLE001 - a torch without that function: its 2.11 meaning
        return mode in ("reduce-overhead", "max-autotune")


def tilefuse_backend(gm: torch.fx.GraphModule, example_inputs: list, options: dict | None = None, **kwargs: Any):
    """Dynamo backend entry point. ``options``: tilefuse.config overrides for this compile.
    ``torch.compile``'s ``mode`` (passed here as a keyword): ``"reduce-overhead"`` turns the
    ``cudagraphs`` option on (CUDA graph trees, as Inductor's mode); ``"max-autotune"`` turns it
    on as well, and its autotuning part, like ``"max-autotune-no-cudagraphs"``, has no tilefuse
    meaning: one UserWarning per such mode and process (tilefuse always autotunes its
    reductions; ``options={"autotune_pointwise": True}``, which adds pointwise and tile
    candidates, is the nearest to Inductor's), and the compile goes on; a mode torch does not
    know (a misspelt ``"max_autotune"``) is a ValueError, as Inductor's is."""
    mode = kwargs.get("mode")
    if mode is not None and mode not in _INDUCTOR_MODES and mode not in _inductor_modes():
        raise ValueError(
            f"torch.compile(mode={mode!r}): not a mode torch knows ({sorted(_inductor_modes())}); "
            f"tilefuse has no modes of its own (its settings are options={{...}}): leave mode out"
        )
    cudagraphs = _mode_turns_on_cudagraphs(mode)
    if mode not in (None, "default", "reduce-overhead") and mode not in _IGNORED_MODES_WARNED:
        _IGNORED_MODES_WARNED.add(mode)
        warnings.warn(
            f"tilefuse ignores torch.compile's mode={mode!r}"
            f"{' except its CUDA graphs' if cudagraphs else ''} (Inductor's modes select Inductor's own "
            f"autotuning); tilefuse autotunes its reduction kernels anyway, and "
            f"options={{'autotune_pointwise': True}} adds pointwise and tile candidates",
            UserWarning,
            stacklevel=_runtime.user_stacklevel(),
        )
    opts = config.validate(options)
    if cudagraphs:
        opts["cudagraphs"] = True
    install_dynamo_gc_pause()  # again after a torch._dynamo.reset(), which clears the callbacks
    # everything after the options' check runs with the collector paused (``gc_paused``): the
    # imports of the first compile, AOTAutograd's trace and partition, the forward's compile
    with config.patch(**opts), gc_paused():
        try:
            return _aot_compile(gm, example_inputs, opts)
        except torch._dynamo.exc.TorchDynamoException:
            raise  # Dynamo's own control flow (recompiles, graph breaks) is not a compile failure
        except Exception as e:  # noqa: BLE001 - an error while AOTAutograd traces is tilefuse's too
            _failed_to_eager(f"tracing a graph of {len(gm.graph.nodes)} nodes for compilation", e)
            return gm.forward


def _aot_compile(gm: torch.fx.GraphModule, example_inputs: list, opts: dict) -> Any:
    """AOTAutograd with tilefuse's decompositions, partitioner and per-graph compilers (under
    ``opts`` already patched in by the caller)."""
    from torch._dynamo.backends.common import aot_autograd

    from .decompositions import decompositions, without_wrong_torch_decompositions
    from .lowering import lowerings
    from .runtime import start_warmup

    forward_device = _runtime.ForwardDevice()  # a training graph's, shared by its backward

    def make_compiler(kind: str):
        def compiler(g: torch.fx.GraphModule, ex: list):
            if kind == "backward":
                _donate_nothing()
            with config.patch(**opts):
                compiled = compile_graph(g, ex, kind)
                if config.cudagraphs:
                    # after the graph cache: a cached module is never handed out wrapped
                    compiled = _with_cudagraphs(compiled, g, ex, kind, forward_device)
                return compiled

        return compiler

    extra = {}
    start_warmup()  # Triton's one-time set-up in background threads (if the lookup has not started it)
    if config.min_cut_partition:
        # Inductor's partitioner: values the backward can recompute cheaply from what it
        # saves anyway (pointwise chains such as GELU's intermediates) are recomputed inside
        # the backward's fused kernels instead of being written out by the forward and read
        # back (torch's min-cut rematerialization; default_partition saves every one)
        extra["partition_fn"] = _timed_min_cut_partition
    from torch._functorch import config as functorch_config

    # AOTAutograd's own rule for tracing a joint forward + backward graph: grad mode on and an
    # input (parameters included, lifted by Dynamo) that requires grad
    training = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
    # config.eager_backward: the backward compiled right after the forward (its lowering overlaps
    # the forward's kernel compiles in the workers) rather than at the first backward
    with (
        functorch_config.patch(force_non_lazy_backward_lowering=bool(config.eager_backward)),
        without_wrong_torch_decompositions(),
    ):
        return aot_autograd(
            fw_compiler=make_compiler("forward"),
            bw_compiler=make_compiler("backward"),
            inference_compiler=make_compiler("inference"),
            decompositions=decompositions(training, lowered=lowerings),
            **extra,
        )(gm, example_inputs)


def _with_cudagraphs(compiled: Any, gm: torch.fx.GraphModule, ex: list, kind: str, forward_device: Any) -> Any:
    """``compiled`` under torch's CUDA graph trees (``runtime.cudagraphs``), or as it is, with one
    log line, when its graph cannot be captured; a graph that fell back to eager at compile time
    is not captured either."""
    from .runtime import cudagraphs

    if not isinstance(compiled, (CompiledGraph, SpecializingGraph)):
        cudagraphs.log_skip(f"{kind} graph", "its compile failed and it runs eagerly", False)
        return cudagraphs.outside_trees(compiled, kind, forward_device)
    module = getattr(compiled, "module", None)
    constants = tuple(v for v in vars(module).values() if isinstance(v, torch.Tensor)) if module is not None else ()
    per_size = isinstance(compiled, SpecializingGraph)  # compiles a module at each new size's first call
    return cudagraphs.cudagraphify(compiled, gm, ex, kind, compiled.name, forward_device, constants, per_size)


def _donate_nothing() -> None:
    """Tell AOTAutograd that the backward being compiled writes over none of its saved tensors:
    its ``bw_donated_idxs`` (saved tensors only the backward reads, which Inductor's backward may
    reuse as scratch: ``TracingContext.fw_metadata``, where Inductor reads them) set to none.
    tilefuse's kernels store in place only over its own buffers, never over a graph input. With
    donated buffers listed, AOTAutograd refuses ``backward(retain_graph=True)`` and
    ``create_graph=True`` for a backward compiled before its first call (``eager_backward``; a lazy
    compile drops them itself when that first backward retains the graph)."""
    from torch._guards import TracingContext

    meta = getattr(TracingContext.try_get(), "fw_metadata", None)
    if meta is not None and getattr(meta, "bw_donated_idxs", None):
        meta.bw_donated_idxs = []


def _timed_min_cut_partition(joint_module: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
    """torch's ``min_cut_rematerialization_partition`` (the partitioner Inductor uses), its wall
    seconds added to ``metrics.phase_seconds["partition"]`` (seconds for a training step's
    graph, much of it the first import of ``torch._inductor.pattern_matcher`` for the
    partitioner's CSE). torch 2.11's ``aot_eager`` backend runs the same partitioner, so
    ``benches/compile_time.py``'s backend time (first call minus aot_eager's) leaves it out."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    t0 = time.perf_counter()
    try:
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
    finally:
        metrics.add_phase("partition", time.perf_counter() - t0)


def _start_warmup_at_lookup() -> None:
    """Start Triton's warm-up (``runtime.start_warmup``) when this module is imported by Dynamo's
    backend lookup, i.e. at ``torch.compile(..., backend="tilefuse")`` (the entry point is loaded
    there), so the warm-up also overlaps Dynamo's tracing of the first call, not only
    AOTAutograd's. Only once Dynamo is fully imported (which imports Triton): threads importing
    Triton while the main thread imports Dynamo, and so Triton, can leave a half-initialized
    module behind. Imported earlier (``import tilefuse.backend`` before Dynamo), nothing starts
    here and the warm-up starts at backend entry. Options given to ``torch.compile`` are not
    known yet: ``TILEFUSE_WARMUP=0`` switches this one off."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or not hasattr(dynamo, "optimize"):
        return
    try:
        from .runtime import start_warmup

        start_warmup()
    except Exception as e:  # noqa: BLE001 - an optimization only: backend entry tries again
        log.debug("tilefuse: starting Triton's warm-up at lookup failed: %s", e)


_start_warmup_at_lookup()  # first: only when Dynamo was imported before this module
install_dynamo_gc_pause()  # before the first frame's tracing (imports Dynamo if not yet imported)
