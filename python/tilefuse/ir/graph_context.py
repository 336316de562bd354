"""The graph being lowered (the IR's only link to GraphLowering), set by ``GraphLowering.run``."""

from __future__ import annotations

from typing import Any

import torch

from ..virtualized import get_scoped, scoped


def graph() -> Any:
    return get_scoped("graph", "IR built outside a GraphLowering")


def dtype_of(name: str) -> torch.dtype:
    """dtype of the buffer (or graph input) called ``name``."""
    return graph().get_dtype(name)


def config() -> Any:
    from .. import config as c

    return c


def set_graph(g: Any):
    """Make ``g`` the graph being lowered for the ``with`` block."""
    return scoped("graph", g)
