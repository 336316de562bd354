"""Views: lazy re-indexings of another node (``GenericView``) and strided views of stored
buffers (``ReinterpretView``), the view functions lowerings call (permute, expand, reshape, slice,
squeeze, unsqueeze), and ``realize_input``, which turns any node into what an extern kernel takes.

A view of a realized buffer becomes a ``ReinterpretView`` (same storage, new layout) whenever the
view is strided; other views stay lazy and re-index their input's loader. Comparisons between
symbolic sizes go through ``SizeVars``, which proves them or records a guard.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .. import sizevars as SV
from .. import symbolic as S
from ..virtualized import ops
from .buffers import Buffer, FixedLayout, Index, IRNode, Layout, contiguous_strides, digits, prod
from .loops import Pointwise, StorageBox, TensorBox


class BaseView(IRNode):
    """A view of another node: dtype and device are its input's; realizing realizes the input."""

    def __init__(self, data: IRNode):
        self.data = data

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def realize(self):
        return self.data.realize()


class GenericView(BaseView):
    """A lazy view: ``size`` and ``reindex(new_index) -> old_index``. ``layout_fn``, when the view
    is strided, maps the layout of its input (once stored) to the view's layout; it returns None
    when that input layout does not allow it (a reshape of non-contiguous storage)."""

    def __init__(
        self,
        data: IRNode,
        size: list,
        reindex: Callable[[Index], Index],
        layout_fn: Callable[["Layout"], "Layout | None"] | None = None,
    ):
        super().__init__(data)
        self.size, self.reindex = list(size), reindex
        self.layout_fn = layout_fn

    def get_size(self):
        return self.size

    def make_loader(self):
        inner, reindex = self.data.make_loader(), self.reindex
        return lambda index: inner(reindex(index))


class ReinterpretView(BaseView):
    """Storage of ``data`` (a Buffer) under another FixedLayout (as_strided)."""

    def __init__(self, data: Buffer, layout: Layout):
        super().__init__(data)
        self.layout = layout

    def get_size(self):
        return self.layout.size

    def get_name(self):
        return self.data.get_name()

    def make_loader(self):
        indexer, name = self.layout.make_indexer(), self.data.get_name()
        return lambda index: ops.load(name, indexer(index))


def unwrap_storage(x: IRNode) -> IRNode:
    """The node inside any TensorBox/StorageBox wrappers."""
    while isinstance(x, (TensorBox, StorageBox)):
        x = x.data
    return x


def as_storage_and_layout(x: IRNode) -> tuple[Buffer, Layout] | None:
    """(buffer, layout) when ``x`` is a realized buffer or a ReinterpretView of one (freezing a
    flexible layout); None for lazy values and lazy views."""
    if isinstance(x, TensorBox):
        x = x.data
    if isinstance(x, StorageBox):
        if isinstance(x.data, Buffer) and x.data.layout is not None:
            x.data.freeze_layout()
            return x.data, x.data.layout
        return None
    if isinstance(x, ReinterpretView):
        return unwrap_storage(x.data), x.layout
    if isinstance(x, Buffer) and x.layout is not None:
        x.freeze_layout()
        return x, x.layout
    return None


def _view(x: IRNode, size: list, reindex: Callable, layout_fn: Callable[[Layout], Layout] | None) -> "TensorBox":
    """A view of x: a ReinterpretView when x is stored and the view is strided, else lazy."""
    if isinstance(x, TensorBox):
        x = x.data
    sl = as_storage_and_layout(x)
    if sl is not None and layout_fn is not None:
        buf, layout = sl
        new = layout_fn(layout)
        if new is not None:
            return TensorBox(ReinterpretView(buf, new))
    return TensorBox(GenericView(x, size, reindex, layout_fn))


def permute_view(x: IRNode, dims: Sequence[int]) -> "TensorBox":
    """``x.permute(dims)``."""
    size = x.get_size()
    n = len(size)
    dims = [d % n if n else d for d in dims]
    if sorted(dims) != list(range(n)):
        raise ValueError(f"permute dims {list(dims)} are not a permutation of range({n})")
    new_size = [size[d] for d in dims]
    inv = [dims.index(i) for i in range(n)]

    def reindex(index):
        return [index[inv[i]] for i in range(n)]

    def layout_fn(L: Layout):
        return FixedLayout(L.device, L.dtype, new_size, [L.stride[d] for d in dims], L.offset)

    out = _view(x, new_size, reindex, layout_fn)
    if isinstance(out.data, GenericView):
        out.data.permutation = list(dims)  # read by lowerings that treat transposes specially
    return out


def expand_view(x: IRNode, size: Sequence[int]) -> "TensorBox":
    """``x.expand(size)`` (-1 keeps a dim; new leading dims broadcast)."""
    old = x.get_size()
    size = list(size)
    skip = len(size) - len(old)
    if skip < 0:
        raise ValueError(f"cannot expand a tensor of shape {old} to fewer dims {size}")
    new = [old[i - skip] if (i >= skip and isinstance(s, int) and s == -1) else s for i, s in enumerate(size)]
    for i, o in enumerate(old):
        if o != 1 and o != new[i + skip]:
            if isinstance(o, int) and isinstance(new[i + skip], int):
                raise ValueError(f"cannot expand shape {old} to {new}")
            new[i + skip] = SV.current().guard_equals(o, new[i + skip])
    if new == list(old):
        return x if isinstance(x, TensorBox) else TensorBox(x)

    def reindex(index):
        out = list(index[skip:])
        for i, o in enumerate(old):
            if o == 1 and new[i + skip] != 1:
                out[i] = S.Integer(0)
        return out

    def layout_fn(L: Layout):
        st = [0] * skip + [0 if (o == 1 and new[i + skip] != 1) else L.stride[i] for i, o in enumerate(old)]
        return FixedLayout(L.device, L.dtype, new, st, L.offset)

    return _view(x, new, reindex, layout_fn)


def view_strides(old_size: Sequence[int], old_stride: Sequence[int], new_size: Sequence[int]) -> list[int] | None:
    """Strides under which storage laid out as (``old_size``, ``old_stride``) reads as
    ``new_size`` in row-major order, or None when no strides can (``Tensor.view``'s rule: a reshape
    is a strided view when every group of old dims that new dims merge or split is itself
    contiguous in memory). Sizes must have equal products."""
    old_size, old_stride, new_size = list(old_size), list(old_stride), list(new_size)
    sv = SV.current()
    if prod(new_size) == 0 or not old_size:
        return contiguous_strides(new_size)
    new_stride = [0] * len(new_size)
    v = len(new_size) - 1
    # walk the old dims from the innermost, in chunks that are contiguous among themselves
    base = old_stride[-1]
    chunk_numel = 1
    view_numel = 1
    for d in range(len(old_size) - 1, -1, -1):
        chunk_numel *= old_size[d]
        # Symbolic sizes: every decision is taken on the hints without a guard, except the facts
        # the returned strides rely on (a chunk is contiguous; the view dims fill it exactly), which
        # are proven or guarded; a wrong "no" only leaves the reshape a lazy view, correct anyway.
        chunk_ends = d == 0 or (old_size[d - 1] != 1 and not sv.equals_or_false(old_stride[d - 1], chunk_numel * base))
        if not chunk_ends:
            continue
        while v >= 0 and (new_size[v] == 1 or sv.hint(view_numel) < sv.hint(chunk_numel)):
            new_stride[v] = view_numel * base
            view_numel *= new_size[v]
            v -= 1
        if not sv.equals_or_false(view_numel, chunk_numel):
            return None
        if d > 0:
            base = old_stride[d - 1]
            chunk_numel = 1
            view_numel = 1
    return new_stride if v == -1 else None


def reshape_view(x: IRNode, size: Sequence[int]) -> "TensorBox":
    """``x.reshape(size)``: strided when the stored input is contiguous, else a lazy view that maps
    the new index to the flat position and from it to the old index (FloorDiv/ModularIndexing)."""
    old = list(x.get_size())
    size = list(size)
    sv = SV.current()
    k = next((i for i, s in enumerate(size) if isinstance(s, int) and s == -1), None)
    if k is not None:
        rest = prod(s for i, s in enumerate(size) if i != k)
        size[k] = SV.static_or_expr(S.CleanDiv(prod(old), rest)) if rest != 0 else 0
        if isinstance(size[k], S.Expr) and not sv.statically_known_multiple_of(prod(old), rest):
            sv.guard_equals(size[k] * rest, prod(old))
    if prod(size) != prod(old) and not sv.evaluate_equals(prod(size), prod(old)):
        raise ValueError(f"cannot reshape a tensor of shape {old} to {size}")
    if size == old:
        return x if isinstance(x, TensorBox) else TensorBox(x)
    new_strides = contiguous_strides(size)
    old_strides = contiguous_strides(old)
    groups = None
    if not all(isinstance(v, int) for v in (*old, *size)):
        groups = reshape_groups(old, size)

    def reindex(index):
        if prod(old) == 0:  # an empty tensor: nothing is ever read (and a 0 modulus is invalid)
            return [S.Integer(0)] * len(old)
        if groups is not None:
            out = []
            for oi, ni in groups:
                flat = S.Integer(0)
                for j, st in zip(ni, contiguous_strides([size[j] for j in ni])):
                    flat = flat + index[j] * st
                out.extend(digits(flat, [old[i] for i in oi]))
            return out
        flat = S.Integer(0)
        for i, st in zip(index, new_strides):
            flat = flat + i * st
        out = []
        for s, st in zip(old, old_strides):
            if s == 1:
                out.append(S.Integer(0))
            else:
                out.append(S.ModularIndexing(flat, st, s))
        return out

    def layout_fn(L: Layout) -> Layout | None:
        st = view_strides(list(L.size), list(L.stride), size)
        return FixedLayout(L.device, L.dtype, size, st, L.offset) if st is not None else None

    return _view(x, size, reindex, layout_fn)


def reshape_groups(old: list, new: list) -> list | None:
    """The dims of a reshape in matching groups, outermost first: ``[(old dims, new dims), ...]``
    with equal size products per group (a dim kept, several merged, one split), or None when the
    shapes do not decompose so (then the reshape indexes through the flat position). Used for
    symbolic shapes, where the flat position's digits do not simplify without relational facts:
    ``[s0*s1, 64] -> [s0, s1*64]`` does not decompose, ``[s0, s1, 64] -> [s0, s1*64]`` does.
    Products are compared by hints; a group's equality is proven or guarded."""
    sv = SV.current()
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        oi, ni = [], []
        po = pn = 1
        while True:
            if (not oi or sv.hint(po) < sv.hint(pn)) and i < len(old):
                po, i = po * old[i], i + 1
                oi.append(i - 1)
            elif (not ni or sv.hint(pn) < sv.hint(po)) and j < len(new):
                pn, j = pn * new[j], j + 1
                ni.append(j - 1)
            else:
                break
            if oi and ni and sv.hint(po) == sv.hint(pn):
                # size-1 dims that follow join this group (they do not change its product)
                while i < len(old) and old[i] == 1:
                    oi.append(i)
                    i += 1
                while j < len(new) and new[j] == 1:
                    ni.append(j)
                    j += 1
                break
        if not oi or not ni or not sv.equals_or_false(po, pn):
            return None
        groups.append((oi, ni))
    return groups


def slice_bounds(n, start, end) -> tuple:
    """``start``/``end`` (None, negative, or past the end) of a slice of a dim of length ``n``,
    clamped as Python slicing does: ``0 <= start <= end <= n``. With symbolic values each
    comparison is proven or decided by the hints and guarded (the loosest guard that keeps the
    answer: ``end <= n`` rather than ``end < n``)."""
    start = 0 if start is None else start
    end = n if end is None else end
    if all(isinstance(v, int) for v in (n, start, end)):
        start = max(0, min(n, start + n if start < 0 else start))
        return start, max(start, min(n, end + n if end < 0 else end))
    sv = SV.current()

    def clamp(v, lo):
        if isinstance(v, int) and v >= 2**62:  # "to the end" (sys.maxsize)
            return n
        # a negative bound counts from the end: symbolic ones too (-s0, s0 - 8 at a small s0)
        if (v < 0) if isinstance(v, int) else sv.evaluate_lt(v, 0):
            v = v + n
        if sv.evaluate_lt(v, lo):
            return lo
        return v if (v != n and sv.evaluate_leq(v, n)) else n

    start = SV.static_or_expr(clamp(start, 0))
    return start, SV.static_or_expr(clamp(end, start))


def slice_view(x: IRNode, dim: int, start: int, end: int, step: int = 1) -> "TensorBox":
    """``x[..., start:end:step, ...]`` along ``dim`` (negative and out-of-range bounds clamp as
    Python slicing does)."""
    size = list(x.get_size())
    dim = dim % len(size)
    if step <= 0:
        raise ValueError(f"slice step must be positive, got {step}")
    n = size[dim]
    start, end = slice_bounds(n, start, end)
    if isinstance(end - start, int):
        new_n = (end - start + step - 1) // step
    else:
        new_n = SV.static_or_expr(S.FloorDiv(end - start + step - 1, step) if step != 1 else end - start)
    if start == 0 and end == n and step == 1:
        return x if isinstance(x, TensorBox) else TensorBox(x)
    new_size = size[:dim] + [new_n] + size[dim + 1 :]

    def reindex(index):
        out = list(index)
        out[dim] = index[dim] * step + start
        return out

    def layout_fn(L: Layout):
        st = list(L.stride)
        off = L.offset + st[dim] * start
        st[dim] = st[dim] * step
        return FixedLayout(L.device, L.dtype, new_size, st, off)

    return _view(x, new_size, reindex, layout_fn)


def squeeze_view(x: IRNode, dims: Sequence[int] | None = None) -> "TensorBox":
    """Drop size-1 dims (all, or those of ``dims`` that have size 1)."""
    size = list(x.get_size())
    if dims is None:
        drop = [i for i, s in enumerate(size) if s == 1]
    else:
        drop = [d % len(size) for d in dims if size[d % len(size)] == 1] if size else []
    return reshape_view(x, [s for i, s in enumerate(size) if i not in drop])


def unsqueeze_view(x: IRNode, dim: int) -> "TensorBox":
    """``x.unsqueeze(dim)`` (negative dims count from the end of the result)."""
    size = list(x.get_size())
    dim = dim % (len(size) + 1)
    return reshape_view(x, size[:dim] + [1] + size[dim:])


# ------------------------------------------------------------------------------------------ extern kernel inputs


def _strided_view_chain(x: IRNode) -> tuple["StorageBox", list] | None:
    """(storage, layout functions innermost first) when ``x`` is a chain of strided lazy views of
    a StorageBox; None otherwise."""
    fns = []
    while isinstance(x, GenericView) and x.layout_fn is not None:
        fns.append(x.layout_fn)
        x = x.data
        if isinstance(x, TensorBox):
            x = x.data
    if isinstance(x, StorageBox) and fns:
        return x, fns[::-1]
    return None


def realize_input(x: IRNode) -> IRNode:
    """A node an extern kernel can take: a realized buffer or a ReinterpretView of one. A strided
    view (permute, slice, expand, contiguous reshape) of a lazy value realizes the value itself
    and passes a ReinterpretView — as Inductor does, so ``mm(y.t(), w)`` of a computed ``y`` reads
    ``y``'s buffer instead of recomputing ``y`` transposed into a copy; anything else is computed
    into a new contiguous buffer first."""
    if isinstance(x, TensorBox):
        if isinstance(x.data, StorageBox):
            x.data.realize()
            return x.data.data
        if isinstance(x.data, ReinterpretView):
            return x.data
        x = x.data
    if isinstance(x, (Buffer, ReinterpretView)):
        return x
    chain = _strided_view_chain(x)
    if chain is not None:
        box, fns = chain
        box.realize()
        sl = as_storage_and_layout(box)
        if sl is not None:
            buf, layout = sl
            for fn in fns:
                layout = fn(layout) if layout is not None else None
            if layout is not None:
                return ReinterpretView(buf, layout)
    size = list(x.get_size())
    copy = Pointwise(x.get_device(), x.get_dtype(), x.make_loader(), size)
    box = StorageBox(copy)
    box.realize()
    return box.data
