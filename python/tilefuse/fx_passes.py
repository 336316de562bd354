"""FX graph passes run on the aten graph before it is lowered, each a named rewrite with its
precondition.

``online_normalizers`` (the online-normalizer rewrite): the row maximum and the sum of
exponentials of a decomposed log_softmax are lowered as one pair of reductions over the row.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _node_arg(n: torch.fx.Node, pos: int, name: str, default=None):
    """Argument ``name`` of FX node ``n`` (positional ``pos`` or keyword)."""
    return n.args[pos] if len(n.args) > pos else n.kwargs.get(name, default)


def online_normalizers(gm: torch.fx.GraphModule) -> dict:
    """The online-normalizer rewrite: the row normalizers of ``gm`` written out as torch's
    decomposition of log_softmax writes them, ``s = sum(exp(x - m), dims, keepdim=True)`` with
    ``m = amax(x, dims, keepdim=True)``. Returns a map from each such ``amax`` node and ``sum``
    node to ``(x node, dims)`` (dims sorted, non-negative): ``GraphLowering`` lowers the two as
    one pair (``lowering.max_and_sumexp_pair``), so a row is read once for both and a long row is
    reduced per chunk, instead of a max reduction and then a second pass summing ``exp(x - m)``.
    The graph itself is not modified. The pattern is Inductor's ``prepare_softmax_pattern`` (its
    post-grad replacement by ``prepare_softmax_online``).

    Precondition: ``gm`` is an aten-level graph as AOTAutograd hands it to the compiler, after
    the partitioner (which so still sees the plain amax/sub/exp/sum ops it may recompute around),
    with FX meta values (``meta["val"]``) on its nodes. A pair is matched only when ``sum`` has
    ``keepdim=True`` and no ``dtype``, reads ``exp`` of ``sub(x, m)`` (alpha 1), ``m`` is
    ``amax(x, ..., keepdim=True)`` of the same ``x`` node over the same dims (after wrapping
    negative dims), and ``x`` is a float32/float64 tensor of rank >= 1."""
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
