"""View lowerings: reshape, permute, expand, squeeze, slice, select, split, flip, repeat,
diagonal, unfold, transpose and ``view(dtype)``. Views are lazy: they re-index their input and
compute nothing until a consumer reads them.
"""

from __future__ import annotations

import torch

from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.nodes import Pointwise
from ..virtualized import ops
from .common import _sv
from .registry import register_lowering

aten = torch.ops.aten
prims = torch.ops.prims


@register_lowering(aten.view, aten._unsafe_view, aten.reshape)
def _view(x, size):
    if isinstance(size, torch.dtype):
        return _view_dtype(x, size)
    return ir.reshape_view(x, list(size))


def _view_dtype(x, dtype: torch.dtype):
    """``x.view(dtype)`` for a dtype of the same element size: each element's bits reinterpreted
    (``ops.bitcast``; Inductor's ``to_dtype_bitcast``), a pointwise value of ``x``'s sizes. A
    view to another element size changes the last dim's length and reads bytes across elements,
    and a view to or from bool (whose other bit patterns are invalid) or a complex dtype runs as
    the aten op."""
    src = x.get_dtype()
    if src == dtype:
        return x
    if src.itemsize != dtype.itemsize or torch.bool in (src, dtype) or src.is_complex or dtype.is_complex:
        raise NotImplementedError(f"view of {src} as {dtype} (another element size, bool or complex)")
    load = x.make_loader()
    return Pointwise.create(x.get_device(), dtype, lambda idx: ops.bitcast(load(idx), dtype), list(x.get_size()))


@register_lowering(aten.permute)
def _permute(x, dims):
    return ir.permute_view(x, list(dims))


@register_lowering(aten.expand)
def _expand(x, size, *, implicit=False):
    return ir.expand_view(x, list(size))


@register_lowering(aten.squeeze)
def _squeeze(x, dim=None):
    if dim is None:
        return ir.squeeze_view(x)
    return ir.squeeze_view(x, [dim] if isinstance(dim, int) else list(dim))


@register_lowering(aten.unsqueeze)
def _unsqueeze(x, dim):
    return ir.unsqueeze_view(x, dim)


@register_lowering(aten.slice.Tensor)
def _slice(x, dim=0, start=None, end=None, step=1):
    return ir.slice_view(x, dim, start, end, step)


@register_lowering(aten.select.int)
def _select(x, dim, index):
    n = x.get_size()[dim % len(x.get_size())]
    if (index < 0) if isinstance(index, int) else _sv().evaluate_lt(index, 0):
        index = index + n
    if isinstance(index, int) and isinstance(n, int) and not 0 <= index < n:
        raise IndexError(f"select: index {index} out of range for dimension of size {n}")
    if not (isinstance(index, int) and isinstance(n, int)) and not _sv().evaluate_lt(index, n):
        raise IndexError(f"select: index {index} out of range for dimension of size {n}")
    return ir.squeeze_view(ir.slice_view(x, dim, index, index + 1), [dim])


def _meta_output_sizes() -> list | None:
    """The sizes of the current FX node's outputs by its meta value (one list per output tensor,
    ``int | Expr`` each: symbolic sizes as the graph's SizeVars expressions), or None when the
    node has no tensor meta. View lowerings use them where their own size arithmetic needs
    static sizes (split, diagonal, unfold with symbolic sizes): the meta kernels already ran
    that arithmetic under the ShapeEnv's guards."""
    g = G.graph()
    val = g.current_node.meta.get("val") if g.current_node is not None else None
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    if not vals or not all(isinstance(v, torch.Tensor) for v in vals):
        return None
    return [g.sizevars.sizes(v.shape) for v in vals]


@register_lowering(aten.split_with_sizes)
def _split_with_sizes(x, split_sizes, dim=0):
    """``split_with_sizes`` as slice views (no copy; each piece fuses into its readers). Symbolic
    piece sizes are taken as they are (the meta kernel checked that they sum to the dim)."""
    n = x.get_size()[dim % len(x.get_size())]
    if all(isinstance(v, int) for v in list(split_sizes) + [n]) and sum(split_sizes) != n:
        raise ValueError(f"split_with_sizes: sizes {list(split_sizes)} do not sum to dimension size {n}")
    out, start = [], 0
    for s in split_sizes:
        out.append(ir.slice_view(x, dim, start, start + s))
        start = start + s
    return out


@register_lowering(aten.split.Tensor)
def _split(x, split_size, dim=0):
    """``split`` into chunks of ``split_size`` (the last may be smaller), as slice views; with a
    symbolic dim size or split size, the chunks' sizes are the FX meta value's (their count is
    fixed by Dynamo's guards)."""
    d = dim % len(x.get_size())
    n = x.get_size()[d]
    if isinstance(n, int) and isinstance(split_size, int):
        if split_size <= 0:
            raise ValueError(f"split: split_size must be positive, got {split_size}")
        sizes = [min(split_size, n - s) for s in range(0, n, split_size)] or [0]
    else:
        metas = _meta_output_sizes()
        if metas is None:
            raise NotImplementedError("split with symbolic sizes and no meta value")
        sizes = [m[d] for m in metas]
    return _split_with_sizes(x, sizes, d)


@register_lowering(aten.unbind.int)
def _unbind(x, dim=0):
    """``unbind``: one select view per index along ``dim``."""
    n = x.get_size()[dim % len(x.get_size())]
    return [_select(x, dim, i) for i in range(n)]


@register_lowering(aten.flip)
def _flip(x, dims):
    """``x.flip(dims)`` as a lazy view reading index ``n-1-i`` along each flipped dim."""
    size = list(x.get_size())
    dims = sorted({d % len(size) for d in dims}) if size else []

    def reindex(index):
        out = list(index)
        for d in dims:
            out[d] = ir.as_expr(size[d] - 1) - index[d]
        return out

    return ir.TensorBox(ir.GenericView(x, size, reindex)) if dims else x


@register_lowering(aten.repeat)
def _repeat(x, repeats):
    """``x.repeat(repeats)``: output index i reads ``i % n`` along each dim (leading new dims
    broadcast)."""
    size = list(x.get_size())
    if len(repeats) < len(size):
        raise ValueError(f"repeat: {len(repeats)} repeats for a tensor of rank {len(size)}")
    lead = len(repeats) - len(size)
    padded = [1] * lead + size
    out = [s * r for s, r in zip(padded, repeats)]

    def reindex(index):
        # a size-1 dim reads index 0; so does an empty one (nothing is read, and % 0 is invalid)
        return [
            S.ModularIndexing(index[lead + k], 1, n) if (n != 0 and n != 1) else S.Integer(0)
            for k, n in enumerate(size)
        ]

    return ir.TensorBox(ir.GenericView(x, out, reindex))


@register_lowering(aten.diagonal.default)
def _diagonal(x, offset=0, dim1=0, dim2=1):
    """``torch.diagonal``: dims ``dim1``/``dim2`` removed, the diagonal appended last."""
    size = list(x.get_size())
    n = len(size)
    d1, d2 = dim1 % n, dim2 % n
    if d1 == d2:
        raise ValueError("diagonal: dim1 and dim2 must differ")
    r1, r2 = max(-offset, 0), max(offset, 0)
    keep = [k for k in range(n) if k not in (d1, d2)]
    if isinstance(size[d1], int) and isinstance(size[d2], int):
        length = max(0, min(size[d1] - r1, size[d2] - r2))
    else:  # symbolic: the meta kernel's length (a max/min of sizes, under the graph's guards)
        metas = _meta_output_sizes()
        if metas is None:
            raise NotImplementedError("diagonal with symbolic sizes and no meta value")
        length = metas[0][-1]
    out = [size[k] for k in keep] + [length]

    def reindex(index):
        full = [None] * n
        for j, k in enumerate(keep):
            full[k] = index[j]
        full[d1] = index[-1] + r1
        full[d2] = index[-1] + r2
        return full

    return ir.TensorBox(ir.GenericView(x, out, reindex))


@register_lowering(aten.unfold.default)
def _unfold(x, dimension, size, step):
    """``x.unfold(dim, size, step)``: dim becomes the window count, a new last dim of ``size``
    indexes inside the window (element ``i * step + j``), as a lazy view."""
    shape = list(x.get_size())
    if not shape:
        if size > 1:
            raise ValueError(f"unfold: size {size} exceeds a 0-d tensor")
        return ir.reshape_view(x, [1])
    d = dimension % len(shape)
    if isinstance(shape[d], int):
        if step <= 0 or size > shape[d]:
            raise ValueError(f"unfold: size {size} / step {step} invalid for dimension of size {shape[d]}")
        count = (shape[d] - size) // step + 1
    else:  # symbolic: the meta kernel's window count (it checked size and step)
        metas = _meta_output_sizes()
        if metas is None or not isinstance(size, int) or not isinstance(step, int):
            raise NotImplementedError("unfold with symbolic sizes and no meta value, or a symbolic window")
        count = metas[0][d]
    out = shape[:d] + [count] + shape[d + 1 :] + [size]

    def reindex(index):
        src = list(index[:-1])
        src[d] = index[d] * step + index[-1]
        return src

    return ir.TensorBox(ir.GenericView(x, out, reindex))


@register_lowering(aten.t)
def _t(x):
    return x if len(x.get_size()) < 2 else ir.permute_view(x, [1, 0])


@register_lowering(aten.transpose.int)
def _transpose(x, d0, d1):
    n = len(x.get_size())
    if n == 0:
        return x
    dims = list(range(n))
    dims[d0 % n], dims[d1 % n] = dims[d1 % n], dims[d0 % n]
    return ir.permute_view(x, dims)


@register_lowering(prims.broadcast_in_dim.default)
def _broadcast_in_dim(x, shape, broadcast_dimensions):
    """Insert size-1 dims so that x's dims land at ``broadcast_dimensions``, then expand."""
    s = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        s[dst] = x.get_size()[src]
    return ir.expand_view(ir.reshape_view(x, s), list(shape))
