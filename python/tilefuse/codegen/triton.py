"""The Triton kernel generator's public names, gathered from the modules that implement them.

* ``triton_kernel``: ``TritonKernelCodegen`` (one kernel's source for a KernelGroup),
  ``GeneratedKernel``, ``KernelArgs``, ``kernel_name``;
* ``triton_indexing``, ``triton_memory``, ``triton_reductions``: the kernel's index expressions
  and masks, loads and stores, reductions and scans;
* ``triton_ops``: the op -> Triton source table (``MATH_OPS``), dtype names and conversions;
* ``heuristics``: launch configs, reduction form, tile grid order, eviction hints;
* ``cse``: the kernel's common-subexpression table.
"""

from __future__ import annotations

from .heuristics import alu_ops, next_pow2
from .triton_kernel import GeneratedKernel, KernelArgs, TritonKernelCodegen, kernel_name
from .triton_ops import TL_DTYPE, tl_dtype

__all__ = [
    "TL_DTYPE",
    "GeneratedKernel",
    "KernelArgs",
    "TritonKernelCodegen",
    "alu_ops",
    "kernel_name",
    "next_pow2",
    "tl_dtype",
]
