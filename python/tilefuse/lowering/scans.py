"""Scan lowerings: cumsum, cumprod and logcumsumexp as ``ir.Scan`` kernels."""

from __future__ import annotations

import torch

from ..ir import nodes as ir
from ..ir.dtypes import accumulator_dtype
from ..ir.nodes import TensorBox, prod
from .common import _to_dtype_lowering, to_dtype_value
from .registry import register_lowering

aten = torch.ops.aten


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
    acc = accumulator_dtype(out)
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


def _cumulative(x, dim, stype: str, dtype):
    """Inclusive scan ``stype`` of ``x`` along ``dim`` in ``dtype``, by default ``x``'s for
    floats and int64 for integer inputs, as torch."""
    src = x.get_dtype()
    return _scan(x, dim, stype, dtype or (src if src.is_floating_point else torch.int64))


@register_lowering(aten.cumsum.default)
def _cumsum(x, dim, *, dtype=None):
    """``cumsum`` along ``dim`` (``tl.cumsum`` over the row)."""
    return _cumulative(x, dim, "sum", dtype)


@register_lowering(aten.cumprod.default)
def _cumprod(x, dim, *, dtype=None):
    """``cumprod`` along ``dim`` (``tl.cumprod`` over the row)."""
    return _cumulative(x, dim, "prod", dtype)
