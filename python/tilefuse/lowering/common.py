"""Builders the op families share: broadcasting, dtype conversion of loaded values, the
pointwise and reduction builders ``make_pointwise`` and ``make_reduction``, constant fills, and the clamped/masked index helpers of
select-style and gather-style ops.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch._prims_common import elementwise_dtypes

from .. import config
from .. import sizevars as SV
from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.dtypes import accumulator_dtype, is_half_precision
from ..ir.nodes import Pointwise, Reduction, TensorBox, prod
from ..sizevars import SymbolicFloat
from ..virtualized import ops
from .registry import DEFAULT, NO_OPMATH, _meta, is_tensor


def broadcast_shapes(*shapes):
    """torch's broadcast of ``shapes`` as a list; raises RuntimeError when incompatible. Symbolic
    sizes broadcast as in torch with dynamic shapes: a size-1 dim takes the other size, equal
    sizes stay, and two different symbolic sizes are asserted equal (a guard)."""
    first = shapes[0]
    if all(sh == first for sh in shapes):  # the common case: nothing to broadcast
        return list(first)
    rank = max(len(sh) for sh in shapes)
    out: list = [1] * rank
    for sh in shapes:
        for i, d in enumerate(sh, rank - len(sh)):
            o = out[i]
            if d == 1:
                continue
            if o == 1:
                out[i] = d
            elif o != d:
                if isinstance(o, int) and isinstance(d, int):
                    raise RuntimeError(f"shapes {[list(x) for x in shapes]} do not broadcast (dim {i}: {o} vs {d})")
                out[i] = SV.current().guard_equals(o, d)
    return out


def _device(args) -> torch.device:
    for a in args:
        if is_tensor(a):
            return a.get_device()
    return G.graph().default_device


def _as_device(device) -> torch.device:
    """A factory op's ``device=`` argument as a full device: ``"cuda"`` -> the current CUDA device
    (so it compares equal to the devices of CUDA tensors); None -> the device of the node's meta
    value (an aten factory called without a device makes a CPU tensor, whatever
    ``torch.set_default_device`` says), else the graph's. A device of another type than the
    graph's raises NotImplementedError: the op runs as its aten kernel (a graph's kernels all run
    on its device)."""
    if device is None:
        node = G.graph().current_node
        meta = node.meta.get("val") if node is not None else None
        d = meta.device if isinstance(meta, torch.Tensor) else _device([])
    else:
        d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    if d.type != G.graph().default_device.type:
        raise NotImplementedError(f"a {d.type} tensor made in a {G.graph().default_device.type} graph")
    return d


def to_dtype_value(v, dtype: torch.dtype):
    """``v`` (an ops value) converted to ``dtype``; no op when it already has it."""
    return v if v.dtype == dtype else ops.to_dtype(v, dtype)


def _sv():
    """The SizeVars of the graph being lowered."""
    return SV.current()


def _size_value(n, dtype: torch.dtype):
    """A size (an element count) as a value of ``dtype`` in a loop body: a constant, or computed
    from the kernel's size arguments when symbolic."""
    if isinstance(n, S.Expr) and not n.is_number:
        return ops.index_expr(n, dtype)
    return ops.constant(float(int(n)) if dtype.is_floating_point else int(n), dtype)


def make_pointwise(fn: Callable, kind=DEFAULT, out_dtype: torch.dtype | None = None, compute_dtype=None):
    """A lowering for an elementwise op: broadcast, promote, load each input converted to the
    computation dtype, apply ``fn`` (ops calls) and convert to the result dtype."""

    def lower(*args):
        tensors = [a for a in args if is_tensor(a)]
        # all operands Python numbers (``aten.div(1024, 100)``): a 0-d result, as eager wraps them
        shape = broadcast_shapes(*[t.get_size() for t in tensors]) if tensors else []
        cdt, rdt = elementwise_dtypes(*[_meta(a) for a in args], type_promotion_kind=kind)
        if compute_dtype is not None:
            cdt = compute_dtype
        if out_dtype is not None:
            rdt = out_dtype
        device = tensors[0].get_device() if tensors else _device([])
        for t in tensors:
            _realize_costly_broadcast(t, shape)
        loaders = []
        for a in args:
            if is_tensor(a):
                loaders.append((ir.expand_view(a, shape).make_loader(), a.get_dtype()))
            else:
                loaders.append((None, a))

        def inner(idx):
            vals = []
            for ld, a in loaders:
                if ld is None:
                    vals.append(ops.constant(a, cdt))
                else:
                    vals.append(to_dtype_value(ld(idx), cdt))
            r = fn(*vals)
            return to_dtype_value(r, rdt)

        return Pointwise.create(device, rdt, inner, shape)

    return lower


# the broadcast-operand rule (``_realize_costly_broadcast``): an operand read at least this many
# times per element it holds, in a result of at least this many elements
BROADCAST_REUSE_FACTOR = 8
BROADCAST_MIN_NUMEL = 65536
# ops of tens of instructions each (libdevice calls, range reductions, a polynomial): an operand
# computing one is worth a buffer when the result reads it that many times per element. Not exp and
# log, which Triton compiles to one approximate instruction each (ex2 / lg2) and a multiplication
TRANSCENDENTAL_OPS = frozenset(
    {
        "sin", "cos", "tan", "tanh", "erf", "erf_poly", "erfinv", "expm1", "log1p", "log10",
        "atan", "atan2", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "lgamma", "digamma",
    }
)  # fmt: skip


def _realize_costly_broadcast(t, shape: list) -> None:
    """Realize the lazily computed operand ``t`` of an elementwise op of result ``shape`` when
    the op reads it through a broadcast (each of its elements read ``BROADCAST_REUSE_FACTOR``
    times or more, in a result of ``BROADCAST_MIN_NUMEL`` elements or more) and computing it
    takes ``config.realize_broadcast_opcount`` ops or more (loads excluded) on a reduction's
    result: its values are then stored once, by the kernel of that reduction (a small buffer
    over the reduction's output positions, fused there as its epilogue), and loaded, where
    inlined they would be recomputed for every element of the result. Operands made from
    graph inputs alone (a batch norm's per-channel scale from its parameters) stay inlined:
    realized, they would need a kernel launch of their own.
    A global response norm's ``sqrt(Σx²) / (mean + eps)`` per (image, channel), inlined into
    the scaling of every pixel, made that kernel bound by its arithmetic instead of its memory
    traffic. An operand computing a transcendental function (``TRANSCENDENTAL_OPS``: a rotary
    embedding's ``cos`` and ``sin`` of position x frequency, read once per attention head) is
    realized whatever it reads, in a kernel of its own if need be: one evaluation per value
    instead of one per head. Inductor inlines such operands (its reuse rule counts readers,
    not reads)."""
    data = t.data if isinstance(t, TensorBox) else None
    while isinstance(data, ir.BaseView):  # the expand / unsqueeze of a per-row value
        data = data.data
    if not isinstance(data, ir.StorageBox) or not isinstance(data.data, Pointwise):
        return
    sv = G.graph().sizevars
    small, big = sv.hint(prod(data.data.get_size())), sv.hint(prod(shape))
    if big < BROADCAST_MIN_NUMEL or small * BROADCAST_REUSE_FACTOR > big:
        return
    pw = data.data
    if pw.op_names() & TRANSCENDENTAL_OPS:
        data.realize()
        return
    if pw.op_count() - pw.num_reads() < config.realize_broadcast_opcount:
        return
    bufs = G.graph().name_to_buffer
    if any(isinstance(getattr(bufs.get(n), "data", None), Reduction) for n in pw.read_names()):
        data.realize()


def _binary(name, kind=DEFAULT):
    return make_pointwise(lambda a, b: getattr(ops, name)(a, b), kind)


def _unary(name, kind=DEFAULT):
    return make_pointwise(lambda a: getattr(ops, name)(a), kind)


def _to_dtype_lowering(x, dtype):
    if dtype is None or dtype == x.get_dtype():
        return make_pointwise(lambda a: a, NO_OPMATH, out_dtype=x.get_dtype(), compute_dtype=x.get_dtype())(x)
    loader = x.make_loader()
    return Pointwise.create(x.get_device(), dtype, lambda idx: ops.to_dtype(loader(idx), dtype), list(x.get_size()))


def _full(size, value, dtype, device):
    # a float of symbolic sizes (``full((n,), s0 / 3)``) is a float fill as a Python float is
    dtype = dtype or (
        torch.get_default_dtype()
        if isinstance(value, (float, SymbolicFloat))
        else torch.bool
        if isinstance(value, bool)
        else torch.int64
    )
    return Pointwise.create(_as_device(device), dtype, lambda idx: ops.constant(value, dtype), list(size))


def _index_loader(index: TensorBox, size: int, shape: list | None = None, wrap_negative: bool = True):
    """Loader of an integer index tensor turned into an index symbol per element
    (``ops.indirect_indexing``: negative values wrap, out-of-range ones trip a device assert)."""
    if index.get_dtype() not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise NotImplementedError(f"indexing with a {index.get_dtype()} tensor")  # bool masks: fallback
    ld = (ir.expand_view(index, shape) if shape is not None else index).make_loader()
    return lambda idx: ops.indirect_indexing(ld(idx), size, True, wrap_negative)


#
# cat / constant_pad_nd / slice_scatter / scatter of a value compute each output element from one
# of several sources chosen by its index: a pointwise ``where`` over the sources. Every source is
# loaded at its index clamped into range (Max/Min in the index expression), so no load leaves its
# buffer in lanes where another source is selected (Inductor masks those loads instead).


def _in_range(e, lo: int, hi: int):
    """ops value: lo <= e < hi for an index expression e."""
    v = ops.index_expr(e, torch.int64)
    return ops.logical_and(ops.ge(v, ops.constant(lo, torch.int64)), ops.lt(v, ops.constant(hi, torch.int64)))


def _clamped(e, n):
    """``e`` clamped into ``[0, n - 1]`` (an index into a dim of length ``n``, int or symbolic)."""
    hi = S.Integer(max(n - 1, 0)) if isinstance(n, int) else n - 1
    return S.Max(S.Integer(0), S.Min(e, hi))


def _reduction_dims(x, dims) -> list[int]:
    n = len(x.get_size())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(n))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % n if n else 0 for d in dims}) if n else []


def _reduction_inner(x, rdims: list[int], val_dtype: torch.dtype) -> Callable:
    """The body of a reduction of ``x`` over ``rdims``: ``inner(idx, ridx)`` loads ``x`` at the kept
    dims' index ``idx`` and the reduced dims' ``ridx``, converted to ``val_dtype`` (a bool
    ``val_dtype`` tests ``!= 0``, as ``any``)."""
    size = list(x.get_size())
    kept = [i for i in range(len(size)) if i not in rdims]
    loader = x.make_loader()

    def inner(idx, ridx):
        full = [None] * len(size)
        for k, i in enumerate(kept):
            full[i] = idx[k]
        for k, i in enumerate(rdims):
            full[i] = ridx[k]
        v = loader(full)
        if val_dtype == torch.bool and v.dtype != torch.bool:
            return ops.ne(v, ops.constant(0, v.dtype))
        return to_dtype_value(v, val_dtype)

    return inner


def make_reduction(reduction_type: str, allow_split: bool = True):
    """A lowering for sum/prod/amax/amin/any/argmax/argmin/sqdev over ``dims`` (all when empty);
    ``allow_split``: see ``Reduction.create``."""

    def lower(x, dims=None, keepdim=False, *, dtype=None):
        size = list(x.get_size())
        rdims = _reduction_dims(x, dims)
        if reduction_type in ("argmax", "argmin") and dims is None:
            # torch flattens first
            x = ir.reshape_view(x, [prod(size)])
            size, rdims = [prod(size)], [0]
        kept = [i for i in range(len(size)) if i not in rdims]
        ranges = [size[i] for i in kept]
        rranges = [size[i] for i in rdims]
        src = x.get_dtype()
        if reduction_type in ("sum", "prod", "sqdev"):
            out = dtype or (torch.int64 if (not src.is_floating_point and not src.is_complex) else src)
        elif reduction_type in ("argmax", "argmin"):
            out = torch.int64
        elif reduction_type == "any":
            out = torch.uint8 if src == torch.uint8 else torch.bool  # torch: any/all of uint8 is uint8
        else:
            out = src
        acc = accumulator_dtype(out)
        if reduction_type in ("max", "min", "argmax", "argmin") and is_half_precision(src):
            val_dtype = torch.float32
        elif reduction_type in ("argmax", "argmin"):
            val_dtype = src
        elif reduction_type == "any":
            val_dtype = torch.bool
        else:
            val_dtype = acc
        inner = _reduction_inner(x, rdims, val_dtype)
        rtype = {"amax": "max", "amin": "min"}.get(reduction_type, reduction_type)
        res = Reduction.create(
            x.get_device(),
            {"argmax": out, "argmin": out, "any": torch.bool}.get(rtype, acc),
            inner,
            ranges,
            rranges,
            rtype,
            val_dtype,
            allow_split=allow_split,
        )
        if res.get_dtype() != out:
            res = _to_dtype_lowering(res, out)
        if keepdim:
            ksize = [1 if i in rdims else s for i, s in enumerate(size)]
            res = ir.reshape_view(res, ksize)
        return res

    return lower
