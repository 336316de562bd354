"""Shared by the ported Inductor templates (tests/test_tpl_*.py of the pointwise, dtype, reduction,
scan, norm and random families; docs/inductor_templates.md lists them).

``check(fn, *args, dynamic=...)`` runs ``fn`` eagerly and compiled by tilefuse on copies of
``args`` (strides and storage offsets kept) and asserts that every output leaf matches eager:
same container types and lengths, same dtypes, values within the dtype's tolerance (NaN equal to
NaN), and inputs mutated alike. Half and bfloat16 inputs get an eager reference computed in
float32 and rounded to the compiled output's dtype (an fp32 reference is closer to the exact value
than an eager half kernel, which may round intermediates). With ``grad=True`` it also compares the
gradients of every floating input that requires grad, under one random cotangent per output.

Every test takes ``dyn`` (``DYN``, a module-wide parametrization): each one runs compiled with ``dynamic=False`` and with
``dynamic=True`` (Dynamo's symbolic sizes, as Inductor's test_torchinductor_dynamic_shapes.py
does)."""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

from _tf_testutil import FallbackReasons

from tilefuse import metrics

LOWP = (torch.float16, torch.bfloat16)


# every test of a template module takes ``dyn``: ``pytestmark = [*GPU_MARKS, DYN]``
DYN = pytest.mark.parametrize("dyn", [False, True], ids=["static", "dynamic"])


def clone_like(x, device=None):
    """A copy of ``x`` with its sizes, strides and storage offset (non-tensors as they are)."""
    if not isinstance(x, torch.Tensor):
        return x
    flat = torch.as_strided(x, (x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)
    flat = flat.detach().clone()
    out = torch.as_strided(flat, x.size(), x.stride(), x.storage_offset())
    return out.requires_grad_(x.requires_grad) if x.is_leaf else out


def _upcast(x):
    if isinstance(x, torch.Tensor) and x.dtype in LOWP:
        y = x.detach().float()
        return y.requires_grad_(x.requires_grad)
    return x


def _assert_same(got, want, atol, rtol, exact_dtype, what):
    assert type(got) is type(want) or (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)), (
        what,
        type(got),
        type(want),
    )
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    assert got_spec == want_spec, (what, got_spec, want_spec)
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if not isinstance(w, torch.Tensor):
            assert g == w, (what, i, g, w)
            continue
        assert isinstance(g, torch.Tensor), (what, i, type(g))
        if exact_dtype:
            assert g.dtype == w.dtype, (what, i, g.dtype, w.dtype)
        w = w.to(g.dtype) if w.dtype.is_floating_point and g.dtype != w.dtype else w
        torch.testing.assert_close(
            g,
            w,
            atol=atol,
            rtol=rtol,
            equal_nan=True,
            check_dtype=exact_dtype,
            check_device=True,
            msg=lambda m, i=i: f"{what} {i}: {m}",
        )


def compiled(fn, dynamic: bool, **kw):
    """``fn`` compiled by tilefuse in the given mode."""
    return torch.compile(fn, backend="tilefuse", dynamic=dynamic, **kw)


def check(
    fn,
    *args,
    dynamic: bool,
    atol=None,
    rtol=None,
    grad: bool = False,
    grad_atol=None,
    grad_rtol=None,
    exact_dtype: bool = True,
    ref_in_float: bool = True,
    native: bool = True,
    kwargs=None,
    more=(),
):
    """Compiled ``fn(*args)`` against eager (see the module docstring); returns the compiled
    output. ``native``: no aten fallback kernel ran in the compiled graph (tilefuse lowered every
    op itself); pass False for ops tilefuse deliberately leaves to aten. ``more``: further argument
    tuples (other sizes) run through the same compiled function and compared with eager: under
    dynamic shapes they reuse the graph compiled for ``args``."""
    kwargs = kwargs or {}
    torch._dynamo.reset()
    metrics.reset()
    ref_args = [clone_like(a) for a in args]
    if ref_in_float:
        torch.manual_seed(0)
        try:
            want_dtypes = [
                x.dtype
                for x in pytree.tree_leaves(fn(*[clone_like(a) for a in args], **kwargs))
                if isinstance(x, torch.Tensor)
            ]
        except RuntimeError:
            want_dtypes = None
        ref_args = [_upcast(a) for a in ref_args]
    torch.manual_seed(0)
    want = fn(*ref_args, **kwargs)
    test_args = [clone_like(a) for a in args]
    torch.manual_seed(0)
    cfn = compiled(fn, dynamic)
    with FallbackReasons() as reasons:
        got = cfn(*test_args, **kwargs)
    if ref_in_float and want_dtypes is not None:
        got_dtypes = [x.dtype for x in pytree.tree_leaves(got) if isinstance(x, torch.Tensor)]
        assert got_dtypes == want_dtypes, (got_dtypes, want_dtypes)
    _assert_same(got, want, atol, rtol, exact_dtype and not ref_in_float, "output")
    # inputs a graph mutates must end up as eager leaves them
    for i, (t, r) in enumerate(zip(test_args, ref_args)):
        if isinstance(t, torch.Tensor):
            torch.testing.assert_close(
                t.detach(),
                r.detach().to(t.dtype),
                atol=atol,
                rtol=rtol,
                equal_nan=True,
                msg=lambda m, i=i: f"input {i}: {m}",
            )
    if native:
        assert metrics.fallback_kernel_count == 0, (
            f"{metrics.fallback_kernel_count} aten fallback kernel(s) ran: {reasons.lines}"
        )
    if grad:
        _check_grads(got, want, test_args, ref_args, grad_atol or atol, grad_rtol or rtol)
    for k, other in enumerate(more):
        ref = [_upcast(a) if ref_in_float else a for a in (clone_like(a) for a in other)]
        _assert_same(
            cfn(*[clone_like(a) for a in other], **kwargs),
            fn(*ref, **kwargs),
            atol,
            rtol,
            False,
            f"output (size set {k + 1})",
        )
    return got


def check_each(fn, cases, *, dynamic: bool, **kw):
    """``check`` of ``fn`` applied to every argument tuple of ``cases`` (same arity) in one
    compiled graph: the cases of a template that differ only in their inputs (dtypes, sizes)
    cost one compile instead of one each."""
    cases = [tuple(c) for c in cases]
    k = len(cases[0])
    assert all(len(c) == k for c in cases), "cases of different arity"

    def each(*flat):
        return [fn(*flat[i : i + k]) for i in range(0, len(flat), k)]

    return check(each, *[a for c in cases for a in c], dynamic=dynamic, **kw)


def _check_grads(got, want, test_args, ref_args, atol, rtol):
    outs_got = [x for x in pytree.tree_leaves(got) if isinstance(x, torch.Tensor) and x.requires_grad]
    outs_want = [x for x in pytree.tree_leaves(want) if isinstance(x, torch.Tensor) and x.requires_grad]
    assert outs_want and len(outs_got) == len(outs_want), (len(outs_got), len(outs_want))
    gen = torch.Generator(device=outs_want[0].device).manual_seed(1)
    cots = []
    for w in outs_want:
        c = torch.rand(w.shape, generator=gen, device=w.device, dtype=w.dtype)
        cots.append(c / c.norm().clamp_min(1e-12))
    leaves_got = [a for a in test_args if isinstance(a, torch.Tensor) and a.requires_grad]
    leaves_want = [a for a in ref_args if isinstance(a, torch.Tensor) and a.requires_grad]
    g_got = torch.autograd.grad(
        outs_got, leaves_got, [c.to(o.dtype) for c, o in zip(cots, outs_got)], allow_unused=True
    )
    g_want = torch.autograd.grad(outs_want, leaves_want, cots, allow_unused=True)
    _assert_same(list(g_got), list(g_want), atol, rtol, False, "grad")
