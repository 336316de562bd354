"""The graph being lowered (the IR's only link to GraphLowering), set by ``GraphLowering.run``."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch

_state = threading.local()


def graph() -> Any:
    g = getattr(_state, "graph", None)
    if g is None:
        raise RuntimeError("tilefuse internal error: IR built outside a GraphLowering")
    return g


def dtype_of(name: str) -> torch.dtype:
    """dtype of the buffer (or graph input) called ``name``."""
    return graph().get_dtype(name)


def config() -> Any:
    from .. import config as c

    return c


@contextlib.contextmanager
def set_graph(g: Any) -> Iterator[Any]:
    prev = getattr(_state, "graph", None)
    _state.graph = g
    try:
        yield g
    finally:
        _state.graph = prev
