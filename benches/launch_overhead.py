"""Host time per kernel launch of tilefuse's generated wrapper, by part, measured on the CPU.

At batch 1 a model's GPU time per kernel is a few microseconds, so its step time is the host's
Python between launches: the generated ``call()`` (argument unpacking, allocations, views,
``del``), each ``KernelLauncher`` call (grid, specialization key, stream, argument packing) and
``CompiledGraph.__call__`` (the input layout checks). This bench measures that Python without a
GPU:

1. A tiny-width GPT-2 or Llama config (host cost is per launch, not per element) is compiled with
   tilefuse on CPU tensors and run once (kernels in Triton's interpreter).
2. Each of its graphs is generated a second time for device ``cuda:0`` (the wrapper a GPU run
   gets: ``_empty_strided_cuda`` allocations, the device guard, launchers in CUDA mode) and
   loaded. Its launchers are put in their steady state (the first config in use, as after
   autotuning) and every binary is a stand-in whose static launch is a Python no-op: the
   launcher's whole Python path runs, only torch's C++ ``_launch_kernel`` is left out (the same
   for Inductor's launches). CUDA's C entry points are replaced with C built-ins of the same
   calling cost (``torch._C._cuda_getDevice`` -> ``int``, the raw-stream lookup and device
   exchange -> ``abs``) and CUDA allocations with the CPU's (``_empty_strided_cpu``, the same
   kind of binding), so nothing needs a GPU.
3. Timed, each as the fastest of ``--reps`` rounds of ``--inner`` calls (on a shared machine the
   slower rounds are other processes' interference): the launcher calls of one ``call()``
   replayed alone (and a no-op Python function with the same arguments, the floor of any
   launcher); ``call(args)`` with a timing probe after every statement (each statement's time,
   the probe's own cost subtracted), which splits the call into parts: ``args`` (unpacking,
   constants, size symbols), ``stream`` (the call's one stream lookup), ``alloc``, ``view``
   (``reinterpret_tensor``), ``alias`` (a buffer taking over another's storage), ``launch``,
   ``extern`` (aten calls: CPU compute here, so reported but left out of the host figure),
   ``ensure`` (stride checks of extern results), ``del``; ``CompiledGraph.__call__`` around a
   call that does nothing (its input layout checks, ``entry``); and a whole step of the compiled
   model with each generated call replaced by the outputs it gave (``outside``: Dynamo's guards,
   AOTAutograd's runtime wrappers, the entry checks, the model's Python outside its graphs).

Output: one table per graph and a summary: µs per launch of the wrapper's host work (the call
without its extern calls, divided by its kernel launches) and of the launcher calls alone.
Numbers are host-CPU time on this machine's CPU; compare runs on one machine only.

    python benches/launch_overhead.py                      # GPT-2 config, 4 layers, batch 1, 32 tokens
    python benches/launch_overhead.py --model llama --dynamic
    python benches/launch_overhead.py --csv launch.csv
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import time
from typing import Any

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on CPU tensors
os.environ["TILEFUSE_GRAPH_CACHE"] = "0"  # every graph lowered and generated here (the twin below)

KINDS = ("args", "stream", "alloc", "view", "alias", "launch", "extern", "ensure", "del")


def _kind(line: str) -> str:
    """The part a generated ``call()`` statement belongs to (see the module docstring)."""
    s = line.strip()
    if s.startswith("del "):
        return "del"
    if "launch_stream(" in s:
        return "stream"
    if re.search(r"_launcher(\.run)?\(", s):
        return "launch"
    if "# aten." in s or "# extern" in s or s.startswith("torch.mm(") or s.startswith("torch.addmm("):
        return "extern"
    if "empty_strided" in s:
        return "alloc"
    if "ensure_strides(" in s:
        return "ensure"
    if "reinterpret_tensor(" in s:
        return "view"
    if re.match(r"^buf\d+ = buf\d+(\[\d+\])*(\s*#.*)?$", s):
        return "alias"
    return "args"


def _build(model: str, n_layer: int, batch: int, seq: int):
    """A tiny-width model of the chosen family (random weights) and a batch of token ids."""
    import torch

    torch.manual_seed(0)
    if model == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(
            n_layer=n_layer, n_head=2, n_embd=64, vocab_size=128, n_positions=256, bos_token_id=0, eos_token_id=0
        )
        m = GPT2LMHeadModel(cfg)
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(
            num_hidden_layers=n_layer,
            hidden_size=64,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            max_position_embeddings=256,
        )
        m = LlamaForCausalLM(cfg)
    m.eval()
    ids = torch.randint(0, 128, (batch, seq))
    return m, ids


def _install_cuda_stand_ins() -> None:
    """CUDA's C entry points that the CUDA wrapper and launchers call, replaced by C built-ins
    of the same calling cost that need no GPU."""
    import torch

    torch._C._cuda_getDevice = int  # int() -> 0
    torch._C._cuda_getCurrentRawStream = abs  # abs(device) -> a stream handle
    torch.cuda._exchange_device = abs
    torch.cuda._maybe_exchange_device = abs


def _noop_launch(*args: Any) -> None:
    """Stands in for torch's static launcher's ``_launch_kernel``."""


def _steady_launchers(module: Any) -> None:
    """Put each launcher of a CUDA-shaped module in its state after the first launch: the first
    config in use (as if autotuning chose it) and a stand-in binary per specialization key whose
    static launch is ``_noop_launch``. ``KernelLauncher._add_entry`` (where a new key's binary is
    compiled) is the seam replaced."""
    import types

    for ln in module._launchers:
        if ln._kwargs is None:
            ln._use(0)

        def add_entry(self, key, grid, args, kwargs):
            n = len(args)
            tys = "O" * n
            entry = (None, (_noop_launch, None, 4, 0, tys, ()), None, None)
            self._direct[key] = entry
            return entry

        ln._add_entry = types.MethodType(add_entry, ln)


def _probed_source(src: str) -> tuple[str, list[str]]:
    """``src`` with a timing probe after every statement of ``call()`` (and before its
    ``return``), and the part of each probed statement in order."""
    lines = src.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("def call(args):"))
    out = lines[: start + 1] + ["    _t = _pc()"]
    kinds: list[str] = []
    # call() ends at the next top-level line (the module's benchmark harness follows it)
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
    for ln in lines[start + 1 : end]:
        s = ln.strip()
        if not s:
            out.append(ln)
            continue
        indent = ln[: len(ln) - len(ln.lstrip())]
        if s.startswith("with ") or s.startswith("return"):
            out.append(ln)
            if s.startswith("with "):
                out.append(indent + "    _t = _pc()")
            continue
        out.append(ln)
        out.append(f"{indent}_t1 = _pc(); _T[{len(kinds)}] += _t1 - _t; _t = _pc()")
        kinds.append(_kind(ln))
    return "\n".join(out + lines[end:]), kinds


def _best_us(fn: Any, reps: int, inner: int) -> float:
    """The fastest over ``reps`` rounds of the mean µs of ``inner`` calls of ``fn``."""
    for _ in range(3):
        fn()
    rounds = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        rounds.append((time.perf_counter() - t0) / inner * 1e6)
    return min(rounds)


def _probe_cost(reps: int) -> float:
    """µs of one probe statement on its own."""
    ns: dict = {"_pc": time.perf_counter, "_T": [0.0]}
    code = compile("_t = _pc()\n" + "_t1 = _pc(); _T[0] += _t1 - _t; _t = _pc()\n" * 100, "<probe>", "exec")
    return _best_us(lambda: exec(code, ns), reps, 20) / 100


def _recorded_launches(mod: Any, args: list) -> list[tuple]:
    """``(launcher, arguments, through run)`` of every launch of one call of ``mod.call``, in
    order (a generated CUDA wrapper calls ``launcher.run(stream, ...)``, older ones and CPU
    wrappers ``launcher(...)``)."""
    seen: list[tuple] = []
    saved = {k: v for k, v in vars(mod).items() if k.endswith("_launcher")}

    class Recorder:
        def __init__(self, ln):
            self.ln = ln

        def __call__(self, *a):
            seen.append((self.ln, a, False))
            return self.ln(*a)

        def run(self, *a):
            seen.append((self.ln, a, True))
            return self.ln.run(*a)

    for k, ln in saved.items():
        setattr(mod, k, Recorder(ln))
    mod.call(list(args))
    vars(mod).update(saved)
    return seen


def _is_lean(ln: Any) -> bool:
    """Whether a launcher's ``run`` is the lean closure rather than its general method."""
    run = getattr(ln, "run", None)
    return run is not None and getattr(run, "__func__", None) is None


def measure_graph(compiled: Any, cuda_src: str, consts: dict, args: list, reps: int, inner: int) -> dict:
    """The parts of one graph's call (see the module docstring); ``args``: a call's inputs."""
    import types

    import torch

    from tilefuse.runtime import load_module

    psrc, kinds = _probed_source(cuda_src)
    mod = load_module(psrc, consts)
    mod._empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cpu
    mod._pc, mod._T = time.perf_counter, [0.0] * len(kinds)
    _steady_launchers(mod)
    res: dict[str, Any] = {}
    # the launcher calls alone, looped over one call's launches (no extern compute between them)
    launches = _recorded_launches(mod, args)
    n = res["launches"] = len(launches)
    # launches whose launcher is in its lean state (``KernelLauncher._make_lean``) after a call
    mod.call(list(args))
    res["lean"] = sum(1 for ln, _, through_run in launches if through_run and _is_lean(ln))

    def run_launches():
        for ln, a, through_run in launches:
            if through_run:
                ln.run(*a)
            else:
                ln(*a)

    def run_noops():
        for _, a, _ in launches:
            _noop_launch(*a)

    res["launcher_us"] = _best_us(run_launches, reps, inner) / max(n, 1)
    res["noop_us"] = _best_us(run_noops, reps, inner) / max(n, 1)
    # the call's statements, each timed by the probe after it
    probe = _probe_cost(reps)
    rounds = []
    for _ in range(reps):
        mod._T[:] = [0.0] * len(kinds)
        for _ in range(inner):
            mod.call(list(args))
        rounds.append([t / inner * 1e6 - probe for t in mod._T])
    per_stmt = [min(r[i] for r in rounds) for i in range(len(kinds))]
    parts = {}
    for k in KINDS:
        idx = [i for i, kk in enumerate(kinds) if kk == k]
        parts[k] = (len(idx), max(0.0, sum(per_stmt[i] for i in idx)))
    res["parts"] = parts
    # CompiledGraph.__call__'s own work (input layout checks) around a call that does nothing
    cg = copy.copy(compiled)
    cg.module, cg._ran = types.SimpleNamespace(call=lambda a: None), True
    res["entry_us"] = _best_us(lambda: cg(list(args)), reps, inner)
    # the extern calls compute on the CPU here (on the GPU they are launches of their own)
    res["host_us"] = sum(us for k, (_, us) in parts.items() if k != "extern") + res["entry_us"]
    return res


def _capture(model: str, n_layer: int, batch: int, seq: int, dynamic: bool) -> tuple[list[tuple], Any]:
    """Compile the model with tilefuse on CPU tensors; returns per graph ``(CompiledGraph, its
    source generated for cuda:0, that source's constants, a call's inputs, that call's
    outputs)``, and a function running one step of the compiled model."""
    import torch

    from tilefuse import backend
    from tilefuse.codegen import wrapper as W

    found: list[list] = []
    orig_generate = W.WrapperCodegen.generate

    def generate(self):
        src, consts = orig_generate(self)
        if self.device.type == "cpu" and not getattr(self, "_tf_bench_copy", False):
            twin = W.WrapperCodegen(self.graph, self.items)
            twin._tf_bench_copy = True
            twin.device = torch.device("cuda", 0)
            csrc, cconsts = orig_generate(twin)
            found.append([None, csrc, cconsts, None])
        return src, consts

    W.WrapperCodegen.generate = generate
    orig_init = backend.CompiledGraph.__init__

    def init(self, module, *a, **k):
        orig_init(self, module, *a, **k)
        if found and found[-1][0] is None:
            found[-1][0] = self
            orig_call = module.call

            def call(args, slot=found[-1]):
                first = slot[3] is None
                if first:
                    slot[3] = list(args)
                out = orig_call(args)
                if first:
                    slot.append(out)
                return out

            module.call = call

    backend.CompiledGraph.__init__ = init
    m, ids = _build(model, n_layer, batch, seq)
    if dynamic:
        torch._dynamo.mark_dynamic(ids, 1)
    with torch.no_grad():
        fn = torch.compile(m, backend="tilefuse", dynamic=dynamic)
        fn(ids)
    W.WrapperCodegen.generate = orig_generate
    backend.CompiledGraph.__init__ = orig_init
    graphs = [tuple(f) for f in found if f[0] is not None and f[3] is not None]
    return graphs, (lambda: fn(ids))


def outside_us(graphs: list[tuple], step: Any, reps: int, inner: int) -> float:
    """µs of one step of the compiled model outside its generated calls: each graph's module
    replaced by one whose ``call`` returns the outputs recorded at the first call (Dynamo's guards,
    AOTAutograd's runtime wrappers, ``CompiledGraph.__call__`` and the model's Python outside the
    graphs remain)."""
    import types

    from torch._dynamo.utils import counters

    compiled_before = counters["stats"]["unique_graphs"]
    saved = []
    for compiled, _, _, _, outs in graphs:
        saved.append((compiled, compiled.module))
        compiled.module = types.SimpleNamespace(call=lambda args, outs=outs: (args.clear(), outs)[1])
    try:
        us = _best_us(step, reps, inner)
    finally:
        for compiled, mod in saved:
            compiled.module = mod
    if counters["stats"]["unique_graphs"] != compiled_before:
        raise RuntimeError("a step compiled a new graph (a guard failed): the outside time is not measured")
    return us


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--dynamic", action="store_true", help="compile with dynamic=True (symbolic sizes)")
    ap.add_argument("--reps", type=int, default=15, help="timing rounds (the fastest is reported)")
    ap.add_argument("--inner", type=int, default=20, help="calls per timing round")
    ap.add_argument("--csv", default=None, help="append one row per graph and part here")
    opts = ap.parse_args(argv)
    for name in ("n_layer", "batch", "seq", "reps", "inner"):
        if getattr(opts, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(opts, name)}: give a positive number")

    import torch

    # before compiling: Dynamo's guards check the thread count (the extern calls' CPU compute runs
    # on one thread, no intra-op threads to wake) and the grad mode (inference graphs)
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    graphs, step = _capture(opts.model, opts.n_layer, opts.batch, opts.seq, opts.dynamic)
    if not graphs:
        print("no graph was compiled by tilefuse; nothing measured")
        return 1
    _install_cuda_stand_ins()
    rows = []
    tot_launch = tot_host = tot_launch_part = 0.0
    for gi, (compiled, src, consts, args, _) in enumerate(graphs):
        r = measure_graph(compiled, src, consts, args, opts.reps, opts.inner)
        n = r["launches"]
        print(f"\n## graph {gi}: {compiled.name}, {n} kernel launches per call")
        print("| part | statements | us / call | us / statement | us / launch |")
        print("|---|---:|---:|---:|---:|")
        for k, (cnt, us) in r["parts"].items():
            if cnt:
                print(f"| {k} | {cnt} | {us:.1f} | {us / cnt:.2f} | {us / max(n, 1):.2f} |")
                rows.append(dict(graph=gi, part=k, statements=cnt, us_per_call=round(us, 2), launches=n))
        print(f"| entry (CompiledGraph.__call__) | 1 | {r['entry_us']:.1f} | {r['entry_us']:.2f} | "
              f"{r['entry_us'] / max(n, 1):.2f} |")  # fmt: skip
        rows.append(dict(graph=gi, part="entry", statements=1, us_per_call=round(r["entry_us"], 2), launches=n))
        print(f"launcher call alone: {r['launcher_us']:.2f} us per launch (a no-op Python function with the "
              f"same arguments: {r['noop_us']:.2f})")  # fmt: skip
        print(f"lean launches: {r['lean']} of {n}")
        print(f"host, every part but extern: {r['host_us']:.1f} us = {r['host_us'] / max(n, 1):.2f} us per launch")
        tot_launch += n
        tot_host += r["host_us"]
        tot_launch_part += r["launcher_us"] * n
    print(f"\n# summary ({opts.model}, {opts.n_layer} layers, batch {opts.batch}, {opts.seq} tokens"
          f"{', dynamic' if opts.dynamic else ''}): {int(tot_launch)} launches per step")  # fmt: skip
    print(f"host us per launch (every part but extern, entry included): {tot_host / max(tot_launch, 1):.2f}")
    print(f"launcher call us per launch: {tot_launch_part / max(tot_launch, 1):.2f}")
    out_us = outside_us(graphs, step, opts.reps, opts.inner)
    print(f"step outside the generated calls (Dynamo guards, AOTAutograd, entry checks, the model's own Python): "
          f"{out_us:.1f} us")  # fmt: skip
    rows.append(dict(graph=-1, part="outside", statements=0, us_per_call=round(out_us, 2), launches=int(tot_launch)))
    if opts.csv:
        import csv

        new = not os.path.exists(opts.csv)
        with open(opts.csv, "a", newline="") as f:
            w = csv.DictWriter(
                f, fieldnames=["model", "dynamic", "graph", "part", "statements", "us_per_call", "launches"]
            )
            if new:
                w.writeheader()
            for row in rows:
                w.writerow(dict(model=opts.model, dynamic=opts.dynamic, **row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
