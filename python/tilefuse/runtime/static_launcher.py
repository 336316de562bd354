"""Launching compiled kernels with torch's static CUDA launcher (``StaticallyLaunchedCudaKernel``,
what Inductor launches with): C++ argument parsing, and no per-signature ``gcc`` launcher of
Triton's is ever built for a binary it takes.

``_direct_entry`` turns a compiled binary into the entry ``KernelLauncher._launch`` launches
(``_static_launch``); ``_StaticLaunchJIT`` lets Triton's autotuner launch through it too;
``_launcher_record`` / ``_load_record`` carry a static launcher to another process (the graph
cache's launch records), where its cubin is loaded without Triton's JIT. ``_static_ok`` says
which binaries the launcher takes (also asked by the forked compile workers, which build Triton's
launcher only for the others).
"""

from __future__ import annotations

import copy
import functools
import logging
import os
from typing import Any

from .cache import cache_dir

log = logging.getLogger("tilefuse")


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
    if path and not os.path.exists(path):
        # a record made under another cache directory (torch's portable cache artifacts bring
        # cubins into this one's cubin/ folder): the same file name here
        moved = os.path.join(cache_dir(), "cubin", os.path.basename(path))
        path = moved if os.path.exists(moved) else path
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
