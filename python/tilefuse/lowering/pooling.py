"""Pooling and NN lowerings: max/avg/adaptive-max pooling (windows unrolled in one pointwise
kernel), max-pool backward, and ``nll_loss_forward``.
"""

from __future__ import annotations

import torch

from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.dtypes import accumulator_dtype
from ..ir.nodes import Pointwise
from ..virtualized import ops
from .common import _clamped, _full, _in_range, _sv, _to_dtype_lowering, to_dtype_value
from .reductions import _sum_all
from .registry import lowerings, register_lowering

aten = torch.ops.aten


@register_lowering(aten.nll_loss_forward.default)
def _nll_loss_forward(x, target, weight, reduction, ignore_index):
    """``nll_loss_forward`` (so cross-entropy's loss after its log_softmax), lowered directly with
    torch's decomposition's semantics: ``x`` [N, C] or [C] (log-probabilities), ``target`` [N] or
    [] of class indices, optional ``weight`` [C]; each row's loss is ``-x[i, t_i] * w[t_i]`` (the
    product rounded to ``x``'s dtype), 0 where ``t_i == ignore_index``; ``total_weight`` the sum of
    ``w[t_i]`` (the count of targets without ``weight``) over the others. ``reduction`` 0 (none:
    the per-row losses, total_weight 0 for a batch), 1 (mean: sum / total_weight, NaN when every
    target is ignored, as eager; a single [C] row whose target is ignored gives 0 on CUDA, as eager's
    CUDA kernel) or 2 (sum). A target outside ``[0, C)`` other than
    ``ignore_index`` trips the gather's device assert, as eager raises. Returns (output,
    total_weight), both of ``x``'s dtype. Lowered rather than decomposed so AOTAutograd does not
    trace the decomposition's dozen reference ops (their symbolic-shape reasoning, with
    ``dynamic=True``, was about a third of a cross-entropy graph's trace); the IR is the one the
    decomposition produced: a gather per row, then sums."""
    size = list(x.get_size())
    if len(size) not in (1, 2) or len(target.get_size()) > 1:
        raise NotImplementedError(f"nll_loss_forward of a {len(size)}-d input")  # -> aten kernel
    nd, tsize = len(size), list(target.get_size())
    classes = size[-1]
    dtype, dev, tdt = x.get_dtype(), x.get_device(), target.get_dtype()
    acc = accumulator_dtype(dtype)
    xl, tl_ = x.make_loader(), target.make_loader()
    wl = None if weight is None else weight.make_loader()

    def pick(idx, weight_only: bool):
        t = tl_(idx)
        valid = ops.ne(t, ops.constant(ignore_index, tdt))
        c = ops.indirect_indexing(ops.where(valid, t, ops.constant(0, tdt)), classes, True, False)
        # computed in ``acc`` (float32 for half dtypes, whose constants the interpreter lacks)
        if weight_only:
            v = to_dtype_value(wl([c]), acc)
        else:
            v = to_dtype_value(xl(list(idx) + [c] if nd == 2 else [c]), acc)
            if wl is not None:
                v = to_dtype_value(to_dtype_value(ops.mul(v, to_dtype_value(wl([c]), acc)), dtype), acc)
            v = ops.neg(v)
        return to_dtype_value(ops.where(valid, v, ops.constant(0, acc)), dtype)

    result = Pointwise.create(dev, dtype, lambda idx: pick(idx, False), tsize)
    if reduction == 0 and nd == 2:
        return result, _full([], 0.0, dtype, dev)
    if wl is not None:
        # pick's values are of x's dtype whatever the weight's
        total = _sum_all(Pointwise.create(dev, dtype, lambda idx: pick(idx, True), tsize))
    else:
        valid = Pointwise.create(dev, torch.bool, lambda idx: ops.ne(tl_(idx), ops.constant(ignore_index, tdt)), tsize)
        total = _to_dtype_lowering(_sum_all(valid), dtype)
    if reduction == 2:
        result = _sum_all(result)
    elif reduction == 1:
        result = lowerings[aten.div.Tensor](_sum_all(result), total)
        if nd == 1 and dev.type == "cuda":
            # eager's CUDA kernel for a single [C] row gives 0, not 0 / 0, when its target is
            # ignored (its CPU kernel gives NaN, as the division does)
            ml = result.make_loader()
            result = Pointwise.create(
                dev,
                dtype,
                lambda idx: to_dtype_value(
                    ops.where(
                        ops.ne(tl_([]), ops.constant(ignore_index, tdt)),
                        to_dtype_value(ml([]), acc),
                        ops.constant(0, acc),
                    ),
                    dtype,
                ),
                [],
            )
    return result, total


def _pool_params(x, kernel_size, stride, padding, dilation, ceil_mode):
    size = list(x.get_size())
    if len(size) not in (3, 4):
        raise NotImplementedError("max_pool2d of a tensor that is not 3-D or 4-D")

    def pair(v, default):
        v = default if v is None or (isinstance(v, (list, tuple)) and len(v) == 0) else v
        return [v, v] if isinstance(v, int) else (list(v) * 2 if len(v) == 1 else list(v))

    k = pair(kernel_size, None)
    s = pair(stride, k)
    p = pair(padding, 0)
    d = pair(dilation, 1)
    if k[0] * k[1] > 64:
        raise NotImplementedError("max_pool2d with a large window")  # unrolled: keep it small
    H, W = size[-2], size[-1]

    def out_size(n, k_, s_, p_, d_):
        span = n + 2 * p_ - d_ * (k_ - 1) - 1
        if not ceil_mode:
            return span // s_ + 1
        o = -(-span // s_) + 1
        # as torch: the last window must start inside the input or its left padding
        return o - 1 if (o - 1) * s_ >= n + p_ else o

    if isinstance(H, int) and isinstance(W, int):
        OH = out_size(H, k[0], s[0], p[0], d[0])
        OW = out_size(W, k[1], s[1], p[1], d[1])
    else:  # symbolic: the output size Dynamo computed (ceil_mode's rule is a comparison of sizes)
        val = G.graph().current_node.meta.get("val")
        t = val[0] if isinstance(val, (tuple, list)) else val
        OH, OW = _sv().sizes(t.shape[-2:])
    return size, k, s, p, d, H, W, OH, OW


@register_lowering(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``max_pool2d`` (values and flat ``h*W + w`` indices) as one pointwise kernel over the
    output, the window unrolled (Inductor's lowering). As torch's CPU kernel: the index starts at
    the window's first in-bounds element, a larger value or a NaN takes over."""
    size, k, s, p, d, H, W, OH, OW = _pool_params(x, kernel_size, stride, padding, dilation, ceil_mode)
    loader = x.make_loader()
    dtype = x.get_dtype()
    lead = size[:-2]
    acc = accumulator_dtype(dtype)

    lowest = float("-inf") if acc.is_floating_point else (0 if acc == torch.bool else torch.iinfo(acc).min)

    def window(idx):
        oh, ow = idx[-2], idx[-1]
        best = ops.constant(lowest, acc)
        h0 = S.Max(S.Integer(0), oh * s[0] - p[0])
        w0 = S.Max(S.Integer(0), ow * s[1] - p[1])
        bidx = ops.index_expr(h0 * W + w0, torch.int64)
        for kh in range(k[0]):
            for kw in range(k[1]):
                h = oh * s[0] - p[0] + kh * d[0]
                w = ow * s[1] - p[1] + kw * d[1]
                v = to_dtype_value(loader(list(idx[:-2]) + [_clamped(h, H), _clamped(w, W)]), acc)
                inb = ops.logical_and(_in_range(h, 0, H), _in_range(w, 0, W))
                take = ops.logical_and(inb, ops.logical_or(ops.gt(v, best), ops.ne(v, v)))
                best = ops.where(take, v, best)
                bidx = ops.where(take, ops.index_expr(_clamped(h, H) * W + _clamped(w, W), torch.int64), bidx)
        return best, bidx

    out = lead + [OH, OW]
    values = Pointwise.create(x.get_device(), dtype, lambda idx: to_dtype_value(window(idx)[0], dtype), out)
    indices = Pointwise.create(x.get_device(), torch.int64, lambda idx: window(idx)[1], out)
    return values, indices


@register_lowering(aten.adaptive_max_pool2d.default)
def _adaptive_max_pool2d(x, output_size):
    """``adaptive_max_pool2d`` (values and flat ``h*W + w`` indices): output cell ``o`` pools rows
    ``floor(o*H/OH)`` to ``ceil((o+1)*H/OH)`` (and likewise columns), the largest window unrolled
    with the rows/columns past a cell's own end masked off; first maximum wins, NaN takes over."""
    size = list(x.get_size())
    if len(size) not in (3, 4) or len(output_size) != 2:
        raise NotImplementedError("adaptive_max_pool2d of a tensor that is not 3-D or 4-D")
    H, W = size[-2], size[-1]
    OH, OW = output_size
    if H == 0 or W == 0 or OH == 0 or OW == 0:
        raise NotImplementedError("adaptive_max_pool2d of an empty tensor")
    kh_max, kw_max = -(-H // OH) + 1, -(-W // OW) + 1
    if kh_max * kw_max > 64:
        raise NotImplementedError("adaptive_max_pool2d with a large window")  # unrolled: keep it small
    loader = x.make_loader()
    dtype = x.get_dtype()
    acc = accumulator_dtype(dtype)
    lowest = float("-inf") if acc.is_floating_point else torch.iinfo(acc).min

    def window(idx):
        oh, ow = idx[-2], idx[-1]
        h0, w0 = S.FloorDiv(oh * H, OH), S.FloorDiv(ow * W, OW)
        h1, w1 = S.FloorDiv((oh + 1) * H + OH - 1, OH), S.FloorDiv((ow + 1) * W + OW - 1, OW)
        best = ops.constant(lowest, acc)
        bidx = ops.index_expr(h0 * W + w0, torch.int64)
        for kh in range(kh_max):
            for kw in range(kw_max):
                h, w = h0 + kh, w0 + kw
                v = to_dtype_value(loader(list(idx[:-2]) + [_clamped(h, H), _clamped(w, W)]), acc)
                inb = ops.logical_and(
                    ops.lt(ops.index_expr(h, torch.int64), ops.index_expr(h1, torch.int64)),
                    ops.lt(ops.index_expr(w, torch.int64), ops.index_expr(w1, torch.int64)),
                )
                take = ops.logical_and(inb, ops.logical_or(ops.gt(v, best), ops.ne(v, v)))
                best = ops.where(take, v, best)
                bidx = ops.where(take, ops.index_expr(_clamped(h, H) * W + _clamped(w, W), torch.int64), bidx)
        return best, bidx

    out = size[:-2] + [OH, OW]
    values = Pointwise.create(x.get_device(), dtype, lambda idx: to_dtype_value(window(idx)[0], dtype), out)
    indices = Pointwise.create(x.get_device(), torch.int64, lambda idx: window(idx)[1], out)
    return values, indices


@register_lowering(aten.max_pool2d_with_indices_backward.default)
def _max_pool2d_with_indices_backward(grad_out, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Gradient of max_pool2d: each input element sums the output gradients of the windows that
    contain it and picked it (``indices == h*W + w``), a pointwise gather over candidate windows."""
    size, k, s, p, d, H, W, OH, OW = _pool_params(x, kernel_size, stride, padding, dilation, ceil_mode)
    gl, il = grad_out.make_loader(), indices.make_loader()
    dtype = grad_out.get_dtype()
    acc = accumulator_dtype(dtype)

    def inner(idx):
        h, w = idx[-2], idx[-1]
        flat = ops.index_expr(h * W + w, torch.int64)
        total = ops.constant(0.0, acc)
        for kh in range(k[0]):
            th = h + p[0] - kh * d[0]  # = oh * stride when this window row covers h
            for kw in range(k[1]):
                tw = w + p[1] - kw * d[1]
                oh = S.FloorDiv(S.Max(th, S.Integer(0)), s[0])
                ow = S.FloorDiv(S.Max(tw, S.Integer(0)), s[1])
                src = list(idx[:-2]) + [_clamped(oh, OH), _clamped(ow, OW)]
                ok = ops.logical_and(_in_range(th, 0, OH * s[0]), _in_range(tw, 0, OW * s[1]))
                if s[0] != 1:
                    ok = ops.logical_and(
                        ok,
                        ops.eq(
                            ops.index_expr(S.Mod(th + s[0] * (H + p[0] + 1), s[0]), torch.int64),
                            ops.constant(0, torch.int64),
                        ),
                    )
                if s[1] != 1:
                    ok = ops.logical_and(
                        ok,
                        ops.eq(
                            ops.index_expr(S.Mod(tw + s[1] * (W + p[1] + 1), s[1]), torch.int64),
                            ops.constant(0, torch.int64),
                        ),
                    )
                hit = ops.logical_and(ok, ops.eq(il(src), flat))
                total = ops.where(hit, ops.add(total, to_dtype_value(gl(src), acc)), total)
        return to_dtype_value(total, dtype)

    return Pointwise.create(x.get_device(), dtype, inner, size)


@register_lowering(aten.avg_pool2d.default)
def _avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """``avg_pool2d`` as one pointwise kernel over the output, the window unrolled: the in-bounds
    elements summed in fp32 (for low precision) and divided by the window's size (padding counted
    when ``count_include_pad``, as torch), or by ``divisor_override``."""
    size, k, s, p, d, H, W, OH, OW = _pool_params(x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise ValueError("avg_pool2d: divisor must be non-zero")
    loader = x.make_loader()
    dtype = x.get_dtype()
    if dtype == torch.bool:
        raise NotImplementedError("avg_pool2d of a bool tensor")
    # integers: summed in int64 and divided truncating toward zero, as torch's CPU kernel
    acc = accumulator_dtype(dtype) if dtype.is_floating_point else torch.int64
    divide = ops.truediv if acc.is_floating_point else ops.truncdiv

    def inner(idx):
        oh, ow = idx[-2], idx[-1]
        total = ops.constant(0, acc)
        for kh in range(k[0]):
            for kw in range(k[1]):
                h = oh * s[0] - p[0] + kh
                w = ow * s[1] - p[1] + kw
                v = to_dtype_value(loader(list(idx[:-2]) + [_clamped(h, H), _clamped(w, W)]), acc)
                inb = ops.logical_and(_in_range(h, 0, H), _in_range(w, 0, W))
                total = ops.where(inb, ops.add(total, v), total)
        if divisor_override is not None:
            div = ops.constant(divisor_override, acc)
        else:
            # the window clipped to the padded input (count_include_pad) or to the input itself
            h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
            if count_include_pad:
                hn = S.Min(h0 + k[0], ir.as_expr(H + p[0])) - h0
                wn = S.Min(w0 + k[1], ir.as_expr(W + p[1])) - w0
            else:
                hn = S.Min(h0 + k[0], ir.as_expr(H)) - S.Max(h0, S.Integer(0))
                wn = S.Min(w0 + k[1], ir.as_expr(W)) - S.Max(w0, S.Integer(0))
            div = ops.to_dtype(ops.index_expr(hn * wn, torch.int64), acc)
        return to_dtype_value(divide(total, div), dtype)

    return Pointwise.create(x.get_device(), dtype, inner, size[:-2] + [OH, OW])
