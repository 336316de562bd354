"""Scan kernels (``cumsum`` / ``logcumsumexp``) on CUDA: tilefuse vs PyTorch Inductor vs eager.

Each case compiles the same function with ``backend="tilefuse"`` and ``backend="inductor"``,
checks both against the scan computed in float64 (the largest absolute error of each, eager's
too), and times them side by side (``runtime.side_by_side``: ``--rounds`` interleaved
``triton.testing.do_bench`` timings each, medians). Printed per case: tilefuse, Inductor and
eager µs, the speed-up (Inductor time / tilefuse time; > 1: tilefuse faster), tilefuse's achieved
bandwidth (input read once, output written once) as a share of the device-to-device copy
bandwidth, and the three errors. Rows longer than 4096 elements are looped scans (a per-row carry
across chunks, ``TritonKernel.codegen_scan``); the ``dim0`` cases scan across rows (outer hint:
narrow column blocks, since a scan's row cannot be split between programs).

Exit status 1 when a tilefuse result is further from the float64 scan than twice the larger of
Inductor's and eager's errors (plus one unit in the output's last place), else 0. Without a CUDA
GPU it prints that it needs one and exits 0.

    python benches/scans.py                     # every case (needs a CUDA GPU)
    python benches/scans.py --only cumsum_dim0_f32 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# (name, function, shape, dtype)
CASES = [
    ("cumsum_rows_f32", lambda a: a.cumsum(1), (4096, 32768), torch.float32),
    ("cumsum_rows_bf16", lambda a: a.cumsum(1), (8192, 8192), torch.bfloat16),
    ("logcumsumexp_rows_f32", lambda a: torch.logcumsumexp(a, 1), (2048, 16384), torch.float32),
    ("cumsum_dim0_f32", lambda a: a.cumsum(0), (16384, 1024), torch.float32),
    ("cumsum_dim0_bf16", lambda a: a.cumsum(0), (16384, 1024), torch.bfloat16),
    ("cumsum_dim0_f32_wide", lambda a: a.cumsum(0), (8192, 4096), torch.float32),
    ("cumsum_dim0_f32_narrow", lambda a: a.cumsum(0), (65536, 256), torch.float32),
    ("cumsum_dim0_f16_short", lambda a: a.cumsum(0), (5000, 3), torch.float16),
]


def _ulp(dtype: torch.dtype, magnitude: float) -> float:
    """One unit in the last place of ``dtype`` at ``magnitude``."""
    return float(torch.finfo(dtype).eps) * max(1.0, magnitude)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--only", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timings per backend (medians)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)
    names = [c[0] for c in CASES]
    if args.list:
        print("\n".join(names))
        return 0
    only = None if args.only is None else set(args.only.split(","))
    if only is not None and only - set(names):
        ap.error(f"unknown case(s) {sorted(only - set(names))}; choose from {names}")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not torch.cuda.is_available():
        print("scans.py times kernels on a CUDA GPU; it needs a CUDA GPU and none was found: nothing measured.")
        return 0

    import runtime
    from triton.testing import do_bench

    import tilefuse  # noqa: F401 - registers the backend

    copy_bw = runtime.copy_bandwidth("cuda")
    print(
        f"# {torch.cuda.get_device_name()}, copy bandwidth {copy_bw:.0f} GB/s; errors: largest |result - float64 scan|"
    )
    print(
        "| case | shape | tilefuse µs | Inductor µs | eager µs | speed-up | tf %copyBW | err tilefuse | err Inductor | err eager |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    status = 0
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, fn, shape, dtype in CASES:
        if only is not None and name not in only:
            continue
        x = (torch.rand(shape, device="cuda", generator=gen) * 4 - 2).to(dtype)
        torch._dynamo.reset()
        tf = torch.compile(fn, backend="tilefuse")
        ind = torch.compile(fn, backend="inductor")
        exact = fn(x.double())
        errs = [(f(x).double() - exact).abs().max().item() for f in (tf, ind, fn)]
        allowed = 2 * max(errs[1], errs[2]) + _ulp(dtype, exact.abs().max().item())
        if not errs[0] <= allowed:
            status = 1
        t_tf, t_ind, _ = runtime.side_by_side(do_bench, lambda: tf(x), lambda: ind(x), rounds=args.rounds, rep=100)
        t_eager = do_bench(lambda: fn(x))
        moved = 2 * x.numel() * x.element_size()
        share = moved / (t_tf * 1e-3) / 1e9 / copy_bw
        flag = "" if errs[0] <= allowed else " **FAR FROM THE EXACT SCAN**"
        print(
            f"| {name}{flag} | {'x'.join(map(str, shape))} {str(dtype).replace('torch.', '')} | {t_tf * 1e3:.1f} | "
            f"{t_ind * 1e3:.1f} | {t_eager * 1e3:.1f} | {t_ind / t_tf:.2f} | {share:.0%} | {errs[0]:.3g} | "
            f"{errs[1]:.3g} | {errs[2]:.3g} |",
            flush=True,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
