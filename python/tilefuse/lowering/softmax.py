"""Row normalizer lowerings: softmax, log_softmax and logsumexp, whose row maximum and sum of
exponentials are computed in one pass (``_max_and_sumexp``), per chunk for long rows, and the
pair ``max_and_sumexp_pair`` that ``GraphLowering`` uses for ``fx_passes.online_normalizers``.
"""

from __future__ import annotations

import torch

from .. import config
from .. import symbolic as S
from ..ir import nodes as ir
from ..ir.dtypes import accumulator_dtype
from ..ir.nodes import Pointwise
from ..virtualized import ops
from .common import _reduction_dims, _to_dtype_lowering, make_pointwise, make_reduction
from .registry import NO_OPMATH, register_lowering

aten = torch.ops.aten


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
    acc = accumulator_dtype(dt)
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
    threshold, each chunk is a persistent reduction, and the chunks and their combination read
    closer to the copy bandwidth than the looped reduction (docs/benchmarks.md). Only one reduced dim, the last, of a
    static length; never with ``config.split_long_normalizers`` off."""
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
    5000 × -1e9 in 4 chunks would give a softmax summing to 2500). Special rows as the unsplit pair:
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
