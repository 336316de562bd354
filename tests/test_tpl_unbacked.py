"""Inductor's common templates in the view, indexing and cat families whose sizes depend on
tensor values (``.item()``, ``.tolist()``, ``nonzero``, tensor repeats), re-expressed: they need
Dynamo's ``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops``, and the graph compiles
with unbacked size symbols (issue 42, item 4).

Each test compiles with tilefuse, static and dynamic (``MODES``), and compares
against eager (``_tpl_util_b.check``); none runs the graph eagerly. The list of templates and where each went is
docs/inductor_templates.md.
"""

from __future__ import annotations

import pytest
import torch

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from _tpl_util_b import check, MODES

pytestmark = [*GPU_MARKS, MODES]
aten = torch.ops.aten

# the op that defines a data-dependent size (``.item()``, ``nonzero``, ``repeat_interleave`` of a
# tensor, ``.tolist()``) runs as its aten kernel by design, so each check allows aten kernels
# (``native=False``); the rest of the graph is tilefuse's kernels over the unbacked size


@pytest.fixture(autouse=True)
def _capture_data_dependent():
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield


def test_index_propagation_nested_indirect_indexing(dynamic):
    # each row index repeated by a count read from a tensor
    def f(x, repeats):
        index = torch.arange(repeats.numel(), device=DEVICE).repeat_interleave(repeats, dim=0)
        return torch.index_select(x, index=index, dim=0)

    check(f, torch.randn(8, 16), torch.tensor([1, 3, 2]), dynamic=dynamic, native=False)


def test_nonzero_unbacked_refinement(dynamic):
    def f(x):
        z = x.nonzero()
        torch._check(z.size(0) == 4)
        return z + 3

    check(f, torch.tensor([0, 1, 3, 4, 2, 0, 0]), dynamic=dynamic, native=False)
    cf = torch.compile(f, backend="tilefuse", dynamic=dynamic)
    with pytest.raises(RuntimeError):
        cf(torch.tensor([0, 0, 0, 0]))


def test_unbacked_floordiv_simplify(dynamic):
    def f(x, y):
        z = y.item()
        torch._check(z // 2 == 3)
        return x + x.new_ones(z)

    check(f, torch.randn(6), torch.tensor([6]), dynamic=dynamic, native=False)
    check(f, torch.randn(7), torch.tensor([7]), dynamic=dynamic, native=False)


def test_unbacked_floordiv_simplify_errors(dynamic):
    def f(x, y):
        z = y.item()
        torch._check(z // 2 == 3)
        return x + x.new_zeros(z)

    # the run-time check fails, as eager's does: not the compile
    with pytest.raises(RuntimeError) as err:
        torch.compile(f, backend="tilefuse", dynamic=dynamic)(torch.randn(8), torch.tensor(8))
    assert not isinstance(err.value, torch._dynamo.exc.BackendCompilerFailed), err.value


def test_cat_unbacked_legacy_empty(dynamic):
    # a 1-d tensor of size u0 (0 at run time) cannot join a 2-d one: eager's error
    def f(x, y):
        return torch.cat([x, x.new_ones(y.item())])

    with pytest.raises(RuntimeError, match="Expected 2-D tensors, but got 1-D") as err:
        torch.compile(f, backend="tilefuse", dynamic=dynamic)(torch.randn(2, 3), torch.tensor([0]))
    assert not isinstance(err.value, torch._dynamo.exc.BackendCompilerFailed), err.value


def test_cat_unbacked_empty_1d(dynamic):
    def f(x, y):
        return torch.cat([x, x.new_ones(y.item())])

    check(f, torch.randn(2), torch.tensor([0]), dynamic=dynamic, native=False)
    check(f, torch.randn(2), torch.tensor([3]), dynamic=dynamic, native=False)


def test_cat_unbacked_2d(dynamic):
    def f(x, y):
        return torch.cat([x, x.new_ones(y.item(), x.shape[1])])

    check(f, torch.randn(2, 3), torch.tensor([0]), dynamic=dynamic, native=False)
    check(f, torch.randn(2, 3), torch.tensor([4]), dynamic=dynamic, native=False)


def test_split_with_sizes_with_unbacked_symints(dynamic):
    def f(sz, x):
        s0, s1 = sz.tolist()
        _, r1 = aten.split_with_sizes.default(x, [s0, s1])
        return r1 * 2

    check(f, torch.tensor([5, 15]), torch.randn(20), dynamic=dynamic, native=False)

    def g(x):
        return aten.split_with_sizes.default(torch.arange(x.item(), device=DEVICE), [5, 5, 10])

    check(g, torch.tensor([20]), dynamic=dynamic, native=False)


def test_split_with_unbacked_symints(dynamic):
    check(
        lambda x: torch.split(torch.arange(x.item(), device=DEVICE), [5, 5, 10]),
        torch.tensor([20]),
        dynamic=dynamic,
        native=False,
    )
