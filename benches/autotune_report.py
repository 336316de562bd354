"""Which autotuning candidates win: every kernel tilefuse generates for the chosen workloads of
``benches/runtime.py`` (full sizes, bf16), with each candidate config's time as Triton's autotuner
measured it, the winner, and how much faster the winner is than the heuristic's first config.

Pointwise kernels are given their autotuning candidates too (``config.autotune_pointwise`` on
while compiling), so the report also says whether one config suffices for them. Results are in
docs/benchmarks.md (benches/autotune_report.py).

    python benches/autotune_report.py                       # every memory-bound workload and the blocks
    python benches/autotune_report.py --only softmax,block_fwd_bwd

Needs a CUDA GPU (autotuning times kernels on the device).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = (
    "silu_mul,bias_gelu,softmax,layernorm,rmsnorm,column_sum,transpose_add,nchw_to_nhwc_relu,"
    "cross_entropy,mlp,block_fwd,block_fwd_bwd"
)


def _kind(cfg: dict) -> str:
    return "red" if "RBLOCK" in cfg else ("tile" if "YBLOCK" in cfg else "pw")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=DEFAULT, help="comma-separated workloads of benches/runtime.py")
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    import runtime as RT

    known = [w.name for w in RT.WORKLOADS]
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        ap.error(f"--only {args.only!r}: choose one or more of {known}")
    import torch

    if not torch.cuda.is_available():
        print("autotune_report.py needs a CUDA GPU (autotuning times kernels on the device); nothing measured.")
        return 0
    from tilefuse import config

    seen: set[str] = set()
    rows = []
    for w in RT.WORKLOADS:
        if w.name not in names:
            continue
        torch.manual_seed(0)
        args_ = w.make("full", torch.bfloat16, "cuda")
        with config.patch(autotune_pointwise=True):
            RT._compile(w.fn, "tilefuse")(*args_)
        torch.cuda.synchronize()
        for mname, mod in list(sys.modules.items()):
            if not mname.startswith("tilefuse_generated_") or mname in seen:
                continue
            seen.add(mname)
            for ln in getattr(mod, "_launchers", []):
                if not ln.timings:
                    continue
                times = {}
                for k, c in enumerate(ln._triton_configs):
                    t = ln.timings.get(str(c))
                    if t is not None:
                        times[k] = t[0] if isinstance(t, (list, tuple)) else float(t)
                if not times:
                    continue
                first = times.get(0, float("nan"))
                best_k = min(times, key=times.get)
                rows.append(
                    (
                        w.name,
                        ln.fn.__name__,
                        _kind(ln.configs[0]),
                        len(times),
                        first,
                        times[best_k],
                        ln.configs[best_k],
                        ln.configs[0],
                    )
                )
    print("workload          kernel         kind  n  first config ms  best ms  first/best  winner  (first)")
    for name, kname, kind, n, tf, tb, win, first in rows:
        print(f"{name:<17} {kname:<14} {kind:<4} {n:>2} {tf:15.4f} {tb:8.4f} {tf / tb:10.3f}  {win}  ({first})")
    for kind in ("pw", "tile", "red"):
        ks = [r for r in rows if r[2] == kind and math.isfinite(r[4])]
        if ks:
            won = sum(1 for r in ks if r[4] <= r[5] * 1.01)
            print(
                f"# {kind}: {len(ks)} kernels, first config within 1% of the best in {won}, "
                f"largest first/best {max(r[4] / r[5] for r in ks):.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
