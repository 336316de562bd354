"""Reduction lowerings, over ``common.make_reduction``: sum/prod/amax/amin/any/argmax/argmin
over dims, mean, var/std (``_var_mean_impl``), layer norm, max/min along a dim and vector
norms. Half-precision inputs accumulate in float32 (``ir.dtypes.accumulator_dtype``).
"""

from __future__ import annotations

import math
import numbers

import torch

from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.dtypes import accumulator_dtype
from ..ir.nodes import Pointwise, Reduction, prod
from ..virtualized import ops
from .common import (
    _reduction_dims,
    _reduction_inner,
    _size_value,
    _sv,
    _to_dtype_lowering,
    make_pointwise,
    make_reduction,
    to_dtype_value,
)
from .registry import NO_OPMATH, register_lowering

aten = torch.ops.aten
prims = torch.ops.prims


register_lowering(aten.sum.dim_IntList)(make_reduction("sum"))


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


@register_lowering(aten.mean.dim, aten.mean.default)
def _mean(x, dims=None, keepdim=False, *, dtype=None):
    """mean = sum / count, summed in fp32 for low-precision inputs."""
    size = list(x.get_size())
    rdims = _reduction_dims(x, dims)
    n = prod(size[d] for d in rdims)
    out_dtype = dtype or x.get_dtype()
    acc = accumulator_dtype(out_dtype)
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
    acc = accumulator_dtype(out_dtype)
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
    acc = accumulator_dtype(dtype)
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


def _values_and_indices(x, dim, keepdim, value_type: str, index_type: str):
    """(values, indices) of ``x`` along ``dim``: the ``value_type`` and ``index_type`` reductions
    (amax and argmax, or amin and argmin) over the same rows, which fuse into one kernel."""
    values = make_reduction(value_type)(x, [dim], keepdim)
    indices = make_reduction(index_type)(x, dim, keepdim)
    return values, indices


@register_lowering(aten.max.dim)
def _max_dim(x, dim, keepdim=False):
    """``x.max(dim)``: (values, indices) as amax and argmax."""
    return _values_and_indices(x, dim, keepdim, "amax", "argmax")


@register_lowering(aten.min.dim)
def _min_dim(x, dim, keepdim=False):
    """``x.min(dim)``: (values, indices) as amin and argmin."""
    return _values_and_indices(x, dim, keepdim, "amin", "argmin")


@register_lowering(aten.linalg_vector_norm.default)
def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.vector_norm`` for ord 2, 1, inf and -inf (others fall back). A symbolic
    integer ``ord`` (a Python int under ``dynamic=True``) is taken at its value, guarded: the graph
    serves that norm, as torch's decomposition, which branches on it, would."""
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("vector_norm of an integer tensor")
    if isinstance(ord, S.Expr) and not ord.is_number:
        sv = G.graph().sizevars
        value = sv.hint(ord)
        sv.guard_equals(ord, value)
        ord = value
    out_dtype = dtype or x.get_dtype()
    acc = accumulator_dtype(out_dtype)
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
