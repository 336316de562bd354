"""``as_strided`` and ``as_strided_scatter``: views and writes by storage position, which read
the storage eager would have (the FX value that owns it, in eager's layout).
"""

from __future__ import annotations

import operator

import torch

from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.layout_utils import strides_match
from ..ir.nodes import prod
from .registry import register_lowering
from .views import _view_dtype

aten = torch.ops.aten


def _dense_layout(size: list, stride: list) -> bool:
    """Whether static ``size``/``stride`` lay a tensor out densely and without overlap: its dims
    longer than 1, ordered by stride, have strides 1, size_0, size_0·size_1, … (contiguous or a
    permutation of it: transposed, channels-last), so its elements fill ``numel`` consecutive
    storage positions. Dims of size 1 take any stride; an empty tensor counts as dense."""
    if any(s == 0 for s in size):
        return True
    expect = 1
    for s, st in sorted(((s, st) for s, st in zip(size, stride) if s != 1), key=lambda p: p[1]):
        if st != expect:
            return False
        expect *= s
    return True


def _aliased_input(node: torch.fx.Node) -> torch.fx.Node | None:
    """The FX node whose storage ``node``'s value aliases, by the op's schema: a view op's return
    carries a non-writing alias annotation (``slice.Tensor(Tensor(a) self, ...) -> Tensor(a)``;
    ``split``'s ``Tensor(a)[]`` list, read through ``getitem``) shared with one argument, which is
    returned. ``None`` for an op that makes new storage (or writes in place), a placeholder or a
    constant."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        src = node.args[0]
        return _aliased_input(src) if isinstance(src, torch.fx.Node) else None
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns:
        return None
    ret = schema.returns[0].alias_info
    if ret is None or ret.is_write:
        return None
    for k, a in enumerate(schema.arguments):
        if a.alias_info is not None and not a.alias_info.is_write:
            arg = node.args[k] if k < len(node.args) else node.kwargs.get(a.name)
            return arg if isinstance(arg, torch.fx.Node) else None
    return None


def _storage_base(node: torch.fx.Node) -> tuple[torch.fx.Node, bool]:
    """The node that owns the storage ``node``'s value views, and whether that storage's element
    positions are ``node``'s: ``node`` itself unless it is the result of view ops
    (``_aliased_input``), followed back through all of them, e.g. ``mul`` for
    ``mul[1][:, ::2]``, through dtype views of the same element size too (``view(torch.int32)``
    of a float32 value: the same positions, other bits). A dtype view to another element size
    counts positions in other units: the walk stops there with False."""
    val = node.meta.get("val")
    while True:
        src = _aliased_input(node)
        sval = src.meta.get("val") if src is not None else None
        if not isinstance(sval, torch.Tensor) or not isinstance(val, torch.Tensor):
            return node, True
        if sval.dtype.itemsize != val.dtype.itemsize:
            return node, False
        node = src


def _in_eager_layout(x: ir.TensorBox, meta: torch.Tensor, whole_storage: bool) -> ir.TensorBox:
    """``x`` with exactly the strides eager gives its value (``meta``, its FX meta value), so that
    an aten op reading its storage (``as_strided``) or cloning it (``as_strided_scatter``) sees
    eager's storage order (:func:`in_layout`)."""
    sv = G.graph().sizevars
    return in_layout(x, sv.sizes(meta.shape), sv.sizes(meta.stride()), whole_storage)


def in_layout(x: ir.TensorBox, size: list, stride: list, whole_storage: bool = False) -> ir.TensorBox:
    """``x`` (of sizes ``size``) with strides ``stride`` on every dim longer than 1: an unrealized
    value realized so (``StorageBox.exact_stride``; not for strides that expand a dim), ``x``
    itself when its buffer — or, unless ``whole_storage`` (storage offset 0, nothing else in the
    storage), its view of one — already has them, else a copy with them
    (``GraphLowering._copy_with_strides``)."""
    g = G.graph()
    sv = g.sizevars
    if g.set_exact_strides(x, size, stride):
        x.data.realize()
        return x
    r = ir.realize_input(x)
    lay = getattr(r, "layout", None)
    if (
        lay is not None
        and (isinstance(r, ir.Buffer) or not whole_storage)
        and (lay.offset == 0 or not whole_storage)
        and strides_match(list(lay.size), list(lay.stride), stride, sv)
    ):
        if isinstance(r, ir.Buffer):
            r.freeze_layout()
        return x
    return ir.TensorBox(ir.StorageBox(g._copy_with_strides(x, size, stride)))


@register_lowering(aten.as_strided.default)
def _as_strided(x, size, stride, storage_offset=None):
    """``x.as_strided(size, stride, offset)``, reading the storage of eager's value: the storage
    ``x`` views, owned by ``x`` or by the value ``x`` is a slice, select, split, expand … of
    (``_storage_base``), laid out by that owner's eager strides (its FX meta value), whatever
    layout tilefuse would give it. ``(x * 2).as_strided(...)`` or
    ``(x * 2)[:, ::2].as_strided(...)`` of a transposed ``x`` reads ``x * 2`` in ``x``'s
    transposed order, as eager (the aten op on tilefuse's contiguous ``x * 2`` would read other
    elements).

    With static sizes, an owner whose eager layout is dense and non-overlapping (contiguous, or a
    permutation of it: transposed, channels-last; each storage position holds one element) and a
    view reading only its elements: a lazy view reading storage position
    ``p = offset + sum(i*stride)``, element ``((p - o) // stride_d) % size_d`` along each dim
    ``d`` of the owner by its eager strides and storage offset ``o`` (no kernel, fuses).
    Otherwise the aten op: on the graph input's own storage for a view of an input (exact: it
    may read the input's memory beyond the view, e.g. OpInfo's partial views), else on the owner
    realized in its eager layout (``_in_eager_layout``; symbolic sizes, a non-dense owner)."""
    g = G.graph()
    arg = g.current_node.args[0]
    meta = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(meta, torch.Tensor):
        raise NotImplementedError("as_strided of a value without a meta tensor")
    base_node, same_units = _storage_base(arg)
    if not same_units:
        # the storage is the owner's past a dtype view of another element size: neither a view
        # nor the aten op on tilefuse's buffers is sure to read eager's bytes
        raise RuntimeError(
            "tilefuse cannot compile as_strided of a view(dtype) to another element size "
            f"({arg.name}); this graph runs eagerly"
        )
    base_meta = base_node.meta["val"]
    base = g.env.get(base_node) if base_node is not arg else x
    if not isinstance(base, ir.TensorBox):
        raise NotImplementedError("as_strided of a value whose storage owner is not a tensor")
    owner_dtype = base.get_dtype()
    if owner_dtype != meta.dtype:  # through a dtype view of the same element size: its bits
        base_as = _view_dtype(base, meta.dtype)
    else:
        base_as = base
    if storage_offset is None:
        storage_offset = g.sizevars.size(meta.storage_offset())
    size, stride = list(size), list(stride)
    static = g.sizevars.shape_env is None
    owner_is_input = base_node.op in ("placeholder", "get_attr")
    if static and _dense_layout(list(base_meta.shape), list(base_meta.stride())):
        rel = storage_offset - base_meta.storage_offset()
        old = list(base.get_size())
        if (
            rel >= 0
            and len(size) == len(stride)
            and all(st >= 0 for st in stride)
            and (prod(size) == 0 or rel + sum((s - 1) * st for s, st in zip(size, stride)) < prod(old))
        ):
            old_strides = [int(st) for st in base_meta.stride()]

            def reindex(index):
                if prod(size) == 0:
                    return [S.Integer(0)] * len(old)
                flat = S.Integer(rel)
                for i, st in zip(index, stride):
                    flat = flat + i * st
                return [S.ModularIndexing(flat, ost, s) if s > 1 else S.Integer(0) for s, ost in zip(old, old_strides)]

            return ir.TensorBox(ir.GenericView(base_as, size, reindex))
    if owner_is_input:
        if owner_dtype == meta.dtype:
            raise NotImplementedError("as_strided of a graph input's storage beyond its elements or not dense")
        # the aten op on the input's own storage, reinterpreted by an aliasing aten view (tilefuse's
        # bitcast is a copy of the input's elements only)
        with base_meta.fake_mode:
            alias_meta = base_meta.view(meta.dtype)
        alias = g.fallback(aten.view.dtype, (base, meta.dtype), {}, meta=alias_meta)
        return g.fallback(aten.as_strided.default, (alias, size, stride, storage_offset), {})
    if base_meta.storage_offset() != 0:
        raise NotImplementedError("as_strided of a computed value with a storage offset")
    return g.fallback(
        aten.as_strided.default, (_in_eager_layout(base_as, base_meta, True), size, stride, storage_offset), {}
    )


@register_lowering(aten.as_strided_scatter.default)
def _as_strided_scatter(x, src, size, stride, storage_offset=None):
    """``torch.as_strided_scatter(x, src, size, stride, offset)`` (what functionalization makes of
    an in-place write through an ``as_strided`` view): a copy of ``x`` laid out as eager lays out
    ``x.clone()``, with ``src`` written at storage positions ``offset + sum(i*stride)`` of that
    copy. The aten op, on ``x`` with exactly the strides of its FX meta value, so that its clone
    has eager's storage order (tilefuse's contiguous ``x`` of a transposed eager value would put
    ``src`` at other elements). ``_in_eager_layout`` gives ``x`` those strides."""
    g = G.graph()
    arg = g.current_node.args[0]
    meta = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(meta, torch.Tensor):
        raise NotImplementedError("as_strided_scatter of a value without a meta tensor")
    return g.fallback(
        aten.as_strided_scatter.default,
        (_in_eager_layout(x, meta, False), src, list(size), list(stride), storage_offset),
        {},
    )
