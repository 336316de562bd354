"""Runtime: load generated modules, launch their kernels (autotuned on the GPU), compile ahead.

This package's ``__init__`` only re-exports the names the backend, generated modules, tests and
benchmarks use; the code lives in one module per responsibility:

- ``cache``: tilefuse's cache directory (``cache_dir``, ``make_cache_dir``), checked at first use;
  ``user_stacklevel`` for warnings pointed at the user's code;
- ``loader``: writing and importing generated modules (``load_module``, ``write_debug_source``),
  ``jit_for`` (``triton.jit`` on CUDA, Triton's interpreter with live device asserts on the CPU);
- ``helpers``: what generated wrappers call besides kernels (``ensure_strides``,
  ``reinterpret_tensor``, ``random_seeds``);
- ``launcher``: ``KernelLauncher`` (launch grid, candidate configs, direct launches, the lean
  ``run`` of generated CUDA wrappers, launch records for the graph cache), ``make_launcher``,
  ``launch_stream``, ``unbuildable_kernels``;
- ``autotune``: the autotuner's timing of a config (``_time_config``) and ``triton.Config`` making;
- ``static_launcher``: launching binaries with torch's static CUDA launcher, and its records;
- ``compile_ahead``: compiling a module's kernels ahead (``precompile``, ``start_precompile``,
  ``PendingPrecompile``, ``finish_pending``);
- ``workers``: the forked compile workers behind it (``ForkedBatch``, ``ForkedCompileExecutor``);
- ``warmup``: Triton's one-time set-up in background threads (``start_warmup``, ``wait_warmup``);
- ``fingerprint``: Triton's install key from file metadata (``use_stat_triton_key``);
- ``cudagraphs``: compiled graphs under torch's CUDA graph trees (option ``cudagraphs``,
  ``mode="reduce-overhead"``): ``cudagraphify``, ``ForwardDevice``;
- ``graph_cache``: the graph-level compile cache (imported on use, not here).

The runtime's tunables (autotuning windows, the compile workers' timeout, the warm-up's switch
interval) are in ``tilefuse.config`` ("runtime" section). Tests that replace a module attribute
(``monkeypatch.setattr``) patch the module that reads it, not this package.
"""

from __future__ import annotations

from .cache import DebugDirError, cache_dir, make_cache_dir, user_stacklevel
from .fingerprint import triton_install_fingerprint, use_stat_triton_key
from .helpers import ensure_strides, random_seeds, reinterpret_tensor
from .launcher import KernelLauncher, launch_stream, make_launcher, unbuildable_kernels
from .loader import jit_for, load_module, write_debug_source
from .compile_ahead import PENDING_PRECOMPILES, PendingPrecompile, finish_pending, precompile, start_precompile
from .cudagraphs import ForwardDevice
from .warmup import start_deferred_warmup, start_warmup, wait_warmup
from .workers import ForkedBatch, ForkedCompileExecutor, compile_in_forked_workers

__all__ = [
    "PENDING_PRECOMPILES",
    "DebugDirError",
    "ForkedBatch",
    "ForkedCompileExecutor",
    "ForwardDevice",
    "KernelLauncher",
    "PendingPrecompile",
    "cache_dir",
    "compile_in_forked_workers",
    "ensure_strides",
    "finish_pending",
    "jit_for",
    "load_module",
    "make_cache_dir",
    "launch_stream",
    "make_launcher",
    "precompile",
    "random_seeds",
    "reinterpret_tensor",
    "start_deferred_warmup",
    "start_precompile",
    "start_warmup",
    "triton_install_fingerprint",
    "unbuildable_kernels",
    "use_stat_triton_key",
    "user_stacklevel",
    "wait_warmup",
    "write_debug_source",
]
