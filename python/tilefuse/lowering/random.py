"""Random lowerings (``rand``/``randn``/``randint``/``bernoulli``): Philox values keyed by a
per-call seed from the graph's ``RandomSeeds`` buffer and each element's flat offset.
"""

from __future__ import annotations

import torch

from .. import symbolic as S
from ..ir import graph_context as G
from ..ir import nodes as ir
from ..ir.nodes import Pointwise, prod
from ..ir.random_seeds import random_seeds
from ..virtualized import ops
from .common import _as_device, to_dtype_value
from .registry import register_lowering

aten = torch.ops.aten


# the largest value below 1 of each half type: float32 uniforms above it would round up to 1.0
_BELOW_ONE = {torch.float16: 1 - 2.0**-11, torch.bfloat16: 1 - 2.0**-8}


def _random(size, dtype, device, kind: str, low: int = 0, high: int = 0, generator=None):
    """A Pointwise of Philox random values (Inductor's ``inductor_random``): element ``i`` (its
    row-major offset in ``size``) is ``tl.rand/randn/randint(seed, i)`` with this op's seed from
    the graph's ``RandomSeeds`` vector, drawn per call from torch's default generator. Sizes may be
    symbolic. An explicit ``generator`` or more than 2**31 elements fall back to aten."""
    if generator is not None:
        raise NotImplementedError("random op with an explicit generator")  # -> fallback
    if kind == "randint" and not dtype.is_floating_point and dtype != torch.bool:
        info = torch.iinfo(dtype)
        if low < info.min or high - 1 > info.max:
            # aten raises its own error for bounds outside the dtype: let it, at run time
            raise NotImplementedError(f"randint bounds [{low}, {high}) outside {dtype}")  # -> fallback
    g = G.graph()
    # symbolic sizes too: the element offsets are int32, so the element count is guarded below 2**31
    size = list(size)
    if not g.sizevars.evaluate_lt(prod(size), 2**31):
        raise NotImplementedError("random op with more than 2**31 elements")
    device = _as_device(device)
    seeds = g.random_seeds
    if seeds is None or seeds.get_device() != device:
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


@register_lowering(aten.rand.default, aten.rand.generator)
def _rand(size, *, dtype=None, layout=None, device=None, pin_memory=None, generator=None):
    return _random(size, dtype or torch.get_default_dtype(), device, "rand", generator=generator)


@register_lowering(aten.randn.default, aten.randn.generator)
def _randn(size, *, dtype=None, layout=None, device=None, pin_memory=None, generator=None):
    return _random(size, dtype or torch.get_default_dtype(), device, "randn", generator=generator)


def _random_like(x, kind: str, dtype, device, generator):
    """``_random`` of ``kind`` with ``x``'s sizes, in ``dtype`` (default ``x``'s) on ``device``
    (default ``x``'s)."""
    return _random(x.get_size(), dtype or x.get_dtype(), device or x.get_device(), kind, generator=generator)


@register_lowering(aten.rand_like.default)
def _rand_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, generator=None):
    return _random_like(x, "rand", dtype, device, generator)


@register_lowering(aten.randn_like.default)
def _randn_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, generator=None):
    return _random_like(x, "randn", dtype, device, generator)


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
