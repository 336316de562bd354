"""Runtime: load generated modules, pick the Triton JIT for a device.

Kernels of a CUDA graph are ``triton.jit`` functions; kernels of a CPU graph run through Triton's
interpreter (``InterpretedFunction``: each program instance executed with NumPy on CPU tensors),
whatever ``TRITON_INTERPRET`` says, so CPU and GPU graphs can live in one process.
Generated modules are written to a cache directory keyed by their source hash (Triton needs the
kernels' source file) and imported from there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from typing import Any, Callable

_CACHE_DIR = os.environ.get("TILEFUSE_CACHE_DIR") or os.path.join(tempfile.gettempdir(), f"tilefuse_{os.getuid()}")


def jit_for(device_type: str) -> Callable[[Callable], Any]:
    """The decorator that turns generated kernel functions into launchable Triton kernels."""
    if device_type == "cuda":
        import triton

        return triton.jit
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "tilefuse runs kernels on CPU tensors through Triton's interpreter, which must be enabled "
            "before triton is imported: set TRITON_INTERPRET=1 in the environment before importing "
            "torch (e.g. `TRITON_INTERPRET=1 python your_script.py`)")
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

                b = I.interpreter_builder
                old = b.options
                # debug also turns on the interpreter's integer-overflow sanitizer; torch's integer
                # arithmetic wraps, so that stays off
                b.options = dataclasses.replace(old, debug=True, sanitize_overflow=False)
                try:
                    return super().run(*args, **kwargs)
                finally:
                    b.options = old

        _checked_cls = Checked
    return _checked_cls(fn)


def load_module(source: str, constants: dict[str, Any], debug_dir: str | None = None, name_hint: str = "graph"):
    """Write ``source`` under the cache dir (and ``debug_dir`` when given), import it, inject
    ``constants`` as module globals, and return the module."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    os.makedirs(_CACHE_DIR, exist_ok=True)
    path = os.path.join(_CACHE_DIR, f"tf_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    if debug_dir:
        os.makedirs(debug_dir, exist_ok=True)
        with open(os.path.join(debug_dir, f"{name_hint}_{digest}.py"), "w") as f:
            f.write(source)
    modname = f"tilefuse_generated_{digest}"
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__.update(constants)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    mod.__dict__.update(constants)
    return mod


def ensure_strides(t: Any, size: tuple, stride: tuple) -> Any:
    """``t`` if its strides match ``stride`` on every dim that matters (size > 1, stride not 0:
    a stride-0 dim of the expected layout only ever reads index 0), else a copy of ``t`` with
    exactly ``size``/``stride``. Raises RuntimeError when the sizes differ or when the expected
    layout broadcasts (stride 0) and cannot be materialized by a copy."""
    if t is None:
        # an optional output the kernel did not produce (e.g. cuDNN attention's logsumexp when
        # no gradient is needed); nothing reads it
        return None
    if tuple(t.shape) != tuple(size):
        raise RuntimeError(f"tilefuse: an aten kernel returned shape {tuple(t.shape)}, expected {tuple(size)}")
    if all(n <= 1 or want == 0 or got == want for n, got, want in zip(size, t.stride(), stride)):
        return t
    if any(want == 0 and n > 1 for n, want in zip(size, stride)):
        raise RuntimeError(f"tilefuse: an aten kernel returned strides {t.stride()}, expected {tuple(stride)}")
    import torch

    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out
