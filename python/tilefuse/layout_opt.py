"""Layout optimization: convolutional graphs laid out channels-last.

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
here the strides come from eager's rules on the converted model. In training, the forward
graph's saved activations keep the layout they were computed in (eager's strides are kept for
the outputs the user sees only), their strides are reported to AOTAutograd
(``TracingContext.output_strides``), which gives the backward graph's inputs those strides, and
the backward graph is laid out by the same rule.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

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
    """The convolutions of ``gm``: forward ones, and in a backward graph their gradients
    (``convolution_backward(grad_out, x, weight, ...)``: weight is argument 2 there)."""
    return [
        n
        for n in gm.graph.nodes
        if n.op == "call_function" and n.target in (aten.convolution.default, aten.convolution_backward.default)
    ]


def _weight(n: torch.fx.Node) -> Any:
    return _val(n.args[2] if n.target is aten.convolution_backward.default else n.args[1])


def _groups(n: torch.fx.Node) -> int:
    if n.target is aten.convolution_backward.default:
        return n.args[9] if len(n.args) > 9 else 1
    return n.args[8] if len(n.args) > 8 else 1


def _val(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _static(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and all(isinstance(s, int) for s in (*t.shape, *t.stride()))


def conv_class(n: torch.fx.Node) -> str:
    """The class of a convolution node for :func:`decide_layout_opt`, from its weight ``[out, in /
    groups, *kernel]``: ``grouped`` (groups > 1 with more than one input channel per group;
    depthwise convolutions are not), ``small`` (at most 64 channels in and out per group), ``in_out``
    (at least twice as many input as output channels, a kernel wider than 1), else ``default``."""
    w = _weight(n)
    groups = _groups(n)
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
    w = _weight(n)
    out = _val(n) if n.target is aten.convolution.default else _val(n.args[0])  # the gradient's output
    return 2 * out.numel() * (w.numel() // int(w.shape[0]))


def decide_layout_opt(gm: torch.fx.GraphModule, *, is_inference: bool, device: torch.device) -> bool:
    """Whether ``gm``'s values are laid out channels-last around its convolutions.

    Yes when all hold: ``config.layout_optimization`` is on; the graph runs on a device type of
    ``config.LAYOUT_OPT_DEVICE_TYPES`` (cuDNN's); it has 2-D convolutions (4-D operands), all of
    static sizes; it has at most ``_MAX_NODES_PER_CONV`` nodes per convolution; and

    * an inference graph (``is_inference``): the convolutions' FLOPs weighted by each class's
      channels-last time ratio (:func:`conv_class`, Inductor's measured multipliers) sum to no
      more than their plain FLOPs, i.e. channels-last is expected to be faster overall;
    * a training graph (forward or backward), Inductor's rules for them: no grouped
      convolution (channels-last slows those down most, and backward kernels more), no
      convolution with at least twice as many input as output channels, and not all of them
      small."""
    if not config.layout_optimization or device.type not in config.LAYOUT_OPT_DEVICE_TYPES:
        return False
    convs = _conv_nodes(gm)
    if not convs:
        return False
    for n in convs:
        x, w = _val(n.args[0]), _weight(n)
        if not (_static(x) and _static(w)) or x.dim() != 4:
            return False
    if len(gm.graph.nodes) > _MAX_NODES_PER_CONV * len(convs):
        log.debug(
            "tilefuse: layout optimization skipped: %d nodes for %d convolutions", len(gm.graph.nodes), len(convs)
        )
        return False
    classes = [conv_class(n) for n in convs]
    if not is_inference:
        if "grouped" in classes or "in_out" in classes or all(c == "small" for c in classes):
            log.debug(
                "tilefuse: layout optimization skipped for a training graph: convolutions %s", sorted(set(classes))
            )
            return False
        return True
    flops: dict[str, float] = defaultdict(float)
    for n, c in zip(convs, classes):
        flops[c] += conv_flops(n)
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


def channels_last_metas(
    gm: torch.fx.GraphModule, example_inputs: list | None = None
) -> dict[torch.fx.Node, torch.Tensor]:
    """Per node with a tensor value: that value as eager computes it in the channels-last model (a
    fake tensor of the node's sizes and dtype, with the strides eager's kernels give it there).
    Every such node is listed, also where those strides equal the original graph's: tilefuse
    stores a value contiguously unless told otherwise, whatever eager's layout.

    The graph runs again on fake tensors (the graph's own fake mode): graph inputs as
    ``example_inputs`` give them (a backward graph's saved activations come with the strides the
    forward stored them with) and constants as they are, each 2-D convolution's input and weight
    made channels-last
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

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    with mode:
        for n, ex in zip(placeholders, example_inputs or ()):
            meta = _val(n)
            if isinstance(ex, torch.Tensor) and isinstance(meta, torch.Tensor) and ex.stride() != meta.stride():
                try:
                    env[n] = meta.as_strided(meta.shape, ex.stride())
                except Exception as e:  # noqa: BLE001 - strides the meta cannot take: its own kept
                    log.debug("tilefuse: layout optimization keeps input %s's meta strides (%s)", n.name, e)
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


def saved_output_positions(kind: str, gm: torch.fx.GraphModule) -> frozenset[int]:
    """The positions of a training forward graph's outputs that are saved for the backward
    (AOTAutograd's ``tensors_saved_for_backwards_slice`` of the graph being compiled, over its
    outputs), which no user sees; empty for other graphs or outside AOTAutograd."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if kind == "forward" else None
    try:
        sl = meta.tensors_saved_for_backwards_slice if meta is not None else None
    except AssertionError:  # the metadata is not complete for this graph
        sl = None
    if not isinstance(sl, slice):
        return frozenset()
    n_out = sum(len(pytree.tree_leaves(n.args[0])) for n in gm.graph.nodes if n.op == "output")
    return frozenset(range(n_out)[sl])


def report_output_strides(strides: list | None) -> None:
    """Tell AOTAutograd ``strides``, a forward graph's output strides (one entry per output, None
    for a non-tensor; None: nothing to tell), when layout optimization stored its saved
    activations in other strides than eager's (``TracingContext.output_strides``, the
    list Inductor fills the same way): the backward graph is compiled with inputs of those
    strides."""
    ctx = torch._guards.TracingContext.try_get()
    if strides and ctx is not None and isinstance(ctx.output_strides, list):
        ctx.output_strides.extend(strides)
