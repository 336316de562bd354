"""The device's measured peaks, against which the kernel report puts each kernel.

Peak bandwidth: the best of a few timed copies of a large tensor (bytes read plus bytes written,
per second): on CUDA 256 MiB per copy, timed with CUDA events; on the CPU 64 MiB, timed with
``time.perf_counter``. Peak FLOP/s: the best of a few timed square matrix products (2·n³ FLOPs
each): on CUDA n = 8192 in bfloat16 (tensor cores) and in float32 (TF32 as torch is set), on the
CPU n = 1024 in float32. These are what this device does with torch's own kernels at report time,
not the vendor's figures; on a busy machine they are lower.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import torch


@dataclass
class Peaks:
    """Measured peaks of one device: ``bandwidth`` in bytes/s, ``flops`` in FLOP/s per dtype
    name (``"bfloat16"``, ``"float32"``), ``how``: a sentence saying how they were measured."""

    device: str
    bandwidth: float
    flops: dict = field(default_factory=dict)
    how: str = ""

    @property
    def top_flops(self) -> float:
        """The highest FLOP/s measured (the roofline's compute roof)."""
        return max(self.flops.values()) if self.flops else 0.0


def _best_seconds(fn, reps: int, cuda: bool) -> float:
    """The shortest of ``reps`` timed runs of ``fn`` (after one untimed warm-up run)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            best = min(best, a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return best


def measure_peaks(device: str | torch.device) -> Peaks:
    """Measure the peak copy bandwidth and matrix-product FLOP/s of ``device`` (a CUDA device or
    ``"cpu"``); takes about a second (the CPU's about as long: smaller sizes)."""
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize(dev)
    nbytes = (256 if cuda else 64) << 20
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    t = _best_seconds(functools.partial(dst.copy_, src), 10 if cuda else 3, cuda)
    bandwidth = 2 * nbytes / t
    flops = {}
    n = 8192 if cuda else 1024
    for dtype in (torch.bfloat16, torch.float32) if cuda else (torch.float32,):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        t = _best_seconds(functools.partial(torch.mm, a, b), 5 if cuda else 3, cuda)
        flops[str(dtype).removeprefix("torch.")] = 2 * n**3 / t
    how = (
        f"copy of {nbytes >> 20} MiB (read + write) and {n}x{n} matrix products "
        f"({', '.join(flops)}), best of a few runs, measured on {dev} at report time"
    )
    return Peaks(str(dev), bandwidth, flops, how)
