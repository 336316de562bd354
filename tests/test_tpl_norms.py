"""Inductor's CommonTemplate normalization tests, rewritten for tilefuse: softmax / log_softmax
(hand-written and aten's, scaled by Python floats that become symbolic under dynamic shapes),
layer norm, batch norm (eval, training with running-stat updates, after a convolution), and
norm-like patterns with gradients. Each test runs compiled with static and with dynamic shapes
(``dyn``) against eager; docs/inductor_templates.md maps every Inductor test to its port here."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, compiled
from tilefuse import config, metrics

pytestmark = [*GPU_MARKS, DYN]


def test_softmax_log_softmax(dyn):
    def f(a, b):
        return (
            torch.softmax(a + b, -1),
            torch.softmax(a, 0),
            torch.softmax(b, 1),
            F.log_softmax(a + b, -1),
            F.log_softmax(a, 0),
            F.log_softmax(b, 1),
        )

    check(f, torch.randn(8, 8), torch.randn(8, 8), dynamic=dyn, more=[(torch.randn(5, 37), torch.randn(5, 37))])


def _manual_softmax(x):
    e = torch.exp(x - torch.amax(x, 1, keepdim=True))
    return e / torch.sum(e, 1, keepdim=True)


@pytest.mark.parametrize("threshold", [4096, 8], ids=["persistent", "looped"])
def test_manual_softmax_one_kernel(dyn, threshold):
    # amax, exp and sum of the same rows fuse into one kernel, persistent or looped (rows past the
    # threshold are otherwise split into chunks by ``split_long_normalizers``, several kernels)
    with config.patch(persistent_reduction_threshold=threshold, split_long_normalizers=False):
        check(_manual_softmax, torch.randn(16, 32), dynamic=dyn)
    assert metrics.generated_kernel_count == 1


def test_div_then_softmax_precision(dyn):
    # a division by a tiny Python float (large logits), and by a per-batch tensor with a negative entry
    def f(x, y):
        return F.softmax(x.div(y), dim=-1)

    x = torch.matmul(torch.randn(1, 10, 40), torch.randn(1, 2, 40).transpose(-2, -1))
    check(f, x, 1e-6, dynamic=dyn)
    z = torch.randn(4, 4, 4) * 10
    check(
        f,
        torch.matmul(z, z),
        torch.tensor([[[0.6331]], [[1.6358]], [[-0.3459]], [[1.0196]]]),
        dynamic=dyn,
    )


SYMFLOAT_SCALES = {
    "div": lambda x, y: F.softmax(x.div(y * x.shape[-1]), dim=-1),
    "mul": lambda x, y: F.softmax(x.mul(y * x.shape[-1]), dim=-1),
}


@pytest.mark.parametrize("op", list(SYMFLOAT_SCALES))
def test_softmax_of_python_float_scaled_input(dyn, op):
    # a Python float times a size scales the logits; under dynamic shapes the float is a symbolic
    # value (a SymFloat argument of the graph): each new value must reach the kernel
    x = torch.matmul(torch.randn(1, 10, 40), torch.randn(1, 2, 40).transpose(-2, -1))
    fn = SYMFLOAT_SCALES[op]
    cf = compiled(fn, dyn)
    for y in (1e-5, 1e-6, 0.3):
        torch.testing.assert_close(cf(x, y), fn(x, y), atol=1e-5, rtol=1.3e-6)


def test_softmax_of_pad(dyn):
    # test_dtype_mismatch_issue
    check(lambda x: F.pad(x, [0, 1]).softmax(dim=-1), torch.rand(8, 4, 63), dynamic=dyn)


def test_softmax_of_infinite_inputs(dyn):
    # logits scaled past the float range: +-inf everywhere, nan rows (not an Inductor template:
    # the case of a wrong result on CUDA)
    x = torch.randn(6, 20)
    check(lambda x: torch.softmax(x * 1e39, -1), x, dynamic=dyn)


def test_batch_norm_2d_eval(dyn):
    m = torch.nn.Sequential(torch.nn.BatchNorm2d(10), torch.nn.ReLU()).eval()
    m[0].running_mean.normal_()
    m[0].running_var.uniform_(0.5, 2)
    check(m, torch.randn(2, 10, 8, 8), dynamic=dyn, more=[(torch.randn(3, 10, 5, 7),)])
    check(m, torch.randn(3, 10, 16, 16), dynamic=dyn)


def test_conv_batch_norm_leaky_relu_train(dyn):
    # test_batch_norm_2d_2 (yolov3's block, smaller): convolution (extern), training batch norm
    # with running-stat updates, in-place leaky relu
    mod = torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1, bias=False),
        torch.nn.BatchNorm2d(16, eps=1e-4, momentum=0.03),
        torch.nn.LeakyReLU(negative_slope=0.1, inplace=True),
    )
    ref = copy.deepcopy(mod)
    x = torch.randn(2, 8, 24, 32)
    got = compiled(mod, dyn)(x)
    torch.testing.assert_close(got, ref(x), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(mod[1].running_mean, ref[1].running_mean)
    torch.testing.assert_close(mod[1].running_var, ref[1].running_var)


def test_layer_norm_one_kernel(dyn):
    m = torch.nn.Sequential(torch.nn.LayerNorm(32), torch.nn.ReLU()).eval()
    with torch.no_grad():
        check(m, torch.randn(16, 32), dynamic=dyn)
    assert metrics.generated_kernel_count == 1


def test_batch_norm_1d_train_updates_buffers(dyn):
    # test_buffer_batch_norm: training-mode batch norm updates running stats in place (version
    # counters advance as in eager), values and gradients match
    m = torch.nn.BatchNorm1d(100)
    ref = copy.deepcopy(m)
    x = torch.randn(20, 100, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    versions = [b._version for b in m.buffers()]
    out = compiled(m, dyn)(x)
    want = ref(xr)
    torch.testing.assert_close(out, want)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(m, name), getattr(ref, name))
    assert all(b._version > v for b, v in zip(m.buffers(), versions))
    g = torch.randn_like(want)
    out.backward(g)
    want.backward(g)
    torch.testing.assert_close(x.grad, xr.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(m.weight.grad, ref.weight.grad, atol=1e-5, rtol=1e-4)


class _FunctionalBatchNorm(torch.nn.BatchNorm2d):
    """A BatchNorm2d whose forward calls ``F.batch_norm`` itself (test_conv_functional_bn_fuse)."""

    def forward(self, x):
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_batch, self.momentum or 0.0, self.eps
        )


@pytest.mark.parametrize("bn", [torch.nn.BatchNorm2d, _FunctionalBatchNorm], ids=["module", "functional"])
def test_conv_batch_norm_eval(dyn, bn):
    # test_conv_bn_fuse, test_conv_functional_bn_fuse: a convolution then an eval batch norm
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, kernel_size=3), bn(16)).eval()
    m[1].running_mean.normal_()
    m[1].running_var.uniform_(0.5, 2)
    with torch.no_grad():
        check(m, torch.randn(1, 3, 20, 12), dynamic=dyn, atol=1e-5, rtol=1e-4)


def test_norm_rotation_with_grads(dyn):
    # test_buffer_use_after_remove: a vector norm, a rotation matrix stacked from its pieces, an
    # einsum, and the gradients of two parameters
    def rotmat(v):
        theta = torch.norm(v, dim=-1)
        axis = v / theta[..., None]
        kx, ky, kz = axis[:, 0], axis[:, 1], axis[:, 2]
        s, c = torch.sin(theta), torch.cos(theta)
        one_c = 1 - c
        rows = [
            1 - (ky**2 + kz**2) * one_c,
            kx * ky * one_c - kz * s,
            kx * kz * one_c + ky * s,
            kx * ky * one_c + kz * s,
            1 - (kx**2 + kz**2) * one_c,
            -kx * s + ky * kz * one_c,
            kx * kz * one_c - ky * s,
            kx * s + ky * kz * one_c,
            1 - (kx**2 + ky**2) * one_c,
        ]
        return torch.stack(rows, dim=-1).reshape(-1, 3, 3)

    def f(coord, rot, trans):
        return (torch.einsum("...ij,...bj->...bi", rotmat(rot), coord) + trans).sum()

    args = (torch.ones(2, 3), torch.randn(2, 3, requires_grad=True), torch.randn(2, 3, requires_grad=True))
    check(f, *args, dynamic=dyn, grad=True, atol=1e-5, rtol=1e-5)


def test_group_norm_and_rms_norm(dyn):
    # not Inductor templates: group norm and an RMS norm written out, with gradients
    def f(x, w, b, g):
        h = F.group_norm(x, 4, w, b)
        r = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g
        return h, r

    args = (
        torch.randn(2, 8, 5, 6, requires_grad=True),
        torch.randn(8, requires_grad=True),
        torch.randn(8, requires_grad=True),
        torch.randn(6, requires_grad=True),
    )
    # dynamic: group norm's backward reads an as_strided view of symbolic sizes, which tilefuse
    # runs as the aten op (lowering/strided.py)
    check(f, *args, dynamic=dyn, grad=True, atol=1e-5, rtol=1e-4, native=not dyn)
