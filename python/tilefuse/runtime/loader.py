"""Loading generated modules: write a graph's source under the cache directory, import it, and
turn its kernel functions into launchable Triton kernels.

Kernels of a CUDA graph are ``triton.jit`` functions; kernels of a CPU graph run through Triton's
interpreter (``InterpretedFunction``: each program instance executed with NumPy on CPU tensors),
whatever ``TRITON_INTERPRET`` says, so CPU and GPU graphs can live in one process. Generated
modules are written to the cache directory keyed by their source hash (Triton needs the kernels'
source file) and imported from there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from typing import Any, Callable, Sequence

from .cache import DebugDirError, cache_dir
from .warmup import wait_warmup


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
        write_debug_source(source, debug_dir, name_hint, constants)
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


def write_debug_source(
    source: str, debug_dir: str, name_hint: str = "graph", constants: dict | None = None, path: str | None = None
) -> str:
    """Write a generated module's ``source`` to ``<debug_dir>/<name_hint>_<source hash>.py``
    (``config.debug_dir``), or to ``path`` when given; returns the path. With ``constants`` (the
    module's injected globals) the copy carries them (``benchmark.embed_constants``), so
    ``python <copy>`` runs it. DebugDirError naming ``debug_dir`` when it cannot be written (a
    file of that name, no permission)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    if path is None:
        path = os.path.join(debug_dir, f"{name_hint}_{digest}.py")
    if constants is not None:
        from .benchmark import embed_constants

        source = embed_constants(source, constants)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(source)
    except OSError as e:
        raise DebugDirError(
            f"tilefuse: cannot write the generated module to debug_dir {str(debug_dir)!r} "
            f"({type(e).__name__}: {e}); give debug_dir (TILEFUSE_DEBUG_DIR) a writable "
            f"directory path, or unset it"
        ) from None
    return path
