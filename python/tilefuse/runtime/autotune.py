"""Autotuning's timing of candidate configs, and codegen's config dicts as ``triton.Config``.

On the GPU a kernel with several candidate configs (``KernelLauncher``) is autotuned at its first
launch by Triton's own autotuner, ``triton.autotune(configs, key=[])``: shapes are static, so one
tuning per kernel (Triton adds the argument dtypes to the key). Triton's autotuner is used rather
than a launcher of our own timing configs with ``triton.testing.do_bench`` because it already does
all of it and is maintained with the compiler: a config that fails to compile or to launch
(``OutOfResources`` such as too much shared memory, ``PTXASError``,
``CompileTimeAssertionFailure``) is timed as infinite and skipped, mutated arguments are restored
(``restore_value``), and the timings are cached on disk (in Triton's cache directory, keyed by the
kernel's source hash ``JITFunction.cache_key``, the backend, the argument dtypes and the list of
configs), so another process running the same graph does not benchmark again. Timing
(``_time_config``) uses ``triton.testing.do_bench`` with short warm-up and repetition windows
(``config.AUTOTUNE_WARMUP_MS``, ``config.AUTOTUNE_REP_MS``) instead of Triton's default 25 + 100 ms
per config.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

log = logging.getLogger("tilefuse")


def _triton_config(cfg: dict[str, int]) -> Any:
    """A ``triton.Config`` from a codegen config dict (block constexprs + num_warps/num_stages),
    with Triton's compile option ``enable_fp_fusion`` set from ``config.fp_fusion``."""
    import triton

    from .. import config

    meta = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages")}
    meta["enable_fp_fusion"] = bool(config.fp_fusion)
    extra = {"num_stages": cfg["num_stages"]} if "num_stages" in cfg else {}
    return triton.Config(meta, num_warps=cfg.get("num_warps", 4), **extra)


def _time_config(kernel_call: Callable[[], Any], quantiles: Sequence[float]) -> Any:
    """Triton's autotuner's timing function: ``triton.testing.do_bench`` with short windows
    (``config.AUTOTUNE_WARMUP_MS``, ``config.AUTOTUNE_REP_MS``, read at each call). A
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

    from .. import config, metrics

    t0 = time.perf_counter()
    t1 = None
    try:
        kernel_call()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return triton.testing.do_bench(
            kernel_call, warmup=config.AUTOTUNE_WARMUP_MS, rep=config.AUTOTUNE_REP_MS, quantiles=quantiles
        )
    except (CompilationError, OutOfResources, PTXASError) as e:
        log.debug("tilefuse: autotuning skips a config: %s: %s", type(e).__name__, e)
        return [float("inf")] * len(quantiles)
    finally:
        t2 = time.perf_counter()
        first = (t1 if t1 is not None else t2) - t0
        metrics.autotune_config_seconds.append((first, t2 - t0 - first))
