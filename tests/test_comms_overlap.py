"""Collectives in a compiled graph are issued early and waited on late
(``tilefuse.scheduler.comms.order_for_overlap``, option ``reorder_for_comm_overlap``): read from
the order of the calls in the generated wrapper, with results equal to eager's.

One process, a process group of one rank (gloo on the CPU, NCCL on a GPU): the functional
collectives run for real (on one rank they copy), which is all the ordering needs; the two-rank
recipes are ``tests/test_distributed.py``'s."""

from __future__ import annotations

import glob
import os
import re

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import config, metrics

pytestmark = GPU_MARKS

_CALL = re.compile(r"# _c10d_functional\.(\w+)\.")


@pytest.fixture(scope="module", autouse=True)
def world_of_one():
    """A default process group of one rank for the module (left alone if one exists)."""
    if dist.is_initialized():
        yield
        return
    backend = "nccl" if DEVICE == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def wrapper_calls(fn, args, tmp_path, **options) -> tuple[list, str]:
    """``fn`` compiled by tilefuse (``options`` patched in) and checked against eager on ``args``;
    returns (the calls of its one generated wrapper in order: ``"kernel"`` for a Triton kernel's
    launch, the op's name for a collective or wait, other lines skipped; the wrapper's source)."""
    folder = str(tmp_path / "gen")
    with config.patch(debug_dir=folder, **options):
        got = torch.compile(fn, backend="tilefuse", fullgraph=True)(*args)
    want = fn(*args)
    torch.testing.assert_close(got, want)
    assert metrics.generated_graph_count == 1 and metrics.eager_graph_count == 0
    (path,) = glob.glob(os.path.join(folder, "*.py"))
    source = open(path).read()
    calls = []
    in_call = False
    for line in source.splitlines():
        in_call = in_call or line.startswith("def call(")
        m = _CALL.search(line)
        if in_call and m:
            calls.append(m.group(1))
        elif in_call and ("_launcher(" in line or "_launcher.run(" in line):
            calls.append("kernel")  # interpreter launches call the launcher, CUDA ones its run
    return calls, source


def _between(calls: list, collective: str) -> list:
    """The calls between the first ``collective`` and the next wait."""
    i = calls.index(collective)
    return calls[i + 1 : calls.index("wait_tensor", i)]


def independent_work(x, y):
    a = fc.all_reduce(x * 2, "sum", dist.group.WORLD)  # (8, 16)
    b = (y.sin() * 3).sum(dim=1)  # (5,): needs nothing the collective computes
    return a + 1, b


def test_independent_kernel_runs_between_a_collective_and_its_wait(tmp_path):
    x, y = torch.randn(8, 16), torch.randn(5, 7)
    calls, source = wrapper_calls(independent_work, (x, y), tmp_path)
    # x * 2, the all-reduce issued, y's reduction while it runs, the wait, then a + 1
    assert calls == ["kernel", "all_reduce", "kernel", "wait_tensor", "kernel"], calls
    # the all-reduce's input (x * 2) is freed only after the wait: the communication reads it
    lines = source.splitlines()
    (issue,) = [k for k, ln in enumerate(lines) if "all_reduce" in ln]
    arg = re.search(r"\((\w+),", lines[issue]).group(1)
    (wait,) = [k for k, ln in enumerate(lines) if "wait_tensor" in ln]
    (free,) = [k for k, ln in enumerate(lines) if ln.strip() == f"del {arg}"]
    assert issue < wait < free, source


def test_without_the_option_the_wait_follows_its_collective(tmp_path):
    x, y = torch.randn(8, 16), torch.randn(5, 7)
    calls, _ = wrapper_calls(independent_work, (x, y), tmp_path, reorder_for_comm_overlap=False)
    assert _between(calls, "all_reduce") == [], calls


def test_collectives_keep_their_order_and_waits_feed_later_collectives(tmp_path):
    def f(x, y, z):
        group = dist.group.WORLD
        a = fc.all_reduce(x.exp().sum(dim=0), "sum", group)  # a kernel before the first collective
        b = fc.all_gather_tensor(y, 0, group)  # input ready at the start: still issued second
        c = fc.reduce_scatter_tensor(a * b[0], "sum", 0, group)  # needs both waits
        return c, z.cos() * 2  # z: independent work

    x, y, z = torch.randn(6, 16), torch.randn(1, 16), torch.randn(9, 3)
    calls, _ = wrapper_calls(f, (x, y, z), tmp_path)
    comms = [c for c in calls if c != "kernel"]
    assert [c for c in comms if c != "wait_tensor"] == ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"]
    # both waits come before the reduce-scatter that reads their results, the last wait after
    # the independent kernel
    assert comms == [
        "all_reduce",
        "all_gather_into_tensor",
        "wait_tensor",
        "wait_tensor",
        "reduce_scatter_tensor",
        "wait_tensor",
    ], calls
    assert _between(calls, "reduce_scatter_tensor") == ["kernel"], calls


def test_backward_all_reduce_overlaps_the_weight_gradient(tmp_path):
    """Tensor parallelism's column-wise layer: the input gradient is all-reduced in the backward
    (an autograd function as Megatron's), and the weight gradient, which does not need it, is
    computed while it runs."""

    class CopyToParallel(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return fc.all_reduce(g, "sum", dist.group.WORLD)

    w = torch.randn(16, 12, requires_grad=True)
    x = torch.randn(8, 12, requires_grad=True)

    def f(x, w):
        return torch.relu(CopyToParallel.apply(x) @ w.t()).sum()

    folder = str(tmp_path / "gen")
    with config.patch(debug_dir=folder):
        torch.compile(f, backend="tilefuse", fullgraph=True)(x, w).backward()
    gx, gw = x.grad, w.grad
    x.grad = w.grad = None
    f(x, w).backward()
    torch.testing.assert_close(gx, x.grad)
    torch.testing.assert_close(gw, w.grad)
    (path,) = glob.glob(os.path.join(folder, "backward_*.py"))
    lines = [ln for ln in open(path) if "_c10d_functional" in ln or "torch.mm" in ln or "aten.mm" in ln]
    ops = ["all_reduce" if "all_reduce" in ln else "wait" if "wait_tensor" in ln else "mm" for ln in lines]
    # grad_x = grad_y @ w, its all-reduce issued, grad_w = grad_y^T @ x while it runs, the wait
    assert ops == ["mm", "all_reduce", "mm", "wait"], lines
