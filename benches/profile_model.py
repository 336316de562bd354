"""Top GPU kernels of one zoo model under one backend (``torch.profiler``), to set tilefuse's kernels
beside Inductor's for the same model.

The model, inputs, mode and step are those of ``benches/models.py`` (same seed, batch size, dtype,
optimizer). The compiled step is called until warm (``--warmup``), then ``--iters`` calls run under
``torch.profiler`` with CUDA activity; the table lists the kernels by total CUDA time: name, calls,
total and mean microseconds, and share of all kernel time, plus the sums (a line also gives the
wall time per step measured without the profiler, and how many kernels of each kind ran:
Triton's own, and the rest: cuBLAS / cuDNN / flash attention / aten's). ``--backend eager`` profiles
the model without compiling. ``--trace FILE`` also writes a Chrome trace. ``--memory`` also
records one warm step's CUDA allocations (``torch.cuda.memory._record_memory_history``) and prints
the step's peak: the bytes live before the step (weights, inputs), and the blocks live at the peak
that the step allocated, largest first, each with the Python line that allocated it (for a
compiled graph, the generated wrapper's line).

Usage (on the GPU):
    python benches/profile_model.py --model BertForMaskedLM --backend tilefuse --mode inference
    python benches/profile_model.py --model BertForMaskedLM --backend inductor --mode inference
    python benches/profile_model.py --model Llama-3.2-1B --backend tilefuse --mode training --top 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import models as zoo  # noqa: E402  (benches/models.py)


def _kernel_rows(prof) -> list[tuple[str, int, float]]:
    """(name, calls, total us) of every GPU kernel, from the profiler's events."""
    from torch.autograd import DeviceType

    totals: dict[str, list] = {}
    for ev in prof.events():
        if ev.device_type != DeviceType.CUDA:  # device-side events: kernels, memcpy, memset
            continue
        t = totals.setdefault(ev.name, [0, 0.0])
        t[0] += 1
        t[1] += ev.time_range.elapsed_us()  # the kernel's own duration
    return sorted(((n, c, us) for n, (c, us) in totals.items()), key=lambda r: -r[2])


def _memory_peak(step, model, inputs) -> dict:
    """One warm step under the CUDA caching allocator's history: the bytes allocated before it,
    the peak's bytes, and the blocks (size, allocating frame) the step had live at its peak."""
    import torch

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    try:
        step(model, inputs)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    live: dict[int, tuple[int, str]] = {}
    cur, best, at_peak = 0, 0, {}
    for ev in (e for trace in snap["device_traces"] for e in trace):
        if ev["action"] == "alloc":
            live[ev["addr"]] = (ev["size"], _frame(ev.get("frames", ())))
            cur += ev["size"]
            if cur > best:
                best, at_peak = cur, dict(live)
        elif ev["action"] == "free_completed" and ev["addr"] in live:
            cur -= live.pop(ev["addr"])[0]
    return {"before": before, "peak": before + best, "blocks": sorted(at_peak.values(), key=lambda b: -b[0])}


def _frame(frames) -> str:
    """The innermost frame outside torch and the standard library, with its source line."""
    import linecache

    for f in frames:
        name = f.get("filename", "")
        if not name.endswith(".py") or "/torch/" in name or "/python3" in name:
            continue  # C++ frames, torch's and the standard library's Python
        text = linecache.getline(name, f.get("line", 0)).strip()
        return f"{os.path.basename(name)}:{f.get('line')} {text[:100]}"
    return "(no Python frame)"


def _print_peak(peak: dict, top: int) -> None:
    gib = 2**30
    print(
        f"# memory: {peak['before'] / gib:.3f} GiB live before the step, peak {peak['peak'] / gib:.3f} GiB; "
        f"blocks the step had live at its peak: {len(peak['blocks'])}, "
        f"{sum(b[0] for b in peak['blocks']) / gib:.3f} GiB"
    )
    for size, where in peak["blocks"][:top]:
        print(f"{size / 2**20:10.1f} MiB  {where}")


def _is_triton(name: str) -> bool:
    return name.startswith(("triton_", "tf_", "tilefuse_")) or "triton" in name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    ap.add_argument("--model", required=True, help="a name of benches/models.py --list")
    ap.add_argument("--backend", default="tilefuse", choices=("tilefuse", "inductor", "eager"))
    ap.add_argument("--mode", default="inference", choices=zoo.MODES)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--trace", default="", help="also write a Chrome trace here")
    ap.add_argument("--memory", action="store_true", help="also print what is live at one step's peak")
    opts = ap.parse_args(argv)
    try:
        spec = zoo.find_spec(opts.model)
    except KeyError:
        ap.error(f"--model {opts.model!r}: unknown (benches/models.py --list shows the names)")
    if opts.mode == "training" and not spec.training:
        ap.error(f"{spec.name} runs inference only (as in the harness)")

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: the profile is of GPU kernels; nothing run")
        return 0
    warnings.filterwarnings("ignore")
    torch.backends.cuda.matmul.allow_tf32 = True
    device = "cuda"
    if opts.backend == "tilefuse":
        import tilefuse  # noqa: F401

    lowp = not spec.fp32_only
    runner = zoo.Runner(spec, opts.mode, device, amp=lowp and opts.mode == "training")
    grad = torch.enable_grad() if opts.mode == "training" else torch.no_grad()
    with grad:
        model, inputs = zoo.build(spec, device, opts.batch_size, opts.mode)
        model.train(opts.mode == "training")
        if lowp and opts.mode == "inference":
            model, inputs = model.to(torch.bfloat16), zoo._cast(inputs, torch.bfloat16)
        runner.init_optimizer(model)
        fn = runner.fn()
        step = fn if opts.backend == "eager" else torch.compile(fn, backend=zoo._backend(opts.backend))
        t0 = time.perf_counter()
        step(model, inputs)
        torch.cuda.synchronize()
        print(f"# {spec.name} {opts.mode} {opts.backend}: first call {time.perf_counter() - t0:.1f} s")
        for _ in range(opts.warmup):
            step(model, inputs)
        walls = [zoo._timed(step, model, inputs, device) for _ in range(max(opts.iters, 3))]
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(opts.iters):
                step(model, inputs)
            torch.cuda.synchronize()
        if opts.memory:
            peak = _memory_peak(step, model, inputs)
    if opts.trace:
        prof.export_chrome_trace(opts.trace)
    rows = _kernel_rows(prof)
    total = sum(us for _, _, us in rows) or 1.0
    n = opts.iters
    print(
        f"# wall per step (no profiler): median {statistics.median(walls) * 1e3:.3f} ms; "
        f"GPU kernel time per step {total / n / 1e3:.3f} ms; kernel launches per step: "
        f"{sum(c for _, c, _ in rows) / n:.0f} ({sum(c for nm, c, _ in rows if _is_triton(nm)) / n:.0f} Triton)"
    )
    print(f"{'calls/step':>10} {'us/step':>10} {'us/call':>9} {'share':>6}  kernel")
    for name, calls, us in rows[: opts.top]:
        print(f"{calls / n:10.1f} {us / n:10.1f} {us / calls:9.1f} {us / total:6.1%}  {name[:140]}")
    rest = rows[opts.top :]
    if rest:
        print(f"{'':>10} {sum(us for _, _, us in rest) / n:10.1f} {'':>9} {'':>6}  ({len(rest)} more kernels)")
    if opts.memory:
        _print_peak(peak, opts.top)
    if opts.backend == "tilefuse":
        from tilefuse import metrics

        print(
            f"# tilefuse: kernels {metrics.generated_kernel_count}, fallback ops {metrics.fallback_kernel_count}, "
            f"extern calls {metrics.extern_kernel_count}, eager graphs {metrics.eager_graph_count}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
