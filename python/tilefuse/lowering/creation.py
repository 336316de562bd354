"""Factory lowerings: ``full``/``empty``/``zeros``/``ones`` (and their ``_like`` forms),
``scalar_tensor``, ``iota`` and ``arange``, each a Pointwise of constants or index expressions.
"""

from __future__ import annotations

import math

import torch

from .. import symbolic as S
from ..ir import graph_context as G
from ..ir.nodes import Pointwise
from ..sizevars import SymbolicFloat
from ..virtualized import ops
from .common import _as_device, _full, _sv
from .registry import register_lowering

aten = torch.ops.aten
prims = torch.ops.prims


@register_lowering(aten.full.default)
def _full_default(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, fill_value, dtype, device)


@register_lowering(aten.empty.memory_format, aten.empty_strided.default)
def _empty(size, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """``torch.empty``: contents are unspecified, so zeros are a valid (and fusable) value; in a
    functional graph nothing relies on an empty tensor's contents."""
    return _full(size, 0, dtype or torch.get_default_dtype(), device)


@register_lowering(aten.empty_permuted.default)
def _empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``torch.empty_permuted``: as ``torch.empty``, zeros (the output's strides follow the graph)."""
    return _full(size, 0, dtype or torch.get_default_dtype(), device)


@register_lowering(aten.scalar_tensor)
def _scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _full([], s, dtype or torch.get_default_dtype(), device)


@register_lowering(aten.full_like)
def _full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _full(x.get_size(), fill_value, dtype or x.get_dtype(), device or x.get_device())


def _filled_like(x, value, dtype, device):
    """A tensor of ``x``'s sizes filled with ``value``, of ``dtype`` (default ``x``'s) on
    ``device`` (default ``x``'s)."""
    return _full(x.get_size(), value, dtype or x.get_dtype(), device or x.get_device())


@register_lowering(aten.zeros_like)
def _zeros_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _filled_like(x, 0, dtype, device)


@register_lowering(aten.ones_like)
def _ones_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _filled_like(x, 1, dtype, device)


@register_lowering(aten.zeros.default)
def _zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, 0, dtype or torch.get_default_dtype(), device)


@register_lowering(aten.ones.default)
def _ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, 1, dtype or torch.get_default_dtype(), device)


@register_lowering(prims.iota)
def _iota(length, *, start, step, dtype, device, requires_grad=False):
    return Pointwise.create(
        _as_device(device), dtype, lambda idx: ops.index_expr(idx[0] * step + start, dtype), [length]
    )


@register_lowering(aten.arange.start_step)
def _arange(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``torch.arange``: integer ranges as index expressions; floating ones as ``start + i*step``
    computed in float64 and rounded once (torch's CPU kernel accumulates in double)."""
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if any(isinstance(v, S.Expr) for v in (start, end, step)):
        return _arange_symbolic(start, end, step, dtype, device)
    if not all(isinstance(v, int) for v in (start, end, step)) or (dtype is not None and dtype.is_floating_point):
        dtype = dtype or torch.get_default_dtype()
        n = max(0, math.ceil((end - start) / step))
        if not dtype.is_floating_point:
            raise NotImplementedError("integer arange with floating bounds")  # -> fallback

        def fvalue(idx):
            i = ops.to_dtype(ops.index_expr(idx[0], torch.int64), torch.float64)
            v = ops.add(ops.mul(i, ops.constant(float(step), torch.float64)), ops.constant(float(start), torch.float64))
            return ops.to_dtype(v, dtype)

        return Pointwise.create(_as_device(device), dtype, fvalue, [n])
    n = max(0, -(-(end - start) // step))
    dtype = dtype or torch.int64
    return Pointwise.create(_as_device(device), dtype, lambda idx: ops.index_expr(idx[0] * step + start, dtype), [n])


def _arange_symbolic(start, end, step, dtype, device):
    """``torch.arange`` with symbolic bounds: the length is the one Dynamo computed (the node's
    meta), each element ``start + i*step`` from the kernel's size arguments."""
    if any(isinstance(v, (float, SymbolicFloat)) for v in (start, end, step)):
        raise NotImplementedError("arange mixing symbolic and floating bounds")
    meta = G.graph().current_node.meta.get("val")
    n = _sv().size(meta.shape[0])
    dtype = dtype or torch.int64
    if dtype.is_floating_point:

        def fvalue(idx):
            return ops.to_dtype(ops.index_expr(idx[0] * step + start, torch.int64), dtype)

        return Pointwise.create(_as_device(device), dtype, fvalue, [n])
    return Pointwise.create(_as_device(device), dtype, lambda idx: ops.index_expr(idx[0] * step + start, dtype), [n])
