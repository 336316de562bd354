"""Lowerings: aten op -> IR (Inductor's ``lowering.py``).

``lowerings`` maps an aten OpOverload (or OpOverloadPacket, matching every overload) to a function
taking the op's arguments — tensors as ``TensorBox`` — and returning a TensorBox (or a tuple).
An op with no entry runs as a FallbackKernel (``graph.py``). Type promotion follows torch's
``elementwise_dtypes``; low-precision floats compute in float32 (opmath), as eager does.

Gather-style ops (embedding, index_select, gather, ``x[idx]``) load through
``ops.indirect_indexing`` and fuse with their consumers; select-style ops (cat, constant_pad_nd,
slice_scatter, one-hot scatter) are pointwise ``where``s over clamped source indices. A lowering
raises NotImplementedError for a case it does not handle, and the op then runs as a
FallbackKernel; it raises ValueError/IndexError for arguments torch would reject.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
from typing import Any, Callable

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .. import symbolic as S
from ..sizevars import SymbolicFloat
from ..ir import nodes as ir
from ..ir.nodes import Pointwise, Reduction, TensorBox, prod
from ..virtualized import ops

aten = torch.ops.aten
prims = torch.ops.prims

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
    creating one under the FakeTensorMode lowering runs in cost about a millisecond (0.48 s of a
    2-layer GPT training step's 1.5 s of lowering, measured under cProfile)."""
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
                from .. import sizevars as SV

                out[i] = SV.current().guard_equals(o, d)
    return out


def _device(args) -> torch.device:
    for a in args:
        if is_tensor(a):
            return a.get_device()
    from ..ir import graph_context as G

    return G.graph().default_device


def _as_device(device) -> torch.device:
    """A factory op's ``device=`` argument as a full device: None -> the graph's device, ``"cuda"``
    -> the current CUDA device (so it compares equal to the devices of CUDA tensors)."""
    if device is None:
        return _device([])
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


def to_dtype_value(v, dtype: torch.dtype):
    """``v`` (an ops value) converted to ``dtype``; no op when it already has it."""
    return v if v.dtype == dtype else ops.to_dtype(v, dtype)


def _sv():
    """The SizeVars of the graph being lowered."""
    from .. import sizevars as SV

    return SV.current()


def _size_value(n, dtype: torch.dtype):
    """A size (an element count) as a value of ``dtype`` in a loop body: a constant, or computed
    from the kernel's size arguments when symbolic."""
    if isinstance(n, S.Expr) and not n.is_number:
        return ops.index_expr(n, dtype)
    return ops.constant(float(int(n)) if dtype.is_floating_point else int(n), dtype)


def _scalar_loader(value, dtype):
    return lambda idx: ops.constant(value, dtype)


def make_pointwise(fn: Callable, kind=DEFAULT, out_dtype: torch.dtype | None = None, compute_dtype=None):
    """A lowering for an elementwise op: broadcast, promote, load each input converted to the
    computation dtype, apply ``fn`` (ops calls) and convert to the result dtype."""

    def lower(*args):
        tensors = [a for a in args if is_tensor(a)]
        if not tensors:
            raise TypeError("pointwise lowering needs at least one tensor argument")
        shape = broadcast_shapes(*[t.get_size() for t in tensors])
        cdt, rdt = elementwise_dtypes(*[_meta(a) for a in args], type_promotion_kind=kind)
        if compute_dtype is not None:
            cdt = compute_dtype
        if out_dtype is not None:
            rdt = out_dtype
        device = tensors[0].get_device()
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


def _binary(name, kind=DEFAULT):
    return make_pointwise(lambda a, b: getattr(ops, name)(a, b), kind)


def _unary(name, kind=DEFAULT):
    return make_pointwise(lambda a: getattr(ops, name)(a), kind)


# ---------------------------------------------------------------------------------- arithmetic


def _add_alpha(name):
    def lower(a, b, alpha=1):
        if alpha != 1:
            b = lowerings[aten.mul.Tensor](b, alpha) if is_tensor(b) else b * alpha
        return make_pointwise(lambda x, y: getattr(ops, name)(x, y))(a, b)

    return lower


register_lowering(aten.add)(_add_alpha("add"))
register_lowering(aten.sub)(_add_alpha("sub"))
register_lowering(aten.mul)(_binary("mul"))
register_lowering(aten.div.Tensor, aten.div.Scalar)(_binary("truediv", INT_TO_FLOAT))
register_lowering(aten.maximum)(_binary("maximum"))
register_lowering(aten.minimum)(_binary("minimum"))
register_lowering(aten.fmax)(_binary("fmax"))
register_lowering(aten.fmin)(_binary("fmin"))
register_lowering(aten.remainder)(_binary("remainder"))
register_lowering(aten.fmod)(_binary("fmod"))


def _libdevice_math(name: str, nargs: int):
    """Lowering of a float math op that is a libdevice call on the GPU and a float64 formula
    under the interpreter (codegen's ``_F64_MATH``): float64 results fall back there, as the
    formula would not be exact enough for them."""
    fn = _binary(name, INT_TO_FLOAT) if nargs == 2 else _unary(name, INT_TO_FLOAT)

    def lower(*args):
        if _device(args).type != "cuda":
            _, rdt = elementwise_dtypes(*[_meta(a) for a in args], type_promotion_kind=INT_TO_FLOAT)
            if rdt == torch.float64:
                raise NotImplementedError(f"{name} of float64 under the Triton interpreter")
        return fn(*args)

    return lower


register_lowering(aten.atan2)(_libdevice_math("atan2", 2))
for _name in ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh"):
    register_lowering(getattr(aten, _name))(_libdevice_math(_name, 1))


@register_lowering(aten.__lshift__, aten.bitwise_left_shift)
def _lshift(a, b):
    """``a << b`` on integers (bool and float operands fall back, as torch rejects floats)."""
    if not is_tensor(a) or a.get_dtype().is_floating_point or a.get_dtype() == torch.bool:
        raise NotImplementedError("shift of a non-integer tensor")
    return _binary("lshift")(a, b)


@register_lowering(aten.__rshift__, aten.bitwise_right_shift)
def _rshift(a, b):
    """``a >> b`` on integers: arithmetic for signed types, as torch."""
    if not is_tensor(a) or a.get_dtype().is_floating_point or a.get_dtype() == torch.bool:
        raise NotImplementedError("shift of a non-integer tensor")
    return _binary("rshift")(a, b)


def _pow_result_dtype(a, b) -> torch.dtype:
    return elementwise_dtypes(_meta(a), _meta(b), type_promotion_kind=BOOL_TO_LONG)[1]


@register_lowering(aten.pow.Tensor_Tensor, aten.pow.Scalar)
def _pow(a, b):
    """``a ** b``. An integer result (integer or bool operands, a tensor exponent) is torch's
    ``powi``: square-and-multiply over every bit of the exponent's type (``ops.ipow``; products
    wrap as in eager), and for a negative exponent 1 when ``a == 1``, ±1 when ``a == -1``, else 0."""
    if not _pow_result_dtype(a, b).is_floating_point:
        return _binary("ipow", BOOL_TO_LONG)(a, b)
    return _binary("pow", BOOL_TO_LONG)(a, b)


@register_lowering(aten.pow.Tensor_Scalar)
def _pow_scalar(a, b):
    if isinstance(b, numbers.Number) and float(b).is_integer() and 0 <= b <= 8:
        n = int(b)

        def f(x, _exponent):
            if n == 0:
                return ops.constant(1, x.dtype)
            r = x
            for _ in range(n - 1):
                r = ops.mul(r, x)
            return r

        return make_pointwise(f, BOOL_TO_LONG)(a, b)
    if not _pow_result_dtype(a, b).is_floating_point:
        if isinstance(b, numbers.Number) and b >= 0:
            return _binary("ipow", BOOL_TO_LONG)(a, b)  # a large exponent: powi
        raise NotImplementedError("integer pow with a negative exponent")  # the aten op raises, as eager
    if b == 0.5:
        return make_pointwise(lambda x, _: ops.sqrt(x), BOOL_TO_LONG)(a, b)
    if b == -0.5:
        return make_pointwise(lambda x, _: ops.rsqrt(x), BOOL_TO_LONG)(a, b)
    return make_pointwise(lambda x, y: ops.pow(x, y), BOOL_TO_LONG)(a, b)


@register_lowering(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(a, b, rounding_mode=None):
    if rounding_mode is None:
        return _binary("truediv", INT_TO_FLOAT)(a, b)
    if rounding_mode == "floor":
        return _binary("floordiv")(a, b)
    if rounding_mode == "trunc":
        return _binary("truncdiv")(a, b)
    raise ValueError(f"div: unknown rounding_mode {rounding_mode!r} (expected None, 'trunc' or 'floor')")


for _name, _op, _kind in [
    ("neg", aten.neg, DEFAULT),
    ("abs", aten.abs, DEFAULT),
    ("exp", aten.exp, INT_TO_FLOAT),
    ("exp2", aten.exp2, INT_TO_FLOAT),
    ("expm1", aten.expm1, INT_TO_FLOAT),
    ("log", aten.log, INT_TO_FLOAT),
    ("log2", aten.log2, INT_TO_FLOAT),
    ("log10", aten.log10, INT_TO_FLOAT),
    ("log1p", aten.log1p, INT_TO_FLOAT),
    ("sqrt", aten.sqrt, INT_TO_FLOAT),
    ("rsqrt", aten.rsqrt, INT_TO_FLOAT),
    ("sin", aten.sin, INT_TO_FLOAT),
    ("cos", aten.cos, INT_TO_FLOAT),
    ("tan", aten.tan, INT_TO_FLOAT),
    ("tanh", aten.tanh, INT_TO_FLOAT),
    ("sigmoid", aten.sigmoid, INT_TO_FLOAT),
    ("erf", aten.erf, INT_TO_FLOAT),
    ("reciprocal", aten.reciprocal, INT_TO_FLOAT),
    ("floor", aten.floor, DEFAULT),
    ("ceil", aten.ceil, DEFAULT),
    ("trunc", aten.trunc, DEFAULT),
    ("round", aten.round.default, DEFAULT),
    ("sign", aten.sign, DEFAULT),
    ("relu", aten.relu, DEFAULT),
    ("bitwise_not", aten.bitwise_not, DEFAULT),
]:
    register_lowering(_op)(_unary(_name, _kind))

for _name, _op in [
    ("eq", aten.eq),
    ("ne", aten.ne),
    ("lt", aten.lt),
    ("le", aten.le),
    ("gt", aten.gt),
    ("ge", aten.ge),
    ("logical_and", aten.logical_and),
    ("logical_or", aten.logical_or),
    ("logical_xor", aten.logical_xor),
]:
    register_lowering(_op)(_binary(_name, ALWAYS_BOOL))
for _name, _op in [
    ("bitwise_and", aten.bitwise_and),
    ("bitwise_or", aten.bitwise_or),
    ("bitwise_xor", aten.bitwise_xor),
]:
    register_lowering(_op)(_binary(_name))
register_lowering(aten.logical_not)(_unary("logical_not", ALWAYS_BOOL))
register_lowering(aten.isnan)(_unary("isnan", ALWAYS_BOOL))
register_lowering(aten.isinf)(_unary("isinf", ALWAYS_BOOL))


register_lowering(aten.hypot)(_libdevice_math("hypot", 2))


@register_lowering(aten.signbit)
def _signbit(x):
    """``torch.signbit``: the sign bit (set for -0.0 and negative NaNs; ``x < 0`` for integers)."""
    return make_pointwise(lambda a: ops.signbit(a), ALWAYS_BOOL, compute_dtype=x.get_dtype())(x)


@register_lowering(aten.copysign.Tensor, aten.copysign.Scalar)
def _copysign(a, b):
    """``torch.copysign``: |a| with b's sign bit."""

    def f(x, y):
        ax = ops.abs(x)
        return ops.where(ops.signbit(y), ops.neg(ax), ax)

    return make_pointwise(f, INT_TO_FLOAT)(a, b)


@register_lowering(aten.round.decimals)
def _round_decimals(x, *, decimals=0):
    """``torch.round(x, decimals=d)`` as torch's CPU kernel: nearbyint(x * 10^d) / 10^d, or for
    d < 0 nearbyint(x / 10^-d) * 10^-d."""
    if not x.get_dtype().is_floating_point:
        return _to_dtype_lowering(x, x.get_dtype())
    scale = float(10 ** abs(decimals))

    def f(a):
        c = ops.constant(scale, a.dtype)
        if decimals >= 0:
            return ops.truediv(ops.round(ops.mul(a, c)), c)
        return ops.mul(ops.round(ops.truediv(a, c)), c)

    return make_pointwise(f)(x)


@register_lowering(aten.angle)
def _angle(x):
    """``torch.angle`` of a real tensor: pi for negative values, 0 otherwise, NaN stays NaN."""

    def f(a):
        pi = ops.where(ops.lt(a, ops.constant(0, a.dtype)), ops.constant(math.pi, a.dtype), ops.constant(0.0, a.dtype))
        return ops.where(ops.ne(a, a), a, pi)

    return make_pointwise(f, INT_TO_FLOAT)(x)


@register_lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(cond, a, b):
    def f(c, x, y):
        return ops.where(c, x, y)

    tensors = [t for t in (cond, a, b) if is_tensor(t)]
    shape = broadcast_shapes(*[t.get_size() for t in tensors])
    _, rdt = elementwise_dtypes(_meta(a), _meta(b), type_promotion_kind=NO_OPMATH)
    device = tensors[0].get_device()
    lc = ir.expand_view(cond, shape).make_loader() if is_tensor(cond) else None
    la = ir.expand_view(a, shape).make_loader() if is_tensor(a) else None
    lb = ir.expand_view(b, shape).make_loader() if is_tensor(b) else None

    def inner(idx):
        c = lc(idx) if lc else ops.constant(bool(cond), torch.bool)
        if c.dtype != torch.bool:
            c = ops.ne(c, ops.constant(0, c.dtype))
        x = to_dtype_value(la(idx), rdt) if la else ops.constant(a, rdt)
        y = to_dtype_value(lb(idx), rdt) if lb else ops.constant(b, rdt)
        return f(c, x, y)

    return Pointwise.create(device, rdt, inner, shape)


@register_lowering(aten.clamp, aten.clamp_min, aten.clamp_max)
def _clamp(x, min=None, max=None):
    out = x
    if min is not None:
        out = make_pointwise(lambda a, b: ops.maximum(a, b))(out, min)
    if max is not None:
        out = make_pointwise(lambda a, b: ops.minimum(a, b))(out, max)
    return out


def _to_dtype_lowering(x, dtype):
    if dtype is None or dtype == x.get_dtype():
        return make_pointwise(lambda a: a, NO_OPMATH, out_dtype=x.get_dtype(), compute_dtype=x.get_dtype())(x)
    loader = x.make_loader()
    return Pointwise.create(x.get_device(), dtype, lambda idx: ops.to_dtype(loader(idx), dtype), list(x.get_size()))


@register_lowering(prims.convert_element_type)
def _convert_element_type(x, dtype):
    return _to_dtype_lowering(x, dtype)


@register_lowering(aten._to_copy)
def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    """``x.to(dtype)``; a device transfer runs as the aten op. A Python number ``x`` (functorch's
    ``vmap(grad(...))`` traces ``_to_copy(2.5, dtype=float32)``) is a 0-d tensor of the node's
    meta dtype and device."""
    if not is_tensor(x):
        from ..ir import graph_context as G

        meta = G.graph().current_node.meta.get("val")
        if not isinstance(meta, torch.Tensor):
            raise NotImplementedError("_to_copy of a number without a meta value")
        return _full([], x, meta.dtype, meta.device)
    if device is not None and _as_device(device) != x.get_device():
        raise NotImplementedError("device transfer")  # -> fallback kernel
    return _to_dtype_lowering(x, dtype)


@register_lowering(aten.clone)
def _clone(x, memory_format=None):
    loader = x.make_loader()
    return Pointwise.create(x.get_device(), x.get_dtype(), loader, list(x.get_size()))


@register_lowering(aten.copy.default)
def _copy(x, src, non_blocking=False):
    """``aten.copy(x, src)`` (functionalized ``x.copy_(src)``): ``src`` broadcast to ``x``'s shape
    and converted to ``x``'s dtype."""
    if not is_tensor(src):
        return _full(x.get_size(), src, x.get_dtype(), x.get_device())
    if src.get_device() != x.get_device():
        raise NotImplementedError("copy across devices")
    size = list(x.get_size())
    loader = ir.expand_view(src, size).make_loader()
    dtype = x.get_dtype()
    return Pointwise.create(x.get_device(), dtype, lambda idx: to_dtype_value(loader(idx), dtype), size)


@register_lowering(aten.alias, aten.lift_fresh_copy, aten.detach.default)
def _alias(x):
    """Ops whose result is their input (an alias, a fresh copy nothing else holds, a detached
    view: autograd is AOTAutograd's business, not the kernels')."""
    return x


# ---------------------------------------------------------------------------------- creation


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


@register_lowering(aten.zeros_like, aten.ones_like)
def _zeros_ones_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    from ..ir import graph_context as G

    v = 1 if G.graph().current_target in (aten.ones_like.default,) else 0
    return _full(x.get_size(), v, dtype or x.get_dtype(), device or x.get_device())


@register_lowering(aten.zeros.default, aten.ones.default)
def _zeros_ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    from ..ir import graph_context as G

    v = 1 if G.graph().current_target is aten.ones.default else 0
    return _full(size, v, dtype or torch.get_default_dtype(), device)


@register_lowering(prims.iota)
def _iota(length, *, start, step, dtype, device, requires_grad=False):
    return Pointwise.create(
        _as_device(device), dtype, lambda idx: ops.index_expr(idx[0] * step + start, dtype), [length]
    )


# ---------------------------------------------------------------------------------- randomness


# the largest value below 1 of each half type: float32 uniforms above it would round up to 1.0
_BELOW_ONE = {torch.float16: 1 - 2.0**-11, torch.bfloat16: 1 - 2.0**-8}


def _random(size, dtype, device, kind: str, low: int = 0, high: int = 0, generator=None):
    """A Pointwise of Philox random values (Inductor's ``inductor_random``): element ``i`` (its
    row-major offset in ``size``) is ``tl.rand/randn/randint(seed, i)`` with this op's seed from
    the graph's ``RandomSeeds`` vector, drawn per call from torch's default generator. An explicit
    ``generator`` or more than 2**31 elements fall back to aten."""
    from ..ir import graph_context as G

    if generator is not None:
        raise NotImplementedError("random op with an explicit generator")  # -> fallback
    if kind == "randint" and not dtype.is_floating_point and dtype != torch.bool:
        info = torch.iinfo(dtype)
        if low < info.min or high - 1 > info.max:
            # aten raises its own error for bounds outside the dtype: let it, at run time
            raise NotImplementedError(f"randint bounds [{low}, {high}) outside {dtype}")  # -> fallback
    size = [int(n) for n in size]
    if prod(size) >= 2**31:
        raise NotImplementedError("random op with more than 2**31 elements")
    device = _as_device(device)
    g = G.graph()
    seeds = g.random_seeds
    if seeds is None or seeds.get_device() != device:
        from ..runtime import random_seeds

        seeds = ir.RandomSeeds(
            g.new_buffer_name(),
            ir.FixedLayout(device, torch.int64, [0], [1]),
            random_seeds,
            (0,),
            {"device": device},
            [],
        )
        g.register_buffer(seeds)
        g.random_seeds = seeds
    slot = seeds.add_seed()
    strides = ir.contiguous_strides(size)

    def inner(idx):
        seed = ops.load(seeds.get_name(), S.Integer(slot))
        flat = S.Integer(0)
        for i, st in zip(idx, strides):
            flat = flat + i * st
        offset = ops.index_expr(flat, torch.int32)
        if kind == "randint":
            return to_dtype_value(ops.randint64(seed, offset, low, high), dtype)
        v = getattr(ops, kind)(seed, offset)
        if kind == "rand" and dtype in _BELOW_ONE:
            # [0, 1) must stay below 1 after rounding to a half type
            v = ops.minimum(v, ops.constant(_BELOW_ONE[dtype], torch.float32))
        return to_dtype_value(v, dtype)

    return Pointwise.create(device, dtype, inner, size)


@register_lowering(aten.rand.default, aten.randn.default)
def _rand(size, *, dtype=None, layout=None, device=None, pin_memory=None, generator=None):
    from ..ir import graph_context as G

    kind = "rand" if G.graph().current_target is aten.rand.default else "randn"
    return _random(size, dtype or torch.get_default_dtype(), device, kind, generator=generator)


@register_lowering(aten.rand_like.default, aten.randn_like.default)
def _rand_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, generator=None):
    from ..ir import graph_context as G

    kind = "rand" if G.graph().current_target is aten.rand_like.default else "randn"
    return _random(x.get_size(), dtype or x.get_dtype(), device or x.get_device(), kind, generator=generator)


def _randint_range(low: int, high: int) -> None:
    if high <= low:
        raise ValueError(f"randint: low ({low}) must be below high ({high})")
    if high - low >= 2**31:
        raise NotImplementedError("randint over a range of 2**31 values or more")  # -> fallback


@register_lowering(aten.randint.low)
def _randint_low(low, high, size, *, dtype=None, layout=None, device=None, pin_memory=None, generator=None):
    _randint_range(low, high)
    return _random(size, dtype or torch.int64, device, "randint", low, high, generator)


@register_lowering(aten.randint.default)
def _randint(high, size, *, dtype=None, layout=None, device=None, pin_memory=None, generator=None):
    _randint_range(0, high)
    return _random(size, dtype or torch.int64, device, "randint", 0, high, generator)


@register_lowering(aten.randint_like.low_dtype)
def _randint_like_low(
    x, low, high, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, generator=None
):
    _randint_range(low, high)
    return _random(x.get_size(), dtype or x.get_dtype(), device or x.get_device(), "randint", low, high, generator)


@register_lowering(aten.randint_like.default)
def _randint_like(
    x, high, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, generator=None
):
    _randint_range(0, high)
    return _random(x.get_size(), dtype or x.get_dtype(), device or x.get_device(), "randint", 0, high, generator)


@register_lowering(aten.bernoulli.p)
def _bernoulli_p(x, p=0.5, *, generator=None):
    """``x.bernoulli(p)``: 1 with probability ``p`` (``rand < p``), in ``x``'s dtype."""
    r = _random(x.get_size(), torch.float32, x.get_device(), "rand", generator=generator)
    ld = r.make_loader()
    dt = x.get_dtype()
    return Pointwise.create(
        x.get_device(),
        dt,
        lambda idx: ops.to_dtype(ops.lt(ld(idx), ops.constant(float(p), torch.float32)), dt),
        list(x.get_size()),
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
    from ..ir import graph_context as G

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


# ---------------------------------------------------------------------------------- views


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
    from ..ir import graph_context as G

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


# ---------------------------------------------------------------------------------- reductions


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
        acc = torch.float32 if out in (torch.float16, torch.bfloat16) else out
        if reduction_type in ("max", "min", "argmax", "argmin") and src in (torch.float16, torch.bfloat16):
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


register_lowering(aten.sum.dim_IntList)(make_reduction("sum"))


def _max_and_sumexp(x, dims):
    """``(x in its accumulation dtype, max, Σ exp(x - max))`` over ``dims``, kept as size-1 dims:
    two independent reductions of the same rows (``Reduction`` type sumexp is the online-softmax
    normalizer), so a looped row is read once for both instead of once for the max and once more
    for the sum of exponentials (torch's decomposition: amax, then sum(exp(x - amax))). A 0-d
    ``x`` is taken as one row of one element (the results have shape [1]). Declines
    (NotImplementedError → the aten kernel) non-float inputs and empty rows."""
    dt = x.get_dtype()
    if not dt.is_floating_point:
        raise NotImplementedError(f"softmax family of {dt}")
    size = list(x.get_size())
    if not size:
        x, dims = ir.reshape_view(x, [1]), [0]
        size = [1]
    rdims = _reduction_dims(x, dims)
    if any(isinstance(size[d], int) and size[d] == 0 for d in rdims):
        raise NotImplementedError("softmax family over an empty dim")
    acc = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    xs = x if dt == acc else _to_dtype_lowering(x, acc)
    chunks = _normalizer_chunks(size, rdims)
    if chunks > 1:
        m, d = _chunked_max_and_sumexp(xs, size, rdims[0], chunks)
        return xs, m, d, acc
    # the max is not split for few long rows: the sumexp is never split, and the two share one pass
    return (
        xs,
        make_reduction("amax", allow_split=False)(xs, rdims, True),
        make_reduction("sumexp")(xs, rdims, True),
        acc,
    )


def _normalizer_chunks(size, rdims) -> int:
    """Into how many chunks ``_max_and_sumexp`` cuts each row (1: not cut). A row longer than
    ``config.persistent_reduction_threshold`` would be a looped reduction — an online
    log-sum-exp with one block maximum and one rescale per chunk — which reads memory well below
    the copy bandwidth; cut into the fewest power-of-two count of chunks no longer than the
    threshold, each chunk is a persistent reduction (H200, 8192 rows of 32000 bf16, max and
    sum-exp of each row: looped 157 µs, 78% of the copy bandwidth; 8 persistent chunks of 4000
    and their combination 142 µs, 87%; docs/benchmarks.md). Only one reduced dim, the last, of a
    static length; never with ``config.split_long_normalizers`` off."""
    from .. import config

    if not config.split_long_normalizers:
        return 1
    if len(rdims) != 1 or rdims[0] != len(size) - 1 or not isinstance(size[-1], int):
        return 1
    n, limit = size[-1], config.persistent_reduction_threshold
    if n <= limit:
        return 1
    c = 2
    while -(-n // c) > limit:
        c *= 2
    return c


def _chunked_max_and_sumexp(xs, size, dim: int, chunks: int):
    """The row normalizer pair of ``_max_and_sumexp`` from ``chunks`` chunks of each row (dim
    ``dim``, the last): per chunk its maximum ``m`` and ``s = Σ exp(x - m)`` (persistent
    reductions sharing one kernel); then per row ``M = max m`` — the row's maximum — and
    ``S = Σ s · exp(m - M)`` over its chunks (the exponent against ``M`` with ``-inf`` replaced
    by 0). ``m - M`` is taken before anything is added to it, so rows of huge values (an
    attention row masked with -1e9 or the dtype's minimum) keep every chunk's share: combining the
    chunks' log-sum-exps ``m + log s`` instead rounds ``log s`` away at that magnitude (a row of
    5000 × -1e9 in 4 chunks gave a softmax summing to 2500). Special rows as the unsplit pair:
    only ``-inf`` gives ``M = -inf`` and ``S = 0``, a ``+inf`` gives ``M = +inf`` and ``S`` NaN,
    a NaN gives NaN. Positions past the row's end in the last chunk read ``-inf``; a chunk of
    ``-inf`` only adds 0 to ``S``."""
    n = size[dim]
    chunk = -(-n // chunks)
    kept = list(size[:dim])
    load = xs.make_loader()
    acc = xs.get_dtype()

    def chunked(idx):
        pos = idx[-2] * chunk + idx[-1]
        if chunk * chunks == n:
            return load(list(idx[:-2]) + [pos])
        return ir.masked_tail(lambda p: load(list(idx[:-2]) + [p]), pos, n, float("-inf"))

    view = Pointwise.create(xs.get_device(), acc, chunked, kept + [chunks, chunk])
    last = len(kept) + 1
    m = ir.reshape_view(make_reduction("amax", allow_split=False)(view, [last], True), kept + [chunks])
    s = ir.reshape_view(make_reduction("sumexp")(view, [last], True), kept + [chunks])
    big_m = make_reduction("amax", allow_split=False)(m, [len(kept)], True)  # kept + [1]
    m_load, s_load, big_m_load = m.make_loader(), s.make_loader(), big_m.make_loader()
    ninf = float("-inf")

    def share(idx):
        mv, sv, top = m_load(idx), s_load(idx), big_m_load(list(idx[:-1]) + [S.Integer(0)])
        base = ops.where(ops.eq(top, ops.constant(ninf, acc)), ops.constant(0.0, acc), top)
        # a chunk whose maximum is -inf (every element -inf, or wholly past the row's end, as when
        # a short threshold cuts a 5-element row into 8 chunks of 1) adds nothing: its own s is
        # exp(-inf - (-inf)), NaN, which would otherwise make the row's S NaN
        return ops.where(
            ops.eq(mv, ops.constant(ninf, acc)), ops.constant(0.0, acc), ops.mul(sv, ops.exp(ops.sub(mv, base)))
        )

    shares = Pointwise.create(xs.get_device(), acc, share, kept + [chunks])
    big_s = make_reduction("sum")(shares, [len(kept)], True)
    return big_m, big_s


def _node_arg(n, pos: int, name: str, default=None):
    """Argument ``name`` of FX node ``n`` (positional ``pos`` or keyword)."""
    return n.args[pos] if len(n.args) > pos else n.kwargs.get(name, default)


def online_normalizers(gm) -> dict:
    """The row normalizers of ``gm`` written out as torch's decomposition of log_softmax writes
    them: ``s = sum(exp(x - m), dims, keepdim=True)`` with ``m = amax(x, dims, keepdim=True)``
    (the same ``x`` node, the same dims, float32/float64 ``x``). Returns a map from each such
    ``amax`` node and ``sum`` node to ``(x node, dims)``: ``GraphLowering`` lowers the two as one
    pair (``max_and_sumexp_pair``), so a row is read once for both and a long row is reduced per
    chunk, instead of a max reduction and then a second pass summing ``exp(x - m)``. The pattern is
    Inductor's ``prepare_softmax_pattern`` (its post-grad replacement by
    ``prepare_softmax_online``); it is matched here after AOTAutograd's partitioner, which so
    still sees the plain amax/sub/exp/sum ops it may recompute around."""
    out: dict = {}
    for s in gm.graph.nodes:
        if s.op != "call_function" or s.target is not aten.sum.dim_IntList:
            continue
        if not _node_arg(s, 2, "keepdim", False) or s.kwargs.get("dtype") is not None:
            continue
        e = s.args[0]
        if not (isinstance(e, torch.fx.Node) and e.target is aten.exp.default):
            continue
        d = e.args[0]
        if not (
            isinstance(d, torch.fx.Node)
            and d.target is aten.sub.Tensor
            and d.kwargs.get("alpha", 1) == 1
            and len(d.args) == 2
        ):
            continue
        x, m = d.args
        if not (
            isinstance(m, torch.fx.Node)
            and m.target is aten.amax.default
            and m.args[0] is x
            and _node_arg(m, 2, "keepdim", False)
        ):
            continue
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor) or val.dtype not in (torch.float32, torch.float64) or val.dim() == 0:
            continue
        rank = val.dim()
        dims_s, dims_m = _node_arg(s, 1, "dim"), _node_arg(m, 1, "dim", [])
        if not dims_s or not dims_m:
            continue
        norm_s = sorted({int(v) % rank for v in dims_s})
        if norm_s != sorted({int(v) % rank for v in dims_m}):
            continue
        out[m] = out[s] = (x, norm_s)
    return out


def max_and_sumexp_pair(x, dims):
    """``(m, s)`` for a matched ``online_normalizers`` pair: ``m = amax(x, dims, keepdim=True)``
    and ``s = Σ exp(x - m)`` over ``dims`` (keepdim), from ``_max_and_sumexp``'s one-pass (or
    chunked) reductions. A row of only ``-inf`` gives ``s`` NaN, as ``exp(-inf - -inf)`` does in
    the decomposition it replaces (the sum-exp reduction itself gives 0 there). ``x`` float32 or
    float64, of rank >= 1; declines (NotImplementedError) empty rows."""
    _xs, m, d, acc = _max_and_sumexp(x, dims)
    ninf = float("-inf")
    d = make_pointwise(
        lambda mv, dv: ops.where(ops.eq(mv, ops.constant(ninf, acc)), ops.constant(float("nan"), acc), dv),
        NO_OPMATH,
        out_dtype=acc,
        compute_dtype=acc,
    )(m, d)
    return m, d


def _empty_like(x, dtype):
    """An empty ``x``-shaped result (softmax of a tensor with no elements: nothing to compute)."""
    return ir.Pointwise.create(x.get_device(), dtype, lambda idx: ops.constant(0, dtype), list(x.get_size()))


def _has_no_elements(x) -> bool:
    return any(isinstance(s, int) and s == 0 for s in x.get_size())


def _same_rank(res, x):
    """``res`` viewed with ``x``'s shape when ``x`` is 0-d (``_max_and_sumexp`` made it [1])."""
    return ir.reshape_view(res, []) if not list(x.get_size()) else res


@register_lowering(aten._softmax.default)
def _softmax(x, dim, half_to_float):
    """softmax = exp(x - max) / Σ exp(x - max), the normalizer computed online (see
    ``_max_and_sumexp``); half inputs computed in fp32, returned in their dtype unless
    ``half_to_float``."""
    out = torch.float32 if half_to_float else x.get_dtype()
    if _has_no_elements(x):
        return _empty_like(x, out)
    xs, m, d, acc = _max_and_sumexp(x, [dim])
    return _same_rank(
        make_pointwise(
            lambda a, mv, dv: ops.truediv(ops.exp(ops.sub(a, mv)), dv), NO_OPMATH, out_dtype=out, compute_dtype=acc
        )(xs, m, d),
        x,
    )


@register_lowering(aten._log_softmax.default)
def _log_softmax(x, dim, half_to_float):
    """log_softmax = x - max - log Σ exp(x - max) (normalizer online, see ``_max_and_sumexp``)."""
    out = torch.float32 if half_to_float else x.get_dtype()
    if _has_no_elements(x):
        return _empty_like(x, out)
    xs, m, d, acc = _max_and_sumexp(x, [dim])
    return _same_rank(
        make_pointwise(
            lambda a, mv, dv: ops.sub(ops.sub(a, mv), ops.log(dv)), NO_OPMATH, out_dtype=out, compute_dtype=acc
        )(xs, m, d),
        x,
    )


@register_lowering(aten.logsumexp.default)
def _logsumexp(x, dim, keepdim=False):
    """logsumexp = max + log Σ exp(x - max); an infinite max is the result itself (torch's rule:
    all ``-inf`` gives ``-inf``, a ``+inf`` gives ``+inf``). Integer inputs are computed in the
    default float dtype, as torch does."""
    size = list(x.get_size())
    out = x.get_dtype()
    if not out.is_floating_point and not out.is_complex:
        out = torch.get_default_dtype()
        x = _to_dtype_lowering(x, out)
    xs, m, d, acc = _max_and_sumexp(x, dim)
    inf = float("inf")

    def fn(mv, dv):
        return ops.where(ops.eq(ops.abs(mv), ops.constant(inf, acc)), mv, ops.add(mv, ops.log(dv)))

    res = make_pointwise(fn, NO_OPMATH, out_dtype=out, compute_dtype=acc)(m, d)
    if not size:
        res = ir.reshape_view(res, [])
    elif not keepdim:
        rdims = _reduction_dims(x, dim)
        res = ir.reshape_view(res, [s for i, s in enumerate(size) if i not in rdims])
    return res


register_lowering(aten.prod.dim_int)(
    lambda x, dim, keepdim=False, *, dtype=None: make_reduction("prod")(x, [dim], keepdim, dtype=dtype)
)
register_lowering(aten.amax)(make_reduction("amax"))
register_lowering(aten.amin)(make_reduction("amin"))
register_lowering(aten.any.dim, aten.any.dims)(make_reduction("any"))
register_lowering(aten.argmax)(make_reduction("argmax"))
register_lowering(aten.argmin)(make_reduction("argmin"))


@register_lowering(aten.sum.default)
def _sum_all(x, *, dtype=None):
    return make_reduction("sum")(x, None, False, dtype=dtype)


@register_lowering(aten.prod.default)
def _prod_all(x, *, dtype=None):
    return make_reduction("prod")(x, None, False, dtype=dtype)


@register_lowering(aten.any.default)
def _any_all(x):
    return make_reduction("any")(x, None, False)


@register_lowering(aten.max.default)
def _max_all(x):
    return make_reduction("amax")(x, None, False)


@register_lowering(aten.min.default)
def _min_all(x):
    return make_reduction("amin")(x, None, False)


# ---------------------------------------------------------------------------------- extern kernels

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


# A product at least this large (m*n*k multiply-adds) is padded when a leading dimension is off
# alignment: below it the padding copies cost about what the aligned kernel saves.
PAD_MM_MIN_MACS = 1 << 27
# Device types whose products are padded: cuBLAS's (tests add "cpu" to run the padded path, with
# PAD_MM_MIN_MACS lowered, under Triton's interpreter)
PAD_MM_DEVICE_TYPES = ("cuda",)


def _mm_padding(a, b) -> tuple[tuple[int, int, int] | None, Any, Any]:
    """Inductor's pad_mm rule (by size instead of by benchmark): the zero padding ``(pm, pk, pn)``
    that puts every leading dimension cuBLAS sees for ``a [m, k] @ b [k, n]`` on a 16-byte
    boundary, or None to run the product as it is; returned with ``a`` and ``b`` (a strided view
    of a computed value comes back as the view of its realized buffer, as the extern call would
    take it). cuBLAS falls back to slow ``align1`` kernels when a leading dimension is not a
    multiple of 8 (16-bit dtypes) or 4 (fp32) elements: a GPT-2 LM head (vocabulary 50257) ran
    its 3 products 5-8x slower than aligned. Padded: ``n`` (the output's rows), ``k`` when ``a``
    is row-major or ``b`` column-major, ``m`` when ``a`` is column-major (a transposed view).
    Only CUDA (``PAD_MM_DEVICE_TYPES``), float dtypes, static sizes, products of at least
    ``PAD_MM_MIN_MACS``; ``config.pad_mm`` switches it off."""
    from .. import config

    if not config.pad_mm or a.get_device().type not in PAD_MM_DEVICE_TYPES:
        return None, a, b
    dtype = a.get_dtype()
    if dtype not in (torch.float16, torch.bfloat16, torch.float32) or b.get_dtype() != dtype:
        return None, a, b
    (m, k), (k2, n) = a.get_size(), b.get_size()
    if not all(isinstance(d, int) for d in (m, k, n, k2)) or m * n * k < PAD_MM_MIN_MACS:
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
    from ..ir import graph_context as G

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
    from ..ir import graph_context as G

    pads, a, b = _mm_padding(a, b)
    if pads is None:
        return G.graph().fallback(aten.mm.default, (a, b), {})
    return _padded_matmul(aten.mm.default, a, b, None, pads, {})


@register_lowering(aten.addmm.default)
def _addmm(bias, a, b, *, beta=1, alpha=1):
    """``beta * bias + alpha * (a @ b)`` as an extern cuBLAS call, padded as ``_mm``."""
    from ..ir import graph_context as G

    kw = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v != 1}
    pads, a, b = _mm_padding(a, b)
    if pads is None:
        return G.graph().fallback(aten.addmm.default, (bias, a, b), kw)
    return _padded_matmul(aten.addmm.default, a, b, bias, pads, kw)


def decompositions(training: bool = True) -> dict:
    """The decomposition table AOTAutograd traces with: torch's core aten decompositions plus the
    torch decompositions of composite ops that tilefuse fuses better as primitives (softmax,
    layer norm, GELU, …). Built once per process per ``training`` and shared: callers must not
    modify it. ``training``: the graph has a backward (AOTAutograd traces a joint graph), so
    log_softmax and layer norm are decomposed for the partitioner (below); an inference graph
    keeps them whole, lowered directly (``_log_softmax``, ``_native_layer_norm``), which spares
    the decompositions' trace (with ``dynamic=True`` log_softmax's symbolic-shape reasoning cost
    a cross-entropy graph's trace about 0.16 s of 0.47 under the profiler on the development
    machine).

    torch's core table for export (``core_aten_decompositions``) also lists every
    CompositeImplicitAutograd op, which it finds by walking all registered ops (0.14-0.2 s, on the
    critical path of a first compile); those decompose on their own while AOTAutograd traces, so
    the table here is the core decompositions proper (``_core_aten_decompositions_post_autograd``,
    2.5 ms) plus the six non-composite ops the export table adds (nearest upsampling)."""
    return _decompositions(bool(training))


@functools.lru_cache(maxsize=None)
def _decompositions(training: bool) -> dict:
    if not training:
        # the training table less the decompositions added back for the partitioner (below)
        return {
            k: v
            for k, v in _decompositions(True).items()
            if getattr(k, "overloadpacket", None) not in (aten._log_softmax, aten.native_layer_norm)
        }
    from torch._decomp import core_aten_decompositions, get_decompositions

    try:
        from torch._decomp import _core_aten_decompositions_post_autograd
    except ImportError:  # another torch: the export table, slower to build, the same traces
        table = dict(core_aten_decompositions())
    else:
        table = dict(_core_aten_decompositions_post_autograd())
        table.update(
            get_decompositions(
                [
                    aten.upsample_nearest1d,
                    aten.upsample_nearest2d,
                    aten.upsample_nearest3d,
                    aten._upsample_nearest_exact1d,
                    aten._upsample_nearest_exact2d,
                    aten._upsample_nearest_exact3d,
                ]
            )
        )
    table.update(
        get_decompositions(
            [
                aten.native_layer_norm,
                aten.gelu,
                aten.gelu_backward,
                aten.native_dropout,
                aten.sigmoid_backward,
                aten.tanh_backward,
                aten.silu,
                aten.silu_backward,
                aten.hardtanh,
                aten.leaky_relu,
                aten.native_group_norm,
                aten.native_batch_norm,
                aten.mish,
                aten._softmax_backward_data,
                aten._log_softmax_backward_data,
                aten.native_layer_norm_backward,
                aten.addcmul,
                aten.addcdiv,
                aten.lerp,
                aten.logit,
                aten.elu,
                aten.elu_backward,
                aten.hardtanh_backward,
                aten.leaky_relu_backward,
                aten.threshold_backward,
                aten._native_batch_norm_legit,
                aten._native_batch_norm_legit_no_training,
                aten._native_batch_norm_legit_functional,
                aten.native_batch_norm_backward,
                aten._batch_norm_with_update,
                aten._batch_norm_with_update_functional,
                aten._adaptive_avg_pool2d,
                aten.ldexp,
                aten.narrow_copy,
                aten.view_copy,
                aten.permute_copy,
                aten.unbind_copy,
                aten.dist,
                aten.index_fill,
                aten.aminmax,
            ]
        )
    )
    # keep these as primitives that tilefuse lowers or calls directly. Attention stays whole: its
    # forward and backward kernels must agree on what is saved (torch's CPU-flash decomposition
    # returns the probabilities where the aten backward expects the logsumexp)
    keep = (
        aten.addmm,
        aten.mm,
        aten.bmm,
        aten.convolution,
        aten.var_mean,
        aten.var,
        aten.std,
        aten._softmax,
        aten._log_softmax,
        aten.logsumexp,  # lowered with an online normalizer
        # (log_softmax's own decomposition is put back below)
        aten._scaled_dot_product_flash_attention_for_cpu,
        aten._scaled_dot_product_flash_attention_for_cpu_backward,
        aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_efficient_attention,
        aten._scaled_dot_product_cudnn_attention,
    )
    # ... and an op tilefuse lowers itself is not decomposed either (Inductor's rule): the core
    # table rewrites views (transpose, split, _unsafe_view, squeeze, …) through torch's Python
    # references, whose stride and contiguity reasoning is slow under symbolic sizes (about 0.5 s
    # of a transformer block's trace with dynamic=True)
    for k in list(table):
        if k in lowerings or getattr(k, "overloadpacket", None) in keep:
            del table[k]
    # ... except where the min-cut partitioner needs to see through an op to recompute around it
    # (see _log_softmax_as_logsumexp): detach becomes alias, a view it may recompute; a detach
    # left whole counts as a non-fusible user, which makes the tensor it detaches (log-probs
    # saved for log_softmax's backward) "materialized" and so saved rather than recomputed
    table.update(get_decompositions([aten.detach]))
    # log_softmax as torch decomposes it, ``(x - amax) - log(sum(exp(x - amax)))``: the partitioner
    # recomputes the log-probabilities in the backward from the input and two per-row values (a
    # whole log_softmax is an op it cannot recompute, so it would save the log-probabilities:
    # 823 MB for the 12-layer GPT step's 4096 x 50257 float32 logits); GraphLowering lowers the
    # amax and the sum of exponentials as one row normalizer (online_normalizers). The output is
    # rounded at the size of ``x - amax``, as eager's kernel rounds it. Only with a backward: an
    # inference graph has no partition to recompute for (``_decompositions(False)``)
    table.update(get_decompositions([aten._log_softmax]))
    # layer norm likewise: decomposed for the partitioner in a graph with a backward, lowered
    # whole (``_native_layer_norm``) in an inference graph
    table.update(get_decompositions([aten.native_layer_norm]))
    table[aten.gelu.default] = _gelu_polynomial_erfc
    if aten._adaptive_avg_pool2d.default in table:
        table[aten._adaptive_avg_pool2d.default] = functools.partial(
            _in_the_inputs_memory_format, table[aten._adaptive_avg_pool2d.default]
        )
    # torch decompositions that are wrong in torch 2.11 (the aten op runs instead, a fallback
    # kernel): multilabel_margin_loss_forward gathers the positions after a target's -1 (the
    # documented end of its label list) as class 0, e.g. 3.25 for eager's 0.0163 (a fresh-user
    # trial; aot_eager and Inductor share it)
    for op in (aten.multilabel_margin_loss_forward.default,):
        table.pop(op, None)
    if aten.linspace.default in table:
        table[aten.linspace.default] = functools.partial(_linspace_integers_in_float64, table[aten.linspace.default])
    return table


def _in_the_inputs_memory_format(
    decomposition: Callable[..., Any], x: torch.Tensor, *args: Any, **kwargs: Any
) -> torch.Tensor:
    """``decomposition(x, ...)`` laid out in ``x``'s suggested memory format (channels-last for a
    channels-last ``x``), as the op's own kernel and meta function lay it out. torch's
    decomposition of ``_adaptive_avg_pool2d`` into gathers and a mean returns a contiguous result
    for window sizes that do not divide the input, where eager returns channels-last (strides
    ``(48, 12, 4, 1)`` for eager's ``(48, 1, 16, 4)``: a fresh-user trial); the copy is a layout
    tilefuse's lowering gives the stored value, not an extra kernel."""
    from torch._prims_common import suggest_memory_format

    out = decomposition(x, *args, **kwargs)
    fmt = suggest_memory_format(x)
    if fmt != torch.contiguous_format and out.dim() == x.dim() and not out.is_contiguous(memory_format=fmt):
        out = out.contiguous(memory_format=fmt)
    return out


def _linspace_integers_in_float64(
    decomposition: Callable[..., Any], start: Any, end: Any, steps: int, **kwargs: Any
) -> torch.Tensor:
    """Decomposition of ``aten.linspace`` (torch's ``decomposition``, a ``torch._refs.linspace``)
    that computes an integer result in float64 and converts it, as eager's kernel computes it in
    double: the reference multiplies its int64 positions by a Python-float step, which promotes
    to float32 and rounds every value past 2**24 (``linspace(2**31 - 10, 2**31 + 10, 5,
    dtype=torch.int64)`` gave 2147483648 five times). Floating and bool results are the
    reference's."""
    dtype = kwargs.get("dtype")
    if dtype is None or dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return decomposition(start, end, steps, **kwargs)
    return decomposition(start, end, steps, **{**kwargs, "dtype": torch.float64}).to(dtype)


# log2(erfc(u)) on [0, 4] as a degree-9 polynomial in u (least squares in float64, coefficients
# rounded to float32), lowest degree first. Relative error of 2**p against erfc: <= 2.6e-6 on
# [0, 4) (absolute <= 8.8e-7), far below a bfloat16 or float16 result's rounding (2**-8, 2**-11).
_LOG2_ERFC_POLY = (
    1.2407712119966163e-06,
    -1.62797212600708,
    -0.9178803563117981,
    -0.15021033585071564,
    0.03099696896970272,
    -0.0031328804325312376,
    -0.0003821765712928027,
    0.00018794197239913046,
    -2.6785393856698647e-05,
    1.430370616617438e-06,
)


def _gelu_polynomial_erfc(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """Decomposition of ``aten.gelu``. For a float16/bfloat16 input with ``approximate="none"``
    the exact GELU ``x/2 * (1 + erf(x/sqrt(2)))`` is computed in float32 with ``erf`` from a
    polynomial: ``erfc(|u|) = 2**p(|u|)`` (``_LOG2_ERFC_POLY``, 0 for ``|u| >= 4``, where float32's
    ``1 + erf`` is already 0 or 2) and ``1 + erf(u) = 1 + sign(u) * (1 - erfc(|u|))``, which
    rounds the tail in float32 exactly as the eager kernel's ``1 + erf`` does. Result in ``x``'s
    dtype. Why: libdevice's ``erf`` is ALU-bound in a bias + GELU kernel on an H200 (8192² bf16:
    100 µs, 63% of the copy bandwidth; the polynomial: 71 µs, 88%) and links libdevice into the
    kernel (0.04-0.08 s of its compile). The result matches eager's (float32 math, one rounding to
    the half dtype) to one unit in the last place of that dtype; float32/float64 inputs and the
    tanh approximation keep torch's decomposition (libdevice ``erf``/``tanh``). A tilefuse
    heuristic, not Inductor's (which calls libdevice's ``erf``)."""
    if approximate != "none" or x.dtype not in (torch.float16, torch.bfloat16):
        from torch._refs.nn.functional import gelu as torch_gelu  # torch's decomposition

        return torch_gelu(x, approximate=approximate)
    v = x.to(torch.float32)
    u = torch.abs(v) * 0.7071067811865476
    p = u * _LOG2_ERFC_POLY[-1] + _LOG2_ERFC_POLY[-2]
    for c in reversed(_LOG2_ERFC_POLY[:-2]):
        p = p * u + c
    erfc = torch.where(u < 4.0, torch.exp2(p), 0.0)
    erf_abs = 1.0 - erfc
    return (0.5 * v * (1.0 + torch.where(v < 0, -erf_abs, erf_abs))).to(x.dtype)


@register_lowering(aten.mean.dim, aten.mean.default)
def _mean(x, dims=None, keepdim=False, *, dtype=None):
    """mean = sum / count, summed in fp32 for low-precision inputs."""
    size = list(x.get_size())
    rdims = _reduction_dims(x, dims)
    n = prod(size[d] for d in rdims)
    out_dtype = dtype or x.get_dtype()
    acc = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    s = make_reduction("sum")(x, rdims if rdims else None, keepdim, dtype=acc)
    return make_pointwise(
        lambda a: ops.truediv(a, _size_value(n, acc)), NO_OPMATH, out_dtype=out_dtype, compute_dtype=acc
    )(s)


def _var_mean_impl(x, dims, correction, keepdim, sqrt=False):
    """mean = Σx/n and var = Σ(x-mean)²/(n-correction), accumulated in fp32 for half inputs. The
    sum of squared deviations is a sqdev reduction of ``x`` (Inductor's Welford reduction:
    independent of the mean's sum, so a looped kernel reduces both in one loop over the row, and a
    layer norm reads its row twice instead of three times) when the row stays one reduction
    (``Reduction.stays_whole``); otherwise — a reduction that is split or gathers its values — the
    two-pass form ``Σ(x - mean)²`` over ``x`` and the mean, whose sums split."""
    size = list(x.get_size())
    rdims = _reduction_dims(x, dims)
    n = prod(size[d] for d in rdims)
    corr = 1 if correction is None else correction
    out_dtype = x.get_dtype()
    if not out_dtype.is_floating_point:
        # the aten kernel then raises eager's own error ("std and var only support floating point
        # and complex dtypes") when the graph runs
        raise NotImplementedError(f"var/std of a {out_dtype} tensor")
    acc = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    mean_k = _mean(x, rdims, True, dtype=acc)
    ranges = [s for i, s in enumerate(size) if i not in rdims]
    if rdims and Reduction.stays_whole(
        x.get_device(), acc, _reduction_inner(x, rdims, acc), ranges, [size[i] for i in rdims], acc
    ):
        ssq = make_reduction("sqdev", allow_split=False)(x, rdims, keepdim, dtype=acc)
    else:
        diff = make_pointwise(
            lambda a, m: ops.mul(ops.sub(a, m), ops.sub(a, m)), NO_OPMATH, out_dtype=acc, compute_dtype=acc
        )(x, mean_k)
        ssq = make_reduction("sum")(diff, rdims, keepdim, dtype=acc)
    if float(corr).is_integer():
        corr = int(corr)
        denom = max(n - corr, 0) if isinstance(n, int) else _sv().evaluate_max(n - corr, 0)

        def divisor():
            return _size_value(denom, acc)
    else:
        # a fractional correction (torch takes any float): the divisor max(n - correction, 0)
        # as a float, never truncated to an integer size
        def divisor():
            d = ops.sub(_size_value(n, acc), ops.constant(float(corr), acc))
            return ops.maximum(d, ops.constant(0.0, acc))

    def finish(a):
        v = ops.truediv(a, divisor())
        return ops.sqrt(v) if sqrt else v

    # std: the square root is taken in the accumulation dtype, rounding once (as eager)
    var = make_pointwise(finish, NO_OPMATH, out_dtype=out_dtype, compute_dtype=acc)(ssq)
    mean = mean_k if keepdim else ir.reshape_view(mean_k, [s for i, s in enumerate(size) if i not in rdims])
    mean = _to_dtype_lowering(mean, out_dtype) if acc != out_dtype else mean
    return var, mean


@register_lowering(aten.native_layer_norm.default)
def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    """``native_layer_norm`` of an inference graph (a graph with a backward decomposes it:
    ``decompositions``), with torch's decomposition's semantics: over the last
    ``len(normalized_shape)`` dims, ``out = (x - mean) * rstd * weight + bias`` computed in float32
    for half inputs and rounded once to ``x``'s dtype, ``rstd = rsqrt(var + eps)`` (biased
    variance, the sqdev of ``_var_mean_impl``); ``mean`` and ``rstd`` keep the normalized dims as
    size 1, in the computation dtype (on the CPU in ``x``'s dtype unless the weight or bias is of
    another dtype, as eager's CPU kernel). Lowered rather than decomposed so AOTAutograd does not
    trace the reference's ops (their stride and contiguity checks are symbolic with
    ``dynamic=True``). ValueError when ``x``'s trailing sizes are not ``normalized_shape``."""
    size = list(x.get_size())
    nd = len(normalized_shape)
    axis = len(size) - nd
    if nd < 1 or axis < 0 or [_sv().hint(s) for s in size[axis:]] != [_sv().hint(s) for s in normalized_shape]:
        raise ValueError(
            f"native_layer_norm: normalized_shape {list(normalized_shape)} does not match the input's "
            f"trailing sizes {size}"
        )
    dtype, dev = x.get_dtype(), x.get_device()
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    xa = _to_dtype_lowering(x, acc) if acc != dtype else x
    var, mean = _var_mean_impl(xa, list(range(axis, len(size))), 0, True)
    rstd = make_pointwise(
        lambda v: ops.rsqrt(ops.add(v, ops.constant(float(eps), acc))), NO_OPMATH, out_dtype=acc, compute_dtype=acc
    )(var)
    xl, ml, rl = x.make_loader(), mean.make_loader(), rstd.make_loader()
    wl = None if weight is None else weight.make_loader()
    bl = None if bias is None else bias.make_loader()

    def inner(idx):
        row = list(idx[:axis]) + [S.Integer(0)] * nd
        v = ops.mul(ops.sub(to_dtype_value(xl(idx), acc), ml(row)), rl(row))
        if wl is not None:
            v = ops.mul(v, to_dtype_value(wl(list(idx[axis:])), acc))
        if bl is not None:
            v = ops.add(v, to_dtype_value(bl(list(idx[axis:])), acc))
        return to_dtype_value(v, dtype)

    out = Pointwise.create(dev, dtype, inner, size)
    # eager's CPU kernel returns mean and rstd in a half input's dtype, unless its weight or bias
    # is of another dtype (mixed: then in theirs, float32)
    param = weight if weight is not None else bias
    if dev.type == "cpu" and acc != dtype and (param is None or param.get_dtype() == dtype):
        mean, rstd = _to_dtype_lowering(mean, dtype), _to_dtype_lowering(rstd, dtype)
    return out, mean, rstd


@register_lowering(aten.var_mean.correction)
def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    return _var_mean_impl(x, dim, correction, keepdim)


@register_lowering(aten.var.correction)
def _var(x, dim=None, *, correction=None, keepdim=False):
    return _var_mean_impl(x, dim, correction, keepdim)[0]


@register_lowering(aten.std.correction)
def _std(x, dim=None, *, correction=None, keepdim=False):
    return _var_mean_impl(x, dim, correction, keepdim, sqrt=True)[0]


@register_lowering(prims.var.default)
def _prims_var(x, dims, correction=1, *, output_dtype=None):
    return _var_mean_impl(x, dims, correction, False)[0]


@register_lowering(prims.sum.default)
def _prims_sum(x, dims, *, output_dtype=None):
    return make_reduction("sum")(x, list(dims), False, dtype=output_dtype)


@register_lowering(prims.broadcast_in_dim.default)
def _broadcast_in_dim(x, shape, broadcast_dimensions):
    """Insert size-1 dims so that x's dims land at ``broadcast_dimensions``, then expand."""
    s = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        s[dst] = x.get_size()[src]
    return ir.expand_view(ir.reshape_view(x, s), list(shape))


# ---------------------------------------------------------------------------------- indirect indexing


def _index_loader(index: TensorBox, size: int, shape: list | None = None, wrap_negative: bool = True):
    """Loader of an integer index tensor turned into an index symbol per element
    (``ops.indirect_indexing``: negative values wrap, out-of-range ones trip a device assert)."""
    if index.get_dtype() not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise NotImplementedError(f"indexing with a {index.get_dtype()} tensor")  # bool masks: fallback
    ld = (ir.expand_view(index, shape) if shape is not None else index).make_loader()
    return lambda idx: ops.indirect_indexing(ld(idx), size, True, wrap_negative)


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
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
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


# ---------------------------------------------------------------------------------- select-style ops
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

    def inner(idx):
        src = [_clamped(i - a, n) if (a or b) else i for i, a, b, n in zip(idx, lo, hi, size)]
        v = loader(src)
        cond = None
        for i, a, b, n in zip(idx, lo, hi, size):
            # a symbolic pad amount may be positive: checked
            if not (isinstance(a, int) and isinstance(b, int)) or a > 0 or b > 0:
                c = _in_range(i - a, 0, n)
                cond = c if cond is None else ops.logical_and(cond, c)
        if cond is None:
            return v
        return ops.where(cond, v, ops.constant(value, dtype))

    if any(s == 0 for s in size) and prod(out) > 0:
        return _full(out, value, dtype, x.get_device())
    return Pointwise.create(x.get_device(), dtype, inner, out)


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

    def inner(idx):
        i = idx[dim]
        si = list(idx)
        si[dim] = _clamped(S.FloorDiv(S.Max(i - start, S.Integer(0)), step) if step != 1 else i - start, m)
        v = to_dtype_value(sl(si), dtype)
        cond = _in_range(i, start, start + (m - 1) * step + 1)
        if step != 1:
            r = ops.index_expr(S.Mod(i - start + step * n, step), torch.int64)
            cond = ops.logical_and(cond, ops.eq(r, ops.constant(0, torch.int64)))
        return ops.where(cond, v, xl(idx))

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
    length = max(0, min(size[d1] - r1, size[d2] - r2))
    if length == 0:
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
    eager's storage order: an unrealized value realized with those strides
    (``StorageBox.exact_stride``; not for strides that expand a dim), ``x`` itself when its
    buffer — or, unless ``whole_storage`` (storage offset 0, nothing else in the storage), its
    view of one — already has them, else a copy with them (``GraphLowering._copy_with_strides``)."""
    from ..graph import _strides_match
    from ..ir import graph_context as G

    g = G.graph()
    sv = g.sizevars
    size, stride = sv.sizes(meta.shape), sv.sizes(meta.stride())
    if g.set_exact_strides(x, size, stride):
        x.data.realize()
        return x
    r = ir.realize_input(x)
    lay = getattr(r, "layout", None)
    if (
        lay is not None
        and (isinstance(r, ir.Buffer) or not whole_storage)
        and (lay.offset == 0 or not whole_storage)
        and _strides_match(list(lay.size), list(lay.stride), stride, sv)
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
    transposed order, as eager (both ran as the aten op on tilefuse's contiguous ``x * 2`` and
    read other elements: fresh-user trials).

    With static sizes, an owner whose eager layout is dense and non-overlapping (contiguous, or a
    permutation of it: transposed, channels-last; each storage position holds one element) and a
    view reading only its elements: a lazy view reading storage position
    ``p = offset + sum(i*stride)``, element ``((p - o) // stride_d) % size_d`` along each dim
    ``d`` of the owner by its eager strides and storage offset ``o`` (no kernel, fuses).
    Otherwise the aten op: on the graph input's own storage for a view of an input (exact: it
    may read the input's memory beyond the view, e.g. OpInfo's partial views), else on the owner
    realized in its eager layout (``_in_eager_layout``; symbolic sizes, a non-dense owner)."""
    from ..ir import graph_context as G

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
    has eager's storage order: tilefuse's contiguous ``x`` of a transposed eager value put
    ``src`` at other elements (``[0, -1, -1, 36]`` for eager's ``[0, -1, 24, 36]``: a fresh-user
    trial). ``_in_eager_layout`` gives ``x`` those strides."""
    from ..ir import graph_context as G

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


@register_lowering(aten.select_scatter.default)
def _select_scatter(x, src, dim, index):
    """``x`` with ``x.select(dim, index)`` replaced by ``src``."""
    n = x.get_size()[dim % len(x.get_size())]
    if (index < 0) if isinstance(index, int) else _sv().evaluate_lt(index, 0):
        index = index + n
    return _slice_scatter(x, ir.unsqueeze_view(src, dim % len(x.get_size())), dim, index, index + 1, 1)


@register_lowering(aten.scatter.value)
def _scatter_value(x, dim, index, value):
    """``x.scatter(dim, index, value)`` when ``index`` has size 1 along ``dim`` and ``x``'s sizes
    elsewhere (one write per row, the one-hot pattern of nll_loss backward): a pointwise
    ``where(j == index[..., 0, ...], value, x)``. Other shapes store into a copy of ``x``
    (``_scatter_store``)."""
    size = list(x.get_size())
    isize = list(index.get_size())
    if not size:
        raise NotImplementedError("scatter into a 0-d tensor")
    dim = dim % len(size)
    if (
        len(isize) != len(size)
        or isize[dim] != 1
        or any(a != b for k, (a, b) in enumerate(zip(isize, size)) if k != dim)
    ):
        return _scatter_store(x, dim, index, lambda idx: ops.constant(value, x.get_dtype()))
    il = _index_loader(index, size[dim], wrap_negative=False)
    xl = x.make_loader()
    dtype = x.get_dtype()

    def inner(idx):
        ii = list(idx)
        ii[dim] = S.Integer(0)
        target = ops.index_expr(il(ii), torch.int64)
        hit = ops.eq(ops.index_expr(idx[dim], torch.int64), target)
        return ops.where(hit, ops.constant(value, dtype), xl(idx))

    return Pointwise.create(x.get_device(), dtype, inner, size)


def _scatter_store(x, dim, index, value_fn):
    """``x.scatter(dim, index, ...)``: a copy of ``x``, then for every position ``i`` of ``index``
    ``out[i with dim -> index[i]] = value_fn(i)`` (a store kernel; torch picks an arbitrary winner
    among duplicate indices, so any order is right)."""
    _, index_fn = _scatter_dim_index_fn(x, dim, index, "scatter")
    return _accumulate_into_copy(x, list(index.get_size()), index_fn, value_fn, x.get_dtype(), mode=None)


@register_lowering(aten.scatter.src)
def _scatter_src(x, dim, index, src):
    """``x.scatter(dim, index, src)``: out[i with dim -> index[i]] = src[i] over index's shape."""
    sl = src.make_loader()
    return _scatter_store(x, dim, index, sl)


@register_lowering(aten.scatter.reduce, aten.scatter.value_reduce)
def _scatter_reduce_legacy(x, dim, index, src, *, reduce):
    """``x.scatter(dim, index, src, reduce=...)``: "add" as scatter_add (atomic adds),
    "multiply" as ``scatter_reduce(..., "prod", include_self=True)``; a scalar ``src`` is a
    constant tensor of index's shape."""
    if reduce not in ("add", "multiply"):
        raise NotImplementedError(f"scatter with reduce={reduce!r}")
    if not is_tensor(src):
        value = src
        src = _full(list(index.get_size()), value, x.get_dtype(), x.get_device())
    if reduce == "multiply":
        return _scatter_reduce_two(x, dim, index, src, "prod", include_self=True)
    return _scatter_add(x, dim, index, src)


@register_lowering(aten.max.dim, aten.min.dim)
def _max_min_dim(x, dim, keepdim=False):
    """``x.max(dim)`` / ``x.min(dim)``: (values, indices) as amax/amin and argmax/argmin over the
    same rows (both reductions fuse into one kernel)."""
    from ..ir import graph_context as G

    is_max = G.graph().current_target is aten.max.dim
    values = make_reduction("amax" if is_max else "amin")(x, [dim], keepdim)
    indices = make_reduction("argmax" if is_max else "argmin")(x, dim, keepdim)
    return values, indices


@register_lowering(aten.linalg_vector_norm.default)
def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.vector_norm`` for ord 2, 1, inf and -inf (others fall back)."""
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("vector_norm of an integer tensor")
    out_dtype = dtype or x.get_dtype()
    acc = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    if ord == 2:
        sq = make_pointwise(lambda a: ops.mul(a, a), NO_OPMATH, out_dtype=acc, compute_dtype=acc)(x)
        r = make_pointwise(lambda a: ops.sqrt(a), NO_OPMATH, out_dtype=out_dtype, compute_dtype=acc)(
            make_reduction("sum")(sq, dim, keepdim, dtype=acc)
        )
    elif ord == 1:
        ab = make_pointwise(lambda a: ops.abs(a), NO_OPMATH, out_dtype=acc, compute_dtype=acc)(x)
        r = make_reduction("sum")(ab, dim, keepdim, dtype=acc)
    elif ord in (math.inf, -math.inf):
        ab = make_pointwise(lambda a: ops.abs(a), NO_OPMATH, out_dtype=acc, compute_dtype=acc)(x)
        r = make_reduction("amax" if ord > 0 else "amin")(ab, dim, keepdim)
    elif ord == 0:
        nz = make_pointwise(
            lambda a: ops.to_dtype(ops.ne(a, ops.constant(0, a.dtype)), acc),
            NO_OPMATH,
            out_dtype=acc,
            compute_dtype=acc,
        )(x)
        r = make_reduction("sum")(nz, dim, keepdim, dtype=acc)
    elif isinstance(ord, numbers.Real) and ord > 0 and math.isfinite(ord):
        # (sum |x|^p)^(1/p)
        p = float(ord)
        powed = make_pointwise(
            lambda a: ops.pow(ops.abs(a), ops.constant(p, acc)), NO_OPMATH, out_dtype=acc, compute_dtype=acc
        )(x)
        r = make_pointwise(
            lambda a: ops.pow(a, ops.constant(1.0 / p, acc)), NO_OPMATH, out_dtype=acc, compute_dtype=acc
        )(make_reduction("sum")(powed, dim, keepdim, dtype=acc))
    else:
        raise NotImplementedError(f"vector_norm with ord={ord}")
    return _to_dtype_lowering(r, out_dtype) if r.get_dtype() != out_dtype else r


# ---------------------------------------------------------------------------------- scatter-add

# dtypes Triton adds atomically with the result torch's kernels give (bf16/fp16 atomic adds round
# after every add in an order of the hardware's choosing, and 8/16-bit integers have none)
_ATOMIC_ADD_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)


def _mutable_copy(x, dtype=None):
    """A fresh realized buffer holding ``x`` converted to ``dtype`` (default: ``x``'s own), the
    target of later in-place passes (``_mutate``). Returns the TensorBox that reads the buffer
    after every pass and the ComputedBuffer itself."""
    dtype = dtype or x.get_dtype()
    loader = x.make_loader()
    copy = Pointwise.create(x.get_device(), dtype, lambda idx: to_dtype_value(loader(idx), dtype), list(x.get_size()))
    copy.realize()
    target = copy.data.data
    target.freeze_layout()
    return copy, target


def _mutate(target, ranges, index_fn, value_fn, mode):
    """Register a kernel that, for every idx of ``ranges``, combines ``value_fn(idx)`` into
    ``target[index_fn(idx)]`` by ``mode``: None stores, ``"atomic_add"`` adds, ``"atomic_max"`` /
    ``"atomic_min"`` keep the larger / smaller value (floats: NaN wins, as torch's amax/amin).
    Passes on one target run in the order they are registered. Nothing is registered for an
    empty ``ranges``."""
    from ..ir import graph_context as G

    if prod(ranges) == 0:
        return
    dtype = target.get_dtype()
    data = Pointwise(target.get_device(), dtype, lambda idx: to_dtype_value(value_fn(idx), dtype), ranges)
    g = G.graph()
    g.register_buffer(ir.MutationBuffer(g.new_buffer_name(), target, data, index_fn, mode))


def _accumulate_into_copy(x, ranges, index_fn, value_fn, value_dtype, mode="atomic_add"):
    """A fresh buffer holding ``x``, then ``buf[index_fn(idx)] += value_fn(idx)`` for every idx
    of ``ranges`` (atomic adds, so repeated indices accumulate as torch's ``accumulate=True``);
    ``mode=None`` stores instead (``buf[index_fn(idx)] = value_fn(idx)``).

    bool accumulates as torch's ``True + True == True``, a logical or: an atomic max in an int32
    copy, converted back. Atomic adds into float16/bfloat16 and 8/16-bit integers raise
    NotImplementedError (the op falls back by design: Triton has no 8/16-bit integer atomic add,
    and a half-precision atomic add rounds after every add in an order of the hardware's choosing,
    where aten's kernels round in index order)."""
    dtype = x.get_dtype()
    if mode == "atomic_add" and dtype == torch.bool:
        copy, target = _mutable_copy(x, torch.int32)
        _mutate(target, ranges, index_fn, value_fn, "atomic_max")
        return _to_dtype_lowering(copy, torch.bool)
    if mode == "atomic_add" and dtype not in _ATOMIC_ADD_DTYPES:
        raise NotImplementedError(f"atomic accumulation into {dtype}")
    copy, target = _mutable_copy(x)
    _mutate(target, ranges, index_fn, value_fn, mode)
    return copy


def _mask_put(x, indices, values, accumulate):
    """``x[mask] = values`` (``+=`` with ``accumulate``) for one boolean ``mask`` covering x's
    leading dims, when ``values`` broadcasts to the selected elements without a dim of their count
    (its rank at most that of the rest of x, or a leading 1): every selected element gets the same
    values, so ``where(mask, values, x)`` (``x + values`` there; bool: or) is the result and no
    element is written twice. Otherwise NotImplementedError."""
    size = list(x.get_size())
    if len(indices) != 1 or indices[0] is None or indices[0].get_dtype() != torch.bool:
        raise NotImplementedError("boolean mask index_put other than x[mask]")
    mask = indices[0]
    if values.get_device() != x.get_device() or mask.get_device() != x.get_device():
        raise NotImplementedError("index_put with values or mask on another device (a CPU scalar tensor)")
    k = len(mask.get_size())
    rest, vsize = size[k:], list(values.get_size())
    if (
        list(mask.get_size()) != size[:k]
        or len(vsize) > len(rest) + 1
        or (len(vsize) == len(rest) + 1 and vsize[0] != 1)
    ):
        raise NotImplementedError("boolean mask index_put whose values depend on the position")
    vview = ir.reshape_view(values, vsize[1:]) if len(vsize) == len(rest) + 1 else values
    vl = ir.expand_view(vview, rest).make_loader()
    ml, xl, dtype = mask.make_loader(), x.make_loader(), x.get_dtype()

    def inner(idx):
        xv, v = xl(idx), to_dtype_value(vl(idx[k:]), dtype)
        if accumulate and dtype == torch.bool:
            v = ops.logical_or(xv, v)
        elif accumulate:  # one rounding, in fp32 for half precision as eager's add
            acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
            v = to_dtype_value(ops.add(to_dtype_value(xv, acc), to_dtype_value(v, acc)), dtype)
        return ops.where(ml(idx[:k]), v, xv)

    return Pointwise.create(x.get_device(), dtype, inner, size)


@register_lowering(aten.index_put.default)
def _index_put(x, indices, values, accumulate=False):
    """``x.index_put(indices, values, accumulate)`` (embedding backward, ``x[idx] = v``) as a copy
    of ``x`` plus a kernel over the indexed positions that adds atomically (``accumulate``) or
    stores (torch leaves the winner among duplicate indices undefined then); integer index tensors
    on adjacent dims only. A single boolean mask over the leading dims is pointwise when ``values``
    is the same for every selected element (``_mask_put``).

    Falls back: other boolean masks (which element of ``values`` goes where depends on how many
    Trues come before it), non-adjacent index tensors, and ``accumulate`` into fp16/bf16 or
    8/16-bit integers (no exact atomic add, ``_accumulate_into_copy``)."""
    if is_tensor(values) and values.get_device() != x.get_device():
        raise NotImplementedError("index_put with values on another device (a CPU scalar tensor)")
    size = list(x.get_size())
    pos = [k for k, t in enumerate(indices) if t is not None]
    if not pos or pos != list(range(pos[0], pos[-1] + 1)):
        raise NotImplementedError("non-adjacent advanced indices")
    tensors = [indices[k] for k in pos]
    if any(t.get_dtype() == torch.bool for t in tensors):
        return _mask_put(x, indices, values, accumulate)
    bshape = broadcast_shapes(*[t.get_size() for t in tensors])
    loaders = [_index_loader(t, size[k], bshape) for t, k in zip(tensors, pos)]
    first, nb = pos[0], len(bshape)
    ranges = size[:first] + bshape + size[pos[-1] + 1 :]
    vl = ir.expand_view(values, ranges).make_loader()

    def index_fn(idx):
        bidx = idx[first : first + nb]
        return list(idx[:first]) + [ld(bidx) for ld in loaders] + list(idx[first + nb :])

    return _accumulate_into_copy(x, ranges, index_fn, vl, values.get_dtype(), "atomic_add" if accumulate else None)


@register_lowering(aten.index_add.default)
def _index_add(x, dim, index, source, *, alpha=1):
    """``x.index_add(dim, index, source, alpha=alpha)``: a copy of ``x`` with
    ``alpha * source[..., i, ...]`` added atomically at ``x[..., index[i], ...]`` along ``dim``
    (repeated indices accumulate), ``source`` converted to ``x``'s dtype. An index outside
    ``[0, x.size(dim))``, negative ones included, trips the bounds check as eager's kernels raise
    (torch's decomposition through ``index_put``, which the table used, wrapped -1 to the last
    row: a fresh-user trial). 0-d operands and the atomic adds ``_accumulate_into_copy``
    declines run as the aten op."""
    size, ssize = list(x.get_size()), list(source.get_size())
    if not size or len(ssize) != len(size) or len(index.get_size()) != 1:
        raise NotImplementedError("index_add of a 0-d tensor or with mismatched ranks")
    dim = dim % len(size)
    il = _index_loader(index, size[dim], wrap_negative=False)
    sl = source.make_loader()
    dtype = x.get_dtype()

    def value_fn(idx):
        v = to_dtype_value(sl(idx), dtype)
        return v if alpha == 1 else ops.mul(v, ops.constant(alpha, dtype))

    def index_fn(idx):
        out = list(idx)
        out[dim] = il([idx[dim]])
        return out

    return _accumulate_into_copy(x, ssize, index_fn, value_fn, dtype)


@register_lowering(aten.scatter_add.default)
def _scatter_add(x, dim, index, src):
    """``x.scatter_add(dim, index, src)``: out[i with dim -> index[i]] += src[i] over index's shape."""
    _, index_fn = _scatter_dim_index_fn(x, dim, index, "scatter_add")
    return _accumulate_into_copy(x, list(index.get_size()), index_fn, src.make_loader(), src.get_dtype())


def _scatter_dim_index_fn(x, dim, index, what):
    """(dim, index_fn) of a scatter along ``dim``: ``index_fn(i)`` is ``i`` with its ``dim``
    coordinate replaced by ``index[i]`` (not wrapped: torch rejects negative scatter indices)."""
    size = list(x.get_size())
    isize = list(index.get_size())
    if not size or len(isize) != len(size):
        raise NotImplementedError(f"{what} of a 0-d tensor or mismatched ranks")
    dim = dim % len(size)
    il = _index_loader(index, size[dim], wrap_negative=False)

    def index_fn(idx):
        out = list(idx)
        out[dim] = il(idx)
        return out

    return dim, index_fn


# the most multiply-adds (x's numel times index's extent along dim) a scatter prod may take
_SCATTER_PROD_MAX_WORK = 1 << 22


def _scatter_prod(x, dim, index, src, include_self):
    """``x.scatter_reduce(dim, index, src, "prod", include_self)`` with no atomic multiply: each
    output element gathers instead, a product reduction over ``j < index.size(dim)`` of
    ``src[i with dim -> j]`` where ``index[i with dim -> j]`` names it (``i`` its position, inside
    index's extent on the other dims), times ``x`` with ``include_self``; without, positions no
    index names keep ``x`` (an "any" reduction beside the product, in the same kernel). Products
    are exact for integers (computed in int64 and wrapped, as torch's per-step wrap) and combine
    in float32 for fp16/bf16 (rounded once); the order of the factors is a tree, as on torch's GPU
    kernel, where the CPU kernel goes in index order. The work is ``x.numel() * index.size(dim)``:
    larger or symbolic cases raise NotImplementedError (aten's kernel, linear in the index, runs)."""
    size, isize = list(x.get_size()), list(index.get_size())
    if not size or len(isize) != len(size):
        raise NotImplementedError("scatter prod of a 0-d tensor or mismatched ranks")
    if not all(isinstance(n, int) for n in size + isize):
        raise NotImplementedError("scatter prod with symbolic sizes")
    dim = dim % len(size)
    if prod(isize) == 0:
        return _clone(x)
    if prod(size) * isize[dim] > _SCATTER_PROD_MAX_WORK:
        raise NotImplementedError("scatter prod too large to gather")
    dtype, device = x.get_dtype(), x.get_device()
    acc = (
        dtype if dtype in (torch.float32, torch.float64) else torch.float32 if dtype.is_floating_point else torch.int64
    )
    il = _index_loader(index, size[dim], wrap_negative=False)
    sl, xl = src.make_loader(), x.make_loader()

    def source(idx, ridx):
        pos = [
            ridx[0] if k == dim else (i if isize[k] == size[k] else _clamped(i, isize[k])) for k, i in enumerate(idx)
        ]
        hit = ops.eq(ops.index_expr(il(pos), torch.int64), ops.index_expr(idx[dim], torch.int64))
        for k, i in enumerate(idx):
            if k != dim and isize[k] < size[k]:
                hit = ops.logical_and(hit, _in_range(i, 0, isize[k]))
        return hit, pos

    def factor(idx, ridx):
        hit, pos = source(idx, ridx)
        return ops.where(hit, to_dtype_value(sl(pos), acc), ops.constant(1, acc))

    product = Reduction.create(device, acc, factor, size, [isize[dim]], "prod", acc).make_loader()
    if not include_self:
        hits = Reduction.create(
            device, torch.bool, lambda idx, ridx: source(idx, ridx)[0], size, [isize[dim]], "any", torch.bool
        ).make_loader()

    def out(idx):
        xv = to_dtype_value(xl(idx), acc)
        v = ops.mul(xv, product(idx)) if include_self else ops.where(hits(idx), product(idx), xv)
        return to_dtype_value(v, dtype)

    return Pointwise.create(device, dtype, out, size)


_SCATTER_REDUCE_MODE = {"sum": "atomic_add", "mean": "atomic_add", "amax": "atomic_max", "amin": "atomic_min"}


def _scatter_reduce_identity(reduce, dtype):
    """The value ``include_self=False`` resets each scattered-to position to before combining."""
    if reduce in ("sum", "mean"):
        return 0
    if dtype.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


@register_lowering(aten.scatter_reduce.two)
def _scatter_reduce_two(x, dim, index, src, reduce, *, include_self=True):
    """``x.scatter_reduce(dim, index, src, reduce, include_self=...)`` for reduce sum, mean, amax
    and amin, after Inductor: a copy of ``x``, where ``include_self=False`` first a pass storing
    the reduction's identity at every position some index element points to, then a pass over
    ``index``'s shape combining ``src[i]`` into ``out[i with dim -> index[i]]`` atomically
    (``tl.atomic_add``/``_max``/``_min``; combines commute, so duplicate indices give torch's
    result up to float rounding of sums).

    - mean: the sum as above, a count buffer (1 where ``include_self`` else 0, plus one atomic add
      per index element) and a pointwise ``sum / count`` where ``count > 0`` (floor division for
      integers, as torch).
    - amax/amin are exact in a wider dtype, so fp16/bf16 combine in float32 and bool/8/16-bit
      integers in int32, converted back at the end. Floats: a NaN in ``src`` wins (the atomic
      combine turns it into a NaN the others cannot displace), and with ``include_self`` a final
      pointwise keeps ``x``'s own NaNs (whose sign bit could otherwise lose to the integer
      compare).
    - sum/mean need Triton's atomic add in ``x``'s dtype: only float32/64 and int32/64 lower
      (fp16/bf16 atomic adds round per add, 8/16-bit integers have none), as scatter_add. bool
      sum is a logical or (amax), bool prod a logical and (amin).
    - prod has no atomic: each output element gathers its factors (``_scatter_prod``).

    Falls back (NotImplementedError): sum/mean of fp16/bf16/8-16-bit integers, prod beyond
    ``_SCATTER_PROD_MAX_WORK``, 0-d or rank-mismatched operands."""
    dtype = x.get_dtype()
    if dtype == torch.bool and reduce in ("sum", "prod"):
        reduce = "amax" if reduce == "sum" else "amin"  # bool + is or, bool * is and
    if reduce == "prod":
        return _scatter_prod(x, dim, index, src, include_self)
    if reduce not in _SCATTER_REDUCE_MODE:
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}")
    if reduce in ("amax", "amin"):
        acc = (
            torch.float32
            if dtype in (torch.float16, torch.bfloat16)
            else torch.int32
            if dtype in (torch.bool, torch.int8, torch.int16, torch.uint8)
            else dtype
        )
        if acc not in _ATOMIC_ADD_DTYPES:
            raise NotImplementedError(f"scatter_reduce {reduce} of {dtype}")
    else:
        if dtype not in _ATOMIC_ADD_DTYPES:
            raise NotImplementedError(f"scatter_reduce {reduce} of {dtype}")
        acc = dtype
    dim, index_fn = _scatter_dim_index_fn(x, dim, index, "scatter_reduce")
    isize, size, device = list(index.get_size()), list(x.get_size()), x.get_device()
    out, target = _mutable_copy(x, acc)
    if not include_self:
        ident = _scatter_reduce_identity(reduce, acc)
        _mutate(target, isize, index_fn, lambda idx: ops.constant(ident, acc), None)
    _mutate(target, isize, index_fn, src.make_loader(), _SCATTER_REDUCE_MODE[reduce])
    if reduce == "mean":
        count, ctarget = _mutable_copy(_full(size, 1 if include_self else 0, acc, device))
        _mutate(ctarget, isize, index_fn, lambda idx: ops.constant(1, acc), "atomic_add")
        sl, cl = out.make_loader(), count.make_loader()

        def mean(idx):
            c = cl(idx)
            c = ops.where(ops.eq(c, ops.constant(0, acc)), ops.constant(1, acc), c)
            return (ops.truediv if acc.is_floating_point else ops.floordiv)(sl(idx), c)

        return Pointwise.create(device, dtype, mean, size)
    keep_nan = reduce in ("amax", "amin") and include_self and dtype.is_floating_point
    if acc == dtype and not keep_nan:
        return out
    ol, xl = out.make_loader(), x.make_loader()

    def finish(idx):
        v = ol(idx)
        if keep_nan:  # (tested in the wider dtype: the interpreter compares bf16 on its bits)
            xv = to_dtype_value(xl(idx), acc)
            v = ops.where(ops.isnan(xv), xv, v)
        return to_dtype_value(v, dtype)

    return Pointwise.create(device, dtype, finish, size)


# ---------------------------------------------------------------------------------- max pooling


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
        from ..ir import graph_context as G

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
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

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
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
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
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

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
    acc = (
        torch.float32
        if dtype in (torch.float16, torch.bfloat16)
        else (dtype if dtype.is_floating_point else torch.int64)
    )
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


# ---------------------------------------------------------------------------------- scans


def _scan(x, dim: int, stype: str, out: torch.dtype):
    """Inclusive scan ``stype`` ("sum" / "prod" / "logsumexp") of ``x`` along ``dim`` as a scan
    kernel — persistent for rows up to ``config.persistent_reduction_threshold``, else looped
    with a per-row carry (``TritonKernel.codegen_scan``), symbolic row lengths included —
    accumulated in fp32 for low-precision ``out`` and converted to ``out`` (as Inductor's scans).
    CUDA eager scans half-precision columns (a dim other than the last) adding in half
    precision, one rounding per element, so its running sums drift from the exact ones (about
    1 on sums near 100 after 5000 float16 rows); tilefuse's stay within one rounding. Under
    Triton's interpreter float32 scans combine in float64 (``TritonKernel.codegen_scan``), so CPU
    results are not the GPU's roundings. Raises NotImplementedError (the aten op runs) for a bool
    result."""
    size = list(x.get_size())
    if not size:
        return _to_dtype_lowering(x, out)
    dim = dim % len(size)
    n = size[dim]
    if (isinstance(n, int) and n <= 1) or prod(size) == 0:
        return _to_dtype_lowering(x, out)
    if out == torch.bool:
        # eager has no bool scan kernel ("cumsum_out_cpu" not implemented for 'Bool'): the aten op
        # raises it at run time as eager does
        raise NotImplementedError("a scan whose result dtype is bool")
    acc = torch.float32 if out in (torch.float16, torch.bfloat16) else out
    loader = x.make_loader()
    kept = [s for i, s in enumerate(size) if i != dim]
    # torch casts the input to ``dtype=`` first, then scans: a narrowing cast (float32 or int32 to
    # float16) rounds every element before the float32 accumulator sees it
    src = x.get_dtype()

    def inner(idx, ridx):
        v = loader(list(idx[:dim]) + [ridx[0]] + list(idx[dim:]))
        if src != out and acc != out:
            v = to_dtype_value(v, out)
        return to_dtype_value(v, acc)

    # the buffer holds ``out`` (converted in the scan's kernel): no second kernel, half the writes
    box = TensorBox.create(ir.Scan(x.get_device(), out, inner, kept, [n], stype, acc, size, dim))
    box.realize()
    return box


@register_lowering(aten.logcumsumexp.default)
def _logcumsumexp(x, dim):
    """``logcumsumexp`` along ``dim``: a scan whose combine is ``log(exp(a) + exp(b))`` (stable:
    ``max + log(1 + exp(min - max))``). Integer inputs fall back (aten's rules)."""
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("logcumsumexp of an integer tensor")  # -> fallback
    return _scan(x, dim, "logsumexp", x.get_dtype())


@register_lowering(aten.cumsum.default, aten.cumprod.default)
def _cumsum_cumprod(x, dim, *, dtype=None):
    """``cumsum``/``cumprod`` along ``dim`` (``tl.cumsum`` / ``tl.cumprod`` over the row; int64
    for integer inputs as torch)."""
    from ..ir import graph_context as G

    stype = "sum" if G.graph().current_target is aten.cumsum.default else "prod"
    src = x.get_dtype()
    return _scan(x, dim, stype, dtype or (src if src.is_floating_point else torch.int64))
