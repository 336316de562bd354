"""Compiling ahead: every kernel of a loaded CUDA module, for every config it may launch with,
compiled before its first launch (``precompile``, ``start_precompile``; ``config.compile_workers``,
``config.compile_pool``).

Each kernel's ``JITFunction.warmup`` is called with ``MockTensor`` arguments of the kernel's
argument dtypes (``KernelLauncher.warmup``), which yields exactly the specialization (and so the
cache key) a launch with 16-byte-aligned tensors computes, inside Triton's ``AsyncCompileMode``,
which hands every compile job to an executor and files the results in the JIT's in-memory kernel
cache. The default executor runs the jobs in forked worker processes (``workers``).
``start_precompile`` (the backend's default, ``config.precompile_overlap``) returns once the
workers are forked; the compiled graph's first call waits for them (``finish_pending``), so the
next graph is lowered while they compile. A tensor argument that is not 16-byte aligned at launch
gives a different specialization, which Triton then compiles at that launch, as it would without
compiling ahead.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Iterable

from .fingerprint import use_stat_triton_key
from .static_launcher import _torch_has_static_launcher
from .warmup import wait_warmup
from .workers import ForkedCompileExecutor

if TYPE_CHECKING:
    from .launcher import KernelLauncher

log = logging.getLogger("tilefuse")


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
        """Whether nothing is left to wait for (``wait`` has run, or the compiles finished before
        this was made)."""
        return self._executor is None

    def wait(self) -> float:
        """Wait for the workers and file every binary in the JIT's kernel cache, as Triton's
        ``AsyncCompileMode`` does when its block ends; returns the seconds this call took (0 if
        already done). Never raises for a kernel that failed to compile: that kernel compiles again
        at its first launch, which reports the error."""
        executor, self._executor = self._executor, None
        PENDING_PRECOMPILES.pop(self, None)
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
    ``triton.jit`` functions), which otherwise lands in the first autotuning timing of a config
    (most of a small graph's autotuning phase), while here the main thread would otherwise sit
    idle in ``finish_jobs``. Errors are left for ``_static_ok`` to meet."""
    import sys

    if "torch._inductor.runtime.static_triton_launcher" in sys.modules:
        return
    try:
        if _torch_has_static_launcher():
            import torch._inductor.runtime.static_triton_launcher  # noqa: F401
    except Exception:  # noqa: BLE001 - _static_ok decides, at the first launch
        log.debug("tilefuse: preloading torch's static CUDA launcher failed", exc_info=True)


# the precompiles started and not yet waited for, in start order (``finish_pending``); the backend
# checks it before each call of a compiled graph. One dict for the process, never rebound.
PENDING_PRECOMPILES: dict = {}


def finish_pending() -> float:
    """Wait for every ``PendingPrecompile`` not yet finished, oldest first; returns the seconds
    waited. Called before a compiled graph's first call, so no kernel launches (and no autotuning
    times its configs) while compile workers still occupy the CPU cores."""
    waited = 0.0
    while PENDING_PRECOMPILES:
        waited += next(iter(PENDING_PRECOMPILES)).wait()
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
        PENDING_PRECOMPILES[pending] = None
    return pending
