"""The main job's built-in example: tilefuse's native symbolic core on Inductor's indexing workload.

Run with ``python -m tilefuse.demo`` (``bash scripts/demo.sh`` sets everything up first).

It builds the index expressions Inductor produces for a few real kernels (a permuted read, a
reshape's div/mod digits, a dynamic-shape reduction), simplifies them with the kernels' loop ranges,
splits a node's iteration ranges onto a kernel's tiling, prints the Triton source for each, checks
every result against brute-force evaluation, and times the same simplifications through torch's
own sympy path (``torch._inductor.sizevars.SizeVarAllocator``) side by side.

Until the backend stages land (lowering, scheduling, codegen), this is what tilefuse runs end to
end; the next milestone replaces it with ``torch.compile(model, backend="tilefuse")`` on a model.
"""

from __future__ import annotations

import itertools
import statistics
import time


def _brute_force_equal(a, b, ranges, sizes=None) -> bool:
    """Evaluate a and b at every point of the (small) ranges; True when they agree everywhere."""
    syms = list(ranges)
    for point in itertools.product(*(range(int(ranges[s] if isinstance(ranges[s], int) else ranges[s].evaluate(sizes))) for s in syms)):
        env = dict(zip(syms, point))
        if sizes:
            env.update(sizes)
        if a.evaluate(env) != b.evaluate(env):
            return False
    return True


def main() -> int:
    from tilefuse import symbolic as ts

    x0, x1, x2 = ts.sym("x0"), ts.sym("x1"), ts.sym("x2")
    s0, s1 = ts.sym("s0"), ts.sym("s1")
    cases = [
        ("permuted read [64,64] (S1)", ts.ModularIndexing(x0 + 64 * x1, 64, 64), {x0: 64, x1: 64}, None),
        ("reshape digits [8192] -> [128,64] (S4)", ts.ModularIndexing(x0, 1, 64) + 64 * ts.ModularIndexing(x0, 64, 64), {x0: 8192}, None),
        ("view [98304] as [32,64,48] (S8)", ts.ModularIndexing(x0, 1, 48) + 48 * ts.ModularIndexing(x0, 1536, 64) + 3072 * ts.ModularIndexing(x0, 48, 32), {x0: 98304}, None),
        ("dynamic row index (S9)", ts.FloorDiv(x0 + s0 * x1, s0), {x0: s0, x1: s1}, {s0: 7, s1: 5}),
        ("dynamic digit (S10)", ts.ModularIndexing(x0 + s0 * x1, s0, s1), {x0: s0, x1: s1}, {s0: 6, s1: 4}),
    ]
    print("tilefuse native symbolic core — Inductor indexing workload\n")
    ok = True
    for title, expr, ranges, sizes in cases:
        simp = ts.simplify_with_ranges(expr, ranges)
        small = {k: (min(v, 64) if isinstance(v, int) else v) for k, v in ranges.items()}
        good = _brute_force_equal(expr, simp, small if sizes is None else ranges, sizes)
        ok &= good
        print(f"{title}\n  index      {expr}\n  simplified {simp}\n  triton     {ts.texpr(simp, 'tl.int32')}"
              f"\n  brute-force check: {'ok' if good else 'MISMATCH'}\n")

    groups, lengths = [32, 1024, 1], [[1024, 32], []]
    res = ts.split_iteration_ranges(groups, lengths)
    print(f"split_iteration_ranges(groups={groups}, lengths={lengths})\n  -> {res}\n")

    # side by side with torch's sympy path (fresh symbols each repetition, as a compile sees them)
    try:
        import sympy
        from torch._inductor.sizevars import SizeVarAllocator
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        from torch.utils._sympy.functions import ModularIndexing as TMI
    except Exception as e:  # pragma: no cover - torch is a dependency
        print(f"(torch unavailable for the side-by-side timing: {e})")
        return 0 if ok else 1
    t_torch, t_tf = [], []
    for k in range(15):
        y = sympy.Symbol(f"x0_{k}", integer=True, nonnegative=True)
        e = TMI(y, 1, 48) + 48 * TMI(y, 1536, 64) + 3072 * TMI(y, 48, 32)
        sv = SizeVarAllocator(ShapeEnv())
        t0 = time.perf_counter()
        sv.simplify_with_ranges(e, {y: 98304})
        t_torch.append(time.perf_counter() - t0)
    for k in range(200):
        y = ts.sym(f"x0_{k}")
        e = ts.ModularIndexing(y, 1, 48) + 48 * ts.ModularIndexing(y, 1536, 64) + 3072 * ts.ModularIndexing(y, 48, 32)
        t0 = time.perf_counter()
        ts.simplify_with_ranges(e, {y: 98304})
        t_tf.append(time.perf_counter() - t0)
    a, b = statistics.median(t_torch) * 1e6, statistics.median(t_tf) * 1e6
    print(f"simplify_with_ranges (S8), fresh symbols: torch/sympy {a:.0f} µs, tilefuse {b:.2f} µs -> {a / b:.0f}x faster")
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
