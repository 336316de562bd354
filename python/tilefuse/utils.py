"""Helpers for looking at what tilefuse generated, as ``torch._inductor.utils``'s.

``run_and_get_code(fn, *args, **kwargs)`` -> ``(result, [sources])``: Dynamo's compiled frames
forgotten (``torch._dynamo.reset()``, so ``fn`` compiles again), ``fn`` called, and the generated
module of every graph compiled (or taken from tilefuse's graph cache) during the call returned
in order, wrapper and Triton kernels together. Inductor's own
``torch._inductor.utils.run_and_get_code`` returns the same sources for a function compiled with
``backend="tilefuse"`` (tilefuse hands each module to the hook it installs).
"""

from __future__ import annotations

from typing import Any, Callable

from . import logs


def run_and_get_code(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """Call ``fn(*args, **kwargs)`` after ``torch._dynamo.reset()`` and return ``(its result, the
    source of each module tilefuse generated meanwhile)``. A ``fn`` that compiles nothing with
    tilefuse (another backend, no ``torch.compile`` inside) gives an empty list. A graph with
    inputs that require grad (a model's parameters) has its backward compiled right after its
    forward (``config.eager_backward``, the default), so both sources come back, forward first,
    even when ``fn`` only runs the forward; with ``eager_backward`` off the backward compiles at
    its first backward call: call ``.backward()`` inside ``fn`` to get it too."""
    import torch

    with logs.capture_code() as sources:
        torch._dynamo.reset()
        result = fn(*args, **kwargs)
    return result, list(sources)
