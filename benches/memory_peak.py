"""Where a workload's peak memory goes: the allocations alive at the peak of one call, per backend.

For each chosen workload of ``benches/runtime.py`` (full sizes, bf16) and each backend, the compiled
workload is called once to compile and warm up, then once more with the CUDA caching allocator's
history recorded (``torch.cuda.memory._record_memory_history``). Replaying that history's
allocations and frees gives the peak of the call (MiB allocated beyond what was held before it,
as ``runtime.py``'s ``peak_mib`` column) and the blocks alive at that moment; the largest are
printed with the first stack frame outside torch (for tilefuse, the line of the generated call
that allocated the buffer). Setting the two backends' lists side by side shows which buffers one
holds at its peak that the other does not.

    python benches/memory_peak.py --only block_fwd_bwd
    python benches/memory_peak.py --only mlp,block_fwd --backends tilefuse --top 10
    python benches/memory_peak.py --only block_fwd_bwd --sources peak_src   # and copy the generated calls

Needs a CUDA GPU (the allocator's history is CUDA's).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("tilefuse", "inductor")


def live_at_peak(events: list[dict]) -> tuple[int, list[dict]]:
    """Replay an allocator trace (``_snapshot()["device_traces"][k]``: dicts with ``action``,
    ``addr``, ``size``): returns the peak of the bytes allocated during the trace (those held
    before it not counted) and the allocation events alive at that peak, largest first. A block
    counts as freed at ``free_requested`` (the tensor is gone; the allocator may still wait for
    streams before reusing it); a free of a block allocated before the trace is ignored."""
    live: dict = {}
    cur = peak = 0
    at_peak: list[dict] = []
    for ev in events:
        action = ev.get("action")
        if action == "alloc":
            live[ev["addr"]] = ev
            cur += ev["size"]
            if cur > peak:
                peak, at_peak = cur, list(live.values())
        elif action == "free_requested" and ev.get("addr") in live:
            cur -= live.pop(ev["addr"])["size"]
    return peak, sorted(at_peak, key=lambda e: -e["size"])


def _own_frame(ev: dict) -> dict:
    """The first stack frame of an allocation outside torch and site-packages (else the first)."""
    frames = ev.get("frames") or []
    own = [
        f
        for f in frames
        if "site-packages" not in f.get("filename", "")
        and "/torch/" not in f.get("filename", "")
        and f.get("filename", "").endswith(".py")
    ]
    return (own or frames or [{"filename": "?", "line": 0, "name": "?"}])[0]


def _where(ev: dict) -> str:
    """``file:line function`` of the allocation's first frame outside torch."""
    f = _own_frame(ev)
    return f"{os.path.basename(f.get('filename', '?'))}:{f.get('line', 0)} {f.get('name', '?')}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--only",
        default="block_fwd_bwd",
        help="comma-separated workloads of benches/runtime.py (default block_fwd_bwd)",
    )
    ap.add_argument("--backends", default=",".join(BACKENDS), help=f"subset of {BACKENDS}, comma-separated")
    ap.add_argument("--top", type=int, default=20, help="allocations listed per backend (default 20)")
    ap.add_argument(
        "--sources",
        metavar="DIR",
        help="also copy the files that allocated the blocks alive at the "
        "peak (the generated calls of both backends) into DIR",
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    import runtime as RT

    known = [w.name for w in RT.WORKLOADS]
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    if not names or [n for n in names if n not in known]:
        ap.error(f"--only {args.only!r}: choose one or more of {known}")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or [b for b in backends if b not in BACKENDS]:
        ap.error(f"--backends {args.backends!r}: choose one or more of {BACKENDS}")
    if args.top < 1:
        ap.error(f"--top {args.top}: give a positive number of allocations")
    if args.sources is not None:
        if not args.sources.strip():
            ap.error("--sources '': give a directory path")
        parent = os.path.abspath(args.sources)
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            ap.error(f"--sources {args.sources!r}: {parent!r} exists and is not a directory; give a directory path")
    import torch

    if not torch.cuda.is_available():
        print("memory_peak.py needs a CUDA GPU (it reads the CUDA allocator's history); nothing measured.")
        return 0
    for w in RT.WORKLOADS:
        if w.name not in names:
            continue
        torch.manual_seed(0)
        inputs = w.make("full", torch.bfloat16, "cuda")
        for backend in backends:
            fn = RT._compile(w.fn, backend)
            out = fn(*inputs)  # compile, autotune, warm up
            del out
            torch.cuda.synchronize()
            held = torch.cuda.memory_allocated()
            torch.cuda.memory._record_memory_history(max_entries=500_000)
            try:
                out = fn(*inputs)
                torch.cuda.synchronize()
                snap = torch.cuda.memory._snapshot()
            finally:
                torch.cuda.memory._record_memory_history(enabled=None)
            del out
            events = snap["device_traces"][torch.cuda.current_device()]
            peak, alive = live_at_peak(events)
            order = {id(ev): i for i, ev in enumerate(events)}
            last = max(alive, key=lambda ev: order[id(ev)]) if alive else None
            print(
                f"== {w.name} {backend}: peak {peak / 2**20:.1f} MiB beyond {held / 2**20:.1f} MiB held "
                f"before the call; {len(alive)} blocks alive at the peak, reached by the allocation at "
                f"{_where(last) if last else '-'}",
                flush=True,
            )
            if args.sources:
                os.makedirs(args.sources, exist_ok=True)
                for path in sorted({_own_frame(ev).get("filename", "") for ev in alive}):
                    if os.path.isfile(path):
                        shutil.copy(path, os.path.join(args.sources, os.path.basename(path)))
            for ev in alive[: args.top]:
                print(f"   {ev['size'] / 2**20:9.1f} MiB  {_where(ev)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
