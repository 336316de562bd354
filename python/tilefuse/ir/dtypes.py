"""dtype rules shared by the lowerings and the decompositions."""

from __future__ import annotations

import torch

# floats of 16 bits, which kernels compute in float32 (eager's "opmath" type for them): their
# sums and products would round at every step in their own precision
_HALF_PRECISION = (torch.float16, torch.bfloat16)


def is_half_precision(dtype: torch.dtype) -> bool:
    """True for float16 and bfloat16, the float dtypes computed in float32."""
    return dtype in _HALF_PRECISION


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value of ``dtype`` is computed and accumulated in: float32 for float16 and
    bfloat16 (eager's opmath, what its CPU and CUDA kernels accumulate in), ``dtype`` itself for
    every other dtype (float32/float64, integers, bool)."""
    return torch.float32 if dtype in _HALF_PRECISION else dtype
