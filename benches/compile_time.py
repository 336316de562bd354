"""Cold compile time per workload: tilefuse vs Inductor vs aot_eager, static and ``dynamic=True``.

Every measurement runs in a fresh Python process with empty caches (its own ``TRITON_CACHE_DIR``,
``TILEFUSE_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR``, and ``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1``)
and times the first call of the compiled workload (forward, or forward + backward for training
workloads), synchronized. ``aot_eager`` is Dynamo + AOTAutograd with eager kernels, so

    backend time = first call (backend) - first call (aot_eager)

is what the backend itself adds: lowering, scheduling, codegen and kernel compilation (plus one
run of the kernels, negligible against compiling). Before compiling, each process runs the
workload once eagerly (not timed), so the one-time initialization of eager kernels (CUDA's lazy
loading of their modules, cuBLAS handles) is counted neither for the baseline nor for whichever
backend happens to call them: without that run, block_fwd_bwd's aot_eager first call (it runs
the eager attention backward) came out 1 s longer than tilefuse's whole first call, a negative
backend time. ``--cold-eager`` skips the eager run. Differences smaller than the run-to-run
spread (a few tenths of a second; more on the CPU) can still come out negative. Printed per workload and mode: each
backend's first call, tilefuse's and Inductor's backend times, and their ratio (tilefuse /
Inductor; the issue's target is <= 0.25), Dynamo's own timed sections per backend (frame compile,
bytecode tracing, the backend call, the joint trace, the lazy backward compile: what Dynamo and
AOTAutograd spent, beside what the backend did), then tilefuse's phases and the parts of Triton's warm-up
(driver, install hash, compiler set-up: each part's seconds in its background thread, and how
long the compiles waited for them), and on the GPU the autotune phase split into the timed configs'
first launches (binary lookup and load, launcher set-up) and their do_bench timings. With
``--warm`` a second
process per backend re-runs the same workload with the caches the cold process filled
(warm-cache recompile). A single process's first call varies by a few tenths of a second
(imports, the host's load), as large as a small workload's whole backend time: ``--repeat N``
runs N processes per backend (cold, and warm on each cold one's caches) and reports the median.
The processes are interleaved (round k runs every backend's k-th process before round k + 1), so
a host whose speed drifts during the run (seen on the GPU machines: aot_eager's first call of the
same workload ranged over 12.8-18.9 s within one run) weighs on every backend alike. Each
process's line also says where its wall time went (set-up, the eager run, the backend lookup, the
first call, and the interpreter's start and exit) and how many garbage collections the first call
ran and for how long (a full one took 0.3-0.5 s in a 12-layer model's process): on the GPU host a process lasted about 25 s
for a first call under 1 s, which bounds how many workloads one device call can measure.
``--variant NAME=VALUE[,NAME=VALUE...]`` (repeatable) adds a tilefuse run with those environment
variables set (``TILEFUSE_EAGER_BACKWARD=0``: an A/B of one option, interleaved with the rest),
printed under the table with its backend time and ratio; a value tilefuse refuses (``import
tilefuse`` checks them) is an argument error before anything is measured.

``--bytecode-cache DIR`` gives every process a Python bytecode cache under DIR
(``PYTHONPYCACHEPREFIX``), filled by one untimed process per backend and mode before the first
measured one (with ``--profile``, one before the profiled process). A normal installation has
the ``.pyc`` files of torch, Triton and sympy (pip writes them); the GPU host has none and sets
``PYTHONDONTWRITEBYTECODE``, so there each process compiles every module it imports from source. That cost is not the backend's, and it is not the same for
each: tilefuse's cold-start threads import Triton's compiler while Dynamo traces (rmsnorm with
``dynamic=True``: docs/benchmarks.md has its row with and without the cache).

Workloads: those of ``benches/runtime.py`` (bf16) plus ``gpt12_train``, a 12-layer GPT-2 small
training step (forward + backward of the LM loss, bf16, batch 8 x 512).

    python benches/compile_time.py                          # everything (needs a CUDA GPU)
    python benches/compile_time.py --only layernorm,block_fwd --modes dynamic
    python benches/compile_time.py --device cpu --only softmax   # the code path on the CPU (tiny sizes)
    python benches/compile_time.py --profile block_fwd          # cProfile of tilefuse's cold first call
    python benches/compile_time.py --profile block_fwd --warm   # ... of a warm-cache first call
    python benches/compile_time.py --profile block_fwd --profile-backend aot_eager --profile-out base.prof
    python benches/compile_time.py --only layernorm --modes static --warm --repeat 3   # medians of 3 processes
    python benches/compile_time.py --only gpt12_train --modes static --repeat 3 --variant TILEFUSE_EAGER_BACKWARD=0
    python benches/compile_time.py --only rmsnorm --modes dynamic --repeat 3 --bytecode-cache /tmp/pyc
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_T0 = time.perf_counter()  # this process's start (after the interpreter's own start-up)
BACKENDS = ("aot_eager", "inductor", "tilefuse")
MODES = ("static", "dynamic")


def format_ratio(backend_s: float, reference_s: float) -> str:
    """The table's ratio cell: ``backend_s / reference_s`` to two decimals; ``"<= 0"`` when the
    backend's time is at or below zero (its first call no longer than aot_eager's: a difference
    within the processes' spread, where a negative ratio, or "-0.00", would read as a number);
    ``"nan"`` when the reference time is not positive or either is missing (NaN)."""
    if backend_s != backend_s or reference_s != reference_s or reference_s <= 0:
        return "nan"
    if backend_s <= 0:
        return "<= 0"
    return f"{backend_s / reference_s:.2f}"


def _workload(name: str, device: str):
    """(fn, args, train) of a workload at the bench's size for ``device``."""
    import torch

    if name == "gpt12_train":
        try:
            from tilefuse import demo
        except ImportError:  # not installed: the checkout's package (built in place)
            sys.path.insert(0, os.path.join(HERE, "..", "python"))
            from tilefuse import demo

        size = "small" if device == "cuda" else "tiny"
        model, ids = demo.build_gpt2(size, device, n_layer=12 if device == "cuda" else 2)
        model = model.to(torch.bfloat16 if device == "cuda" else torch.float32).train()

        def step(ids):
            loss = model(ids, labels=ids).loss
            loss.backward()
            return loss

        return step, (ids,), True
    sys.path.insert(0, HERE)
    import runtime

    w = next((w for w in runtime.WORKLOADS if w.name == name), None)
    if w is None:
        raise SystemExit(f"unknown workload {name!r}; choose from {workload_names()}")
    size, dtype = ("small", torch.bfloat16) if device == "cuda" else ("tiny", torch.float32)
    fn, args = runtime._fresh(w.fn, "ct"), w.make(size, dtype, device)
    if args and isinstance(args[-1], int):
        # the block's head count is a model constant, not an input: with dynamic=True Dynamo
        # makes an int argument (or a closure's int) a symbol that may be 0, so it is passed as
        # a module global (a constant to Dynamo)
        global _N_HEAD
        *args, _N_HEAD = args
        fn = _block_fwd if name == "block_fwd" else _block_fwd_bwd
    return fn, tuple(args), w.train


_N_HEAD = 0


def _block_fwd(*tensors):
    import runtime

    return runtime.block(*tensors, n_head=_N_HEAD)


def _block_fwd_bwd(*tensors):
    import runtime

    out = runtime.block(*tensors, n_head=_N_HEAD)
    return runtime.torch.autograd.grad(out.float().square().mean(), tensors)


def workload_names() -> list[str]:
    sys.path.insert(0, HERE)
    import runtime

    names = [w.name for w in runtime.WORKLOADS]
    return names + [n for n in ("gpt12_train",) if n not in names]


def _child(name: str, backend: str, mode: str, device: str, prof=None) -> dict:
    """One cold (or warm) first call, in this fresh process (under ``prof``, a cProfile.Profile,
    when given: the first call alone, not the imports and set-up before it)."""
    import torch

    fn, args, train = _workload(name, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    stages = {"setup": time.perf_counter() - _T0}  # imports and the workload's inputs
    t = time.perf_counter()
    if not os.environ.get("CT_COLD_EAGER"):
        fn(*args)  # eager kernels initialized (see the module docstring); no compile cache touched
        sync()
    stages["eager"] = time.perf_counter() - t
    if backend == "tilefuse":
        from tilefuse import metrics

        metrics.reset()
    # not timed: torch.compile's first call imports Dynamo (3-5 s on the H200, with a spread of
    # seconds between processes, the same for every backend) and looks the backend up
    t = time.perf_counter()
    compiled = torch.compile(fn, backend=backend, dynamic=(mode == "dynamic") or None)
    sync()
    stages["lookup"] = time.perf_counter() - t
    gc_log = _GcLog()
    if prof is not None:
        prof.enable()
    t0 = time.perf_counter()
    gc_log.start()
    out = compiled(*args)
    if train and name != "gpt12_train":
        out = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
    sync()
    first = time.perf_counter() - t0
    gc_log.stop()
    if prof is not None:
        prof.disable()
    res = dict(first_call_s=first, dynamo=_dynamo_sections(), gc=gc_log.summary())
    stages["first call"] = first
    res["stages"] = {k: round(v, 2) for k, v in stages.items()}
    if backend == "tilefuse":
        res.update(
            kernels=metrics.generated_kernel_count,
            symbolic=metrics.symbolic_graph_count,
            specialized=metrics.specialized_graph_count,
            fallbacks=metrics.fallback_kernel_count,
            phases={k: round(v, 3) for k, v in metrics.phase_seconds.items()},
            warmup={k: round(v, 3) for k, v in metrics.warmup_seconds.items()},
            warmup_wait_s=round(metrics.warmup_wait_seconds, 3),
            graphs=metrics.generated_graph_count,
            jobs=len(metrics.precompile_job_seconds),
            job_sum_s=round(sum(metrics.precompile_job_seconds), 3),
            job_max_s=round(max(metrics.precompile_job_seconds, default=0.0), 3),
            load_s=round(metrics.precompile_load_seconds, 3),
            batch_s=[round(b, 2) for b in metrics.precompile_batch_seconds],
            autotune_configs=len(metrics.autotune_config_seconds),
            autotune_first_s=round(sum(f for f, _ in metrics.autotune_config_seconds), 3),
            autotune_bench_s=round(sum(b for _, b in metrics.autotune_config_seconds), 3),
            slowest_jobs=sorted(zip(metrics.precompile_job_seconds, metrics.precompile_job_labels), reverse=True)[:3],
        )
    return res


class _GcLog:
    """Python's cyclic garbage collections during the measured first call (``gc.callbacks``): how
    many per generation and their wall seconds. A full (generation 2) collection of a process
    holding a 12-layer model's traced graphs takes 0.3-0.5 s on the H200 host and lands in
    whichever backend's call happens to cross the collector's threshold: part of the spread
    between processes, which this makes visible."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = 0.0
        self._t = None

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        elif self._t is not None:
            self.seconds += time.perf_counter() - self._t
            self.counts[info["generation"]] += 1
            self._t = None

    def start(self) -> None:
        import gc

        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        import gc

        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def summary(self) -> dict:
        return {"collections": list(self.counts), "s": round(self.seconds, 3)}


# Dynamo's own timed sections (``torch._dynamo.utils.compile_times``), summed over the graphs:
# the whole frame compile, its bytecode tracing, the backend call (AOTAutograd: trace, partition,
# forward compile), the joint trace inside it, and the lazy backward compile at the first backward
DYNAMO_SECTIONS = (
    "_compile.compile_inner",
    "bytecode_tracing",
    "OutputGraph.call_user_compiler",
    "aot_trace_joint_graph",
    "backward._backward_impl",
    "gc",
)


def _dynamo_sections() -> dict:
    """Seconds per Dynamo timed section in ``DYNAMO_SECTIONS`` this process recorded (those it did
    not record are left out), read through Dynamo's public ``compile_times`` (csv form)."""
    from torch._dynamo.utils import compile_times

    got = compile_times(repr="csv", aggregate=True)
    if not got:
        return {}
    return {k: round(float(v), 3) for k, v in zip(*got) if k in DYNAMO_SECTIONS}


def _profile(name: str, mode: str, device: str, top: int, out: str | None = None, backend: str = "tilefuse") -> None:
    """``backend``'s (default tilefuse's) cold first call of one workload under cProfile, in this
    (fresh) process: tilefuse's compile phases and the top functions by own time and by cumulative
    time; with ``out``, the whole profile saved there too (``pstats.Stats(out)`` reads it, e.g. for
    ``print_callers``, or to set a tilefuse profile against an aot_eager one function by function)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    res = _child(name, backend, mode, device, prof)
    extra = f", phases {res['phases']}, kernels {res['kernels']}" if backend == "tilefuse" else ""
    g = res["gc"]
    print(
        f"# {name} {mode} {backend}: first call {res['first_call_s']:.2f} s{extra}; garbage collections "
        f"(generation 0/1/2) {'/'.join(map(str, g['collections']))}, {g['s']:.2f} s"
    )
    if res.get("dynamo"):
        print("# Dynamo sections (s): " + " ".join(f"{k}={v:.2f}" for k, v in res["dynamo"].items()))
    st = pstats.Stats(prof)
    if out:
        st.dump_stats(out)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)


def _process_env(caches: str, device: str, cold: bool, extra_env: dict | None = None) -> dict:
    """The environment of a measured process: this one's plus ``extra_env``, with every cache
    (Triton's, tilefuse's, Inductor's) under ``caches``, Inductor's caches forced off when
    ``cold``, and Triton's interpreter on off CUDA."""
    env = dict(os.environ, **(extra_env or {}))
    env.update(
        TRITON_CACHE_DIR=os.path.join(caches, "triton"),
        TILEFUSE_CACHE_DIR=os.path.join(caches, "tilefuse"),
        TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
        TRITON_INTERPRET="0" if device == "cuda" else "1",
    )
    if cold:
        env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    else:
        env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    return env


def _run(
    name: str, backend: str, mode: str, device: str, caches: str, cold: bool, extra_env: dict | None = None
) -> dict | None:
    env = _process_env(caches, device, cold, extra_env)
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", name, backend, mode, device],
        capture_output=True,
        text=True,
        env=env,
    )
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT ") :])
            res["process_s"] = time.perf_counter() - t0
            return res
    label = backend + (f" [{_variant_label(extra_env)}]" if extra_env else "")
    sys.stderr.write(f"--- {name} {label} {mode} failed:\n{r.stdout[-1500:]}{r.stderr[-3000:]}\n")
    return None


def _process_time(r: dict) -> str:
    """Where a measured process's wall time went (s): its stages as the child timed them (setup:
    imports and the workload's inputs; eager: the untimed eager run; lookup: ``torch.compile``'s
    backend lookup; first call: the measured call) and the rest (the interpreter's start-up and
    the exit: shutting down compile workers, freeing the device), then the garbage collections
    during the first call (``_GcLog``)."""
    st = r.get("stages", {})
    rest = r["process_s"] - sum(st.values())
    g = r.get("gc")
    collected = (
        (
            f"; first call's garbage collections (generation 0/1/2) "
            f"{'/'.join(map(str, g['collections']))}, {g['s']:.2f} s"
        )
        if g
        else ""
    )
    return (
        f"process {r['process_s']:.2f} s ("
        + ", ".join(f"{k} {v:.2f}" for k, v in st.items())
        + f", start+exit {rest:.2f}){collected}"
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def parse_variant(text: str) -> dict:
    """``--variant``'s ``NAME=VALUE[,NAME=VALUE...]`` as a dict of environment variables; raises
    ValueError naming the part that is not ``NAME=VALUE`` with a valid variable name."""
    out = {}
    for part in (p.strip() for p in text.split(",")):
        name, eq, value = part.partition("=")
        if not eq or not _ENV_NAME.match(name.strip()):
            raise ValueError(
                f"{part!r} is not NAME=VALUE with an environment variable name (e.g. TILEFUSE_EAGER_BACKWARD=0)"
            )
        out[name.strip()] = value.strip()
    return out


def _variant_problem(env: dict) -> str | None:
    """Why tilefuse would refuse the environment ``env`` (a ``--variant``), or None: ``import
    tilefuse`` checks every ``TILEFUSE_*`` variable and imports neither torch nor the native
    extension, so a fresh interpreter with ``env`` answers in a fraction of a second, before any
    measured process runs (a bad value used to fail every variant process after the others ran).
    A ``TILEFUSE_*`` name tilefuse does not read (a misspelt ``TILEFUSE_TINY_KERNAL_NUMEL``) is a
    problem too: ``import tilefuse`` only warns about it, and the variant would measure nothing."""
    names = [k for k in env if k.startswith("TILEFUSE_")]
    if not names:
        return None
    pkg = os.path.join(HERE, "..", "python")  # where a checkout's package is when it is not installed
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), pkg) if p)
    check = (
        "import sys, warnings; warnings.simplefilter('ignore'); import tilefuse, tilefuse.config as c\n"
        "bad = sorted(set(sys.argv[1:]) - c.ENVIRONMENT_VARIABLES)\n"
        "if bad: sys.exit(f'tilefuse does not read {bad} (misspelt?); the variables it reads: '\n"
        "                 f'{sorted(c.ENVIRONMENT_VARIABLES)}')"
    )
    r = subprocess.run([sys.executable, "-c", check, *names], capture_output=True, text=True, env=full)
    if r.returncode == 0:
        return None
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"importing tilefuse with it failed (exit status {r.returncode})"


def _variant_label(env: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in env.items())


def _median_run(runs: list) -> dict | None:
    """The run with the median first call (the lower middle of an even count); None if any failed."""
    if not runs or any(r is None for r in runs):
        return None
    return sorted(runs, key=lambda r: r["first_call_s"])[(len(runs) - 1) // 2]


def _spread(backend: str, colds: list, warms: list) -> str:
    def mmm(runs):
        ts = sorted(r["first_call_s"] for r in runs)
        return f"{ts[0]:.2f}/{ts[(len(ts) - 1) // 2]:.2f}/{ts[-1]:.2f}"

    return f"{backend} {mmm(colds)}" + (f", warm {mmm(warms)}" if warms else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument(
        "--modes", default="static,dynamic", help="static, dynamic, or static,dynamic (default: both, comma-separated)"
    )
    ap.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"subset of {BACKENDS} (aot_eager is always run: it is the baseline)",
    )
    ap.add_argument(
        "--warm",
        action="store_true",
        help="also time a warm-cache first call per backend (with --profile: profile a warm call)",
    )
    ap.add_argument(
        "--cold-eager", action="store_true", help="do not run the workload eagerly before compiling (see above)"
    )
    ap.add_argument(
        "--device", default=None, choices=("cuda", "cpu"), help="cuda (default when available) or cpu (tiny sizes)"
    )
    ap.add_argument(
        "--profile",
        metavar="WORKLOAD",
        help="instead: one backend's (--profile-backend; default tilefuse) cold first call of "
        "WORKLOAD (first of --modes) under cProfile, in a fresh process with empty caches",
    )
    ap.add_argument(
        "--profile-backend",
        default="tilefuse",
        choices=BACKENDS,
        help="--profile: the backend profiled (default tilefuse; aot_eager or inductor to "
        "set their first call beside tilefuse's)",
    )
    ap.add_argument("--top", type=int, default=None, help="--profile: entries per listing (default 25)")
    ap.add_argument("--profile-out", metavar="FILE", help="--profile: also save the whole profile to FILE (pstats)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="fresh processes per backend (and per warm run); the table shows the median "
        "first call (of an even count, the lower of the two middle ones), and a line "
        "under it min/median/max (default 1; not with --profile)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="also run tilefuse with these environment variables set (repeatable: one "
        "variant each), interleaved with the other backends; printed under the table",
    )
    ap.add_argument(
        "--bytecode-cache",
        metavar="DIR",
        help="every process reads and writes Python bytecode under DIR (PYTHONPYCACHEPREFIX, "
        "PYTHONDONTWRITEBYTECODE unset), primed by one untimed process per backend and mode "
        "before the first measured one: a normal installation's .pyc files, on a host whose "
        "packages have none (see above)",
    )
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--profile-here", action="store_true", help=argparse.SUPPRESS)  # the profiled process
    args = ap.parse_args(argv)
    # arguments checked here, before any child process runs
    # each list once, in the order given (``--only softmax,softmax`` measures it once)
    modes = list(dict.fromkeys(m.strip() for m in args.modes.split(",") if m.strip()))
    if not modes or [m for m in modes if m not in MODES]:
        ap.error(f"--modes {args.modes!r}: give one or more of {MODES}, comma-separated")
    chosen = list(dict.fromkeys(b.strip() for b in args.backends.split(",") if b.strip()))
    if not chosen or [b for b in chosen if b not in BACKENDS]:
        ap.error(f"--backends {args.backends!r}: choose one or more of {BACKENDS}, comma-separated")
    variants = []
    for v in args.variant:
        try:
            parsed = parse_variant(v)
            if parsed not in variants:  # the same variant twice is measured once
                variants.append(parsed)
        except ValueError as e:
            ap.error(f"--variant {v!r}: {e}")
        problem = _variant_problem(parsed)
        if problem:
            ap.error(f"--variant {v!r}: {problem}")
    if variants and "tilefuse" not in chosen:
        ap.error("--variant runs tilefuse with other settings: keep tilefuse in --backends")
    if variants and args.profile:
        ap.error("--variant is for the table; --profile profiles one process (set the variables in its environment)")
    if args.top is not None and not args.profile:
        ap.error("--top is for --profile (the number of profile entries listed)")
    if args.profile_out and not args.profile:
        ap.error("--profile-out is for --profile (where to save the profile)")
    if args.profile_backend != "tilefuse" and not args.profile:
        ap.error("--profile-backend is for --profile (the backend profiled)")
    if args.top is None:
        args.top = 25
    if args.top < 1:
        ap.error(f"--top {args.top}: give a positive number of profile entries")
    if args.profile_out:
        out_dir = os.path.dirname(os.path.abspath(args.profile_out))
        if os.path.isdir(args.profile_out):
            ap.error(f"--profile-out {args.profile_out!r} is a directory; give a file path")
        if not os.path.isdir(out_dir):
            ap.error(f"--profile-out {args.profile_out!r}: the directory {out_dir!r} does not exist")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give a positive number of processes per measurement")
    if args.repeat > 1 and args.profile:
        ap.error("--repeat is for the table; --profile profiles one process (leave --repeat out)")
    known = workload_names()
    names = list(dict.fromkeys(n.strip() for n in args.only.split(",") if n.strip())) if args.only else known
    for n in names + ([args.profile] if args.profile else []):
        if n not in known:
            ap.error(f"unknown workload {n!r}; choose from {known}")
    if not names:
        ap.error("--only names no workload")
    if args.device == "cuda" and not args.child:
        import torch

        if not torch.cuda.is_available():
            ap.error("--device cuda: no CUDA GPU is usable here; use --device cpu (tiny sizes) or a GPU machine")
    if args.bytecode_cache is not None:
        path = args.bytecode_cache
        if os.path.exists(path) and not os.path.isdir(path):
            ap.error(f"--bytecode-cache {path!r} is a file; give a directory")
        try:  # created if needed, and written to: a folder Python cannot write would time nothing cached
            os.makedirs(path, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as e:
            ap.error(
                f"--bytecode-cache {path!r}: cannot create or write that folder "
                f"({e.strerror or e}); give a writable directory"
            )
        # inherited by every child process (the measured ones, the priming ones, --profile's)
        os.environ["PYTHONPYCACHEPREFIX"] = os.path.abspath(path)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.cold_eager:
        os.environ["CT_COLD_EAGER"] = "1"  # read by the child processes
    if args.profile and not args.device and not args.child:
        import torch

        if not torch.cuda.is_available():  # as the table mode: the CPU only when asked for
            ap.error(
                "--profile measures a GPU compile and no CUDA GPU is usable here; add --device cpu "
                "to profile the same code path at tiny sizes"
            )
    if args.profile and args.profile_here:
        # the profiled process itself (its caches set up by the parent below)
        import torch

        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")
        _profile(args.profile, modes[0], device, args.top, args.profile_out, args.profile_backend)
        return 0
    if args.profile:
        # a fresh process with empty caches (cold), or with the caches a cold first call filled
        # (--warm), as the table's processes
        import torch

        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        mode = modes[0]
        caches = tempfile.mkdtemp(prefix=f"ct_{args.profile}_profile_")
        try:
            if args.bytecode_cache is not None:  # an untimed process fills it first, as for the table
                prime = tempfile.mkdtemp(prefix=f"ct_{args.profile}_prime_")
                ok = _run(args.profile, args.profile_backend, mode, device, prime, cold=True)
                shutil.rmtree(prime, ignore_errors=True)
                print(
                    f"# {args.profile} {mode} {args.profile_backend}: bytecode cache primed"
                    + ("" if ok is not None else " (the priming process failed)"),
                    flush=True,
                )
            if args.warm and _run(args.profile, args.profile_backend, mode, device, caches, cold=True) is None:
                return 1
            env = _process_env(caches, device, cold=not args.warm)
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--profile",
                args.profile,
                "--modes",
                mode,
                "--device",
                device,
                "--top",
                str(args.top),
                "--profile-backend",
                args.profile_backend,
                "--profile-here",
            ]
            cmd += ["--profile-out", os.path.abspath(args.profile_out)] if args.profile_out else []
            return subprocess.run(cmd, env=env).returncode
        finally:
            shutil.rmtree(caches, ignore_errors=True)
    if args.child:
        name, backend, mode, device = args.child
        print("RESULT " + json.dumps(_child(name, backend, mode, device)), flush=True)
        return 0

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        print(
            "compile_time.py measures GPU compiles and needs a CUDA GPU (none found); nothing measured. "
            "`--device cpu` runs the same code path at tiny sizes."
        )
        return 0
    backends = ["aot_eager"] + [b for b in chosen if b != "aot_eager"]
    dev = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    eager = "not run first (--cold-eager)" if args.cold_eager else "run once first"
    print(
        f"# cold compile (fresh process, caches off, eager workload {eager}), {dev}, torch {torch.__version__}; "
        "seconds; backend = first call - aot_eager's first call (warm backend: the warm first call - aot_eager's); "
        "ratio = tilefuse backend / Inductor backend",
        flush=True,
    )
    cols = (
        "| workload | mode | aot_eager s | Inductor s | tilefuse s | Inductor backend s | tilefuse backend s | ratio |"
    )
    if args.warm:
        cols += " Inductor warm backend s | tilefuse warm backend s | warm ratio |"
    skipped = [b for b in BACKENDS if b not in backends]
    if skipped:
        print(f"# not run (--backends): {', '.join(skipped)}; their columns and the ratio read nan")
    print(cols)
    print("|" + "---|" * (cols.count("|") - 1))
    failed = 0
    primed: set = set()  # (backend, mode) whose imports are in --bytecode-cache
    for name in names:
        for mode in modes:
            res, warm, spread = {}, {}, []
            # (label, backend, extra environment): the backends, then tilefuse's variants
            runs = [(b, b, {}) for b in backends] + [
                (f"tilefuse [{_variant_label(v)}]", "tilefuse", v) for v in variants
            ]
            colds: dict = {label: [] for label, _, _ in runs}
            warms: dict = {label: [] for label, _, _ in runs}
            if args.bytecode_cache is not None:
                for label, backend, env in runs:
                    if (backend, mode) not in primed:  # untimed: writes the bytecode of what it imports
                        primed.add((backend, mode))
                        caches = tempfile.mkdtemp(prefix=f"ct_{name}_{backend}_")
                        ok = _run(name, backend, mode, device, caches, cold=True, extra_env=env)
                        shutil.rmtree(caches, ignore_errors=True)
                        print(
                            f"#   {name} {mode} {backend}: bytecode cache primed"
                            + ("" if ok is not None else " (the priming process failed)"),
                            flush=True,
                        )
            # interleaved: round k runs every backend's k-th process (cold k, then warm k on the
            # caches cold k filled) before round k + 1
            for k in range(args.repeat):
                for label, backend, env in runs:
                    if None in colds[label]:
                        continue  # failed before: not run again
                    caches = tempfile.mkdtemp(prefix=f"ct_{name}_{backend}_")
                    r = _run(name, backend, mode, device, caches, cold=True, extra_env=env)
                    w = None
                    if r is not None and args.warm and backend != "aot_eager":
                        w = _run(name, backend, mode, device, caches, cold=False, extra_env=env)
                        if w is not None:
                            warms[label].append(w)
                    shutil.rmtree(caches, ignore_errors=True)  # this cold/warm pair's caches: done with
                    colds[label].append(r)
                    if r is not None:  # each process as it ends: a run cut short still leaves its data
                        print(
                            f"#   {name} {mode} {label} process {k + 1}/{args.repeat}: first call "
                            f"{r['first_call_s']:.2f} s"
                            + (f", warm {w['first_call_s']:.2f} s" if w else "")
                            + f"; {_process_time(r)}"
                            + (f"; warm {_process_time(w)}" if w else ""),
                            flush=True,
                        )
            for label, _, _ in runs:
                res[label] = _median_run(colds[label])
                if warms[label]:
                    warm[label] = _median_run(warms[label])
                if args.repeat > 1 and res[label] is not None:
                    spread.append(_spread(label, colds[label], warms[label]))
            if any(res[b] is None for b in backends):
                failed += 1
                print(f"| {name} | {mode} | FAILED ({[b for b in backends if res[b] is None]}) |", flush=True)
                continue
            base = res["aot_eager"]["first_call_s"]
            nan = {"first_call_s": float("nan")}
            ind, tf = res.get("inductor", nan)["first_call_s"], res.get("tilefuse", nan)["first_call_s"]
            ib, tb = ind - base, tf - base
            extra = res.get("tilefuse", {})
            note = "" if not extra.get("specialized") else f" ({extra['specialized']} graphs specialized)"
            line = (
                f"| {name} | {mode} | {base:.2f} | {ind:.2f} | {tf:.2f} | {ib:.2f} | {tb:.2f} | "
                f"{format_ratio(tb, ib)}{note} |"
            )
            if args.warm:
                iw = warm.get("inductor", nan).get("first_call_s", float("nan")) - base
                tw = warm.get("tilefuse", {}).get("first_call_s", float("nan")) - base
                line += f" {iw:.2f} | {tw:.2f} | {format_ratio(tw, iw)} |"
            print(line, flush=True)
            if spread:
                print(
                    f"#   first call over {args.repeat} processes (s, min/median/max): " + "; ".join(spread), flush=True
                )
            for v in variants:  # each tilefuse variant: its median first call, backend time and ratio
                label = f"tilefuse [{_variant_label(v)}]"
                vr, vw = res[label], warm.get(label)
                if vr is None:
                    failed += 1
                    print(f"#   variant {label}: FAILED (its output is above, on stderr)", flush=True)
                    continue
                vb = vr["first_call_s"] - base
                print(
                    f"#   variant {label}: first call {vr['first_call_s']:.2f} s, backend {vb:.2f} s, ratio "
                    f"{format_ratio(vb, ib)}"
                    + (f", warm backend {vw['first_call_s'] - base:.2f} s" if vw else "")
                    + "; phases (s): "
                    + " ".join(f"{k}={x:.2f}" for k, x in vr.get("phases", {}).items()),
                    flush=True,
                )
            for label, _, _ in runs:  # Dynamo's sections, per backend (median process)
                dyn = (res[label] or {}).get("dynamo") or {}
                if dyn:
                    print(
                        f"#   Dynamo sections, {label} (s): " + " ".join(f"{k}={x:.2f}" for k, x in dyn.items()),
                        flush=True,
                    )
            if "tilefuse" not in backends or not extra:
                continue
            ph = extra.get("phases", {})
            # cache_key and cache_lookup (the graph cache), lower, schedule, codegen, load
            # (module; waits for the warm-up), precompile (kernels compiled ahead: with
            # config.precompile_overlap only submitting and forking), cache_store, precompile_wait
            # (a first call waiting for the workers), on the GPU autotune, first_run (the rest of
            # each graph's first call), and for training graphs partition (the min-cut
            # partitioner); rest = Dynamo + the rest of AOTAutograd (see metrics.phase_seconds)
            print(
                "#   tilefuse phases (s): "
                + " ".join(f"{k}={v:.2f}" for k, v in ph.items())
                + f" rest={tf - sum(ph.values()):.2f}",
                flush=True,
            )
            wt = warm.get("tilefuse")
            if wt:  # the warm median process's phases (restore: kernels loaded from launch records)
                wph = wt.get("phases", {})
                print(
                    "#   tilefuse warm phases (s): "
                    + "".join(f"{k}={v:.3f} " for k, v in wph.items())
                    + f"rest={wt['first_call_s'] - sum(wph.values()):.2f}",
                    flush=True,
                )
            for label, r in (("cold", extra), ("warm", wt)):
                if r and r.get("warmup"):  # Triton's warm-up threads: each part, and the wait for them
                    print(
                        f"#   tilefuse {label} warm-up (s): "
                        + " ".join(f"{k}={v:.2f}" for k, v in r["warmup"].items())
                        + f", compiles waited {r.get('warmup_wait_s', 0.0):.2f}",
                        flush=True,
                    )
            if extra.get("jobs"):
                # compile jobs (kernel x config) run by the forked workers: their summed and
                # longest times, against the precompile wall time above
                print(
                    f"#   tilefuse precompile: {extra.get('graphs')} graphs, {extra['jobs']} jobs in workers, "
                    f"sum {extra['job_sum_s']:.2f} s, longest {extra['job_max_s']:.2f} s; loading their binaries "
                    f"here {extra.get('load_s', 0.0):.2f} s; each batch's wall, fork to last report (s): "
                    f"{extra.get('batch_s')}",
                    flush=True,
                )
                print(
                    "#   slowest jobs: " + "; ".join(f"{t:.2f} s {lab}" for t, lab in extra.get("slowest_jobs", [])),
                    flush=True,
                )
            if extra.get("autotune_configs"):
                # the autotune phase: each timed config's first launch (binary lookup, load,
                # launcher) and its do_bench timing; the rest is the autotuner's own work
                at = ph.get("autotune", 0.0)
                first, bench = extra["autotune_first_s"], extra["autotune_bench_s"]
                print(
                    f"#   tilefuse autotune: {extra['autotune_configs']} configs timed; first launches "
                    f"{first:.3f} s, timings {bench:.3f} s, the rest of the phase {at - first - bench:.3f} s",
                    flush=True,
                )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
