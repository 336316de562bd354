"""The graph-level compile cache: the same aten graph with the same input metadata reuses the module
compiled for it, without lowering, scheduling or codegen (the role of Inductor's FX graph cache).

Key. A SHA-256 over: tilefuse's own code (every ``.py`` file of the package and the native
extension's bytes, so an edited or rebuilt tilefuse never reads an older entry), the versions of
torch, Triton and Python, torch's default dtype, whether Triton's interpreter is on and the current
CUDA device, the tilefuse options that change generated code (all but those in
``_KEY_EXCLUDED_OPTIONS``: ``debug_dir``, ``compile_workers``, ``compile_pool``,
``precompile_overlap``, ``precompile_wait_all``, ``graph_cache``, ``fallback_on_error``, ``warmup``,
``triton_key_from_stat``, ``pause_gc``, ``eager_backward`` and ``cudagraphs``, whose CUDA graphs
wrap the callable after the cache hands it out) and the
the lowering's pad_mm tunables (``config.PAD_MM_DEVICE_TYPES``, ``config.PAD_MM_MIN_MACS``), the graph's nodes (with every nested
GraphModule's) and the tensor constants it holds (dtype, layout, device and content), and per
input its kind, dtype, device, sizes, strides and storage offset — symbolic sizes as their
ShapeEnv expressions, with the value range of every symbol they use. Hints are not in the key:
a decision that depends on a hint was either proven for the whole range or recorded as a guard.

Guards. What the compile assumed about symbolic sizes (the guards it added to the ShapeEnv and the
guarded decisions of earlier graphs of that ShapeEnv it relied on) is stored with the entry as
sympy relations. A hit requires each to hold at the current hints, and then records each in the
current ShapeEnv (``ShapeEnv.evaluate_expr``), so Dynamo guards on them exactly as if the graph
had been compiled again; an entry whose guards fail at the current hints is a miss.

Levels. In memory (this process; the loaded module, its kernels already compiled, is shared) and
on disk (``<TILEFUSE_CACHE_DIR>/graphs/<key>.pkl``; a hit loads the module again). After the
graph's first call on a GPU, ``<key>.launch.pkl`` records each kernel's chosen config and its
binaries' static launchers (cubins under ``<TILEFUSE_CACHE_DIR>/cubin``), with the GPU's name,
compute capability and CUDA version; a disk hit on the same kind of GPU loads those cubins and
neither compiles, autotunes nor starts Triton's JIT (``KernelLauncher.restore``). The first
records a process stores also leave an empty marker, ``launched-<code fingerprint>``: a later
process with the same code then expects hits (``expects_hits``) and holds Triton's compiler
warm-up back until a graph misses. Without usable
records a hit compiles its kernels again, each one a load from Triton's own disk cache, and reads
the autotuner's timings from there. Entries whose constants do
not pickle stay in memory only. A corrupt or unreadable file, or an entry whose module fails to
load, is a miss (logged; the entry is discarded and replaced by the new compile), never an error.
One entry per key: a compile whose guards differ from the stored entry's replaces it. Symbolic
sizes are keyed by their ShapeEnv names, which Dynamo derives from the argument names, so the
same graph traced from differently named arguments misses (a slower compile, never a wrong one).

Portability. Every entry file stored or read, and every launch records file with its cubins, is
also handed to torch's portable cache artifacts (``cache_artifacts``), so
``torch.compiler.save_cache_artifacts()`` carries them to another machine's cache directory.

The counters a compile adds to ``tilefuse.metrics`` are stored and added again on a hit, so counts
such as ``fallback_kernel_count`` mean the same with and without the cache;
``metrics.graph_cache_hits`` counts hits.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import math
import os
import pickle
import sys
from dataclasses import dataclass, field
from typing import Any

from .. import config

log = logging.getLogger("tilefuse")

# options that do not change the generated module
_KEY_EXCLUDED_OPTIONS = (
    "debug_dir",
    "compile_workers",
    "compile_pool",
    "precompile_overlap",
    "precompile_wait_all",
    "graph_cache",
    "fallback_on_error",
    "warmup",
    "triton_key_from_stat",
    "pause_gc",
    "eager_backward",
    "cudagraphs",
)

_memory: dict[str, "CacheEntry"] = {}


class Uncacheable(Exception):
    """The graph or an input has something the key cannot describe (the compile goes on uncached)."""


@dataclass
class CacheEntry:
    """What a compile produced, enough to rebuild its ``CompiledGraph`` without compiling.

        ``source``/``constants``: the wrapper module and its injected globals; ``input_layouts`` and
        ``symbol_sources`` as ``CompiledGraph``'s; ``output_strides``: a laid-out forward graph's
    output strides (``layout_opt.report_output_strides``), else None; ``guards``: sympy relations over the ShapeEnv's
        size symbols, true for the inputs compiled for; ``metrics``: the counters the compile added;
        ``module``: the loaded module (this process only, never pickled)."""

    source: str
    constants: dict
    input_layouts: list
    symbol_sources: dict
    guards: list
    metrics: dict
    module: Any = field(default=None, compare=False)
    output_strides: list | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["module"] = None
        return state


# ---------------------------------------------------------------------------------------- the key
@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of tilefuse's Python sources and its native extension (computed once per process)."""
    import tilefuse
    from tilefuse import _native

    h = hashlib.sha256()
    root = os.path.dirname(tilefuse.__file__)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                p = os.path.join(dirpath, fn)
                h.update(os.path.relpath(p, root).encode())
                with open(p, "rb") as f:
                    h.update(f.read())
    native = getattr(_native, "__file__", None)
    if native and os.path.exists(native):
        with open(native, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _tensor_constant(t: Any) -> tuple:
    import torch

    if not isinstance(t, torch.Tensor) or type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
        raise Uncacheable(f"graph attribute of type {type(t).__name__}")
    nbytes = t.numel() * t.element_size()
    if nbytes > config.GRAPH_CACHE_MAX_CONSTANT_BYTES:
        raise Uncacheable("a tensor constant too large to hash")
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # the backend runs under AOTAutograd's fake mode
        flat = t.detach().reshape(-1).contiguous().cpu()  # 1-D: a 0-d tensor cannot be viewed as bytes
        data = flat.view(torch.uint8).numpy().tobytes() if nbytes else b""
    digest = hashlib.sha256(data).hexdigest()
    return (str(t.dtype), tuple(t.shape), tuple(t.stride()), str(t.device), digest)


def _graph_text(graph: Any) -> str:
    """The nodes of an FX graph as text, one line per node: its op, name, target and arguments
    (an argument that is a node prints as its name). It says what the graph's Python code says,
    without generating that code: AOTAutograd hands over lazily recompiled GraphModules, whose
    ``.code`` would generate and ``exec`` it (0.37 s over a 12-layer GPT-2 training step's
    graphs). Raises ``Uncacheable`` for a target or an argument the text cannot name for certain
    (a lambda or closure, an object printed with its address): two different ones could share a
    text and a cache entry. Also for a node with a data-dependent result size (``nonzero``,
    ``.item()``: ``unbacked_bindings``): what the compile may assume about those sizes comes from
    the ShapeEnv's ranges and facts (``torch._check``), which the graph's text does not carry."""
    lines = []
    for n in graph.nodes:
        if n.meta.get("unbacked_bindings"):
            raise Uncacheable(f"node {n.name}: a data-dependent (unbacked) size")
        args = repr((n.args, n.kwargs))
        if " at 0x" in args:
            raise Uncacheable(f"node {n.name}: an argument without a stable text form")
        if "nan" in args:  # repr prints a NaN's sign nowhere: -nan is "nan"
            args += f" nan signs {_nan_signs((n.args, n.kwargs))}"
        lines.append(f"{n.op} {n.name} {_target_text(n.target)} {args}")
    return "\n".join(lines)


def _nan_signs(args: Any) -> list:
    """The sign bits of the NaN floats in ``args`` (nested tuples, lists and dicts), in order."""
    from torch.fx.node import map_aggregate

    out: list = []
    map_aggregate(
        args, lambda a: out.append(math.copysign(1.0, a) < 0) if isinstance(a, float) and math.isnan(a) else None
    )
    return out


def _target_text(target: Any) -> str:
    """A node's target as text that names it for certain in every process: an op overload's name
    (``aten.add.Tensor``), a higher-order op's name, a string target itself, a module-level
    function's module and name (``_operator.getitem``). Raises ``Uncacheable`` for any other
    callable (a lambda, a closure, a bound method): its name does not identify it."""
    import torch

    if isinstance(target, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    module = sys.modules.get(getattr(target, "__module__", None) or "")
    qualname, name = getattr(target, "__qualname__", None), getattr(target, "__name__", None)
    if module is not None and isinstance(qualname, str):
        obj: Any = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is target:
            return f"{module.__name__}.{qualname}"
        if isinstance(name, str) and getattr(module, name, None) is target:  # torch.sin and the like
            return f"{module.__name__}.{name}"
    raise Uncacheable(f"a node target that is not a module-level function: {target!r}")


def _graph_part(gm: Any) -> list:
    """The nodes of ``gm`` and of every GraphModule nested in it (``torch.cond`` branches, …), and
    every tensor constant any of them reads (``get_attr``), by content."""
    import torch

    parts: list = []
    for name, mod in sorted(gm.named_modules(), key=lambda kv: kv[0]):
        if not isinstance(mod, torch.fx.GraphModule):
            continue
        parts.append(("graph", name, _graph_text(mod.graph)))
        for node in mod.graph.nodes:
            if node.op != "get_attr":
                continue
            obj = mod
            for atom in str(node.target).split("."):
                obj = getattr(obj, atom)
            if isinstance(obj, torch.nn.Module):
                continue  # a subgraph: its code and constants are listed under its own name
            parts.append(("const", name, str(node.target), _tensor_constant(obj)))
    return parts


def _size_key(x: Any, env: Any) -> str:
    import torch

    if isinstance(x, torch.SymInt):
        expr = x.node.expr
        if env is not None:
            expr = env.replace(expr)
        return f"({expr})"
    return str(int(x))


def _symbols_of(example_inputs: list) -> set:
    import torch

    syms: set = set()

    def add(v):
        if isinstance(v, torch.SymInt):
            syms.update(v.node.expr.free_symbols)

    for a in example_inputs:
        if isinstance(a, torch.Tensor):
            for v in (*a.shape, *a.stride(), a.storage_offset()):
                add(v)
        else:
            add(a)
    return syms


def _input_part(a: Any, env: Any) -> tuple:
    import torch

    if isinstance(a, torch.Tensor):
        if a.is_sparse or a.layout != torch.strided or a.is_nested:
            raise Uncacheable("a non-strided tensor input")
        return (
            "T",
            str(a.dtype),
            str(a.device),
            tuple(_size_key(s, env) for s in a.shape),
            tuple(_size_key(s, env) for s in a.stride()),
            _size_key(a.storage_offset(), env),
            bool(a.requires_grad),
        )
    if isinstance(a, torch.SymInt):
        return ("S", _size_key(a, env))
    if a is None or isinstance(a, (bool, int, float)):
        return ("V", type(a).__name__, repr(a))
    if isinstance(a, (torch.SymFloat, torch.SymBool)):
        raise Uncacheable(f"a {type(a).__name__} input")
    raise Uncacheable(f"an input of type {type(a).__name__}")


def graph_key(gm: Any, example_inputs: list, shape_env: Any, options: dict, kind: str = "inference") -> str:
    """The cache key of compiling ``gm`` (an ``inference``, ``forward`` or ``backward`` graph:
    ``kind``; layout optimization applies to inference graphs only) for ``example_inputs`` with
    ``options`` (a dict of the tilefuse options in force). Raises ``Uncacheable`` when the key cannot describe an input or a
    graph attribute (the graph is then compiled without the cache)."""
    import torch

    parts: list = [code_fingerprint(), torch.__version__, _triton_version(), sys.version, kind]
    parts.append(sorted((k, repr(v)) for k, v in options.items() if k not in _KEY_EXCLUDED_OPTIONS))
    # global state the lowering reads: the default dtype (factory ops and integer-to-float type
    # promotion leave it implicit in the graph: ``i / 3``, ``torch.ones(3)``), whether Triton's
    # interpreter runs the kernels (a module made for it does not load without it) and the current
    # CUDA device (``device="cuda"`` without an index is that one; the module names it)
    parts.append(
        (
            str(torch.get_default_dtype()),
            _interpreting(),
            torch.cuda.current_device() if torch.cuda.is_initialized() else 0,
        )
    )

    # module-level tunables of the lowering that change generated code (set by tests and
    # experiments, not options)
    parts.append((tuple(config.PAD_MM_DEVICE_TYPES), config.PAD_MM_MIN_MACS))
    parts.append((tuple(config.LAYOUT_OPT_DEVICE_TYPES), tuple(config.CONV_BIAS_POINTWISE_DEVICE_TYPES)))
    parts.append(_graph_part(gm))
    parts.append([_input_part(a, shape_env) for a in example_inputs])
    if shape_env is not None:
        ranges = []
        for s in sorted(_symbols_of(example_inputs), key=lambda s: s.name):
            vr = shape_env.var_to_range.get(s)
            ranges.append((s.name, str(vr.lower) if vr is not None else "?", str(vr.upper) if vr is not None else "?"))
        parts.append(ranges)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _interpreting() -> bool:
    """Whether Triton's interpreter is on in this process (``TRITON_INTERPRET``)."""
    try:
        import triton

        return bool(triton.knobs.runtime.interpret)
    except (ImportError, AttributeError):  # pragma: no cover - another Triton: the variable itself
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        return "none"


# ------------------------------------------------------------------------------------- guards
def _hints(env: Any) -> dict:
    vals = getattr(env, "backed_var_to_val", None)
    return dict(vals if vals is not None else env.var_to_val)


def replay_guards(guards: list, shape_env: Any) -> bool:
    """Check that every guard relation holds at ``shape_env``'s hints; if all do, record each in
    ``shape_env`` (as a compile that decided them would) and return True; else return False and
    record nothing. Guards name symbols as the ShapeEnv does (``s0``, ``s1``…); a guard on a
    symbol the ShapeEnv does not have fails."""
    if not guards:
        return True
    if shape_env is None:
        return False
    import sympy

    hints = _hints(shape_env)
    by_name = {s.name: s for s in hints}
    ready = []
    for g in guards:
        try:
            mapping = {s: by_name[s.name] for s in g.free_symbols}
        except KeyError:
            return False
        rel = g.xreplace(mapping)
        at_hints = rel.xreplace({s: sympy.Integer(hints[s]) for s in rel.free_symbols})
        if at_hints is not sympy.true:
            return False
        ready.append(rel)
    for rel in ready:
        shape_env.evaluate_expr(rel)
    return True


# ---------------------------------------------------------------------------------- storage
def _dir() -> str:
    from .cache import cache_dir

    return os.path.join(cache_dir(), "graphs")


def _reduce_op(op: Any) -> Any:
    return (_load_op, (op.name(),))


def _load_op(qualname: str) -> Any:
    """An aten/prims/… OpOverload from its ``ns::name.overload`` name (pickled graph constants)."""
    import torch

    ns, rest = qualname.split("::", 1)
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload or "default")


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        import torch

        if isinstance(obj, torch._ops.OpOverload):
            return _reduce_op(obj)
        return NotImplemented


def lookup(key: str, shape_env: Any) -> CacheEntry | None:
    """The entry for ``key`` whose guards hold (then recorded in ``shape_env``), or None."""
    entry = _memory.get(key)
    if entry is None:
        path = os.path.join(_dir(), f"{key}.pkl")
        if not os.path.exists(path):
            return None
        try:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            # tensor constants must come back as real tensors, not as the fake ones AOTAutograd's
            # active fake mode would make of them
            with open(path, "rb") as f:
                data = f.read()
            with unset_fake_temporarily():
                entry = pickle.loads(data)
            if not isinstance(entry, CacheEntry):
                raise TypeError(f"not a CacheEntry: {type(entry).__name__}")
            _record(f"graphs/{key}.pkl", data)
        except Exception as e:  # noqa: BLE001 - a bad cache file is a miss
            log.warning("tilefuse: ignoring unreadable graph cache entry %s (%s: %s)", path, type(e).__name__, e)
            return None
    if not replay_guards(entry.guards, shape_env):
        log.debug("tilefuse: graph cache entry %s: its guards do not hold for these sizes", key[:12])
        return None
    return entry


def store(key: str, entry: CacheEntry) -> bool:
    """Keep ``entry`` in memory and, when its constants pickle, on disk (atomically); returns
    whether it was written to disk."""
    _memory[key] = entry
    buf = io.BytesIO()
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        # outside AOTAutograd's fake mode: pickling a CUDA tensor constant copies it to the CPU,
        # which the fake mode would refuse for a real tensor
        with unset_fake_temporarily():
            _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(entry)
    except Exception as e:  # noqa: BLE001 - memory-only entry
        log.debug("tilefuse: graph cache entry %s kept in memory only (%s: %s)", key[:12], type(e).__name__, e)
        return False
    d = _dir()
    try:
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{key}.pkl")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)
    except OSError as e:
        log.warning("tilefuse: could not write graph cache entry under %s (%s)", d, e)
        return False
    _record(f"graphs/{key}.pkl", buf.getvalue())
    return True


def _record(name: str, content: bytes, records: list | None = None) -> None:
    """Hand a cache file to torch's portable cache artifacts (``cache_artifacts``): ``name`` its
    path under the cache directory; ``records``: a launch records file's records, whose cubins
    go too. Never raises."""
    try:
        from . import cache_artifacts

        if records is None:
            cache_artifacts.record(name, content)
        else:
            cache_artifacts.record_launches(name, content, records)
    except Exception as e:  # noqa: BLE001 - portability only
        log.debug("tilefuse: %s not recorded as a cache artifact (%s: %s)", name, type(e).__name__, e)


def _device_tag() -> tuple:
    """What a cubin depends on besides its source: the current CUDA device's name and compute
    capability, and torch's CUDA version."""
    import torch

    dev = torch.cuda.current_device()
    return (torch.cuda.get_device_name(dev), tuple(torch.cuda.get_device_capability(dev)), torch.version.cuda)


def store_launches(key: str, records: list) -> None:
    """Write the launch records (``KernelLauncher.launch_record``, one per kernel of the graph's
    module, in its ``_launchers`` order; None for a kernel without one) of the entry ``key`` to
    ``<dir>/<key>.launch.pkl``, with the device they were made on, and the ``expects_hits``
    marker of this code's fingerprint. Failures are logged, never raised (the entry stays usable
    without them)."""
    try:
        buf = pickle.dumps({"device": _device_tag(), "records": records}, protocol=pickle.HIGHEST_PROTOCOL)
        d = _dir()
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{key}.launch.pkl")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(buf)
        os.replace(tmp, path)
        marker = _launched_marker()
        if not os.path.exists(marker):
            with open(marker, "wb"):
                pass
        _record(key, buf, records)
    except Exception as e:  # noqa: BLE001 - an optimization only
        log.debug("tilefuse: launch records of %s not stored (%s: %s)", key[:12], type(e).__name__, e)


def _launched_marker() -> str:
    return os.path.join(_dir(), f"launched-{code_fingerprint()[:32]}")


def expects_hits() -> bool:
    """Whether graphs compiled in this process will probably come from the graph cache with their
    kernels' launch records: the cache is on and an earlier process with the same tilefuse code
    (``code_fingerprint``) stored launch records in this cache directory (an empty marker file,
    ``<dir>/launched-<fingerprint>``, written beside its first records). A guess made before any
    graph is seen, used only to decide when Triton's compiler warm-up starts
    (``runtime.start_warmup``); never raises (False when the directory cannot be read)."""

    if not config.graph_cache:
        return False
    try:
        return os.path.exists(_launched_marker())
    except Exception:  # noqa: BLE001 - a guess only
        return False


def load_launches(key: str) -> list | None:
    """The launch records ``store_launches`` wrote for ``key`` (one per kernel of the entry's
    module), or None when there are none, they were made on another kind of device or the file
    does not read."""
    path = os.path.join(_dir(), f"{key}.launch.pkl")
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read()
        data = pickle.loads(raw)
        if data.get("device") != _device_tag():
            return None
        _record(key, raw, list(data["records"]))
        return list(data["records"])
    except Exception as e:  # noqa: BLE001 - unusable: the kernels load through Triton's JIT
        log.debug("tilefuse: launch records %s not read (%s: %s)", path, type(e).__name__, e)
        return None


def discard(key: str) -> None:
    """Forget one entry, in memory and on disk (an entry that could not be used)."""
    _memory.pop(key, None)
    for suffix in (".pkl", ".launch.pkl"):
        try:
            os.remove(os.path.join(_dir(), f"{key}{suffix}"))
        except OSError:
            pass


def clear(disk: bool = False) -> None:
    """Forget the in-memory entries; with ``disk`` also delete the on-disk ones (``graphs/``: the
    entries, their launch records and the ``expects_hits`` marker). The generated module files and
    cubins beside ``graphs/`` stay: they are named by their source's hash, never read stale, and
    reused by the next compile of the same source."""
    _memory.clear()
    if disk:
        d = _dir()
        if os.path.isdir(d):
            for fn in os.listdir(d):
                if fn.endswith(".pkl") or fn.startswith("launched-"):
                    try:
                        os.remove(os.path.join(d, fn))
                    except OSError:
                        pass
