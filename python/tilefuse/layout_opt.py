"""Layout optimization: convolutional inference graphs laid out channels-last.

cuDNN's convolutions run fastest on channels-last (NHWC) tensors, and its depthwise ones only
there (an NCHW depthwise convolution runs in aten's generic kernel, several times slower); given
NCHW tensors, cuDNN's NHWC kernels come with conversion kernels around each call. A graph whose
convolutions pay off in channels-last (:func:`decide_layout_opt`) is laid out the way eager lays
out the same model converted to channels-last (``model.to(memory_format=torch.channels_last)``
with a channels-last input): :func:`channels_last_metas` re-runs the graph on fake tensors with
every 2-D convolution given channels-last operands, and each value's strides there are the layout
its buffer gets when it is stored (``GraphLowering``: a preference, applied while the value's
layout is still free; graph outputs keep eager's strides). Eager's own stride propagation thus
decides every value: a pointwise op after a convolution comes out channels-last, the
``permute(0, 2, 3, 1)`` of a channels-last value (ConvNeXt's LayerNorm over channels) is
contiguous and needs no copy, a reduction follows its input.

Inductor's ``decide_layout_opt`` (its ``graph.py``) decides the same question; its rule for inference
graphs is the one here. Where the two differ: Inductor forces every 4-D value near a
convolution into channels-last order whatever its dims mean (an NHWC-shaped value included);
here the strides come from eager's rules on the converted model. Training graphs are not laid out
(their saved activations cross into the backward graph, traced with eager's layouts).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import torch
import torch.fx

from . import config

log = logging.getLogger("tilefuse")
aten = torch.ops.aten

# Channels-last time over NCHW time of cuDNN convolutions, averaged per class over the convolution
# shapes of torchbench's training models (Inductor's measured multipliers, ``decide_layout_opt``):
# grouped convolutions (more than one input channel per group) are slower channels-last, the rest
# faster.
_GROUPED_MULTIPLIER = 1.358
_DEFAULT_MULTIPLIER = 0.823
_IN_OUT_MULTIPLIER = 0.725
_SMALL_MULTIPLIER = 0.783

# a graph with more than this many nodes per convolution is left as it is: the conversions at the
# edges of the few convolutions cost more than their channels-last kernels save
_MAX_NODES_PER_CONV = 300


def _conv_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is aten.convolution.default]


def _val(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _static(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and all(isinstance(s, int) for s in (*t.shape, *t.stride()))


def conv_class(n: torch.fx.Node) -> str:
    """The class of a convolution node for :func:`decide_layout_opt`, from its weight ``[out, in /
    groups, *kernel]``: ``grouped`` (groups > 1 with more than one input channel per group;
    depthwise convolutions are not), ``small`` (at most 64 channels in and out per group), ``in_out``
    (at least twice as many input as output channels, a kernel wider than 1), else ``default``."""
    w = _val(n.args[1])
    groups = n.args[8] if len(n.args) > 8 else 1
    cout, cin = int(w.shape[0]), int(w.shape[1])
    if groups > 1 and cin > 1:
        return "grouped"
    if cout <= 64 and cin <= 64:
        return "small"
    if cout * 2 <= cin and int(w.shape[2]) > 1:
        return "in_out"
    return "default"


def conv_flops(n: torch.fx.Node) -> int:
    """Multiply-adds x 2 of a convolution node: output elements x (input channels per group x
    kernel elements), from the node's meta values (static sizes)."""
    out, w = _val(n), _val(n.args[1])
    return 2 * out.numel() * (w.numel() // int(w.shape[0]))


def decide_layout_opt(gm: torch.fx.GraphModule, *, is_inference: bool, device: torch.device) -> bool:
    """Whether ``gm``'s values are laid out channels-last around its convolutions.

    Yes when all hold: ``config.layout_optimization`` is on; the graph runs on a device type of
    ``config.LAYOUT_OPT_DEVICE_TYPES`` (cuDNN's); it is an inference graph (``is_inference``);
    it has 2-D convolutions (4-D operands), all of static sizes; it has at most
    ``_MAX_NODES_PER_CONV`` nodes per convolution; and the convolutions' FLOPs weighted by each
    class's channels-last time ratio (:func:`conv_class`, Inductor's measured multipliers) sum to
    no more than their plain FLOPs, i.e. channels-last is expected to be faster overall."""
    if not config.layout_optimization or device.type not in config.LAYOUT_OPT_DEVICE_TYPES or not is_inference:
        return False
    convs = _conv_nodes(gm)
    if not convs:
        return False
    for n in convs:
        x, w = _val(n.args[0]), _val(n.args[1])
        if not (_static(x) and _static(w) and _static(_val(n))) or x.dim() != 4:
            return False
    if len(gm.graph.nodes) > _MAX_NODES_PER_CONV * len(convs):
        log.debug(
            "tilefuse: layout optimization skipped: %d nodes for %d convolutions", len(gm.graph.nodes), len(convs)
        )
        return False
    flops: dict[str, float] = defaultdict(float)
    for n in convs:
        flops[conv_class(n)] += conv_flops(n)
    weighted = (
        flops["grouped"] * _GROUPED_MULTIPLIER
        + flops["small"] * _SMALL_MULTIPLIER
        + flops["in_out"] * _IN_OUT_MULTIPLIER
        + flops["default"] * _DEFAULT_MULTIPLIER
    )
    total = sum(flops.values())
    if weighted > total:
        log.debug("tilefuse: layout optimization skipped: channels-last estimate %.3g > %.3g", weighted, total)
        return False
    return True


def _fake_mode(gm: torch.fx.GraphModule) -> Any:
    for n in gm.graph.nodes:
        v = _val(n)
        if isinstance(v, torch.Tensor) and hasattr(v, "fake_mode"):
            return v.fake_mode
    return None


def channels_last_metas(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.Tensor]:
    """Per node with a tensor value: that value as eager computes it in the channels-last model (a
    fake tensor of the node's sizes and dtype, with the strides eager's kernels give it there).
    Every such node is listed, also where those strides equal the original graph's: tilefuse
    stores a value contiguously unless told otherwise, whatever eager's layout.

    The graph runs again on fake tensors (the graph's own fake mode): graph inputs and constants
    as they are, each 2-D convolution's input and weight made channels-last
    (``contiguous(memory_format=torch.channels_last)``), every other node as its op computes it
    from the new values. A node whose op cannot run that way (it raises, it mutates its
    arguments, it returns something other than a tensor or tuple of tensors) keeps its meta
    value, so what follows it is judged from eager's original layout."""
    mode = _fake_mode(gm)
    if mode is None:
        return {}
    env: dict[torch.fx.Node, Any] = {}
    metas: dict[torch.fx.Node, torch.Tensor] = {}

    def arg(a: Any) -> Any:
        return env.get(a, _val(a)) if isinstance(a, torch.fx.Node) else a

    with mode:
        for n in gm.graph.nodes:
            if n.op != "call_function":
                continue
            meta = _val(n)
            schema = getattr(n.target, "_schema", None)
            if schema is not None and schema.is_mutable:
                continue
            if not isinstance(meta, torch.Tensor) and not (
                isinstance(meta, (tuple, list)) and all(isinstance(m, torch.Tensor) or m is None for m in meta)
            ):
                continue
            args = torch.fx.node.map_aggregate(n.args, arg)
            kwargs = torch.fx.node.map_aggregate(n.kwargs, arg)
            if n.target is aten.convolution.default and args[0].dim() == 4:
                args = (
                    args[0].contiguous(memory_format=torch.channels_last),
                    args[1].contiguous(memory_format=torch.channels_last),
                    *args[2:],
                )
            try:
                val = n.target(*args, **kwargs)
            except Exception as e:  # an op whose fake kernel rejects the new strides: eager's layout
                log.debug("tilefuse: layout optimization keeps %s's layout (%s)", n.name, e)
                continue
            if isinstance(meta, torch.Tensor):
                if not isinstance(val, torch.Tensor) or val.shape != meta.shape or val.dtype != meta.dtype:
                    continue
                env[n] = metas[n] = val
            else:
                env[n] = val
    return metas


def channels_last_strides(size: list) -> list:
    """Strides of a dense channels-last (NHWC in memory) tensor of 4-D ``size`` ``[N, C, H, W]``."""
    n, c, h, w = size
    return [h * w * c, 1, w * c, c]
