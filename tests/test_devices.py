"""Graphs whose tensors are not all on the graph's device (CPU indices or CPU scalars in a CUDA
graph, CPU work inside it, a whole CPU graph on a machine without Triton's interpreter).

A kernel reads only its own device's memory, so ``GraphLowering`` keeps every kernel's reads on
the graph's device: 0-d CPU inputs and constants move to the device (eager lets device ops take
them as scalars), and an op that reads or produces tensors elsewhere runs as its aten kernel, as
eager runs it. The lowering tests use the ``meta`` device as the graph's device (a device other
than the CPU that needs no GPU); on a GPU the same rules hold for CUDA, where the ported templates
(tests/test_tpl_dtypes.py, tests/test_tpl_indexing.py) run them end to end.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from tilefuse import metrics
from tilefuse.graph import GraphLowering


def _lowered(fn, *args) -> GraphLowering:
    gm = make_fx(fn)(*args)
    graph = GraphLowering(gm, list(args), "devices")
    graph.run()
    return graph


def test_cpu_indices_of_a_device_tensor_run_as_the_aten_op():
    x, i = torch.randn(16, device="meta"), torch.tensor([3, 1])
    graph = _lowered(lambda x, i: x[i] * 2, x, i)
    assert graph.default_device.type == "meta"
    # the gather reads CPU memory: aten's kernel; the multiplication is a kernel on the device
    assert graph.fallback_ops == ["aten.index.Tensor"]


def test_a_host_scalar_and_its_casts_are_read_on_the_device():
    x, s = torch.randn(16, device="meta"), torch.tensor(2.5, dtype=torch.float64)
    graph = _lowered(lambda x, s: x * s.float() + s.to(torch.float32), x, s)
    assert graph.fallback_ops == []
    assert graph.host_scalar_inputs == ["arg1"]
    assert graph.graph_inputs["arg1"].get_device().type == "meta"


def test_a_zero_dim_constant_moves_to_the_device():
    x = torch.randn(16, device="meta")
    graph = _lowered(lambda x: x * torch.tensor(3.0), x)
    assert graph.fallback_ops == []
    assert [c.device.type for c in graph.constants.values()] == ["meta"]


def test_a_zero_dim_cpu_factory_read_on_the_device_is_made_there():
    # aten.scalar_tensor / full([]) without a device make a CPU tensor; read only by device ops
    # they become constants of the device's kernels, not aten calls
    x = torch.randn(16, device="meta")

    def f(x):
        s = torch.ops.aten.scalar_tensor.default(3.0)
        t = torch.ops.aten.full.default([], 2.0)
        return torch.where(x > 0, x * s, t)

    graph = _lowered(f, x)
    assert graph.fallback_ops == []
    assert all(b.get_device().type == "meta" for b in graph.buffers)


def test_a_zero_dim_cpu_factory_whose_host_arithmetic_is_returned_stays_on_the_cpu():
    # s = scalar_tensor(3) * 2 is returned (on the CPU, as eager) and also scales x: the factory
    # and its arithmetic stay aten CPU ops, so the output is eager's CPU tensor (computing it on
    # the device would refuse the graph: an output on another device than eager's)
    x = torch.randn(16, device="meta")

    def f(x):
        s = torch.ops.aten.scalar_tensor.default(3.0) * 2
        return x * s, s

    graph = _lowered(f, x)
    assert graph.fallback_ops[:2] == ["aten.scalar_tensor.default", "aten.mul.Tensor"]
    assert graph.outputs[1].get_device().type == "cpu"


def test_a_cpu_factory_copied_to_the_device_is_made_there():
    # torch.arange(n, device="cpu").to(x.device) + x: one kernel on the device, no aten call
    x = torch.randn(16, device="meta")
    arange = torch.ops.aten.arange.start_step  # what the backend's decompositions trace
    graph = _lowered(lambda x: arange(0, 16, device="cpu").to(x.device) + x, x)
    assert graph.fallback_ops == []
    assert all(b.get_device().type == "meta" for b in graph.buffers)


def test_a_cpu_factory_also_returned_on_the_cpu_is_made_there_again():
    x = torch.randn(16, device="meta")
    arange = torch.ops.aten.arange.start_step

    def f(x):
        r = arange(0, 16, device="cpu")
        return r.to(x.device) + x, r * 2

    graph = _lowered(f, x)
    # the device's kernel makes the arange inline; the CPU output is made by aten on the CPU
    assert graph.fallback_ops == ["aten.arange.start_step", "aten.mul.Tensor"]
    assert [o.get_device().type for o in graph.outputs] == ["meta", "cpu"]


def test_a_cpu_factory_read_by_a_cpu_op_on_a_cpu_input_stays_there():
    x, y = torch.randn(16, device="meta"), torch.randn(16)
    arange = torch.ops.aten.arange.start_step

    def f(x, y):
        r = arange(0, 16, device="cpu")
        return r.to(x.device) + x, r * y

    graph = _lowered(f, x, y)
    # r * y is CPU work on a CPU input: r stays on the CPU (aten), copied to the device
    assert graph.fallback_ops[:2] == ["aten.arange.start_step", "aten._to_copy.default"]


def test_a_zero_dim_cpu_factory_the_graph_returns_stays_on_the_cpu():
    x = torch.randn(16, device="meta")
    graph = _lowered(lambda x: (x * 2, torch.ops.aten.scalar_tensor.default(3.0)), x)
    # returned on the CPU as eager does: the aten op makes it there
    assert graph.fallback_ops == ["aten.scalar_tensor.default"]


def test_cpu_work_inside_a_device_graph_runs_as_aten_ops():
    x, y = torch.randn(4, device="meta"), torch.randn(4)
    graph = _lowered(lambda x, y: x + y.sum(), x, y)
    # the CPU reduction, and the addition that reads its CPU result
    assert graph.fallback_ops == ["aten.sum.default", "aten.add.Tensor"]


def test_host_arithmetic_the_graph_returns_on_the_cpu_is_computed_there_too():
    # s + 1 is returned on the CPU (as a training graph saves a Python float's casts for its
    # backward) while x * s reads s on the device: the call keeps s's CPU tensor, the addition
    # runs as its aten op on it, and the product stays a kernel on the device
    from torch._subclasses.fake_tensor import FakeTensorMode

    from tilefuse.codegen.wrapper import WrapperCodegen
    from tilefuse.ir.graph_context import set_graph
    from tilefuse.scheduler import schedule

    def f(x, s):
        return x * s, (s + 1).to(torch.float64)

    x, s = torch.randn(16, device="meta"), torch.tensor(2.5)
    graph = _lowered(f, x, s)
    assert graph.host_scalar_inputs == ["arg1"] and graph.host_scalar_twins == ["arg1"]
    assert graph.fallback_ops == ["aten.add.Tensor", "aten._to_copy.default"]
    assert graph.outputs[0].get_device().type == "meta" and graph.outputs[1].get_device().type == "cpu"
    # the wrapper, for (fake) CUDA tensors
    mode = FakeTensorMode()
    with mode:
        args = [torch.empty(16, device="cuda"), torch.tensor(2.5)]
    graph = GraphLowering(make_fx(f, tracing_mode="fake")(*args), args, "devices")
    with mode:
        graph.run()
    with set_graph(graph):
        src, _ = WrapperCodegen(graph, schedule(graph.buffers)).generate()
    call = src[src.index("def call") :]
    assert call.index("arg1_host = arg1") < call.index("arg1 = arg1.to(_device)") < call.index("(arg1_host, 1)")


def test_a_cpu_graph_without_the_interpreter_runs_eagerly_with_one_warning(monkeypatch):
    import triton

    from tilefuse import backend

    monkeypatch.setattr(triton.knobs.runtime, "interpret", False)
    monkeypatch.setattr(backend, "_warned_cpu_graph", False)
    torch._dynamo.reset()
    metrics.reset()
    fns = [lambda x: (x.sin() + 1).sum(0), lambda x: x.cos() * 2]
    x = torch.randn(8, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in fns:
            torch.testing.assert_close(torch.compile(fn, backend="tilefuse")(x), fn(x))
    said = [w for w in caught if "computes on the CPU" in str(w.message)]
    assert len(said) == 1 and "TRITON_INTERPRET=1" in str(said[0].message)
    assert metrics.eager_graph_count == 2 and metrics.generated_kernel_count == 0
    torch._dynamo.reset()


def test_a_moved_constant_is_real_under_the_compile_fake_mode():
    # the backend lowers inside AOTAutograd's FakeTensorMode: the moved constant must keep its data
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    x = torch.randn(16, device="meta")
    gm = make_fx(lambda x: x * torch.tensor(3.0))(x)
    graph = GraphLowering(gm, [x], "devices")
    with FakeTensorMode(allow_non_fake_inputs=True):
        graph.run()
    (const,) = graph.constants.values()
    assert const.device.type == "meta" and not isinstance(const, FakeTensor)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64])
def test_division_by_a_host_scalar_tensor_is_a_reciprocal_multiply_off_the_cpu(dtype):
    # a 0-d CPU divisor (a Python float Dynamo passes as a tensor under dynamic=True) is a CPU
    # scalar to CUDA's eager kernel, which multiplies by its reciprocal: so does the kernel, the
    # reciprocal computed from the divisor in the compute dtype; a device divisor is divided by
    from tilefuse.debug import format_buffers
    from tilefuse.ir.graph_context import set_graph

    def ir_ops(x, y):
        graph = _lowered(lambda x, y: x / y.to(torch.float32), x, y)
        with set_graph(graph):
            return [ln.split("=", 1)[1].strip() for ln in format_buffers(graph).splitlines() if " = " in ln]

    host = ir_ops(torch.ones(16, device="meta", dtype=dtype), torch.tensor(3.0, dtype=torch.float64))
    assert any(op.startswith("reciprocal(") for op in host) and not any("truediv" in op for op in host), host
    on_device = ir_ops(
        torch.ones(16, device="meta", dtype=dtype), torch.tensor(3.0, dtype=torch.float64, device="meta")
    )
    assert any(op.startswith("truediv(") for op in on_device) and not any("reciprocal" in op for op in on_device)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64, torch.int32])
def test_division_by_a_python_number_is_a_reciprocal_multiply_off_the_cpu(dtype):
    # on a GPU eager's kernel multiplies by the divisor's reciprocal in the compute dtype (CUDA's
    # div_true_kernel for a CPU scalar), and so does the lowering; on the CPU both divide
    from tilefuse.debug import format_buffers
    from tilefuse.ir.graph_context import set_graph

    def ir_ops(device):
        x = torch.ones(16, device=device, dtype=dtype)
        graph = _lowered(lambda x: x / 3.0, x)
        with set_graph(graph):
            return [ln.split("=", 1)[1].strip() for ln in format_buffers(graph).splitlines() if " = " in ln]

    cdt = "float64" if dtype == torch.float64 else "float32"
    inv = torch.tensor(3.0, dtype=getattr(torch, cdt)).reciprocal().item()
    device_ops = ir_ops("meta")
    assert any(op.startswith(f"constant({inv!r}, {cdt})") for op in device_ops), device_ops
    assert any(op.startswith("mul(") for op in device_ops) and not any("truediv" in op for op in device_ops)
    cpu_ops = ir_ops("cpu")
    assert any(op.startswith("truediv(") for op in cpu_ops) and any(f"constant(3.0, {cdt})" in op for op in cpu_ops)


def test_a_zero_dim_cpu_factory_of_a_symbolic_size_is_made_on_the_device():
    # under dynamic shapes math.sqrt(x.size(0)) is scalar_tensor(s0) and host arithmetic on it:
    # a factory of a size (an input node, but no tensor), read by device ops only
    from torch._guards import detect_fake_mode

    def f(x):
        return x * torch.ops.aten.scalar_tensor.default(x.shape[0]).to(torch.float64).sqrt().to(torch.float32)

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(16, 4, device="meta"))
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    graph = GraphLowering(gm, inputs, "devices")
    with detect_fake_mode(inputs):
        graph.run()
    assert graph.fallback_ops == []
    assert all(b.get_device().type == "meta" for b in graph.buffers)
