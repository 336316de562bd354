"""Extern kernels: the aten ops run as cuBLAS/cuDNN/flash calls from the wrapper
(``EXTERN_OPS``), and the mm/addmm lowerings that zero-pad operands whose leading dimensions
cuBLAS would read off 16-byte alignment (``_mm_padding``; tunables in ``config``).
"""

from __future__ import annotations

from typing import Any

import torch

from .. import config
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.nodes import TensorBox
from ..layout_opt import channels_last_strides
from .indexing import _constant_pad_nd
from .registry import EXTERN_OPS, lowerings, register_lowering
from .strided import in_layout

aten = torch.ops.aten


# Matrix products, convolution and attention (forward and backward) run as extern kernels
# (cuBLAS/cuDNN/flash) called from the wrapper; pointwise consumers of their outputs fuse into the
# kernels after them. Their outputs are fresh tensors, never views of their inputs, so a pooled
# buffer they read can be reused once they are done with it (wrapper: ``safe_readers``).
for _op in (
    aten.mm.default,
    aten.bmm.default,
    aten.addmm.default,
    aten.baddbmm.default,
    aten.convolution.default,
    aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_cudnn_attention_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
):
    EXTERN_OPS.add(_op)


@register_lowering(aten.convolution.default)
def _convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """``aten.convolution`` as an extern call (cuDNN), with two rules around it.

    Layout optimization (``tilefuse.layout_opt``): when the graph is laid out channels-last, the
    input and weight of a 2-D convolution are given channels-last strides (a value still being
    computed is stored so; a stored one in another layout is copied; a depthwise or 1x1 weight
    usually already is, its size-1 dims taking any stride), and the call's result is laid out as
    cuDNN returns it for such operands (the node's value in the channels-last model).

    Bias as a pointwise op (Inductor's lowering does the same): on a device type of
    ``config.CONV_BIAS_POINTWISE_DEVICE_TYPES`` the convolution runs without its bias and the
    bias ``[C]`` is added, broadcast over the output's channel dim 1, by a pointwise op that
    fuses into the kernels reading the result. aten's cuDNN path adds it in an elementwise kernel
    of its own that reads and writes the whole output once more. The sum is rounded once to the
    output dtype, as in eager."""
    g = G.graph()
    meta = g.layout_metas.get(g.current_node)
    if meta is not None and len(x.get_size()) == 4:
        x = in_layout(x, list(x.get_size()), channels_last_strides(list(x.get_size())))
        weight = in_layout(weight, list(weight.get_size()), channels_last_strides(list(weight.get_size())))
    else:
        meta = g.current_node.meta["val"]
    rest = (stride, padding, dilation, transposed, output_padding, groups)
    if bias is None or x.get_device().type not in config.CONV_BIAS_POINTWISE_DEVICE_TYPES:
        return g.fallback(aten.convolution.default, (x, weight, bias, *rest), {}, meta=meta)
    out = g.fallback(aten.convolution.default, (x, weight, None, *rest), {}, meta=meta)
    nd = len(out.get_size()) - 2
    return lowerings[aten.add.Tensor](out, lowerings[aten.view.default](bias, [bias.get_size()[0]] + [1] * nd))


def _mm_padding(a, b) -> tuple[tuple[int, int, int] | None, Any, Any]:
    """Inductor's pad_mm rule (by size instead of by benchmark): the zero padding ``(pm, pk, pn)``
    that puts every leading dimension cuBLAS sees for ``a [m, k] @ b [k, n]`` on a 16-byte
    boundary, or None to run the product as it is; returned with ``a`` and ``b`` (a strided view
    of a computed value comes back as the view of its realized buffer, as the extern call would
    take it). cuBLAS falls back to slow ``align1`` kernels when a leading dimension is not a
    multiple of 8 (16-bit dtypes) or 4 (fp32) elements, several times slower than the aligned
    ones (a vocabulary of 50257 makes an LM head's products unaligned). Padded: ``n`` (the output's rows), ``k`` when ``a``
    is row-major or ``b`` column-major, ``m`` when ``a`` is column-major (a transposed view).
    Only CUDA (``config.PAD_MM_DEVICE_TYPES``), float dtypes, static sizes, products of at least
    ``config.PAD_MM_MIN_MACS``; ``config.pad_mm`` switches it off."""
    if not config.pad_mm or a.get_device().type not in config.PAD_MM_DEVICE_TYPES:
        return None, a, b
    dtype = a.get_dtype()
    if dtype not in (torch.float16, torch.bfloat16, torch.float32) or b.get_dtype() != dtype:
        return None, a, b
    (m, k), (k2, n) = a.get_size(), b.get_size()
    if not all(isinstance(d, int) for d in (m, k, n, k2)) or m * n * k < config.PAD_MM_MIN_MACS:
        return None, a, b
    align = 16 // dtype.itemsize
    if _lazy_transpose_base(a) is not None:
        # a = y.t() of a value not computed yet: y will be stored row-major, so a is column-major;
        # not realized here, so that when a is padded, y is computed straight into its padded
        # copy (no unpadded copy of y; realized below only if no padding is needed after all)
        sa = [1, m]
    else:
        a, sa = _extern_operand(a)
    b, sb = _extern_operand(b)

    def col_major(st):
        return st is not None and st[0] == 1 and st[1] != 1

    def up(d):
        return -d % align

    pn = up(n)
    pk = up(k) if (not col_major(sa) or col_major(sb)) else 0
    pm = up(m) if col_major(sa) else 0
    if not (pm or pk or pn):
        return None, _extern_operand(a)[0], b
    return (pm, pk, pn), a, b


def _extern_operand(x):
    """``(x, strides)``: the strides an extern call would see for ``x`` when they are known without
    computing anything new: a realized buffer's, or a strided view's of a realized one (then ``x``
    is returned as that ReinterpretView); None for a lazily computed value (realized row-major)."""
    if isinstance(x, TensorBox) and isinstance(x.data, ir.StorageBox):
        if not isinstance(x.data.data, ir.Buffer):
            return x, None
        st = getattr(x.data.data.layout, "stride", None)
    else:
        inner = x.data if isinstance(x, TensorBox) else x
        if not isinstance(inner, ir.ReinterpretView) and ir._strided_view_chain(inner) is None:
            return x, None
        r = ir.realize_input(x)
        x, st = TensorBox(r), getattr(r.layout, "stride", None)
    st = list(st) if st is not None else None
    return x, (st if st is not None and all(isinstance(v, int) for v in st) else None)


def _transposed_stored_base(x):
    """``y``, a row-major 2-D view of a stored buffer, when ``x`` is ``y.t()`` (a column-major
    2-D view of that buffer: strides ``[1, rows]``), else None. The buffer may have any shape
    (a ``[batch, seq, vocab]`` gradient read as ``[batch * seq, vocab]``)."""
    inner = x.data if isinstance(x, TensorBox) else x
    if not isinstance(inner, ir.ReinterpretView) or inner.data.layout is None:
        return None
    lay = inner.layout
    if len(lay.size) != 2 or not all(isinstance(v, int) for v in (*lay.size, *lay.stride)):
        return None
    r, c = lay.size
    if list(lay.stride) != [1, r] or c == 1:
        return None
    return TensorBox(ir.ReinterpretView(inner.data, ir.FixedLayout(lay.device, lay.dtype, [c, r], [r, 1], lay.offset)))


def _view_key(x) -> tuple | None:
    """``(buffer name, size, stride, offset)`` of a stored buffer or a strided view of one (two
    views with the same key read the same elements the same way), else None."""
    inner = x.data if isinstance(x, TensorBox) else x
    if isinstance(inner, ir.StorageBox) and isinstance(inner.data, ir.Buffer):
        inner = inner.data
    if isinstance(inner, ir.ReinterpretView):
        lay, name = inner.layout, inner.data.get_name()
    elif isinstance(inner, ir.Buffer):
        lay, name = getattr(inner, "layout", None), inner.get_name()
    else:
        return None
    if lay is None or getattr(lay, "stride", None) is None:
        return None
    return name, tuple(lay.size), tuple(lay.stride), lay.offset


def _lazy_transpose_base(x):
    """``y`` when ``x`` is the lazy view ``y.t()`` of a 2-D value ``y`` not computed (stored) yet,
    else None."""
    inner = x.data if isinstance(x, TensorBox) else x
    if not isinstance(inner, ir.GenericView) or getattr(inner, "permutation", None) != [1, 0]:
        return None
    y = inner.data
    if not isinstance(y, ir.StorageBox) or isinstance(y.data, ir.Buffer):
        return None
    return TensorBox(y)


def _padded_matmul(op, a, b, bias, pads, kwargs: dict):
    """``op`` (mm or addmm) on operands zero-padded by ``pads = (pm, pk, pn)``, the result sliced
    back to ``[m, n]`` (a view with a padded row stride that later kernels read in place)."""
    pm, pk, pn = pads
    m, n = a.get_size()[0], b.get_size()[1]
    # one padded copy per (operand, padding) in a graph: a weight used by two products is padded
    # once, and so is a gradient used as ``g`` by one product and as ``g.t()`` by another (the
    # transposed view's padding is the same padding of its base, viewed transposed)
    memo: list = G.graph().__dict__.setdefault("_padded_operands", [])

    def same(x, y) -> bool:
        if ir.unwrap_storage(x) is ir.unwrap_storage(y):
            return True
        key = _view_key(x)
        return key is not None and _view_key(y) == key

    def padded(x, amounts):
        for orig, amts, res in memo:
            if amts == amounts and same(orig, x):
                return res
        res = _constant_pad_nd(x, list(amounts))
        memo.append((x, amounts, res))
        return res

    def pad(x, amounts):
        base = _transposed_stored_base(x)
        if base is None:
            base = _lazy_transpose_base(x)
        if base is not None:  # x = base.t(): pad base's dims the other way round, view it transposed
            return ir.permute_view(padded(base, (0, amounts[3], 0, amounts[1])), [1, 0])
        return padded(x, tuple(amounts))

    if pm or pk:
        a = pad(a, [0, pk, 0, pm])
    if pk or pn:
        b = pad(b, [0, pn, 0, pk])
    meta = G.graph().current_node.meta.get("val")
    with meta.fake_mode:
        pmeta = torch.empty((m + pm, n + pn), dtype=meta.dtype, device=meta.device)
    if bias is not None:
        bs = list(bias.get_size())
        bpad = [0, pn if bs and bs[-1] == n else 0]
        if len(bs) == 2:
            bpad += [0, pm if bs[0] == m else 0]
        if any(bpad):
            bias = _constant_pad_nd(bias, bpad)
        out = G.graph().fallback(op, (bias, a, b), kwargs, meta=pmeta)
    else:
        out = G.graph().fallback(op, (a, b), kwargs, meta=pmeta)
    if pm:
        out = ir.slice_view(out, 0, 0, m, 1)
    if pn:
        out = ir.slice_view(out, 1, 0, n, 1)
    return out


@register_lowering(aten.mm.default)
def _mm(a, b):
    """``a @ b`` as an extern cuBLAS call, on padded operands when ``_mm_padding`` says so."""
    pads, a, b = _mm_padding(a, b)
    if pads is None:
        return G.graph().fallback(aten.mm.default, (a, b), {})
    return _padded_matmul(aten.mm.default, a, b, None, pads, {})


@register_lowering(aten.addmm.default)
def _addmm(bias, a, b, *, beta=1, alpha=1):
    """``beta * bias + alpha * (a @ b)`` as an extern cuBLAS call, padded as ``_mm``."""
    kw = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v != 1}
    pads, a, b = _mm_padding(a, b)
    if pads is None:
        return G.graph().fallback(aten.addmm.default, (bias, a, b), kw)
    return _padded_matmul(aten.addmm.default, a, b, bias, pads, kw)
