"""Compile time of a graph with many kernels — the main job's GPT-2 forward — under each way of
compiling its Triton kernels (needs a CUDA GPU; without one it says so and exits).

Every row runs in a fresh process with an empty Triton cache (``TRITON_CACHE_DIR``), except
``warm``, which reuses the cache the ``process`` row filled (a second process compiling the
same graph). Rows:

    lazy      compile_workers=0: no compiling ahead, Triton compiles each kernel at its first launch
    serial    compile_workers=1: every kernel compiled ahead, one after another, in this process
    process   compile_workers=N, compile_pool="process": N forked compile workers
    thread    compile_workers=N, compile_pool="thread": Triton's AsyncCompileMode with N threads
    warm      as process, with the Triton cache the process row left (binaries, autotuning timings)
    tune3     as process, with codegen offering 3 configs per kernel, so every kernel is autotuned

Columns: the first call's wall time (Dynamo, AOTAutograd, lowering, codegen, compiling, launch;
the "compile time" the demo prints), the part spent compiling ahead (``metrics.precompile_seconds``),
generated kernels, and the logits' largest difference from eager.

    python benches/compile_modes.py                       # every row, GPT-2 small (12 layers)
    python benches/compile_modes.py --rows lazy,process --n-layer 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROWS = ["lazy", "serial", "process", "thread", "warm", "tune3"]


def _child(row: str, n_layer: int) -> dict:
    """One measurement, in this (fresh) process; the environment was set by the parent."""
    import time

    import torch

    from tilefuse import demo, metrics

    if row == "tune3":
        from tilefuse.codegen import triton as T

        orig = T.TritonKernelCodegen.generate

        def generate(self):
            gk = orig(self)
            c = gk.configs[0]
            gk.configs = [c, {**c, "XBLOCK": max(1, c["XBLOCK"] // 2), "num_warps": 2}, {**c, "num_warps": 8}]
            return gk

        T.TritonKernelCodegen.generate = generate
    model, ids = demo.build_gpt2("small", "cuda", n_layer=n_layer)
    model.eval()
    with torch.no_grad():
        ref = model(ids).logits
        metrics.reset()
        compiled = torch.compile(model, backend="tilefuse")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = compiled(ids).logits
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        err = (out - ref).abs().max().item()
    return dict(
        row=row,
        first_call_s=round(first, 2),
        precompile_s=round(metrics.precompile_seconds, 2),
        kernels=metrics.generated_kernel_count,
        graphs=metrics.generated_graph_count,
        max_abs_err=err,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the rows, each in its own process, and print a table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {ROWS}")
    ap.add_argument("--workers", type=int, default=None, help="N for the parallel rows (default: usable cores)")
    ap.add_argument("--n-layer", type=int, default=12, help="GPT-2 layers (default 12, GPT-2 small)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(_child(args.child, args.n_layer)), flush=True)
        return 0

    import torch

    if not torch.cuda.is_available():
        print("compile_modes.py needs a CUDA GPU (none found); nothing measured")
        return 0
    from tilefuse import config

    workers = args.workers or config._usable_cores()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}")
    print(
        f"device: {torch.cuda.get_device_name()}; usable cores: {config._usable_cores()}; parallel rows use "
        f"{workers} workers; GPT-2 n_layer={args.n_layer}, batch 8 x 512, fp32, forward (no grad)",
        flush=True,
    )
    print(
        f"{'row':8} {'first call s':>12} {'precompile s':>12} {'kernels':>8} {'graphs':>6} {'max abs err':>11}",
        flush=True,
    )
    warm_dir = None
    settings = {
        "lazy": ("0", "process"),
        "serial": ("1", "process"),
        "process": (str(workers), "process"),
        "thread": (str(workers), "thread"),
        "warm": (str(workers), "process"),
        "tune3": (str(workers), "process"),
    }
    for row in rows:
        cache = tempfile.mkdtemp(prefix=f"triton_{row}_")
        if row == "warm":
            if warm_dir is None:  # fill a cache first
                warm_dir = cache
                _run(row="process", cache=warm_dir, workers=str(workers), pool="process", n_layer=args.n_layer)
            cache = warm_dir
        w, pool = settings[row]
        res = _run(row=row, cache=cache, workers=w, pool=pool, n_layer=args.n_layer)
        if row == "process":
            warm_dir = cache
        if res is None:
            print(f"{row:8} FAILED", flush=True)
            continue
        print(
            f"{row:8} {res['first_call_s']:12.2f} {res['precompile_s']:12.2f} {res['kernels']:8d} "
            f"{res['graphs']:6d} {res['max_abs_err']:11.2e}",
            flush=True,
        )
    return 0


def _run(row: str, cache: str, workers: str, pool: str, n_layer: int) -> dict | None:
    env = dict(
        os.environ,
        TRITON_CACHE_DIR=cache,
        TILEFUSE_COMPILE_WORKERS=workers,
        TILEFUSE_COMPILE_POOL=pool,
        TRITON_INTERPRET="0",
    )
    r = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", row, "--n-layer", str(n_layer)],
        capture_output=True,
        text=True,
        env=env,
    )
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    sys.stderr.write(r.stdout[-2000:] + r.stderr[-3000:])
    return None


if __name__ == "__main__":
    sys.exit(main())
