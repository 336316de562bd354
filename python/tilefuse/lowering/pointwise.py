"""Elementwise lowerings: arithmetic, math functions, comparisons, bitwise ops, ``where``,
``clamp``, dtype conversions and copies. Each is a ``make_pointwise`` over ``ops`` calls; low
precision floats compute in float32 (opmath), as eager does.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch._prims_common import elementwise_dtypes

from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.dtypes import is_half_precision
from ..ir.nodes import Pointwise
from ..virtualized import ops
from .common import (
    _as_device,
    _binary,
    _device,
    _full,
    _to_dtype_lowering,
    _unary,
    broadcast_shapes,
    make_pointwise,
    to_dtype_value,
)
from .registry import (
    ALWAYS_BOOL,
    BOOL_TO_LONG,
    DEFAULT,
    INT_TO_FLOAT,
    NO_OPMATH,
    _meta,
    is_tensor,
    lowerings,
    register_lowering,
)

aten = torch.ops.aten
prims = torch.ops.prims


def _add_alpha(name):
    def lower(a, b, alpha=1):
        if alpha != 1:
            b = lowerings[aten.mul.Tensor](b, alpha) if is_tensor(b) else b * alpha
        return make_pointwise(lambda x, y: getattr(ops, name)(x, y))(a, b)

    return lower


register_lowering(aten.add)(_add_alpha("add"))
register_lowering(aten.sub)(_add_alpha("sub"))
register_lowering(aten.mul)(_binary("mul"))
# true_divide is div without a rounding mode; it reaches the graph after decomposition when
# AOTAutograd turns arithmetic on symbolic Python floats into tensor ops (dynamic=True)
_truediv = _binary("truediv", INT_TO_FLOAT)


_DIVS = (aten.div.Tensor, aten.div.Scalar, aten.true_divide.Tensor, aten.true_divide.Scalar)


def _divisor_is_host_scalar() -> bool:
    """Whether the division being lowered divides by a 0-d CPU tensor (a Python float that
    Dynamo passes as one under ``dynamic=True``, or a host value's casts): eager's CUDA kernel
    takes such a divisor as a CPU scalar, as it takes a Python number."""
    node = G.graph().current_node
    if node is None or node.target not in _DIVS or len(node.args) < 2:
        return False
    meta = node.args[1].meta.get("val") if isinstance(node.args[1], torch.fx.Node) else None
    return isinstance(meta, torch.Tensor) and meta.dim() == 0 and meta.device.type == "cpu"


@register_lowering(*_DIVS)
def _true_divide(a, b):
    """True division. A tensor divided by a CPU scalar on a GPU (a Python number, or a 0-d CPU
    tensor) is a multiplication by the divisor's reciprocal, computed in the op's compute dtype
    (float32 for float16/bfloat16/float32, float64 for float64) from the divisor rounded to it:
    what CUDA's eager kernel does for a CPU scalar divisor (``div_true_kernel_cuda``:
    ``a * (opmath(1) / b)``), so results match eager bit for bit, where ``a / b`` can differ by
    one unit in the last place (a difference that a softmax of large logits magnifies); a
    multiplication is also cheaper than a division. A Python number's reciprocal is folded at
    compile time; a 0-d tensor's is computed in the kernel (IEEE-rounded: codegen's
    ``MathCall.div_rn``). On the CPU eager's kernel divides, and so does the lowering. Inductor
    multiplies by a constant's reciprocal on every device."""
    if is_tensor(a) and a.get_device().type != "cpu":
        if isinstance(b, numbers.Real) and not isinstance(b, bool):
            cdt, _ = elementwise_dtypes(_meta(a), b, type_promotion_kind=INT_TO_FLOAT)
            if cdt in (torch.float32, torch.float64):
                inv = torch.tensor(float(b), dtype=cdt).reciprocal().item()
                return make_pointwise(lambda x, r: ops.mul(x, r), INT_TO_FLOAT)(a, inv)
        elif is_tensor(b) and _divisor_is_host_scalar():
            cdt, _ = elementwise_dtypes(_meta(a), _meta(b), type_promotion_kind=INT_TO_FLOAT)
            if cdt in (torch.float32, torch.float64):
                return make_pointwise(lambda x, y: ops.mul(x, ops.reciprocal(y)), INT_TO_FLOAT)(a, b)
    return _truediv(a, b)


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


@register_lowering(prims.div.default)
def _prims_div(a, b):
    """``prims.div``: true division of floats, division rounded toward zero of integers (no type
    promotion: the prim takes operands of one dtype)."""
    dtype = (a if is_tensor(a) else b).get_dtype()
    if dtype.is_floating_point:
        return _binary("truediv", NO_OPMATH)(a, b)
    return _binary("truncdiv", NO_OPMATH)(a, b)


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


@register_lowering(aten.gelu)
def _gelu(x, approximate="none"):
    """``aten.gelu`` as eager's kernel computes it, in float32 opmath for half-precision inputs:
    ``x * 0.5 * (1 + erf(x / sqrt(2)))``, or with ``approximate="tanh"`` ``0.5 * x * (1 +
    tanh(sqrt(2 / pi) * (x + 0.044715 x**3)))``. A float16/bfloat16 input's ``erf`` is
    ``ops.erf_poly`` (a polynomial within 9e-7 of erf, far below the result's rounding) rather
    than libdevice's ``erf``, which makes a bias + GELU kernel ALU-bound on the GPU; one op in
    the loop body either way, so a GELU read by two kernels (the sum and the scaling of a
    global response norm) is recomputed in each, as Inductor's op count rule decides for its
    one-call ``erf``, instead of realized (``GraphLowering._maybe_realize_on_reuse``). A
    tilefuse lowering: Inductor decomposes gelu with torch's reference and calls libdevice."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if not x.get_dtype().is_floating_point:
        # eager has no integer or bool GELU: the aten op runs and raises its own error
        raise NotImplementedError(f"gelu of a {x.get_dtype()} tensor")
    half = is_half_precision(x.get_dtype())

    def exact(v):
        u = ops.mul(v, ops.constant(0.7071067811865476, v.dtype))
        e = ops.erf_poly(u) if half else ops.erf(u)
        return ops.mul(ops.mul(v, ops.constant(0.5, v.dtype)), ops.add(ops.constant(1.0, v.dtype), e))

    def tanh(v):
        cube = ops.mul(ops.mul(v, v), v)
        inner = ops.add(v, ops.mul(ops.constant(0.044715, v.dtype), cube))
        t = ops.tanh(ops.mul(ops.constant(0.7978845608028654, v.dtype), inner))
        return ops.mul(ops.mul(ops.constant(0.5, v.dtype), v), ops.add(ops.constant(1.0, v.dtype), t))

    return make_pointwise(exact if approximate == "none" else tanh)(x)


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


@register_lowering(aten.clamp)
def _clamp(x, min=None, max=None):
    out = x
    if min is not None:
        out = make_pointwise(lambda a, b: ops.maximum(a, b))(out, min)
    if max is not None:
        out = make_pointwise(lambda a, b: ops.minimum(a, b))(out, max)
    return out


# clamp_min's and clamp_max's one bound comes positionally: each binds it to its own side (as
# ``clamp``'s second positional argument, clamp_max's bound would be taken for a lower bound)
@register_lowering(aten.clamp_min)
def _clamp_min(x, min):
    return _clamp(x, min=min)


@register_lowering(aten.clamp_max)
def _clamp_max(x, max):
    return _clamp(x, max=max)


@register_lowering(prims.convert_element_type)
def _convert_element_type(x, dtype):
    return _to_dtype_lowering(x, dtype)


@register_lowering(aten._to_copy)
def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    """``x.to(dtype)``; a device transfer runs as the aten op. A Python number ``x`` (functorch's
    ``vmap(grad(...))`` traces ``_to_copy(2.5, dtype=float32)``) is a 0-d tensor of the node's
    meta dtype and device."""
    if not is_tensor(x):
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


@register_lowering(prims.copy_strided.default)
def _copy_strided(x, stride):
    """``prims.copy_strided`` (decompositions use it to give a result eager's strides): a copy.
    Within the functional graph strides carry no meaning; graph outputs get eager's strides from
    their meta values."""
    return _clone(x)


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
