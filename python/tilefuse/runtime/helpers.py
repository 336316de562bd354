"""What generated wrapper modules call at run time besides their kernels: views of buffers
(``reinterpret_tensor``), layout checks of aten results and graph inputs (``ensure_strides``), and
the per-call seeds of a graph's random ops (``random_seeds``).
"""

from __future__ import annotations

from typing import Any

# the per-call seeds of random ops: defined beside ``ir.RandomSeeds``, which lowering builds
from ..ir.random_seeds import random_seeds  # noqa: F401


def _reinterpret_py(t: Any, size: tuple, stride: tuple, offset: int) -> Any:
    return t.as_strided(size, stride, t.storage_offset() + offset)


def _reinterpret_fn() -> Any:
    try:  # torch's C++ view maker (what Inductor's wrappers call): about 2x faster than as_strided
        from torch._C._dynamo.guards import _reinterpret_tensor

        return _reinterpret_tensor
    except ImportError:  # pragma: no cover - older torch
        return _reinterpret_py


# reinterpret_tensor(t, size, stride, offset): a view of t's storage with size and stride, starting
# offset elements after t's own start (its storage offset included). Generated wrappers pass
# strided views of buffers (ReinterpretView) to kernels and aten calls with it.
reinterpret_tensor = _reinterpret_fn()


def ensure_strides(t: Any, size: tuple, stride: tuple) -> Any:
    """``t`` if its strides match ``stride`` on every dim that matters (size > 1, stride not 0:
    a stride-0 dim of the expected layout only ever reads index 0), else a copy of ``t`` with
    exactly ``size``/``stride``; where that layout broadcasts (stride 0), index 0 of the dim is
    copied and expanded back (a copy into overlapping memory is impossible). Used for the results
    of aten kernels and for graph inputs. Raises RuntimeError when the sizes differ."""
    if t is None:
        # an optional output the kernel did not produce (e.g. cuDNN attention's logsumexp when
        # no gradient is needed); nothing reads it
        return None
    if t.stride() == stride and t.shape == size:  # the common case, compared in C
        return t
    if tuple(t.shape) != tuple(size):
        raise RuntimeError(f"tilefuse: got a tensor of shape {tuple(t.shape)}, expected {tuple(size)}")
    if all(n <= 1 or want == 0 or got == want for n, got, want in zip(size, t.stride(), stride)):
        return t
    import torch

    src = t
    broadcast = [d for d, (n, want) in enumerate(zip(size, stride)) if want == 0 and n > 1]
    for d in broadcast:
        src = src.narrow(d, 0, 1)
    out = torch.empty_strided(tuple(src.shape), tuple(stride), dtype=t.dtype, device=t.device)
    out.copy_(src)
    return out.expand(tuple(size)) if broadcast else out
