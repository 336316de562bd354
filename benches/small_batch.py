"""Small-batch inference and decoding: eager, tilefuse and Inductor, default and reduce-overhead,
side by side in one process.

At batch 1-8 with short sequences a model's step time is mostly the host's (Python and one launch
per kernel); CUDA graphs (``mode="reduce-overhead"``) and a lean launch path are what help there.
This bench measures, per model config, per backend:

* ``forward``: the model's forward (``no_grad``, bf16, random weights from a transformers config)
  at each ``--batches`` x ``--seqs`` (token ids), compiled with ``torch.compile(model,
  backend=..., mode=..., dynamic=False)`` (one compile per shape, as a server with fixed shapes
  would). Time per call: after warm-up calls, ``--rounds`` rounds of ``--calls`` back-to-back
  calls between two CUDA events; the median round / calls (ms). Back-to-back calls, not
  ``do_bench``'s flushed single calls: a host-bound step shows as GPU idle time only when the
  GPU is not kept busy by a cache flush queued ahead of it. Every call is preceded by
  ``torch.compiler.cudagraph_mark_step_begin()`` (all backends, so all pay it).
* ``decode``: ``model.generate`` with a static KV cache, the way transformers compiles decoding
  (``cache_implementation="static"`` and a ``CompileConfig(backend=..., mode=...)``: generate
  compiles the model's call for the decoding steps; eager passes ``disable_compile=True``),
  greedy, ``--new-tokens`` tokens after a ``--prompt``-token prompt at each batch size (Dynamo
  reset before each batch size: compiled static, as a server at that batch would);
  tokens/s = batch x new tokens / the median wall time of ``--gen-rounds`` generate calls after
  a warm-up call (which compiles).
* ``peak_gib``: ``torch.cuda.max_memory_allocated`` over the warm-up and timed calls of that row
  (the peak statistics reset before each row; weights included).
* ``max_diff``: the largest |logits - eager logits| of the forward rows (bf16), the decode rows:
  whether the generated tokens equal eager's.

Backends: ``eager``, ``tilefuse`` (default mode), ``tilefuse-ro`` (``mode="reduce-overhead"``),
``inductor``, ``inductor-ro``. Models: ``gpt2`` (GPT-2 small: 12 layers, 768 wide), ``llama``
(Llama-3.2-1B widths, 8 layers), ``qwen`` (Qwen2-0.5B widths, 8 layers). Output: a markdown
table per model (ms per call or tokens/s per backend, and the ratios tilefuse / Inductor in the
same mode) and rows appended to ``--csv``.

A device command may run 10 minutes; Inductor compiles each shape (tens of seconds for GPT-2),
so run one model and a few shapes per command, each adding to one CSV:

    python benches/small_batch.py --models gpt2 --batches 1,2,4,8 --seqs 64 --csv sb.csv
    python benches/small_batch.py --models llama --batches 1,8 --seqs 32,128 --no-decode --csv sb.csv
    python benches/small_batch.py --models qwen --decode-only --batches 1,4 --csv sb.csv
    python benches/small_batch.py --report --csv sb.csv        # the tables again, from the CSV

``--cpu-smoke``: tiny configs on the CPU (fp32, kernels in Triton's interpreter), eager and
tilefuse (both modes; on CPU tensors reduce-overhead runs without CUDA graphs), one call and a
two-token generate each, outputs checked against eager; no timing claims (exit status 1 when an
output differs or a row fails).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time
from typing import Any

if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

BACKENDS = ("eager", "tilefuse", "tilefuse-ro", "inductor", "inductor-ro")
MODELS = ("gpt2", "llama", "qwen")
FIELDS = ["model", "kind", "batch", "seq", "backend", "status", "ms", "tok_s", "peak_gib", "max_diff"]
FIELDS += ["tf_graphs", "eager_graphs", "cudagraph_graphs", "error"]


def _counts() -> tuple[int, int, int]:
    """tilefuse's graphs so far: compiled (or taken from its graph cache), run eagerly after a
    failure, and run under CUDA graphs."""
    from tilefuse import metrics as m

    return m.generated_graph_count + m.graph_cache_hits, m.eager_graph_count, m.cudagraph_graph_count


def _add_counts(row: dict, before: tuple) -> None:
    if row["backend"].startswith("tilefuse"):
        after = _counts()
        row["tf_graphs"], row["eager_graphs"], row["cudagraph_graphs"] = (a - b for a, b in zip(after, before))


def _backend_mode(name: str) -> tuple[str, str]:
    """``(torch.compile backend, mode)`` of a backend name (``eager``: not compiled)."""
    base, _, ro = name.partition("-")
    return base, ("reduce-overhead" if ro else "default")


def build(model: str, tiny: bool) -> Any:
    """A causal-LM of the model family with random weights (nothing downloaded); ``tiny``: a
    few-hundred-parameter-wide config for the CPU smoke run."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    if model == "gpt2":
        kw = dict(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64) if tiny else {}
        cfg = GPT2Config(**kw, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        if tiny:
            cfg.bos_token_id = cfg.eos_token_id = 0
        return GPT2LMHeadModel(cfg)
    if tiny:
        kw = dict(
            num_hidden_layers=2,
            hidden_size=32,
            intermediate_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            max_position_embeddings=64,
        )
    elif model == "llama":  # Llama-3.2-1B's widths, 8 layers
        kw = dict(
            num_hidden_layers=8,
            hidden_size=2048,
            intermediate_size=8192,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
            max_position_embeddings=2048,
            rope_theta=500000.0,
        )
    else:  # Qwen2-0.5B's widths, 8 layers
        kw = dict(
            num_hidden_layers=8,
            hidden_size=896,
            intermediate_size=4864,
            num_attention_heads=14,
            num_key_value_heads=2,
            vocab_size=151936,
            max_position_embeddings=2048,
        )
    if model == "llama":
        return LlamaForCausalLM(LlamaConfig(**kw, bos_token_id=0, eos_token_id=0, pad_token_id=0))
    return Qwen2ForCausalLM(Qwen2Config(**kw, bos_token_id=0, eos_token_id=0, pad_token_id=0))


def _compiled(model: Any, backend: str) -> Any:
    import torch

    if backend == "eager":
        return model
    base, mode = _backend_mode(backend)
    return torch.compile(model, backend=base, mode=mode, dynamic=False)


def _time_ms(fn: Any, cuda: bool, calls: int, rounds: int) -> float:
    """Median over ``rounds`` of the ms per call of ``calls`` back-to-back calls (CUDA events on
    the GPU, wall clock on the CPU)."""
    import torch

    per = []
    for _ in range(rounds):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            a.record()
            for _ in range(calls):
                fn()
            b.record()
            b.synchronize()
            per.append(a.elapsed_time(b) / calls)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(per)


def _peak_reset(cuda: bool) -> None:
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_gib(cuda: bool) -> float | None:
    import torch

    if not cuda:
        return None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def forward_rows(name: str, model: Any, opts: Any, device: str, vocab: int) -> list[dict]:
    """The forward rows of one model: every backend at every batch size and sequence length."""
    import torch

    cuda = device == "cuda"
    rows = []
    refs: dict = {}
    shapes = [(b, s) for b in opts.batches for s in opts.seqs]
    g = torch.Generator().manual_seed(1)
    inputs = {bs: torch.randint(0, vocab, bs, generator=g).to(device) for bs in shapes}
    for backend in opts.backends:
        torch._dynamo.reset()
        for b, s in shapes:
            row = dict(model=name, kind="forward", batch=b, seq=s, backend=backend)
            ids = inputs[(b, s)]
            before = _counts()
            try:
                fn = _compiled(model, backend)

                def step(fn=fn, ids=ids):
                    torch.compiler.cudagraph_mark_step_begin()
                    return fn(ids).logits

                _peak_reset(cuda)
                with torch.no_grad():
                    out = step().float()
                    if backend == "eager":
                        refs[(b, s)] = out
                    ref = refs.get((b, s))
                    row["max_diff"] = float((out - ref).abs().max()) if ref is not None else None
                    del out
                    if not opts.cpu_smoke:
                        for _ in range(3):
                            step()
                        row["ms"] = _time_ms(step, cuda, opts.calls, opts.rounds)
                row["peak_gib"] = _peak_gib(cuda)
                row["status"] = "ok"
                _add_counts(row, before)
            except Exception as e:  # noqa: BLE001 - one failing backend or shape is a row, the rest go on
                row.update(
                    status="error", error=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                )
            rows.append(row)
            _progress(row)
    return rows


def decode_rows(name: str, model: Any, opts: Any, device: str, vocab: int) -> list[dict]:
    """The decode rows of one model: ``generate`` with a static KV cache per backend and batch."""
    import torch
    from transformers import CompileConfig

    cuda = device == "cuda"
    rows = []
    refs: dict = {}
    g = torch.Generator().manual_seed(2)
    prompts = {b: torch.randint(1, vocab, (b, opts.prompt), generator=g).to(device) for b in opts.batches}
    for backend in opts.backends:
        for b in opts.batches:
            # each batch size compiled afresh, as a server at that batch would (a second size in
            # one Dynamo cache would make the batch dimension dynamic)
            torch._dynamo.reset()
            for attr in ("_compiled_call", "_last_compile_config"):  # transformers' cached compiled call
                if hasattr(model, attr):
                    delattr(model, attr)
            row = dict(model=name, kind="decode", batch=b, seq=opts.prompt, backend=backend)
            ids = prompts[b]
            kw: dict[str, Any] = dict(
                max_new_tokens=opts.new_tokens,
                min_new_tokens=opts.new_tokens,
                do_sample=False,
                cache_implementation="static",
                attention_mask=torch.ones_like(ids),
                pad_token_id=0,
            )
            if backend == "eager":
                kw["disable_compile"] = True
            else:
                base, mode = _backend_mode(backend)
                cc = CompileConfig(backend=base, mode=mode, fullgraph=False)
                if not cuda:
                    cc._compile_all_devices = True  # transformers compiles decoding on CUDA only otherwise
                kw["compile_config"] = cc
            before = _counts()
            try:
                _peak_reset(cuda)
                with torch.no_grad():
                    out = model.generate(ids, **kw)
                    if backend == "eager":
                        refs[b] = out
                    ref = refs.get(b)
                    row["max_diff"] = None if ref is None else float((out != ref).sum())
                    if not opts.cpu_smoke:
                        times = []
                        for _ in range(opts.gen_rounds):
                            if cuda:
                                torch.cuda.synchronize()
                            t0 = time.perf_counter()
                            model.generate(ids, **kw)
                            if cuda:
                                torch.cuda.synchronize()
                            times.append(time.perf_counter() - t0)
                        row["tok_s"] = b * opts.new_tokens / statistics.median(times)
                row["peak_gib"] = _peak_gib(cuda)
                row["status"] = "ok"
                _add_counts(row, before)
            except Exception as e:  # noqa: BLE001 - one failing backend or batch is a row, the rest go on
                row.update(
                    status="error", error=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                )
            rows.append(row)
            _progress(row)
    return rows


def _progress(row: dict) -> None:
    val = (
        f"{row['ms']:.3f} ms" if row.get("ms") is not None else f"{row['tok_s']:.0f} tok/s" if row.get("tok_s") else ""
    )
    print(
        f"# {row['model']} {row['kind']} b{row['batch']} s{row['seq']} {row['backend']}: {row['status']} {val} "
        f"{row.get('error') or ''}",
        flush=True,
    )


def _fmt(v: Any, spec: str) -> str:
    if v in (None, ""):
        return "-"
    try:
        return format(float(v), spec)
    except ValueError:
        return str(v)


def report(rows: list[dict]) -> str:
    """Markdown tables of ``rows`` (dicts with FIELDS; CSV strings or numbers): per model and
    kind, one line per shape with each backend's ms per call (forward) or tokens/s (decode) and
    peak GiB, then tilefuse's speed relative to Inductor's in the same mode (> 1: tilefuse faster)."""
    out = []
    backends = [b for b in BACKENDS if any(r["backend"] == b for r in rows)]
    keys = []
    for r in rows:
        k = (r["model"], r["kind"])
        if k not in keys:
            keys.append(k)
    for model, kind in keys:
        sel = [r for r in rows if r["model"] == model and r["kind"] == kind]
        metric = "ms" if kind == "forward" else "tok_s"
        unit = "ms per call" if kind == "forward" else "tokens/s"
        out.append(f"\n### {model} {kind} ({unit}; peak GiB)\n")
        head = ["batch", "seq"] + backends + ["tilefuse / inductor", "tilefuse-ro / inductor-ro"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        shapes = []
        for r in sel:
            sh = (str(r["batch"]), str(r["seq"]))
            if sh not in shapes:
                shapes.append(sh)
        for b, s in shapes:
            by = {r["backend"]: r for r in sel if (str(r["batch"]), str(r["seq"])) == (b, s)}
            cells = [b, s]
            for be in backends:
                r = by.get(be)
                if r is None:
                    cells.append("")
                elif r.get("status") != "ok":
                    cells.append(str(r.get("status")))
                else:
                    cells.append(
                        f"{_fmt(r.get(metric), '.3f' if kind == 'forward' else '.0f')} ({_fmt(r.get('peak_gib'), '.2f')})"
                    )
            for tf, ind in (("tilefuse", "inductor"), ("tilefuse-ro", "inductor-ro")):
                a, c = by.get(tf), by.get(ind)
                try:
                    x, y = float(a[metric]), float(c[metric])
                    ratio = y / x if kind == "forward" else x / y
                    cells.append(f"{ratio:.2f}x")
                except (TypeError, ValueError, KeyError, ZeroDivisionError):
                    cells.append("-")
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _append_csv(path: str, rows: list[dict]) -> None:
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        if new:
            w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in FIELDS})


def _ints(ap: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or any(v < 1 for v in vals):
        ap.error(f"{flag} {text!r}: give positive integers separated by commas")
    return vals


def _names(ap: argparse.ArgumentParser, flag: str, text: str, allowed: tuple) -> list[str]:
    vals = [x.strip() for x in text.split(",") if x.strip()]
    bad = [v for v in vals if v not in allowed]
    if not vals or bad:
        ap.error(f"{flag} {text!r}: choose one or more of {', '.join(allowed)}")
    return vals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--models", default="gpt2,llama,qwen", help="comma-separated: " + ", ".join(MODELS))
    ap.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: " + ", ".join(BACKENDS))
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--seqs", default="64", help="forward sequence lengths (tokens), comma-separated")
    ap.add_argument("--calls", type=int, default=20, help="back-to-back calls per timing round")
    ap.add_argument("--rounds", type=int, default=10, help="timing rounds (the median is reported)")
    ap.add_argument("--prompt", type=int, default=16, help="decode: prompt tokens")
    ap.add_argument("--new-tokens", type=int, default=64, help="decode: tokens generated")
    ap.add_argument("--gen-rounds", type=int, default=3, help="decode: timed generate calls")
    ap.add_argument("--no-decode", action="store_true", help="forward rows only")
    ap.add_argument("--decode-only", action="store_true", help="decode rows only")
    ap.add_argument("--csv", default=None, help="rows are appended here (default small_batch.csv; --cpu-smoke: none)")
    ap.add_argument("--report", action="store_true", help="print the tables of --csv's rows and exit")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny configs on the CPU, one call each, outputs only")
    opts = ap.parse_args(argv)
    for flag in ("calls", "rounds", "prompt", "new_tokens", "gen_rounds"):
        if getattr(opts, flag) < 1:
            ap.error(f"--{flag.replace('_', '-')} {getattr(opts, flag)}: give a positive number")
    if opts.no_decode and opts.decode_only:
        ap.error("--no-decode and --decode-only exclude each other")
    opts.models = _names(ap, "--models", opts.models, MODELS)
    opts.backends = _names(ap, "--backends", opts.backends, BACKENDS)
    opts.batches = _ints(ap, "--batches", opts.batches)
    opts.seqs = _ints(ap, "--seqs", opts.seqs)
    if opts.report:
        path = opts.csv or "small_batch.csv"
        rows = list(csv.DictReader(open(path))) if os.path.exists(path) else []
        if not rows:
            ap.error(f"--report: no rows in {path!r}")
        print(report(rows))
        return 0
    if opts.cpu_smoke:
        if "inductor" in ",".join(opts.backends) and "--backends" in " ".join(sys.argv):
            ap.error("--cpu-smoke runs eager and tilefuse only")
        opts.backends = [b for b in opts.backends if not b.startswith("inductor")]
        if "--batches" not in " ".join(sys.argv if argv is None else argv):
            opts.batches = [1, 2]
        if "--seqs" not in " ".join(sys.argv if argv is None else argv):
            opts.seqs = [8]
        opts.prompt, opts.new_tokens = min(opts.prompt, 4), 2
    elif opts.csv is None:
        opts.csv = "small_batch.csv"

    import torch

    # one compiled entry per shape and backend: more than Dynamo's default limit of 8
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    if opts.cpu_smoke:
        device, dtype = "cpu", torch.float32
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: this bench measures GPUs (try --cpu-smoke); nothing run")
            return 0
        device, dtype = "cuda", torch.bfloat16
    import tilefuse  # noqa: F401 - registers the backend

    rows: list[dict] = []
    for name in opts.models:
        model = build(name, opts.cpu_smoke).to(device=device, dtype=dtype).eval()
        vocab = model.config.vocab_size
        if not opts.decode_only:
            rows += forward_rows(name, model, opts, device, vocab)
        if not opts.no_decode:
            rows += decode_rows(name, model, opts, device, vocab)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    if opts.csv:
        _append_csv(opts.csv, rows)
    print(report(rows))
    failed = [r for r in rows if r.get("status") != "ok"]
    if opts.cpu_smoke:
        tol = 1e-3
        bad = [
            r
            for r in rows
            if r.get("max_diff") is not None
            and not math.isnan(r["max_diff"])
            and r["max_diff"] > tol
            or r.get("max_diff") is not None
            and math.isnan(r["max_diff"])
        ]
        # every tilefuse row compiled its graphs with tilefuse and ran none eagerly
        uncompiled = [
            r for r in rows if r["backend"].startswith("tilefuse") and (not r.get("tf_graphs") or r.get("eager_graphs"))
        ]
        for r in rows:
            print(
                f"smoke {r['model']} {r['kind']} b{r['batch']} {r['backend']}: {r['status']} max_diff "
                f"{_fmt(r.get('max_diff'), '.2e')} tilefuse graphs {r.get('tf_graphs', '-')} eager "
                f"{r.get('eager_graphs', '-')}"
            )
        print(
            f"\ncpu smoke: {len(rows)} rows, {len(failed)} failed, {len(bad)} differ from eager, "
            f"{len(uncompiled)} tilefuse rows without a tilefuse graph"
        )
        return 1 if failed or bad or uncompiled else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
