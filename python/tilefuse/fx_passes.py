"""FX graph passes run on the aten graph before it is lowered, each a named rewrite with its
precondition.

``online_normalizers`` (the online-normalizer rewrite): the row maximum and the sum of
exponentials of a decomposed log_softmax are lowered as one pair of reductions over the row.

``host_work_on_device`` (Inductor's ``move_constructors_to_gpu``, extended to host scalars): the
CPU values of a device graph that are made there from nothing (factories) or from host scalars,
and only reach the device, are computed on the device.
"""

from __future__ import annotations

from typing import Any, Collection

import torch
import torch.utils._pytree as pytree

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


def _tensor_vals(n: Any) -> list:
    return [v for v in pytree.tree_leaves(n.meta.get("val")) if isinstance(v, torch.Tensor)]


def host_work_on_device(gm: torch.fx.GraphModule, device: torch.device, lowered: Collection[Any]) -> set[torch.fx.Node]:
    """The nodes of a graph on ``device`` (not the CPU) whose values eager computes on the CPU
    but the graph computes on ``device``, in its kernels: host work that only feeds the device.

    Host work is a 0-d CPU input or constant of the graph (a Python float Dynamo passes as a
    tensor under ``dynamic=True``; the call copies it to the device), or a ``call_function``
    node with a lowering (``lowered``: the targets the backend lowers) whose tensor values are
    all on the CPU and whose tensor inputs are all host work: factories (``scalar_tensor``,
    ``full``, ``arange`` of numbers or sizes; no tensor input) and the arithmetic, casts, views
    and concatenations on host work (``torch.tensor([a, b], device=x.device)``
    traces as scalar_tensors, unsqueezes, a cat and a copy to the device). A connected group of
    host work is moved when every node outside it that reads it is (a) a graph output (returned
    on the CPU: ``graph._on_host`` recomputes it there from the CPU inputs), or (b) a
    node whose values are on the device and that reads only 0-d values of the group (eager lets
    a device op take a 0-d CPU tensor as a scalar), or any values through a copy (``_to_copy``,
    Inductor's rule). Anything else (a CPU op outside it, such as one reading a CPU input) keeps
    the group on the CPU, as aten calls. Returns the moved nodes; empty on the CPU."""
    if device.type == "cpu":
        return set()
    want = device.type
    work: set[torch.fx.Node] = set()
    for n in gm.graph.nodes:
        vals = _tensor_vals(n)
        if not vals or any(v.device.type != "cpu" for v in vals):
            continue
        if n.op in ("placeholder", "get_attr"):
            if len(vals) == 1 and vals[0].dim() == 0:
                work.add(n)
        elif (
            n.op == "call_function"
            and n.target in lowered
            and all(a in work for a in n.all_input_nodes if _tensor_vals(a))
        ):
            work.add(n)
    # connected groups of host work (union-find over the edges between its nodes)
    parent = {n: n for n in work}

    def root(n: torch.fx.Node) -> torch.fx.Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in work:
        for a in n.all_input_nodes:
            if a in work:
                parent[root(a)] = root(n)
    bad = set()
    for n in work:
        for u in n.users:
            if u in work or u.op == "output":
                continue
            uvals = _tensor_vals(u)
            on_device = bool(uvals) and all(v.device.type == want for v in uvals)
            copy = u.target is aten._to_copy.default
            if not (on_device and (copy or all(v.dim() == 0 for v in _tensor_vals(n)))):
                bad.add(root(n))
    return {n for n in work if root(n) not in bad}
