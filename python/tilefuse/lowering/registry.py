"""The lowering registry: ``lowerings`` maps an aten OpOverload to the function that lowers it.

A lowering takes the op's arguments (tensors as ``TensorBox``, other arguments as they are in the
FX node) and returns a TensorBox or a tuple of them. An op with no entry runs as a FallbackKernel
(``graph.py``); an op in ``EXTERN_OPS`` runs as an extern kernel (cuBLAS, cuDNN, flash
attention). Type promotion follows torch's ``elementwise_dtypes`` through the stand-ins of
``_meta``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND

from .. import symbolic as S
from ..ir import nodes as ir
from ..sizevars import SymbolicFloat


lowerings: dict[Any, Callable] = {}
# dtypes generated kernels hold; an op reading or producing any other (complex, float8, uint16, ...)
# runs as a FallbackKernel whatever its lowering
KERNEL_DTYPES = frozenset(
    {
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.float64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    }
)
EXTERN_OPS: set = set()  # aten ops run as extern kernels (counted as extern, not fallback)

DEFAULT = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
INT_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT
ALWAYS_BOOL = ELEMENTWISE_TYPE_PROMOTION_KIND.ALWAYS_BOOL
NO_OPMATH = ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH
BOOL_TO_LONG = ELEMENTWISE_TYPE_PROMOTION_KIND.BOOL_TO_LONG


def register_lowering(*targets):
    """Decorator: register ``fn`` for each aten op (an OpOverloadPacket registers all overloads)."""

    def deco(fn):
        for t in targets:
            if isinstance(t, torch._ops.OpOverloadPacket):
                for name in t.overloads():
                    lowerings[getattr(t, name)] = fn
            else:
                lowerings[t] = fn
        return fn

    return deco


def is_tensor(x) -> bool:
    """True for IR values (TensorBox and other IR nodes), False for Python scalars."""
    return isinstance(x, ir.IRNode)


_META_STANDINS: dict = {}


def _meta(x):
    """A stand-in for type promotion: a meta tensor of ``x``'s dtype, 0-d or 1-d as ``x`` is 0-d
    or not (torch's promotion depends on the dtype and on being 0-d only, so symbolic sizes need
    no value); a symbolic size used as a scalar is an int. The stand-ins are made once per
    (dtype, 0-d) outside any fake mode and shared: promotion only reads their dtype and rank, and
    creating one under the FakeTensorMode that lowering runs in costs about a millisecond, which
    would otherwise be paid by every promoted op."""
    if is_tensor(x):
        key = (x.get_dtype(), len(x.get_size()) == 0)
        t = _META_STANDINS.get(key)
        if t is None:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                t = torch.empty([] if key[1] else [1], dtype=key[0], device="meta")
            _META_STANDINS[key] = t
        return t
    if isinstance(x, S.Expr):
        return 1
    if isinstance(x, SymbolicFloat):
        return 1.0
    return x
