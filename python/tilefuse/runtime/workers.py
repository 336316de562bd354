"""Compile jobs run in forked worker processes, for their side effect on Triton's on-disk cache.

Triton's front end (Python AST to TTIR) and part of its pipeline hold the GIL, so compiling in
threads gains little; ``ForkedCompileExecutor``, the executor ``precompile`` hands to Triton's
``AsyncCompileMode``, runs the compile jobs in forked worker processes instead (a ``ForkedBatch``):
they inherit the jobs, nothing is pickled, and they never touch CUDA (each job compiles for an
explicit target). The workers write the binaries to Triton's on-disk cache; each job then runs
again in this process, where it is a cache hit that only loads the binary. A worker also builds
Triton's per-signature C launcher (``gcc``, about 0.3 s each) of a binary torch's static launcher
does not take (``_build_launcher``). A job a worker could not compile is reported as failed and
compiled again at the first launch, where its error surfaces (or the autotuner skips that config).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import gc
import logging
import os
import time
import warnings
from typing import Any, Callable, Sequence

from .. import config
from . import launcher as _launcher
from .static_launcher import _static_ok

log = logging.getLogger("tilefuse")

# the jobs of the batch being started, inherited by its forked workers (``ForkedBatch.start``)
_FORKED_JOBS: list[Callable[[], Any]] | None = None


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
    timeout: float | None = None,
    on_result: Callable[[int, str | None], None] | None = None,
    labels: Sequence[str] | None = None,
) -> dict[int, str]:
    """Run the compile ``jobs`` (callables without arguments) in ``workers`` forked processes,
    for their side effect on Triton's on-disk cache, and wait for them: ``ForkedBatch(jobs,
    workers, labels)`` started and collected at once. Returns ``{job index: error}`` for the jobs
    that raised; ``on_result(index, error or None)``, when given, is called in this process as
    each job's report arrives. When no worker can be started, or none reports for ``timeout``
    seconds (default ``config.FORKED_COMPILE_TIMEOUT_S``), the remaining jobs are simply not run
    here (the caller compiles whatever is left itself)."""
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
                        # torch + Dynamo heap), writing to each and so copying its page: a
                        # noticeable part of a job's compile, growing with the heap
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
        self, timeout: float | None = None, on_result: Callable[[int, str | None], None] | None = None
    ) -> dict[int, str]:
        """Wait for the workers' reports (``on_result(index, error or None)`` called for each as
        it arrives), then reap the workers; returns ``{job index: error}`` for the jobs that
        raised. When none reports for ``timeout`` seconds (default
        ``config.FORKED_COMPILE_TIMEOUT_S``), every worker is killed and the jobs not reported are
        left to the caller. Only the first call waits; later calls return the same. In a process
        forked from the starter, returns at once without reading the reports."""
        import select

        from .. import metrics

        if self.collected:
            return self.failed
        if self.owner and self.owner != os.getpid():
            # a process forked from the one that started the batch (a data loader's worker, say):
            # the reports are the starter's to read; here every job counts as unreported
            return self.failed
        self.collected = True
        if timeout is None:
            timeout = config.FORKED_COMPILE_TIMEOUT_S
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

    def submit(self, fn, /, *args, **kwargs):
        """Collect ``fn(*args, **kwargs)`` as a compile job, labelled with the job
        ``KernelLauncher.warmup`` is submitting; returns its future, resolved by ``finish_jobs``."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.append((functools.partial(fn, *args, **kwargs), fut))
        self.labels.append(_launcher._JOB_LABEL)
        self.costs.append(_launcher._JOB_COST)
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
