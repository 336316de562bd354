"""The extern function an ``ir.RandomSeeds`` buffer runs.

Generated wrappers hold this function as a constant of their module (``_constants``, pickled by
reference for the graph cache), so it lives at a fixed module-level name below the lowerings.
"""

from __future__ import annotations

from typing import Any


def random_seeds(n: int, device: Any = "cpu") -> Any:
    """``n`` int64 seeds in ``[0, 2**62)`` from torch's default generator of ``device`` (so
    ``torch.manual_seed`` fixes them): the per-call seeds of a graph's random ops
    (``ir.RandomSeeds``). Returns a 1-D int64 tensor of length ``n`` on ``device``."""
    import torch

    return torch.randint(0, 2**62, (n,), dtype=torch.int64, device=device)
