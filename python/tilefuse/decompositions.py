"""The decomposition table AOTAutograd traces with (``decompositions``), and the tilefuse
decompositions in it that replace torch's (GELU of half inputs, adaptive average pooling's memory
format, integer linspace)."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Collection

import torch


aten = torch.ops.aten


def decompositions(training: bool = True, *, lowered: Collection[Any]) -> dict:
    """The decomposition table AOTAutograd traces with: torch's core aten decompositions plus the
    torch decompositions of composite ops that tilefuse fuses better as primitives (softmax,
    layer norm, GELU, …), less the ops in ``lowered`` (the ops tilefuse lowers itself:
    ``lowering.lowerings``; passed in because the lowerings sit above this module). Built once
    per process per ``training`` and set of lowered ops, and shared: callers must not modify it.
    ``training``: the graph has a backward (AOTAutograd traces a joint graph), so log_softmax and
    layer norm are decomposed for the partitioner (below); an inference graph keeps them whole,
    lowered directly (``_log_softmax``, ``_native_layer_norm``), which spares the
    decompositions' trace (with ``dynamic=True`` log_softmax's symbolic-shape reasoning is a
    large part of a cross-entropy graph's trace).

    torch's core table for export (``core_aten_decompositions``) also lists every
    CompositeImplicitAutograd op, which it finds by walking all registered ops (a slow walk on
    the critical path of a first compile); those decompose on their own while AOTAutograd
    traces, so the table here is the core decompositions proper
    (``_core_aten_decompositions_post_autograd``). The export table also decomposes nearest
    upsampling, whose decomposition reads other rows than eager where eager's kernels take a
    shortcut; it is lowered instead (``lowering.upsample``)."""
    return _decompositions(bool(training), frozenset(lowered))


@functools.lru_cache(maxsize=None)
def _decompositions(training: bool, lowered: frozenset) -> dict:
    if not training:
        # the training table less the decompositions added back for the partitioner (below)
        return {
            k: v
            for k, v in _decompositions(True, lowered).items()
            if getattr(k, "overloadpacket", None) not in (aten._log_softmax, aten.native_layer_norm)
        }
    from torch._decomp import core_aten_decompositions, get_decompositions

    try:
        from torch._decomp import _core_aten_decompositions_post_autograd
    except ImportError:  # another torch: the export table, slower to build, the same traces
        table = dict(core_aten_decompositions())
    else:
        table = dict(_core_aten_decompositions_post_autograd())
    table.update(
        get_decompositions(
            [
                aten.native_layer_norm,
                aten.gelu_backward,
                aten.native_dropout,
                aten.sigmoid_backward,
                aten.tanh_backward,
                aten.silu,
                aten.silu_backward,
                aten.hardtanh,
                aten.leaky_relu,
                aten.native_group_norm,
                aten.native_batch_norm,
                aten.mish,
                aten._softmax_backward_data,
                aten._log_softmax_backward_data,
                aten.native_layer_norm_backward,
                aten.addcmul,
                aten.addcdiv,
                aten.lerp,
                aten.logit,
                aten.elu,
                aten.elu_backward,
                aten.hardtanh_backward,
                aten.leaky_relu_backward,
                aten.threshold_backward,
                aten._native_batch_norm_legit,
                aten._native_batch_norm_legit_no_training,
                aten._native_batch_norm_legit_functional,
                aten.native_batch_norm_backward,
                aten._batch_norm_with_update,
                aten._batch_norm_with_update_functional,
                aten._adaptive_avg_pool2d,
                aten.ldexp,
                aten.narrow_copy,
                aten.view_copy,
                aten.permute_copy,
                aten.unbind_copy,
                aten.dist,
                aten.index_fill,
                aten.aminmax,
            ]
        )
    )
    # keep these as primitives that tilefuse lowers or calls directly. Attention stays whole: its
    # forward and backward kernels must agree on what is saved (torch's CPU-flash decomposition
    # returns the probabilities where the aten backward expects the logsumexp)
    keep = (
        aten.addmm,
        aten.mm,
        aten.bmm,
        aten.convolution,
        aten.var_mean,
        aten.var,
        aten.std,
        aten._softmax,
        aten._log_softmax,
        aten.logsumexp,  # lowered with an online normalizer
        # (log_softmax's own decomposition is put back below)
        aten._scaled_dot_product_flash_attention_for_cpu,
        aten._scaled_dot_product_flash_attention_for_cpu_backward,
        aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_efficient_attention,
        aten._scaled_dot_product_cudnn_attention,
    )
    # ... and an op tilefuse lowers itself is not decomposed either (Inductor's rule): the core
    # table rewrites views (transpose, split, _unsafe_view, squeeze, …) through torch's Python
    # references, whose stride and contiguity reasoning is slow under symbolic sizes
    for k in list(table):
        if k in lowered or getattr(k, "overloadpacket", None) in keep:
            del table[k]
    # ... except where the min-cut partitioner needs to see through an op to recompute around it
    # (see _log_softmax_as_logsumexp): detach becomes alias, a view it may recompute; a detach
    # left whole counts as a non-fusible user, which makes the tensor it detaches (log-probs
    # saved for log_softmax's backward) "materialized" and so saved rather than recomputed
    table.update(get_decompositions([aten.detach]))
    # log_softmax as torch decomposes it, ``(x - amax) - log(sum(exp(x - amax)))``: the partitioner
    # recomputes the log-probabilities in the backward from the input and two per-row values (a
    # whole log_softmax is an op it cannot recompute, so it would save the log-probabilities, as
    # large as the logits); GraphLowering lowers the
    # amax and the sum of exponentials as one row normalizer (online_normalizers). The output is
    # rounded at the size of ``x - amax``, as eager's kernel rounds it. Only with a backward: an
    # inference graph has no partition to recompute for (``_decompositions(False)``)
    table.update(get_decompositions([aten._log_softmax]))
    # layer norm likewise: decomposed for the partitioner in a graph with a backward, lowered
    # whole (``_native_layer_norm``) in an inference graph
    table.update(get_decompositions([aten.native_layer_norm]))
    # gelu is lowered whole (lowering.pointwise._gelu: one op of the loop body, not ~40)
    table.pop(aten.gelu.default, None)
    if aten._adaptive_avg_pool2d.default in table:
        table[aten._adaptive_avg_pool2d.default] = functools.partial(
            _adaptive_avg_pool2d_any_size,
            functools.partial(_in_the_inputs_memory_format, table[aten._adaptive_avg_pool2d.default]),
        )
    # torch decompositions that are wrong in torch 2.11 (the aten op runs instead, a fallback
    # kernel): multilabel_margin_loss_forward gathers the positions after a target's -1 (the
    # documented end of its label list) as class 0 (aot_eager and Inductor share the error)
    for op in (aten.multilabel_margin_loss_forward.default,):
        table.pop(op, None)
    if aten.linspace.default in table:
        table[aten.linspace.default] = functools.partial(_linspace_integers_in_float64, table[aten.linspace.default])
    if aten._unsafe_masked_index.default in table:
        table[aten._unsafe_masked_index.default] = _unsafe_masked_index_as_aten
    return table


def _unsafe_masked_index_as_aten(x: torch.Tensor, mask: torch.Tensor, indices: list, fill: Any) -> torch.Tensor:
    """Decomposition of ``aten._unsafe_masked_index``: ``x[indices]`` where ``mask``, ``fill``
    elsewhere, each index clamped to ``[-size, size - 1]`` and a negative one counted from the end,
    as the aten kernel does (the clamp keeps a masked-off index in bounds). torch 2.11's
    decomposition clamps to ``[0, size - 1]``, which reads element 0 for a negative index the
    mask selects (``-2`` into 8 elements gave ``x[0]`` for eager's ``x[6]``)."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    if guard_or_false(x.numel() == 0):
        shape = torch._meta_registrations.meta_index_Tensor(x, indices).shape
        return x.new_full(shape, fill)
    clamped = [None if i is None else i.clamp(min=-x.size(d), max=x.size(d) - 1) for d, i in enumerate(indices)]
    return aten._unsafe_index(x, clamped).masked_fill(~mask, fill)


def _adaptive_avg_pool2d_any_size(decomposition: Callable[..., Any], x: torch.Tensor, output_size: Any) -> torch.Tensor:
    """``decomposition(x, output_size)``, or, where an output size is 0, the empty result the op's
    kernel returns: torch's decomposition takes each input size modulo its output size, which
    raised ``ZeroDivisionError`` for ``AdaptiveAvgPool2d(0)``."""
    if any(isinstance(s, int) and s == 0 for s in output_size):
        return x.new_empty((*x.shape[:-2], *output_size))
    return decomposition(x, output_size)


def _in_the_inputs_memory_format(
    decomposition: Callable[..., Any], x: torch.Tensor, *args: Any, **kwargs: Any
) -> torch.Tensor:
    """``decomposition(x, ...)`` laid out in ``x``'s suggested memory format (channels-last for a
    channels-last ``x``), as the op's own kernel and meta function lay it out. torch's
    decomposition of ``_adaptive_avg_pool2d`` into gathers and a mean returns a contiguous result
    for window sizes that do not divide the input, where eager returns channels-last (strides
    ``(48, 12, 4, 1)`` for eager's ``(48, 1, 16, 4)``); the copy is a layout
    tilefuse's lowering gives the stored value, not an extra kernel."""
    from torch._prims_common import suggest_memory_format

    out = decomposition(x, *args, **kwargs)
    fmt = suggest_memory_format(x)
    if fmt != torch.contiguous_format and out.dim() == x.dim() and not out.is_contiguous(memory_format=fmt):
        out = out.contiguous(memory_format=fmt)
    return out


def _linspace_integers_in_float64(
    decomposition: Callable[..., Any], start: Any, end: Any, steps: int, **kwargs: Any
) -> torch.Tensor:
    """Decomposition of ``aten.linspace`` (torch's ``decomposition``, a ``torch._refs.linspace``)
    that computes an integer result in float64 and converts it, as eager's kernel computes it in
    double: the reference multiplies its int64 positions by a Python-float step, which promotes
    to float32 and rounds every value past 2**24 (``linspace(2**31 - 10, 2**31 + 10, 5,
    dtype=torch.int64)`` gave 2147483648 five times). Floating and bool results are the
    reference's."""
    dtype = kwargs.get("dtype")
    if dtype is None or dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return decomposition(start, end, steps, **kwargs)
    return decomposition(start, end, steps, **{**kwargs, "dtype": torch.float64}).to(dtype)


# ops whose Python decomposition in torch 2.11 computes something else than the aten kernel, and
# which torch registers as the op's Autograd kernel (and CompositeImplicitAutograd kernel) for
# traces under the Python dispatcher, so that AOTAutograd decomposes them before any decomposition
# table is consulted: those Python kernels are set aside while AOTAutograd traces, so that the
# trace records the op itself, which then runs as its lowering or the aten kernel.
# - multilabel_margin_loss_forward sums over the positions after a target's -1 (the documented end
#   of its label list) as if they named class 0: 3.25 for eager's 0.0163, with gradients wrong
#   alike, under every AOTAutograd backend (aten kernel);
# - nearest upsampling drops eager's shortcuts: a scale factor of 1.3 on a height of 3 keeps the
#   height, and eager's CPU kernel copies the rows, while the decomposition reads rows 0, 0, 1
#   (``lowering.upsample`` follows eager per device). Its ``vec`` overloads (output size or scale
#   factors) get a Python kernel of tilefuse's instead, which computes the output size, symbolic
#   ones included, and calls the ``default`` overload.
_NEAREST_UPSAMPLING = (
    "upsample_nearest1d",
    "upsample_nearest2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d",
)
_WRONG_TORCH_DECOMPOSITIONS = (
    "multilabel_margin_loss_forward.default",
    *(f"{op}.default" for op in _NEAREST_UPSAMPLING),
)


def _nearest_vec_kernel(vec_op, default_op):
    """The ``vec`` overload of a nearest upsampling op as a call of its ``default`` overload:
    the output size given, or each input length times its scale factor, truncated (aten's
    ``upsample_compute_output_size``), with the scale factors passed on. An output size of
    data-dependent symbols goes through torch's own kernel (its decomposition, which needs no
    decision on the size; the ``default`` overload's checks would guard on it)."""
    from torch._C import DispatchKey
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    torch_kernel = vec_op.py_kernels.get(DispatchKey.CompositeImplicitAutograd)

    def kernel(x, output_size, scale_factors):
        nd = x.dim() - 2
        if output_size is not None:
            size = list(output_size)
        else:
            size = [torch.sym_int(torch.sym_float(x.shape[2 + d]) * scale_factors[d]) for d in range(nd)]
        if torch_kernel is not None and any(free_unbacked_symbols(n) for n in size):
            return torch_kernel(x, output_size, scale_factors)
        scales = list(scale_factors) if scale_factors else [None] * nd
        return default_op(x, size, *scales)

    return kernel


def _trace_kernel_overrides() -> list:
    """``(op, replacement or None)`` for each op whose Python kernels AOTAutograd's trace must not
    run (above)."""
    out = []
    for name in _WRONG_TORCH_DECOMPOSITIONS:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if op is not None:
            out.append((op, None))
    for packet in _NEAREST_UPSAMPLING:
        p = getattr(torch.ops.aten, packet, None)
        if p is not None and "vec" in p.overloads():
            out.append((p.vec, _nearest_vec_kernel(p.vec, p.default)))
    return out


@contextlib.contextmanager
def without_wrong_torch_decompositions():
    """While AOTAutograd traces: the Python Autograd and CompositeImplicitAutograd kernels of
    ``_WRONG_TORCH_DECOMPOSITIONS`` set aside, and those of the nearest upsampling ``vec``
    overloads replaced (``_nearest_vec_kernel``); all put back after, also on an error. Those ops
    so reach the graph whole (``decompositions.decompositions`` does not decompose them either)."""
    from torch._C import DispatchKey

    saved = []
    for op, replacement in _trace_kernel_overrides():
        for key in (DispatchKey.Autograd, DispatchKey.CompositeImplicitAutograd):
            fn = op.py_kernels.pop(key, None)
            if fn is not None:
                saved.append((op, key, fn))
            if replacement is not None:
                op.py_kernels[key] = replacement
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, _ in _trace_kernel_overrides():
            for key in (DispatchKey.Autograd, DispatchKey.CompositeImplicitAutograd):
                op.py_kernels.pop(key, None)
            op._dispatch_cache.clear()
        for op, key, fn in saved:
            op.py_kernels[key] = fn
