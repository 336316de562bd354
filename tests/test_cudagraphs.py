"""``mode="reduce-overhead"`` and option ``cudagraphs`` (issue 41): compiled graphs under torch's
CUDA graph trees (``tilefuse.runtime.cudagraphs``).

On the CPU (Triton's interpreter): the mode is accepted without the "ignores mode" warning, the
option and ``TILEFUSE_CUDAGRAPHS`` turn it on, a graph on CPU tensors runs without CUDA graphs and
says so once, bad values are refused, and the wrapper's own rules (first call at each size
outside the trees, the bound on recorded sizes, a backward outside the trees telling the tree
manager, the graph cache handing out unwrapped modules) run against a stand-in for the trees.
On a GPU (``gpu``-marked, ``TRITON_INTERPRET=0``): the real trees against eager over many
replays: inference, a training loop with AdamW, input mutation, changing batch sizes,
``cudagraph_mark_step_begin``, an overwritten output's error, random ops, flat memory.
"""

from __future__ import annotations

import copy
import importlib
import logging
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _tf_testutil import DEVICE, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import config, metrics
from tilefuse.runtime import cudagraphs

CPU_ONLY = pytest.mark.skipif(DEVICE != "cpu", reason="CPU graphs run through Triton's interpreter")


def _skip_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "runs without CUDA graphs" in r.getMessage()]


# ---------------------------------------------------------------- CPU: options and the mode


@CPU_ONLY
def test_reduce_overhead_is_accepted_and_a_cpu_graph_says_once_why_it_runs_without_cuda_graphs(caplog):
    f = torch.compile(lambda x: (x * 2).sin() + 1, backend="tilefuse", mode="reduce-overhead")
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="tilefuse"):
        warnings.simplefilter("error")  # no "tilefuse ignores torch.compile's mode" warning
        for _ in range(4):
            x = torch.randn(9)
            torch.testing.assert_close(f(x), (x * 2).sin() + 1)
    lines = _skip_lines(caplog)
    assert len(lines) == 1 and "CPU tensors" in lines[0], lines
    assert [r.levelno for r in caplog.records if "runs without CUDA graphs" in r.getMessage()] == [logging.INFO]
    assert metrics.cudagraph_skip_count == 1 and metrics.cudagraph_graph_count == 0
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 1


@CPU_ONLY
def test_option_turns_cudagraphs_on_for_forward_and_backward(caplog):
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh())
    ref = copy.deepcopy(model)
    f = torch.compile(model, backend="tilefuse", options={"cudagraphs": True})
    x = torch.randn(3, 6)
    with caplog.at_level(logging.INFO, logger="tilefuse"):
        f(x).sum().backward()
        f(x).sum().backward()
    ref(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5)
    lines = _skip_lines(caplog)
    assert len(lines) == 2 and all("CPU tensors" in ln for ln in lines), lines  # the forward's, the backward's


@CPU_ONLY
def test_default_compile_uses_no_cuda_graphs(caplog):
    with caplog.at_level(logging.INFO, logger="tilefuse"):
        torch.compile(lambda x: x + 1, backend="tilefuse")(torch.ones(3))
    assert _skip_lines(caplog) == [] and metrics.cudagraph_skip_count == 0


@CPU_ONLY
def test_environment_variable_turns_it_on(monkeypatch, caplog):
    monkeypatch.setenv("TILEFUSE_CUDAGRAPHS", "1")
    try:
        importlib.reload(config)
        assert config.cudagraphs is True
        with caplog.at_level(logging.INFO, logger="tilefuse"):
            torch.compile(lambda x: x * 3, backend="tilefuse")(torch.ones(3))
        assert len(_skip_lines(caplog)) == 1
    finally:
        monkeypatch.delenv("TILEFUSE_CUDAGRAPHS")
        importlib.reload(config)
    assert config.cudagraphs is False


def test_bad_values_are_refused(monkeypatch):
    with pytest.raises(TypeError, match="cudagraphs"):
        config.validate({"cudagraphs": "yes"})
    with pytest.raises(TypeError, match="cudagraphs"):
        config.validate({"cudagraphs": 1})
    assert config.validate({"cudagraphs": True}) == {"cudagraphs": True}
    monkeypatch.setenv("TILEFUSE_CUDAGRAPHS", "maybe")
    try:
        with pytest.raises(ValueError, match="TILEFUSE_CUDAGRAPHS"):
            importlib.reload(config)
    finally:
        monkeypatch.delenv("TILEFUSE_CUDAGRAPHS")
        importlib.reload(config)
    with pytest.raises(Exception, match="Either mode or options"):  # torch's own rule
        torch.compile(lambda x: x, backend="tilefuse", mode="reduce-overhead", options={"cudagraphs": True})


def test_modes_that_turn_cuda_graphs_on_follow_inductors_list():
    from tilefuse.backend import _mode_turns_on_cudagraphs

    assert _mode_turns_on_cudagraphs("reduce-overhead") and _mode_turns_on_cudagraphs("max-autotune")
    assert not _mode_turns_on_cudagraphs("max-autotune-no-cudagraphs")
    assert not _mode_turns_on_cudagraphs("default") and not _mode_turns_on_cudagraphs(None)


def test_the_option_is_not_part_of_the_graph_cache_key():
    from tilefuse.runtime import graph_cache

    assert "cudagraphs" in graph_cache._KEY_EXCLUDED_OPTIONS


# ---------------------------------------------------------------- CPU: the wrapper's rules


class _FakeTrees:
    """Stands in for ``cudagraphify_impl`` and the tree manager: records what tilefuse hands the
    trees and runs the model eagerly, asserting what the real trees assert (the list emptied)."""

    def __init__(self):
        self.made: list[dict] = []
        self.calls = 0
        self.backward_notes = 0

    def impl(self, model, inputs, static_idxs, **kw):
        self.made.append({"static": list(static_idxs), **kw})

        def run(args):
            self.calls += 1
            out = model(args)
            assert len(args) == 0
            return out

        return run

    def set_to_running_backward(self):
        self.backward_notes += 1


@pytest.fixture
def fake_trees(monkeypatch):
    """The wrapper engaged on the CPU: every graph counts as capturable on cuda:0, and the trees
    are ``_FakeTrees``."""
    trees = _FakeTrees()
    monkeypatch.setattr(cudagraphs, "_tree_factory", lambda: trees.impl)
    monkeypatch.setattr(cudagraphs, "_tree_manager", lambda index: trees)
    monkeypatch.setattr(cudagraphs, "skip_reason", lambda *a: None)
    monkeypatch.setattr(cudagraphs, "graph_devices", lambda gm, ex: {torch.device("cuda", 0): "x"})
    return trees


@CPU_ONLY
def test_training_graphs_enter_the_trees_after_a_first_call_outside(fake_trees):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    ref = copy.deepcopy(model)
    f = torch.compile(model, backend="tilefuse", mode="reduce-overhead")
    for _ in range(4):
        x = torch.randn(3, 8)
        out, want = f(x), ref(x)
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
        out.square().sum().backward()
        want.square().sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4)
    assert metrics.cudagraph_graph_count == 2 and metrics.cudagraph_skip_count == 0
    fw, bw = fake_trees.made
    assert (fw["is_backward"], fw["is_inference"], bw["is_backward"], bw["is_inference"]) == (False, False, True, False)
    assert fw["device_index"] == bw["device_index"] == 0
    assert len(fw["static"]) == 4  # the parameters (AOTAutograd's static_input_indices)
    assert bw["static"] == list(range(len(bw["static"]))) and bw["static"]  # the saved tensors
    assert fake_trees.calls == 2 * 3  # calls 2-4 of each graph
    assert fake_trees.backward_notes == 1  # the backward's first call, outside the trees


@CPU_ONLY
def test_sizes_enter_the_trees_up_to_the_limit_then_run_outside_with_one_log_line(fake_trees, caplog):
    from torch._inductor import config as inductor_config

    f = torch.compile(lambda x: x.sum(0) * 2, backend="tilefuse", mode="reduce-overhead", dynamic=True)
    with (
        inductor_config.patch({"triton.cudagraph_dynamic_shape_warn_limit": 2}),
        caplog.at_level(logging.INFO, logger="tilefuse"),
    ):
        for _ in range(3):
            for n in (2, 3, 5):
                x = torch.randn(n, 4)
                torch.testing.assert_close(f(x), x.sum(0) * 2)
    assert len(fake_trees.made) == 1  # one tree function per graph; the trees key sizes themselves
    assert metrics.symbolic_graph_count == 1  # compiled once for all sizes
    # the first call outside; 3 x size 3 and 2 x size 2 in the trees; size 5, past the limit, outside
    assert fake_trees.calls == 5
    lines = _skip_lines(caplog)
    assert len(lines) == 1 and "more than 2 distinct sizes" in lines[0], lines
    assert metrics.cudagraph_graph_count == 1 and metrics.cudagraph_skip_count == 1


@pytest.mark.parametrize("per_size", [False, True])
def test_which_calls_run_outside_the_trees(fake_trees, per_size):
    """The first call runs outside the trees; with a module compiled per size, the first call at
    each size; sizes past the limit always."""
    gm, args = _fake_cuda_graph(lambda x: x * 2, (4,))
    ran = []

    def fn(a):
        ran.append(a[1])
        a.clear()
        return [0]

    w = cudagraphs.CudaGraphed(fn, "g", "inference", [args[0], 3], [], [], 0, gm, compiles_per_size=per_size)
    w.limit = 3
    for n in (1, 2, 1, 2, 3, 4, 4, 1):
        w([torch.ones(1), n])
    assert ran == [1, 2, 1, 2, 3, 4, 4, 1]
    # outside: the first call (each size's first with per_size), and size 4 (past the limit)
    assert w.calls_outside == (5 if per_size else 3)
    assert fake_trees.calls == 8 - w.calls_outside


@CPU_ONLY
def test_the_graph_cache_hands_out_unwrapped_modules(fake_trees, tmp_path, monkeypatch):
    from tilefuse.runtime import cache as rt_cache
    from tilefuse.runtime import graph_cache

    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path / "tfcache"))
    graph_cache.clear()

    def fn(x):
        return torch.cos(x) * 3

    x = torch.randn(5)
    try:
        with config.patch(graph_cache=True):
            for _ in range(3):
                torch.testing.assert_close(torch.compile(fn, backend="tilefuse", mode="reduce-overhead")(x), fn(x))
            assert fake_trees.calls == 2
            torch._dynamo.reset()
            for _ in range(3):  # the same graph without the option: a cache hit, never in the trees
                torch.testing.assert_close(torch.compile(fn, backend="tilefuse")(x), fn(x))
            assert metrics.graph_cache_hits == 1 and fake_trees.calls == 2
            torch._dynamo.reset()
            for _ in range(3):  # and with it again: a hit, wrapped anew
                torch.testing.assert_close(torch.compile(fn, backend="tilefuse", mode="reduce-overhead")(x), fn(x))
            assert metrics.graph_cache_hits == 2 and fake_trees.calls == 4 and len(fake_trees.made) == 2
    finally:
        graph_cache.clear()


def _fake_cuda_graph(fn, *shapes):
    """``fn`` traced to an aten graph whose values are fake CUDA tensors (no GPU needed)."""
    from torch._subclasses import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    mode = FakeTensorMode()
    with mode:
        args = [torch.empty(s, device="cuda") for s in shapes]
    return make_fx(fn, tracing_mode="fake")(*args), args


def test_skip_reasons_name_what_cannot_be_captured():
    gm, args = _fake_cuda_graph(lambda x: x * 2, (4,))
    assert cudagraphs.skip_reason(gm, args, [], []) is None
    gm, args = _fake_cuda_graph(lambda x: x.sum() * 2, (4,))
    for node in gm.graph.nodes:  # a host sync in place of the multiplication
        if node.target == torch.ops.aten.mul.Tensor:
            node.target, node.args = torch.ops.aten._local_scalar_dense.default, node.args[:1]
    assert "op aten._local_scalar_dense.default cannot be captured" in cudagraphs.skip_reason(gm, args, [], [])
    gm, args = _fake_cuda_graph(lambda x: x * 2, (4,))
    assert "mutated inputs" in cudagraphs.skip_reason(gm, args, [], [0])
    assert cudagraphs.skip_reason(gm, args, [0], [0]) is None  # a mutated parameter or buffer is allowed
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["val"] = torch.empty(3, device="cpu")
    assert "CPU tensors (x)" == cudagraphs.skip_reason(gm, [torch.ones(3, device="cpu")], [], [])


def test_the_model_handed_to_the_trees_empties_its_list():
    gm, args = _fake_cuda_graph(lambda x: x * 2, (4,))
    seen = []
    w = cudagraphs.CudaGraphed(lambda a: seen.append(len(a)) or [1], "g", "inference", args, [], [], 0, gm)
    inputs = [torch.ones(2), 3]
    assert w._model(inputs) == [1] and inputs == [] and seen == [2]


# ---------------------------------------------------------------- GPU: the real trees


def _tree_manager(index: int = 0):
    from torch._inductor.cudagraph_trees import get_container

    return get_container(index).tree_manager


def _recorded_nodes(index: int = 0) -> int:
    """CUDA graphs recorded in the device's tree (every node, roots and children)."""
    manager = _tree_manager(index)
    if manager is None:
        return 0
    n, stack = 0, list(manager.get_roots())
    while stack:
        node = stack.pop()
        n += 1
        stack.extend(c for cs in node.children.values() for c in cs)
    return n


@pytest.fixture
def replays(monkeypatch):
    """Counts CUDA graph replays (``torch.cuda.CUDAGraph.replay``, what the trees call)."""
    count = [0]
    replay = torch.cuda.CUDAGraph.replay

    def counting(self, *a, **k):
        count[0] += 1
        return replay(self, *a, **k)

    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", counting)
    return count


@pytest.fixture
def no_compile_while_capturing(monkeypatch):
    """Every kernel binary lookup (a new specialization) and every autotuning launch of
    tilefuse's launchers is recorded if it happens while a stream is capturing."""
    from tilefuse.runtime.launcher import KernelLauncher

    during = []
    for name in ("_add_entry", "_autotune_and_launch"):
        orig = getattr(KernelLauncher, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            if torch.cuda.is_current_stream_capturing():
                during.append(_name)
            return _orig(self, *a, **k)

        monkeypatch.setattr(KernelLauncher, name, wrapped)
    return during


def _mlp(d_in=64, hidden=128, d_out=32):
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, d_out)).cuda()


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_inference_replays_match_eager(replays, no_compile_while_capturing):
    torch.manual_seed(0)
    model = _mlp().eval()
    f = torch.compile(model, backend="tilefuse", mode="reduce-overhead")
    n = 30
    with torch.no_grad():
        for _ in range(n):
            x = torch.randn(8, 64, device="cuda")
            torch.testing.assert_close(f(x), model(x), atol=1e-4, rtol=1e-4)
    assert metrics.cudagraph_graph_count == 1 and metrics.cudagraph_skip_count == 0
    assert _recorded_nodes() == 1
    assert replays[0] >= n - 3  # 1: outside the trees, 2: warm-up, 3: recording (and its replay)
    assert no_compile_while_capturing == []
    (func,) = _tree_manager().ids_to_funcs.values()
    assert len(func.static_input_idxs) >= 6  # the weights and biases: static, not copied


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_training_loop_with_adamw_matches_eager_over_20_steps(replays, no_compile_while_capturing):
    torch.manual_seed(0)
    ref = _mlp(32, 64, 8)
    model = copy.deepcopy(ref)
    f = torch.compile(model, backend="tilefuse", mode="reduce-overhead")
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    steps = 20
    for _ in range(steps):
        x, y = torch.randn(16, 32, device="cuda"), torch.randn(16, 8, device="cuda")
        losses = []
        for fn, o in ((ref, opt_ref), (f, opt)):
            o.zero_grad(set_to_none=True)
            loss = F.mse_loss(fn(x), y)
            loss.backward()
            o.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-3 * max(1.0, abs(losses[0])), losses
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, atol=2e-3, rtol=2e-3)
    assert metrics.cudagraph_graph_count == 2 and metrics.cudagraph_skip_count == 0  # forward, backward
    assert _recorded_nodes() == 2
    assert replays[0] >= 2 * (steps - 3)
    assert no_compile_while_capturing == []


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_input_mutation_is_applied_after_each_replay(replays):
    def fn(x, acc):
        acc.add_(x)  # AOTAutograd applies it after the graph: the graph itself is captured
        return (acc * 2).sum(0)

    f = torch.compile(fn, backend="tilefuse", mode="reduce-overhead")
    acc, acc_ref = torch.zeros(4, 16, device="cuda"), torch.zeros(4, 16, device="cuda")
    for _ in range(12):
        x = torch.randn(4, 16, device="cuda")
        torch.testing.assert_close(f(x, acc), fn(x, acc_ref))
        torch.testing.assert_close(acc, acc_ref)
    assert metrics.cudagraph_graph_count == 1 and metrics.cudagraph_skip_count == 0
    assert replays[0] >= 12 - 3


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_changing_batch_sizes_record_once_per_size(replays):
    model = _mlp().eval()
    f = torch.compile(model, backend="tilefuse", mode="reduce-overhead", dynamic=True)
    sizes = (2, 4, 8)
    with torch.no_grad():
        for rnd in range(8):
            for b in sizes:
                x = torch.randn(b, 64, device="cuda")
                torch.testing.assert_close(f(x), model(x), atol=1e-4, rtol=1e-4)
            if rnd == 3:
                nodes, before = _recorded_nodes(), replays[0]
    assert metrics.cudagraph_graph_count == 1
    assert len(_tree_manager().ids_to_funcs) == len(sizes)  # one recorded function per size
    assert nodes == len(sizes) and _recorded_nodes() == nodes  # no recording after the first rounds
    assert replays[0] - before == 4 * len(sizes)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_mark_step_begin_starts_a_new_step_for_a_forward_without_backward():
    model = _mlp()  # parameters require grad: a training forward, its backward never run
    f = torch.compile(model, backend="tilefuse", mode="reduce-overhead")
    for _ in range(12):
        torch.compiler.cudagraph_mark_step_begin()
        x = torch.randn(8, 64, device="cuda")
        out = f(x)
        torch.testing.assert_close(out.detach(), model(x).detach(), atol=1e-4, rtol=1e-4)
    # without the mark the trees would record a child per call (outputs pending a backward)
    assert _recorded_nodes() == 1


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_reading_an_overwritten_output_raises_torchs_error():
    """Outputs are valid until the graph runs again. The trees give an output of their warm-up
    or recording an error once the next call has taken its memory back; replays write into the
    same output tensors."""
    f = torch.compile(lambda x: x * 2 + 1, backend="tilefuse", mode="reduce-overhead")
    x = torch.randn(64, device="cuda")
    f(x)  # outside the trees (compiles, autotunes)
    a = f(x)  # the trees' warm-up
    b = f(x + 1)  # the recording: a new step, the warm-up's outputs given back
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        print(a + 1)
    c = f(x)  # the first replay: the recording's outputs are overwritten
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        print(b + 1)
    torch.testing.assert_close(c, x * 2 + 1)
    d = f(x + 3).clone()  # cloned: valid after later replays
    f(x)
    torch.testing.assert_close(d, (x + 3) * 2 + 1)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_random_ops_draw_anew_at_each_replay(replays):
    f = torch.compile(lambda x: F.dropout(x, 0.5, training=True), backend="tilefuse", mode="reduce-overhead")
    x = torch.ones(1 << 14, device="cuda")
    masks = []
    for _ in range(8):
        out = f(x)
        masks.append(out != 0)
        assert set(out.unique().tolist()) <= {0.0, 2.0}
    assert metrics.cudagraph_graph_count == 1 and replays[0] >= 5
    assert not torch.equal(masks[-1], masks[-2]) and not torch.equal(masks[-2], masks[-3])
    assert 0.45 < masks[-1].float().mean().item() < 0.55


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_memory_is_flat_over_100_training_steps():
    torch.manual_seed(0)
    model = _mlp(256, 512, 64)
    f = torch.compile(model, backend="tilefuse", mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # 256 rows: each activation is 512 KiB, so one step's leak is far above the slack below
    x, y = torch.randn(256, 256, device="cuda"), torch.randn(256, 64, device="cuda")
    at = {}
    for step in range(1, 101):
        opt.zero_grad(set_to_none=True)
        F.mse_loss(f(x), y).backward()
        opt.step()
        if step in (10, 100):
            torch.cuda.synchronize()
            at[step] = torch.cuda.memory_allocated()
    assert abs(at[100] - at[10]) <= 64 << 10, at
    assert metrics.cudagraph_graph_count == 2 and _recorded_nodes() == 2


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_a_cpu_scalar_input_keeps_a_cuda_graph_out_of_the_trees_with_one_warning(caplog):
    f = torch.compile(lambda x, s: x * s, backend="tilefuse", mode="reduce-overhead")
    x = torch.randn(16, device="cuda")
    with caplog.at_level(logging.INFO, logger="tilefuse"):
        for k in range(5):
            s = torch.tensor(float(k), device="cpu")
            torch.testing.assert_close(f(x, s), x * k)
    lines = [r for r in caplog.records if "runs without CUDA graphs" in r.getMessage()]
    assert len(lines) == 1 and "CPU tensors" in lines[0].getMessage() and lines[0].levelno == logging.WARNING
    assert metrics.cudagraph_graph_count == 0 and _recorded_nodes() == 0
