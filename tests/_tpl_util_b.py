"""Helpers for the re-expressed Inductor templates (views, indexing, scatter, cat/pad, pooling,
mutation, training): ``check`` compiles a function with tilefuse and compares it to eager.

Every template test is parametrized by ``MODES``: it runs once with ``dynamic=False`` (sizes
specialized) and once with ``dynamic=True`` (Dynamo's symbolic sizes), as Inductor's
``test_torchinductor_dynamic_shapes.py`` runs its common templates a second time.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

from _tf_testutil import FallbackReasons

from tilefuse import metrics


# every template test takes ``dynamic`` (``pytestmark = [*GPU_MARKS, MODES]``): False, static
# sizes; True, Dynamo's symbolic sizes
MODES = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


def clone_keep_strides(x):
    """A copy of ``x`` with its sizes, strides and storage offset (its whole storage copied), a
    leaf or not and requiring grad or not as ``x`` is; anything that is not a tensor is returned
    as it is."""
    if not isinstance(x, torch.Tensor):
        return x
    flat = torch.as_strided(x.detach(), (x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)
    out = torch.as_strided(flat.clone(), x.size(), x.stride(), x.storage_offset())
    if not x.requires_grad:
        return out
    # a leaf that requires grad stays one; a non-leaf that does becomes one too (a copy of a
    # leaf), as the templates' ``randn(...).requires_grad_(True).add(1)`` inputs are
    return out.requires_grad_(True) if x.is_leaf else out.requires_grad_(True).clone()


def _clone_args(args):
    return pytree.tree_map(clone_keep_strides, list(args))


def _compare(got, want, what, atol, rtol, exact_dtype):
    g_flat, g_spec = pytree.tree_flatten(got)
    w_flat, w_spec = pytree.tree_flatten(want)
    assert g_spec == w_spec, f"{what}: structure {g_spec} != {w_spec}"
    for i, (g, w) in enumerate(zip(g_flat, w_flat)):
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{what}[{i}]: {type(g)}"
            torch.testing.assert_close(
                g,
                w,
                atol=atol,
                rtol=rtol,
                equal_nan=True,
                check_dtype=exact_dtype,
                check_stride=False,
                msg=lambda m, i=i: f"{what}[{i}]: {m}",
            )
        else:
            assert g == w, f"{what}[{i}]: {g!r} != {w!r}"


def _grads(args, outs, cotangents):
    leaves = [a for a in pytree.tree_leaves(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    diff = [o for o in pytree.tree_leaves(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    assert leaves and diff, "grad=True needs inputs and outputs that require grad"
    return torch.autograd.grad(diff, leaves, cotangents[: len(diff)], allow_unused=True)


def check(
    fn,
    *args,
    dynamic: bool,
    atol: float | None = None,
    rtol: float | None = None,
    grad: bool = False,
    exact_dtype: bool = True,
    native: bool = True,
    kernels: int | None = None,
):
    """``fn(*args)`` compiled by tilefuse (``dynamic=`` as given) against eager, each on its own
    copy of ``args``: every output (tensors, nested tuples/lists, Python numbers) equal within the
    dtype's tolerances (or ``atol``/``rtol``), NaNs where eager has them, and the argument tensors
    equal afterwards (in-place mutation of inputs included).

    ``grad``: the gradients of the inputs that require grad, for one random cotangent per output
    that requires grad, compared too. ``native``: no op ran through an aten fallback kernel.
    ``kernels``: the number of Triton kernels generated. Returns the compiled outputs.
    """
    eager_args = _clone_args(args)
    comp_args = _clone_args(args)
    torch.manual_seed(0)
    want = fn(*eager_args)
    fallbacks, kernels_before = metrics.fallback_kernel_count, metrics.generated_kernel_count
    compiled = torch.compile(fn, backend="tilefuse", dynamic=dynamic)
    torch.manual_seed(0)
    with FallbackReasons() as reasons:
        got = compiled(*comp_args)
    # counted since the test began (the autouse fixture resets them): a later check may reuse a
    # graph an earlier one compiled
    assert metrics.generated_graph_count >= 1, "tilefuse compiled no graph"
    assert metrics.eager_graph_count == 0, "a graph ran eagerly instead of through tilefuse"
    _compare(got, want, "output", atol, rtol, exact_dtype)
    _compare(comp_args, eager_args, "argument after the call", atol, rtol, exact_dtype)
    if native:
        extra = metrics.fallback_kernel_count - fallbacks
        assert extra == 0, f"{extra} aten fallback kernel(s): {reasons.lines}"
    if kernels is not None:
        assert metrics.generated_kernel_count - kernels_before == kernels, metrics.generated_kernel_count
    if grad:
        outs = [o for o in pytree.tree_leaves(want) if isinstance(o, torch.Tensor) and o.requires_grad]
        cot = [torch.rand_like(o) for o in outs]
        _compare(_grads(comp_args, got, cot), _grads(eager_args, want, cot), "grad", atol, rtol, exact_dtype)
    return got


def run_compiled(fn, *args, dynamic: bool):
    """``fn`` compiled by tilefuse and called on ``args`` (no comparison): for the templates whose
    check is a property of the result (aliasing, strides) rather than its values."""
    return torch.compile(fn, backend="tilefuse", dynamic=dynamic)(*args)
