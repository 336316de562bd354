"""OpInfo sweep, CI subset: representative ops of torch's OpInfo database compiled with tilefuse.

Each op runs through ``tilefuse.testing.opinfo.run_op``: its first two small sample inputs in float32,
bfloat16/float16, an integer type and bool (where the op supports them), compiled with tilefuse
(``fallback_on_error=False``) and compared with eager using the OpInfo's tolerances. Every op here
must match eager on every sample, natively or through a FallbackKernel; the ops marked "native" must
not fall back at all. The whole database runs with ``scripts/op_coverage.py`` (``docs/op_coverage.md``).
The module runs on the CPU through Triton's interpreter, and on CUDA (``gpu`` marker) with
``TRITON_INTERPRET=0`` on a GPU machine.

Every op runs compiled with ``dynamic=False``, and all but ``STATIC_ONLY`` (elementwise ops that
add nothing a kept one does not) again with ``dynamic=True`` (symbolic sizes, the samples of a dtype
sharing one compiled function), judged by the same rules.

The module's own checks of the judge (``test_sweep_*``) make sure a wrong lowering, an internal
error and a missing lowering are reported as fail / fail / fallback, in both modes, so a green
subset means something.
"""

from __future__ import annotations

import pytest
import torch
from _tf_testutil import DEVICE, GPU_MARKS

from tilefuse.testing import opinfo

# the CPU through Triton's interpreter (CI), or CUDA when TRITON_INTERPRET=0 on a GPU machine
pytestmark = GPU_MARKS

# name -> expected: "native" (must lower natively) or "ok" (native or fallback both accepted)
CI_OPS = {
    # elementwise unary
    "abs": "native",
    "neg": "native",
    "exp": "native",
    "log": "native",
    "sqrt": "native",
    "rsqrt": "native",
    "sigmoid": "native",
    "tanh": "native",
    "sin": "native",
    "erf": "native",
    "floor": "native",
    "reciprocal": "native",
    "sign": "native",
    "nn.functional.relu": "native",
    "nn.functional.gelu": "native",
    "nn.functional.silu": "native",
    "bitwise_not": "native",
    "isnan": "native",
    # elementwise binary / ternary
    "add": "native",
    "sub": "native",
    "mul": "native",
    "div.no_rounding_mode": "native",
    "div.floor_rounding": "native",
    "pow": "ok",
    "maximum": "native",
    "eq": "native",
    "lt": "native",
    "remainder": "native",
    "logical_and": "native",
    "bitwise_and": "native",
    "clamp": "native",
    "where": "native",
    "masked_fill": "native",
    "addcmul": "native",
    "lerp": "native",
    # reductions
    "sum": "native",
    "mean": "native",
    "amax": "native",
    "argmax": "native",
    "prod": "native",
    "var": "native",
    "std": "native",
    "any": "native",
    "max.reduction_with_dim": "native",
    "logsumexp": "native",
    # views and indexing
    "reshape": "native",
    "permute": "native",
    "transpose": "native",
    "expand": "native",
    "squeeze": "native",
    "flip": "native",
    "narrow": "native",
    "index_select": "native",
    "__getitem__": "ok",
    "gather": "native",
    "scatter_add": "ok",
    "take_along_dim": "ok",
    "scatter_reduce.amax": "native",
    "scatter_reduce.prod": "native",
    "scatter_reduce.mean": "ok",
    "scatter": "ok",
    "index_put": "ok",
    # concatenation and padding
    "cat": "native",
    "stack": "native",
    "split": "native",
    "chunk": "native",
    "repeat": "native",
    "nn.functional.pad.constant": "native",
    # composites of models
    "softmax": "native",
    "log_softmax": "native",
    "nn.functional.layer_norm": "native",
    "nn.functional.embedding": "native",
    "cumsum": "native",
    "logcumsumexp": "native",
    "nn.functional.cross_entropy": "ok",
    "nn.functional.max_pool2d": "ok",
    "tril": "ok",
    "mm": "native",
    "sort": "ok",
}

# ops of the subset that fail today, with the reason (none at the moment)
XFAIL: dict[str, str] = {}

# Ops the dynamic=True half leaves out, to keep the module's time: elementwise ops whose kernels
# differ from a kept one's only in the math (symbolic sizes reach them the same way: one flat
# index over the broadcast shape), and near-duplicates of kept views, reductions and scans. What
# dynamic shapes change — index arithmetic of views and indexing, reduction lengths, scatter
# targets, cat offsets, pooling windows, norms — is all kept (every op of the subset runs static).
STATIC_ONLY = {
    "abs",
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sin",
    "erf",
    "floor",
    "reciprocal",
    "sign",
    "nn.functional.relu",
    "nn.functional.silu",
    "bitwise_not",
    "isnan",
    "sub",
    "eq",
    "logical_and",
    "addcmul",
    "std",
    "transpose",
    "chunk",
    "logcumsumexp",
}

# dynamic=True expectations that differ from CI_OPS'
DYNAMIC_EXPECTED = {
    # the gather's work bound (numel x index length) needs static sizes; aten's kernel runs
    "scatter_reduce.prod": "ok",
}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(opinfo, "DEVICE", DEVICE)  # where the samples are made
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


MODES = {"static": False, "dynamic": True}


CASES = [(name, "static") for name in sorted(CI_OPS)] + [
    (name, "dynamic") for name in sorted(CI_OPS) if name not in STATIC_ONLY
]


@pytest.mark.parametrize("name, mode", CASES)
def test_opinfo(name, mode):
    if name in XFAIL:
        pytest.xfail(XFAIL[name])
    res = opinfo.run_op(opinfo.find_op(name), max_samples=2, dynamic=MODES[mode])
    assert res.samples > 0, f"{name}: no sample compared ({res.note})"
    assert res.dynamic == MODES[mode]
    assert res.status in ("native", "fallback"), f"{name}: {res.status}: {res.note}"
    expected = DYNAMIC_EXPECTED.get(name, CI_OPS[name]) if MODES[mode] else CI_OPS[name]
    if expected == "native":
        assert res.status == "native", f"{name} fell back: {res.fallback_ops}"


# ------------------------------------------------------------------------------ the judge itself


def _patched_lowering(monkeypatch, op, fn):
    from tilefuse.lowering import lowerings

    monkeypatch.setitem(lowerings, op, fn)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_sweep_reports_a_wrong_result_as_fail(monkeypatch, mode):
    """A lowering computing the wrong function (cos for sin) must be reported as a mismatch."""
    from tilefuse.lowering import lowerings

    aten = torch.ops.aten
    _patched_lowering(monkeypatch, aten.sin.default, lowerings[aten.cos.default])
    res = opinfo.run_op(opinfo.find_op("sin"), max_samples=1, dtypes=[torch.float32], dynamic=MODES[mode])
    assert res.status == "fail" and "mismatch" in res.note, res


@pytest.mark.parametrize("mode", sorted(MODES))
def test_sweep_reports_an_internal_error_as_fail(monkeypatch, mode):
    """A lowering that raises (not NotImplementedError) must fail the op, not fall back silently."""

    def broken(*args, **kwargs):
        raise RuntimeError("broken lowering")

    _patched_lowering(monkeypatch, torch.ops.aten.neg.default, broken)
    res = opinfo.run_op(opinfo.find_op("neg"), max_samples=1, dtypes=[torch.float32], dynamic=MODES[mode])
    assert res.status == "fail" and "broken lowering" in res.note, res


@pytest.mark.parametrize("mode", sorted(MODES))
def test_sweep_reports_a_missing_lowering_as_fallback(monkeypatch, mode):
    """An op whose lowering declines (NotImplementedError) runs as a FallbackKernel: 'fallback'."""

    def declines(*args, **kwargs):
        raise NotImplementedError("declined")

    _patched_lowering(monkeypatch, torch.ops.aten.neg.default, declines)
    res = opinfo.run_op(opinfo.find_op("neg"), max_samples=1, dtypes=[torch.float32], dynamic=MODES[mode])
    assert res.status == "fallback" and res.fallback_ops == ["aten.neg.default"], res


def _neg_right_only_up_to_the_compiled_length(x):
    """A wrong lowering of neg for 1-d tensors: right for the first ``hint`` elements, where
    ``hint`` is the length of the example the graph was compiled for, 0 past them (a size baked
    into the kernel without a guard)."""
    from tilefuse.ir import graph_context as G
    from tilefuse.ir.nodes import Pointwise
    from tilefuse.virtualized import ops

    (n,) = x.get_size()
    hint = G.graph().sizevars.hint(n)
    load = x.make_loader()

    def inner(idx):
        inside = ops.lt(ops.index_expr(idx[0], torch.int64), ops.constant(hint, torch.int64))
        return ops.where(inside, ops.neg(load(idx)), ops.constant(0.0, x.get_dtype()))

    return Pointwise.create(x.get_device(), x.get_dtype(), inner, [n])


def test_dynamic_sweep_runs_a_later_sample_through_the_earlier_graph(monkeypatch):
    """Under dynamic=True a sample of other sizes that passes a graph's guards runs that graph, so a
    lowering that bakes the compiled size into the kernel is a fail there (the note says the graph
    was compiled for an earlier sample), while the static sweep, compiling every sample afresh,
    cannot see it."""
    from torch.testing._internal.opinfo.core import SampleInput

    def two_lengths(op, dtype, max_samples=opinfo.MAX_SAMPLES, max_numel=opinfo.MAX_SAMPLE_NUMEL):
        torch.manual_seed(0)
        for n in (5, 7):
            yield SampleInput(torch.randn(n, dtype=dtype, device=opinfo.DEVICE))

    monkeypatch.setattr(opinfo, "iter_samples", two_lengths)
    _patched_lowering(monkeypatch, torch.ops.aten.neg.default, _neg_right_only_up_to_the_compiled_length)
    neg = opinfo.find_op("neg")
    static = opinfo.run_op(neg, dtypes=[torch.float32])
    assert static.status == "native" and static.samples == 2 and static.reused == 0, static
    dynamic = opinfo.run_op(neg, dtypes=[torch.float32], dynamic=True)
    assert dynamic.status == "fail" and dynamic.samples == 2 and dynamic.reused == 1, dynamic
    assert "mismatch" in dynamic.note and "earlier sample's sizes" in dynamic.note, dynamic


@torch.library.custom_op("tilefuse_test::no_fake_kernel", mutates_args=())
def _no_fake_kernel(x: torch.Tensor) -> torch.Tensor:
    """An op that runs eagerly but cannot be traced: its fake kernel raises."""
    return x.neg()


@_no_fake_kernel.register_fake
def _(x):
    raise RuntimeError("no fake kernel")


def test_dynamic_sweep_skips_what_aot_eager_cannot_compile_either(monkeypatch):
    """An error every backend hits under dynamic=True (here: tracing an op whose fake kernel raises)
    is a skip, as in the static sweep; the check runs aot_eager with dynamic=True."""
    backends = []
    real = opinfo._compiled

    def spy(op_fn, backend, dynamic=False):
        backends.append((backend, dynamic))
        return real(op_fn, backend, dynamic)

    monkeypatch.setattr(opinfo, "_compiled", spy)
    neg = opinfo.find_op("neg")
    monkeypatch.setattr(neg, "op", _no_fake_kernel)
    res = opinfo.run_op(neg, max_samples=1, dtypes=[torch.float32], dynamic=True)
    assert res.status == "skip" and "cannot compile it" in res.note, res
    assert backends == [("tilefuse", True), ("aot_eager", True)]


def test_sweep_skips_random_ops():
    """A sampling op's eager result changes between runs: it is skipped, not compared."""
    res = opinfo.run_op(opinfo.find_op("bernoulli"), max_samples=1)
    assert res.status == "skip" and res.samples == 0, res


def test_sweep_tolerances_follow_the_opinfo():
    """The OpInfo's toleranceOverride for Inductor's test raises the defaults for its dtype."""
    conv3d = opinfo.find_op("nn.functional.conv3d")  # tol(atol=5e-3, rtol=1e-3) for float32
    assert opinfo.tolerances(conv3d, torch.float32) == (5e-3, 1e-3)
    assert opinfo.tolerances(opinfo.find_op("add"), torch.float32) == (1e-5, 1.3e-6)  # the defaults
    assert opinfo.tolerances(opinfo.find_op("add"), torch.int64) == (0.0, 0.0)


def test_family_classification():
    """linalg / fft / special / sparse are recognised (they are excluded from the native share)."""
    fam = {n: opinfo.family(opinfo.find_op(n)) for n in ("linalg.det", "fft.fft", "special.i0e", "mm", "add", "sum")}
    assert fam == {
        "linalg.det": "linalg",
        "fft.fft": "fft",
        "special.i0e": "special",
        "mm": "linalg",
        "add": "binary",
        "sum": "reduction",
    }


# ------------------------------------------------------------------------- scripts/op_coverage.py


@pytest.fixture
def cov(monkeypatch):
    """scripts/op_coverage.py imported as ``op_coverage`` (the spawned workers import it by that
    name: multiprocessing hands them this process's ``sys.path``)."""
    import importlib
    import pathlib

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
    return importlib.import_module("op_coverage")


def _verdict(name, status, dynamic, **kw):
    base = {"name": name, "family": "unary", "status": status, "note": "", "dtypes": ["float32"], "samples": 1}
    return {**base, "fallback_ops": [], "seconds": 1.0, "device": "cpu", "dynamic": dynamic, "reused": 0, **kw}


def test_op_coverage_table_names_its_mode_and_rows_judged_in_another(cov):
    """The table's header says dynamic=True/False; rows sorted by name; a row judged in the other
    mode says so; a dynamic table counts the samples run by a graph compiled for other sizes."""
    meta = {"torch": "t", "triton": "r", "date": "d", "max_samples": 3, "device": "cpu", "seconds": 3.0}
    rows = [_verdict("neg", "native", True, reused=2), _verdict("abs", "fail", True), _verdict("sin", "native", False)]
    md = cov.render(rows, {**meta, "dynamic": True, "run": (3, 12.0, 4)})
    assert md.startswith("# Op coverage: torch's OpInfo database compiled with tilefuse, dynamic=True\n")
    assert 'backend="tilefuse", dynamic=True)' in md and "with 4 worker(s)" in md
    assert "| samples run by a graph compiled for other sizes | 2 |" in md
    table = md.split("## Ops", 1)[1]
    assert table.index("`abs`") < table.index("`neg`") < table.index("`sin`")
    assert "judged with dynamic=False" in table.split("`sin`", 1)[1].splitlines()[0]
    static = cov.render(rows[2:], {**meta, "dynamic": False})
    assert "compiled with tilefuse, dynamic=False" in static and "judged with" not in static
    assert "other sizes" not in static


def test_op_coverage_parallel_workers(cov, tmp_path):
    """Two workers at once, each verdict appended as it arrives: an op past its time limit is a fail
    (its worker ended) while the other worker goes on with the rest."""
    import json

    jsonl = tmp_path / "v.jsonl"
    slow = "nn.functional.interpolate.bicubic"  # seconds of compiling per sample
    names = [slow, "bernoulli", "empty"]  # random / uninitialized: judged at once (skip)
    cov.sweep(names, dict.fromkeys(names, "x"), str(jsonl), 2.0, 3, 60, workers=2, dynamic=True)
    got = {r["name"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    assert sorted(got) == sorted(names) and all(r["dynamic"] for r in got.values()), got
    assert got[slow]["status"] == "fail" and got[slow]["note"].startswith("timeout"), got[slow]
    assert got["bernoulli"]["status"] == got["empty"]["status"] == "skip", got
