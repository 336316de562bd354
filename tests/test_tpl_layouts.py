"""Inductor's CommonTemplate pointwise tests about input layouts and launch shapes, rewritten for
tilefuse: transposed, permuted, strided and offset inputs, broadcasts, single elements and sizes
at block boundaries, long operand chains, output strides of permuted operands, and bucketize.
Each test runs compiled with static and with dynamic shapes (``dyn``) against eager;
docs/inductor_templates.md maps every Inductor test to its port here."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import rand_strided

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_a import DYN, check, check_each, compiled
from tilefuse import metrics

pytestmark = [*GPU_MARKS, DYN]


def test_transpose_add_one_kernel(dyn):
    check(lambda a, b: a.t() + b, torch.randn(16, 32), torch.randn(32, 16), dynamic=dyn)
    assert metrics.generated_kernel_count == 1


def test_strided_and_permuted_inputs(dyn):
    # test_strided_inputs, test_simplify_loops
    check(
        lambda x, y: x + y,
        rand_strided((8, 16), (32, 2), device=DEVICE),
        rand_strided((8, 16), (16, 1), device=DEVICE),
        dynamic=dyn,
    )
    check(
        lambda a, b: a + b, torch.randn(2, 3, 4, 5, 6), torch.randn(4, 2, 3, 5, 6).permute(1, 2, 0, 3, 4), dynamic=dyn
    )


def test_permuted_operands_keep_output_strides(dyn):
    # test_transposed_propagates: the sum of two channels-last-like operands is channels-last
    a = torch.randn(1, 4, 4, 4).permute(0, 2, 3, 1)
    b = torch.randn(4, 4, 4).permute(1, 2, 0)
    got = check(lambda x, y: x + y, a, b, dynamic=dyn)
    assert got.stride() == (a + b).stride() and got.stride()[2] == 1


def test_broadcast_tiles(dyn):
    # test_fuse_tiled: an outer sum of a column and a row, and an unrelated elementwise op
    check(lambda a, b, c: (a + b, c + 1), torch.randn(128, 1), torch.randn(1, 128), torch.randn(128, 128), dynamic=dyn)


def test_sizes_at_block_boundaries(dyn):
    # test_single_elem, test_xblock_divides_xnumel
    check_each(lambda a: (a + 1,), [(torch.randn(n),) for n in (1, 1024, 1025)], dynamic=dyn)


def test_single_elem_indirect(dyn):
    check(lambda a, b: (a[b] + 1,), torch.randn(1), torch.tensor([0]), dynamic=dyn)


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_unaligned_storage_offsets(dyn, offset):
    # test_config_option_dont_assume_alignment: views starting at any element; the compiled
    # function then runs on views of other offsets
    def f(x):
        return x.sin() + x.cos()

    base = torch.randn(32 * 32 + 32)
    cf = compiled(f, dyn)
    x = torch.as_strided(base, (32, 32), (32, 1), offset)
    torch.testing.assert_close(cf(x), f(x))
    for other in (0, 1, 2, 4):
        y = torch.as_strided(torch.randn(32 * 32 + 32), (32, 32), (32, 1), other)
        torch.testing.assert_close(cf(y), f(y), atol=1e-5, rtol=1e-5)


def test_broadcast_ones_mask(dyn):
    # test_shape_prop_torch_ones: adding a ones mask of a broadcast shape
    def f(scores):
        return scores + torch.ones(4, 1, 1, 32, device=scores.device)

    with torch.no_grad():
        check(f, torch.randn(4, 6, 32, 32), dynamic=dyn)


def test_long_add_chain(dyn):
    # test_no_mega_fusion_during_lowering: a chain of additions of 32 separate inputs
    def f(*args):
        x = args[0]
        for a in args:
            x = torch.add(x, a)
        return x

    check(f, *[torch.randn(64) for _ in range(32)], dynamic=dyn)


def test_inplace_write_then_broadcast_mul(dyn):
    # test_inplace_where_pointwise: a write into a 1-element input before a broadcast product
    def f(a, b):
        a[0] = 2
        return a * b

    check(f, torch.rand(1), torch.rand(2), dynamic=dyn)


@pytest.mark.parametrize("out_int32, right", [(True, False), (False, False), (True, True), (False, True)])
def test_bucketize(dyn, out_int32, right):
    # test_bucketize, test_bucketize_int (int input, int32 boundaries); tilefuse has no bucketize
    # lowering (an aten fallback kernel, the ops around it compiled)
    def f(x, b):
        return torch.bucketize(x, b, out_int32=out_int32, right=right)

    check(f, torch.rand(64, 64) * 2 - 1, torch.tensor([-0.9, -0.8, 0.1, 0.2, 0.5, 0.9]), dynamic=dyn, native=False)
    check(f, torch.randint(0, 102, (64, 64)), torch.arange(10, dtype=torch.int32) ** 2 + 1, dynamic=dyn, native=False)


def test_bucketize_defaults_and_computed_boundaries(dyn):
    # test_bucketize_default_kwargs, test_bucketize_computed_offsets, test_bucketize_add_autotune
    # (bucketize itself an aten fallback kernel)
    x = torch.tensor([-1.0, -0.9, -0.8, -0.5, 0.0, 0.1, 0.2, 0.4, 0.5, 0.6, 0.9, 0.91])
    b = torch.tensor([-0.9, -0.8, 0.1, 0.2, 0.5, 0.9])
    check(torch.bucketize, x, b, dynamic=dyn, native=False)
    check(lambda x, b: torch.bucketize(x, b + 0.01), x, b - 0.01, dynamic=dyn, native=False)
    add = torch.randint(0, 1024, (2, 4, 16, 16)).to(memory_format=torch.channels_last)
    check(lambda x, b, c: torch.bucketize(x, b) + c, torch.rand(2, 4, 16, 16), b, add, dynamic=dyn, native=False)
