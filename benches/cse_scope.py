"""Kernel CSE lookups: the native table the codegen uses (``CseScope``) vs a Python dict-chain scope.

Records every CSE scope operation of real compiles (scope creation, ``get``, the write after a
miss), then replays the recorded sequence against both implementations and reports the time per
operation and per compile. The native scope must not make compiling slower.

Recording: the codegen's scope class (``tilefuse.codegen.cse.Scope``) is replaced by a recording
subclass of the dict-chain reference (``cse.DictScope``) while the workloads compile on the CPU (``TRITON_INTERPRET=1``,
graph cache off, Dynamo reset before each workload). Workloads: ``gpt2`` (the tiny GPT-2 of
``tilefuse.demo``, forward under ``no_grad``), ``gpt2_train`` (forward + backward), ``ln_softmax``
(layer_norm then softmax of a 64 x 256 tensor).

Replay: each run gets fresh copies of the key strings (the codegen builds each key with an
f-string just before the lookup, so Python has not cached its hash yet), and calls exactly what
the codegen calls: ``scope.get(key)``, then on a miss ``scope.put(key, var)`` (the codegen's write;
``scope.cache[key] = var`` is timed as well). The figure is the best of ``--repeat`` runs;
``loop`` is the replay loop with the calls left out, subtracted to give the cost of the calls
alone. Every replay's ``get`` results must equal the recorded ones (the same CSE decisions, so the
same kernel text).

``--check-kernels`` also compiles each workload twice more, with the Python and with the native
scope in the codegen, and compares the generated kernels' sources (up to the process-wide
numbering of indirect-index symbols ``ind<N>``).

    python benches/cse_scope.py                      # all workloads
    python benches/cse_scope.py --only ln_softmax --repeat 50
    python benches/cse_scope.py --check-kernels
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Any, Callable

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TILEFUSE_GRAPH_CACHE", "0")

GET, PUT, NEW = 0, 1, 2
WORKLOADS = ("gpt2", "gpt2_train", "ln_softmax")


def _scope_modules() -> list[Any]:
    """The module whose ``Scope`` the codegen's CSE table builds its scopes from."""
    from tilefuse.codegen import cse

    return [cse]


class _Patch:
    """Replace ``Scope`` in ``mods`` for the duration of a ``with`` block."""

    def __init__(self, mods: list[Any], cls: type) -> None:
        self.mods, self.cls, self.saved = mods, cls, []

    def __enter__(self) -> None:
        self.saved = [m.Scope for m in self.mods]
        for m in self.mods:
            m.Scope = self.cls

    def __exit__(self, *exc: Any) -> None:
        for m, c in zip(self.mods, self.saved):
            m.Scope = c


def _recording_class(base: type, trace: list, results: list) -> type:
    """A subclass of the codegen's scope that appends every operation to ``trace`` (and every
    ``get`` result to ``results``)."""
    ids: dict[int, int] = {}

    class _Log(dict):
        __slots__ = ("sid",)

        def __setitem__(self, key: str, value: str) -> None:
            trace.append((PUT, self.sid, key, value))
            super().__setitem__(key, value)

    class Recording(base):  # type: ignore[misc, valid-type]
        def __init__(self, parent: Any = None) -> None:
            super().__init__(parent)
            sid = len(ids)
            ids[id(self)] = sid
            self.sid = sid
            log = _Log()
            log.sid = sid
            self.cache = log
            trace.append((NEW, sid, None, -1 if parent is None else parent.sid))

        def get(self, key: str) -> str | None:
            r = super().get(key)
            trace.append((GET, self.sid, key, None))
            results.append(r)
            return r

        def put(self, key: str, var: str) -> None:
            self.cache[key] = var

    return Recording


def _workload(name: str) -> Callable[[], None]:
    import torch
    import torch.nn.functional as F

    from tilefuse import demo

    if name in ("gpt2", "gpt2_train"):
        model, ids = demo.build_gpt2("tiny", "cpu")
        if name == "gpt2":
            model.eval()

            def run() -> None:
                with torch.no_grad():
                    torch.compile(model, backend="tilefuse")(ids)

            return run

        def run_train() -> None:
            out = torch.compile(model, backend="tilefuse")(ids, labels=ids)
            out.loss.backward()

        return run_train
    if name == "ln_softmax":
        x = torch.randn(64, 256)
        w, b = torch.randn(256), torch.randn(256)

        def f(x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(F.layer_norm(x, (256,), w, b), dim=-1)

        def run_f() -> None:
            torch.compile(f, backend="tilefuse")(x)

        return run_f
    raise SystemExit(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")


def _compile(name: str) -> float:
    """Compile (first call of) workload ``name`` from a fresh Dynamo; wall seconds."""
    from tilefuse import demo

    run = _workload(name)
    demo._reset_dynamo()
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def _fresh(s: str) -> str:
    """An equal string that is a new object (no cached hash)."""
    return s[:1] + s[1:] if len(s) > 1 else "".join([s, ""])


def _replay(trace: list, n_scopes: int, make: Callable[[Any], Any], mode: str) -> tuple[float, list]:
    """Run ``trace`` once against scopes built by ``make(parent)``; ``mode``: "cache" (writes
    through ``scope.cache[key]``), "put" (``scope.put``) or "loop" (no calls). Returns (seconds,
    get results)."""
    ops = [(k, s, _fresh(key) if key is not None else None, v) for k, s, key, v in trace]
    scopes: list[Any] = [None] * n_scopes
    out: list = []
    append = out.append
    t0 = time.perf_counter()
    if mode == "cache":
        for kind, sid, key, val in ops:
            if kind == GET:
                append(scopes[sid].get(key))
            elif kind == PUT:
                scopes[sid].cache[key] = val
            else:
                scopes[sid] = make(scopes[val] if val >= 0 else None)
    elif mode == "put":
        for kind, sid, key, val in ops:
            if kind == GET:
                append(scopes[sid].get(key))
            elif kind == PUT:
                scopes[sid].put(key, val)
            else:
                scopes[sid] = make(scopes[val] if val >= 0 else None)
    else:
        for kind, sid, key, val in ops:
            if kind == GET:
                append(key)
            elif kind == PUT:
                pass
            else:
                scopes[sid] = val
    return time.perf_counter() - t0, out


def _normalized(source: str) -> str:
    """``source`` with the indirect-index symbols (``ind<N>``, numbered by a process-wide counter,
    so two compiles of one graph in one process differ there) renumbered in order of appearance."""
    seen: dict[str, str] = {}
    return re.sub(r"\bind\d+\b", lambda m: seen.setdefault(m.group(0), f"ind{len(seen)}"), source)


def _check_kernels(name: str, mods: list[Any], native: type) -> str:
    """Compile ``name`` with the Python scope and with the native one; compare kernel sources
    (up to the numbering of ``ind<N>`` symbols)."""
    from tilefuse.codegen.cse import DictScope
    from tilefuse.codegen.triton_kernel import TritonKernelCodegen as cls

    orig = cls.generate
    sources: list[str] = []

    def generate(self: Any) -> Any:
        k = orig(self)
        sources.append(_normalized(k.source))
        return k

    cls.generate = generate
    try:
        with _Patch(mods, DictScope):
            _compile(name)
        python_src = list(sources)
        sources.clear()
        with _Patch(mods, native):
            _compile(name)
        native_src = list(sources)
    finally:
        cls.generate = orig
    if python_src != native_src:
        raise AssertionError(f"{name}: kernels differ between the Python and the native CSE scope")
    return f"{len(native_src)} kernels, identical"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    ap.add_argument("--repeat", type=int, default=20, help="replays per implementation (best is kept)")
    ap.add_argument("--check-kernels", action="store_true", help="compile again with the native scope")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    from tilefuse.codegen.cse import DictScope as python_scope
    from tilefuse.codegen.cse import Scope as NativeScope

    mods = _scope_modules()
    for name in args.only.split(","):
        trace: list = []
        results: list = []
        with _Patch(mods, _recording_class(python_scope, trace, results)):
            compile_s = _compile(name)
        n_scopes = sum(1 for op in trace if op[0] == NEW)
        n_get = sum(1 for op in trace if op[0] == GET)
        n_put = len(trace) - n_get - n_scopes
        best: dict[str, float] = {}
        impls = [
            ("python", python_scope, "cache"),
            ("native", NativeScope, "cache"),
            ("native.put", NativeScope, "put"),
            ("loop", None, "loop"),
        ]
        for _ in range(args.repeat):
            for label, cls, mode in impls:
                t, got = _replay(trace, n_scopes, cls, mode)
                if mode != "loop" and got != results:
                    raise AssertionError(f"{name}: {label} returned different CSE hits than the compile")
                best[label] = min(best.get(label, float("inf")), t)
        ops = max(len(trace), 1)
        print(
            f"{name}: compile {compile_s:.2f} s, {n_scopes} scopes, {n_get} gets ({n_get - n_put} hits), {n_put} puts"
        )
        for label, _, _ in impls[:-1]:
            t, calls = best[label], best[label] - best["loop"]
            print(
                f"  {label:<11} {t * 1e3:8.3f} ms per compile's lookups ({t / ops * 1e9:6.1f} ns/op; "
                f"calls alone {calls * 1e3:7.3f} ms, {calls / ops * 1e9:6.1f} ns/op)"
            )
        print(f"  {'loop':<11} {best['loop'] * 1e3:8.3f} ms")
        if args.check_kernels:
            print(f"  kernels: {_check_kernels(name, mods, NativeScope)}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
