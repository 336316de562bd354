"""The graph-level compile cache (``tilefuse.runtime.graph_cache``, issue 6): the same graph with the
same input metadata reuses its compiled module, in this process and from disk in another one;
different inputs, options, constants or code miss; guards on symbolic sizes are checked and
replayed; a broken cache file is a miss, never an error."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import sympy
import torch
import torch.nn.functional as F

import tilefuse  # noqa: F401
from _tf_testutil import DEVICE, GPU_MARKS
from tilefuse import config, metrics, runtime
from tilefuse.runtime import cache as rt_cache
from tilefuse.runtime import graph_cache

pytestmark = GPU_MARKS


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Each test: an empty cache directory, the cache on, strict errors."""
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path / "tfcache"))
    graph_cache.clear()
    torch._dynamo.reset()
    metrics.reset()
    with config.patch(graph_cache=True, fallback_on_error=False):
        yield
    graph_cache.clear()
    torch._dynamo.reset()


def _fresh():
    """Forget Dynamo's compiled frames (so the next call compiles again) and the counters."""
    torch._dynamo.reset()
    metrics.reset()


def _f(x, y):
    return torch.sin(x * y) + y.sum(-1, keepdim=True), torch.argsort(x, -1)  # argsort: a fallback kernel


def test_same_graph_hits_in_process_and_replays_counters():
    x, y = torch.randn(6, 40, device=DEVICE), torch.randn(6, 40, device=DEVICE)
    want = _f(x, y)
    got1 = torch.compile(_f, backend="tilefuse")(x, y)
    first = metrics.snapshot()
    assert first["generated_graph_count"] == 1 and first["graph_cache_hits"] == 0
    assert first["fallback_kernel_count"] >= 1
    # the key and the (missed) lookup timed apart from lowering
    assert {"cache_key", "cache_lookup", "lower", "codegen", "cache_store", "first_run"} <= set(metrics.phase_seconds)
    assert all(v >= 0 for v in metrics.phase_seconds.values()), metrics.phase_seconds

    _fresh()
    got2 = torch.compile(_f, backend="tilefuse")(x, y)
    assert metrics.graph_cache_hits == 1
    assert metrics.generated_graph_count == 0  # nothing lowered or generated
    assert {"cache_key", "cache_lookup"} <= set(metrics.phase_seconds), metrics.phase_seconds
    assert not {"lower", "schedule", "codegen"} & set(metrics.phase_seconds), metrics.phase_seconds
    for k in ("generated_kernel_count", "fallback_kernel_count", "extern_kernel_count"):
        assert getattr(metrics, k) == first[k], k
    for got in (got1, got2):
        torch.testing.assert_close(got[0], want[0])
        assert torch.equal(got[1], want[1])


def test_a_hit_names_the_fallback_ops_as_a_compile_does(caplog):
    """The fallback ops are logged ("no lowering for ...", what the demo lists) on a hit too."""
    x, y = torch.randn(6, 40, device=DEVICE), torch.randn(6, 40, device=DEVICE)
    with caplog.at_level("DEBUG", logger="tilefuse"):
        torch.compile(_f, backend="tilefuse")(x, y)
        compiled = [r.getMessage() for r in caplog.records if "no lowering for" in r.getMessage()]
        caplog.clear()
        _fresh()
        torch.compile(_f, backend="tilefuse")(x, y)
        hit = [r.getMessage() for r in caplog.records if "no lowering for" in r.getMessage()]
    assert metrics.graph_cache_hits == 1
    assert compiled and any("argsort" in m or "sort" in m for m in compiled)
    assert [m.split(";")[0] for m in hit] == [m.split(";")[0] for m in compiled]


def test_a_damaged_module_file_is_rewritten(tmp_path, monkeypatch):
    """A generated module file damaged outside tilefuse is rewritten from the source, not imported."""
    import tilefuse.runtime as R

    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path))
    src = "X = 41 + 1\n"
    R.load_module(src, {})
    (path,) = list(tmp_path.glob("tf_*.py"))
    path.write_text("def broken(((\n")
    assert R.load_module(src, {}).X == 42
    assert path.read_text() == src


def test_cache_dir_that_is_a_file_or_blank(tmp_path, monkeypatch):
    import tilefuse.runtime as R

    f = tmp_path / "not_a_dir"
    f.write_text("x")
    with pytest.raises(RuntimeError, match="is not a directory; point TILEFUSE_CACHE_DIR"):
        R.make_cache_dir(str(f))
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "   ")
    assert rt_cache._cache_dir_from_env().strip() and "tilefuse_" in rt_cache._cache_dir_from_env()
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path / "c"))
    assert rt_cache._cache_dir_from_env() == str(tmp_path / "c")


def test_unusable_cache_dir_falls_back_to_a_private_one(tmp_path, monkeypatch):
    """TILEFUSE_CACHE_DIR naming a file (or a folder under a file), or a default
    ``<tmp>/tilefuse_<uid>`` writable by others: one warning saying why, and a private temporary
    directory serves the process (compiling goes on, results right)."""
    import tilefuse.runtime as R

    f = tmp_path / "afile"
    f.write_text("x")
    for bad in (str(f), str(f / "sub")):
        monkeypatch.setattr(rt_cache, "_CACHE_DIR", bad)
        with pytest.warns(RuntimeWarning, match="is not a directory; point TILEFUSE_CACHE_DIR"):
            d = R.cache_dir()
        assert d != bad and os.path.isdir(d) and "tilefuse_private_" in d
        assert R.cache_dir() == d  # checked once
    # any other reason the OS refuses the folder: a name too long, a path in a pseudo file system
    for bad in (str(tmp_path / ("x" * 300)), "/proc/tilefuse_no_such_dir"):
        if bad.startswith("/proc") and not os.path.isdir("/proc"):
            continue
        monkeypatch.setattr(rt_cache, "_CACHE_DIR", bad)
        with pytest.warns(RuntimeWarning, match="cannot create cache directory"):
            d = R.cache_dir()
        assert d != bad and os.path.isdir(d) and "tilefuse_private_" in d
    shared = tmp_path / "tilefuse_shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(rt_cache, "_default_cache_dir", lambda: str(shared))
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(shared))
    with pytest.warns(RuntimeWarning, match="writable by others"):
        assert R.cache_dir() != str(shared)
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path / "tilefuse_mine"))  # created private: fine
    monkeypatch.setattr(rt_cache, "_default_cache_dir", lambda: str(tmp_path / "tilefuse_mine"))
    assert R.cache_dir() == str(tmp_path / "tilefuse_mine")
    assert (os.stat(tmp_path / "tilefuse_mine").st_mode & 0o777) == 0o700
    x, y = torch.randn(3, 8, device=DEVICE), torch.randn(3, 8, device=DEVICE)
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(f))
    with pytest.warns(RuntimeWarning, match="private") as rec:
        got = torch.compile(_f, backend="tilefuse")(x, y)
    torch.testing.assert_close(got[0], _f(x, y)[0])
    # pointed at the user's line, not at tilefuse's own file
    assert [os.path.abspath(w.filename) for w in rec if "private" in str(w.message)] == [os.path.abspath(__file__)]


def test_the_private_fallback_cache_dir_is_removed_at_exit(tmp_path):
    (tmp_path / "afile").write_text("x")
    code = (
        "import warnings; warnings.simplefilter('ignore'); import tilefuse.runtime as R; "
        "d = R.cache_dir(); open(d + '/x', 'w').write('y'); print(d)"
    )
    env = dict(os.environ, TILEFUSE_CACHE_DIR=str(tmp_path / "afile"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    private = out.stdout.strip().splitlines()[-1]
    assert "tilefuse_private_" in private and not os.path.exists(private)


def test_a_debug_dir_that_cannot_be_written_is_named_and_keeps_the_cache_entry(tmp_path):
    """A debug_dir under a file fails the compile with an error naming debug_dir (raised here:
    fallback_on_error is off), and the graph's cache entry stays on disk."""
    from tilefuse.runtime import DebugDirError

    x, y = torch.randn(3, 8, device=DEVICE), torch.randn(3, 8, device=DEVICE)
    torch.compile(_f, backend="tilefuse")(x, y)
    entries = list((tmp_path / "tfcache" / "graphs").glob("*.pkl"))  # (and its launch records, on a GPU)
    assert len([p for p in entries if not p.name.endswith(".launch.pkl")]) == 1
    graph_cache.clear()  # a disk hit next
    _fresh()
    (tmp_path / "afile").write_text("x")
    with config.patch(debug_dir=str(tmp_path / "afile" / "sub")):
        with pytest.raises(Exception, match="debug_dir") as ei:
            torch.compile(_f, backend="tilefuse")(x, y)
    # (Dynamo wraps a backend's exception in BackendCompilerFailed)
    assert isinstance(getattr(ei.value, "inner_exception", ei.value), DebugDirError), ei.value
    assert all(p.exists() for p in entries)


def test_different_shapes_dtypes_and_options_miss():
    cf = torch.compile(_f, backend="tilefuse")
    cf(torch.randn(6, 40, device=DEVICE), torch.randn(6, 40, device=DEVICE))
    keys = set(graph_cache._memory)
    for x, y, opts in [
        (torch.randn(6, 41), torch.randn(6, 41), {}),  # shape
        (torch.randn(6, 40, dtype=torch.float64), torch.randn(6, 40, dtype=torch.float64), {}),  # dtype
        (torch.randn(40, 6).t(), torch.randn(6, 40), {}),  # strides
        (torch.randn(6, 40), torch.randn(6, 40), {"max_inline_ops": 7}),  # an option
    ]:
        x, y = x.to(DEVICE), y.to(DEVICE)
        _fresh()
        got = torch.compile(_f, backend="tilefuse", options=opts)(x, y)
        assert metrics.graph_cache_hits == 0 and metrics.generated_graph_count == 1
        torch.testing.assert_close(got[0], _f(x, y)[0])
    assert len(graph_cache._memory) == len(keys) + 4


def test_the_default_dtype_is_part_of_the_key():
    """``i / 3`` of an integer tensor and ``torch.ones`` take torch's default dtype, which the aten
    graph leaves implicit: after ``torch.set_default_dtype`` the same graph text must compile
    again (a cache hit would give float32 values where eager gives float64), and going back hits
    the first entry."""

    def f(i):
        return i / 3 + torch.ones(3, device=i.device) * 0.1

    i = torch.arange(3, device=DEVICE)
    prev = torch.get_default_dtype()
    try:
        for k, dt in enumerate((torch.float32, torch.float64, torch.float32)):
            torch.set_default_dtype(dt)
            _fresh()
            got, want = torch.compile(f, backend="tilefuse")(i), f(i)
            assert got.dtype == want.dtype == dt
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert metrics.graph_cache_hits == (1 if k == 2 else 0), (k, dt)
    finally:
        torch.set_default_dtype(prev)


def test_the_interpreter_switch_is_part_of_the_key(monkeypatch):
    """A module made for Triton's interpreter does not load without it (and the other way round):
    the two are different entries, so a process of the other kind misses instead of discarding
    the entry."""
    import triton

    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    x = torch.randn(3, device=DEVICE)
    keys = set()
    for on in (True, False):
        monkeypatch.setattr(triton.knobs.runtime, "interpret", on)
        keys.add(graph_cache.graph_key(gm, [x], None, {}))
    assert len(keys) == 2


def test_the_current_cuda_device_is_part_of_the_key(monkeypatch):
    """``torch.ones(3, device="cuda")`` names no index: the lowering takes the current device and
    the module names it, so a graph compiled under another current device must miss."""
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    x = torch.randn(3, device=DEVICE)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    keys = []
    for dev in (0, 1, 0):
        monkeypatch.setattr(torch.cuda, "current_device", lambda dev=dev: dev)
        keys.append(graph_cache.graph_key(gm, [x], None, {}))
    assert keys[0] != keys[1] and keys[0] == keys[2]


def test_the_sign_of_a_nan_constant_is_part_of_the_key():
    """``repr`` prints ``-nan`` as ``nan``: two graphs differing only in a NaN constant's sign
    must not share an entry, and each gives eager's sign bit."""
    neg = math.copysign(math.nan, -1.0)
    x = torch.randn(4, device=DEVICE)
    keys = set()
    for c in (neg, math.nan, neg):
        _fresh()
        f = lambda t, c=c: torch.signbit(torch.full_like(t, c))  # noqa: E731
        got = torch.compile(lambda t: torch.signbit(torch.full_like(t, c)), backend="tilefuse")(x)
        assert torch.equal(got, f(x)) and bool(got[0]) == (c is neg)
        keys.update(graph_cache._memory)
    assert len(keys) == 2 and metrics.graph_cache_hits == 1  # the third: the first one's entry


def test_graphs_that_differ_in_a_scalar_argument_or_an_op_miss():
    x = torch.randn(4, 9, device=DEVICE)
    fns = [lambda t: t * 2.0 + 1, lambda t: t * 2.5 + 1, lambda t: t * 2.0 - 1, lambda t: (t * 2.0 + 1).sum(1)]
    for i, f in enumerate(fns):
        _fresh()
        torch.testing.assert_close(torch.compile(f, backend="tilefuse")(x), f(x))
        assert metrics.graph_cache_hits == 0, i
    _fresh()
    torch.testing.assert_close(torch.compile(lambda t: t * 2.5 + 1, backend="tilefuse")(x), x * 2.5 + 1)
    assert metrics.graph_cache_hits == 1  # the same graph as the second one: a hit


def test_graph_key_reads_nodes_not_generated_code():
    from torch.fx._lazy_graph_module import _LazyGraphModule, _make_graph_module, _use_lazy_graph_module

    def f(x):
        return torch.ops.aten.mul.Tensor(x, 3.0).sin()

    gm = torch.fx.symbolic_trace(f)
    with _use_lazy_graph_module(True):  # AOTAutograd's kind: Python code generated on demand
        lazy = _make_graph_module(gm, gm.graph)
    assert isinstance(lazy, _LazyGraphModule) and lazy._needs_recompile()
    x = torch.randn(3)
    key = graph_cache.graph_key(lazy, [x], None, {})
    assert lazy._needs_recompile()  # the key did not generate (and exec) the graph's code
    text = graph_cache._graph_text(lazy.graph)
    assert "aten.mul.Tensor" in text and "3.0" in text and "sin" in text
    assert key == graph_cache.graph_key(torch.fx.symbolic_trace(f), [x], None, {})  # the same nodes
    other = torch.fx.symbolic_trace(lambda x: torch.ops.aten.mul.Tensor(x, 4.0).sin())
    assert key != graph_cache.graph_key(other, [x], None, {})


def test_closures_with_one_name_never_share_an_entry():
    """Two Python-function targets with the same module and name (closures of one factory) are
    different functions: such a graph is compiled uncached, never handed the other's module."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from tilefuse.backend import compile_graph

    def make(c):
        def scale(t):
            return t * c

        return scale

    x = torch.rand(7, device=DEVICE)
    for c in (2.0, 3.0):
        g = torch.fx.Graph()
        inp = g.placeholder("x")
        g.output((g.call_function(make(c), (inp,)),))
        gm = torch.fx.GraphModule({}, g)
        FakeTensorProp(gm).propagate(x)  # meta values, as AOTAutograd's graphs carry
        metrics.reset()
        got = compile_graph(gm, [x])([x.clone()])
        torch.testing.assert_close(got[0], x * c)
        assert metrics.graph_cache_hits == 0
    with pytest.raises(graph_cache.Uncacheable, match="not a module-level function"):
        graph_cache.graph_key(gm, [x], None, {})


def test_lowering_switches_that_change_code_are_in_the_key(monkeypatch):
    from tilefuse import config

    x, w = torch.randn(10, 13, device=DEVICE), torch.randn(13, 97, device=DEVICE)

    def f(x, w):
        return torch.relu(x @ w)

    torch.compile(f, backend="tilefuse")(x, w)
    _fresh()
    monkeypatch.setattr(config, "PAD_MM_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(config, "PAD_MM_MIN_MACS", 0)
    got = torch.compile(f, backend="tilefuse")(x, w)
    assert metrics.graph_cache_hits == 0  # padding now applies: compiled anew, not the unpadded module
    torch.testing.assert_close(got, f(x, w), atol=1e-4, rtol=1e-4)


def test_options_that_do_not_change_code_share_entries():
    x, y = torch.randn(3, 8, device=DEVICE), torch.randn(3, 8, device=DEVICE)
    torch.compile(_f, backend="tilefuse")(x, y)
    _fresh()
    torch.compile(_f, backend="tilefuse", options={"compile_workers": 1, "debug_dir": None})(x, y)
    assert metrics.graph_cache_hits == 1


def test_tensor_constants_are_part_of_the_key():
    def make(c):
        def f(x):
            return x * torch.tensor(c, device=x.device) + 1

        return f

    x = torch.randn(5, 3, device=DEVICE)
    for c in ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]):
        _fresh()
        f = make(c)
        torch.testing.assert_close(torch.compile(f, backend="tilefuse")(x), f(x))
        assert metrics.graph_cache_hits == 0
    _fresh()
    f = make([4.0, 5.0, 6.0])
    torch.testing.assert_close(torch.compile(f, backend="tilefuse")(x), f(x))
    assert metrics.graph_cache_hits == 1


def test_training_forward_and_backward_hit():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)
    ).to(DEVICE)
    x = torch.randn(8, 16, device=DEVICE)

    def grads(m):
        m.zero_grad()
        out = m(x)
        out.square().mean().backward()
        return out, [p.grad.clone() for p in m.parameters()]

    want_out, want_g = grads(model)
    for hits in (0, 2):
        _fresh()
        out, g = grads(torch.compile(model, backend="tilefuse"))
        assert metrics.graph_cache_hits == hits
        torch.testing.assert_close(out, want_out, atol=1e-5, rtol=1e-5)
        for a, b in zip(g, want_g):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_dynamic_graph_hits_for_other_sizes():
    def f(x):
        return F.softmax(x, -1) * x.shape[0]

    torch.compile(f, backend="tilefuse", dynamic=True)(torch.randn(5, 7, device=DEVICE))
    assert metrics.symbolic_graph_count == 1
    _fresh()
    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for shape in [(11, 3), (2, 130), (5, 7)]:
        x = torch.randn(*shape, device=DEVICE)
        torch.testing.assert_close(cf(x), f(x))
    assert metrics.graph_cache_hits == 1 and metrics.generated_graph_count == 0


def _env_with(hints: dict):
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    syms = {}
    for name, v in hints.items():
        s = env.create_symbol(v, source=torch._dynamo.source.ConstantSource(name))
        syms[s.name] = s
    return env, syms


def test_replay_guards_checks_hints_and_records_guards():
    env, syms = _env_with({"a": 50, "b": 7})
    s0 = next(s for s in syms.values() if env.backed_var_to_val[s] == 50)
    s1 = next(s for s in syms.values() if env.backed_var_to_val[s] == 7)
    # guards pickled elsewhere name fresh symbols: matched by name
    fresh0 = sympy.Symbol(s0.name, integer=True, positive=True)
    n = len(env.guards)
    assert graph_cache.replay_guards([sympy.Lt(fresh0, 100), sympy.Ne(s0, s1)], env)
    assert len(env.guards) == n + 2  # recorded: Dynamo will guard on them
    # false at the hints: a miss, nothing recorded
    env2, syms2 = _env_with({"a": 500, "b": 7})
    big = next(s for s in syms2.values() if env2.backed_var_to_val[s] == 500)
    m = len(env2.guards)
    assert not graph_cache.replay_guards([sympy.Lt(sympy.Symbol(big.name, integer=True, positive=True), 100)], env2)
    assert len(env2.guards) == m
    # a symbol the ShapeEnv lacks
    assert not graph_cache.replay_guards([sympy.Lt(sympy.Symbol("s99", integer=True), 3)], env)
    assert graph_cache.replay_guards([], None)
    assert not graph_cache.replay_guards([sympy.Lt(fresh0, 100)], None)


def test_guards_a_compile_added_are_stored_and_a_failing_guard_misses(monkeypatch):
    """An entry whose stored guard fails for the new inputs' hints is not used."""

    def f(x):
        return (x * 2).sum(0)

    x = torch.randn(9, 4, device=DEVICE)
    torch.compile(f, backend="tilefuse", dynamic=True)(x)
    ((key, entry),) = graph_cache._memory.items()
    s = next(iter(sorted(entry.symbol_sources)))
    # plant a guard that the next compile's hints violate (the symbol must stay below 3)
    entry.guards = list(entry.guards) + [sympy.Lt(sympy.Symbol(s, integer=True, positive=True), 3)]
    _fresh()
    torch.testing.assert_close(torch.compile(f, backend="tilefuse", dynamic=True)(x), f(x))
    assert metrics.graph_cache_hits == 0 and metrics.generated_graph_count == 1


def test_corrupt_cache_file_is_a_miss(caplog):
    x, y = torch.randn(4, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE)
    torch.compile(_f, backend="tilefuse")(x, y)
    (key,) = graph_cache._memory
    path = os.path.join(runtime.cache_dir(), "graphs", f"{key}.pkl")
    assert os.path.getsize(path) > 0
    with open(path, "wb") as fh:
        fh.write(b"not a pickle")
    graph_cache.clear()  # memory only: the broken file remains
    _fresh()
    with caplog.at_level("WARNING", logger="tilefuse"):
        got = torch.compile(_f, backend="tilefuse")(x, y)
    assert metrics.graph_cache_hits == 0 and metrics.generated_graph_count == 1
    assert "unreadable graph cache entry" in caplog.text
    torch.testing.assert_close(got[0], _f(x, y)[0])


def test_key_depends_on_tilefuse_code(monkeypatch):
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    x = torch.randn(3)
    k1 = graph_cache.graph_key(gm, [x], None, {})
    monkeypatch.setattr(graph_cache, "code_fingerprint", lambda: "edited")
    assert graph_cache.graph_key(gm, [x], None, {}) != k1


def test_disk_hit_in_a_fresh_process(tmp_path):
    """A second process sharing TILEFUSE_CACHE_DIR reuses the first one's compile. On the GPU the
    first process's first call stores the kernels' launch records, and the second process loads
    their cubins (phase "restore") instead of compiling ahead or autotuning; with the records
    damaged, a third process compiles the kernels again (phase "precompile"), results unchanged."""
    script = textwrap.dedent(f"""
        import json, logging, torch, tilefuse
        from tilefuse import metrics
        logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
        for name in ("torch", "filelock", "triton"):
            logging.getLogger(name).setLevel(logging.WARNING)
        def f(x, w):  # a tensor constant too: it must come back from disk as a real tensor
            y = torch.nn.functional.gelu(x @ w) + torch.cumsum(x, 1)[:, :1] + torch.tensor([0.5], device=x.device)
            return y, torch.softmax(y, 1)  # a reduction: autotuned among its configs on the GPU
        torch.manual_seed(0)
        x, w = torch.randn(8, 16, device={DEVICE!r}), torch.randn(16, 16, device={DEVICE!r})
        g = torch.compile(f, backend="tilefuse")
        got = g(x, w)
        err = max((a - b).abs().max().item() for a, b in zip(got, f(x, w)))
        x2 = torch.randn(8, 16, device={DEVICE!r})
        err = max([err] + [(a - b).abs().max().item() for a, b in zip(g(x2, w), f(x2, w))])
        print(json.dumps({{"hits": metrics.graph_cache_hits, "generated": metrics.generated_graph_count,
                          "err": err, "phases": sorted(metrics.phase_seconds)}}))
    """)
    shared = tmp_path / "shared"
    # TILEFUSE_TINY_KERNEL_NUMEL=0: the small softmax is autotuned, so its winner is what is recorded
    env = dict(os.environ, TILEFUSE_CACHE_DIR=str(shared), TILEFUSE_GRAPH_CACHE="1", TILEFUSE_TINY_KERNEL_NUMEL="0")
    runs = []
    for k in range(3):
        if k == 2:  # damaged launch records: not used, never an error
            for p in (shared / "graphs").glob("*.launch.pkl"):
                p.write_bytes(b"not a pickle")
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        runs[-1]["log"] = [ln for ln in out.stderr.splitlines() if ln.startswith("tilefuse")][-30:]
        if k == 0:
            records = list((shared / "graphs").glob("*.launch.pkl"))
            assert len(records) == (1 if DEVICE == "cuda" else 0), records
    assert runs[0]["hits"] == 0 and runs[0]["generated"] == 1, runs[0]["log"]
    for r in runs[1:]:
        assert r["hits"] == 1 and r["generated"] == 0, (runs[0]["log"], r["log"])
    assert all(r["err"] < 1e-4 for r in runs), runs
    for r in runs[1:]:  # a hit from disk: its key, lookup and module load timed, nothing lowered
        assert {"cache_key", "cache_lookup", "load"} <= set(r["phases"]) and "lower" not in r["phases"], r
    if DEVICE == "cuda":
        assert "restore" in runs[1]["phases"], runs[1]
        assert "precompile" not in runs[1]["phases"] and "autotune" not in runs[1]["phases"], runs[1]
        assert "precompile" in runs[2]["phases"], runs[2]


def test_constants_of_nested_subgraphs_are_part_of_the_key():
    """Two torch.cond graphs differing only in a constant of one branch must not share an entry."""

    def make(vals):
        def f(x, p):
            return torch.cond(p.sum() > 0, lambda t: t + torch.tensor(vals, device=t.device), lambda t: t - 1, (x,)) * 2

        return f

    x, p = torch.zeros(2, 3, device=DEVICE), torch.ones(1, device=DEVICE)
    for vals in ([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]):
        _fresh()
        f = make(vals)
        torch.testing.assert_close(torch.compile(f, backend="tilefuse")(x, p), f(x, p))
        assert metrics.graph_cache_hits == 0


def test_zero_dim_tensor_constants_are_cached():
    f = lambda x: x * torch.tensor(2.5, device=x.device)  # noqa: E731
    x = torch.randn(4, device=DEVICE)
    for hits in (0, 1):
        _fresh()
        torch.testing.assert_close(torch.compile(f, backend="tilefuse")(x), f(x))
        assert metrics.graph_cache_hits == hits


def test_an_entry_whose_module_does_not_load_is_replaced(caplog):
    x, y = torch.randn(4, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE)
    torch.compile(_f, backend="tilefuse")(x, y)
    ((key, entry),) = graph_cache._memory.items()
    entry.module = None
    entry.source = entry.source.replace("def call(", "def call(((", 1)  # a damaged source
    _fresh()
    with caplog.at_level("WARNING", logger="tilefuse"):
        got = torch.compile(_f, backend="tilefuse")(x, y)
    assert "could not be used" in caplog.text
    assert metrics.graph_cache_hits == 0 and metrics.generated_graph_count == 1
    torch.testing.assert_close(got[0], _f(x, y)[0])
    assert "def call(((" not in graph_cache._memory[key].source  # the new compile replaced it


def test_debug_dir_gets_the_module_on_a_hit(tmp_path):
    x, y = torch.randn(3, 8, device=DEVICE), torch.randn(3, 8, device=DEVICE)
    torch.compile(_f, backend="tilefuse")(x, y)
    _fresh()
    with config.patch(debug_dir=str(tmp_path / "dbg")):
        torch.compile(_f, backend="tilefuse")(x, y)
    assert metrics.graph_cache_hits == 1
    assert any(p.name.endswith(".py") for p in (tmp_path / "dbg").iterdir())


def test_module_docstring_lists_the_options_left_out_of_the_key():
    """The module docstring names exactly the options ``_KEY_EXCLUDED_OPTIONS`` leaves out of the key."""
    import re

    from tilefuse.runtime import graph_cache as gc_mod

    doc = gc_mod.__doc__
    part = doc[doc.index("all but those in") :]
    part = part[: part.index(") and the")]
    named = set(re.findall(r"``(\w+)``", part)) - {"_KEY_EXCLUDED_OPTIONS"}
    assert named == set(gc_mod._KEY_EXCLUDED_OPTIONS)


def test_a_laid_out_training_forward_reports_its_strides_on_a_hit(monkeypatch):
    """A convolutional training step under layout optimization: the forward's saved activations
    are stored channels-last and their strides reported to AOTAutograd; a cache hit reports them
    too (kept in the entry), so the backward compiled after the hit gets channels-last inputs and
    hits as well, and the gradients stay eager's."""
    from tilefuse import config
    from tilefuse.layout_opt import report_output_strides

    monkeypatch.setattr(config, "LAYOUT_OPT_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(config, "CONV_BIAS_POINTWISE_DEVICE_TYPES", ("cuda", "cpu"))
    reported: list = []

    def spy(strides):
        reported.append(strides)
        report_output_strides(strides)

    monkeypatch.setattr("tilefuse.backend.report_output_strides", spy)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 96, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(96, 96, 3, padding=1)
    ).to(DEVICE)
    x = torch.randn(2, 3, 8, 8, device=DEVICE)

    def grads(m):
        m.zero_grad()
        m(x).square().mean().backward()
        return [p.grad.clone() for p in m.parameters()]

    want = grads(model)
    for hits in (0, 2):
        _fresh()
        reported.clear()
        got = grads(torch.compile(model, backend="tilefuse"))
        assert metrics.graph_cache_hits == hits
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
        # the forward's report (the backward reports nothing): a saved 4-D activation channels-last
        fw = [r for r in reported if r]
        assert len(fw) == 1 and any(s is not None and len(s) == 4 and s[1] == 1 for s in fw[0]), reported
