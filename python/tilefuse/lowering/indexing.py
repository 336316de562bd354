"""Gather-style and select-style lowerings.

Gather-style ops (embedding, index_select, gather, ``x[idx]``) load through
``ops.indirect_indexing`` and fuse with their consumers. Select-style ops (cat, constant_pad_nd,
slice_scatter, diagonal_scatter, select_scatter) compute each output element from one of several
sources chosen by its index: a pointwise ``where`` over the sources. Every source is loaded at its
index clamped into range (Max/Min in the index expression), so no load leaves its buffer in lanes
where another source is selected (Inductor masks those loads instead). A source dim that may be
empty (a data-dependent size, ``u0 >= 0``) has no index to clamp to: its loads are masked
(``ops.masked``) by the condition that selects it.
"""

from __future__ import annotations

import torch
from torch._prims_common import elementwise_dtypes

from .. import symbolic as S
from ..ir import nodes as ir
from ..ir.nodes import Pointwise, prod
from ..virtualized import ops
from .common import _clamped, _full, _in_range, _index_loader, _sv, broadcast_shapes, to_dtype_value
from .pointwise import _clone
from .registry import NO_OPMATH, _meta, register_lowering

aten = torch.ops.aten


@register_lowering(aten.embedding.default)
def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``weight[indices]``: out[*i, j] = weight[indices[*i], j], an indirect load that fuses with
    its consumers (Inductor's embedding lowering). Shapes: weight (V, D), indices (*I) -> (*I, D).
    An index outside ``[0, V)``, negative ones included, trips the bounds check (eager raises
    IndexError; Inductor wraps a negative index to a row from the end)."""
    if len(weight.get_size()) != 2:
        raise ValueError(f"embedding: weight must be 2-D, got shape {weight.get_size()}")
    V, D = weight.get_size()
    isize = list(indices.get_size())
    wl = weight.make_loader()
    il = _index_loader(indices, V, wrap_negative=False)  # eager: IndexError for a negative index
    n = len(isize)

    def inner(idx):
        return wl([il(idx[:n]), idx[n]])

    return Pointwise.create(weight.get_device(), weight.get_dtype(), inner, isize + [D])


@register_lowering(aten.index_select.default)
def _index_select(x, dim, index):
    """``x.index_select(dim, index)`` (index 0-d or 1-D) as an indirect load along ``dim``."""
    size = list(x.get_size())
    isize = list(index.get_size())
    if not size:
        # a 0-d input: the index holds one value, which must be 0; the result is 0-d
        if prod(isize) != 1:
            raise IndexError(f"index_select: index to a scalar can have only 1 value, got {prod(isize)}")
        xl = x.make_loader()
        il = _index_loader(ir.reshape_view(index, [1]), 1, wrap_negative=False)

        def inner0(idx):
            il([S.Integer(0)])  # traced for its bounds check (0 <= index < 1)
            return xl([])

        return Pointwise.create(x.get_device(), x.get_dtype(), inner0, [])
    dim = dim % len(size)
    if len(isize) > 1:
        raise ValueError(f"index_select: index must be 0-d or 1-D, got shape {isize}")
    xl = x.make_loader()
    il = _index_loader(index, size[dim], wrap_negative=False)
    out = size[:dim] + [prod(isize)] + size[dim + 1 :]

    def inner(idx):
        i = il([idx[dim]] if isize else [])
        return xl(list(idx[:dim]) + [i] + list(idx[dim + 1 :]))

    return Pointwise.create(x.get_device(), x.get_dtype(), inner, out)


@register_lowering(aten.gather.default)
def _gather(x, dim, index, *, sparse_grad=False):
    """``torch.gather``: out[i] = x[i with dim replaced by index[i]]; out has index's shape."""
    size = list(x.get_size())
    isize = list(index.get_size())
    if len(isize) != len(size) and size:
        raise ValueError(f"gather: index rank {len(isize)} differs from input rank {len(size)}")
    if not size:
        raise NotImplementedError("gather of a 0-d tensor")
    dim = dim % len(size)
    xl = x.make_loader()
    il = _index_loader(index, size[dim], wrap_negative=False)

    def inner(idx):
        i = il(idx)
        return xl(list(idx[:dim]) + [i] + list(idx[dim + 1 :]))

    return Pointwise.create(x.get_device(), x.get_dtype(), inner, isize)


@register_lowering(aten.index.Tensor)
def _index_tensor(x, indices):
    """Advanced indexing ``x[..., i0, ..., i1, ...]`` with integer index tensors (broadcast
    together). As torch: when the indexed dims are adjacent the broadcast dims replace them in
    place, otherwise they come first. Bool masks (data-dependent shapes) fall back."""
    size = list(x.get_size())
    pos = [k for k, t in enumerate(indices) if t is not None]
    if not pos:
        raise NotImplementedError("index with no index tensor")
    tensors = [indices[k] for k in pos]
    if any(t.get_dtype() == torch.bool for t in tensors):
        raise NotImplementedError("boolean mask indexing")
    bshape = broadcast_shapes(*[t.get_size() for t in tensors])
    loaders = {k: _index_loader(t, size[k], bshape) for t, k in zip(tensors, pos)}
    xl = x.make_loader()
    nb = len(bshape)
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    # adjacent index tensors: their broadcast dims replace them in place; otherwise they go first
    first = pos[0] if adjacent else 0
    rest = [k for k in range(len(size)) if k not in loaders]
    before = [k for k in rest if k < first] if adjacent else []
    after = [k for k in rest if k not in before]
    out = [size[k] for k in before] + bshape + [size[k] for k in after]

    def inner(idx):
        src = [None] * len(size)
        for j, k in enumerate(before):
            src[k] = idx[j]
        bidx = idx[len(before) : len(before) + nb]
        for k, ld in loaders.items():
            src[k] = ld(bidx)
        for j, k in enumerate(after):
            src[k] = idx[len(before) + nb + j]
        return xl(src)

    return Pointwise.create(x.get_device(), x.get_dtype(), inner, out)


@register_lowering(aten.cat.default)
def _cat(tensors, dim=0):
    """``torch.cat`` as one pointwise kernel selecting, per output index, the input that covers it
    (Inductor's pointwise cat). Empty 1-D inputs are skipped as torch does; dtypes promote."""
    tensors = [t for t in tensors if not (len(t.get_size()) == 1 and t.get_size()[0] == 0)]
    if not tensors:
        raise NotImplementedError("cat of only empty tensors")
    rank = len(tensors[0].get_size())
    dim = dim % rank
    base = list(tensors[0].get_size())
    for t in tensors:
        s = list(t.get_size())
        if len(s) != rank or any(a != b for k, (a, b) in enumerate(zip(s, base)) if k != dim):
            raise ValueError(f"cat: sizes {[list(x.get_size()) for x in tensors]} differ off dimension {dim}")
    dtype = elementwise_dtypes(*[_meta(t) for t in tensors], type_promotion_kind=NO_OPMATH)[1]
    offsets, total = [], 0
    for t in tensors:
        offsets.append(total)
        total += t.get_size()[dim]
    loaders = [t.make_loader() for t in tensors]
    out = base[:dim] + [total] + base[dim + 1 :]

    def inner(idx):
        result = None
        for k in reversed(range(len(tensors))):
            n = tensors[k].get_size()[dim]
            if n == 0:
                continue
            i = list(idx)
            i[dim] = _clamped(idx[dim] - offsets[k], n)
            # each input's loads masked to its slice (Inductor's masked cat): a lane reads only
            # the input it takes (indices stay clamped, so in bounds either way)
            load = lambda i=i, k=k: to_dtype_value(loaders[k](i), dtype)  # noqa: E731
            if len(tensors) == 1:
                result = load()
            else:
                result = ops.masked(
                    _in_range(idx[dim], offsets[k], offsets[k] + n), load, 0 if result is None else result
                )
        return result

    return Pointwise.create(tensors[0].get_device(), dtype, inner, out)


@register_lowering(aten.constant_pad_nd.default)
def _constant_pad_nd(x, pad, value=0.0):
    """``F.pad(x, pad, value=value)`` (constant mode): pad pairs apply from the last dim backwards;
    negative pads crop."""
    size = list(x.get_size())
    if len(pad) % 2 or len(pad) // 2 > len(size):
        raise ValueError(f"constant_pad_nd: padding {list(pad)} does not fit a tensor of rank {len(size)}")
    lo = [0] * len(size)
    hi = [0] * len(size)
    for k in range(len(pad) // 2):
        d = len(size) - 1 - k
        lo[d], hi[d] = pad[2 * k], pad[2 * k + 1]
    out = [s + a + b for s, a, b in zip(size, lo, hi)]
    if any(isinstance(s, int) and s < 0 for s in out):
        raise ValueError(f"constant_pad_nd: padding {list(pad)} leaves a negative size {out}")
    loader = x.make_loader()
    dtype = x.get_dtype()

    may_be_empty = any(_may_be_empty(n) for n in size)

    def inner(idx):
        src = [_clamped(i - a, n) if (a or b) else i for i, a, b, n in zip(idx, lo, hi, size)]
        cond = None
        for i, a, b, n in zip(idx, lo, hi, size):
            # a symbolic pad amount may be positive: checked
            if not (isinstance(a, int) and isinstance(b, int)) or a > 0 or b > 0:
                c = _in_range(i - a, 0, n)
                cond = c if cond is None else ops.logical_and(cond, c)
        if cond is None:
            return loader(src)
        if may_be_empty:
            return ops.masked(cond, lambda: loader(src), value)
        return ops.where(cond, loader(src), ops.constant(value, dtype))

    if any(s == 0 for s in size):  # an empty input: every output element (if any) is padding
        return _full(out, value, dtype, x.get_device())
    return Pointwise.create(x.get_device(), dtype, inner, out)


def _may_be_empty(n) -> bool:
    """Whether a dim of symbolic length ``n`` is not proven ``>= 1`` (a data-dependent size):
    a clamped index into it may still be out of bounds."""
    return isinstance(n, S.Expr) and not n.is_number and not S.statically_known_leq(1, n)


@register_lowering(aten.slice_scatter.default)
def _slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    """``x`` with ``x[..., start:end:step, ...]`` replaced by ``src`` (a backward of slicing)."""
    size = list(x.get_size())
    dim = dim % len(size)
    n = size[dim]
    start, end = ir.slice_bounds(n, start, end)
    m = src.get_size()[dim]
    if m == 0:
        return _clone(x)
    xl, sl = x.make_loader(), src.make_loader()
    dtype = x.get_dtype()

    masked = _may_be_empty(m) or any(_may_be_empty(k) for k in src.get_size())

    def inner(idx):
        i = idx[dim]
        si = list(idx)
        si[dim] = _clamped(S.FloorDiv(S.Max(i - start, S.Integer(0)), step) if step != 1 else i - start, m)
        cond = _in_range(i, start, start + (m - 1) * step + 1)
        if step != 1:
            r = ops.index_expr(S.Mod(i - start + step * n, step), torch.int64)
            cond = ops.logical_and(cond, ops.eq(r, ops.constant(0, torch.int64)))
        if masked:
            return ops.masked(cond, lambda: to_dtype_value(sl(si), dtype), xl(idx))
        return ops.where(cond, to_dtype_value(sl(si), dtype), xl(idx))

    return Pointwise.create(x.get_device(), dtype, inner, size)


@register_lowering(aten.diagonal_scatter.default)
def _diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """``x`` with ``x.diagonal(offset, dim1, dim2)`` replaced by ``src`` (diagonal's backward):
    a pointwise where over the positions on that diagonal."""
    size = list(x.get_size())
    n = len(size)
    d1, d2 = dim1 % n, dim2 % n
    if d1 == d2:
        raise ValueError("diagonal_scatter: dim1 and dim2 must differ")
    r1, r2 = max(-offset, 0), max(offset, 0)
    # the diagonal's length is src's last size (the op checks it against x's), symbolic or not
    length = src.get_size()[-1]
    if _sv().statically_known_equals(length, 0):
        return _clone(x)
    keep = [k for k in range(n) if k not in (d1, d2)]
    xl, sl = x.make_loader(), src.make_loader()
    dtype = x.get_dtype()

    def inner(idx):
        j = idx[d1] - r1
        v = to_dtype_value(sl([idx[k] for k in keep] + [_clamped(j, length)]), dtype)
        on = ops.logical_and(
            ops.eq(ops.index_expr(j, torch.int64), ops.index_expr(idx[d2] - r2, torch.int64)), _in_range(j, 0, length)
        )
        return ops.where(on, v, xl(idx))

    return Pointwise.create(x.get_device(), dtype, inner, size)


@register_lowering(aten.select_scatter.default)
def _select_scatter(x, src, dim, index):
    """``x`` with ``x.select(dim, index)`` replaced by ``src``."""
    n = x.get_size()[dim % len(x.get_size())]
    if (index < 0) if isinstance(index, int) else _sv().evaluate_lt(index, 0):
        index = index + n
    return _slice_scatter(x, ir.unsqueeze_view(src, dim % len(x.get_size())), dim, index, index + 1, 1)
