"""Nearest upsampling (``lowering.upsample``): compiled results equal eager's on the device the
tests run on (the CPU, or CUDA under the ``gpu`` marker), bit for bit, for scale factors that
keep, double, shrink or stretch a length by a fraction, output sizes given directly, 1-3 spatial
dims, both modes, static and dynamic shapes, and a gradient; and each runs as tilefuse's gather,
not as the aten kernel nor torch's decomposition (which reads other rows than eager where
eager's kernels take a shortcut)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import metrics

pytestmark = GPU_MARKS

MODES = ["nearest", "nearest-exact"]
# (input spatial shape, scale factor): a length kept by a fractional factor (3 * 1.3 -> 3), a
# length doubled by a factor that is not 2 (3 * 2.1 -> 6), shrinking, integer and power-of-two
# factors (index arithmetic), and fractional ones (float32 math in the kernel)
SCALE_CASES = [
    ((3, 5), 1.3),
    ((3, 4), (1.3, 2.0)),
    ((3, 3), 2.1),
    ((7, 3), 0.6),
    ((6, 6), 0.5),
    ((4, 4), 2.5),
    ((5, 7), (3.0, 0.25)),
    ((9, 11), 0.77),
    ((13, 2), (1.01, 3.3)),
    ((3,), 1.3),
    ((5,), 2.1),
    ((3, 4, 5), 1.3),
    ((2, 3, 4), (2.0, 0.5, 1.7)),
]


def _compile_and_compare(fn, x, dynamic: bool) -> None:
    metrics.reset()
    out = torch.compile(fn, backend="tilefuse", dynamic=dynamic)(x)
    ref = fn(x)
    assert out.shape == ref.shape
    assert torch.equal(out, ref), (out - ref).abs().max()
    assert metrics.fallback_kernel_count == 0 and metrics.eager_graph_count == 0


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spatial,scale", SCALE_CASES, ids=[f"{s}x{f}" for s, f in SCALE_CASES])
def test_scale_factor_matches_eager(spatial, scale, mode, dynamic):
    x = torch.randn(2, 3, *spatial)
    _compile_and_compare(lambda t: F.interpolate(t, scale_factor=scale, mode=mode), x, dynamic)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(7, 3), (5, 7), (10, 14), (5, 14)])
def test_output_size_matches_eager(size, mode, dynamic):
    x = torch.randn(2, 3, 5, 7)
    _compile_and_compare(lambda t: F.interpolate(t, size=size, mode=mode), x, dynamic)


def test_channels_last_and_integer_inputs():
    x = torch.randn(2, 3, 3, 5).contiguous(memory_format=torch.channels_last)
    _compile_and_compare(lambda t: F.interpolate(t, scale_factor=1.3, mode="nearest") * 2, x, False)
    xi = torch.randint(0, 255, (1, 2, 3, 4), dtype=torch.uint8)
    _compile_and_compare(lambda t: F.interpolate(t, scale_factor=(1.3, 2.1), mode="nearest"), xi, False)


def test_upsample_module_and_gradient():
    """nn.Upsample in a training step: the forward is the lowering, the gradient aten's backward
    kernel, both equal to eager's."""
    up = torch.nn.Upsample(scale_factor=1.3, mode="nearest")
    w = torch.arange(18.0).view(3, 6)
    x = torch.randn(2, 3, 3, 5, requires_grad=True)

    def step(t):
        return (up(t) * w).sum()

    metrics.reset()
    loss = torch.compile(step, backend="tilefuse")(x)
    (grad,) = torch.autograd.grad(loss, x)
    ref = step(x)
    (ref_grad,) = torch.autograd.grad(ref, x)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(grad, ref_grad)
    assert metrics.eager_graph_count == 0


def test_torch_kernels_are_restored_after_the_trace():
    """The Python kernels set aside while AOTAutograd traces are back afterwards: make_fx under
    the Python dispatcher still records torch's decomposition."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(1, 1, 3, 5)
    torch.compile(lambda t: F.interpolate(t, scale_factor=1.3, mode="nearest"), backend="tilefuse")(x)
    with enable_python_dispatcher():
        gm = make_fx(lambda t: torch.ops.aten.upsample_nearest2d.vec(t, None, [1.3, 1.3]))(x)
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten._unsafe_index.Tensor in targets
