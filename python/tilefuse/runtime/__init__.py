"""Runtime: load generated modules, launch their kernels (autotuned on the GPU), compile ahead.

Loading. Kernels of a CUDA graph are ``triton.jit`` functions; kernels of a CPU graph run through
Triton's interpreter (``InterpretedFunction``: each program instance executed with NumPy on CPU
tensors), whatever ``TRITON_INTERPRET`` says, so CPU and GPU graphs can live in one process.
Generated modules are written to a cache directory keyed by their source hash (Triton needs the
kernels' source file) and imported from there.

Launching. The module wraps each kernel in a ``KernelLauncher`` (``make_launcher``) holding its
launch grid (one ``(block constexpr, extent)`` per grid axis) and its candidate configs (the
heuristic's choice first). Under the interpreter, with ``config.autotune`` off, or with a single
config it launches ``configs[0]``. On the GPU with several configs the first launch goes through
Triton's own autotuner: ``triton.autotune(configs, key=[])`` (shapes are static, so one tuning per
kernel; Triton adds the argument dtypes to the key), the grid a function of the config's block
sizes, ``restore_value`` naming the arguments the kernel updates in place (atomic adds into a
buffer an earlier kernel initialized), so timed runs leave them as they found them, and
``cache_results=True``. Later launches call the JIT function with the winning config directly.
Triton's autotuner is used rather than a launcher of our own timing configs with
``triton.testing.do_bench`` because it already does all of it and is maintained with the compiler:
a config that fails to compile or to launch (``OutOfResources`` such as too much shared memory,
``PTXASError``, ``CompileTimeAssertionFailure``) is timed as infinite and skipped, mutated
arguments are restored, and the timings are cached on disk (in Triton's cache directory, keyed by
the kernel's source hash ``JITFunction.cache_key``, the backend, the argument dtypes and the list
of configs), so another process running the same graph does not benchmark again. Timing uses
``triton.testing.do_bench`` with a short warm-up and repetition window (``AUTOTUNE_WARMUP_MS``,
``AUTOTUNE_REP_MS``) instead of Triton's default 25 + 100 ms per config.

Compiling ahead. ``precompile`` compiles every kernel of a loaded CUDA module, for every config
it may launch with, before the first launch (``config.compile_workers``, ``config.compile_pool``).
Each kernel's ``JITFunction.warmup`` is called with ``MockTensor`` arguments of the kernel's
argument dtypes, which yields exactly the specialization (and so the cache key) a launch with
16-byte-aligned tensors computes, inside Triton's ``AsyncCompileMode``, which hands every compile
job to an executor and files the results in the JIT's in-memory kernel cache. Triton's front end
(Python AST to TTIR) and part of its pipeline hold the GIL, so threads gain little; the default
executor therefore runs the jobs in forked worker processes (they inherit the jobs, nothing is
pickled, and they never touch CUDA: each job compiles for an explicit target), which write the
binaries to Triton's on-disk cache; each job then runs again in this process, where it is a
cache hit that only loads the binary. ``start_precompile`` (the backend's default,
``config.precompile_overlap``) returns once the workers are forked; the compiled graph's first call
waits for them (``finish_pending``), so the next graph is lowered while they compile. Kernels are launched with torch's static CUDA launcher
(also while autotuning: ``_StaticLaunchJIT``), so Triton's per-signature C launcher (``gcc``,
about 0.3 s each) is built only for a binary that launcher does not take, by the worker. Triton's driver helper module (also built
with ``gcc`` on first use) and its compiler are initialized by background threads started at
backend entry (``start_warmup``), overlapping AOTAutograd's tracing. A job a worker could not compile is reported to the JIT as failed
and compiled again at the first launch (where its error surfaces, or the autotuner skips that
config). A tensor argument that is not 16-byte aligned at launch gives a different
specialization, which Triton then compiles at that launch, as it would without precompiling.

Caches. Compiled binaries are cached by Triton itself (``~/.triton/cache`` or
``TRITON_CACHE_DIR``) under a hash of the kernel's source and dependencies *and its first line
number* in the module (``JITFunction.cache_key``), the specialization, the compile options and
the Triton version. Module files are named by their source hash, so the same graph compiled again,
in this or another process, finds every kernel in that cache; the file's path and the module's
name are not part of the key.

Launch records. After a graph's first call, the graph cache stores each kernel's
``launch_record`` beside the graph's entry: the config in use (the autotuner's winner) and the
static launchers of the binaries launched. A later process that hits the entry on disk loads those
cubins directly (``KernelLauncher.restore``, what Inductor's FX graph cache does with its static
launchers): no compiling ahead, no autotuning, and no use of Triton's JIT, whose first use in a
process computes Triton's cache key (a hash of its install) and needs its driver, the warm-up's
work, which the hit then does not wait for.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import copy
import functools
import gc
import hashlib
import importlib.util
import logging
import operator
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, Iterable, Sequence

log = logging.getLogger("tilefuse")


def _default_cache_dir() -> str:
    """``<tmp>/tilefuse_<uid>``: the cache directory when ``TILEFUSE_CACHE_DIR`` is unset."""
    return os.path.join(tempfile.gettempdir(), f"tilefuse_{os.getuid()}")


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the function calling this one point at
    the user's code: the first frame, walking out, whose file is neither in tilefuse nor in torch
    (a compile runs under Dynamo's and AOTAutograd's frames; the user's line is the call of the
    compiled function). 1 (the calling function itself) when every frame is theirs."""
    import torch

    from .. import config

    skip = (
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
        os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    )
    return config.stacklevel_outside(skip, "<", depth=2)


def _cache_dir_from_env() -> str:
    """``TILEFUSE_CACHE_DIR``, else ``<tmp>/tilefuse_<uid>``; empty or blank counts as unset (as
    for every option)."""
    from .. import config

    return config._env_value("TILEFUSE_CACHE_DIR") or _default_cache_dir()


_CACHE_DIR = _cache_dir_from_env()
_CHECKED_CACHE_DIR: str | None = None  # the value of _CACHE_DIR that cache_dir() has checked


class DebugDirError(RuntimeError):
    """``config.debug_dir`` cannot be written (a file of that name, no permission)."""


def cache_dir() -> str:
    """tilefuse's cache directory: ``TILEFUSE_CACHE_DIR`` (read at import), else
    ``<tmp>/tilefuse_<uid>``. Holds the generated modules, ``graphs/`` (``graph_cache``) and
    ``cubin/``. Checked at first use (``_checked_cache_dir``): when it cannot be used, one warning
    says why and a private temporary directory serves this process instead, so compiling goes on
    (without reuse across processes)."""
    global _CACHE_DIR, _CHECKED_CACHE_DIR
    if _CACHE_DIR != _CHECKED_CACHE_DIR:
        _CACHE_DIR = _checked_cache_dir(_CACHE_DIR)
        _CHECKED_CACHE_DIR = _CACHE_DIR
    return _CACHE_DIR


def _checked_cache_dir(path: str) -> str:
    """``path`` if tilefuse can use it as its cache directory, else a new private temporary
    directory (with a warning saying why and what to do). Unusable: it cannot be created or is a
    file (``make_cache_dir``), or it is the default ``<tmp>/tilefuse_<uid>`` but owned by another
    user or writable by others — a shared temporary folder where someone else could place the
    pickled graph cache entries this process would load (an explicit ``TILEFUSE_CACHE_DIR`` is
    trusted as given, so a team may share one). The private directory is removed when the
    process exits."""
    default = path == _default_cache_dir()
    try:
        make_cache_dir(path, mode=0o700 if default else 0o777)
        if default:
            st = os.stat(path)
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise RuntimeError(
                    f"tilefuse: the default cache directory {path!r} is owned by another user or "
                    f"writable by others, so its contents cannot be trusted; set TILEFUSE_CACHE_DIR "
                    f"to a directory of your own"
                )
        return path
    except RuntimeError as e:
        private = tempfile.mkdtemp(prefix="tilefuse_private_")
        atexit.register(_remove_private_dir, private, os.getpid())  # nothing else will reuse it
        warnings.warn(
            f"{e}. Using {private} for this process instead: its compiled graphs will not be reused "
            f"by other processes.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        return private


# triton.testing.do_bench's warm-up and repetition windows (ms) when timing one autotuning config
# (each timed run follows an L2 flush of ~70 us, so 4 ms is still ~50 runs of a 10 us kernel)
AUTOTUNE_WARMUP_MS = 1
AUTOTUNE_REP_MS = 4
# a forked compile worker that gives no result for this long is given up on (its jobs are then
# compiled in this process)
FORKED_COMPILE_TIMEOUT_S = 300.0


def jit_for(device_type: str, do_not_specialize: Sequence[str] = ()) -> Callable[[Callable], Any]:
    """The decorator that turns generated kernel functions into launchable Triton kernels.
    ``do_not_specialize``: integer parameters (symbolic sizes) Triton must not specialize on
    (value 1, divisibility by 16), so one binary serves every size."""
    if device_type == "cuda":
        import triton

        if do_not_specialize:
            return triton.jit(do_not_specialize=list(do_not_specialize))
        return triton.jit
    import triton

    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "tilefuse runs kernels on CPU tensors through Triton's interpreter, which must be enabled "
            "before triton is imported: set TRITON_INTERPRET=1 in the environment before importing "
            "torch (e.g. `TRITON_INTERPRET=1 python your_script.py`)"
        )
    return lambda fn: _CheckedInterpretedFunction(fn)


_checked_cls = None


def _CheckedInterpretedFunction(fn):
    """An interpreted kernel whose ``tl.device_assert``s are live while it runs. The interpreter
    drops device asserts unless its builder's ``debug`` option is on (on the GPU they are
    compiled in debug mode only, as Inductor's); tilefuse's bounds checks of indirect indices
    must raise instead of reading out of bounds, so ``debug`` is switched on around each launch
    and restored after."""
    global _checked_cls
    if _checked_cls is None:
        from triton.runtime import interpreter as I

        class Checked(I.InterpretedFunction):
            def run(self, *args, **kwargs):
                import dataclasses

                import numpy as np

                b = I.interpreter_builder
                old = b.options
                # debug also turns on the interpreter's integer-overflow sanitizer; torch's integer
                # arithmetic wraps, so that stays off
                b.options = dataclasses.replace(old, debug=True, sanitize_overflow=False)
                try:
                    # masked-off lanes compute on padding (log(0), x // 0): NumPy's warnings about
                    # them are noise, the lanes are never stored
                    with np.errstate(all="ignore"):
                        return super().run(*args, **kwargs)
                finally:
                    b.options = old

        _checked_cls = Checked
    return _checked_cls(fn)


def load_module(
    source: str, constants: dict[str, Any], debug_dir: str | None = None, name_hint: str = "graph", wait: bool = True
):
    """Write ``source`` under the cache dir (and ``debug_dir`` when given), import it, inject
    ``constants`` as module globals, and return the module. ``wait``: first join the warm-up
    threads (``start_warmup``), so that nothing here races them on Triton's lazily made driver;
    loading a module touches neither the driver nor the compiler (the JIT functions and
    autotuners it makes use them at their first compile or launch), so a caller that will not
    compile through Triton (a graph cache hit with launch records) may pass False."""
    if wait:
        wait_warmup()
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = os.path.join(cache_dir(), f"tf_{digest}.py")
    if not _holds(path, source):  # absent, or damaged outside tilefuse: (re)written atomically
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    if debug_dir:
        write_debug_source(source, debug_dir, name_hint)
    modname = f"tilefuse_generated_{digest}"
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__.update(constants)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    mod.__dict__.update(constants)
    return mod


def _holds(path: str, source: str) -> bool:
    """Whether the file at ``path`` exists and holds exactly ``source``."""
    try:
        with open(path) as f:
            return f.read() == source
    except (OSError, UnicodeDecodeError):
        return False


def _remove_private_dir(path: str, owner_pid: int) -> None:
    """At exit: remove a private cache directory, in the process that made it only (a forked
    child that runs exit handlers must not take it from its parent)."""
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


def make_cache_dir(path: str, mode: int = 0o777) -> None:
    """Create ``path`` (a cache directory; ``mode`` as ``os.makedirs``'s) if needed; RuntimeError
    saying what to do when it cannot be one (it or a parent is a file, it cannot be created for
    any other reason the OS gives, or it is not writable)."""
    try:
        os.makedirs(path, mode=mode, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RuntimeError(
            f"tilefuse: cache directory {path!r} (or a folder above it) exists and is not a "
            f"directory; point TILEFUSE_CACHE_DIR at a directory (or unset it)"
        ) from None
    except OSError as e:  # no permission, a read-only or pseudo file system, a name too long, ...
        raise RuntimeError(
            f"tilefuse: cannot create cache directory {path!r} ({e}); point TILEFUSE_CACHE_DIR at a writable directory"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise RuntimeError(
            f"tilefuse: cache directory {path!r} is not writable; point TILEFUSE_CACHE_DIR at a writable directory"
        )


def write_debug_source(source: str, debug_dir: str, name_hint: str = "graph") -> str:
    """Write a generated module's ``source`` to ``<debug_dir>/<name_hint>_<source hash>.py``
    (``config.debug_dir``); returns the path. DebugDirError naming ``debug_dir`` when it cannot
    be written (a file of that name, no permission)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = os.path.join(debug_dir, f"{name_hint}_{digest}.py")
    try:
        os.makedirs(debug_dir, exist_ok=True)
        with open(path, "w") as f:
            f.write(source)
    except OSError as e:
        raise DebugDirError(
            f"tilefuse: cannot write the generated module to debug_dir {str(debug_dir)!r} "
            f"({type(e).__name__}: {e}); give debug_dir (TILEFUSE_DEBUG_DIR) a writable "
            f"directory path, or unset it"
        ) from None
    return path


def random_seeds(n: int, device: Any = "cpu") -> Any:
    """``n`` int64 seeds in ``[0, 2**62)`` from torch's default generator of ``device`` (so
    ``torch.manual_seed`` fixes them): the per-call seeds of a graph's random ops
    (``ir.RandomSeeds``)."""
    import torch

    return torch.randint(0, 2**62, (n,), dtype=torch.int64, device=device)


def _reinterpret_py(t: Any, size: tuple, stride: tuple, offset: int) -> Any:
    return t.as_strided(size, stride, t.storage_offset() + offset)


def _reinterpret_fn() -> Any:
    try:  # torch's C++ view maker (what Inductor's wrappers call): about 2x faster than as_strided
        from torch._C._dynamo.guards import _reinterpret_tensor

        return _reinterpret_tensor
    except ImportError:  # pragma: no cover - older torch
        return _reinterpret_py


# reinterpret_tensor(t, size, stride, offset): a view of t's storage with size and stride, starting
# offset elements after t's own start (its storage offset included). Generated wrappers pass
# strided views of buffers (ReinterpretView) to kernels and aten calls with it.
reinterpret_tensor = _reinterpret_fn()


def ensure_strides(t: Any, size: tuple, stride: tuple) -> Any:
    """``t`` if its strides match ``stride`` on every dim that matters (size > 1, stride not 0:
    a stride-0 dim of the expected layout only ever reads index 0), else a copy of ``t`` with
    exactly ``size``/``stride``; where that layout broadcasts (stride 0), index 0 of the dim is
    copied and expanded back (a copy into overlapping memory is impossible). Used for the results
    of aten kernels and for graph inputs. Raises RuntimeError when the sizes differ."""
    if t is None:
        # an optional output the kernel did not produce (e.g. cuDNN attention's logsumexp when
        # no gradient is needed); nothing reads it
        return None
    if t.stride() == stride and t.shape == size:  # the common case, compared in C
        return t
    if tuple(t.shape) != tuple(size):
        raise RuntimeError(f"tilefuse: got a tensor of shape {tuple(t.shape)}, expected {tuple(size)}")
    if all(n <= 1 or want == 0 or got == want for n, got, want in zip(size, t.stride(), stride)):
        return t
    import torch

    src = t
    broadcast = [d for d, (n, want) in enumerate(zip(size, stride)) if want == 0 and n > 1]
    for d in broadcast:
        src = src.narrow(d, 0, 1)
    out = torch.empty_strided(tuple(src.shape), tuple(stride), dtype=t.dtype, device=t.device)
    out.copy_(src)
    return out.expand(tuple(size)) if broadcast else out


# ------------------------------------------------------------------------------------ launching


def _triton_config(cfg: dict[str, int]) -> Any:
    """A ``triton.Config`` from a codegen config dict (block constexprs + num_warps/num_stages)."""
    import triton

    meta = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages")}
    extra = {"num_stages": cfg["num_stages"]} if "num_stages" in cfg else {}
    return triton.Config(meta, num_warps=cfg.get("num_warps", 4), **extra)


def _time_config(kernel_call: Callable[[], Any], quantiles: Sequence[float]) -> Any:
    """Triton's autotuner's timing function: ``triton.testing.do_bench`` with short windows. A
    config that does not compile (any ``CompilationError``, e.g. a block over Triton's tensor size
    limit; the autotuner itself skips only compile-time assertion failures) or does not fit the
    device (``OutOfResources``, ``PTXASError``) is timed as infinite, so the autotuner skips it.
    The config's first launch runs (synchronized) before do_bench, and the wall seconds of both
    parts go to ``metrics.autotune_config_seconds`` (do_bench launches it once more untimed
    first, one run of the kernel)."""
    import torch
    import triton.testing
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    from .. import metrics

    t0 = time.perf_counter()
    t1 = None
    try:
        kernel_call()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return triton.testing.do_bench(kernel_call, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)
    except (CompilationError, OutOfResources, PTXASError) as e:
        log.debug("tilefuse: autotuning skips a config: %s: %s", type(e).__name__, e)
        return [float("inf")] * len(quantiles)
    finally:
        t2 = time.perf_counter()
        first = (t1 if t1 is not None else t2) - t0
        metrics.autotune_config_seconds.append((first, t2 - t0 - first))


def _hook_set(hook: Any) -> bool:
    """Whether a Triton launch hook does something: Triton 3.6 keeps an always-present, usually
    empty ``HookChain`` (its ``calls``); older versions None or a callable."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


def _torch_has_static_launcher() -> bool:
    """Whether this torch has the static CUDA launcher (a CUDA build, not ROCm)."""
    import torch

    return torch.version.hip is None and hasattr(torch._C, "_StaticCudaLauncher")


def _static_ok(kernel: Any) -> bool:
    """Whether torch's static CUDA launcher takes this compiled kernel (``_direct_entry`` then
    launches it without Triton's per-signature C launcher): no launch attributes, no global or
    profile scratch memory, one CTA, CUDA rather than ROCm, and a torch that has the launcher.
    Reads the kernel's metadata only (no CUDA), so forked compile workers can ask too."""
    try:
        md = kernel.metadata
        if not _torch_has_static_launcher():
            return False
        if getattr(md, "launch_pdl", False) or getattr(md, "launch_cooperative_grid", False):
            return False
        if getattr(md, "global_scratch_size", 0) or getattr(md, "profile_scratch_size", 0):
            return False
        if getattr(md, "num_ctas", 1) != 1 or getattr(getattr(md, "target", None), "backend", None) != "cuda":
            return False
        from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel  # noqa: F401
    except Exception:  # noqa: BLE001 - anything unexpected: Triton's own launcher
        return False
    return True


@functools.lru_cache(maxsize=None)
def _max_shared_mem(device: int) -> int:
    """The device's shared memory per block (bytes), as Triton's loader checks it."""
    from triton.runtime import driver

    return int(driver.active.utils.get_device_properties(device)["max_shared_mem"])


def _static_launch(entry: tuple, grid: tuple, args: tuple, device: int) -> None:
    """Launch a ``_direct_entry`` with a static launcher on the current stream."""
    import torch

    _, (launch, function, num_warps, shared, tys, extra), keep, _ = entry
    launch(
        function,
        grid[0],
        grid[1] if len(grid) > 1 else 1,
        grid[2] if len(grid) > 2 else 1,
        num_warps,
        shared,
        tys,
        (*args, *extra) if keep is None else (*(args[i] for i in keep), *extra),
        torch._C._cuda_getCurrentRawStream(device),
    )


class _StaticLaunchJIT:
    """Stands in for a ``JITFunction`` inside Triton's autotuner: compiles through the JIT
    function (``run(..., warmup=True)``: its cache, its specialization, no launch) and launches
    the binary with torch's static CUDA launcher, so timing the candidate configs builds no
    per-signature ``gcc`` launcher (about 0.3 s per signature on a cold cache). Falls back to the
    JIT function's own launch for a binary the static launcher does not take, with Triton's
    launch hooks set, or when the static launch fails (Triton's launch then reports resource
    errors as ``OutOfResources``, which the autotuner skips). Everything else is forwarded."""

    def __init__(self, fn: Any, entries: dict):
        self.fn = fn
        self.arg_names = fn.arg_names
        self._entries = entries  # the KernelLauncher's (``_direct_entry``'s cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        k = self.fn.run(*args, grid=grid, warmup=True, **kwargs)
        if warmup or k is None:
            return k
        if hasattr(k, "result"):
            k = k.result()
        import torch
        import triton
        from triton.runtime.errors import OutOfResources

        rt = triton.knobs.runtime
        dev = torch._C._cuda_getDevice()
        if k.metadata.shared > _max_shared_mem(dev):  # as Triton's loader would refuse it, before any launcher
            raise OutOfResources(k.metadata.shared, _max_shared_mem(dev), "shared memory")
        entry = _direct_entry(k, dev, len(args), self._entries)
        if entry[1] is None or _hook_set(rt.launch_enter_hook) or _hook_set(rt.launch_exit_hook):
            return self.fn.run(*args, grid=grid, warmup=False, **kwargs)
        if callable(grid):
            grid = grid({**dict(zip(self.arg_names, args)), **kwargs})
        try:
            _static_launch(entry, tuple(grid), args, dev)
        except RuntimeError as e:
            log.debug("tilefuse: static launch of %s failed (%s); through Triton's launcher", k.name, e)
            return self.fn.run(*args, grid=grid, warmup=False, **kwargs)
        return k


def _direct_entry(kernel: Any, device: int, n_args: int, cache: dict | None = None) -> tuple:
    """``(kernel, static, keep, record)`` for ``KernelLauncher._launch`` and ``_StaticLaunchJIT``:
    ``static`` is torch's static CUDA launcher for the compiled ``kernel``
    (``StaticallyLaunchedCudaKernel``, as Inductor's ``StaticTritonCompileResult``: its cubin
    loaded on ``device``), unpacked to ``(launch, function, num_warps, shared, arg types,
    trailing None arguments)``, or None when it does not take this binary (``_static_ok``) or the
    binary needs more shared memory than the device has (Triton's own launch reports that);
    ``keep``: the positions of the runtime arguments the binary still takes (Triton turns an
    integer equal to 1 into a constant), None for all of them; ``record``: the static launcher
    before its cubin was loaded and its cubin's file (``_launcher_record``, picklable), from which
    ``_load_record`` rebuilds ``static`` in another process (``KernelLauncher.launch_record``),
    None with ``static``. ``cache``: a dict keeping each binary's entry, so it is loaded once per
    device."""
    ck = (id(kernel), device)
    if cache is not None and ck in cache:
        return cache[ck]
    static = keep = record = None
    try:
        if not _static_ok(kernel):
            raise NotImplementedError("not a binary the static launcher takes")
        if kernel.metadata.shared > _max_shared_mem(device):
            raise NotImplementedError("more shared memory than the device has")
        from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel

        if not hasattr(kernel, "_cubin_path"):
            kernel._cubin_path = None
        sk = StaticallyLaunchedCudaKernel(kernel)
        if sk.cubin_path is None:
            path = os.path.join(cache_dir(), "cubin", f"{kernel.hash}.cubin")
            if not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(sk.cubin_raw)
                os.replace(tmp, path)
            sk.cubin_path = path
        record = _launcher_record(sk)
        static, keep = _static_from_loaded(sk, device, n_args)
    except Exception as e:  # noqa: BLE001 - Triton's own launcher works for every binary
        log.debug(
            "tilefuse: static launch of %s unavailable (%s: %s); Triton's launcher is used",
            getattr(kernel, "name", kernel),
            type(e).__name__,
            e,
        )
        static = keep = record = None
    entry = (kernel, static, keep, record)
    if cache is not None:
        cache[ck] = entry  # the kernel object lives in the JIT's cache: its id stays its own
    return entry


def _launcher_record(sk: Any) -> tuple:
    """``(launcher, cubin path)``: a picklable copy of a static launcher whose cubin is not loaded
    yet, without the cubin's bytes, and the file holding the cubin (torch's launcher drops its
    path when copied or pickled, ``StaticallyLaunchedTritonKernel.__getstate__``)."""
    rec = copy.copy(sk)  # (its __getstate__ already clears the loaded function and the path)
    rec.__dict__.pop("C_impl", None)  # torch's launcher module (a cached property)
    rec.cubin_raw = None
    return rec, sk.cubin_path


def _load_record(record: tuple, device: int, n_args: int) -> tuple:
    """``(static, keep)`` of a ``_launcher_record``: its cubin loaded on ``device``. Raises
    (FileNotFoundError, NotImplementedError, a CUDA error) when it cannot be used."""
    rec, path = record
    if not path or not os.path.exists(path):
        raise FileNotFoundError(f"cubin {path!r}")
    sk = copy.copy(rec)  # the record stays unloaded (another device may load it too)
    sk.cubin_path = path
    return _static_from_loaded(sk, device, n_args)


def _static_from_loaded(sk: Any, device: int, n_args: int) -> tuple:
    """Load ``sk``'s cubin on ``device`` and unpack it to ``(static, keep)`` as ``_direct_entry``
    describes; raises NotImplementedError when the argument types do not fit ``n_args``."""
    sk.load_kernel(device)
    constants = set(sk.full_constexprs)
    keep = None
    if any(i < n_args for i in constants):
        keep = tuple(i for i in range(n_args) if i not in constants)
    extra = tuple(None for flag in (sk.has_global_scratch, sk.has_profile_scratch) if flag)
    tys = sk.arg_tys + "O" * len(extra)
    if len(tys) != (n_args if keep is None else len(keep)) + len(extra):
        raise NotImplementedError(f"argument types {tys!r} for {n_args} arguments")
    return (sk.C_impl._launch_kernel, sk.function, sk.num_warps, sk.shared, tys, extra), keep


class KernelLauncher:
    """One generated kernel with its launch grid and candidate configs; call it with the
    kernel's arguments to launch it.

    ``grid_axes``: one ``(block constexpr, extent)`` per grid axis; axis k has
    ``ceil(extent / config[block])`` programs. A symbolic extent (dynamic shapes) is the name of
    the kernel's integer parameter holding it, read from the arguments at each launch. ``configs``: dicts of block constexprs plus
    ``num_warps`` (and optionally ``num_stages``), the heuristic's choice first. ``arg_dtypes``:
    the torch dtype of each pointer argument (for compiling ahead with mock tensors), ``int`` for
    an integer (size) argument.
    ``mutated``: positions of the arguments the kernel updates in place. ``device_type``: "cuda"
    for a ``triton.jit`` kernel, anything else for an interpreted one.

    Under the interpreter, with ``config.autotune`` off, or with one config, every launch uses
    ``configs[0]``; otherwise the first launch is autotuned by Triton (see the module docstring)
    and later ones use the winner. ``best_config`` is the config in use (None before an
    autotuned kernel's first launch); ``timings`` maps each tried config to its measured times
    (ms: median, 20th and 80th percentile) after autotuning.
    """

    def __init__(
        self,
        fn: Any,
        grid_axes: Sequence[tuple[str, int]],
        configs: Sequence[dict[str, int]],
        arg_dtypes: Sequence[Any] = (),
        mutated: Iterable[int] = (),
        device_type: str = "cuda",
    ):
        from .. import config

        if not configs:
            raise ValueError("a kernel needs at least one launch config")
        self.fn = fn
        self.grid_axes = [(str(b), n if isinstance(n, str) else int(n)) for b, n in grid_axes]
        # symbolic extents: (block, argument position) read at each launch
        self.dynamic_axes = [(b, list(fn.arg_names).index(n)) for b, n in self.grid_axes if isinstance(n, str)]
        self.arg_dtypes = tuple(arg_dtypes)
        self.device_type = device_type
        self.cuda = device_type == "cuda"
        if not self.cuda or not config.autotune:
            configs = configs[:1]
        self.configs = [dict(c) for c in configs]
        self.mutated = [fn.arg_names[i] for i in mutated]  # parameter names
        self.autotuner = None
        self.timings: dict | None = None
        self.best_config: dict[str, int] | None = None
        self._grid: tuple[int, ...] | None = None
        self._kwargs: dict[str, Any] | None = None
        # direct launches (see _launch): compiled kernel per specialization key; None when off
        self._direct: dict | None = {} if self.cuda else None
        # (binary, device) -> its static-launch entry, shared by the autotuner's stand-in
        self._entries: dict = {}
        self._ptr_pos = [i for i, d in enumerate(self.arg_dtypes) if d is not int]
        self._int_pos = [i for i, d in enumerate(self.arg_dtypes) if d is int]
        self._tail: tuple = ()
        if self.cuda:
            self._triton_configs = [_triton_config(c) for c in self.configs]
        if self.cuda and len(self.configs) > 1:
            import triton

            self.autotuner = triton.autotune(
                self._triton_configs,
                key=[],
                restore_value=self.mutated or None,
                do_bench=_time_config,
                cache_results=True,
            )(_StaticLaunchJIT(fn, self._entries))
        else:
            self._use(0)

    def grid(self, cfg: dict[str, Any], args: Sequence[Any] = ()) -> tuple[int, ...]:
        """The launch grid for a config (or for Triton's meta-parameter dict); ``args``: the
        launch's arguments, for symbolic extents."""
        out = []
        for b, n in self.grid_axes:
            if isinstance(n, str):
                n = int(args[self.fn.arg_names.index(n)]) if args else 1
            out.append(max(1, -(-n // int(cfg[b]))))
        return tuple(out)

    def _use(self, k: int) -> None:
        cfg = self.configs[k]
        self.best_config = cfg
        self._grid = self.grid(cfg)
        if self.cuda:
            self._kwargs = self._triton_configs[k].all_kwargs()
            self._set_tail()
        else:  # the interpreter takes the block constexprs only
            self._kwargs = {b: v for b, v in cfg.items() if b not in ("num_warps", "num_stages")}

    def __call__(self, *args: Any) -> None:
        kwargs = self._kwargs
        if kwargs is None:
            self._autotune_and_launch(args)
            return
        grid = self._grid
        if self.dynamic_axes:
            cfg = self.best_config
            grid = tuple(
                max(1, -(-int(args[p]) // int(cfg[b]))) if isinstance(n, str) else g
                for (b, n), g, p in zip(self.grid_axes, grid, self._axis_pos)
            )
        if self._direct is not None:
            self._launch(grid, args, kwargs)
        else:
            self.fn[grid](*args, **kwargs)

    def _set_tail(self) -> None:
        """The constexpr values after the kernel's runtime arguments, in parameter order (Triton's
        launcher takes every parameter, constexprs included)."""
        names = list(self.fn.arg_names)[len(self.arg_dtypes) :]
        self._tail = tuple(self._kwargs[n] for n in names) if all(n in self._kwargs for n in names) else None
        if self._tail is None:
            self._direct = None

    def _launch(self, grid: tuple, args: tuple, kwargs: dict) -> None:
        """Launch without ``JITFunction.run``'s argument binding and cache lookup (about 11 us of
        Python per launch). The binary depends on what Triton specializes on: each pointer's
        16-byte alignment, and each integer's being 1, a multiple of 16 and within int32, plus the
        current device; the key records exactly those, and a new key's binary comes from
        ``JITFunction.run(..., warmup=True)`` (the JIT's cache and specialization, no launch) and
        is kept for it (``_direct_entry``). Launches go through torch's static CUDA launcher when
        it takes the binary (what Inductor launches with: C++ argument parsing, and no
        per-signature ``gcc`` launcher is ever built), else through Triton's own launch. With
        Triton's launch hooks set (a profiler) every launch goes through ``run``."""
        import triton

        rt = triton.knobs.runtime
        if _hook_set(rt.launch_enter_hook) or _hook_set(rt.launch_exit_hook):
            self.fn[grid](*args, **kwargs)
            return
        import torch

        dev = torch._C._cuda_getDevice()
        key = self._direct_key(args, dev, torch.Tensor.data_ptr)
        entry = self._direct.get(key)
        if entry is None:
            entry = self._add_entry(key, grid, args, kwargs)
            if entry is None or entry[1] is None:
                # Triton's own launch (its loader checks the kernel's resources and reports them)
                self.fn[grid](*args, **kwargs)
                return
        if entry[1] is not None:
            _static_launch(entry, grid, args, dev)
            return
        k = entry[0]
        k.run(
            grid[0],
            grid[1] if len(grid) > 1 else 1,
            grid[2] if len(grid) > 2 else 1,
            torch._C._cuda_getCurrentRawStream(dev),
            k.function,
            k.packed_metadata,
            None,
            None,
            None,
            *args,
            *self._tail,
        )

    def _direct_key(self, args: tuple, dev: int, data_ptr: Callable[[Any], int]) -> tuple:
        """The specialization key of a launch on device ``dev`` (see ``_launch``); ``data_ptr``:
        ``torch.Tensor.data_ptr`` (passed in: no import on the launch path)."""
        # pointers: True when all are 16-byte aligned (one OR over them: the common case), else
        # each one's alignment
        m = 0
        for p in map(data_ptr, self._ptrs(args)):
            m |= p
        ptrs = True if m & 15 == 0 else tuple(args[i].data_ptr() & 15 == 0 for i in self._ptr_pos)
        ints = (
            tuple((v == 1, v % 16 == 0, -2147483648 <= v < 2147483648) for v in (args[i] for i in self._int_pos))
            if self._int_pos
            else ()
        )
        return (dev, ptrs, ints)

    def _add_entry(self, key: tuple, grid: tuple, args: tuple, kwargs: dict) -> tuple | None:
        """The ``_direct_entry`` of a new key, kept in ``_direct``: the binary compiled (or found
        in the JIT's cache) without launching, so a binary the static launcher takes never builds
        Triton's per-signature C launcher. None, with direct launches switched off, for a Triton
        whose compiled kernels lack what a direct launch needs."""
        # the warm-up threads are done with Triton's driver first (a restored launcher's module
        # was loaded without waiting for them)
        wait_warmup()
        k = self.fn.run(*args, grid=grid, warmup=True, **kwargs)
        if hasattr(k, "result"):
            k = k.result()
        # (``run`` looked up on the class: on the instance it is a property that builds the C
        # launcher)
        if getattr(type(k), "run", None) is None or not all(hasattr(k, a) for a in ("packed_metadata", "metadata")):
            self._direct = None  # a Triton without these: always through run
            return None
        entry = _direct_entry(k, key[0], len(args), self._entries)
        if len(self._direct) >= 64:
            self._direct.clear()
        self._direct[key] = entry
        return entry

    @functools.cached_property
    def _ptrs(self) -> Callable[[tuple], tuple]:
        """The pointer (tensor) arguments of a launch's arguments, as a tuple."""
        pos = self._ptr_pos
        if len(pos) >= 2:
            return operator.itemgetter(*pos)
        return lambda args: tuple(args[i] for i in pos)

    @functools.cached_property
    def _axis_pos(self) -> list:
        names = list(self.fn.arg_names)
        return [names.index(n) if isinstance(n, str) else -1 for _, n in self.grid_axes]

    def _autotune_and_launch(self, args: tuple) -> None:
        from .. import metrics

        at = self.autotuner
        t0 = time.perf_counter()
        # times the configs (or reads their timings), then launches
        at.run(*args, grid=lambda meta: self.grid(meta, args), warmup=False)
        metrics.add_phase("autotune", time.perf_counter() - t0)
        best = at.best_config
        self.timings = {str(c): t for c, t in getattr(at, "configs_timings", {}).items()} or None
        for k, c in enumerate(self._triton_configs):
            if c is best or str(c) == str(best):
                self._use(k)
                break
        else:
            # a config read back from Triton's on-disk timing cache that prints differently
            self._kwargs = best.all_kwargs()
            self._grid = self.grid(self._kwargs)
            self._set_tail()
            self.best_config = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
        if self._direct is not None:
            # the winner's binary for these arguments, as the next launch (and the launch
            # record) will use it: the autotuner launched it through its own stand-in
            try:
                import torch

                key = self._direct_key(args, torch._C._cuda_getDevice(), torch.Tensor.data_ptr)
                if key not in self._direct:
                    self._add_entry(key, self.grid(self.best_config, args), args, self._kwargs)
            except Exception as e:  # noqa: BLE001 - the next launch makes it (and reports problems)
                log.debug("tilefuse: direct launch entry of %s after autotuning: %s: %s", self.fn, type(e).__name__, e)

    def launch_record(self) -> dict | None:
        """What a later process needs to launch this kernel without Triton's JIT: the index of the
        config in use and, per specialization key of ``_launch`` (device, pointer alignment,
        integer properties), the static launcher of the binary launched for it, not loaded
        (``_launcher_record``; its cubin a file under ``cache_dir()``). None before the first
        launch, off CUDA, or when no binary of this kernel went through the static launcher.
        The graph cache stores the records of a graph's kernels after its first call
        (``restore``)."""
        if not self.cuda or self._kwargs is None or not self._direct:
            return None
        k = next((i for i, c in enumerate(self.configs) if c == self.best_config), None)
        entries = {key: e[3] for key, e in self._direct.items() if e[1] is not None and e[3] is not None}
        if k is None or not entries:
            return None
        return {"kernel": getattr(self.fn, "__name__", "?"), "config": k, "entries": entries}

    def restore(self, record: dict) -> bool:
        """Take a ``launch_record`` made by another process for the same kernel source: the
        recorded config is used without autotuning, and each recorded binary's cubin is loaded
        for the static launcher, so launches with a recorded specialization key compile
        nothing and never start Triton's JIT (its cache key needs a hash of Triton's whole
        install, 0.3-0.8 s per process); another key compiles through the JIT as usual. All or
        nothing: returns False, with nothing restored, for a record of another kernel or config
        list, or when a cubin does not load (a deleted file, another GPU architecture)."""
        if not self.cuda or self._direct is None or record.get("kernel") != getattr(self.fn, "__name__", "?"):
            return False
        k = record.get("config")
        if not isinstance(k, int) or not 0 <= k < len(self.configs):
            return False
        n_args = len(self.arg_dtypes)
        entries = {}
        try:
            for key, rec in record["entries"].items():
                static, keep = _load_record(rec, key[0], n_args)
                entries[key] = (None, static, keep, None)
        except Exception as e:  # noqa: BLE001 - the JIT path compiles it instead
            log.debug("tilefuse: launch record of %s not usable (%s: %s)", record.get("kernel"), type(e).__name__, e)
            return False
        self._use(k)
        if self._direct is None:  # constexprs the direct launch cannot pass
            return False
        self._direct.update(entries)
        return True

    def compile_cost(self, cfg: dict[str, int]) -> float:
        """Estimated relative cost of compiling the kernel with ``cfg``: the lines of its source
        times the elements each thread holds (the config's block sizes multiplied, over
        ``num_warps`` x 32 threads; at least 1). Triton lowers every block-shaped value to that many
        scalars per thread, so LLVM and ptxas work grows with it: gpt12's slowest compile jobs on
        the H200 were the ones holding the most (a looped reduction's 4096-element chunk at 4
        warps, 32 per thread: 0.5-0.7 s; LayerNorm kernels at 16 per thread: 0.35 s; most jobs,
        at 8 or fewer: under 0.2 s). Used only to order the compile jobs (``ForkedBatch``)."""
        elems = 1
        for k, v in cfg.items():
            if k.endswith("BLOCK"):
                elems *= int(v)
        per_thread = max(1.0, elems / (32 * int(cfg.get("num_warps", 4))))
        src = getattr(self.fn, "src", "") or ""
        return float(max(1, src.count("\n"))) * per_thread

    def warmup(self) -> None:
        """Compile the kernel for every config it may launch with, without launching (CUDA only;
        inside ``AsyncCompileMode`` this only submits the compile jobs). Compile errors are left
        to the launch, which reports them, or to the autotuner, which skips that config."""
        if not self.cuda:
            return
        global _JOB_LABEL, _JOB_COST
        for c, cfg in zip(self.configs, self._triton_configs):
            # names the compile job this submits (metrics.precompile_job_labels), with its cost
            _JOB_LABEL = f"{getattr(self.fn, '__name__', self.fn)} " + ",".join(f"{k}={v}" for k, v in c.items())
            _JOB_COST = self.compile_cost(c)
            try:
                # integer (size) arguments: any value, they are not specialized on
                mock = [64 if a is int else a for a in self.arg_dtypes]
                self.fn.warmup(*mock, grid=(1,), **cfg.all_kwargs())
            except Exception as e:  # noqa: BLE001 - compiled again (and reported) at launch
                log.debug("tilefuse: compiling %s with %s ahead failed: %s", self.fn, cfg, e)
            finally:
                _JOB_LABEL, _JOB_COST = "?", 0.0


def unbuildable_kernels(launchers: Iterable[KernelLauncher], failures: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The kernels among ``launchers`` none of whose configs compiled ahead (``failures``: a
    PendingPrecompile's (job label, error) pairs; a label is ``"<kernel name> <config>"``, as
    ``KernelLauncher.warmup`` sets it), each with its first error: such a kernel would fail at its
    launch, where Triton compiles it again. A kernel with one config left (another too large for
    the device, say) is not listed: the autotuner skips the failed ones."""
    failed: dict[str, list[str]] = {}
    for label, err in failures:
        failed.setdefault(label.split(" ", 1)[0], []).append(err)
    out = {}
    for ln in launchers:
        name = str(getattr(ln.fn, "__name__", ln.fn))
        if ln.cuda and name in failed and len(failed[name]) >= len(ln.configs):
            out[name] = failed[name][0]
    return out


def make_launcher(
    fn: Any,
    grid_axes: Sequence[tuple[str, int]],
    configs: Sequence[dict[str, int]],
    arg_dtypes: Sequence[Any] = (),
    mutated: Iterable[int] = (),
    device_type: str = "cuda",
) -> KernelLauncher:
    """The ``KernelLauncher`` of one generated kernel (what generated modules call)."""
    return KernelLauncher(fn, grid_axes, configs, arg_dtypes, mutated, device_type)


# ------------------------------------------------------------------------------ compiling ahead


_FORKED_JOBS: list[Callable[[], Any]] | None = None
# the kernel and config of the compile job being submitted, and its estimated cost (set by
# KernelLauncher.warmup)
_JOB_LABEL = "?"
_JOB_COST = 0.0


def _run_forked_job(i: int) -> tuple[int, str | None]:
    """In a forked worker: run compile job ``i`` (its binary lands in Triton's on-disk cache),
    then, for a binary torch's static launcher does not take, build Triton's C launcher
    (``_build_launcher``); returns ``(i, None)`` or ``(i, error message)``."""
    try:
        kernel = _FORKED_JOBS[i]()  # type: ignore[index]
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        return i, f"{type(e).__name__}: {e}"
    if not _static_ok(kernel):  # launched statically, it never needs Triton's C launcher
        _build_launcher(kernel)
    return i, None


def _build_launcher(kernel: Any) -> None:
    """Build the C launcher of a compiled CUDA kernel, for its side effect on Triton's cache.

    Triton launches a kernel through a small C extension generated for its argument signature and
    compiled with the system C compiler (``CudaLauncher``, about 0.3 s of ``gcc`` per signature);
    it does so when the kernel first runs, in this process, one after another. Built here, in the
    forked compile worker right after the kernel, the launchers of a graph's kernels compile in
    parallel, and the first launch in the parent only loads them from the cache. Nothing here
    touches CUDA (compiling and importing the extension does not initialize the driver). Any
    failure is ignored: the launch builds the launcher as it would have anyway."""
    src, md = getattr(kernel, "src", None), getattr(kernel, "metadata", None)
    if src is None or md is None or getattr(getattr(md, "target", None), "backend", None) != "cuda":
        return
    try:
        from triton.runtime import driver

        driver.active.launcher_cls(src, md)
    except BaseException:  # noqa: BLE001 - an optimization only
        pass


def triton_install_fingerprint(root: str | None = None) -> str:
    """A cache key for the Triton install at ``root`` (default: the imported ``triton``
    package's folder) made from file metadata instead of file contents: the relative path,
    size, modification and status-change times (ns) and inode of every file under its
    ``compiler``, ``backends`` and ``language`` folders, of ``runtime/cache.py`` and of
    ``_C/libtriton.*``, hashed with SHA-256; returned as ``"<triton version>-tilefuse-stat-<hex>"``.

    Triton's own key (``triton.runtime.cache.triton_key``) hashes the contents of the same
    Python files and of ``libtriton.so`` (about 415 MB for Triton 3.6): 0.4-0.9 s per process,
    which a graph's first compile waited for (H200, layernorm, cold: 0.93 s in its warm-up
    thread, 0.30 s of it on the compile's critical path). This key covers a superset of those
    files and changes whenever any of them is rewritten, replaced or touched (reinstalling
    Triton changes the inode and times), the check ccache makes of its compiler by default
    (``compiler_check = mtime``); a file changed in the last 2 s, which a same-size rewrite
    inside the timestamps' granularity could hide, has its contents hashed as well. Takes
    about 5 ms. Raises OSError when ``root`` cannot be read."""
    import triton

    if root is None:
        root = os.path.dirname(os.path.abspath(triton.__file__))
    files = [os.path.join(root, "runtime", "cache.py")]
    c_dir = os.path.join(root, "_C")
    if os.path.isdir(c_dir):
        files += sorted(os.path.join(c_dir, f) for f in os.listdir(c_dir) if f.startswith("libtriton."))
    for sub in ("compiler", "backends", "language"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames.sort()
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            files += [os.path.join(dirpath, f) for f in sorted(filenames)]
    h = hashlib.sha256()
    racy_after = time.time_ns() - 2_000_000_000
    for f in files:
        st = os.stat(f)
        h.update(
            f"{os.path.relpath(f, root)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode()
        )
        if max(st.st_mtime_ns, st.st_ctime_ns) > racy_after:
            # written in the last 2 s: a same-size rewrite inside the file system's timestamp
            # granularity would keep every field above, so its contents count too (git's
            # "racily clean" rule)
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return f"{triton.__version__}-tilefuse-stat-{h.hexdigest()}"


def use_stat_triton_key() -> bool:
    """With ``config.triton_key_from_stat`` (the default), make Triton's cache key of its own
    install ``triton_install_fingerprint()`` for this process: ``triton.runtime.cache.triton_key``
    (read by ``get_cache_key``, the key of every compiled kernel in Triton's cache) and the name
    ``triton.runtime.autotuner`` imported it under (the autotuner's timing cache) are replaced
    by a function returning the fingerprint; the original stays as its ``__wrapped__``. Every
    kernel this process compiles, tilefuse's or not, is then cached under the fingerprint:
    Triton's cache entries differ from a process without tilefuse, nothing else does (torch's
    own copy, ``torch._inductor.runtime.triton_compat.triton_key``, is left alone). Returns
    whether the fingerprint is in use. Left as it is (False) when the option is off, when
    either name no longer holds Triton's function (a Triton without them, or another library
    replaced it), or when the install cannot be read (logged at debug level). Idempotent."""
    from .. import config

    try:
        import triton.runtime.autotuner as tune
        import triton.runtime.cache as tcache
    except ImportError:
        return False
    current = getattr(tcache, "triton_key", None)
    if getattr(current, "tilefuse_stat_key", False):
        return True
    if not config.triton_key_from_stat or current is None or getattr(tune, "triton_key", current) is not current:
        return False
    try:
        key = triton_install_fingerprint()
    except OSError as e:
        log.debug("tilefuse: Triton's install cannot be fingerprinted (%s); its own key stays", e)
        return False

    def stat_triton_key() -> str:
        return key

    stat_triton_key.tilefuse_stat_key = True
    stat_triton_key.__wrapped__ = current
    stat_triton_key.cache_clear = lambda: None  # callers of the lru_cache'd original may call it
    tcache.triton_key = stat_triton_key
    if hasattr(tune, "triton_key"):
        tune.triton_key = stat_triton_key
    return True


_WARMUP: list[threading.Thread] = []
# the compiler part of the warm-up, held back by start_warmup when the graph cache expects hits
_DEFERRED_WARMUP: list[Callable[[], None]] = []


def start_warmup() -> None:
    """Start, once per process, the one-time set-up Triton does on first use, in background
    threads, so it overlaps AOTAutograd's tracing instead of delaying the graph's first kernel
    compile. Two threads run side by side, since their work is independent:

    - Triton's CUDA driver (``driver.active``): its first use builds a C helper module
      (``CudaUtils``) with ``gcc``, about 0.3-0.7 s on a cold Triton cache;
    - the compiler: ``triton_key()`` (Triton's cache key of its own install: a hash of
      ``libtriton.so``, 0.3-0.9 s, memoized, unless ``use_stat_triton_key``, called here first,
      made it a 5 ms fingerprint of file metadata) and then ``_warm_compiler`` (an empty kernel
      compiled for the device's target, taken from torch, not from the driver the other thread
      is creating).

    Measured on the H200 (block_fwd, cold caches), one thread doing both took 1.47 s (0.70 s
    driver, 0.56 s key, 0.21 s compiler); two take about the longer part.

    When the graph cache expects hits (``graph_cache.expects_hits``: an earlier process with this
    tilefuse code stored kernel launch records in this cache directory), the compiler part is held
    back: a hit loads its kernels' cubins without Triton's compiler, and the compiler thread,
    which holds the GIL through most of its native work, only slowed Dynamo's tracing (measured
    on the H200, warm-cache first calls of mlp, nchw_to_nhwc_relu and rmsnorm: 0.04-0.13 s
    slower with it than without any warm-up). The first graph that misses starts it
    (``start_deferred_warmup``, called before lowering), so it overlaps that graph's lowering.

    ``wait_warmup`` joins the threads before this process uses Triton's driver itself and
    before compile workers are forked (which then inherit the key and the initialized
    compiler). Called when Dynamo's backend lookup imports
    ``tilefuse.backend`` (at ``torch.compile``, so the threads overlap Dynamo's tracing too) and
    again at backend entry (a no-op once started); only after Dynamo (which imports Triton) is
    loaded. The Triton modules the threads use are imported here, in the calling thread,
    first: a background thread importing a package while the main thread imports another that
    needs it can hand the main thread a half-initialized module (seen when the warm-up was
    started at ``import tilefuse.backend``, before Dynamo was imported). Does nothing after the
    first call, without CUDA, under the interpreter, or when ``config.warmup`` is False; on ROCm
    one thread does both parts."""
    from .. import config

    if _WARMUP or os.environ.get("TRITON_INTERPRET") == "1":
        return
    import torch

    if not torch.cuda.is_available():
        return
    use_stat_triton_key()  # before any thread could ask for Triton's own key
    if not config.warmup:
        return
    # every Triton module the threads use, imported by the caller (normally already loaded)
    import triton  # noqa: F401
    import triton.backends.compiler  # noqa: F401
    import triton.compiler  # noqa: F401
    import triton.runtime.cache  # noqa: F401
    import triton.runtime.driver  # noqa: F401
    import triton.runtime.jit  # noqa: F401
    import triton.runtime.build  # noqa: F401 - the driver's helper module is built with it
    import triton.compiler.code_generator  # noqa: F401 - the warm compile's front end

    from .. import metrics

    def timed(part: str, fn: Callable[[], Any]) -> None:
        t0 = time.perf_counter()
        try:
            fn()
        finally:
            metrics.warmup_seconds[part] = time.perf_counter() - t0

    def driver_work():
        try:
            from triton.runtime import driver

            # the side effect: CudaUtils compiled or loaded
            timed("driver", lambda: driver.active.utils)
        except BaseException as e:  # noqa: BLE001 - the real use reports any problem
            log.debug("tilefuse: Triton driver warm-up failed: %s", e)

    def compiler_work():
        try:
            from triton.runtime.cache import triton_key

            target = None
            if torch.version.hip is None:
                from triton.backends.compiler import GPUTarget

                major, minor = torch.cuda.get_device_capability()
                target = GPUTarget("cuda", major * 10 + minor, 32)  # what Triton's CUDA driver reports
            else:
                driver_work()  # the driver gives ROCm's target: made first, in this thread
            timed("key", triton_key)
            timed("compiler", lambda: _warm_compiler(target))
        except BaseException as e:  # noqa: BLE001 - the real use reports any problem
            log.debug("tilefuse: Triton compiler warm-up failed: %s", e)

    if torch.version.hip is not None:
        works = [compiler_work]
    else:
        from . import graph_cache

        works = [driver_work, compiler_work]
        if graph_cache.expects_hits():
            _DEFERRED_WARMUP.append(works.pop())
    _start_threads(works)


def _start_threads(works: list[Callable[[], None]]) -> None:
    """Run each of ``works`` in a daemon thread of its own (kept in ``_WARMUP`` for
    ``wait_warmup``), with the switch interval lowered while any of them runs."""
    restore = _SwitchIntervalLowered(len(works))
    for work in works:
        t = threading.Thread(target=restore.wrap(work), name=f"tilefuse-triton-warmup-{len(_WARMUP)}", daemon=True)
        _WARMUP.append(t)
        t.start()


def start_deferred_warmup() -> None:
    """Start the warm-up's compiler part if ``start_warmup`` held it back (the graph cache
    expected hits, and a graph is about to be compiled after all); a no-op otherwise. Called by
    the backend before lowering each graph it compiles."""
    if _DEFERRED_WARMUP:
        _start_threads([_DEFERRED_WARMUP.pop()])


WARMUP_SWITCH_INTERVAL_S = 2e-4


class _SwitchIntervalLowered:
    """Lower the interpreter's thread switch interval (``sys.setswitchinterval``) to
    ``WARMUP_SWITCH_INTERVAL_S`` while the warm-up threads run, and put it back when the last of
    ``count`` wrapped functions returns.

    Why: most of the warm-up is I/O and hashing that give the GIL up (``triton_key`` reads
    ``libtriton.so``, about 400 MB, in 1 MiB chunks and hashes each, and reads ~100 source
    files; the driver waits on ``gcc``), and each time such a call returns, the thread waits for
    the GIL, which a main thread busy tracing (Dynamo, AOTAutograd) hands over only when the
    switch interval (default 5 ms) runs out: about 800 waits. Measured on the 2-core development
    machine, ``triton_key`` took 0.36 s with an idle main thread and 5.7-6.6 s against a busy
    one; with a 0.2 ms interval 0.68-0.71 s, while the main thread's own work did not slow
    measurably. The interval is restored only if nobody changed it meanwhile."""

    def __init__(self, count: int):
        self.left = count
        self.lock = threading.Lock()
        self.old = sys.getswitchinterval()
        self.lowered = self.old > WARMUP_SWITCH_INTERVAL_S
        if self.lowered:
            sys.setswitchinterval(WARMUP_SWITCH_INTERVAL_S)

    def wrap(self, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            finally:
                with self.lock:
                    self.left -= 1
                    last = self.left == 0
                # getswitchinterval returns the value rounded to microseconds
                if last and self.lowered and abs(sys.getswitchinterval() - WARMUP_SWITCH_INTERVAL_S) < 1e-6:
                    sys.setswitchinterval(self.old)

        return run


def _warmup_kernel(x_ptr):  # noqa: ARG001 - compiled, never launched
    """An empty kernel: ``_warm_compiler`` compiles it once per process."""


def _warm_compiler(target: Any = None) -> None:
    """Compile an empty kernel for the current device, bypassing Triton's cache: a process's
    first compile pays about 0.5 s of one-time set-up (LLVM and MLIR initialization, the
    ``ptxas`` version query, loading the backend's libraries) that later compiles do not
    (measured on the H200: 0.93 s for the first kernel, 0.10 s for the next one). Done here,
    before the compile workers are forked, every worker inherits it instead of paying it on
    the critical path of the graph's compile. ``target``: a ``GPUTarget``, default the current
    device's."""
    import triton
    from triton.compiler import ASTSource
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    fn = JITFunction(_warmup_kernel)  # not triton.jit: that gives an interpreted function under TRITON_INTERPRET
    with triton.knobs.compilation.scope():
        triton.knobs.compilation.always_compile = True  # a cache hit would skip the set-up
        triton.compile(
            ASTSource(fn, {"x_ptr": "*fp32"}, {}),
            target=target if target is not None else driver.active.get_current_target(),
        )


def wait_warmup() -> None:
    """Join the ``start_warmup`` threads, if any run (the time waited is added to
    ``metrics.warmup_wait_seconds``)."""
    alive = [t for t in _WARMUP if t.is_alive()]
    if not alive:
        return
    t0 = time.perf_counter()
    for t in alive:
        t.join()
    from .. import metrics

    metrics.warmup_wait_seconds += time.perf_counter() - t0


def _fork_tree(count: int) -> None:
    """In the first forked worker: fork until ``count`` workers exist, as a doubling tree (each
    process hands half of its remaining count to a child), so no process forks more than about
    log2(count) times: forking copies the page tables of a large (torch + CUDA) process, about
    15 ms each, which one parent forking every worker paid one after another. A fork that fails
    leaves fewer workers; the jobs still all run (the task pipe hands them to whoever is free)."""
    while count > 1:
        half = count // 2
        try:
            pid = os.fork()
        except OSError:
            return
        if pid == 0:
            count = half
        else:
            count -= half


def _forked_worker(task_r: int, res_w: int) -> None:
    """A forked compile worker's loop: take job indices from ``task_r`` until it is empty, run
    each, report ``index<TAB>seconds<TAB>error`` lines on ``res_w`` (one write per line, under
    PIPE_BUF, so lines of workers sharing the pipe never interleave)."""
    while True:
        b = os.read(task_r, 4)  # a 4-byte read of a pipe is atomic
        if len(b) < 4:
            return
        t0 = time.perf_counter()
        i, err = _run_forked_job(int.from_bytes(b, "little"))
        msg = "" if err is None else err.replace("\n", " ")[:2000]
        os.write(res_w, f"{i}\t{time.perf_counter() - t0:.4f}\t{msg}\n".encode())


def compile_in_forked_workers(
    jobs: Sequence[Callable[[], Any]],
    workers: int,
    timeout: float = FORKED_COMPILE_TIMEOUT_S,
    on_result: Callable[[int, str | None], None] | None = None,
    labels: Sequence[str] | None = None,
) -> dict[int, str]:
    """Run the compile ``jobs`` (callables without arguments) in ``workers`` forked processes,
    for their side effect on Triton's on-disk cache, and wait for them: ``ForkedBatch(jobs,
    workers, labels)`` started and collected at once. Returns ``{job index: error}`` for the jobs
    that raised; ``on_result(index, error or None)``, when given, is called in this process as
    each job's report arrives. When no worker can be started, or none reports for ``timeout``
    seconds, the remaining jobs are simply not run here (the caller compiles whatever is left
    itself)."""
    batch = ForkedBatch(jobs, workers, labels)
    batch.start()
    return batch.collect(timeout, on_result)


class ForkedBatch:
    """Compile jobs (callables without arguments) run in forked worker processes, started by
    ``start`` and collected by ``collect``, with anything in between: this process goes on (it
    lowers the next graph) while the workers compile. ``costs`` (estimated, any unit): the workers
    take the costliest jobs first. The workers inherit the jobs; nothing is
    pickled. ``start`` forks one worker, in a process group of its own, which forks the others
    (``_fork_tree``); job indices go to the workers through one pipe (each takes the next index
    when it is free) and every worker reports ``index<TAB>seconds<TAB>error`` lines on one shared
    pipe, which holds 64 KiB, so the workers never wait for ``collect`` unless many jobs fail
    with long messages. Plain ``os.fork`` and pipes, not a ``multiprocessing.Pool``: its helper
    threads and shutdown cost up to half a second per graph. Each job's time in its worker goes
    to ``metrics.precompile_job_seconds``, with its entry of ``labels`` (default "?") to
    ``metrics.precompile_job_labels``. A batch started and never collected is stopped at exit
    (its workers killed, so no compile outlives this process)."""

    def __init__(
        self,
        jobs: Sequence[Callable[[], Any]],
        workers: int,
        labels: Sequence[str] | None = None,
        costs: Sequence[float] | None = None,
    ):
        self.jobs = list(jobs)
        self.workers = workers
        self.labels = labels
        # the order the workers take the jobs in: the most costly first (longest processing time
        # first: a long job started last would end the batch alone), else as given
        n = len(self.jobs)
        self.order = sorted(range(n), key=lambda i: -costs[i]) if costs is not None else list(range(n))
        self.root = 0  # the first worker's pid (and process group), once started
        self.res_r = -1
        self.failed: dict[int, str] = {}
        self.reported = 0
        self.collected = False
        self.owner = 0
        self.started_at = 0.0

    def start(self) -> None:
        """Fork the workers and hand them every job; returns at once. A fork or pipe that fails
        leaves the batch without workers: ``collect`` then returns at once, every job unrun."""
        global _FORKED_JOBS
        n = len(self.jobs)
        if n == 0:
            return
        task_r = task_w = res_r = res_w = -1
        try:
            task_r, task_w = os.pipe()
            # every index queued up front (4 bytes each; a pipe holds 64 KiB), then end-of-tasks
            os.write(task_w, b"".join(i.to_bytes(4, "little") for i in self.order))
            os.close(task_w)
            task_w = -1
            res_r, res_w = os.pipe()
            _FORKED_JOBS = self.jobs
            with warnings.catch_warnings():
                # Python >= 3.12 warns that forking a multi-threaded process may deadlock the child;
                # the workers only run Triton's compiler (Python, MLIR/LLVM, ptxas), never CUDA
                warnings.filterwarnings("ignore", message=r".*fork\(\)", category=DeprecationWarning)
                pid = os.fork()
                if pid == 0:  # the first worker
                    code = 0
                    try:
                        # no garbage collection in the workers (inherited by the ones forked next):
                        # a worker lives for a few compiles and then exits without cleanup, and a
                        # collection there would walk every object inherited from this process (a
                        # torch + Dynamo heap), writing to each and so copying its page: about 0.1 s
                        # of a job's compile measured on the development machine, more per worker
                        # with a larger heap
                        gc.disable()
                        os.setpgid(0, 0)
                        os.close(res_r)
                        _fork_tree(min(self.workers, n))
                        _forked_worker(task_r, res_w)
                    except BaseException:  # noqa: BLE001 - the parent compiles what is left
                        code = 1
                    finally:
                        os._exit(code)
            self.root, self.owner, self.started_at = pid, os.getpid(), time.perf_counter()
            try:
                os.setpgid(pid, pid)  # also here: the group exists whichever process runs first
            except OSError:
                pass
            self.res_r, res_r = res_r, -1
            _STARTED_BATCHES.add(self)
        except OSError as e:  # no fork / pipe: the caller compiles everything
            log.debug(
                "tilefuse: forked compile workers failed (%s: %s); compiling in this process", type(e).__name__, e
            )
        finally:
            _FORKED_JOBS = None  # the workers have their copies
            for fd in (task_r, task_w, res_r, res_w):
                if fd >= 0:
                    os.close(fd)

    def collect(
        self, timeout: float = FORKED_COMPILE_TIMEOUT_S, on_result: Callable[[int, str | None], None] | None = None
    ) -> dict[int, str]:
        """Wait for the workers' reports (``on_result(index, error or None)`` called for each as
        it arrives), then reap the workers; returns ``{job index: error}`` for the jobs that
        raised. When none reports for ``timeout`` seconds, every worker is killed and the jobs not
        reported are left to the caller. Only the first call waits; later calls return the same.
        In a process forked from the starter, returns at once without reading the reports."""
        import select

        from .. import metrics

        if self.collected:
            return self.failed
        if self.owner and self.owner != os.getpid():
            # a process forked from the one that started the batch (a data loader's worker, say):
            # the reports are the starter's to read; here every job counts as unreported
            return self.failed
        self.collected = True
        n = len(self.jobs)
        try:
            buf = b""
            while self.res_r >= 0 and self.reported < n:
                ready, _, _ = select.select([self.res_r], [], [], timeout)
                if not ready:
                    log.debug(
                        "tilefuse: forked compile workers gave no result for %.0f s; compiling the rest "
                        "in this process",
                        timeout,
                    )
                    break
                chunk = os.read(self.res_r, 65536)
                if not chunk:  # every worker has exited
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    i, secs, err = ln.decode(errors="replace").split("\t", 2)
                    metrics.precompile_job_seconds.append(float(secs))
                    metrics.precompile_job_labels.append(self.labels[int(i)] if self.labels is not None else "?")
                    self.reported += 1
                    if self.reported == n:
                        metrics.precompile_batch_seconds.append(time.perf_counter() - self.started_at)
                    if err:
                        self.failed[int(i)] = err
                    if on_result is not None:
                        on_result(int(i), err or None)
        except OSError as e:
            log.debug("tilefuse: reading the forked compile workers' reports failed (%s: %s)", type(e).__name__, e)
        finally:
            self._stop()
        return self.failed

    def _stop(self) -> None:
        """Close the report pipe; kill the workers if any job is unreported; reap them."""
        import signal

        _STARTED_BATCHES.discard(self)
        if self.res_r >= 0:
            os.close(self.res_r)
            self.res_r = -1
        root, self.root = self.root, 0
        if not root:
            return
        if self.reported < len(self.jobs):  # a timeout, an error, or exit: stop every worker still compiling
            try:
                os.killpg(root, signal.SIGKILL)
            except OSError:
                pass
        # the others are reaped by init when their parents exit; in a process that adopts
        # orphans (PID 1 of a container, a subreaper) they are its children: reaped here
        for target in (root, -root):
            try:
                while True:
                    os.waitpid(target, 0)
                    if target > 0:
                        break
            except ChildProcessError:
                pass


# batches started and not yet collected: stopped at exit
_STARTED_BATCHES: set = set()


@atexit.register
def _stop_started_batches() -> None:
    for batch in list(_STARTED_BATCHES):
        if batch.owner == os.getpid():  # not in a process forked from the one that started it
            batch._stop()


class ForkedCompileExecutor(concurrent.futures.Executor):
    """The executor ``precompile`` gives Triton's ``AsyncCompileMode`` for process-parallel
    compiles: ``submit`` only collects the compile jobs (with the label and estimated cost
    ``KernelLauncher.warmup`` set for each); ``start_jobs`` starts compiling them all in forked
    workers (a ``ForkedBatch``, costliest first) and returns; ``finish_jobs`` waits for the workers and
    runs each job in this process, where it finds its binary in Triton's on-disk cache, resolving
    its future with the result (or with the error a worker reported, without compiling again).
    ``run_jobs`` does both."""

    def __init__(self, workers: int):
        self.workers = workers
        self.jobs: list[tuple[Callable[[], Any], concurrent.futures.Future]] = []
        self.labels: list[str] = []
        self.costs: list[float] = []
        self._started: tuple[list, ForkedBatch | None, list[str]] | None = None
        # (label, error) of every finished job that failed to compile, in finishing order
        self.failures: list[tuple[str, str]] = []

    def submit(self, fn, /, *args, **kwargs):  # noqa: D102 - Executor API
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.append((functools.partial(fn, *args, **kwargs), fut))
        self.labels.append(_JOB_LABEL)
        self.costs.append(_JOB_COST)
        return fut

    def run_jobs(self) -> None:
        """Compile every collected job (in parallel) and resolve every future."""
        self.start_jobs()
        self.finish_jobs()

    def start_jobs(self) -> None:
        """Start compiling the jobs submitted so far in forked workers (a single job is left to
        ``finish_jobs``, which runs it here)."""
        jobs, self.jobs = self.jobs, []
        labels, self.labels = self.labels, []
        costs, self.costs = self.costs, []
        batch = None
        if len(jobs) > 1:
            batch = ForkedBatch([j for j, _ in jobs], self.workers, labels, costs)
            batch.start()
        self._started = (jobs, batch, labels)

    def finish_jobs(self) -> None:
        """Resolve the future of every job ``start_jobs`` started: each as soon as its worker
        reports it, while the others still compile; any job no worker reported is then run in
        this process."""
        from .. import metrics

        if self._started is None:
            return
        (jobs, batch, labels), self._started = self._started, None

        def resolve(i: int, err: str | None) -> None:
            job, fut = jobs[i]
            if fut.done():
                return
            if err is not None:
                fut.set_exception(RuntimeError(f"compiling in a worker failed: {err}"))
                self.failures.append((labels[i], err))
                return
            t0 = time.perf_counter()
            try:
                fut.set_result(job())
            except BaseException as e:  # noqa: BLE001 - handed to the JIT through the future
                fut.set_exception(e)
                self.failures.append((labels[i], f"{type(e).__name__}: {e}"))
            metrics.precompile_load_seconds += time.perf_counter() - t0

        if batch is not None:
            batch.collect(on_result=resolve)
        for i in range(len(jobs)):
            resolve(i, None)


class PendingPrecompile:
    """Kernels of one module being compiled ahead by forked workers (``start_precompile``) while
    this process goes on; ``wait`` finishes it. ``seconds`` is the wall time this process spent
    on it (submitting the jobs and forking, then waiting and loading the binaries), not the time
    the workers ran alongside other work."""

    def __init__(
        self, seconds: float = 0.0, executor: ForkedCompileExecutor | None = None, context: Any = None, mode: Any = None
    ):
        self.seconds = seconds
        self._executor, self._context, self._mode = executor, context, mode
        # (job label "<kernel> <config>", error) of the compiles that failed, once waited for
        self.failures: list[tuple[str, str]] = []

    @property
    def done(self) -> bool:
        return self._executor is None

    def wait(self) -> float:
        """Wait for the workers and file every binary in the JIT's kernel cache, as Triton's
        ``AsyncCompileMode`` does when its block ends; returns the seconds this call took (0 if
        already done). Never raises for a kernel that failed to compile: that kernel compiles again
        at its first launch, which reports the error."""
        executor, self._executor = self._executor, None
        _PENDING.pop(self, None)
        if executor is None:
            return 0.0
        t0 = time.perf_counter()
        try:
            _preload_static_launcher()  # while the workers compile
            executor.finish_jobs()
            # the AsyncCompileMode's exit, in the context it was entered in: each compiled kernel
            # filed in its JITFunction's cache (its failures ignored)
            self._context.run(self._mode.__exit__, None, None, None)
        finally:
            executor.shutdown()
            self.failures = list(executor.failures)
        took = time.perf_counter() - t0
        self.seconds += took
        return took


def _preload_static_launcher() -> None:
    """Import torch's static CUDA launcher (``_direct_entry``'s), when this torch has one, while
    forked workers compile: the import loads Inductor's ``triton_helpers`` (some forty
    ``triton.jit`` functions), 0.18 s of a dynamic softmax's 0.21 s autotuning phase on the H200
    host when the first timed config imported it (twenty-eighth session), with the main thread
    otherwise idle in ``finish_jobs``. Errors are left for ``_static_ok`` to meet."""
    import sys

    if "torch._inductor.runtime.static_triton_launcher" in sys.modules:
        return
    try:
        if _torch_has_static_launcher():
            import torch._inductor.runtime.static_triton_launcher  # noqa: F401
    except Exception:  # noqa: BLE001 - _static_ok decides, at the first launch
        log.debug("tilefuse: preloading torch's static CUDA launcher failed", exc_info=True)


# started and not yet waited for, in start order (``finish_pending``)
_PENDING: dict = {}


def finish_pending() -> float:
    """Wait for every ``PendingPrecompile`` not yet finished, oldest first; returns the seconds
    waited. Called before a compiled graph's first call, so no kernel launches (and no autotuning
    times its configs) while compile workers still occupy the CPU cores."""
    waited = 0.0
    while _PENDING:
        waited += next(iter(_PENDING)).wait()
    return waited


def precompile(launchers: Iterable[KernelLauncher], workers: int | None = None, pool: str | None = None) -> float:
    """Compile every CUDA kernel of ``launchers``, for every config it may launch with, before
    its first launch; returns the wall seconds spent. ``workers`` (default
    ``config.compile_workers``): 0 does nothing (Triton compiles at first launch), 1 compiles in
    this process one after another, more run that many compiles at once, in forked processes or
    threads as ``pool`` says (default ``config.compile_pool``: "process" or "thread"). Interpreted
    (CPU) kernels need no compiling and are skipped. Raises ValueError for an unknown ``pool``."""
    pending = start_precompile(launchers, workers, pool)
    pending.wait()
    return pending.seconds


def start_precompile(
    launchers: Iterable[KernelLauncher], workers: int | None = None, pool: str | None = None
) -> PendingPrecompile:
    """``precompile`` without the wait, where it can: with the process pool and more than one
    worker, the compile jobs are submitted and the workers forked, and the returned
    ``PendingPrecompile`` (also in ``finish_pending``'s list) is waited for later, so this process
    can lower and generate the next graph (a training step's backward) while its forward's kernels
    compile. Otherwise the compiles are done before this returns (a finished PendingPrecompile)."""
    import contextvars

    from .. import config

    wait_warmup()
    todo = [ln for ln in launchers if ln.cuda]
    if todo:
        use_stat_triton_key()  # (a no-op once the backend's warm-up put it in place)
    workers = config.compile_workers if workers is None else int(workers)
    pool = config.compile_pool if pool is None else pool
    if pool not in ("process", "thread"):
        raise ValueError(f"compile_pool must be 'process' or 'thread', not {pool!r}")
    if not todo or workers <= 0:
        return PendingPrecompile()
    t0 = time.perf_counter()
    if workers == 1:
        for ln in todo:
            ln.warmup()
        return PendingPrecompile(time.perf_counter() - t0)
    import triton

    if pool == "thread" or not hasattr(os, "fork"):
        executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="tilefuse-compile")
        try:
            with triton.AsyncCompileMode(executor, ignore_errors=True):
                for ln in todo:
                    ln.warmup()
        finally:
            executor.shutdown()
        return PendingPrecompile(time.perf_counter() - t0)
    forked = ForkedCompileExecutor(workers)
    mode = triton.AsyncCompileMode(forked, ignore_errors=True)
    # the mode is active only inside its own context: entered there, exited there by ``wait``,
    # so nothing compiled in this context meanwhile (the next graph's kernels) goes to it
    context = contextvars.copy_context()

    def submit() -> None:
        mode.__enter__()
        for ln in todo:
            ln.warmup()

    pending = PendingPrecompile(0.0, forked, context, mode)
    try:
        context.run(submit)
    finally:
        forked.start_jobs()  # whatever was submitted, so ``wait`` can resolve every future
        pending.seconds = time.perf_counter() - t0
        _PENDING[pending] = None
    return pending
