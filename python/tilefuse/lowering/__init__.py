"""Lowerings: aten op -> IR (Inductor's ``lowering.py``), one module per op family.

``lowerings`` (``registry``) maps an aten OpOverload to a function taking the op's arguments —
tensors as ``TensorBox`` — and returning a TensorBox (or a tuple). An op with no entry runs as a
FallbackKernel (``graph.py``). A lowering raises NotImplementedError for a case it does not
handle, and the op then runs as a FallbackKernel; it raises ValueError/IndexError for arguments
torch would reject. Type promotion follows torch's ``elementwise_dtypes``; half-precision floats
compute in float32 (``ir.dtypes.accumulator_dtype``), as eager does.

Modules: ``registry`` (the table, ``EXTERN_OPS``, ``KERNEL_DTYPES``, promotion kinds),
``common`` (``make_pointwise``, ``make_reduction``, broadcasting, fills, index helpers),
``pointwise``, ``creation``, ``random``, ``views``, ``reductions`` (sum/prod/max/min over dims,
mean/var/std, norms, layer norm), ``softmax`` (softmax, log_softmax, logsumexp), ``scans``,
``indexing`` (gathers, cat, pad, slice/diagonal/select scatter), ``strided`` (as_strided),
``scatter`` (scatter, index_put, index_add), ``extern`` (mm/addmm and the matmul padding),
``pooling`` (pooling, nll_loss) and ``upsample`` (nearest upsampling with eager's per-device rule).
Importing this package imports every family, so every lowering is registered.
"""

from __future__ import annotations

from . import (  # noqa: F401  (imported for their registrations)
    pointwise,
    creation,
    random,
    views,
    reductions,
    softmax,
    extern,
    indexing,
    strided,
    scatter,
    pooling,
    scans,
    upsample,
)
from .common import broadcast_shapes, make_pointwise, make_reduction, to_dtype_value
from .registry import EXTERN_OPS, KERNEL_DTYPES, is_tensor, lowerings, register_lowering
from .softmax import max_and_sumexp_pair

__all__ = [
    "EXTERN_OPS",
    "KERNEL_DTYPES",
    "broadcast_shapes",
    "is_tensor",
    "lowerings",
    "make_pointwise",
    "make_reduction",
    "max_and_sumexp_pair",
    "register_lowering",
    "to_dtype_value",
]
