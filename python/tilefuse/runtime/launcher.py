"""Launching generated kernels: one ``KernelLauncher`` per kernel (``make_launcher``, what generated
modules call), holding its launch grid and candidate configs.

The grid is one ``(block constexpr, extent)`` per grid axis; the configs are the heuristic's
choice first. Under the interpreter, with ``config.autotune`` off, or with a single config every
launch uses ``configs[0]``. On the GPU with several configs the first launch goes through Triton's
own autotuner (``autotune``): the grid a function of the config's block sizes, ``restore_value``
naming the arguments the kernel updates in place (atomic adds into a buffer an earlier kernel
initialized), so timed runs leave them as they found them, and ``cache_results=True``. Later
launches call the compiled binary with the winning config directly (``KernelLauncher._launch``),
through torch's static CUDA launcher where it takes the binary (``static_launcher``).

Launch records. After a graph's first call, the graph cache stores each kernel's
``launch_record`` beside the graph's entry: the config in use (the autotuner's winner) and the
static launchers of the binaries launched. A later process that hits the entry on disk loads those
cubins directly (``KernelLauncher.restore``, what Inductor's FX graph cache does with its static
launchers): no compiling ahead, no autotuning, and no use of Triton's JIT, whose first use in a
process computes Triton's cache key (a hash of its install) and needs its driver, the warm-up's
work, which the hit then does not wait for.
"""

from __future__ import annotations

import functools
import logging
import operator
import time
from typing import Any, Callable, Iterable, Sequence

from .autotune import _time_config, _triton_config
from .static_launcher import _direct_entry, _hook_set, _load_record, _static_launch, _StaticLaunchJIT
from .warmup import wait_warmup

log = logging.getLogger("tilefuse")

# the kernel and config of the compile job being submitted, and its estimated cost (set by
# KernelLauncher.warmup, read by the compile workers' executor, ``workers.ForkedCompileExecutor``)
_JOB_LABEL = "?"
_JOB_COST = 0.0


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
    ``configs[0]``; otherwise the first launch is autotuned by Triton (see ``autotune``)
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
        # what generated CUDA wrappers call: ``run(stream, *args)`` (see ``_run_slow``)
        self.run: Callable[..., None] = self._run_slow
        self._lean_made = False  # whether _make_lean ran for the config in use
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
        self.run = self._run_slow  # a new config: the lean launch is made again for it
        self._lean_made = False
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

    def _run_slow(self, stream: int | None, *args: Any) -> None:
        """A launch from a generated CUDA wrapper, ``stream``: the raw CUDA stream its call fetched
        once (``launch_stream``), None while Triton's launch hooks are set. Goes through
        ``__call__`` (autotuning at the first launch, compiling a new specialization, hooks), then,
        when that launch went through torch's static launcher, replaces ``run`` with the lean
        launch of ``_make_lean``."""
        self(*args)
        if (
            not self._lean_made
            and stream is not None
            and self._direct
            and self._kwargs is not None
            and self._tail is not None
        ):
            self._make_lean(args)

    def _make_lean(self, args: tuple) -> None:
        """``run`` becomes a closure over what ``_launch`` looks up at each launch, for the steady
        state after the first launches (what Inductor's launchers precompute at load time): the
        binary's static launcher, the constexpr tail, the grid (a constant for static extents),
        the device of the launch just made (a generated module launches on its graph's device
        only: its call runs under that device's guard). Per launch it still checks what picks the
        binary: the pointers' 16-byte alignment, one OR over their addresses, and with integer
        arguments (symbolic sizes) their values, looked up in a dict of launch plans (binary and
        grid) made from ``_direct`` the first time each set of values comes. Whatever does not
        match (a misaligned pointer, a key ``_direct`` lacks, hooks set: a None stream) goes back
        through ``_run_slow``. Made once per config: when the launch just made does
        not suit it (Triton's own launcher, not the static one) every launch stays on
        ``__call__``."""
        import torch

        self._lean_made = True

        dev = torch._C._cuda_getDevice()
        data_ptr = torch.Tensor.data_ptr
        key = self._direct_key(args, dev, data_ptr)
        entry = self._direct.get(key)
        if entry is None or entry[1] is None:
            return
        slow = self._run_slow
        grid = tuple(self._grid) + (1,) * (3 - len(self._grid))
        g0, g1, g2 = grid
        if not self._int_pos and not self.dynamic_axes and key[1] is True and entry[2] is None:
            launch, function, nw, shared, tys, extra = entry[1]
            n = len(args)
            if self._ptr_pos != list(range(n)):
                return
            or_ = operator.or_
            reduce = functools.reduce

            if extra:

                def run(stream: int | None, *args: Any) -> None:
                    if stream is None or reduce(or_, map(data_ptr, args)) & 15:
                        return slow(stream, *args)
                    launch(function, g0, g1, g2, nw, shared, tys, (*args, *extra), stream)

            else:

                def run(stream: int | None, *args: Any) -> None:
                    if stream is None or reduce(or_, map(data_ptr, args)) & 15:
                        return slow(stream, *args)
                    launch(function, g0, g1, g2, nw, shared, tys, args, stream)

            self.run = run
            return
        direct, ptrs = self._direct, self._ptrs
        int_pos = tuple(self._int_pos)
        # symbolic extents: (grid axis, argument position, block size)
        cfg = self.best_config or {}
        axes = tuple(
            (a, p, int(cfg[b]))
            for a, ((b, n), p) in enumerate(zip(self.grid_axes, self._axis_pos))
            if isinstance(n, str) and b in cfg
        )
        if len(axes) != len(self.dynamic_axes):
            return
        or_, reduce = operator.or_, functools.reduce
        ints_of = operator.itemgetter(*int_pos) if int_pos else (lambda args: ())
        # the integer arguments' values -> everything their launch needs: the binary follows from
        # the key (aligned pointers, this device, the integers' properties), the grid from the
        # extents; sizes repeat from call to call, so one dict lookup per launch
        plans: dict = {}

        def plan(args: tuple) -> tuple | None:
            ints = tuple((v == 1, v % 16 == 0, -2147483648 <= v < 2147483648) for v in (args[i] for i in int_pos))
            e = direct.get((dev, True, ints))
            if e is None or e[1] is None:
                return None
            g = [g0, g1, g2]
            for a, p, blk in axes:
                n = args[p]
                g[a] = -(-n // blk) if n > 0 else 1
            launch, function, nw, shared, tys, extra = e[1]
            keep = e[2]
            if keep is None:
                pick = None
            elif len(keep) > 1:
                pick = operator.itemgetter(*keep)
            else:
                pick = lambda a, k=keep: tuple(a[i] for i in k)  # noqa: E731 - one or no argument kept
            if len(plans) >= 64:
                plans.clear()
            plans[ints_of(args)] = p = (launch, function, g[0], g[1], g[2], nw, shared, tys, pick, extra)
            return p

        def run(stream: int | None, *args: Any) -> None:
            # misaligned pointers (a key of their own) go the slow way
            if stream is None or reduce(or_, map(data_ptr, ptrs(args)), 0) & 15:
                return slow(stream, *args)
            p = plans.get(ints_of(args)) or plan(args)
            if p is None:
                return slow(stream, *args)
            launch, function, x, y, z, nw, shared, tys, pick, extra = p
            a = args if pick is None else pick(args)
            launch(function, x, y, z, nw, shared, tys, (*a, *extra) if extra else a, stream)

        self.run = run

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
        for i, a in enumerate(args):
            # a direct launch passes raw pointers: one into host memory would fault on the device
            # (Triton's own launch makes the same check on every call)
            if getattr(a, "is_cuda", True) is False:
                raise ValueError(
                    f"kernel {self.fn.__name__}: argument {i} is a {a.device} tensor; a CUDA kernel "
                    "reads only CUDA memory (an internal error: please report it with the graph)"
                )
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
            self.run = self._run_slow
            self._lean_made = False
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
        scalars per thread, so LLVM and ptxas work grows with it: the slowest compile jobs are the
        ones holding the most per thread (a looped reduction's 4096-element chunk at 4 warps holds
        32; most kernels hold 8 or fewer). Used only to order the compile jobs
        (``workers.ForkedBatch``)."""
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


_KNOBS_RUNTIME: Any = None


def launch_stream(device: int) -> int | None:
    """The raw current CUDA stream of ``device``, fetched once per call of a generated CUDA
    wrapper and passed to each ``KernelLauncher.run``; None while one of Triton's launch hooks is
    set (a profiler), so every launch of that call goes through Triton's launch, which calls the
    hooks."""
    global _KNOBS_RUNTIME
    rt = _KNOBS_RUNTIME
    if rt is None:
        import triton

        rt = _KNOBS_RUNTIME = triton.knobs.runtime
    if _hook_set(rt.launch_enter_hook) or _hook_set(rt.launch_exit_hook):
        return None
    import torch

    return torch._C._cuda_getCurrentRawStream(device)


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
