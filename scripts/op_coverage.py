#!/usr/bin/env python
"""Run the OpInfo sweep over torch's whole OpInfo database and write ``docs/op_coverage.md``.

Every OpInfo runs through ``tilefuse.testing.opinfo.run_op`` (compiled with tilefuse and compared
with eager; on the CPU through Triton's interpreter, or with ``TILEFUSE_TEST_DEVICE=cuda`` and
``TRITON_INTERPRET=0`` on a GPU). ``--dynamic`` compiles with ``dynamic=True`` and writes
``docs/op_coverage_dynamic.md`` (verdicts in ``docs/op_coverage_dynamic.jsonl``) instead.

Ops run in ``--workers`` worker processes at once (default 1), each running one op after another;
the parent gives each op a time limit, and a worker that hangs or dies is ended (by its pid) and
replaced, the op recorded as ``fail`` with the cause, so one bad op cannot stop the sweep. Workers
are also replaced every ``--ops-per-worker`` ops to bound memory growth. With several workers each
gets an equal share of the cores for torch's threads, and compiles its kernels itself
(``TILEFUSE_COMPILE_WORKERS=1`` unless set): the workers are the parallelism. Every worker
compiles afresh (``TILEFUSE_GRAPH_CACHE=0`` unless set), so a verdict never depends on what an
earlier run left in the graph cache.

Each verdict is appended to a JSON-lines file as it arrives, in the order ops finish (``--jsonl``,
default ``docs/op_coverage.jsonl``, committed beside the table); ``--resume`` skips the ops already
there, so an interrupted sweep continues where it stopped. ``--render`` only rewrites the table
(sorted by op name) from that file. Each verdict records the device and mode it was judged in; a
row judged on another device than the table's header names (``TILEFUSE_TEST_DEVICE`` of the
rendering run), or with another ``dynamic``, says so in its note.

    TRITON_INTERPRET=1 python scripts/op_coverage.py                 # the whole database
    python scripts/op_coverage.py --ops add,sum,cat --out /tmp/x.md  # a few ops
    python scripts/op_coverage.py --dynamic --ops add,sum,cat --out /tmp/x.md --jsonl /tmp/x.jsonl
    python scripts/op_coverage.py --resume                           # continue an interrupted run
    python scripts/op_coverage.py --resume --ops pow,atan2           # re-judge a few ops, keep the rest
    TILEFUSE_TEST_DEVICE=cuda TRITON_INTERPRET=0 python scripts/op_coverage.py --workers 10            # on a GPU
    TILEFUSE_TEST_DEVICE=cuda TRITON_INTERPRET=0 python scripts/op_coverage.py --workers 10 --dynamic  # dynamic=True

On a shared CPU machine keep ``--workers 1``; on a GPU machine the workers share the one GPU
(8-12 on 16 cores).
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
os.environ.setdefault("TILEFUSE_GRAPH_CACHE", "0")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

EXCLUDED = ("linalg", "fft", "sparse", "special")


def _worker(conn, max_samples: int, dynamic: bool, threads: int) -> None:
    """Worker loop: receive an op name, send back its verdict (a dict); None ends the loop."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    from tilefuse.testing import opinfo

    by_name = {opinfo.op_name(op): op for op in opinfo.op_db()}
    conn.send("ready")
    while True:
        name = conn.recv()
        if name is None:
            return
        try:
            res = opinfo.run_op(by_name[name], max_samples, dynamic=dynamic).to_dict()
        except BaseException as e:  # noqa: BLE001 - the sweep itself must report, not die
            res = _failed(name, opinfo.family(by_name[name]), f"sweep error: {type(e).__name__}: {_line(e)}", 0.0)
            res["dynamic"] = dynamic
        conn.send(res)


def _line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else ""


def _failed(name: str, family: str, note: str, seconds: float) -> dict:
    """A ``fail`` verdict the sweep itself gives (the worker hung, died or raised)."""
    return {
        "name": name,
        "family": family,
        "status": "fail",
        "note": note[:300],
        "dtypes": [],
        "samples": 0,
        "fallback_ops": [],
        "seconds": seconds,
    }


class Worker:
    """One worker process (spawned, so it imports torch/triton afresh with TRITON_INTERPRET set).

    Starting does not wait: the worker says ``"ready"`` once it has loaded the OpInfo database, and
    the sweep's loop (``sweep``) hands it an op then. ``op`` is the op it is running (None: idle or
    starting) and ``since`` when it got it (or was started)."""

    def __init__(self, max_samples: int, dynamic: bool = False, threads: int = 0):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, max_samples, dynamic, threads), daemon=True)
        self.proc.start()
        child.close()
        self.done = 0
        self.ready = False
        self.op: str | None = None
        self.since = time.time()

    def give(self, name: str) -> None:
        """Hand the (ready, idle) worker one op."""
        self.conn.send(name)
        self.op, self.since = name, time.time()
        self.done += 1

    def receive(self):
        """The message waiting on the pipe ("ready" or a verdict), or None when the worker died."""
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            return None

    def alive(self) -> bool:
        return self.proc.is_alive()

    def stop(self) -> None:
        """End the worker: ask it to stop, then terminate/kill this one process by its pid."""
        try:
            if self.proc.is_alive() and self.op is None and self.ready:
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
        self.conn.close()


def _threads_per_worker(workers: int) -> int:
    """torch's intra-op threads for each of ``workers`` processes: the usable cores shared out
    (0, torch's default, for a single worker)."""
    if workers <= 1:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // workers)


def sweep(
    names: list[str],
    families: dict[str, str],
    jsonl: str,
    timeout: float,
    max_samples: int,
    ops_per_worker: int,
    workers: int = 1,
    dynamic: bool = False,
    start_timeout: float = 600.0,
) -> None:
    """Run every op of ``names`` in ``workers`` worker processes at once, appending each verdict to
    ``jsonl`` as it arrives (in the order they finish). An op past ``timeout`` seconds, or whose
    worker dies, is a ``fail``; its worker is ended and replaced. A worker is also replaced after
    ``ops_per_worker`` ops."""
    from multiprocessing.connection import wait

    from tilefuse.testing import opinfo

    todo = collections.deque(names)
    pool: list[Worker] = []
    threads = _threads_per_worker(workers)
    t0 = time.time()
    n_done = 0
    start_failures = 0  # workers in a row that died before they were ready

    def record(out, res: dict, w: Worker) -> None:
        nonlocal n_done
        res["device"] = opinfo.DEVICE  # where it was judged
        res["dynamic"] = dynamic
        out.write(json.dumps(res) + "\n")
        out.flush()
        n_done += 1
        print(
            f"[{n_done}/{len(names)} {time.time() - t0:7.0f}s w{w.proc.pid}] {res['name']}: "
            f"{res['status']} {res['note'][:120]}",
            flush=True,
        )

    def retire(w: Worker) -> None:
        w.stop()
        pool.remove(w)

    with open(jsonl, "a") as out:
        try:
            while todo or any(w.op is not None for w in pool):
                while len(pool) < min(workers, len(todo) + sum(w.op is not None for w in pool)):
                    pool.append(Worker(max_samples, dynamic, threads))
                for w in pool:
                    if w.ready and w.op is None and todo:
                        w.give(todo.popleft())
                now = time.time()
                deadlines = [w.since + (timeout if w.op is not None else start_timeout) for w in pool]
                wait([w.conn for w in pool], timeout=max(0.0, min(deadlines) - now) if deadlines else None)
                for w in list(pool):
                    if w.conn.poll():
                        msg = w.receive()
                        if msg == "ready":
                            w.ready, w.since = True, time.time()
                            start_failures = 0
                            continue
                        if msg is not None:
                            w.op = None
                            record(out, msg, w)
                            if w.done >= ops_per_worker:
                                retire(w)
                            continue
                        # the pipe closed: the worker died
                        w.proc.join(5)
                        code = w.proc.exitcode
                        if w.op is None:
                            start_failures += 1
                            retire(w)
                            if start_failures >= 3:
                                raise RuntimeError(f"sweep workers die while starting (exit code {code})")
                            continue
                        name, since = w.op, w.since
                        w.op = None
                        retire(w)
                        record(
                            out,
                            _failed(name, families[name], f"worker died (exit code {code})", time.time() - since),
                            w,
                        )
                    elif w.op is not None and time.time() - w.since > timeout:
                        name, since = w.op, w.since
                        retire(w)
                        note = f"timeout: no verdict after {timeout:.0f} s"
                        record(out, _failed(name, families[name], note, time.time() - since), w)
                    elif not w.ready and time.time() - w.since > start_timeout:
                        raise RuntimeError("a sweep worker did not start")
        finally:
            for w in pool:
                w.stop()


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
    dynamic = bool(meta.get("dynamic"))
    lines = [
        f"# Op coverage: torch's OpInfo database compiled with tilefuse, dynamic={dynamic}",
        "",
        f"Generated by `python scripts/op_coverage.py{' --dynamic' if dynamic else ''}` (do not edit by hand);"
        " the sweep itself is",
        "`tilefuse.testing.opinfo`. Each OpInfo of `torch.testing._internal.common_methods_invocations.op_db`",
        f"runs {_where(meta.get('device', 'cpu'))} for float32, bfloat16 (or float16), an integer type and bool",
        f"where the op supports them, at most {meta['max_samples']} small samples per dtype, compiled with",
        f'`torch.compile(fn, backend="tilefuse", dynamic={dynamic})` with `fallback_on_error=False` and compared',
        "with eager using the OpInfo's tolerances (low-precision and float results that differ get a second",
        "chance against a float64 reference: no further from it than eager, plus the tolerance).",
    ]
    if dynamic:
        lines += [
            "Sizes, and the sample's Python ints and floats, are symbols as Dynamo makes them; the samples of",
            "one dtype share the compiled function, so a sample that passes the guards of a graph compiled for",
            "an earlier sample's sizes runs that graph. An error is a fail when `aot_eager` with",
            "`dynamic=True` runs the same calls, a skip when it raises too.",
        ]
    lines += [
        "",
        "- **native**: every sample matched eager and no aten FallbackKernel ran (extern kernels — mm, bmm,",
        "  convolution, attention — count as native);",
        "- **fallback**: every sample matched, at least one ran an aten op as a FallbackKernel (named in the note);",
        "- **fail**: a mismatch, or an error raised by tilefuse (or only on tilefuse's path: AOTAutograd's",
        "  `aot_eager` compiles the same function); the note has the first line;",
        "- **skip**: nothing judged (eager rejects the samples, random or uninitialized output, Dynamo or",
        "  AOTAutograd cannot compile the op, no float/int/bool dtype, an OpInfo skip).",
        "",
        f"torch {meta['torch']}, triton {meta['triton']}; generated {meta['date']}; per-op times summed: {meta['seconds']:.0f} s"
        + (
            f"; the last run judged {meta['run'][0]} ops in {meta['run'][1]:.0f} s with {meta['run'][2]} worker(s)."
            if meta.get("run")
            else "."
        ),
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
    ]
    if dynamic:
        lines.append(
            f"| samples run by a graph compiled for other sizes | {sum(r.get('reused', 0) for r in results)} |"
        )
    lines += [
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
        # a verdict re-judged (--resume --ops) on another device or in another mode than the table's says so
        note = r["note"]
        if r.get("device", meta.get("device", "cpu")) != meta.get("device", "cpu"):
            note = f"{note}{'; ' if note else ''}judged {_where(r['device'])}"
        if bool(r.get("dynamic", False)) != dynamic:
            note = f"{note}{'; ' if note else ''}judged with dynamic={bool(r.get('dynamic', False))}"
        lines.append(
            f"| `{_cell(r['name'])}` | {r['family']} | {', '.join(r['dtypes'])} | {r['samples']} | "
            f"{r['status']} | {_cell(note)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description="OpInfo sweep -> docs/op_coverage.md")
    p.add_argument("--ops", help="comma-separated op names (default: the whole database)")
    p.add_argument(
        "--dynamic",
        action="store_true",
        help="compile with dynamic=True (default --out/--jsonl: docs/op_coverage_dynamic.md/.jsonl)",
    )
    p.add_argument("--out", default=None, help="the table (default docs/op_coverage.md)")
    p.add_argument(
        "--jsonl",
        default=None,
        help="the per-op verdicts (default docs/op_coverage.jsonl; kept in the repository so --resume "
        "can re-judge a few ops)",
    )
    p.add_argument("--workers", type=int, default=1, help="worker processes running ops at once")
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
    if ns.workers < 1:
        p.error("--workers must be at least 1")
    stem = os.path.join(ROOT, "docs", "op_coverage_dynamic" if ns.dynamic else "op_coverage")
    ns.out = ns.out or stem + ".md"
    ns.jsonl = ns.jsonl or stem + ".jsonl"
    if ns.workers > 1:
        os.environ.setdefault("TILEFUSE_COMPILE_WORKERS", "1")  # inherited by the spawned workers

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
    run = None
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
        sweep(todo, families, ns.jsonl, ns.timeout, ns.max_samples, ns.ops_per_worker, ns.workers, ns.dynamic)
        run = (len(todo), time.time() - t0, ns.workers)
    results = load(ns.jsonl)
    # --resume: the table covers every op with a verdict; otherwise the ops of this run
    rows = [results[n] for n in (all_names if ns.resume else names) if n in results]
    meta = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": datetime.date.today().isoformat(),
        "max_samples": ns.max_samples,
        "device": opinfo.DEVICE,
        "dynamic": ns.dynamic,
        "seconds": sum(r["seconds"] for r in rows),
        "run": run,
    }
    with open(ns.out, "w") as f:
        f.write(render(rows, meta))
    c = collections.Counter(r["status"] for r in rows)
    print(f"wrote {ns.out}: {dict(c)} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
