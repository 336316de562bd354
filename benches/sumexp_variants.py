"""GPU experiment: looped online log-sum-exp variants over 8192 rows of 32000 bf16 (cross-entropy's
normalizer), each at five (RBLOCK, num_warps) configs, one row per program, against the
device-to-device copy bandwidth.

A = the structure tilefuse generates (the row max updated once per loop iteration by a block
reduction, the running sum rescaled by it); B = per-lane running max and sum, one exp per element
(``exp(-|x - m|)``), lanes combined after the loop; C = per-lane, two exps per element. Each also
keeps the per-lane amax accumulator the fused kernel has. Results are in docs/benchmarks.md
(kernel studies): A at RBLOCK 2048 / 4 warps was fastest, which made that config the first
candidate of looped inner reductions.

    python benches/sumexp_variants.py        # needs a CUDA GPU
"""

import sys

import torch

if not torch.cuda.is_available():
    print("sumexp_variants.py times Triton kernels on a CUDA GPU; none found, nothing measured.")
    sys.exit(0)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def kA(x_ptr, m_out, s_out, rnumel: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    am = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    rm = tl.full([XBLOCK, 1], float("-inf"), tl.float32)
    s = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roff in range(0, rnumel, RBLOCK):
        r = roff + tl.arange(0, RBLOCK)[None, :]
        mask = r < rnumel
        x = tl.load(x_ptr + r + rnumel * xindex, mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        xm = tl.where(mask, x, float("-inf"))
        am = tl.maximum(am, xm, propagate_nan=tl.PropagateNan.ALL)
        nm = tl.maximum(rm, tl.reduce(xm, 1, _max_nan)[:, None], propagate_nan=tl.PropagateNan.ALL)
        s = s * tl.where(rm == nm, 1.0, tl.exp(rm - nm)) + tl.where(mask, tl.where(x == nm, 1.0, tl.exp(x - nm)), 0.0)
        rm = nm
    tl.store(m_out + xindex, tl.reduce(am, 1, _max_nan)[:, None])
    out = tl.sum(s, 1)[:, None]
    tl.store(s_out + xindex, tl.where(rm == float("inf"), float("nan"), out))


@triton.jit
def kB(x_ptr, m_out, s_out, rnumel: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    am = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    m = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    s = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roff in range(0, rnumel, RBLOCK):
        r = roff + tl.arange(0, RBLOCK)[None, :]
        mask = r < rnumel
        x = tl.load(x_ptr + r + rnumel * xindex, mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        xm = tl.where(mask, x, float("-inf"))
        am = tl.maximum(am, xm, propagate_nan=tl.PropagateNan.ALL)
        gt = xm > m
        e = tl.where(xm == m, 1.0, tl.exp(-tl.abs(xm - m)))
        s = tl.where(mask, tl.where(gt, s * e + 1.0, s + e), s)
        m = tl.where(gt, xm, m)
    mx = tl.max(m, 1)[:, None]
    tl.store(m_out + xindex, tl.reduce(am, 1, _max_nan)[:, None])
    out = tl.sum(tl.where(m == mx, s, s * tl.exp(m - mx)), 1)[:, None]
    tl.store(s_out + xindex, tl.where(mx == float("inf"), float("nan"), out))


@triton.jit
def kC(x_ptr, m_out, s_out, rnumel: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    am = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    m = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    s = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roff in range(0, rnumel, RBLOCK):
        r = roff + tl.arange(0, RBLOCK)[None, :]
        mask = r < rnumel
        x = tl.load(x_ptr + r + rnumel * xindex, mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        xm = tl.where(mask, x, float("-inf"))
        am = tl.maximum(am, xm, propagate_nan=tl.PropagateNan.ALL)
        nm = tl.maximum(m, xm)
        s = tl.where(mask, s * tl.where(m == nm, 1.0, tl.exp(m - nm)) + tl.where(xm == nm, 1.0, tl.exp(xm - nm)), s)
        m = nm
    mx = tl.max(m, 1)[:, None]
    tl.store(m_out + xindex, tl.reduce(am, 1, _max_nan)[:, None])
    out = tl.sum(tl.where(m == mx, s, s * tl.exp(m - mx)), 1)[:, None]
    tl.store(s_out + xindex, tl.where(mx == float("inf"), float("nan"), out))


N, V = 8192, 32000
x = torch.randn(N, V, device="cuda", dtype=torch.bfloat16) * 4
ref_m = x.float().amax(1)
ref_s = torch.exp(x.float() - ref_m[:, None]).sum(1)
src = torch.empty(N * V // 2, device="cuda", dtype=torch.float32)
dst = torch.empty_like(src)
copy_ms = do_bench(lambda: dst.copy_(src), rep=200)
copy_bw = 2 * src.numel() * 4 / (copy_ms * 1e-3) / 1e9
print(f"copy bandwidth {copy_bw:.0f} GB/s")
for name, k in (("A current", kA), ("B per-lane 1 exp", kB), ("C per-lane 2 exp", kC)):
    for rb, w in ((2048, 8), (1024, 4), (4096, 16), (2048, 4), (1024, 8)):
        m = torch.empty(N, device="cuda")
        s = torch.empty(N, device="cuda")

        def run(k=k, m=m, s=s, rb=rb, w=w):
            return k[(N,)](x, m, s, V, XBLOCK=1, RBLOCK=rb, num_warps=w)

        run()
        torch.cuda.synchronize()
        ok = torch.allclose(m, ref_m) and torch.allclose(s, ref_s, rtol=1e-4)
        ms = do_bench(run, rep=200)
        bw = N * V * 2 / (ms * 1e-3) / 1e9
        print(
            f"{name:18s} RBLOCK={rb:5d} warps={w:2d}: {ms * 1e3:7.1f} us  {bw:6.0f} GB/s  {bw / copy_bw * 100:5.1f}% copy  ok={ok}"
        )
