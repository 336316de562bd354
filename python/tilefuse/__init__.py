"""tilefuse: a ``torch.compile`` backend with a native (Rust) symbolic-indexing core.

tilefuse takes the FX graphs TorchDynamo captures, lowers them to a loop-level IR, fuses and
tiles that IR into as few kernels as possible and emits Triton kernels plus a Python wrapper,
as PyTorch Inductor's GPU path does. Every piece of integer index algebra (FloorDiv /
ModularIndexing rewriting, range-aware simplification, iteration-range splitting, CSE keys) runs
in the native extension ``tilefuse._native``; ``tilefuse.symbolic`` is its Python face.

Usage::

    import torch
    model = torch.compile(model, backend="tilefuse")

Seeing what it did (``TORCH_LOGS=output_code``, ``TORCH_COMPILE_DEBUG=1``, ``TORCH_TRACE``,
``tilefuse.utils.run_and_get_code``, runnable generated modules, the kernel report
``python -m tilefuse.report``) and carrying its caches to another machine
(``save_cache_artifacts`` / ``load_cache_artifacts`` below): docs/debugging.md.

Importing ``tilefuse`` is cheap: it imports neither torch nor the native extension (unless
``TILEFUSE_REPORT`` is set: then it starts the kernel report, ``tilefuse.report``). It reads the
``TILEFUSE_*`` environment variables (``tilefuse.config``), so one that does not parse is a
ValueError naming it at the import rather than at the first compile. Other submodules
(``tilefuse.symbolic``, ...) load on first attribute access, e.g. ``tilefuse.symbolic.sym``.
"""

from __future__ import annotations

import importlib as _importlib

from . import config  # noqa: E402,F401  (the environment checked at import; imports only os)

__version__ = "0.1.0"

if config.report_path:
    # TILEFUSE_REPORT=<page.html>: the kernel report collects for the whole process (this imports
    # torch now) and writes the page at exit
    from .report import _collect_until_exit

    _collect_until_exit(config.report_path)


__all__ = ["__version__", "load_cache_artifacts", "save_cache_artifacts"]


def save_cache_artifacts():
    """``torch.compiler.save_cache_artifacts()``, tilefuse's graph cache entries included:
    ``(bytes, CacheInfo)`` of everything this process's compiles cached, or None
    (``tilefuse.runtime.cache_artifacts``; docs/debugging.md)."""
    from .runtime import cache_artifacts

    return cache_artifacts.save_cache_artifacts()


def load_cache_artifacts(data: bytes):
    """``torch.compiler.load_cache_artifacts(data)`` after teaching torch tilefuse's artifact type,
    so it works in a fresh process before any compile: the caches (tilefuse's cache directory
    included) filled from ``data``; returns torch's ``CacheInfo``, or None when ``data`` does not
    load. TypeError when ``data`` is not bytes (a file's path instead of its contents)."""
    from .runtime import cache_artifacts

    return cache_artifacts.load_cache_artifacts(data)


def __getattr__(name: str):
    """Import the submodule ``tilefuse.<name>`` on first access (PEP 562)."""
    if name.startswith("__"):
        raise AttributeError(name)
    qualified = f"{__name__}.{name}"
    try:
        module = _importlib.import_module(qualified)
    except ModuleNotFoundError as e:
        if e.name != qualified:
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = module
    return module
