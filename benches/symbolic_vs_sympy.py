"""Side-by-side timing: tilefuse's native symbolic core vs torch's sympy path.

Times the operations of ``../shared/reference/sympy_baseline.md`` that the product calls through
the Python bindings (rows C, S, K, T, P) through ``tilefuse.symbolic`` and through torch's own
code — ``torch.utils._sympy.functions`` (FloorDiv/ModularIndexing),
``torch._inductor.sizevars.SizeVarAllocator`` (simplify_with_ranges, statically_known_*,
stride_vars) and ``SIMDKernel._split_iteration_ranges`` — in the same process, one after the
other. The baseline's M (sizevars misc, loop simplification) and R (range-tree entries) rows time
core functions that have no Python binding (the product does not call them): the Rust criterion
bench ``benches/symbolic.rs`` times them.

Method ("fresh" column of the baseline): every repetition builds brand-new, uniquely named symbols
(untimed; for torch, size symbols come from a fresh ShapeEnv as Dynamo makes them), then times one
call; GC is off in the timed region; the figure is the median over repetitions, in microseconds.
Each expression-valued row is also checked for value: both results are evaluated at random points
inside the ranges and must agree (torch is the oracle for value, not for form).

Usage:  python benches/symbolic_vs_sympy.py [--reps-torch 25] [--reps-tilefuse 100] [--batch 20] [--only C1,S8]
Prints a table of per-row times and ratios (torch / tilefuse) and the median and minimum ratio.
Targets (issue 2): median >= 100x, no row below 20x.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import sympy
import torch  # noqa: F401  (torch's sympy functions live under torch)
from torch._inductor.codegen.simd import SIMDKernel
from torch._inductor.sizevars import SizeVarAllocator
from torch._inductor.virtualized import V
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

import tilefuse.symbolic as ts

# --------------------------------------------------------------------------------------- torch side


class TorchCtx:
    """Fresh index symbols x0..x3 and ShapeEnv size symbols s0..s2 (hints 8192, 1024, 64)."""

    HINTS = (8192, 1024, 64)

    def __init__(self, k: int):
        self.x = [sympy.Symbol(f"x{i}_{k}", integer=True, nonnegative=True) for i in range(4)]
        self.shape_env = ShapeEnv()
        self.s = [
            self.shape_env.create_symbol(h, ConstantSource(f"sz{i}_{k}"), dynamic_dim=DimDynamic.DYNAMIC)
            for i, h in enumerate(self.HINTS)
        ]
        self.sizevars = SizeVarAllocator(self.shape_env)


class _FakeGraph:
    def __init__(self, sizevars):
        self.sizevars = sizevars


class TfCtx:
    """Fresh tilefuse symbols: x0..x3 index variables, s0..s2 positive sizes."""

    def __init__(self, k: int):
        self.x = [ts.sym(f"x{i}_{k}") for i in range(4)]
        self.s = [ts.sym(f"s{i}_{k}") for i in range(3)]


# --------------------------------------------------------------------------------------- rows


@dataclass
class Row:
    id: str
    what: str
    torch_fn: Callable[[int], Callable[[], Any]]  # k -> zero-arg call to time
    tf_fn: Callable[[int], Callable[[], Any]]
    check: Callable[[int], None] | None = None


def _fd(a, b):
    return FloorDiv(a, b)


def _mi(a, b, c):
    return ModularIndexing(a, b, c)


# Each expression row is written once, generically over (FloorDiv, ModularIndexing, x, s).
CONSTRUCT = {
    "C1": ("FloorDiv(x0 + 128*x1, 16)", lambda F, M, x, s: F(x[0] + 128 * x[1], 16)),
    "C2": ("ModularIndexing(x0 + 4096*x1, 64, 64)", lambda F, M, x, s: M(x[0] + 4096 * x[1], 64, 64)),
    "C3": ("FloorDiv(ModularIndexing(x0, 1, 4096), 64)", lambda F, M, x, s: F(M(x[0], 1, 4096), 64)),
    "C4": ("ModularIndexing(FloorDiv(x0 + 64*x1, 8), 1, 16)", lambda F, M, x, s: M(F(x[0] + 64 * x[1], 8), 1, 16)),
    "C5": ("ModularIndexing(ModularIndexing(x0, 1, 4096), 1, 64)", lambda F, M, x, s: M(M(x[0], 1, 4096), 1, 64)),
    "C6": ("FloorDiv(128*x1 + 16*x0, 16)", lambda F, M, x, s: F(128 * x[1] + 16 * x[0], 16)),
    "C7": ("ModularIndexing(128*x1 + x0, 1, 64)", lambda F, M, x, s: M(128 * x[1] + x[0], 1, 64)),
    "C8": ("FloorDiv(x0, 1)", lambda F, M, x, s: F(x[0], 1)),
    "C9": (
        "ModularIndexing(x0 + 64*x1 + 4096*x2, 64, 64)",
        lambda F, M, x, s: M(x[0] + 64 * x[1] + 4096 * x[2], 64, 64),
    ),
    "C10": ("FloorDiv(x0 + s0*x1, s0)", lambda F, M, x, s: F(x[0] + s[0] * x[1], s[0])),
    "C11": ("ModularIndexing(x0 + s0*s1*x1, s0, s1)", lambda F, M, x, s: M(x[0] + s[0] * s[1] * x[1], s[0], s[1])),
    "C12": (
        "x0 + 64*MI(x1, 1, 128) + 8192*FD(x1, 128)",
        lambda F, M, x, s: x[0] + 64 * M(x[1], 1, 128) + 8192 * F(x[1], 128),
    ),
    "C13": (
        "MI(x0,1,48) + 48*MI(x0,1536,64) + 3072*MI(x0,48,32) + 98304*FD(x0,98304)",
        lambda F, M, x, s: M(x[0], 1, 48) + 48 * M(x[0], 1536, 64) + 3072 * M(x[0], 48, 32) + 98304 * F(x[0], 98304),
    ),
    "C14": (
        "x0 + s2*MI(x1, 1, s1) + s1*s2*FD(x1, s1)",
        lambda F, M, x, s: x[0] + s[2] * M(x[1], 1, s[1]) + s[1] * s[2] * F(x[1], s[1]),
    ),
}

# simplify_with_ranges rows: (expr builder, ranges builder)
SIMPLIFY = {
    "S1": (lambda F, M, x, s: M(x[0] + 64 * x[1], 64, 64), lambda x, s: {x[0]: 64, x[1]: 64}),
    "S2": (lambda F, M, x, s: F(x[0] + 128 * x[1], 16), lambda x, s: {x[0]: 16, x[1]: 8}),
    "S3": (lambda F, M, x, s: M(x[0] + 4096 * x[1], 64, 64), lambda x, s: {x[0]: 4096, x[1]: 32}),
    "S4": (lambda F, M, x, s: M(x[0], 1, 64) + 64 * M(x[0], 64, 64), lambda x, s: {x[0]: 8192}),
    "S5": (lambda F, M, x, s: M(x[0], 1, 64), lambda x, s: {x[0]: 128}),
    "S6": (lambda F, M, x, s: x[0] + 64 * M(x[1], 1, 128) + 8192 * F(x[1], 128), lambda x, s: {x[0]: 64, x[1]: 16384}),
    "S7": (lambda F, M, x, s: x[0] + 64 * x[1] + 4096 * x[2], lambda x, s: {x[0]: 64, x[1]: 64, x[2]: 32}),
    "S8": (
        lambda F, M, x, s: M(x[0], 1, 48) + 48 * M(x[0], 1536, 64) + 3072 * M(x[0], 48, 32),
        lambda x, s: {x[0]: 98304},
    ),
    "S9": (lambda F, M, x, s: F(x[0] + s[0] * x[1], s[0]), lambda x, s: {x[0]: s[0], x[1]: s[1]}),
    "S10": (lambda F, M, x, s: M(x[0] + s[0] * x[1], s[0], s[1]), lambda x, s: {x[0]: s[0], x[1]: s[1]}),
}

# statically_known rows: (method, left, right)
KNOWN = {
    "K1": ("equals", lambda lit, x, s: lit(4096), lambda lit, x, s: lit(4096)),
    "K2": ("equals", lambda lit, x, s: s[0] * s[1], lambda lit, x, s: s[1] * s[0]),
    "K3": ("equals", lambda lit, x, s: s[0], lambda lit, x, s: lit(1)),
    "K4": ("equals", lambda lit, x, s: s[0] + s[1], lambda lit, x, s: s[1] + s[0] + 0 * s[2]),
    "K5": ("equals", lambda lit, x, s: FLOORDIV[0](s[0] * s[1], s[1]), lambda lit, x, s: s[0]),
    "K6": ("leq", lambda lit, x, s: lit(64), lambda lit, x, s: 4096),
    "K7": ("leq", lambda lit, x, s: s[0], lambda lit, x, s: s[0] * s[1]),
    "K8": ("leq", lambda lit, x, s: MODIDX[0](s[0], 1, 64), lambda lit, x, s: 64),
    "K9": ("leq", lambda lit, x, s: s[0], lambda lit, x, s: 8192),
    "K10": ("leq", lambda lit, x, s: FLOORDIV[0](s[0], 64), lambda lit, x, s: s[0]),
    "K11": ("gt", lambda lit, x, s: s[0] * s[1], lambda lit, x, s: s[0]),
    "K12": ("lt", lambda lit, x, s: x[0] + 64 * x[1], lambda lit, x, s: 4096),
    "K13": ("multiple_of", lambda lit, x, s: 64 * s[0], lambda lit, x, s: 16),
    "K14": ("multiple_of", lambda lit, x, s: s[0], lambda lit, x, s: 16),
    "K15": ("multiple_of", lambda lit, x, s: s[0] * s[1], lambda lit, x, s: s[1]),
    "K16": ("multiple_of", lambda lit, x, s: lit(67108864), lambda lit, x, s: 8192),
}
FLOORDIV = [None]  # set per side before building K rows
MODIDX = [None]

STRIDES = {
    "T1": (lambda F, M, x, s: x[0] + 64 * x[1] + 4096 * x[2], 3),
    "T2": (lambda F, M, x, s: 4096 * x[0] + x[1] + 64 * x[2], 3),
    "T3": (lambda F, M, x, s: x[0] + 64 * M(x[1], 1, 128) + 8192 * F(x[1], 128), 2),
    "T4": (lambda F, M, x, s: x[0] + s[0] * x[1] + s[0] * s[1] * x[2], 3),
}

SPLIT = {
    "P1": (lambda s: [4096, 1], lambda s: [[64, 64], []]),
    "P2": (lambda s: [8192 * 8192, 1], lambda s: [[8192, 8192], []]),
    "P3": (lambda s: [1024, 32], lambda s: [[32, 32, 32]]),
    "P4": (lambda s: [32, 1024, 1], lambda s: [[1024, 32], []]),
    "P5": (lambda s: [4, 8, 16, 1], lambda s: [[512], []]),
    "P6": (lambda s: [1024, 512], lambda s: [[1024], [512]]),
    "P7": (lambda s: [s[0] * s[1], 1], lambda s: [[s[0], s[1]], []]),
    "P8": (lambda s: [s[0], s[1] * s[2]], lambda s: [[s[0], s[1], s[2]]]),
}


def _tf_int(v):
    return ts.Integer(v)


def build_rows() -> list[Row]:
    rows: list[Row] = []

    for rid, (what, f) in CONSTRUCT.items():

        def tfn(k, f=f):
            c = TorchCtx(k)
            return lambda: f(_fd, _mi, c.x, c.s)

        def ffn(k, f=f):
            c = TfCtx(k)
            return lambda: f(ts.FloorDiv, ts.ModularIndexing, c.x, c.s)

        def chk(k, f=f):
            tc, fc = TorchCtx(k), TfCtx(k)
            _check_same(f(_fd, _mi, tc.x, tc.s), f(ts.FloorDiv, ts.ModularIndexing, fc.x, fc.s), tc, fc, None)

        rows.append(Row(rid, what, tfn, ffn, chk))

    for rid, (f, rng) in SIMPLIFY.items():

        def tfn(k, f=f, rng=rng):
            c = TorchCtx(k)
            e, r = f(_fd, _mi, c.x, c.s), rng(c.x, c.s)
            return lambda: c.sizevars.simplify_with_ranges(e, r)

        def ffn(k, f=f, rng=rng):
            c = TfCtx(k)
            e, r = f(ts.FloorDiv, ts.ModularIndexing, c.x, c.s), rng(c.x, c.s)
            return lambda: ts.simplify_with_ranges(e, r)

        def chk(k, f=f, rng=rng):
            tc, fc = TorchCtx(k), TfCtx(k)
            te = tc.sizevars.simplify_with_ranges(f(_fd, _mi, tc.x, tc.s), rng(tc.x, tc.s))
            fe = ts.simplify_with_ranges(f(ts.FloorDiv, ts.ModularIndexing, fc.x, fc.s), rng(fc.x, fc.s))
            _check_same(te, fe, tc, fc, rng)

        rows.append(Row(rid, "simplify_with_ranges", tfn, ffn, chk))

    for rid, (meth, lf, rf) in KNOWN.items():

        def tfn(k, meth=meth, lf=lf, rf=rf):
            c = TorchCtx(k)
            FLOORDIV[0], MODIDX[0] = _fd, _mi
            a, b = lf(sympy.Integer, c.x, c.s), rf(sympy.Integer, c.x, c.s)
            m = getattr(c.sizevars, f"statically_known_{meth}")
            return lambda: m(a, b)

        def ffn(k, meth=meth, lf=lf, rf=rf):
            c = TfCtx(k)
            FLOORDIV[0], MODIDX[0] = ts.FloorDiv, ts.ModularIndexing
            a, b = lf(_tf_int, c.x, c.s), rf(_tf_int, c.x, c.s)
            if meth == "gt":
                return lambda: ts.statically_known_lt(b, a)
            m = getattr(ts, f"statically_known_{meth}")
            return lambda: m(a, b)

        def chk(k, rid=rid, tfn=tfn, ffn=ffn):
            t, f = tfn(k)(), ffn(k)()
            # torch's ShapeEnv knows its sizes are >= 2, ours only >= 1: tilefuse may prove less
            # (K11), but it must never claim what torch refutes
            assert not (f and not t), (rid, t, f)

        rows.append(Row(rid, f"statically_known_{meth}", tfn, ffn, chk))

    for rid, (f, n) in STRIDES.items():

        def tfn(k, f=f, n=n):
            c = TorchCtx(k)
            e = f(_fd, _mi, c.x, c.s)
            return lambda: c.sizevars.stride_vars(e, c.x[:n])

        def ffn(k, f=f, n=n):
            c = TfCtx(k)
            e = f(ts.FloorDiv, ts.ModularIndexing, c.x, c.s)
            return lambda: ts.stride_vars(e, c.x[:n])

        rows.append(Row(rid, "stride_vars", tfn, ffn))

    for rid, (g, ln) in SPLIT.items():

        def tfn(k, g=g, ln=ln):
            c = TorchCtx(k)
            V.set_graph_handler(_FakeGraph(c.sizevars))
            groups, lengths = g(c.s), ln(c.s)
            groups = [sympy.sympify(x) for x in groups]
            lengths = [[sympy.sympify(x) for x in grp] for grp in lengths]
            return lambda: SIMDKernel._split_iteration_ranges(groups, lengths)

        def ffn(k, g=g, ln=ln):
            c = TfCtx(k)
            groups, lengths = g(c.s), ln(c.s)
            return lambda: ts.split_iteration_ranges(groups, lengths)

        rows.append(Row(rid, "split_iteration_ranges", tfn, ffn))

    return rows


def _check_same(te, fe, tc: TorchCtx, fc: TfCtx, rng):
    """Evaluate the torch (sympy) and tilefuse results at random points; they must agree."""
    rnd = random.Random(0)
    for _ in range(20):
        svals = [rnd.randint(2, 70) for _ in fc.s]
        xr = [64, 64, 64, 64]
        if rng is not None:
            tr = rng(tc.x, tc.s)
            for i, sx in enumerate(tc.x):
                if sx in tr:
                    n = tr[sx]
                    n = n if isinstance(n, int) else int(n.subs({tc.s[j]: svals[j] for j in range(3)}))
                    xr[i] = n
        xvals = [rnd.randrange(n) for n in xr]
        tmap = {**{tc.x[i]: xvals[i] for i in range(4)}, **{tc.s[i]: svals[i] for i in range(3)}}
        fmap = {**{fc.x[i]: xvals[i] for i in range(4)}, **{fc.s[i]: svals[i] for i in range(3)}}
        tv = int(sympy.sympify(te).subs(tmap))
        fv = fe.evaluate(fmap) if isinstance(fe, ts.Expr) else int(fe)
        if tv != fv:
            raise AssertionError(f"value mismatch: torch {te} = {tv}, tilefuse {fe} = {fv} at {fmap}")


def time_side(make: Callable[[int], Callable[[], Any]], reps: int, k0: int, batch: int = 1) -> float:
    """Median µs per call. Each sample builds ``batch`` fresh calls (untimed), then times running
    them back to back, so the timer's own overhead (~0.1 µs) does not swamp sub-µs calls."""
    samples = []
    k = k0
    for _ in range(reps):
        fns = [make(k + j) for j in range(batch)]
        k += batch
        gc.disable()
        t0 = time.perf_counter_ns()
        for fn in fns:
            fn()
        t1 = time.perf_counter_ns()
        gc.enable()
        samples.append((t1 - t0) / 1000.0 / batch)
    return statistics.median(samples)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps-torch", type=int, default=25)
    ap.add_argument("--reps-tilefuse", type=int, default=100)
    ap.add_argument("--batch", type=int, default=20, help="fresh tilefuse calls timed per sample")
    ap.add_argument("--only", default="", help="comma-separated row ids")
    ap.add_argument("--no-check", action="store_true", help="skip the value cross-check")
    args = ap.parse_args(argv)
    rows = build_rows()
    if args.only:
        want = set(args.only.split(","))
        rows = [r for r in rows if r.id in want]
    print(
        f"# tilefuse.symbolic vs torch {torch.__version__} sympy path (sympy {sympy.__version__}), fresh symbols; µs/op, median"
    )
    print(
        f"# torch reps {args.reps_torch} (1 call each), tilefuse reps {args.reps_tilefuse} x {args.batch} calls; python {sys.version.split()[0]}"
    )
    print()
    print("| id | operation | torch µs | tilefuse µs | ratio |")
    print("|---|---|---:|---:|---:|")
    ratios = []
    k = 1
    for row in rows:
        if row.check is not None and not args.no_check:
            row.check(10_000_000 + k)
        # warm both code paths once (imports, lazy init), with their own fresh symbols
        row.torch_fn(20_000_000 + k)()
        row.tf_fn(20_000_000 + k)()
        t = time_side(row.torch_fn, args.reps_torch, k)
        k += args.reps_torch
        f = time_side(row.tf_fn, args.reps_tilefuse, k, batch=args.batch)
        k += args.reps_tilefuse * args.batch
        ratio = t / f if f > 0 else float("inf")
        ratios.append((row.id, ratio))
        print(f"| {row.id} | {row.what} | {t:.1f} | {f:.2f} | {ratio:.0f}x |", flush=True)
    vals = [r for _, r in ratios]
    worst = min(ratios, key=lambda r: r[1])
    print()
    print(
        f"median ratio: {statistics.median(vals):.0f}x   geometric mean: {statistics.geometric_mean(vals):.0f}x   "
        f"minimum: {worst[1]:.0f}x ({worst[0]})   rows: {len(vals)}"
    )
    ok = statistics.median(vals) >= 100 and worst[1] >= 20
    print("targets (median >= 100x, every row >= 20x):", "MET" if ok else "NOT MET")
    return 0


if __name__ == "__main__":
    sys.exit(main())
