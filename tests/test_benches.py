"""The benchmark scripts' own behaviour on a machine without a GPU: bad arguments are refused with
a message before any measurement starts, and the CPU path of ``benches/compile_time.py`` produces
a table row with numbers and tilefuse's phases."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benches", "compile_time.py")


def _run(*args: str, timeout: int = 600, tmpdir: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1")
    if tmpdir is not None:  # the script's temporary folders go there (tempfile reads TMPDIR)
        env["TMPDIR"] = tmpdir
    return subprocess.run(
        [sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (("--backends", "tilefsue"), "--backends 'tilefsue': choose one or more of"),
        (("--backends", ""), "--backends '': choose one or more of"),
        (("--top", "0", "--profile", "softmax", "--device", "cpu"), "--top 0: give a positive number"),
        (("--repeat", "0"), "--repeat 0: give a positive number"),
        (("--repeat", "2", "--profile", "softmax", "--device", "cpu"), "--repeat is for the table"),
        (("--modes", ","), "give one or more of"),
        (("--only", "softmax,nosuch"), "unknown workload 'nosuch'"),
        (("--profile", "nosuch"), "unknown workload 'nosuch'"),
        (("--device", "gpu"), "invalid choice: 'gpu'"),
        (("--variant", "TILEFUSE_EAGER_BACKWARD"), "is not NAME=VALUE"),
        (("--top", "3"), "--top is for --profile"),
        (("--profile-out", "x.prof"), "--profile-out is for --profile"),
        (("--profile-backend", "aot_eager"), "--profile-backend is for --profile"),
        (("--profile", "softmax", "--device", "cpu", "--profile-out", "/"), "is a directory; give a file path"),
        (
            ("--profile", "softmax", "--device", "cpu", "--profile-out", "/nonexistent_dir/x.prof"),
            "the directory '/nonexistent_dir' does not exist",
        ),
        (("--variant", "A=1,=2"), "'=2' is not NAME=VALUE"),
        (("--variant", "A=1", "--backends", "aot_eager,inductor"), "keep tilefuse in --backends"),
        # a value tilefuse refuses: found before any measured process runs (``import tilefuse``)
        (("--variant", "TILEFUSE_COMPILE_POOL=bogus"), "tilefuse option 'compile_pool' must be one of"),
        (("--variant", "TILEFUSE_TILING=0,TILEFUSE_AUTOTUNE=maybe"), "TILEFUSE_AUTOTUNE='maybe' is not a boolean"),
        # a name tilefuse does not read: the variant would measure nothing
        (
            ("--variant", "TILEFUSE_TINY_KERNAL_NUMEL=0"),
            "tilefuse does not read ['TILEFUSE_TINY_KERNAL_NUMEL'] (misspelt?)",
        ),
        (("--variant", "A=1", "--profile", "softmax", "--device", "cpu"), "--variant is for the table"),
        # a folder that cannot be made (nor written): an argument error, not a traceback or a run
        # that silently compiles every module from source
        (("--bytecode-cache", "/proc/tilefuse_no_such_dir"), "cannot create or write that folder"),
        (("--bytecode-cache", ""), "cannot create or write that folder"),
        (("--bytecode-cache", "/dev/null/sub"), "cannot create or write that folder"),
    ],
)
def test_compile_time_refuses_bad_arguments(args, message):
    r = _run(*args, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


def test_compile_time_profile_asks_for_the_cpu_explicitly():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is the default device here")
    r = _run("--profile", "softmax", timeout=120)
    assert r.returncode == 2 and "add --device cpu" in r.stderr, r.stderr[-2000:]


def test_compile_time_profile_saves_the_whole_profile(tmp_path):
    """``--profile --profile-out``: the listings are printed and the saved profile holds the
    backend's own compile functions (readable by pstats, e.g. for callers of one function)."""
    import pstats

    out = tmp_path / "first_call.prof"
    r = _run("--profile", "softmax", "--device", "cpu", "--top", "3", "--profile-out", str(out), timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "Ordered by: internal time" in r.stdout and "Ordered by: cumulative time" in r.stdout
    st = pstats.Stats(str(out))
    funcs = {(os.path.basename(f), name) for f, _, name in st.stats}
    assert ("backend.py", "compile_graph") in funcs and ("graph.py", "run") in funcs, sorted(funcs)[:20]


def test_compile_time_profile_is_cold_whatever_the_callers_caches(tmp_path):
    """``--profile`` profiles a cold first call: run twice with the same ``TILEFUSE_CACHE_DIR`` in
    the caller's environment, both runs lower the graph (no graph-cache hit from the first run),
    and the profiled call's Dynamo sections are printed."""
    env_cache = str(tmp_path / "shared_cache")
    for _ in range(2):
        env = dict(os.environ, TRITON_INTERPRET="1", TILEFUSE_CACHE_DIR=env_cache)
        r = subprocess.run(
            [sys.executable, SCRIPT, "--profile", "softmax", "--device", "cpu", "--top", "1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=ROOT,
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        assert re.search(r"phases \{[^}]*'lower': [\d.]+", r.stdout), r.stdout[:2000]
        assert "# Dynamo sections (s): _compile.compile_inner=" in r.stdout


def test_compile_time_profiles_another_backend(tmp_path):
    """``--profile-backend aot_eager``: the baseline's first call profiled the same way, so the two
    profiles can be set side by side; none of tilefuse's compile functions run in it."""
    import pstats

    out = tmp_path / "aot_eager.prof"
    r = _run(
        "--profile",
        "softmax",
        "--device",
        "cpu",
        "--top",
        "3",
        "--profile-backend",
        "aot_eager",
        "--profile-out",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "# softmax static aot_eager: first call" in r.stdout
    funcs = {(os.path.basename(f), name) for f, _, name in pstats.Stats(str(out)).stats}
    assert ("backend.py", "compile_graph") not in funcs
    assert any(name == "aot_module_simplified" or name.startswith("aot_") for _, name in funcs), sorted(funcs)[:20]


def test_compile_time_cpu_row(tmp_path):
    """The CPU path end to end, with two processes per measurement and warm runs: the table shows
    the median (of two: the lower) of the first calls the spread line lists."""
    r = _run(
        "--device",
        "cpu",
        "--only",
        "softmax,softmax,",
        "--modes",
        "static,static",
        "--backends",
        "tilefuse,tilefuse",
        "--repeat",
        "2",
        "--warm",
        tmpdir=str(tmp_path),
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    row = next(line for line in r.stdout.splitlines() if line.startswith("| softmax | static |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[2]) > 0 and float(cells[4]) > 0  # aot_eager's and tilefuse's first calls, s
    assert re.search(r"tilefuse phases \(s\): lower=\d", r.stdout)
    # Dynamo's own sections per backend: the frame compile holds the backend call
    for backend in ("aot_eager", "tilefuse"):
        m = re.search(
            rf"Dynamo sections, {backend} \(s\): _compile.compile_inner=([\d.]+) .*"
            rf"OutputGraph.call_user_compiler=([\d.]+)",
            r.stdout,
        )
        assert m and float(m.group(1)) >= float(m.group(2)) > 0, r.stdout[-2000:]
    assert "# not run (--backends): inductor;" in r.stdout
    m = re.search(
        r"over 2 processes .*aot_eager ([\d.]+)/([\d.]+)/([\d.]+); "
        r"tilefuse ([\d.]+)/([\d.]+)/([\d.]+), warm ([\d.]+)/([\d.]+)/([\d.]+)",
        r.stdout,
    )
    assert m, r.stdout[-2000:]
    t = [float(v) for v in m.groups()]
    assert t[0] <= t[1] <= t[2] and t[3] <= t[4] <= t[5] and t[6] <= t[7] <= t[8]
    assert t[1] == t[0] and t[4] == t[3]  # the median of two is the lower
    # each process reported as it ended
    assert len(re.findall(r"softmax static tilefuse process [12]/2: first call [\d.]+ s, warm [\d.]+ s", r.stdout)) == 2
    # ... with where its wall time went: the stages and the rest add up to the process's wall time,
    # and the first-call stage is the first call reported
    times = re.findall(
        r"softmax static tilefuse process [12]/2: first call ([\d.]+) s, warm [\d.]+ s; process "
        r"([\d.]+) s \(setup ([\d.]+), eager ([\d.]+), lookup ([\d.]+), first call ([\d.]+), "
        r"start\+exit (-?[\d.]+)\); first call's garbage collections \(generation 0/1/2\) "
        r"(\d+)/(\d+)/(\d+), ([\d.]+) s; warm process [\d.]+ s",
        r.stdout,
    )
    assert len(times) == 2, r.stdout[-2000:]
    for first, wall, *parts, young, middle, full, collecting in ([float(v) for v in row] for row in times):
        assert abs(sum(parts) - wall) <= 0.03 and abs(parts[3] - first) <= 0.011 and parts[4] > -0.05
        # Dynamo's trace, before tilefuse pauses the collector, allocates far more than the young
        # generation's threshold (700 objects; 40-50 young collections on the development machine);
        # each middle collection follows 10 young ones
        assert collecting <= first + 0.011 and young >= 1 and young >= middle and full >= 0
    # a list given twice is measured once
    assert len(re.findall(r"^\| softmax \| static \|", r.stdout, re.M)) == 1
    assert float(cells[2]) == t[1] and float(cells[4]) == t[4]
    # tilefuse warm backend = warm median - aot_eager's (each printed rounded to 0.01)
    assert "tilefuse warm backend s" in r.stdout
    assert abs(float(cells[9]) - (t[7] - t[1])) <= 0.011
    # each cold/warm pair's cache directories are removed once measured (in this test's own
    # temporary folder: a bench run beside the tests cannot interfere)
    leftover = glob.glob(os.path.join(str(tmp_path), "ct_softmax_*"))
    assert not leftover, leftover


def test_compile_time_bytecode_cache_is_primed_and_used(tmp_path):
    """``--bytecode-cache``: one untimed process per backend writes the bytecode of what it
    imports under the folder (torch's and tilefuse's modules), before the measured processes,
    which read it; a file where the folder should be is an argument error."""
    cache = tmp_path / "pyc"
    r = _run(
        "--device",
        "cpu",
        "--only",
        "softmax",
        "--modes",
        "static",
        "--backends",
        "tilefuse",
        "--bytecode-cache",
        str(cache),
        tmpdir=str(tmp_path),
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    primed = re.findall(r"softmax static (\w+): bytecode cache primed$", r.stdout, re.M)
    assert primed == ["aot_eager", "tilefuse"], r.stdout[-2000:]
    # priming comes before the measured processes
    assert r.stdout.index("bytecode cache primed") < r.stdout.index("softmax static aot_eager process 1/1")
    assert re.search(r"^\| softmax \| static \| [\d.]+ \| nan \| [\d.]+ \|", r.stdout, re.M), r.stdout[-2000:]
    written = [str(p) for p in cache.rglob("*.pyc")]
    assert any("/torch/_dynamo/" in p for p in written), written[:20]
    assert any("/tilefuse/lowering/" in p for p in written), written[:20]
    (tmp_path / "afile").write_text("x")
    r = _run("--bytecode-cache", str(tmp_path / "afile"), "--device", "cpu", "--only", "softmax")
    assert r.returncode == 2 and "is a file; give a directory" in r.stderr, r.stderr[-2000:]
    # --profile primes it too, before the profiled process
    cache2 = tmp_path / "pyc2"
    r = _run(
        "--device",
        "cpu",
        "--profile",
        "softmax",
        "--modes",
        "static",
        "--bytecode-cache",
        str(cache2),
        tmpdir=str(tmp_path),
    )
    assert r.returncode == 0 and "softmax static tilefuse: bytecode cache primed" in r.stdout, r.stderr[-2000:]
    assert any("/torch/_dynamo/" in str(p) for p in cache2.rglob("*.pyc"))


def test_compile_time_variants_are_interleaved_and_get_their_environment():
    """``--variant``: a tilefuse run with extra environment variables, its processes interleaved
    round by round with the other backends'; a variant whose setting breaks the compile (a debug
    folder that cannot be created, with the eager fallback off: the child fails; values tilefuse
    refuses outright are argument errors, below) is reported as failed without losing the table
    row, and the exit status says a measurement failed."""
    broken = "TILEFUSE_FALLBACK_ON_ERROR=0,TILEFUSE_DEBUG_DIR=/proc/tilefuse_no_such_dir"
    r = _run(
        "--device",
        "cpu",
        "--only",
        "softmax",
        "--modes",
        "static",
        "--backends",
        "tilefuse",
        "--repeat",
        "2",
        "--variant",
        "TILEFUSE_TILING=0",
        "--variant",
        broken,
        "--variant",
        "TILEFUSE_TILING=0",
    )  # given twice: measured once
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
    order = re.findall(r"softmax static (aot_eager|tilefuse(?: \[[^\]]*\])?) process (\d)/2", r.stdout)
    assert order == [
        ("aot_eager", "1"),
        ("tilefuse", "1"),
        ("tilefuse [TILEFUSE_TILING=0]", "1"),
        ("aot_eager", "2"),
        ("tilefuse", "2"),
        ("tilefuse [TILEFUSE_TILING=0]", "2"),
    ], order
    assert re.search(r"^\| softmax \| static \| [\d.]+ \| nan \| [\d.]+ \|", r.stdout, re.M), r.stdout[-2000:]
    m = re.search(r"variant tilefuse \[TILEFUSE_TILING=0\]: first call ([\d.]+) s, backend (-?[\d.]+) s", r.stdout)
    assert m and float(m.group(1)) > 0, r.stdout[-2000:]
    assert f"variant tilefuse [{broken}]: FAILED" in r.stdout
    assert "debug_dir" in r.stderr  # the variables reached the child


def test_autotune_report_refuses_unknown_workloads_and_needs_a_gpu():
    import torch

    script = os.path.join(ROOT, "benches", "autotune_report.py")
    r = subprocess.run(
        [sys.executable, script, "--only", "softmax,nosuch"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert r.returncode == 2 and "choose one or more of" in r.stderr, r.stderr[-2000:]
    if not torch.cuda.is_available():
        r = subprocess.run(
            [sys.executable, script, "--only", "softmax"], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert r.returncode == 0 and "needs a CUDA GPU" in r.stdout, r.stdout + r.stderr[-2000:]


@pytest.mark.parametrize(
    "args, message",
    [
        (("--rep", "0", "--dry-run"), "--rep 0: give a positive number"),
        (("--top", "0", "--profile"), "--top 0: give a positive number"),
        (("--only=", "--dry-run"), "--only '': give one or more workload names"),
        (("--against", "nosuch", "--dry-run"), "--against 'nosuch': not a torch.compile backend here"),
        (("--only", "softmax,nosuch"), "unknown workload(s) ['nosuch']"),
        (("--rounds", "0", "--dry-run"), "--rounds 0: give a positive number"),
        (("--flush", "none", "--dry-run"), "argument --flush: invalid choice: 'none'"),
        # no abbreviations: ``--cpu`` once ran the GPU path's code without the interpreter, every
        # graph fell back to eager, and the run still reported success
        (("--cpu", "--only", "softmax"), "unrecognized arguments: --cpu"),
        (("--dry", "--only", "softmax"), "unrecognized arguments: --dry"),
        (("--dry-run", "--flush", "read"), "--flush read: CUDA-event timing is for the GPU table; --dry-run times"),
        (("--cpu-smoke", "--flush", "zero"), "--flush zero: CUDA-event timing is for the GPU table; --cpu-smoke"),
    ],
)
def test_runtime_refuses_bad_arguments(args, message):
    """runtime.py checks its arguments before measuring anything (a bad --against used to surface
    only per workload, after a 1 GiB bandwidth measurement)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benches", "runtime.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


def test_runtime_dynamic_compiles_both_backends_with_symbolic_sizes():
    """``--dynamic`` compiles both backends with ``dynamic=True``: the GPU table's code path on the
    CPU (``--dry-run``) says so, and both still match eager (exit status 0)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "benches", "runtime.py"),
            "--dry-run",
            "--dynamic",
            "--only",
            "layernorm",
            "--against",
            "aot_eager",
            "--rounds",
            "1",
            "--rep",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "both backends compiled with dynamic=True" in r.stdout, r.stdout[-2000:]
    assert re.search(r"^layernorm +8x33 ", r.stdout, re.M) and "EAGER" not in r.stdout, r.stdout[-2000:]
    assert "all outputs match eager" in r.stdout, r.stdout[-2000:]


def _runtime_module():
    sys.path.insert(0, os.path.join(ROOT, "benches"))
    try:
        import runtime
    finally:
        sys.path.pop(0)
    return runtime


def test_peak_memory_is_nan_off_cuda():
    import math

    calls = []
    assert math.isnan(_runtime_module().peak_mib(lambda: calls.append(1), "cpu")) and calls == []  # not even run


@pytest.mark.gpu
def test_peak_memory_counts_what_one_call_allocates():
    """``runtime.peak_mib``: a call that allocates a 64 MiB temporary and returns a 16 MiB output
    peaks at 80 MiB above what was allocated before it, whatever was allocated earlier."""
    import torch

    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU")
    rt = _runtime_module()
    keep = torch.empty(32 * 2**20, dtype=torch.uint8, device="cuda")  # allocated before: not counted

    def call():
        tmp = torch.ones(64 * 2**20, dtype=torch.uint8, device="cuda")
        out = torch.empty(16 * 2**20, dtype=torch.uint8, device="cuda")
        del tmp
        return out

    assert 80.0 <= rt.peak_mib(call, "cuda") < 81.0
    del keep


def test_memory_peak_replays_an_allocator_trace_against_brute_force():
    """``memory_peak.live_at_peak`` on random traces: its peak is the largest running total of
    allocated bytes (recomputed here step by step), and the blocks it reports alive at the peak
    are exactly those allocated and not yet freed at the first step reaching it; frees of blocks
    allocated before the trace are ignored."""
    import random

    sys.path.insert(0, os.path.join(ROOT, "benches"))
    import memory_peak

    rng = random.Random(3)
    for _ in range(300):
        events, live, next_addr = [], [], 1000
        for _ in range(rng.randint(0, 40)):
            if live and rng.random() < 0.45:
                ev = live.pop(rng.randrange(len(live)))
                events.append({"action": "free_requested", "addr": ev["addr"], "size": ev["size"]})
            elif rng.random() < 0.1:
                events.append({"action": "free_requested", "addr": 7, "size": 64})  # held before
            else:
                ev = {"action": "alloc", "addr": next_addr, "size": rng.choice([16, 512, 4096, 2**20])}
                next_addr += 1
                live.append(ev)
                events.append(ev)
            if rng.random() < 0.1:
                events.append({"action": "free_completed", "addr": next_addr - 1, "size": 0})
        # brute force: the total after each prefix, and the live set at the first maximum
        best, best_live, cur, alive = 0, [], 0, {}
        for ev in events:
            if ev["action"] == "alloc":
                alive[ev["addr"]] = ev
                cur += ev["size"]
            elif ev["action"] == "free_requested" and ev["addr"] in alive:
                cur -= alive.pop(ev["addr"])["size"]
            if cur > best:
                best, best_live = cur, sorted(a["addr"] for a in alive.values())
        peak, at_peak = memory_peak.live_at_peak(events)
        assert peak == best
        assert sorted(e["addr"] for e in at_peak) == best_live
        assert [e["size"] for e in at_peak] == sorted((e["size"] for e in at_peak), reverse=True)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--only", "nosuch"), "--only 'nosuch': choose one or more of"),
        (("--backends", "aot_eager"), "--backends 'aot_eager': choose one or more of"),
        (("--top", "0"), "--top 0: give a positive number"),
        (("--sources", "README.md"), "exists and is not a directory"),
        (("--sources", "README.md/sub"), "exists and is not a directory"),
        (("--sources", " "), "--sources '': give a directory path"),
    ],
)
def test_memory_peak_refuses_bad_arguments(args, message):
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benches", "memory_peak.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


def test_memory_peak_needs_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script measures")
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benches", "memory_peak.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0 and "needs a CUDA GPU" in r.stdout, r.stdout + r.stderr[-2000:]


def test_side_by_side_interleaves_the_backends_and_takes_medians():
    """runtime.side_by_side times a, b, a, b, ... (a drifting host weighs on both alike) and
    returns each one's median and every round's ratio b / a."""
    runtime = _runtime_module()
    calls, times = [], iter([10.0, 12.0, 30.0, 33.0, 11.0, 10.0, 9.0, 12.0, 10.5, 11.0])

    def bench(fn, warmup, rep):
        assert (warmup, rep) == (25, 7)
        calls.append(fn())
        return next(times)

    a, b, ratios = runtime.side_by_side(bench, lambda: "a", lambda: "b", rounds=5, rep=7)
    assert calls == ["a", "b"] * 5
    assert (a, b) == (10.5, 12.0)  # medians of [10, 30, 11, 9, 10.5] and [12, 33, 10, 12, 11]
    assert ratios == pytest.approx([1.2, 1.1, 10 / 11, 12 / 9, 11 / 10.5])
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        runtime.side_by_side(bench, lambda: "a", lambda: "b", rounds=0, rep=7)


def test_runtime_flush_timer_refuses_unknown_flushes():
    """``--flush``'s timers: do_bench's, or the event loop after a zeroing or a reading flush; any
    other name is a ValueError that lists the choices (before a CUDA buffer is allocated)."""
    runtime = _runtime_module()
    with pytest.raises(ValueError, match=r"flush must be one of \('do_bench', 'zero', 'read'\), got 'write'"):
        runtime._flushed_bench("write")
    with pytest.raises(ValueError, match="flush must be 'zero' or 'read', got 'do_bench'"):
        runtime.event_bench(lambda: None, "do_bench")


@pytest.mark.gpu
def test_flushed_timers_agree_on_a_copy_and_the_read_flush_spares_a_read_only_kernel():
    """On CUDA: a 512 MiB copy (it writes as much as it reads, and outlasts any write-back) takes the
    same time under do_bench, the zeroing event loop and the reading one (within 10%); a column sum
    of 256 MiB (read-only) is never slower after a reading flush than after a zeroing one, since the
    zeroing flush leaves dirty L2 lines that the timed kernel writes back. Each timer's fastest of
    5 interleaved rounds is compared: tests in other pytest-xdist workers share the GPU and only
    ever add time (under ``-n 8`` one round's three timings of the same copy can differ by far more
    than 10%)."""
    import torch

    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU")
    runtime = _runtime_module()
    src = torch.empty(128 * 2**20, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    rounds: dict[str, list[float]] = {f: [] for f in runtime.FLUSHES}
    for _ in range(5):
        for f in runtime.FLUSHES:
            rounds[f].append(runtime._flushed_bench(f)(lambda: dst.copy_(src), warmup=10, rep=50))
    assert all(t > 0 for ts in rounds.values() for t in ts), rounds
    times = {f: min(ts) for f, ts in rounds.items()}
    assert max(times.values()) <= 1.10 * min(times.values()), rounds
    x = torch.randn(8192, 16384, dtype=torch.bfloat16, device="cuda")
    zero, read = [], []
    for _ in range(5):
        zero.append(runtime.event_bench(lambda: x.sum(dim=0), "zero", rep=50))
        read.append(runtime.event_bench(lambda: x.sum(dim=0), "read", rep=50))
    assert 0 < min(read) <= 1.02 * min(zero), (read, zero)


def test_runtime_cpu_paths_need_the_interpreter_when_called_from_python(monkeypatch, capsys):
    """``runtime.main([...])`` from Python cannot set TRITON_INTERPRET before triton is imported
    (the script does, from its command line): without it the CPU paths are refused, not run with
    every graph falling back to eager."""
    runtime = _runtime_module()
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    for flag in ("--cpu-smoke", "--dry-run"):
        with pytest.raises(SystemExit) as e:
            runtime.main([flag, "--only", "softmax"])
        assert e.value.code == 2
        assert f"{flag} runs kernels in Triton's interpreter" in capsys.readouterr().err


def test_compile_time_ratio_cells():
    """The table's ratio: two decimals; "<= 0" when the backend's first call was no longer than
    aot_eager's (not a confusing "-0.00"); "nan" without a positive reference."""
    sys.path.insert(0, os.path.join(ROOT, "benches"))
    try:
        import compile_time
    finally:
        sys.path.pop(0)
    nan = float("nan")
    assert compile_time.format_ratio(0.5, 2.0) == "0.25"
    assert compile_time.format_ratio(0.004, 2.0) == "0.00"
    assert compile_time.format_ratio(-0.08, 2.0) == "<= 0"
    assert compile_time.format_ratio(0.0, 1.5) == "<= 0"
    assert compile_time.format_ratio(0.3, 0.0) == "nan"
    assert compile_time.format_ratio(0.3, -0.2) == "nan"
    assert compile_time.format_ratio(nan, 2.0) == "nan"
    assert compile_time.format_ratio(0.3, nan) == "nan"


def test_scans_bench_lists_refuses_unknown_cases_and_needs_a_gpu():
    import torch

    script = os.path.join(ROOT, "benches", "scans.py")
    r = subprocess.run([sys.executable, script, "--list"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "cumsum_dim0_f32" in r.stdout.split(), r.stdout + r.stderr[-2000:]
    r = subprocess.run(
        [sys.executable, script, "--only", "cumsum_dim0_f32,nosuch"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "unknown case(s) ['nosuch']" in r.stderr, r.stderr[-2000:]
    if not torch.cuda.is_available():
        r = subprocess.run(
            [sys.executable, script, "--only", "cumsum_dim0_f32"], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert r.returncode == 0 and "needs a CUDA GPU" in r.stdout, r.stdout + r.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# benches/models.py, the model zoo

ZOO = os.path.join(ROOT, "benches", "models.py")


def _zoo(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, ZOO, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _zoo_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tf_bench_models", ZOO)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tf_bench_models"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_zoo_cpu_smoke(tmp_path):
    """``--cpu-smoke``: tiny BERT, GPT-2, Llama and a timm ResNet, inference and a training step,
    through tilefuse in a child process (Triton's interpreter): every row passes accuracy against
    eager with the fp64 reference, and tilefuse compiled every graph handed to it (no graph ran
    eagerly), as the child reports from ``tilefuse.metrics``."""
    import csv
    import importlib.util

    out, table = tmp_path / "smoke.csv", tmp_path / "smoke.md"
    r = _zoo("--cpu-smoke", "--csv", str(out), "--out", str(table), timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = list(csv.DictReader(open(out)))
    models = ("tiny_bert", "tiny_gpt2", "tiny_llama") + (("tiny_resnet",) if importlib.util.find_spec("timm") else ())
    assert {(x["model"], x["mode"]) for x in rows} == {(m, mode) for m in models for mode in ("inference", "training")}
    for x in rows:
        assert x["backend"] == "tilefuse" and x["status"] == "ok", x
        assert x["accuracy"] == "pass" and x["acc_ref"] == "fp64", x
        assert x["eager_graphs"] == "0" and int(x["aten_graphs"]) >= 1 and int(x["kernels"]) >= 1, x
        assert float(x["speedup"]) > 0 and float(x["first_call_s"]) > 0, x
    text = table.read_text()
    assert "### smoke inference" in text and "### smoke training" in text and "0 not passed" in text


def test_zoo_child_that_does_not_finish_becomes_a_row(tmp_path):
    """A child past ``--timeout`` is killed and its rows say so; the zoo's exit status says a smoke
    row failed."""
    import csv

    out = tmp_path / "t.csv"
    r = _zoo("--cpu-smoke", "--only", "tiny_bert", "--timeout", "1", "--csv", str(out), timeout=120)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    rows = list(csv.DictReader(open(out)))
    assert [(x["model"], x["mode"], x["status"]) for x in rows] == [
        ("tiny_bert", "inference", "timeout"),
        ("tiny_bert", "training", "timeout"),
    ]


def test_zoo_resume_skips_rows_in_the_csv_and_reports_them(tmp_path):
    """``--resume`` starts no child for a (model, mode, backend) already in the CSV; the table is
    made from the CSV's rows, both backends side by side, with geomeans and the ratio."""
    zoo = _zoo_module()
    out = tmp_path / "z.csv"
    for backend, speed in (("tilefuse", 2.0), ("inductor", 1.0)):
        for mode in ("inference", "training"):
            zoo.append_csv(
                str(out),
                dict(suite="smoke", model="tiny_bert", mode=mode, backend=backend, status="ok", accuracy="pass",
                     speedup=speed, kernels=3, graphs=1, graph_breaks=0),
            )  # fmt: skip
    r = _zoo("--only", "tiny_bert", "--device", "cpu", "--resume", "--csv", str(out), timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "tiny_bert inference" not in r.stdout  # no child's progress line
    assert len(list(open(out))) == 5
    assert "| tiny_bert | pass | 2.00x | pass | 1.00x | 2.00x |" in r.stdout, r.stdout


def test_zoo_report_geomeans_and_failures():
    zoo = _zoo_module()
    rows = [
        dict(suite="hf", model="A", mode="inference", backend="tilefuse", status="ok", accuracy="pass", speedup="4"),
        dict(suite="hf", model="A", mode="inference", backend="inductor", status="ok", accuracy="pass", speedup="2"),
        dict(suite="hf", model="B", mode="inference", backend="tilefuse", status="ok", accuracy="fail_accuracy",
             speedup="1"),
        dict(suite="hf", model="B", mode="inference", backend="inductor", status="timeout"),
    ]  # fmt: skip
    text = zoo.report(rows, ["tilefuse", "inductor"])
    assert "| **geomean** | 1 not passed | 2.00x (2) | 1 not passed | 2.00x (1) | 2.00x (1) |" in text, text
    assert "**FAIL**" in text and "timeout" in text
    assert zoo.geomean([1.0, 4.0]) == 2.0 and zoo.geomean([]) is None


@pytest.mark.parametrize(
    "args, message",
    [
        (("--backends", "tilefsue"), "--backends 'tilefsue': choose one or more of"),
        (("--only", "NoSuchModel"), "--only: unknown model 'NoSuchModel'"),
        (("--shard", "3/2"), "--shard '3/2': i must be in 1..n"),
        (("--shard", "x"), "--shard 'x': give i/n"),
        (("--repeat", "0"), "0: give a positive number"),
        (("--cpu-smoke", "--backends", "inductor"), "--cpu-smoke runs tilefuse only"),
        (("--report", "--csv", "/nonexistent/z.csv"), "--report: no rows in"),
    ],
)
def test_zoo_refuses_bad_arguments(args, message):
    r = _zoo(*args, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


def test_zoo_lists_the_harness_models():
    """The three suites: the harness's HF families (one model each by default), its 18 TIMM models
    and the four LLMs; shards partition the list."""
    zoo = _zoo_module()
    core, full = zoo.zoo("core"), zoo.zoo("full")
    assert len([s for s in core if s.suite == "timm"]) == 18 and len([s for s in core if s.suite == "llm"]) == 4
    assert 25 <= len([s for s in core if s.suite == "hf"]) < len([s for s in full if s.suite == "hf"])
    assert {"BertForMaskedLM", "AlbertForMaskedLM", "T5ForConditionalGeneration", "XLNetLMHeadModel"} <= {
        s.name for s in core
    }
    r = _zoo("--list", "--suite", "timm", "--shard", "2/3", timeout=120)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 6, r.stdout


# --------------------------------------------------------------------------------------------
# benches/distributed.py, a GPT's training step under DDP, FSDP2 and tensor parallelism

DIST = os.path.join(ROOT, "benches", "distributed.py")


def _dist(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)  # a world of one, whatever launched pytest
    return subprocess.run(
        [sys.executable, DIST, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )


# benches/small_batch.py, small-batch forward and static-cache decoding

SMALL_BATCH = os.path.join(ROOT, "benches", "small_batch.py")


def test_small_batch_cpu_smoke(tmp_path):
    """``--cpu-smoke``: a tiny GPT-2, its forward and a static-cache ``generate``, through eager and
    tilefuse in both modes (reduce-overhead runs without CUDA graphs on CPU tensors): every row
    runs, matches eager (logits; generated tokens equal), and each tilefuse row compiled a graph
    with tilefuse and ran none eagerly (the script's exit status and its smoke lines)."""
    r = subprocess.run(
        [sys.executable, SMALL_BATCH, "--cpu-smoke", "--models", "gpt2", "--batches", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=dict(os.environ, TRITON_INTERPRET="1"),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("smoke gpt2 ")]
    assert len(lines) == 6, r.stdout[-3000:]
    for kind in ("forward", "decode"):
        for backend in ("tilefuse", "tilefuse-ro"):
            ln = next(x for x in lines if x.startswith(f"smoke gpt2 {kind} b1 {backend}:"))
            assert ": ok " in ln and "tilefuse graphs 0" not in ln and ln.endswith("eager 0"), ln
    assert "6 rows, 0 failed, 0 differ from eager, 0 tilefuse rows without a tilefuse graph" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--recipes", "dpp"), "--recipes 'dpp': choose one or more of ddp,fsdp,tp"),
        (("--backends", "tilefuse,aot"), "--backends 'tilefuse,aot': choose one or more of"),
        (("--steps", "0"), "0: give a positive number"),
        (("--dim", "10", "--heads", "4"), "--dim 10 is not a multiple of --heads 4"),
        (("--bucket-mb", "0"), "--bucket-mb 0.0: give a positive size"),
    ],
)
def test_distributed_bench_refuses_bad_arguments(args, message):
    r = _dist(*args, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


def test_distributed_bench_cpu_smoke(tmp_path):
    """``--cpu-smoke`` as a world of one (gloo, Triton's interpreter): a row per recipe and backend
    with positive timings, tilefuse's loss after the steps equal to eager's, and tilefuse compiling
    every graph (none fell back to eager)."""
    out = tmp_path / "rows.json"
    r = _dist("--cpu-smoke", "--backends", "eager,tilefuse", "--steps", "1", "--json", str(out), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(x["recipe"], x["backend"]) for x in rows] == [
        (rc, b) for rc in ("ddp", "fsdp", "tp") for b in ("eager", "tilefuse")
    ]
    eager = {x["recipe"]: x["loss"] for x in rows if x["backend"] == "eager"}
    for x in rows:
        assert x["world"] == 1 and x["ms_per_step"] > 0 and x["tokens_per_s"] > 0, x
        if x["backend"] == "tilefuse":
            assert x["graphs"] >= 2 and x["eager_graphs"] == 0, x
            assert abs(x["loss"] - eager[x["recipe"]]) < 1e-3, x
    assert "tp tilefuse:" in r.stdout and "x eager" in r.stdout, r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--models", "gpt3"), "--models 'gpt3': choose one or more of gpt2, llama, qwen"),
        (("--backends", "inductor,tilefsue"), "--backends 'inductor,tilefsue': choose one or more of"),
        (("--batches", "1,0"), "--batches '1,0': give positive integers"),
        (("--no-decode", "--decode-only"), "exclude each other"),
        (("--calls", "0"), "--calls 0: give a positive number"),
    ],
)
def test_small_batch_refuses_bad_arguments(args, message):
    r = subprocess.run([sys.executable, SMALL_BATCH, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# benches/launch_overhead.py, the wrapper's host time per launch (CPU)


def test_launch_overhead_measures_a_lean_cuda_wrapper():
    """A one-layer Llama config with ``dynamic=True``, its graph generated for ``cuda:0`` and run
    on the CPU with CUDA's entry points stood in for: every launch of the CUDA wrapper reaches the
    launcher's lean ``run`` (the stream fetched once per call, the integer arguments looked up),
    and the table has its parts with numbers."""
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benches", "launch_overhead.py"), "--model", "llama", "--dynamic",
         "--n-layer", "1", "--reps", "2", "--inner", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    n = int(re.search(r"(\d+) kernel launches per call", r.stdout).group(1))
    assert n >= 4 and f"lean launches: {n} of {n}" in r.stdout, r.stdout[-3000:]
    for part in ("stream", "alloc", "launch", "extern", "entry (CompiledGraph.__call__)"):
        assert re.search(rf"^\| {re.escape(part)} \| \d+ \| [\d.]+ \|", r.stdout, re.M), (part, r.stdout[-3000:])
    assert re.search(r"launcher call us per launch: [\d.]+", r.stdout)
