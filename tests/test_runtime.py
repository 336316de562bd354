"""The runtime: kernel launchers (grid, configs, autotuning), compiling ahead, Triton's caches.

On the CPU the launchers run under Triton's interpreter, and the forked compile workers run
Triton's real compiler for an explicit CUDA target (compiling needs no GPU). Tests marked ``gpu``
need a CUDA device and ``TRITON_INTERPRET=0``:
``TRITON_INTERPRET=0 python -m pytest -q tests/test_runtime.py``.
"""

from __future__ import annotations

import os
import time
import subprocess
import sys
import textwrap
import types

import pytest
import torch
import triton
import triton.language as tl

import tilefuse  # noqa: F401  (registers the backend, enables the interpreter without a GPU)
from tilefuse import config, metrics
from tilefuse import runtime as R
from tilefuse.runtime import autotune as rt_autotune
from tilefuse.runtime import cache as rt_cache
from tilefuse.runtime import fingerprint as rt_fingerprint
from tilefuse.runtime import launcher as rt_launcher
from tilefuse.runtime import static_launcher as rt_static
from tilefuse.runtime import warmup as rt_warmup
from tilefuse.runtime import workers as rt_workers

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("0", "")
CUDA = not INTERPRET and torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


@pytest.fixture(autouse=True)
def _strict():
    torch._dynamo.reset()
    torch.manual_seed(0)
    with config.patch(fallback_on_error=False):
        yield
    torch._dynamo.reset()


@pytest.fixture
def fresh_triton_cache(tmp_path, monkeypatch):
    """An empty Triton cache (compiled binaries, autotuning timings) for the test."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    return tmp_path / "triton"


# Kernels as plain functions, made Triton kernels in the tests (jit_for / triton.jit), so this module
# imports the same under the interpreter and on the GPU.
def _block_size_kernel(out_ptr, XBLOCK: tl.constexpr):
    """Writes the XBLOCK it was launched with to each of its 37 outputs."""
    xnumel = 37
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr + xindex, tl.full([XBLOCK], XBLOCK, tl.int32), xindex < xnumel)


def _scatter_add_kernel(idx_ptr, val_ptr, out_ptr, XBLOCK: tl.constexpr):
    """out[idx[i]] += val[i] for i < 1000 (atomic adds into a buffer initialized elsewhere)."""
    xnumel = 1000
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    i = tl.load(idx_ptr + xindex, xmask, other=0)
    v = tl.load(val_ptr + xindex, xmask, other=0.0)
    tl.atomic_add(out_ptr + i, v, xmask, sem="relaxed")


def _scale_kernel(in_ptr, out_ptr, XBLOCK: tl.constexpr):
    """out = 2 * in over 5000 elements."""
    xnumel = 5000
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr + xindex, tl.load(in_ptr + xindex, xmask) * 2.0, xmask)


def _scale_n_kernel(in_ptr, out_ptr, n, XBLOCK: tl.constexpr):
    """out = n * in over 64 elements (``n`` an integer argument Triton may specialize)."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < 64
    tl.store(out_ptr + xindex, tl.load(in_ptr + xindex, xmask) * n, xmask)


def _jit(fn):
    return R.jit_for(DEVICE)(fn)


# ------------------------------------------------------------------------------ launchers (CPU too)


def test_interpreter_launches_the_first_config_over_the_whole_grid():
    configs = [{"XBLOCK": 8, "num_warps": 2}, {"XBLOCK": 64, "num_warps": 4}]
    ln = R.make_launcher(_jit(_block_size_kernel), [("XBLOCK", 37)], configs, (torch.int32,), (), DEVICE)
    out = torch.zeros(40, dtype=torch.int32, device=DEVICE)
    ln(out)
    want = 8 if DEVICE == "cpu" else ln.best_config["XBLOCK"]
    assert out[:37].tolist() == [want] * 37 and out[37:].tolist() == [0] * 3
    if DEVICE == "cpu":
        assert ln.configs == configs[:1] and ln.best_config == configs[0] and ln.autotuner is None
        assert ln.grid(configs[0]) == (5,)


def test_cuda_launcher_wraps_several_configs_in_tritons_autotuner():
    # building launchers touches no GPU: the autotuner's set-up can be checked anywhere
    fn = triton.runtime.jit.JITFunction(_scatter_add_kernel)
    configs = [{"XBLOCK": 64, "num_warps": 2}, {"XBLOCK": 256, "num_warps": 4, "num_stages": 2}]
    ln = R.KernelLauncher(fn, [("XBLOCK", 1000)], configs, (torch.int64, torch.float32, torch.float32), (2,))
    at = ln.autotuner
    assert isinstance(at, triton.runtime.Autotuner)
    assert at.keys == [] and at.restore_value == ["out_ptr"]
    assert at.cache_results == (not INTERPRET)  # Triton keeps no timings under its interpreter
    assert [c.all_kwargs() for c in at.configs] == [
        {"XBLOCK": 64, "enable_fp_fusion": False, "num_warps": 2, "num_ctas": 1, "num_stages": 3},
        {"XBLOCK": 256, "enable_fp_fusion": False, "num_warps": 4, "num_ctas": 1, "num_stages": 2},
    ]  # compiled without contracting products into sums (config.fp_fusion)
    assert ln.best_config is None  # chosen at the first launch
    assert ln.grid({"XBLOCK": 256}) == (4,) and ln.grid({"XBLOCK": 64}) == (16,)
    with config.patch(autotune=False):
        off = R.KernelLauncher(fn, [("XBLOCK", 1000)], configs, (torch.int64, torch.float32, torch.float32), (2,))
    assert off.autotuner is None and off.configs == configs[:1] and off.best_config == configs[0]
    assert off._grid == (16,)


def test_time_config_treats_configs_that_do_not_fit_as_infinitely_slow(monkeypatch):
    from triton.runtime.errors import OutOfResources

    def too_big():
        raise OutOfResources(300000, 232448, "shared memory")

    syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: syncs.append(1))
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: fn())
    metrics.reset()
    assert rt_autotune._time_config(too_big, (0.5, 0.2, 0.8)) == [float("inf")] * 3
    assert len(metrics.autotune_config_seconds) == 1 and not syncs  # failed at its first launch

    windows = []

    def bench(fn, **kw):
        windows.append((kw["warmup"], kw["rep"]))
        time.sleep(0.2)
        return [1.0, 0.9, 1.1]

    launches = []

    def kernel_call():
        launches.append(1)
        time.sleep(0.01)

    monkeypatch.setattr(triton.testing, "do_bench", bench)
    monkeypatch.setattr(config, "AUTOTUNE_REP_MS", 7)  # the windows are read from config at each call
    assert rt_autotune._time_config(kernel_call, (0.5, 0.2, 0.8)) == [1.0, 0.9, 1.1]
    assert windows == [(config.AUTOTUNE_WARMUP_MS, 7)]
    # the first launch, synchronized and timed apart from do_bench's timing
    assert launches == [1] and syncs == [1]
    first, timing = metrics.autotune_config_seconds[-1]
    assert 0.01 <= first < 0.2 <= timing  # neither part counted in the other


def _compile_aten(f, *args):
    """tilefuse's CompiledGraph for ``f`` traced to aten with tilefuse's decompositions."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.backend import compile_graph
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings

    gm = make_fx(f, decomposition_table=decompositions(lowered=lowerings))(*args)
    return compile_graph(gm, list(args), "inference")


def _more_configs(monkeypatch):
    """Make codegen offer two more launch configs per kernel (smaller XBLOCK, other warps), as
    the 2-D tiling work will: every one of them is correct, the autotuner picks one."""
    from tilefuse.codegen import triton as T

    orig = T.TritonKernelCodegen.generate

    def generate(self):
        gk = orig(self)
        c = gk.configs[0]
        gk.configs = [c, {**c, "XBLOCK": max(1, c["XBLOCK"] // 2), "num_warps": 2}, {**c, "num_warps": 8}]
        return gk

    monkeypatch.setattr(T.TritonKernelCodegen, "generate", generate)


def test_graph_with_an_atomic_add_kernel_autotunes_and_matches_eager(monkeypatch, fresh_triton_cache):
    _more_configs(monkeypatch)

    def f(a, i, v):
        return torch.index_put(a, [i], v, accumulate=True) * 2, a.sum(1)

    a = torch.randn(64, 33, device=DEVICE)
    i = torch.randint(-64, 64, (300,), device=DEVICE)
    v = torch.randn(300, 33, device=DEVICE)
    metrics.reset()
    cg = _compile_aten(f, a, i, v)
    launchers = cg.module._launchers
    assert len(launchers) == metrics.generated_kernel_count
    mutating = [ln for ln in launchers if ln.mutated]
    # the atomic adds update their target only; the doubling kernel stores over that target (in
    # place: it dies there), so it updates its one input too
    atomic = [ln for ln in mutating if "atomic" in ln.fn.__name__]
    assert len(atomic) == 1 and len(atomic[0].mutated) == 1
    assert all(len(ln.mutated) == 1 for ln in mutating) and len(mutating) <= 2
    got = cg([a, i, v])
    want = f(a, i, v)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-5)
    if DEVICE == "cuda":
        # every kernel's configs were timed (two of the three may coincide; the atomic adds are
        # undone after each timed run)
        assert all(ln.timings is not None and len(ln.timings) >= 2 for ln in launchers)
        assert metrics.precompile_seconds > 0
        again = cg.module.call([a, i, v])  # later launches: the winner, directly
        torch.testing.assert_close(again[0], want[0], atol=1e-4, rtol=1e-5)
    else:
        assert all(len(ln.configs) == 1 for ln in launchers) and metrics.precompile_seconds == 0


def test_precompile_leaves_interpreted_kernels_alone_and_checks_the_pool():
    if INTERPRET:
        ln = R.make_launcher(
            R.jit_for("cpu")(_block_size_kernel),
            [("XBLOCK", 37)],
            [{"XBLOCK": 8, "num_warps": 2}],
            (torch.int32,),
            (),
            "cpu",
        )
        assert R.precompile([ln], workers=4) == 0.0
    with pytest.raises(ValueError, match="compile_pool"):
        R.precompile([], workers=2, pool="fork")


# a subprocess compiling _scale_kernel for sm_90 with Triton (no device needed) in a fresh cache
_COMPILE_SCRIPT_PREAMBLE = textwrap.dedent("""
    import os, sys, tempfile
    os.environ["TRITON_INTERPRET"] = "0"
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
    sys.path.insert(0, {here!r})
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import tilefuse.runtime as R
    import test_runtime as T

    target = GPUTarget("cuda", 90, 32)   # compiling for a device needs no device
    fn = triton.runtime.jit.JITFunction(T._scale_kernel)
    sig = {{"in_ptr": "*fp32", "out_ptr": "*fp32", "XBLOCK": "constexpr"}}
""")


def _run_compile_script(body: str) -> None:
    """Run ``_COMPILE_SCRIPT_PREAMBLE`` + ``body`` in a fresh interpreter; it must print OK."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), here) if p))
    script = _COMPILE_SCRIPT_PREAMBLE.format(here=here) + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout[-2000:] + r.stderr[-4000:]


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie awaiting its reaper (reads /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


_FORK_SCRIPT = """
    def job(xblock, warps):
        src = ASTSource(fn, sig, {"XBLOCK": xblock}, {(0,): [["tt.divisibility", 16]]})
        return lambda: triton.compile(src, target=target, options={"num_warps": warps})

    ex = R.ForkedCompileExecutor(2)
    futs = [ex.submit(job(xb, w)) for xb, w in [(128, 4), (256, 4), (1024, 8)]]
    futs.append(ex.submit(job(2 ** 21, 4)))   # over Triton's tensor size limit: fails to compile
    hits = []
    # the forked workers append to their own copies of the list: this records this process only
    triton.knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    ex.run_jobs()
    for f in futs[:3]:
        assert f.result().asm["cubin"], f
    err = futs[3].exception()
    assert err is not None and "CompilationError" in str(err), err
    assert hits == [True, True, True], hits   # this process only loaded what the workers compiled
    print("OK")
"""


def test_forked_compile_workers_fill_tritons_cache():
    _run_compile_script(_FORK_SCRIPT)


def test_compiler_warm_up_compiles_even_when_cached(fresh_triton_cache):
    """The warm-up compile exists for its one-time set-up: it must really compile (no cache hit)
    each time, and leave Triton's always_compile knob as it found it."""
    from triton.backends.compiler import GPUTarget

    events = []
    triton.knobs.compilation.listener = lambda **kw: events.append(kw["cache_hit"])
    try:
        for _ in range(2):
            rt_warmup._warm_compiler(GPUTarget("cuda", 90, 32))  # compiling for a device needs no device
    finally:
        triton.knobs.compilation.listener = None
    assert events == [False, False]
    assert not triton.knobs.compilation.always_compile


def test_forked_workers_run_every_job_once_in_a_fork_tree(tmp_path):
    """Plain callables as jobs: every job runs exactly once, in several worker processes (the
    first worker forks the others), a raising job is reported with its error, the rest succeed."""

    def job(i):
        def run():
            time.sleep(0.4 if i == 7 else 0.05)
            (tmp_path / f"{i}.{os.getpid()}").write_text("x")
            if i == 5:
                raise ValueError("job five fails")

        return run

    from tilefuse import metrics

    seen = []
    metrics.reset()
    failed = R.compile_in_forked_workers(
        [job(i) for i in range(12)],
        workers=5,
        on_result=lambda i, err: seen.append((i, err)),
        labels=[f"job{i}" for i in range(12)],
    )
    assert set(failed) == {5} and "ValueError: job five fails" in failed[5]
    # each job's time in its worker (job 7 sleeps 0.4 s, the others 0.05 s), with its label
    assert len(metrics.precompile_job_seconds) == 12 and all(0.04 <= t < 5 for t in metrics.precompile_job_seconds)
    assert sorted(metrics.precompile_job_labels) == sorted(f"job{i}" for i in range(12))
    slowest = max(zip(metrics.precompile_job_seconds, metrics.precompile_job_labels))
    assert slowest[1] == "job7" and slowest[0] >= 0.35
    assert sorted(i for i, _ in seen) == list(range(12))  # each report handed over as it arrives
    assert [i for i, err in seen if err is not None] == [5]
    done = sorted(p.name.split(".") for p in tmp_path.iterdir())
    assert sorted(int(i) for i, _ in done) == list(range(12))  # each job once
    pids = {pid for _, pid in done}
    assert 2 <= len(pids) <= 5 and str(os.getpid()) not in pids


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
def test_forked_workers_are_killed_after_the_timeout(tmp_path, monkeypatch):
    """A worker that reports nothing within the timeout (``config.FORKED_COMPILE_TIMEOUT_S``) is
    killed with every other worker; the call returns (the caller compiles what is left) without
    waiting for the jobs."""

    def slow():
        (tmp_path / str(os.getpid())).write_text("x")
        time.sleep(60)

    t0 = time.perf_counter()
    monkeypatch.setattr(config, "FORKED_COMPILE_TIMEOUT_S", 1.0)
    failed = R.compile_in_forked_workers([slow] * 4, workers=4)
    assert failed == {} and time.perf_counter() - t0 < 20
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert pids
    deadline = time.time() + 10
    while any(_running(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_running(p) for p in pids), pids


# ------------------------------------------------------------------------------ GPU only


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_autotune_restores_mutated_args_and_caches_timings_on_disk(fresh_triton_cache):
    fn = triton.jit(_scatter_add_kernel)
    configs = [{"XBLOCK": 64, "num_warps": 2}, {"XBLOCK": 256, "num_warps": 4}, {"XBLOCK": 1024, "num_warps": 8}]
    dtypes = (torch.int64, torch.float32, torch.float32)
    idx = torch.randint(0, 50, (1000,), device="cuda")
    val = torch.randn(1000, device="cuda")
    base = torch.randn(50, device="cuda")
    want = base.index_add(0, idx, val)

    ln = R.KernelLauncher(fn, [("XBLOCK", 1000)], configs, dtypes, (2,))
    out = base.clone()
    ln(idx, val, out)  # autotuned: every timed run's atomic adds are undone
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-5)
    assert ln.timings is not None and len(ln.timings) == 3 and ln.best_config in configs
    assert hasattr(ln.autotuner, "bench_time")  # it benchmarked
    out = base.clone()
    ln(idx, val, out)
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-5)

    # another launcher of the same kernel (as in another process): timings come from the disk cache
    ln2 = R.KernelLauncher(fn, [("XBLOCK", 1000)], configs, dtypes, (2,))
    out = base.clone()
    ln2(idx, val, out)
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-5)
    assert not hasattr(ln2.autotuner, "bench_time") and ln2.best_config == ln.best_config


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_autotune_skips_a_config_that_does_not_compile(fresh_triton_cache):
    fn = triton.jit(_scale_kernel)
    ln = R.KernelLauncher(
        fn,
        [("XBLOCK", 5000)],
        [{"XBLOCK": 2**21, "num_warps": 4}, {"XBLOCK": 128, "num_warps": 4}],
        (torch.float32, torch.float32),
    )
    R.precompile([ln], workers=2)  # the failing config fails here too, quietly
    x = torch.randn(5000, device="cuda")
    out = torch.empty_like(x)
    ln(x, out)
    torch.testing.assert_close(out, x * 2)
    assert ln.best_config["XBLOCK"] == 128
    assert sorted(t[0] for t in ln.timings.values())[-1] == float("inf")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
@pytest.mark.parametrize("pool,workers", [("process", 4), ("thread", 4), ("process", 1)])
def test_precompile_compiles_every_config_before_the_first_launch(pool, workers, fresh_triton_cache, monkeypatch):
    src_fns = [_scale_kernel, _scatter_add_kernel, _block_size_kernel]
    launchers = [
        R.KernelLauncher(
            triton.jit(src_fns[0]),
            [("XBLOCK", 5000)],
            [{"XBLOCK": 128, "num_warps": 4}, {"XBLOCK": 512, "num_warps": 4}],
            (torch.float32,) * 2,
        ),
        R.KernelLauncher(
            triton.jit(src_fns[1]),
            [("XBLOCK", 1000)],
            [{"XBLOCK": 64, "num_warps": 2}, {"XBLOCK": 256, "num_warps": 4}],
            (torch.int64, torch.float32, torch.float32),
            (2,),
        ),
        R.KernelLauncher(triton.jit(src_fns[2]), [("XBLOCK", 37)], [{"XBLOCK": 64, "num_warps": 1}], (torch.int32,)),
    ]
    assert R.precompile(launchers, workers=workers, pool=pool) > 0
    compiled = []
    triton.knobs.compilation.listener = lambda **kw: compiled.append(kw["cache_hit"])
    # C launchers built with the system compiler at launch (Triton's CudaLauncher): forked workers
    # build them next to the kernels, so the launches below only load them
    import triton.runtime.build as TB

    c_builds = []
    real_build = TB._build
    monkeypatch.setattr(TB, "_build", lambda name, *a, **k: c_builds.append(name) or real_build(name, *a, **k))
    try:
        x = torch.randn(5000, device="cuda")
        y = torch.empty_like(x)
        launchers[0](x, y)
        idx, val, out = (
            torch.randint(0, 50, (1000,), device="cuda"),
            torch.randn(1000, device="cuda"),
            torch.zeros(50, device="cuda"),
        )
        launchers[1](idx, val, out)
        z = torch.zeros(37, dtype=torch.int32, device="cuda")
        launchers[2](z)
        torch.cuda.synchronize()
    finally:
        triton.knobs.compilation.listener = None
    assert compiled == []  # nothing compiled (or even looked up on disk) at launch
    if pool == "process" and workers > 1:
        assert c_builds == [], c_builds
    torch.testing.assert_close(y, x * 2)
    torch.testing.assert_close(out, torch.zeros(50, device="cuda").index_add(0, idx, val), atol=1e-4, rtol=1e-5)
    assert z.tolist() == [64] * 37


def _stubbed_warmup(monkeypatch, calls: list, intervals: list) -> None:
    """start_warmup's surroundings on any machine: CUDA present (sm_90), no warm-up started yet,
    and its parts stubbed to record themselves in ``calls`` (the key also records the switch
    interval in ``intervals`` and takes 0.2 s)."""
    # start_warmup imports Triton's front end; imported first, while the interpreter is on (with
    # it off, importing it over an interpreted triton.language asserts)
    import triton.compiler.code_generator  # noqa: F401
    import triton.runtime.cache as tcache

    monkeypatch.setattr(rt_warmup, "_WARMUP", [])
    monkeypatch.setattr(rt_warmup, "_DEFERRED_WARMUP", [])
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    from tilefuse import metrics

    metrics.reset()
    monkeypatch.setattr(
        tcache,
        "triton_key",
        lambda: time.sleep(0.2) or calls.append("key") or intervals.append(sys.getswitchinterval()),
    )
    monkeypatch.setattr(rt_warmup, "_warm_compiler", lambda target=None: calls.append(target))

    class Active:
        @property
        def utils(self):
            calls.append("driver")

    monkeypatch.setattr(triton.runtime, "driver", types.SimpleNamespace(active=Active()))


def test_start_warmup_runs_driver_and_compiler_parts_in_two_threads(monkeypatch, tmp_path):
    """The thread plumbing, on any machine: CUDA's presence and the expensive parts stubbed."""
    from triton.backends.compiler import GPUTarget

    calls, intervals = [], []
    _stubbed_warmup(monkeypatch, calls, intervals)
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path))  # an empty cache: no hits expected
    from tilefuse import metrics

    with config.patch(warmup=False):
        R.start_warmup()
    assert rt_warmup._WARMUP == []  # switched off
    before = sys.getswitchinterval()
    R.start_warmup()
    threads = list(rt_warmup._WARMUP)
    R.start_warmup()  # once per process
    assert rt_warmup._WARMUP == threads and len(threads) == 2
    R.wait_warmup()
    assert not any(t.is_alive() for t in threads)
    # the GIL changes hands every 0.2 ms while the threads run (their I/O waits are short), and
    # the interpreter's interval is back afterwards
    assert intervals and abs(intervals[0] - config.WARMUP_SWITCH_INTERVAL_S) < 1e-6
    assert sys.getswitchinterval() == before
    # the driver in one thread; in the other the key, then the compiler, for the target torch
    # reports (sm_90, 32-wide warps)
    assert sorted(map(str, calls)).count("driver") == 1 and len(calls) == 3
    rest = [c for c in calls if c != "driver"]
    assert rest[0] == "key" and isinstance(rest[1], GPUTarget)
    assert (rest[1].backend, rest[1].arch, rest[1].warp_size) == ("cuda", 90, 32)
    # each part timed in its thread, and the wait for them counted
    assert set(metrics.warmup_seconds) == {"driver", "key", "compiler"}
    assert metrics.warmup_seconds["key"] >= 0.19 and 0.05 < metrics.warmup_wait_seconds < 5
    R.start_deferred_warmup()  # nothing was held back: nothing more runs
    assert rt_warmup._WARMUP == threads and len(calls) == 3


def test_warmup_holds_the_compiler_back_while_the_graph_cache_expects_hits(monkeypatch, tmp_path):
    """After a process stored launch records in the cache directory (the marker of this code's
    fingerprint), a new process starts only the driver part; its compiler part starts when a graph
    is compiled after all (``start_deferred_warmup``), once. With the graph cache off, or the
    directory cleared, both parts start at once again."""
    from tilefuse.runtime import graph_cache

    calls, intervals = [], []
    _stubbed_warmup(monkeypatch, calls, intervals)
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(graph_cache, "_device_tag", lambda: ("GPU", (9, 0), "13.0"))
    with config.patch(graph_cache=True):
        assert not graph_cache.expects_hits()
        graph_cache.store_launches("k" * 64, [None])
        assert graph_cache.expects_hits()
        with config.patch(graph_cache=False):
            assert not graph_cache.expects_hits()

        R.start_warmup()
        R.wait_warmup()
        assert calls == ["driver"] and len(rt_warmup._WARMUP) == 1 and len(rt_warmup._DEFERRED_WARMUP) == 1
        R.start_deferred_warmup()
        R.start_deferred_warmup()  # once
        R.wait_warmup()
        assert len(rt_warmup._WARMUP) == 2 and not rt_warmup._DEFERRED_WARMUP
        assert calls[1:3] == ["key", calls[2]] and calls[2] is not None and len(calls) == 3

        graph_cache.clear(disk=True)
        assert not graph_cache.expects_hits()
        calls.clear()
        monkeypatch.setattr(rt_warmup, "_WARMUP", [])
        R.start_warmup()
        R.wait_warmup()
        assert len(rt_warmup._WARMUP) == 2 and sorted(map(str, calls))[-2:] == ["driver", "key"]


def test_a_graph_cache_miss_starts_the_held_back_compiler_warmup(monkeypatch, tmp_path):
    """The backend calls ``start_deferred_warmup`` before lowering a graph, not on a hit."""
    import tilefuse.backend  # noqa: F401 - the backend resolves the runtime's functions at call time
    from tilefuse import metrics
    from tilefuse.runtime import graph_cache

    started = []
    monkeypatch.setattr(R, "start_deferred_warmup", lambda: started.append(1))
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path))
    graph_cache.clear()
    x = torch.randn(33, device=DEVICE)
    try:
        with config.patch(graph_cache=True):
            for _ in range(2):  # compiled, then (Dynamo reset) the same graph from the cache
                torch._dynamo.reset()
                metrics.reset()
                f = torch.compile(lambda x: torch.sin(x) * 3, backend="tilefuse")
                torch.testing.assert_close(f(x), torch.sin(x) * 3)
                assert started == [1]
            assert metrics.graph_cache_hits == 1
    finally:
        graph_cache.clear()
        torch._dynamo.reset()


def _fake_triton_tree(root):
    """A folder shaped like a Triton install, for ``triton_install_fingerprint``."""
    for rel, data in [
        ("runtime/cache.py", "key = 1\n"),
        ("_C/libtriton.so", "\x7fELF" * 64),
        ("compiler/compiler.py", "a\n"),
        ("backends/nvidia/compiler.py", "b\n"),
        ("backends/nvidia/bin/ptxas", "c"),
        ("language/core.py", "d\n"),
        ("other/x.py", "e\n"),
    ]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(data)


def test_triton_install_fingerprint_changes_with_any_file_it_covers(tmp_path):
    _fake_triton_tree(tmp_path)
    key = R.triton_install_fingerprint(str(tmp_path))
    assert key.startswith(f"{triton.__version__}-tilefuse-stat-") and len(key.rsplit("-", 1)[1]) == 64
    assert R.triton_install_fingerprint(str(tmp_path)) == key  # deterministic
    # outside the covered folders, or byte code: no change
    (tmp_path / "other" / "x.py").write_text("changed\n")
    (tmp_path / "compiler" / "__pycache__").mkdir()
    (tmp_path / "compiler" / "__pycache__" / "compiler.cpython-311.pyc").write_bytes(b"\0")
    assert R.triton_install_fingerprint(str(tmp_path)) == key
    seen = [key]
    lib = tmp_path / "_C" / "libtriton.so"
    st = lib.stat()
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))  # touched: same size and contents
    seen.append(R.triton_install_fingerprint(str(tmp_path)))
    replacement = tmp_path / "new.so"
    replacement.write_text("\x7fELF" * 64)
    os.replace(replacement, lib)  # reinstalled: a new inode
    seen.append(R.triton_install_fingerprint(str(tmp_path)))
    (tmp_path / "language" / "core.py").write_text("d2\n")  # edited: size changes
    seen.append(R.triton_install_fingerprint(str(tmp_path)))
    (tmp_path / "backends" / "nvidia" / "new_module.py").write_text("")  # a file added
    seen.append(R.triton_install_fingerprint(str(tmp_path)))
    (tmp_path / "runtime" / "cache.py").write_text("key = 2\n")
    seen.append(R.triton_install_fingerprint(str(tmp_path)))
    assert len(set(seen)) == len(seen) == 6
    with pytest.raises(OSError):
        R.triton_install_fingerprint(str(tmp_path / "missing"))


def test_stat_triton_key_replaces_tritons_install_key_in_its_cache_keys(monkeypatch):
    import triton.runtime.autotuner as tune
    import triton.runtime.cache as tcache

    original = tcache.triton_key
    monkeypatch.setattr(tcache, "triton_key", original)  # restored after the test
    monkeypatch.setattr(tune, "triton_key", original)
    monkeypatch.setattr(rt_fingerprint, "triton_install_fingerprint", lambda root=None: "3.x-tilefuse-stat-abc")
    with config.patch(triton_key_from_stat=False):
        assert R.use_stat_triton_key() is False
    assert tcache.triton_key is original
    # another library's replacement is left alone
    monkeypatch.setattr(tune, "triton_key", lambda: "theirs")
    assert R.use_stat_triton_key() is False and tcache.triton_key is original
    monkeypatch.setattr(tune, "triton_key", original)
    assert R.use_stat_triton_key() is True and R.use_stat_triton_key() is True
    assert tcache.triton_key is tune.triton_key and tcache.triton_key() == "3.x-tilefuse-stat-abc"
    assert tcache.triton_key.__wrapped__ is original
    tcache.triton_key.cache_clear()  # as torch may call on the original

    class H:
        def __init__(self, h):
            self.h = h

        def hash(self):
            return self.h

    # Triton's key of a compiled kernel now starts with the fingerprint
    key = tcache.get_cache_key(H("src"), H("backend"), H("opts"), {})
    assert key.startswith("3.x-tilefuse-stat-abc-src-backend-opts")
    # an unreadable install keeps Triton's key
    monkeypatch.setattr(tcache, "triton_key", original)
    monkeypatch.setattr(tune, "triton_key", original)

    def unreadable(root=None):
        raise PermissionError("no")

    monkeypatch.setattr(rt_fingerprint, "triton_install_fingerprint", unreadable)
    assert R.use_stat_triton_key() is False and tcache.triton_key is original


def test_stat_triton_key_of_the_real_install_is_cheap_and_stable():
    t0 = time.perf_counter()
    key = R.triton_install_fingerprint()
    assert time.perf_counter() - t0 < 1.0  # Triton's own key reads ~415 MB; this one only stats
    assert key == R.triton_install_fingerprint() and key.startswith(triton.__version__)


def test_switch_interval_is_lowered_while_warm_up_threads_run_and_restored_by_the_last():
    before = sys.getswitchinterval()
    try:
        low = rt_warmup._SwitchIntervalLowered(2)
        a, b = low.wrap(lambda: None), low.wrap(lambda: None)
        assert abs(sys.getswitchinterval() - config.WARMUP_SWITCH_INTERVAL_S) < 1e-6
        a()
        assert abs(sys.getswitchinterval() - config.WARMUP_SWITCH_INTERVAL_S) < 1e-6  # one still runs
        b()
        assert sys.getswitchinterval() == before
        # changed by someone else meanwhile: left as they set it
        low = rt_warmup._SwitchIntervalLowered(1)
        sys.setswitchinterval(0.01)
        low.wrap(lambda: None)()
        assert abs(sys.getswitchinterval() - 0.01) < 1e-6
        # already below ours: untouched
        sys.setswitchinterval(1e-4)
        low = rt_warmup._SwitchIntervalLowered(1)
        assert abs(sys.getswitchinterval() - 1e-4) < 1e-6

        def boom():
            raise ValueError("x")

        with pytest.raises(ValueError):
            low.wrap(boom)()
        assert abs(sys.getswitchinterval() - 1e-4) < 1e-6
    finally:
        sys.setswitchinterval(before)


def test_backend_lookup_starts_the_warm_up_only_once_dynamo_is_loaded(monkeypatch):
    """``tilefuse.backend`` imported by Dynamo's lookup (torch.compile) starts the warm-up; imported
    before Dynamo (or while it is half-imported), it must not (its threads would import Triton
    while the main thread does)."""
    import tilefuse.backend as B

    started = []
    monkeypatch.setattr(R, "start_warmup", lambda: started.append(1))
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
    B._start_warmup_at_lookup()
    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))  # half-imported
    B._start_warmup_at_lookup()
    assert started == []
    monkeypatch.setitem(sys.modules, "torch._dynamo", types.SimpleNamespace(optimize=lambda *a: None))
    B._start_warmup_at_lookup()
    assert started == [1]

    def broken():
        raise RuntimeError("no driver")

    monkeypatch.setattr(R, "start_warmup", broken)
    B._start_warmup_at_lookup()  # an optimization only: never raises


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_backend_entry_warms_up_tritons_driver():
    x = torch.randn(100, device="cuda")
    torch.testing.assert_close(torch.compile(lambda t: t * 2 + 1, backend="tilefuse")(x), x * 2 + 1)
    assert rt_warmup._WARMUP and not any(t.is_alive() for t in rt_warmup._WARMUP)  # started, joined before use
    from triton.backends.nvidia.driver import CudaUtils

    assert hasattr(CudaUtils, "instance")


_WARMUP_PROBE = """
import sys
import torch
if sys.argv[1] == "backend_first":
    import tilefuse.backend  # before Dynamo: nothing may start here (see start_warmup's docstring)
from tilefuse.runtime import warmup as W
print(len(W._WARMUP))
import torch._inductor.utils  # imports Triton from this thread, as a user's script may
f = torch.compile(lambda t: t * 2, backend="tilefuse")  # Dynamo's lookup imports tilefuse.backend
print(len(W._WARMUP))
assert (f(torch.ones(8, device="cuda")) == 2).all()
print(len(W._WARMUP), all(not t.is_alive() for t in W._WARMUP))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
@pytest.mark.parametrize("order", ["backend_first", "dynamo_first"])
@pytest.mark.parametrize("env", ["", "0"])
def test_backend_lookup_or_entry_starts_tritons_warm_up_unless_switched_off(env, order):
    # a fresh process: this one's warm-up ran long ago
    r = subprocess.run(
        [sys.executable, "-c", _WARMUP_PROBE, order],
        capture_output=True,
        text=True,
        env=dict(os.environ, TILEFUSE_WARMUP=env),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # nothing at a plain import; the driver thread and the compiler thread at torch.compile when
    # Dynamo's lookup imports the backend, else at backend entry; joined before the kernels
    # compiled; none when switched off
    on = env == ""
    at_lookup = "2" if on and order == "dynamo_first" else "0"
    want = ["0", at_lookup, "2 True" if on else "0 True"]
    assert r.stdout.split("\n")[-4:-1] == want, r.stdout


_STAT_KEY_PROBE = """
import torch, triton
import triton.runtime.cache as tc
import tilefuse.runtime as R
hits = []
triton.knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
f = torch.compile(lambda t: (t.sin() * 2).sum(-1), backend="tilefuse")
x = torch.randn(64, 300, device="cuda")
torch.testing.assert_close(f(x), (x.sin() * 2).sum(-1))
print(getattr(tc.triton_key, "tilefuse_stat_key", False), tc.triton_key() == R.triton_install_fingerprint())
print(len(hits), all(hits))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_processes_share_tritons_cache_under_the_stat_install_key(tmp_path):
    # two fresh processes, one Triton cache, no graph cache (so the second compiles through
    # Triton and must find every kernel under the same install key), compiles in the process
    # (a forked worker's compile is not seen by the listener); no warm-up (its compile bypasses
    # the cache), which also shows the key is put in place without it
    env = dict(
        os.environ,
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        TILEFUSE_CACHE_DIR=str(tmp_path / "tf"),
        TILEFUSE_GRAPH_CACHE="0",
        TILEFUSE_WARMUP="0",
        TILEFUSE_COMPILE_WORKERS="1",
    )
    out = []
    for _ in range(2):
        r = subprocess.run(
            [sys.executable, "-c", _STAT_KEY_PROBE], capture_output=True, text=True, env=env, timeout=300
        )
        assert r.returncode == 0, r.stderr[-3000:]
        out.append(r.stdout.split("\n")[-3:-1])
    assert out[0][0] == out[1][0] == "True True"
    n, all_hits = out[1][1].split()
    assert int(n) > 0 and all_hits == "True", out
    assert out[0][1].split()[1] == "False"  # the first process compiled
    # switched off: Triton's own key
    r = subprocess.run(
        [sys.executable, "-c", _STAT_KEY_PROBE],
        capture_output=True,
        text=True,
        env=dict(env, TILEFUSE_TRITON_KEY_FROM_STAT="0"),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[-3] == "False False"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_same_graph_compiled_again_finds_its_kernels_in_tritons_disk_cache(fresh_triton_cache):
    def f(a):
        return torch.softmax(a * 2, -1), (a.sin() + 1).sum(0)

    a = torch.randn(64, 300, device="cuda")
    _compile_aten(f, a)  # cold: compiles into the fresh cache
    R.finish_pending()  # (with precompile_overlap its workers may still run)
    hits = []
    triton.knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    try:
        cg = _compile_aten(f, a)  # a new module object from the same file, new JIT functions
        got = cg([a])  # (the binaries are loaded by the compile, or before this first call)
    finally:
        triton.knobs.compilation.listener = None
    assert hits and all(hits), hits
    for g, w in zip(got, f(a)):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ input layouts


def test_inputs_compiled_as_broadcast_accept_other_strides():
    """A graph input whose example was broadcast (stride 0) is read at index 0 along that dim, so
    a materialized tensor with the same values is passed as it is, and one whose other strides
    differ is copied into the compiled layout (that slice copied, then expanded): copying into an
    overlapping layout is impossible (AOTAutograd's backward met this on the GPU with GPT-2)."""
    row = torch.randn(1, 8, device=DEVICE)
    ex = row.expand(4, 8)  # strides (0, 1)
    cg = _compile_aten(lambda a, b: a * 2 + b, ex, torch.randn(4, 8, device=DEVICE))
    b = torch.randn(4, 8, device=DEVICE)
    dense = ex.contiguous()  # strides (8, 1): same values
    torch.testing.assert_close(cg([dense, b])[0], dense * 2 + b)
    strided = torch.randn(8, 2, device=DEVICE)[:, 0].expand(4, 8)  # strides (0, 2)
    torch.testing.assert_close(cg([strided, b])[0], strided * 2 + b)
    fixed = R.ensure_strides(strided, (4, 8), (0, 1))
    assert fixed.stride() == (0, 1) and torch.equal(fixed, strided)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_direct_launches_keep_tritons_specialization(fresh_triton_cache):
    """After its first launch a kernel is launched directly (no JITFunction.run), through torch's
    static CUDA launcher; a pointer off 16-byte alignment gets its own binary, not the aligned
    one; an integer argument equal to 1 (a constant in Triton's binary) is left out."""
    ln = R.KernelLauncher(
        triton.jit(_scale_kernel), [("XBLOCK", 5000)], [{"XBLOCK": 256, "num_warps": 4}], (torch.float32, torch.float32)
    )
    base = torch.randn(5008, device="cuda")
    for _ in range(3):
        for off in (0, 1, 4):  # offsets 1 (4 bytes) and 4 (16 bytes) of a 16-byte aligned base
            x, out = base[off : off + 5000], torch.zeros(5001, device="cuda")[1:]
            ln(x, out)
            torch.testing.assert_close(out, x * 2)
    keys = list(ln._direct)
    assert len(keys) == 2 and {k[1] for k in keys} == {(True, False), (False, False)}, keys
    assert len({id(k) for k, _, _, _ in ln._direct.values()}) == 2  # two binaries
    assert all(static is not None for _, static, _, _ in ln._direct.values())  # torch's static launcher
    # n == 1 is specialized into a constant: the static launch must drop that argument
    one = R.KernelLauncher(
        triton.jit(_scale_n_kernel),
        [("XBLOCK", 64)],
        [{"XBLOCK": 64, "num_warps": 4}],
        (torch.float32, torch.float32, int),
    )
    for n in (1, 1, 1, 7, 7, 7):
        x, out = torch.randn(64, device="cuda"), torch.zeros(64, device="cuda")
        one(x, out, n)
        torch.testing.assert_close(out, x * n)
    assert {k[2] for k in one._direct} == {((True, False, True),), ((False, False, True),)}
    assert all(k[1] is True for k in one._direct)  # every pointer aligned: one flag, not one per pointer
    assert any(keep is not None for _, _, keep, _ in one._direct.values())


def _simulated_cuda_launcher(monkeypatch, grid_axes, arg_names, dtypes, launched):
    """A CUDA-mode ``KernelLauncher`` whose every binary is a stand-in: its static launch appends
    ``(grid, args, stream)`` to ``launched``; CUDA's device and stream lookups answer 0 and 7. The
    launcher's own Python (keys, grids, the lean ``run``) runs as on a GPU."""
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: 7, raising=False)
    fn = types.SimpleNamespace(arg_names=[*arg_names, "XBLOCK"], __name__="k")
    ln = R.KernelLauncher(fn, grid_axes, [{"XBLOCK": 256, "num_warps": 4}], dtypes, (), "cuda")

    def launch(function, g0, g1, g2, num_warps, shared, tys, args, stream):
        launched.append(((g0, g1, g2), args, stream))

    def add_entry(self, key, grid, args, kwargs):
        # as Triton's binaries: an integer argument equal to 1 is a constant, left out of the launch
        keep = tuple(i for i, a in enumerate(args) if not (isinstance(a, int) and a == 1))
        keep = None if len(keep) == len(args) else keep
        tys = "O" * len(args if keep is None else keep)
        self._direct[key] = entry = (None, (launch, None, 4, 0, tys, ()), keep, None)
        return entry

    monkeypatch.setattr(ln, "_add_entry", types.MethodType(add_entry, ln))
    return ln


def test_lean_run_launches_with_the_calls_stream_and_falls_back_for_other_keys(monkeypatch):
    """``KernelLauncher.run(stream, *args)``, what generated CUDA wrappers call: the first launch
    goes through ``__call__`` (device and stream looked up there), after which ``run`` is the lean
    closure launching on the given stream with the precomputed grid; a misaligned pointer (another
    binary) or a None stream (Triton launch hooks set) goes back through ``__call__`` (the
    closure stays), and a new config (``_use``) drops the closure."""
    launched = []
    ln = _simulated_cuda_launcher(
        monkeypatch, [("XBLOCK", 5000)], ["in_ptr", "out_ptr"], (torch.float32, torch.float32), launched
    )
    x, y = torch.zeros(64), torch.zeros(64)
    assert x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
    ln.run(5, x, y)
    assert getattr(ln.run, "__func__", None) is not R.KernelLauncher._run_slow  # the lean closure
    ln.run(5, x, y)
    assert launched == [((20, 1, 1), (x, y), 7), ((20, 1, 1), (x, y), 5)]
    lean = ln.run
    ln.run(5, x[1:], y)  # 4 bytes off: a key of its own, through __call__
    ln.run(None, x, y)
    assert [s for _, _, s in launched[2:]] == [7, 7] and len(ln._direct) == 2
    assert ln.run is lean  # made once per config
    ln._use(0)
    assert getattr(ln.run, "__func__", None) is R.KernelLauncher._run_slow


def test_lean_run_computes_symbolic_grids_and_keys(monkeypatch):
    """With an integer (symbolic size) argument the lean ``run`` computes the grid from it at each
    launch and looks the specialization key up: a size of another key (a multiple of 16) goes
    through ``__call__`` once, then launches lean too, leaving out an argument its binary holds as
    a constant (an integer equal to 1)."""
    launched = []
    ln = _simulated_cuda_launcher(
        monkeypatch, [("XBLOCK", "n")], ["in_ptr", "out_ptr", "n"], (torch.float32, torch.float32, int), launched
    )
    x, y = torch.zeros(64), torch.zeros(64)
    for n, stream in ((1000, 5), (3000, 5), (32, 5), (64, 6), (1, 5), (1, 5)):
        ln.run(stream, x, y, n)
    # the first launch of each key through __call__ (stream 7), the others lean on the call's stream
    assert [(g, s) for g, _, s in launched] == [
        ((4, 1, 1), 7),
        ((12, 1, 1), 5),
        ((1, 1, 1), 7),
        ((1, 1, 1), 6),
        ((1, 1, 1), 7),
        ((1, 1, 1), 5),
    ]
    assert all(a == (x, y, n) for (_, a, _), n in zip(launched, (1000, 3000, 32, 64)))
    assert launched[4][1] == launched[5][1] == (x, y)  # n == 1: a constant of its binary, left out


def test_launch_record_keeps_its_cubin_path_through_pickling(tmp_path, monkeypatch):
    """torch's static launcher drops its cubin path when copied or pickled (its
    ``__getstate__``); a launch record carries the path beside it, and loading a record hands
    the launcher its path back (a missing cubin file is an error, which ``restore`` turns into
    "not restored")."""
    import pickle

    from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel

    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\0")
    sk = StaticallyLaunchedCudaKernel.__new__(StaticallyLaunchedCudaKernel)
    sk.__dict__.update(name="k", cubin_path=str(cubin), cubin_raw=b"\0" * 100, function=None, shared=0)
    rec = pickle.loads(pickle.dumps(rt_static._launcher_record(sk)))
    assert rec[0].cubin_path is None and rec[0].cubin_raw is None and rec[1] == str(cubin)
    seen = []
    monkeypatch.setattr(
        rt_static, "_static_from_loaded", lambda k, dev, n: seen.append((k.cubin_path, dev, n)) or ("s", None)
    )
    assert rt_static._load_record(rec, 0, 3) == ("s", None) and seen == [(str(cubin), 0, 3)]
    assert rec[0].cubin_path is None  # the record itself stays unloaded
    cubin.unlink()
    with pytest.raises(FileNotFoundError):
        rt_static._load_record(rec, 0, 3)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_launch_records_restore_without_the_jit(fresh_triton_cache):
    """``launch_record`` after launches, pickled (another process's view), ``restore``d into a
    new launcher of a fresh JIT function: the recorded config is used without autotuning and the
    recorded specializations launch from the loaded cubins, the JIT compiling nothing; a key not
    recorded compiles through the JIT; a record of another kernel is refused."""
    import pickle

    configs = [{"XBLOCK": 256, "num_warps": 4}, {"XBLOCK": 1024, "num_warps": 4}]
    ln = R.KernelLauncher(triton.jit(_scale_kernel), [("XBLOCK", 5000)], configs, (torch.float32, torch.float32))
    base = torch.randn(5008, device="cuda")
    for off in (0, 1):
        ln(base[off : off + 5000], torch.zeros(5000, device="cuda"))
    rec = pickle.loads(pickle.dumps(ln.launch_record()))
    assert rec["config"] == configs.index(ln.best_config) and len(rec["entries"]) == 2
    fn = triton.jit(_scale_kernel)
    new = R.KernelLauncher(fn, [("XBLOCK", 5000)], configs, (torch.float32, torch.float32))
    assert new.restore(rec) and new.best_config == ln.best_config and new.timings is None
    for off in (0, 1):
        x, out = base[off : off + 5000], torch.zeros(5000, device="cuda")
        new(x, out)
        torch.testing.assert_close(out, x * 2)
    dev = torch.cuda.current_device()
    assert not fn.device_caches[dev][0], "restored launches compiled through the JIT"
    x, out = base[2:5002], torch.zeros(5001, device="cuda")[1:]  # 8-byte aligned: a key not recorded
    new(x, out)
    torch.testing.assert_close(out, x * 2)
    assert len(fn.device_caches[dev][0]) == 1
    other = R.KernelLauncher(
        triton.jit(_scale_n_kernel),
        [("XBLOCK", 64)],
        [{"XBLOCK": 64, "num_warps": 4}],
        (torch.float32, torch.float32, int),
    )
    assert not other.restore(rec) and other.best_config == {"XBLOCK": 64, "num_warps": 4}


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
def test_launches_build_no_triton_c_launcher(fresh_triton_cache):
    """Autotuning and the later direct launches go through torch's static launcher: no compiled
    kernel in the JIT's cache has Triton's per-signature C launcher (``CompiledKernel._run``,
    built with gcc) after several launches, and the results are right."""
    fn = triton.jit(_scale_kernel)
    ln = R.KernelLauncher(
        fn,
        [("XBLOCK", 5000)],
        [{"XBLOCK": 256, "num_warps": 4}, {"XBLOCK": 1024, "num_warps": 4}],
        (torch.float32, torch.float32),
    )
    x = torch.randn(5000, device="cuda")
    for _ in range(3):
        out = torch.zeros(5000, device="cuda")
        ln(x, out)
        torch.testing.assert_close(out, x * 2)
    assert ln.best_config is not None and ln.timings
    kernels = list(fn.device_caches[torch.cuda.current_device()][0].values())
    assert len(kernels) == 2 and all(getattr(k, "_run", "missing") is None for k in kernels), kernels


def test_forked_executor_labels_each_job_with_the_kernel_and_config_being_submitted():
    """``ForkedCompileExecutor`` records, per submitted job, the label ``KernelLauncher.warmup``
    set for it, and ``run_jobs`` reports each job's time under that label."""
    from tilefuse import metrics

    ex = R.ForkedCompileExecutor(workers=2)
    futs = []
    for name in ("tf_kernel_0 XBLOCK=1024,num_warps=4", "tf_kernel_1 XBLOCK=2,RBLOCK=2048,num_warps=8"):
        rt_launcher._JOB_LABEL = name
        try:
            futs.append(ex.submit(time.sleep, 0.3 if name.startswith("tf_kernel_1") else 0.01))
        finally:
            rt_launcher._JOB_LABEL = "?"
    futs.append(ex.submit(time.sleep, 0.01))  # submitted outside warmup: unknown
    metrics.reset()
    ex.run_jobs()
    assert all(f.done() for f in futs)
    got = dict(zip(metrics.precompile_job_labels, metrics.precompile_job_seconds))
    assert set(got) == {"tf_kernel_0 XBLOCK=1024,num_warps=4", "tf_kernel_1 XBLOCK=2,RBLOCK=2048,num_warps=8", "?"}
    assert got["tf_kernel_1 XBLOCK=2,RBLOCK=2048,num_warps=8"] >= 0.25 > got["tf_kernel_0 XBLOCK=1024,num_warps=4"]


def test_forked_workers_run_without_garbage_collection_and_the_parent_keeps_it(tmp_path):
    """The workers (the first one and those it forks) never collect garbage, which would write to
    every object inherited from the parent and copy its pages; the parent's collector stays on."""
    import gc

    def job(i):
        def run():
            (tmp_path / f"{i}.{int(gc.isenabled())}").write_text("x")

        return run

    assert gc.isenabled()
    assert R.compile_in_forked_workers([job(i) for i in range(6)], workers=3) == {}
    flags = sorted(p.name for p in tmp_path.iterdir())
    assert flags == [f"{i}.0" for i in range(6)]
    assert gc.isenabled()


def test_forked_batch_compiles_while_this_process_goes_on(tmp_path):
    """``ForkedBatch.start`` returns as soon as the workers are forked; the jobs run while this
    process does other work, and ``collect`` gathers every report (each job once)."""

    def job(i):
        def run():
            time.sleep(0.5)
            (tmp_path / f"{i}.{os.getpid()}").write_text("x")

        return run

    metrics.reset()
    batch = R.ForkedBatch([job(i) for i in range(4)], workers=4, labels=[f"j{i}" for i in range(4)])
    t0 = time.perf_counter()
    batch.start()
    assert time.perf_counter() - t0 < 0.4  # not waiting for the 0.5 s jobs
    assert batch in rt_workers._STARTED_BATCHES
    busy = sum(i * i for i in range(200_000))  # this process's own work meanwhile
    assert busy > 0 and len(list(tmp_path.iterdir())) < 4
    seen = []
    assert batch.collect(on_result=lambda i, err: seen.append((i, err))) == {}
    assert sorted(seen) == [(i, None) for i in range(4)]
    assert sorted(int(p.name.split(".")[0]) for p in tmp_path.iterdir()) == [0, 1, 2, 3]
    assert sorted(metrics.precompile_job_labels) == ["j0", "j1", "j2", "j3"]
    assert batch not in rt_workers._STARTED_BATCHES and batch.collect() == {}  # collected once


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
def test_a_batch_never_collected_is_stopped_at_exit(tmp_path):
    """Workers of a batch nobody waits for (a compiled graph never called) are killed by the
    exit handler, not left compiling after this process is gone."""

    def slow():
        (tmp_path / str(os.getpid())).write_text("x")
        time.sleep(60)

    batch = R.ForkedBatch([slow] * 2, workers=2)
    batch.start()
    deadline = time.time() + 20
    while len(list(tmp_path.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.05)
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert len(pids) == 2
    rt_workers._stop_started_batches()  # what atexit runs
    deadline = time.time() + 10
    while any(_running(p) for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_running(p) for p in pids) and batch not in rt_workers._STARTED_BATCHES


_OVERLAP_SCRIPT = '''
    from triton.runtime import _async_compile
    filed = {}

    class Launcher:
        """What KernelLauncher.warmup does through JITFunction._do_compile, without a device."""
        cuda = True

        def __init__(self, xblock):
            self.xblock = xblock

        def warmup(self):
            mode = _async_compile.active_mode.get()
            assert mode is not None, "warmup outside the AsyncCompileMode"
            src = ASTSource(fn, sig, {"XBLOCK": self.xblock}, {(0,): [["tt.divisibility", 16]]})
            mode.submit(("scale", self.xblock), lambda: triton.compile(src, target=target, options={"num_warps": 4}),
                        lambda k, xb=self.xblock: filed.__setitem__(xb, k))

    first = R.start_precompile([Launcher(128), Launcher(256), Launcher(2 ** 21)], workers=2, pool="process")
    # the caller's context has no active mode: the next graph compiles in it meanwhile
    assert _async_compile.active_mode.get() is None
    assert not first.done and filed == {} and list(R.PENDING_PRECOMPILES) == [first]
    second = R.start_precompile([Launcher(512), Launcher(1024)], workers=2, pool="process")
    assert list(R.PENDING_PRECOMPILES) == [first, second]
    hits = []
    triton.knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    waited = R.finish_pending()
    assert waited >= 0 and first.done and second.done and not R.PENDING_PRECOMPILES
    assert sorted(filed) == [128, 256, 512, 1024], sorted(filed)   # 2 ** 21 fails: left to the launch
    assert all(filed[x].asm["cubin"] for x in filed)
    assert hits == [True] * 4, hits   # this process only loaded what the workers compiled
    assert first.wait() == 0.0 and first.seconds > 0
    print("OK")
'''


def test_start_precompile_returns_before_the_workers_finish_and_files_every_kernel_on_wait():
    _run_compile_script(_OVERLAP_SCRIPT)


def test_first_call_of_a_compiled_graph_waits_for_every_pending_precompile():
    """A graph's first call waits for the kernels still compiling in workers (any graph's), and
    the time goes to the ``precompile_wait`` phase."""
    import contextvars

    def f(x):
        return torch.relu(x) * 2

    cf = torch.compile(f, backend="tilefuse")
    x = torch.randn(16)
    torch.testing.assert_close(cf(x), f(x))  # compiled (nothing pends on the CPU)
    ex = R.ForkedCompileExecutor(workers=2)
    futs = [ex.submit(time.sleep, 0.3) for _ in range(2)]
    ex.start_jobs()

    class Mode:  # stands in for Triton's AsyncCompileMode: its exit files the kernels
        exited = False

        def __exit__(self, *exc):
            Mode.exited = True

    pending = R.PendingPrecompile(0.0, ex, contextvars.copy_context(), Mode())
    R.PENDING_PRECOMPILES[pending] = None
    metrics.reset()
    try:
        torch.testing.assert_close(cf(x), f(x))
    finally:
        R.finish_pending()
    assert pending.done and Mode.exited and all(fu.done() for fu in futs)
    assert metrics.phase_seconds["precompile_wait"] > 0.2 and metrics.precompile_seconds > 0.2


def test_forked_batch_hands_out_the_costliest_jobs_first(tmp_path):
    """With estimated costs, the workers take the jobs in descending cost (longest processing
    time first), so a long compile is not started last; without, in the given order."""
    log = tmp_path / "order"
    costs = [1.0, 5.0, 0.5, 9.0, 3.0]
    batch = R.ForkedBatch([_logging_job(log, i) for i in range(5)], workers=1, costs=costs)
    assert batch.order == [3, 1, 4, 0, 2]
    batch.start()
    assert batch.collect() == {}
    assert [i for i, _ in _job_log(log)] == [3, 1, 4, 0, 2]
    assert R.ForkedBatch([_logging_job(log, i) for i in range(3)], workers=1).order == [0, 1, 2]


def _logging_job(log, i):
    """A compile job standing in: appends ``i:pid`` to the file ``log``."""

    def run():
        with open(log, "a") as f:
            f.write(f"{i}:{os.getpid()}\n")

    return run


def _job_log(log) -> list:
    """(job index, pid) of each run ``_logging_job`` logged, in order."""
    return [tuple(int(v) for v in x.split(":")) for x in log.read_text().split()]


def test_compile_cost_grows_with_the_elements_each_thread_holds_and_the_source():
    """``KernelLauncher.compile_cost``: source lines x elements per thread (block sizes over
    num_warps x 32 threads, at least 1)."""
    fn = types.SimpleNamespace(src="def k(x_ptr, XBLOCK, RBLOCK):\n" + "    a = 1\n" * 9, arg_names=["x_ptr"])
    ln = R.KernelLauncher(
        fn, [("XBLOCK", 8)], [{"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 4}], (torch.float32,), device_type="cpu"
    )
    assert ln.compile_cost({"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 4}) == 10 * 32
    assert ln.compile_cost({"XBLOCK": 8, "RBLOCK": 1024, "num_warps": 16}) == 10 * 16
    assert ln.compile_cost({"XBLOCK": 1024, "num_warps": 4}) == 10 * 8
    assert ln.compile_cost({"XBLOCK": 64, "num_warps": 4}) == 10  # under one element per thread: 1
    longer = types.SimpleNamespace(src=fn.src + "    b = 2\n" * 10, arg_names=["x_ptr"])
    ln2 = R.KernelLauncher(
        longer, [("XBLOCK", 8)], [{"XBLOCK": 1024, "num_warps": 4}], (torch.float32,), device_type="cpu"
    )
    assert ln2.compile_cost({"XBLOCK": 1024, "num_warps": 4}) == 20 * 8


def test_forked_executor_orders_submitted_jobs_by_their_cost(tmp_path):
    """The cost ``KernelLauncher.warmup`` sets for each job reaches the batch: the costliest job
    runs first."""
    log = tmp_path / "order"
    ex = R.ForkedCompileExecutor(workers=1)
    for i, cost in enumerate([2.0, 7.0, 1.0]):
        rt_launcher._JOB_COST = cost
        try:
            ex.submit(_logging_job(log, i))
        finally:
            rt_launcher._JOB_COST = 0.0
    ex.run_jobs()
    # each job runs in the worker, then again here (where it would load the binary)
    runs = _job_log(log)
    assert [i for i, pid in runs if pid != os.getpid()] == [1, 0, 2]
    assert sorted(i for i, pid in runs if pid == os.getpid()) == [0, 1, 2]


def test_a_forked_child_never_reads_the_starters_reports(tmp_path):
    """A process forked while a batch runs (a data loader's worker) must not consume the
    reports: ``collect`` there returns at once, and the starting process still gets every one."""

    def job(i):
        def run():
            time.sleep(0.2)

        return run

    batch = R.ForkedBatch([job(i) for i in range(3)], workers=3)
    batch.start()
    pid = os.fork()
    if pid == 0:  # the child: collect must not touch the pipe
        code = 0
        try:
            t0 = time.perf_counter()
            if batch.collect() != {} or time.perf_counter() - t0 > 0.1 or batch.reported:
                code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    seen = []
    assert batch.collect(on_result=lambda i, err: seen.append(i)) == {}
    assert sorted(seen) == [0, 1, 2]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and TRITON_INTERPRET=0")
@pytest.mark.parametrize("wait_all", [True, False])
def test_eager_backward_batches_are_waited_for_by_the_right_first_call(fresh_triton_cache, monkeypatch, wait_all):
    """A training step on CUDA with forked compile workers and ``eager_backward``: the forward's
    and the backward's kernels are submitted in the forward's backend call (two batches); the
    forward's first call waits for both (``precompile_wait_all``, the default) or only for its own,
    the backward's batch then being waited for at the first backward; gradients as eager."""
    created, waited = [], []
    start, wait = R.start_precompile, R.PendingPrecompile.wait

    def spy_start(*a, **k):
        p = start(*a, **k)
        created.append(p)
        return p

    def spy_wait(self):
        if not self.done:
            waited.append(self)
        return wait(self)

    monkeypatch.setattr(R, "start_precompile", spy_start)
    monkeypatch.setattr(R.PendingPrecompile, "wait", spy_wait)
    torch.manual_seed(0)
    w = torch.randn(64, 96, device="cuda", requires_grad=True)
    x = torch.randn(32, 64, device="cuda")

    def step(a, b):
        return torch.nn.functional.gelu(a @ b).softmax(-1).square().sum()

    opts = {"eager_backward": True, "precompile_wait_all": wait_all, "compile_workers": 2, "graph_cache": False}
    loss = torch.compile(step, backend="tilefuse", options=opts)(x, w)
    assert len(created) == 2  # the forward's batch and the backward's, both before the forward ran
    fwd, bwd = created
    assert waited[:1] == [fwd] and fwd.done
    if wait_all:
        assert waited == [fwd, bwd] and bwd.done
    else:
        assert bwd not in waited  # compiling on (or finished, not yet waited for)
    loss.backward()
    assert bwd.done and not R.PENDING_PRECOMPILES
    torch.testing.assert_close(w.grad, torch.autograd.grad(step(x, w), w)[0], atol=1e-4, rtol=1e-4)


def _fail(msg):
    raise ValueError(msg)


def test_forked_executor_records_the_jobs_that_failed_to_compile():
    """``ForkedCompileExecutor.failures``: (label, error) of each job that failed, whether a worker
    reported it or it ran in this process; a PendingPrecompile hands them on once waited for."""
    ex = R.ForkedCompileExecutor(workers=2)
    for label, job in (
        ("tf_a XBLOCK=1", lambda: 1),
        ("tf_b XBLOCK=1", lambda: _fail("no such layout")),
        ("tf_b XBLOCK=2", lambda: _fail("too big")),
    ):
        rt_launcher._JOB_LABEL = label
        try:
            ex.submit(job)
        finally:
            rt_launcher._JOB_LABEL = "?"
    ex.run_jobs()
    assert sorted(label for label, _ in ex.failures) == ["tf_b XBLOCK=1", "tf_b XBLOCK=2"], ex.failures
    assert all("ValueError" in err for _, err in ex.failures) and any("too big" in err for _, err in ex.failures)
    one = R.ForkedCompileExecutor(workers=2)  # a single job runs in this process
    rt_launcher._JOB_LABEL = "tf_c XBLOCK=4"
    try:
        one.submit(lambda: _fail("in process"))
    finally:
        rt_launcher._JOB_LABEL = "?"
    one.run_jobs()
    assert one.failures == [("tf_c XBLOCK=4", "ValueError: in process")]


def test_unbuildable_kernels_are_those_with_every_config_failed():
    def kernel(name):
        fn = lambda: None  # noqa: E731
        fn.__name__ = name
        return fn

    lns = [
        types.SimpleNamespace(fn=kernel("tf_a"), cuda=True, configs=[{}, {}]),
        types.SimpleNamespace(fn=kernel("tf_b"), cuda=True, configs=[{}, {}]),
        types.SimpleNamespace(fn=kernel("tf_c"), cuda=True, configs=[{}]),
    ]
    failures = [("tf_a XBLOCK=1", "E1"), ("tf_b XBLOCK=1", "E2"), ("tf_b XBLOCK=2", "E3"), ("? ", "E4")]
    assert R.unbuildable_kernels(lns, failures) == {"tf_b": "E2"}  # tf_a keeps a config
    assert R.unbuildable_kernels(lns, []) == {}


def _counting_fix(monkeypatch):
    """Count the per-input path's calls (``input_checks._fix``)."""
    from tilefuse.runtime import input_checks

    calls = []
    real = input_checks._fix

    def fix(args, checks):
        calls.append(len(checks))
        return real(args, checks)

    monkeypatch.setattr(input_checks, "_fix", fix)
    return calls


def test_entry_check_becomes_one_guard_after_an_unchanged_call(monkeypatch):
    # the first call checks each input and builds Dynamo's TensorGuards of them; later calls with
    # inputs of the same layouts take the guard alone and pass the very same tensors on; a
    # transposed input misses it and is still copied into the compiled layout; after
    # _GUARD_MISSES refusals the guard is dropped and the per-input path stays right
    from tilefuse.runtime.input_checks import _GUARD_MISSES, InputChecks

    calls = _counting_fix(monkeypatch)
    ic = InputChecks([((8, 4), (4, 1)), None, ((3,), (1,))])
    a, b = torch.randn(8, 4), torch.randn(3)
    args = [a, 2, b]
    ic.apply(args)
    assert args[0] is a and args[2] is b and calls == [2] and ic._guard is not None
    for _ in range(3):
        args = [torch.randn(8, 4), 5, torch.randn(3)]
        same = list(args)
        ic.apply(args)
        assert all(x is y for x, y in zip(args, same))
    assert calls == [2]  # the guard alone
    for k in range(_GUARD_MISSES + 1):
        t = torch.randn(4, 8).t()
        args = [t, 2, b]
        ic.apply(args)
        assert args[0].stride() == (4, 1) and torch.equal(args[0], t)
    assert ic._guard is None and len(calls) == 1 + _GUARD_MISSES + 1


def test_entry_check_guard_refuses_negated_views_and_other_requires_grad(monkeypatch):
    from tilefuse.runtime.input_checks import InputChecks

    calls = _counting_fix(monkeypatch)
    ic = InputChecks([((8, 4), (4, 1))])
    ic.apply([torch.randn(8, 4)])
    assert ic._guard is not None
    base = torch.randn(8, 4)
    args = [base._neg_view()]
    ic.apply(args)
    assert not args[0].is_neg() and torch.equal(args[0], -base) and len(calls) == 2
    w = torch.randn(8, 4, requires_grad=True)
    args = [w]
    ic.apply(args)
    assert args[0] is w and len(calls) == 3  # refused by the guard, unchanged by the check


def test_entry_check_of_a_symbolic_graph_guards_its_static_inputs_only(monkeypatch):
    # a symbolic graph: the parameter-like input of static layout goes under the guard, the input
    # whose size is a symbol is checked at every call at that call's size
    from tilefuse.runtime.input_checks import InputChecks
    from tilefuse.symbolic import sym

    s0 = sym("s0")
    calls = _counting_fix(monkeypatch)
    ic = InputChecks([((s0, 4), (4, 1)), ((4, 4), (4, 1))], {"s0": (0, "size", 0)})
    ic.apply([torch.randn(5, 4), torch.randn(4, 4)])
    assert ic._guard is not None and calls == [1, 1]
    t = torch.randn(4, 7).t()
    args = [t, torch.randn(4, 4)]
    ic.apply(args)
    assert args[0].stride() == (4, 1) and torch.equal(args[0], t) and calls == [1, 1, 1]
