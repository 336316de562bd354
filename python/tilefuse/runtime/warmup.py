"""Triton's one-time set-up, started early in background threads (``start_warmup``).

A process's first kernel compile otherwise pays for Triton's driver helper module (built with
``gcc`` on first use), Triton's cache key of its own install and its compiler's initialization;
started at ``torch.compile``'s backend lookup, the threads overlap Dynamo's and AOTAutograd's
tracing. ``wait_warmup`` joins them before this process uses Triton's driver itself and before
compile workers are forked (which then inherit the key and the initialized compiler).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any, Callable

from .. import config
from .fingerprint import use_stat_triton_key

log = logging.getLogger("tilefuse")


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

    The parts take comparable times, so two threads take about the longer part instead of the
    sum.

    When the graph cache expects hits (``graph_cache.expects_hits``: an earlier process with this
    tilefuse code stored kernel launch records in this cache directory), the compiler part is held
    back: a hit loads its kernels' cubins without Triton's compiler, and the compiler thread,
    which holds the GIL through most of its native work, would only slow Dynamo's tracing (a
    warm-cache first call is slower with it than without any warm-up). The first graph that
    misses starts it
    (``start_deferred_warmup``, called before lowering), so it overlaps that graph's lowering.

    ``wait_warmup`` joins the threads before this process uses Triton's driver itself and
    before compile workers are forked (which then inherit the key and the initialized
    compiler). Called when Dynamo's backend lookup imports
    ``tilefuse.backend`` (at ``torch.compile``, so the threads overlap Dynamo's tracing too) and
    again at backend entry (a no-op once started); only after Dynamo (which imports Triton) is
    loaded. The Triton modules the threads use are imported here, in the calling thread,
    first: a background thread importing a package while the main thread imports another that
    needs it can hand the main thread a half-initialized module (as when the threads start at
    ``import tilefuse.backend``, before Dynamo is imported). Does nothing after the
    first call, without CUDA, under the interpreter, or when ``config.warmup`` is False; on ROCm
    one thread does both parts."""
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


class _SwitchIntervalLowered:
    """Lower the interpreter's thread switch interval (``sys.setswitchinterval``) to
    ``config.WARMUP_SWITCH_INTERVAL_S`` while the warm-up threads run, and put it back when the last of
    ``count`` wrapped functions returns.

    Why: most of the warm-up is I/O and hashing that give the GIL up (``triton_key`` reads
    ``libtriton.so``, about 400 MB, in 1 MiB chunks and hashes each, and reads ~100 source
    files; the driver waits on ``gcc``), and each time such a call returns, the thread waits for
    the GIL, which a main thread busy tracing (Dynamo, AOTAutograd) hands over only when the
    switch interval (default 5 ms) runs out: about 800 waits, which make ``triton_key`` over ten
    times slower against a busy main thread than against an idle one. At a 0.2 ms interval it
    takes about twice its idle time, and the main thread's own work does not slow measurably.
    The interval is restored only if nobody changed it meanwhile."""

    def __init__(self, count: int):
        self.left = count
        self.lock = threading.Lock()
        self.old = sys.getswitchinterval()
        self.interval = config.WARMUP_SWITCH_INTERVAL_S
        self.lowered = self.old > self.interval
        if self.lowered:
            sys.setswitchinterval(self.interval)

    def wrap(self, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            finally:
                with self.lock:
                    self.left -= 1
                    last = self.left == 0
                # getswitchinterval returns the value rounded to microseconds
                if last and self.lowered and abs(sys.getswitchinterval() - self.interval) < 1e-6:
                    sys.setswitchinterval(self.old)

        return run


def _warmup_kernel(x_ptr):  # noqa: ARG001 - compiled, never launched
    """An empty kernel: ``_warm_compiler`` compiles it once per process."""


def _warm_compiler(target: Any = None) -> None:
    """Compile an empty kernel for the current device, bypassing Triton's cache: a process's
    first compile pays about 0.5 s of one-time set-up (LLVM and MLIR initialization, the
    ``ptxas`` version query, loading the backend's libraries) that later compiles do not. Done here,
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
