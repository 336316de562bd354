"""Nearest-neighbour upsampling (``upsample_nearest{1,2,3}d``, ``_upsample_nearest_exact{1,2,3}d``)
lowered as a gather with eager's source-index rule for the tensor's device.

Eager picks, for output position ``i`` along a spatial dim of input length ``n`` and output length
``m``, the source ``min(floor(i * scale), n - 1)`` (``nearest``) or
``min(floor((i + 0.5) * scale), n - 1)`` (``nearest-exact``), computed in float32, where ``scale``
is ``1 / scale_factor`` when a positive scale factor was given, else ``n / m``
(``compute_scales_value<float>`` in ATen's ``UpSample.h``). Its kernels also take shortcuts that
are not that formula when ``1 / scale_factor`` is not ``n / m`` (a scale factor of 1.3 on a length
of 3 keeps the length):

- a dim whose length is unchanged is copied (source ``i``): on the CPU by the 2-D ``nearest``
  kernel, on CUDA by the 2-D kernels of both modes (``_SHORTCUTS``);
- a dim whose length doubles reads source ``i // 2``: on the CPU by the 2-D ``nearest`` kernel.

torch's decomposition (``torch._decomp``'s ``_upsample_nearest``) has neither shortcut, so it reads
other rows than eager in those cases; this lowering follows eager per device. torch installs that
decomposition as the ops' Python kernels, which AOTAutograd's trace would run before any
decomposition table is consulted; the backend sets them aside while it traces
(``decompositions.without_wrong_torch_decompositions``), so the ops reach the graph whole. A float32 scale
``k / 2**e`` whose products ``i * k`` stay exact in float32 (the common integer and power-of-two
factors) is applied as integer index arithmetic (no float math in the kernel); any other scale as
float32 math and an indirect index. The backward ops are not lowered: they run as aten kernels.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import symbolic as S
from ..ir.nodes import Pointwise
from ..virtualized import ops
from .common import _size_value, _sv
from .registry import register_lowering

aten = torch.ops.aten

# integers below this are exact in float32 (24-bit significand)
_F32_EXACT = 1 << 24


def _scale_f32(n, m, scale: float | None) -> float | None:
    """The float32 value of eager's scale for input length ``n`` and output length ``m`` (ints), or
    None when it is a runtime value (symbolic lengths and no scale factor)."""
    if scale is not None and scale > 0:
        return float(np.float32(1.0 / scale))
    if isinstance(n, int) and isinstance(m, int):
        return float(np.float32(n) / np.float32(m))
    return None


def _dyadic(scale: float) -> tuple[int, int]:
    """``(k, e)`` with ``scale == k / 2**e`` exactly (every float is such a fraction)."""
    mant, exp = math.frexp(scale)  # scale = mant * 2**exp, 0.5 <= mant < 1
    k, e = int(mant * (1 << 53)), 53 - exp
    while e > 0 and k % 2 == 0:
        k, e = k // 2, e - 1
    if e < 0:
        return k << -e, 0
    return k, e


# (device type, spatial dims, exact) -> (a kept length is copied, a doubled length reads i // 2):
# the shortcuts eager's kernels take before the formula, read from each device's kernels (on the
# CPU the 2-D nearest kernel takes both; on CUDA the 2-D kernels of both modes copy a kept length);
# tests/test_upsample.py checks each against eager on the device it runs on
_SHORTCUTS = {
    **{(dev, nd, exact): (False, False) for dev in ("cpu", "cuda") for nd in (1, 2, 3) for exact in (False, True)},
    ("cpu", 2, False): (True, True),
    ("cuda", 2, False): (True, False),
    ("cuda", 2, True): (True, False),
}


def _source_index(i, n, m, scale: float | None, exact: bool, rule: tuple[bool, bool]):
    """Source position (an index expression, possibly through an indirect index) that output
    position ``i`` of a dim of input length ``n`` and output length ``m`` reads, under the
    shortcuts ``rule`` (``_SHORTCUTS``)."""
    sv = _sv()
    kept, doubled = rule
    if kept and sv.evaluate_equals(m, n):
        return i
    if doubled and sv.evaluate_equals(m, 2 * n):
        return S.FloorDiv(i, S.Integer(2))
    hi = n - 1
    s = _scale_f32(n, m, scale)
    if s is not None and isinstance(m, int):
        k, e = _dyadic(s)
        # (2i + 1) * k / 2**(e+1) for nearest-exact; exact in float32 while 2m * k stays below 2**24
        if 2 * m * k < _F32_EXACT:
            num = (2 * i + 1) * k if exact else i * k
            src = S.FloorDiv(num, S.Integer(1 << (e + 1 if exact else e)))
            last = ((2 * (m - 1) + 1) * k) >> (e + 1) if exact else ((m - 1) * k) >> e
            if isinstance(n, int) and last <= n - 1:
                return src
            return S.Min(src, hi if isinstance(hi, S.Expr) else S.Integer(hi))
    pos = ops.to_dtype(ops.index_expr(i, torch.int64), torch.float32)
    if exact:
        pos = ops.add(pos, ops.constant(0.5, torch.float32))
    if s is not None:
        scale_v = ops.constant(s, torch.float32)
    else:  # n / m rounded once to float32 (the float64 quotient of two lengths, then float32)
        scale_v = ops.to_dtype(ops.truediv(_size_value(n, torch.float64), _size_value(m, torch.float64)), torch.float32)
    v = ops.to_dtype(ops.floor(ops.mul(pos, scale_v)), torch.int64)
    v = ops.minimum(v, _size_value(hi, torch.int64))
    return ops.indirect_indexing(v, n, False, False)


def _upsample_nearest(x, output_size, scales, exact: bool):
    size = list(x.get_size())
    nsp = len(output_size)
    if len(size) != nsp + 2:
        raise NotImplementedError(f"nearest upsampling of a {len(size)}-d input over {nsp} dims")  # -> aten
    scales = list(scales) + [None] * (nsp - len(scales))
    insp, osp = size[2:], [_sv().size(o) if not isinstance(o, int) else o for o in output_size]
    loader, device = x.make_loader(), x.get_device()
    rule = _SHORTCUTS.get((device.type, nsp, exact), (False, False))

    def inner(idx):
        src = [_source_index(idx[2 + d], insp[d], osp[d], scales[d], exact, rule) for d in range(nsp)]
        return loader(list(idx[:2]) + src)

    return Pointwise.create(device, x.get_dtype(), inner, size[:2] + osp)


@register_lowering(aten.upsample_nearest1d.default)
def _upsample_nearest1d(x, output_size, scales=None):
    """``upsample_nearest1d`` [N, C, W] -> [N, C, output_size[0]] as eager computes it on the
    tensor's device (module docstring)."""
    return _upsample_nearest(x, output_size, [scales], False)


@register_lowering(aten.upsample_nearest2d.default)
def _upsample_nearest2d(x, output_size, scales_h=None, scales_w=None):
    """``upsample_nearest2d`` [N, C, H, W] -> [N, C, *output_size] (module docstring)."""
    return _upsample_nearest(x, output_size, [scales_h, scales_w], False)


@register_lowering(aten.upsample_nearest3d.default)
def _upsample_nearest3d(x, output_size, scales_d=None, scales_h=None, scales_w=None):
    """``upsample_nearest3d`` [N, C, D, H, W] -> [N, C, *output_size] (module docstring)."""
    return _upsample_nearest(x, output_size, [scales_d, scales_h, scales_w], False)


@register_lowering(aten._upsample_nearest_exact1d.default)
def _upsample_nearest_exact1d(x, output_size, scales=None):
    """``_upsample_nearest_exact1d`` (``mode="nearest-exact"``), [N, C, W] (module docstring)."""
    return _upsample_nearest(x, output_size, [scales], True)


@register_lowering(aten._upsample_nearest_exact2d.default)
def _upsample_nearest_exact2d(x, output_size, scales_h=None, scales_w=None):
    """``_upsample_nearest_exact2d`` (``mode="nearest-exact"``), [N, C, H, W] (module docstring)."""
    return _upsample_nearest(x, output_size, [scales_h, scales_w], True)


@register_lowering(aten._upsample_nearest_exact3d.default)
def _upsample_nearest_exact3d(x, output_size, scales_d=None, scales_h=None, scales_w=None):
    """``_upsample_nearest_exact3d`` (``mode="nearest-exact"``), [N, C, D, H, W] (module docstring)."""
    return _upsample_nearest(x, output_size, [scales_d, scales_h, scales_w], True)
