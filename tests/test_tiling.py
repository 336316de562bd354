"""2-D tiling of pointwise kernels (codegen/simd.py): the tiling choice on real lowered graphs, the
tile's variable maps against brute-force evaluation, and compiled results against eager."""

from __future__ import annotations

import itertools

import pytest
import torch

from tilefuse import config, metrics
from tilefuse import symbolic as S
from tilefuse.codegen.simd import YINDEX, Tiling, select_tiling, tiled_var_map
from tilefuse.scheduler import XINDEX

from _tf_testutil import DEVICE, GPU_MARKS, groups_of

pytestmark = GPU_MARKS


def tiling_of(fn, *args) -> Tiling | None:
    gs, _ = groups_of(fn, *args)
    assert len(gs) == 1, gs
    return select_tiling(gs[0])


def test_transpose_add_is_tiled_on_its_two_dims():
    x, y = torch.randn(48, 80), torch.randn(80, 48)
    assert tiling_of(lambda a, b: a + b.t(), x, y) == Tiling(48, 80)


def test_contiguous_pointwise_is_not_tiled():
    x, y = torch.randn(48, 80), torch.randn(48, 80)
    assert tiling_of(lambda a, b: a * b + 1, x, y) is None
    # a broadcast operand is not a transposed one either
    assert tiling_of(lambda a, b: a + b, x, torch.randn(80)) is None


def test_nchw_to_nhwc_tiles_channels_against_the_rest():
    x = torch.randn(2, 16, 5, 7)
    t = tiling_of(lambda a: torch.relu(a.permute(0, 2, 3, 1).contiguous()), x)
    assert t == Tiling(2 * 5 * 7, 16)


def test_tiled_permute_of_3d_picks_a_boundary_of_the_output():
    x = torch.randn(6, 10, 12)
    t = tiling_of(lambda a: a.permute(2, 0, 1).contiguous() * 2, x)
    # output [12, 6, 10] reads a[i1, i2, i0]: contiguous along the output's outer dim i0
    assert t is not None and t.ynumel * t.xnumel == 720
    assert t == Tiling(12, 60)


@pytest.mark.parametrize(
    "sizes,tiling",
    [
        ([4, 8, 16], Tiling(32, 16)),  # splits at a dimension boundary
        ([32, 5], Tiling(8, 20)),  # one dimension split across y and x
        ([3, 5, 4], Tiling(6, 10)),  # cannot split: flat digits
        ([1, 12, 1, 5], Tiling(12, 5)),  # size-1 dims map to 0
    ],
)
def test_tiled_var_map_matches_row_major_digits(sizes, tiling):
    """Every node variable, evaluated at every (yindex, xindex) of the tile, equals the row-major
    digit of the flat index yindex·xnumel + xindex."""

    class Body:
        iter_vars = [S.sym(f"i{k}") for k in range(len(sizes))]

    class Node:
        pass

    node = Node()
    node.body, node.sizes = Body, sizes
    m = tiled_var_map(node, tiling)
    for y, x in itertools.product(range(tiling.ynumel), range(tiling.xnumel)):
        flat = y * tiling.xnumel + x
        want = []
        for s in reversed(sizes):
            want.append(flat % s)
            flat //= s
        want.reverse()
        got = [int(m[v].evaluate({YINDEX: y, XINDEX: x})) if m[v].free_symbols else int(m[v]) for v in Body.iter_vars]
        assert got == want, (y, x, got, want)


# ----------------------------------------------------------------------------- compiled vs eager
@pytest.fixture(autouse=True)
def _strict():
    torch._dynamo.reset()
    with config.patch(fallback_on_error=False):
        yield
    torch._dynamo.reset()


def check(fn, *args, kernels=1, tiled=True, tmp_path=None, tol=None):
    metrics.reset()
    with config.patch(debug_dir=str(tmp_path)):
        got = torch.compile(fn, backend="tilefuse")(*args)
    want = fn(*args)
    kw = {} if tol is None else {"atol": tol, "rtol": tol}
    torch.testing.assert_close(got, want, equal_nan=True, **kw)
    assert metrics.generated_kernel_count == kernels
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert ("yindex" in src) == tiled, src
    return got


@pytest.mark.parametrize("m,n", [(3, 5), (127, 33), (1025, 3), (64, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_transpose_add_sizes_dtypes(m, n, dtype, tmp_path):
    def rand(*s):
        t = torch.randn(*s, device=DEVICE) * 10
        return t > 0 if dtype == torch.bool else t.to(dtype)

    x, y = rand(m, n), rand(n, m)
    check(lambda a, b: (a + b.t()) if dtype != torch.bool else (a ^ b.t()), x, y, tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 3, 1, 129), (3, 33, 2, 2)])
def test_nchw_to_nhwc_relu(shape, tmp_path):
    x = torch.randn(*shape, device=DEVICE)
    out = check(
        lambda a: torch.relu(a.permute(0, 2, 3, 1).contiguous()),
        x,
        tmp_path=tmp_path,
        tiled=shape[1] > 1 and shape[2] * shape[3] > 1,
    )
    assert out.is_contiguous()


def test_transposed_epilogue_chain_and_broadcast_in_one_tiled_kernel(tmp_path):
    x = torch.randn(40, 24, device=DEVICE)
    y = torch.randn(24, 40, device=DEVICE)
    b = torch.randn(24, device=DEVICE)
    check(lambda a, c, d: torch.sigmoid(a + c.t() * 2) - d, x, y, b, tmp_path=tmp_path)


def test_sliced_and_expanded_operands_under_tiling(tmp_path):
    x = torch.randn(50, 70, device=DEVICE)[3:40, 5:66]  # 37 x 61, strided rows
    y = torch.randn(80, 40, device=DEVICE)[:61, 1:38]  # 61 x 37, transposed below
    z = torch.randn(1, 61, device=DEVICE).expand(37, 61)
    check(lambda a, c, d: a * c.t() + d, x, y, z, tmp_path=tmp_path)


def test_tiling_off_keeps_1d_kernels_with_the_same_result(tmp_path):
    x, y = torch.randn(33, 65, device=DEVICE), torch.randn(65, 33, device=DEVICE)
    with config.patch(tiling=False):
        check(lambda a, b: a - b.t(), x, y, tmp_path=tmp_path, tiled=False)


def test_tiled_kernel_with_gathered_operand(tmp_path):
    # an indirect load (embedding rows) next to a transposed operand
    w = torch.randn(10, 24, device=DEVICE)
    idx = torch.randint(-10, 10, (16,), device=DEVICE)
    t = torch.randn(24, 16, device=DEVICE)
    check(lambda a, i, c: a[i] + c.t(), w, idx, t, tmp_path=tmp_path)
