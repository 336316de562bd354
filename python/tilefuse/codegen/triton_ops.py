"""The op -> Triton source table: what each ``ops.<name>`` of a loop body becomes in a kernel.

``MATH_OPS`` maps every math op name of the loop-body vocabulary to a small function that returns
the op's Triton expression from its operands' source (``MathCall``). Memory, constant, index,
cast, reduction and scan ops are emitted by the kernel itself (``triton_kernel``,
``triton_memory``, ``triton_reductions``); their dtype conversions come from ``cast`` and
``bitcast`` here.

Under the Triton interpreter (CPU tensors) ``libdevice`` is unavailable, so ops without a core
``tl`` builtin use portable formulas there (``MathCall.lib`` is False); on the GPU they call
libdevice. Formulas that need intermediate values name them through the kernel's CSE
(``MathCall.cse``), so the order of those calls is part of the generated text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..ir.loop_body import BodyValue

TL_DTYPE = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}


def tl_dtype(dt: torch.dtype) -> str:
    """Triton type name of a torch dtype; NotImplementedError for dtypes kernels cannot hold."""
    try:
        return TL_DTYPE[dt]
    except KeyError:
        raise NotImplementedError(f"dtype {dt} is not supported in generated kernels") from None


def const_literal(value: Any, dtype: torch.dtype) -> str:
    """``value`` as a Python literal of ``dtype`` in kernel source: ``1``/``0`` for bools, a float
    ``repr`` (``float("nan")``, ``float("inf")`` for the special values), integers wrapped to the
    dtype's width as torch wraps an out-of-range scalar."""
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    bits = {torch.int8: 8, torch.uint8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}.get(dtype, 64)
    v = int(value) & ((1 << bits) - 1)
    if dtype != torch.uint8 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return str(v)


# the integer dtype of the same width as each float dtype (constants built from their bits)
SAME_WIDTH_INT = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def negative_zero_or_nan(value: Any, dtype: torch.dtype) -> torch.Tensor | None:
    """``value`` rounded to ``dtype`` as torch rounds a fill value (a 0-dim tensor), when that is
    -0.0 or a NaN with its sign bit set; None otherwise (and for dtypes other than float64,
    float32, float16 and bfloat16). torch's float-to-bfloat16 conversion makes every NaN
    positive, so ``-nan`` in bfloat16 is None here, as ``torch.full((1,), -nan, dtype=bf16)`` has
    no sign bit."""
    if dtype not in SAME_WIDTH_INT or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):  # a symbolic value: neither zero nor NaN at compile time
        return None
    if not (v == 0 or math.isnan(v)) or math.copysign(1.0, v) > 0:
        return None
    t = torch.tensor(v, dtype=dtype)
    return t if bool(torch.signbit(t)) else None


def reduction_identity(rtype: str, dtype: torch.dtype) -> str:
    """The identity of reduction ``rtype`` in ``dtype`` as source (masked lanes take it):
    0 for sum/any, 1 for prod, the dtype's lowest / highest value (``-inf`` / ``inf`` for floats)
    for max/argmax and min/argmin. NotImplementedError for other types."""
    if rtype == "sum" or rtype == "any":
        return "0"
    if rtype == "prod":
        return "1"
    if rtype in ("max", "argmax"):
        if dtype.is_floating_point:
            return 'float("-inf")'
        return "0" if dtype == torch.bool else str(torch.iinfo(dtype).min)
    if rtype in ("min", "argmin"):
        if dtype.is_floating_point:
            return 'float("inf")'
        return "1" if dtype == torch.bool else str(torch.iinfo(dtype).max)
    raise NotImplementedError(rtype)


# ---------------------------------------------------------------------------------- conversions
def cast(x: str, src: torch.dtype | None, dst: torch.dtype, interpret: bool) -> str:
    """Source converting ``x`` (of ``src``) to ``dst`` as torch does: float -> int truncates
    toward zero, to bool is ``!= 0``, and float -> bfloat16 rounds to nearest even. Triton's
    interpreter truncates fp32 -> bf16, so there the rounding is done on the bits."""
    if src == dst:
        return x
    if dst == torch.bool:
        return f"({x} != 0)"
    if src == torch.bool:
        return cast(f"{x}.to(tl.int8)", torch.int8, dst, interpret)
    if dst == torch.bfloat16 and interpret and src is not None and not src.is_floating_point:
        # the interpreter reinterprets an integer's bits as bf16: convert through fp32
        return cast(f"{x}.to(tl.float32)", torch.float32, dst, interpret)
    if dst == torch.bfloat16 and interpret and src is not None and src.is_floating_point:
        bits = f"{x}.to(tl.float32).to(tl.uint32, bitcast=True)"
        rounded = f"(({bits} + (0x7FFF + (({bits} >> 16) & 1))) & 0xFFFF0000)"
        nan = f"({x} != {x})"
        return f"tl.where({nan}, {x}.to(tl.float32), {rounded}.to(tl.float32, bitcast=True)).to(tl.bfloat16)"
    return f"{x}.to({tl_dtype(dst)})"


def bitcast(x: str, src: torch.dtype, dst: torch.dtype) -> str:
    """Source reinterpreting ``x``'s bits (of ``src``) as ``dst`` of the same width:
    Triton's ``.to(dst, bitcast=True)``, bfloat16 included (the interpreter holds bfloat16 as
    its 16 bits; going through float32 there would flush subnormals, which its bfloat16 to
    float32 conversion does)."""
    return x if src == dst else f"{x}.to({tl_dtype(dst)}, bitcast=True)"


# ---------------------------------------------------------------------------------- formulas
def fmod_float(a: str, b: str, interpret: bool) -> str:
    """Source of C's ``fmod`` of floats (the remainder of the quotient truncated toward zero,
    exact): libdevice's ``fmod`` on the GPU, where Triton's ``%`` on floats (LLVM ``frem``) is
    expanded by the NVPTX back end as ``a - b * trunc(a / b)`` and so loses the remainder of
    large quotients; ``%`` under the interpreter (numpy's ``fmod``, exact)."""
    return f"libdevice.fmod({a}, {b})" if not interpret else f"{a} % {b}"


def expm1_without_libdevice(cse: Callable[[str], str], v: str) -> str:
    """``expm1(v)`` where libdevice is missing (the interpreter), in Kahan's form ``(u - 1) * v /
    log(u)`` with ``u = exp(v)``, whose rounding errors cancel (``exp(v) - 1`` loses every digit
    for ``|v| < 1e-8``): a few ulp; ``v`` itself where ``u`` rounds to 1 (-0.0 kept), -1 where
    ``u - 1`` does, inf where ``u`` overflows, NaN for NaN."""
    u = cse(f"tl.exp({v})")
    return (
        f"tl.where({u} == 1.0, {v}, tl.where({u} - 1.0 == -1.0, -1.0, "
        f'tl.where({u} == float("inf"), {u}, ({u} - 1.0) * ({v} / tl.log({u})))))'
    )


def floor_divide_float(
    cse: Callable[[str], str], a: str, b: str, interpret: bool, div: Callable[[str, str], str] | None = None
) -> str:
    """Source of torch's floor division of floats (``a // b``, ``div(rounding_mode='floor')``)
    as aten computes it (c10's ``div_floor_floating``), not ``floor(a / b)``: the quotient of
    ``a - fmod(a, b)``, one less when the remainder's sign differs from ``b``'s, then rounded
    to the nearest integer below or at it. ``floor(a / b)`` rounds the division first, which
    gives ``1.0 // 0.1`` 10.0 where torch (and Python) give 9.0, and ``inf // 2.0`` inf where
    torch gives nan. A zero divisor gives ``a / b`` (IEEE: ±inf or nan); a zero quotient keeps
    the sign of ``a / b``. ``div``: the source of a division of two operand sources (default
    ``/``; ``MathCall.div_rn`` for IEEE-rounded float32 division on the GPU)."""
    div_ = div or (lambda x, y: f"({x} / {y})")
    mod = cse(fmod_float(a, b, interpret))
    div = cse(div_(f"({a} - {mod})", b))
    div = cse(f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {div} - 1.0, {div})")
    low = cse(f"tl.floor({div})")
    rounded = cse(f"tl.where({div} - {low} > 0.5, {low} + 1.0, {low})")
    q = cse(div_(a, b))
    # a zero quotient: 0.0 * q is +-0 with q's sign (q is finite there: |a| < |b|)
    return f"tl.where({b} == 0, {q}, tl.where({div} != 0, {rounded}, 0.0 * {q}))"


def _atan_f64(c, t: str) -> str:
    """atan of a float64 value ``t`` as Triton source (no libdevice), intermediates named through
    ``c`` (the kernel's CSE): |t| > 1 reflects to pi/2 - atan(1/|t|), |t| > tan(pi/8) shifts to
    pi/4 + atan((|t|-1)/(|t|+1)), and the reduced argument (|u| <= 0.4143) goes through 14 terms
    of atan's Taylor series (error < 1e-12)."""
    a = c(f"tl.abs({t})")
    big = c(f"{a} > 1.0")
    r = c(f"tl.where({big}, 1.0 / {a}, {a})")
    mid = c(f"{r} > 0.41421356237309503")
    u = c(f"tl.where({mid}, ({r} - 1.0) / ({r} + 1.0), {r})")
    z = c(f"{u} * {u}")
    poly = "0.0"
    for k in reversed(range(14)):
        poly = c(f"{(-1) ** k / (2 * k + 1)!r} + {z} * {poly}")
    v = c(f"{u} * {poly}")
    v = c(f"tl.where({mid}, 0.7853981633974483 + {v}, {v})")
    v = c(f"tl.where({big}, 1.5707963267948966 - {v}, {v})")
    return f"tl.where({t} < 0, -{v}, {v})"


def _atan2_f64(c, y: str, x: str) -> str:
    """atan2 from atan of |y|/|x| (both infinite: pi/4, both zero: 0), reflected for a negative
    (or -0.0) x and signed as y (signed zeros as C's atan2)."""
    ay, ax = c(f"tl.abs({y})"), c(f"tl.abs({x})")
    ratio = c(
        f"tl.where(({ay} == float('inf')) & ({ax} == float('inf')), 1.0, "
        f"tl.where(({ay} == 0) & ({ax} == 0), 0.0, {ay} / {ax}))"
    )
    r = c(_atan_f64(c, ratio))
    xneg = c(f"({x} < 0) | (({x} == 0) & (1.0 / {x} < 0))")
    yneg = c(f"({y} < 0) | (({y} == 0) & (1.0 / {y} < 0))")
    r = c(f"tl.where({xneg}, 3.141592653589793 - {r}, {r})")
    return f"tl.where({yneg}, -{r}, {r})"


def _asin_f64(c, x: str) -> str:
    return _atan_f64(c, c(f"{x} / tl.sqrt(1.0 - {x} * {x})"))


# float32 rsqrt on NVIDIA GPUs: the instruction libdevice's ``__nv_rsqrtf`` compiles to (Triton
# compiles with ``__CUDA_FTZ`` set, so the flush-to-zero form), emitted directly. Same binary code,
# but a kernel without any libdevice call skips linking libdevice into its LLVM module, which
# Triton does per compile by parsing the whole libdevice bitcode (a noticeable share of each
# normalization kernel's compile time).
PTX_RSQRT = (
    'tl.inline_asm_elementwise("rsqrt.approx.ftz.f32 $0, $1;", "=f,f", [({}).to(tl.float32)], '
    "dtype=tl.float32, is_pure=True, pack=1)"
)

# ops with a libdevice function on the GPU and a float64 formula under the interpreter; each takes
# the CSE function and its operands' names
F64_MATH = {
    "atan": _atan_f64,
    "atan2": _atan2_f64,
    "asin": _asin_f64,
    "acos": lambda c, x: f"1.5707963267948966 - {c(_asin_f64(c, x))}",
    "sinh": lambda c, x: (
        f"tl.where(tl.abs({x}) < 1e-5, {x} + {x} * {x} * {x} / 6.0, 0.5 * (tl.exp({x}) - tl.exp(-{x})))"
    ),
    "cosh": lambda c, x: f"0.5 * (tl.exp({x}) + tl.exp(-{x}))",
    "asinh": lambda c, x: (
        f"tl.where(tl.abs({x}) < 1e-5, {x} - {x} * {x} * {x} / 6.0, "
        f"tl.where({x} < 0, -1.0, 1.0) * tl.log(tl.abs({x}) + tl.sqrt({x} * {x} + 1.0)))"
    ),
    "acosh": lambda c, x: f"tl.where({x} < 1.0, float('nan'), tl.log({x} + tl.sqrt({x} * {x} - 1.0)))",
    "atanh": lambda c, x: (
        f"tl.where(tl.abs({x}) < 1e-5, {x} + {x} * {x} * {x} / 3.0, 0.5 * tl.log((1.0 + {x}) / (1.0 - {x})))"
    ),
    "hypot": lambda c, a, b: f"tl.sqrt({a} * {a} + {b} * {b})",
}


# ---------------------------------------------------------------------------------- the table
@dataclass
class MathCall:
    """One math op to render: its operands' source ``x`` (in argument order), the op's result
    ``dtype``, its raw loop-body arguments ``raw`` (BodyValues carry the operands' dtypes; scalar
    arguments such as randint64's bounds are read from here), the kernel's CSE function ``cse``
    (names an intermediate expression, returns its variable) and whether the kernel runs under
    the interpreter."""

    x: list[str]
    dtype: torch.dtype | None
    raw: Any
    cse: Callable[[str], str]
    interpret: bool

    @property
    def is_float(self) -> bool:
        """Whether the result is a float."""
        return self.dtype is not None and self.dtype.is_floating_point

    @property
    def in_float(self) -> bool:
        """Whether the first operand is a float value (not a scalar argument)."""
        return isinstance(self.raw[0], BodyValue) and self.raw[0].dtype.is_floating_point

    @property
    def lib(self) -> bool:
        """Whether libdevice is available (a GPU kernel)."""
        return not self.interpret

    @property
    def ieee_div(self) -> bool:
        """Whether a division must be spelled ``tl.math.div_rn``: a GPU kernel's division of a
        float result below float64 (computed in float32). Triton compiles float32 ``/`` to PTX's
        ``div.full.f32``, which is off by up to 2 units in the last place; eager's CUDA kernels
        divide with IEEE rounding (``div.rn.f32``). Float64 ``/`` is already ``div.rn.f64``,
        and the interpreter divides with numpy's IEEE division."""
        return self.lib and self.is_float and self.dtype != torch.float64

    def f32(self, i: int) -> str:
        """Operand ``i`` as a float32 value (``tl.math.div_rn`` takes float32 operands only)."""
        raw, src = self.raw[i], self.x[i]
        if isinstance(raw, BodyValue):
            return src if raw.dtype == torch.float32 else f"{src}.to(tl.float32)"
        if isinstance(raw, (int, float)):
            return const_literal(raw, torch.float32)
        return f"({src}).to(tl.float32)"  # a size symbol: an integer kernel argument

    @staticmethod
    def div_rn(a: str, b: str) -> str:
        """Source of the IEEE-rounded division ``a / b`` of float32 operand sources (where
        ``ieee_div`` holds)."""
        return f"tl.math.div_rn({a}, {b})"


MATH_OPS: dict[str, Callable[[str, MathCall], str]] = {}


def _ops(*names: str):
    """Register the decorated function as the rendering of each op in ``names``; it is called as
    ``fn(op, call)``."""

    def deco(fn):
        for n in names:
            assert n not in MATH_OPS, n
            MATH_OPS[n] = fn
        return fn

    return deco


def math_source(op: str, call: MathCall) -> str:
    """The Triton expression of math op ``op``; NotImplementedError for an op the table lacks."""
    fn = MATH_OPS.get(op)
    if fn is None:
        raise NotImplementedError(f"no Triton codegen for ops.{op}")
    return fn(op, call)


_BINARY = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "bitwise_and": "&",
    "bitwise_or": "|",
    "bitwise_xor": "^",
}


@_ops(*_BINARY)
def _binary(op: str, c: MathCall) -> str:
    x = c.x
    if op == "add" and c.dtype == torch.bool:
        # torch's bool + bool is logical or; Triton's int1 add wraps (True + True = False)
        return f"{x[0]} | {x[1]}"
    return f"{x[0]} {_BINARY[op]} {x[1]}"


@_ops("rand", "randn")
def _rand(op: str, c: MathCall) -> str:
    return f"tl.{op}({c.x[0]}, {c.x[1]})"


@_ops("randint64")
def _randint64(op: str, c: MathCall) -> str:
    # 64 random bits (two Philox words) reduced modulo the range: bias below range / 2**64
    # (32 bits would give values below 2**32 mod range up to 1.5x too often for ranges near 2**31)
    r4 = c.cse(f"tl.randint4x({c.x[0]}, {c.x[1]})")
    bits = c.cse(f"(({r4}[0].to(tl.uint64) << 32) | {r4}[1].to(tl.uint64))")
    return f"({bits} % {c.raw[3] - c.raw[2]}).to(tl.int64) + {c.raw[2]}"


@_ops("truediv")
def _truediv(op: str, c: MathCall) -> str:
    if c.ieee_div:
        return c.div_rn(c.f32(0), c.f32(1))
    return f"{c.x[0]} / {c.x[1]}"


@_ops("floordiv")
def _floordiv(op: str, c: MathCall) -> str:
    a, b = c.x
    if c.is_float:
        if c.ieee_div:
            return floor_divide_float(c.cse, c.f32(0), c.f32(1), c.interpret, c.div_rn)
        return floor_divide_float(c.cse, a, b, c.interpret)
    return f"tl.where((({a} % {b}) != 0) & (({a} < 0) != ({b} < 0)), {a} // {b} - 1, {a} // {b})"


@_ops("truncdiv")
def _truncdiv(op: str, c: MathCall) -> str:
    x = c.x
    if c.is_float:
        q = c.cse(c.div_rn(c.f32(0), c.f32(1)) if c.ieee_div else f"({x[0]} / {x[1]})")
        return f"tl.where({q} < 0, tl.ceil({q}), tl.floor({q}))"
    return f"{x[0]} // {x[1]}"


@_ops("remainder")
def _remainder(op: str, c: MathCall) -> str:
    a, b = c.x
    if c.is_float:
        # aten's float remainder: the truncated remainder (fmod; Triton's % on floats), moved by b
        # when its sign differs from b's (1.0 % 0.1 is 0.0999..., not the 0.0 or -5.6e-17 of
        # a - floor(a / b) * b)
        mod = c.cse(fmod_float(a, b, c.interpret))
        return f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {mod} + {b}, {mod})"
    return f"tl.where((({a} % {b}) != 0) & ((({a} % {b}) < 0) != ({b} < 0)), ({a} % {b}) + {b}, {a} % {b})"


@_ops("fmod")
def _fmod(op: str, c: MathCall) -> str:
    # torch.fmod, C's (truncated) remainder: Triton's % for ints
    return fmod_float(*c.x, c.interpret) if c.is_float else f"{c.x[0]} % {c.x[1]}"


@_ops("ipow")
def _ipow(op: str, c: MathCall) -> str:
    # integer power (lowering._pow): the generated module's _ipow, one squaring per bit
    signed = c.dtype.is_signed
    bits = torch.iinfo(c.dtype).bits - (1 if signed else 0)
    return f"_ipow({c.x[0]}, {c.x[1]}, {bits}, {signed})"


@_ops("lshift", "rshift")
def _shift(op: str, c: MathCall) -> str:
    return f"{c.x[0]} {'<<' if op == 'lshift' else '>>'} {c.x[1]}"


@_ops(*F64_MATH)
def _f64_math(op: str, c: MathCall) -> str:
    if c.lib:
        return f"libdevice.{op}({', '.join(c.x)})"
    # the interpreter has no libdevice: a float64 formula (exact enough for a result of float32 or
    # narrower, which the lowerings guarantee), rounded once
    args = [c.cse(f"{v}.to(tl.float64)") for v in c.x]
    return f"({F64_MATH[op](c.cse, *args)}).to({tl_dtype(c.dtype)})"


@_ops("signbit")
def _signbit(op: str, c: MathCall) -> str:
    bits = {torch.float64: "tl.int64", torch.float16: "tl.int16", torch.bfloat16: "tl.int16"}
    if not c.in_float:
        return f"{c.x[0]} < 0"
    return f"{c.x[0]}.to({bits.get(c.raw[0].dtype, 'tl.int32')}, bitcast=True) < 0"


@_ops("neg")
def _neg(op: str, c: MathCall) -> str:
    # Triton's unary minus of a float is 0 - x, which leaves +0.0 positive (eager: -0.0);
    # x * -1.0 flips the sign bit of every value (LLVM folds it into a negation)
    return f"{c.x[0]} * -1.0" if c.is_float else f"-{c.x[0]}"


@_ops("abs")
def _abs(op: str, c: MathCall) -> str:
    return f"tl.abs({c.x[0]})"


@_ops("reciprocal")
def _reciprocal(op: str, c: MathCall) -> str:
    return c.div_rn("1.0", c.f32(0)) if c.ieee_div else f"1.0 / {c.x[0]}"


@_ops("relu")
def _relu(op: str, c: MathCall) -> str:
    x = c.x
    return f"tl.where({x[0]} < 0, 0, {x[0]})" if c.in_float else f"tl.maximum({x[0]}, 0)"


@_ops("maximum", "minimum")
def _extremum(op: str, c: MathCall) -> str:
    x = c.x
    cmp = ">" if op == "maximum" else "<"
    if c.is_float:
        return f"tl.where(({x[0]} {cmp} {x[1]}) | ({x[0]} != {x[0]}), {x[0]}, {x[1]})"
    return f"tl.{op}({x[0]}, {x[1]})"


@_ops("fmax", "fmin")
def _fextremum(op: str, c: MathCall) -> str:
    x = c.x
    cmp = ">" if op == "fmax" else "<"
    return f"tl.where(({x[0]} {cmp} {x[1]}) | ({x[1]} != {x[1]}), {x[0]}, {x[1]})"


@_ops("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "sigmoid", "erf", "floor", "ceil")
def _tl_unary(op: str, c: MathCall) -> str:
    x = c.x
    if op == "rsqrt" and c.lib and c.dtype == torch.float32 and torch.version.hip is None:
        return PTX_RSQRT.format(x[0])
    if op in ("floor", "ceil") and not c.is_float:
        return x[0]
    return f"tl.{op}({x[0]})"


# log2(erfc(u)) on [0, 4] as a degree-9 polynomial in u (least squares in float64, coefficients
# rounded to float32), lowest degree first. Relative error of 2**p against erfc: <= 2.6e-6 on
# [0, 4) (absolute <= 8.8e-7), far below a bfloat16 or float16 result's rounding (2**-8, 2**-11).
LOG2_ERFC_POLY = (
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


@_ops("erf_poly")
def _erf_poly(op: str, c: MathCall) -> str:
    """erf(x) = sign(x) * (1 - erfc|x|), erfc|x| = 2**p(|x|) below 4 and 0 from there (float32's
    ``1 + erf`` is 0 or 2 there already); NaN stays NaN. Horner's rule, one ``exp2``; one
    arithmetic op per line, as ``heuristics.alu_ops`` counts a kernel's work in lines. Each
    Horner step is an explicit fused multiply-add (``tl.fma``, as CUDA's own ``erff`` evaluates
    its polynomials): one instruction, whatever ``config.fp_fusion`` lets the compiler contract."""
    x = c.x[0]
    u = c.cse(f"tl.abs({x})")
    p = repr(LOG2_ERFC_POLY[-1])
    for k in reversed(LOG2_ERFC_POLY[:-1]):
        p = c.cse(f"tl.fma({p}, {u}, {k!r})")
    e = c.cse(f"tl.where({u} < 4.0, tl.exp2({p}), 0.0)")
    t = c.cse(f"1.0 - {e}")
    return f"tl.where({x} != {x}, {x}, tl.where({x} < 0, -{t}, {t}))"


@_ops("log10")
def _log10(op: str, c: MathCall) -> str:
    return f"tl.log({c.x[0]}) * 0.4342944819032518"


@_ops("expm1")
def _expm1(op: str, c: MathCall) -> str:
    if c.lib:
        return f"libdevice.expm1({c.x[0]})"
    return expm1_without_libdevice(c.cse, c.x[0])


@_ops("log1p")
def _log1p(op: str, c: MathCall) -> str:
    x = c.x
    if c.lib:
        return f"libdevice.log1p({x[0]})"
    # without libdevice: log1p = log(u) * x / (u - 1), u = 1 + x (Goldberg), exact to a few ulp
    # where log(1 + x) loses every digit for |x| < 1e-8; x where u rounds to 1, inf at inf
    u = c.cse(f"1.0 + {x[0]}")
    return f'tl.where({u} == 1.0, {x[0]}, tl.where({u} == float("inf"), {u}, tl.log({u}) * ({x[0]} / ({u} - 1.0))))'


@_ops("tanh")
def _tanh(op: str, c: MathCall) -> str:
    x = c.x
    if c.lib:
        return f"libdevice.tanh({x[0]})"
    # without libdevice: tanh|x| = -t / (t + 2), t = expm1(-2|x|) in Kahan's form, a few ulp
    # everywhere (2 * sigmoid(2x) - 1 loses every digit for |x| < 1e-8). Zeros keep their sign,
    # NaN stays NaN
    t = c.cse(expm1_without_libdevice(c.cse, c.cse(f"-2.0 * tl.abs({x[0]})")))
    r = c.cse(f"({t} * -1.0) / ({t} + 2.0)")
    return f"tl.where({x[0]} == 0, {x[0]}, tl.where({x[0]} < 0, {r} * -1.0, {r}))"


@_ops("tan")
def _tan(op: str, c: MathCall) -> str:
    x = c.x
    return f"libdevice.tan({x[0]})" if c.lib else f"tl.sin({x[0]}) / tl.cos({x[0]})"


@_ops("trunc")
def _trunc(op: str, c: MathCall) -> str:
    x = c.x
    if not c.is_float:
        return x[0]
    return f"libdevice.trunc({x[0]})" if c.lib else f"tl.where({x[0]} < 0, tl.ceil({x[0]}), tl.floor({x[0]}))"


@_ops("round")
def _round(op: str, c: MathCall) -> str:
    x = c.x
    if not c.is_float:
        return x[0]
    if c.lib:
        return f"libdevice.nearbyint({x[0]})"
    f = f"tl.floor({x[0]} + 0.5)"
    return f"tl.where((({f} - {x[0]}) == 0.5) & (({f} % 2) != 0), {f} - 1.0, {f})"


@_ops("sign")
def _sign(op: str, c: MathCall) -> str:
    # as torch: (0 < x) - (x < 0), so sign(nan) is 0 (a nested tl.where of the literals 1 / -1 / 0
    # is miscompiled on the GPU: it gives 1 for negative inputs)
    x = c.x
    if c.dtype == torch.bool:
        return x[0]
    return f"({x[0]} > 0).to({tl_dtype(c.dtype)}) - ({x[0]} < 0).to({tl_dtype(c.dtype)})"


@_ops("pow")
def _pow(op: str, c: MathCall) -> str:
    a, b = c.x
    if c.lib:
        return f"libdevice.pow({a}, {b})"
    # |a|^b in float64 (exact enough to round once), the sign of a (-0.0 included, and given by a
    # product: Triton's unary minus is 0 - x, which leaves a zero positive) for an odd integer b,
    # NaN for a negative finite base and a non-integer b; as C's pow, pow(x, 0) = pow(1, y) =
    # pow(-1, +-inf) = 1 and pow(-inf, y) = |(-inf)^y| for y not an odd integer (+inf for y > 0,
    # +0 for y < 0)
    mag = c.cse(f"tl.exp({b}.to(tl.float64) * tl.log(tl.abs({a}).to(tl.float64)))")
    whole = c.cse(f"tl.floor({b}) == {b}")
    odd = c.cse(f"{whole} & ((tl.abs({b}) % 2) == 1)")
    aneg = c.cse(f"({a} < 0) | (({a} == 0) & (1.0 / {a} < 0))")
    signed = (
        f"tl.where({aneg} & {odd}, {mag} * -1.0, "
        f'tl.where(({a} < 0) & ({a} != -float("inf")) & ~{whole}, float("nan"), {mag}))'
    )
    one = f'({b} == 0) | ({a} == 1) | (({a} == -1) & (tl.abs({b}) == float("inf")))'
    return f"tl.where({one}, 1.0, {signed}).to({tl_dtype(c.dtype)})"


@_ops("logical_and", "logical_or", "logical_xor")
def _logical(op: str, c: MathCall) -> str:
    sym = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}[op]
    return f"({c.x[0]} != 0) {sym} ({c.x[1]} != 0)"


@_ops("logical_not")
def _logical_not(op: str, c: MathCall) -> str:
    return f"{c.x[0]} == 0"


@_ops("bitwise_not")
def _bitwise_not(op: str, c: MathCall) -> str:
    x, dtype = c.x, c.dtype
    if dtype == torch.bool:
        return f"{x[0]} == 0"
    if not dtype.is_signed:
        # xor with every bit set, of the same unsigned type: the interpreter's ``~`` is an xor
        # with -1, which NumPy refuses for an unsigned array
        ones = (1 << (torch.iinfo(dtype).bits)) - 1
        return f"{x[0]} ^ tl.full([], {ones}, {tl_dtype(dtype)})"
    return f"~{x[0]}"


@_ops("isnan")
def _isnan(op: str, c: MathCall) -> str:
    return f"{c.x[0]} != {c.x[0]}"


@_ops("isinf")
def _isinf(op: str, c: MathCall) -> str:
    return f'tl.abs({c.x[0]}) == float("inf")'
