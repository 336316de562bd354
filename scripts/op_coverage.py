#!/usr/bin/env python
"""Run the OpInfo sweep over torch's whole OpInfo database and write ``docs/op_coverage.md``.

Every OpInfo runs through ``tilefuse.testing.opinfo.run_op`` (compiled with tilefuse and compared
with eager; on the CPU through Triton's interpreter, or with ``TILEFUSE_TEST_DEVICE=cuda`` and
``TRITON_INTERPRET=0`` on a GPU). Ops run one after another in a worker process; the
parent gives each op a time limit, and a worker that hangs or dies is ended (by its pid) and
replaced, the op recorded as ``fail`` with the cause, so one bad op cannot stop the sweep. Workers
are also replaced every ``--ops-per-worker`` ops to bound memory growth.

Each verdict is appended to a JSON-lines file as it arrives (``--jsonl``, default
``docs/op_coverage.jsonl``, committed beside the table); ``--resume`` skips the ops already
there, so an interrupted sweep continues where it stopped. ``--render`` only rewrites the table
from that file. Each verdict records the device it was judged on; a row judged on another device
than the table's header names (``TILEFUSE_TEST_DEVICE`` of the rendering run) says so in its note.

    TRITON_INTERPRET=1 python scripts/op_coverage.py                 # the whole database
    python scripts/op_coverage.py --ops add,sum,cat --out /tmp/x.md  # a few ops
    python scripts/op_coverage.py --resume                           # continue an interrupted run
    python scripts/op_coverage.py --resume --ops pow,atan2           # re-judge a few ops, keep the rest
    TILEFUSE_TEST_DEVICE=cuda TRITON_INTERPRET=0 python scripts/op_coverage.py   # on a GPU

Uses one worker process at a time (the CI machine has 2 cores shared with other work).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import multiprocessing as mp
import os
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

EXCLUDED = ("linalg", "fft", "sparse", "special")


def _worker(conn, max_samples: int) -> None:
    """Worker loop: receive an op name, send back its verdict (a dict); None ends the loop."""
    import warnings

    warnings.filterwarnings("ignore")
    from tilefuse.testing import opinfo

    by_name = {opinfo.op_name(op): op for op in opinfo.op_db()}
    conn.send("ready")
    while True:
        name = conn.recv()
        if name is None:
            return
        try:
            res = opinfo.run_op(by_name[name], max_samples).to_dict()
        except BaseException as e:  # noqa: BLE001 - the sweep itself must report, not die
            res = {
                "name": name,
                "family": opinfo.family(by_name[name]),
                "status": "fail",
                "note": f"sweep error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300],
                "dtypes": [],
                "samples": 0,
                "fallback_ops": [],
                "seconds": 0.0,
            }
        conn.send(res)


class Worker:
    """One worker process (spawned, so it imports torch/triton afresh with TRITON_INTERPRET set)."""

    def __init__(self, max_samples: int, start_timeout: float = 600):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, max_samples), daemon=True)
        self.proc.start()
        child.close()
        self.done = 0
        if not self.conn.poll(start_timeout) or self.conn.recv() != "ready":
            self.stop()
            raise RuntimeError("the sweep worker did not start")

    def run(self, name: str, timeout: float) -> dict | None:
        """The verdict on ``name``, or None when the worker hung (it is then ended) or died."""
        self.conn.send(name)
        self.done += 1
        try:
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            return None
        return None

    def alive(self) -> bool:
        return self.proc.is_alive()

    def stop(self) -> None:
        """End the worker: ask it to stop, then terminate/kill this one process by its pid."""
        try:
            if self.proc.is_alive():
                self.conn.send(None)
                self.proc.join(5)
        except (OSError, EOFError, BrokenPipeError):
            pass
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


def sweep(
    names: list[str], families: dict[str, str], jsonl: str, timeout: float, max_samples: int, ops_per_worker: int
) -> None:
    """Run every op of ``names`` in worker processes, appending each verdict to ``jsonl``."""
    from tilefuse.testing import opinfo

    worker = None
    t0 = time.time()
    with open(jsonl, "a") as out:
        for i, name in enumerate(names):
            if worker is None:
                worker = Worker(max_samples)
            t = time.time()
            res = worker.run(name, timeout)
            if res is None:
                died = not worker.alive()
                code = worker.proc.exitcode
                worker.stop()
                worker = None
                note = f"worker died (exit code {code})" if died else f"timeout: no verdict after {timeout:.0f} s"
                res = {
                    "name": name,
                    "family": families[name],
                    "status": "fail",
                    "note": note,
                    "dtypes": [],
                    "samples": 0,
                    "fallback_ops": [],
                    "seconds": time.time() - t,
                }
            res["device"] = opinfo.DEVICE  # where it was judged
            out.write(json.dumps(res) + "\n")
            out.flush()
            print(
                f"[{i + 1}/{len(names)} {time.time() - t0:7.0f}s] {name}: {res['status']} {res['note'][:120]}",
                flush=True,
            )
            if worker is not None and worker.done >= ops_per_worker:
                worker.stop()
                worker = None
    if worker is not None:
        worker.stop()


def load(jsonl: str) -> dict[str, dict]:
    """Verdicts from ``jsonl`` by op name (a later line for the same op wins)."""
    res: dict[str, dict] = {}
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            for line in f:
                line = line.strip()
                if line:
                    r = json.loads(line)
                    res[r["name"]] = r
    return res


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _where(device: str) -> str:
    return (
        "on the CPU (Triton's interpreter)"
        if device == "cpu"
        else f"on {device} (compiled Triton kernels, libdevice math; `TILEFUSE_TEST_DEVICE={device}`)"
    )


def render(results: list[dict], meta: dict) -> str:
    """The markdown of docs/op_coverage.md: totals, then one row per OpInfo."""
    counts = collections.Counter(r["status"] for r in results)
    inc = [r for r in results if r["family"] not in EXCLUDED and r["status"] != "skip"]
    inc_counts = collections.Counter(r["status"] for r in inc)
    share = 100.0 * inc_counts["native"] / len(inc) if inc else 0.0
    samples = sum(r["samples"] for r in results)
    lines = [
        "# Op coverage: torch's OpInfo database compiled with tilefuse",
        "",
        "Generated by `python scripts/op_coverage.py` (do not edit by hand); the sweep itself is",
        "`tilefuse.testing.opinfo`. Each OpInfo of `torch.testing._internal.common_methods_invocations.op_db`",
        f"runs {_where(meta.get('device', 'cpu'))} for float32, bfloat16 (or float16), an integer type and bool",
        f"where the op supports them, at most {meta['max_samples']} small samples per dtype, compiled with",
        '`torch.compile(fn, backend="tilefuse", dynamic=False)` with `fallback_on_error=False` and compared',
        "with eager using the OpInfo's tolerances (low-precision and float results that differ get a second",
        "chance against a float64 reference: no further from it than eager, plus the tolerance).",
        "",
        "- **native**: every sample matched eager and no aten FallbackKernel ran (extern kernels — mm, bmm,",
        "  convolution, attention — count as native);",
        "- **fallback**: every sample matched, at least one ran an aten op as a FallbackKernel (named in the note);",
        "- **fail**: a mismatch, or an error raised by tilefuse (or only on tilefuse's path: AOTAutograd's",
        "  `aot_eager` compiles the same function); the note has the first line;",
        "- **skip**: nothing judged (eager rejects the samples, random or uninitialized output, Dynamo or",
        "  AOTAutograd cannot compile the op, no float/int/bool dtype, an OpInfo skip).",
        "",
        f"torch {meta['torch']}, triton {meta['triton']}; generated {meta['date']}; per-op times summed: {meta['seconds']:.0f} s.",
        "",
        "## Totals",
        "",
        "| | ops |",
        "|---|---|",
        f"| native | {counts['native']} |",
        f"| fallback | {counts['fallback']} |",
        f"| fail | {counts['fail']} |",
        f"| skip | {counts['skip']} |",
        f"| total OpInfos | {len(results)} |",
        f"| samples compared | {samples} |",
        "",
        "**Native share** (ops exercised — native, fallback or fail — outside the linalg, fft, sparse and",
        f"special families): {inc_counts['native']} / {len(inc)} = **{share:.1f}%**"
        f" ({inc_counts['fallback']} fallback, {inc_counts['fail']} fail).",
        "",
        "By family (native / fallback / fail / skip):",
        "",
        "| family | native | fallback | fail | skip |",
        "|---|---|---|---|---|",
    ]
    fams = collections.defaultdict(collections.Counter)
    for r in results:
        fams[r["family"]][r["status"]] += 1
    for fam in sorted(fams):
        c = fams[fam]
        lines.append(
            f"| {fam}{' (excluded from the share)' if fam in EXCLUDED else ''} | {c['native']} | "
            f"{c['fallback']} | {c['fail']} | {c['skip']} |"
        )
    lines += ["", "## Ops", "", "| op | family | dtypes | samples | status | note |", "|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r["name"]):
        # a verdict re-judged (--resume --ops) on another device than the table's says so
        note = r["note"]
        if r.get("device", meta.get("device", "cpu")) != meta.get("device", "cpu"):
            note = f"{note}{'; ' if note else ''}judged {_where(r['device'])}"
        lines.append(
            f"| `{_cell(r['name'])}` | {r['family']} | {', '.join(r['dtypes'])} | {r['samples']} | "
            f"{r['status']} | {_cell(note)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description="OpInfo sweep -> docs/op_coverage.md")
    p.add_argument("--ops", help="comma-separated op names (default: the whole database)")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "op_coverage.md"))
    p.add_argument(
        "--jsonl",
        default=os.path.join(ROOT, "docs", "op_coverage.jsonl"),
        help="the per-op verdicts (kept in the repository so --resume can re-judge a few ops)",
    )
    p.add_argument("--resume", action="store_true", help="keep the verdicts already in --jsonl")
    p.add_argument("--render", action="store_true", help="only rewrite --out from --jsonl")
    p.add_argument(
        "--redo",
        default="",
        help="with --resume: run again the ops whose verdict in --jsonl has "
        "one of these statuses (comma-separated) or whose note contains --redo-note",
    )
    p.add_argument("--redo-note", default=None)
    p.add_argument("--timeout", type=float, default=420.0, help="seconds per op")
    p.add_argument("--max-samples", type=int, default=3)
    p.add_argument("--ops-per-worker", type=int, default=60)
    ns = p.parse_args(argv)

    import torch
    import triton

    from tilefuse.testing import opinfo

    ops = opinfo.op_db()
    families = {opinfo.op_name(op): opinfo.family(op) for op in ops}
    names = all_names = list(dict.fromkeys(opinfo.op_name(op) for op in ops))
    if ns.ops:
        wanted = [n.strip() for n in ns.ops.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in families]
        if unknown:
            p.error(f"unknown ops: {unknown}")
        names = wanted
    t0 = time.time()
    if not ns.render:
        if not ns.resume and os.path.exists(ns.jsonl):
            os.remove(ns.jsonl)
        done = load(ns.jsonl)
        redo = {st for st in ns.redo.split(",") if st}
        done = {
            k: r
            for k, r in done.items()
            if r["status"] not in redo
            and not (ns.redo_note and ns.redo_note in r["note"])
            and not (ns.ops and ns.resume and k in names)
        }  # --ops with --resume: run them again
        todo = [n for n in names if n not in done]
        sweep(todo, families, ns.jsonl, ns.timeout, ns.max_samples, ns.ops_per_worker)
    results = load(ns.jsonl)
    # --resume: the table covers every op with a verdict; otherwise the ops of this run
    rows = [results[n] for n in (all_names if ns.resume else names) if n in results]
    meta = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": datetime.date.today().isoformat(),
        "max_samples": ns.max_samples,
        "device": opinfo.DEVICE,
        "seconds": sum(r["seconds"] for r in rows),
    }
    with open(ns.out, "w") as f:
        f.write(render(rows, meta))
    c = collections.Counter(r["status"] for r in rows)
    print(f"wrote {ns.out}: {dict(c)} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
