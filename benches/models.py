"""Model zoo: whole models through tilefuse and Inductor, judged as PyTorch's dynamo benchmark harness does.

The models and the method follow ``benchmarks/dynamo/{common,huggingface,timm_models}.py`` of
PyTorch (the harness is the specification; nothing here is taken from it verbatim). The models,
their inputs and their steps are in ``benches/model_zoo.py``; this file measures and reports.

* ``hf``: the harness's HuggingFace list, each model built from its transformers config class with
  default settings (random weights, nothing downloaded; the harness's ``AutoConfig`` models are
  spelled out as config arguments), inputs as the harness makes them (random token ids of the
  model's vocabulary, its per-family sequence length and batch size, the labels that make the model
  return a loss). Dropout probabilities are set to 1e-30 before the model is built, so the dropout
  kernels run but keep every element: eager and compiled draw different random numbers. By default
  one model per family (``--set core``, 28 models); ``--set full`` adds the second head of each
  family (42).
* ``timm``: the harness's 18 TIMM models, ``pretrained=False``, its batch sizes, an image batch of
  the model's input size (random integers 0-255, normalized), loss = mean of the output (/1000 for
  mobilevit_s).
* ``llm``: decoder-only LLMs at their real widths (hidden size, heads, GQA groups, head dim,
  vocabulary) but few layers (Llama-3.2-1B, Qwen3-0.6B, Gemma-2-2B: 4; Mistral-7B: 2), a prefill of
  2 x 1024 tokens (training: labels = the input, the model's own loss).

Modes: ``inference``: model and inputs cast to bf16, a forward under ``no_grad``. ``training``:
an fp32 model in train mode, one step = zero_grad, forward and loss under bf16 autocast, backward,
optimizer step (Adam lr=0.01, ``capturable``, ``foreach``; plain SGD with a step Dynamo does not
trace for the models the harness lists in ``BENCHMARK_USE_SGD``). The compiled function is the
whole step (``torch.compile(step, backend=...)``, as the harness compiles its ``model_iter_fn``), so
the optimizer's update is compiled too; zero_grad runs eagerly.

Per (model, mode, backend), in a child process with empty Triton / Inductor / tilefuse caches
(one process per model and backend runs its modes in turn, inference first; ``--isolate-modes``: one
per mode too, so the training step's compile does not find Triton already set up):

1. accuracy, as the harness's ``check_accuracy``: the model in fp64 runs two iterations (the
   reference), eager runs them twice (a difference: ``eager_two_runs_differ``), then the compiled
   function on a fresh copy; its last outputs (inference: the model's output; training: loss,
   gradients, parameters and buffers after the step) are checked with ``torch._dynamo.utils.same``
   against eager's, with the fp64 reference and the harness's per-model tolerance (inference 1e-3,
   training 1e-2, the harness's higher ones where it lists them). Where the fp64 run does not fit
   (out of memory), cosine similarity is used instead (``acc_ref`` = cosine). ``max_err``: the
   largest |compiled - eager| / (1 + |eager|) over every output element (the harness's
   ``check_tolerance`` measure).
2. ``first_call_s``: the first compiled call, synchronized (Dynamo + AOTAutograd + the backend +
   one run); ``compile_s`` = that minus the median eager call (the harness's compilation latency).
3. peak memory: ``torch.cuda.max_memory_allocated`` over one warm eager call and one warm compiled
   call (parameters, optimizer state and inputs included, as in the harness); ``mem_ratio`` =
   compiled / eager (< 1: the compiled step needs less).
4. speedup: after warm-up calls, ``--repeat`` rounds each timing one eager call (under
   ``torch.compiler.set_stance("force_eager")``, same model object) and one compiled call,
   interleaved, each synchronized; ``speedup`` = median eager time / median compiled time.
5. counts: ``graphs`` (Dynamo's unique graphs) and ``graph_breaks`` (``torch._dynamo.utils.counters``);
   ``kernels`` (Triton kernels generated: ``tilefuse.metrics.generated_kernel_count`` or
   ``torch._inductor.metrics.generated_kernel_count``); tilefuse only: ``aten_graphs`` (graphs it
   compiled), ``eager_graphs`` (graphs it could not compile and ran eagerly: 0 means everything
   ran tilefuse's code), ``fallback_kernels`` (aten ops without a lowering), ``extern_kernels``
   (mm, conv, attention calls), ``reused_kernels``.

The parent process (it never imports torch) runs the children one after another, each with a
timeout (``--timeout``); a crash, hang or OOM of one model becomes a row with its ``status``
(``crash``, ``timeout``, ``oom``, ``error``) and the zoo goes on. Children share a Python bytecode
cache (``--bytecode-cache``; the GPU host sets ``PYTHONDONTWRITEBYTECODE``, so without it each
child would compile every module of torch, transformers and timm from source). Each row is
appended to ``--csv`` as soon as its child ends, so ``--resume`` skips the rows already there (run
the same command again after a cut) and ``--shard i/n`` takes every n-th model of the list from the
i-th. At the end (and with ``--report`` alone, from the CSV) a table is printed and written to
``--out``: per suite and mode, one line per model with both backends (accuracy, speedup, tilefuse /
Inductor ratio (Inductor's median compiled time / tilefuse's: each backend's eager median is timed
in its own process and moves between processes, so the speedups' ratio would carry that noise),
compile seconds, memory ratio, graphs / breaks, kernels and tilefuse's
fallback ops), then the geometric means of the speedups (over the models that ran; the ratio over
the models both ran) and the count of rows that did not pass accuracy. Statuses: ``ok``;
``eager_fail`` (the model fails eagerly: not a backend's fault); ``error`` (compiling or running
compiled raised), ``oom``, ``crash``, ``timeout``. Accuracy: ``pass``, ``fail_accuracy``,
``eager_two_runs_differ``, ``pass_due_to_skip`` (the harness's large models, DebertaV2ForMaskedLM
and BlenderbotForCausalLM: no fp64 copy fits beside them). CSV columns beyond those above:
``eager_ms`` / ``compiled_ms`` (medians), ``eager_peak_gib`` / ``peak_gib``, ``tol``,
``batch_size``, ``wall_s`` (the child's seconds for that mode), ``error``.

Differences from the harness: bf16 (not fp16) autocast for training, so no grad scaler; the
harness's fp32 accuracy runs and its bf16 performance runs are one run here (accuracy of the first
compiled calls, then timing of the same compiled function); dropout at 1e-30 set before the model
is built (the harness sets it on the config after, where most models no longer read it, and relies
on Inductor's ``fallback_random``); vit_base_patch14_dinov2 at a quarter of the harness's batch (its
518 x 518 training step of 128 needs more than 80 GB); CamemBert (not a transformers class) and the
harness's skipped models (Reformer, GPT-J, GPT-Neo, BlenderbotForConditionalGeneration) left out.

On the GPU: a device command may run 10 minutes, so run the zoo in pieces that fit, each adding to
one CSV, then make the table from it. ``--time-budget S`` starts no child after S seconds, so with
``--time-budget 300 --timeout 280`` a command ends within about 10 minutes whatever happens; what it
did not reach runs in the next command with the same arguments and ``--resume``:

    python benches/models.py --list                                      # the models, batch sizes
    python benches/models.py --suite llm --csv zoo.csv --resume --time-budget 300 --timeout 280
    python benches/models.py --suite timm --csv zoo.csv --resume --time-budget 300 --timeout 280
    python benches/models.py --suite hf --csv zoo.csv --resume --time-budget 300 --timeout 280
    python benches/models.py --report --csv zoo.csv --out zoo.md        # the table, any time

(each line repeated until it prints nothing new; ``--shard i/n`` splits a suite across sessions
or machines instead). Estimated, not yet measured: a child (one model and backend, both modes)
spends 10-20 s starting and building, a few seconds per mode on the fp64 and eager runs, its
compiles (Inductor's: tens of seconds per mode for a base-size model, a minute or more for a
training step; tilefuse's: a fraction of that), and ~5 s timing; so 2-5 minutes per model for both
backends, 2-4 models per 10-minute command, the 50 models of ``--set core`` in about 15-25 commands
(``--mode inference`` alone: about half). ``--only NAME[,NAME]`` picks models, ``--backends tilefuse`` one backend,
``--mode inference`` one mode, ``--log FILE`` keeps every child's output.
``benches/profile_model.py`` prints the top GPU kernels of one model and backend.

``--cpu-smoke``: four tiny configurations (BERT, GPT-2, Llama, a timm ResNet) on the CPU through
Triton's interpreter (fp32; training uses SGD, compiled with the step, as the CPU has no
capturable Adam), tilefuse only, both modes, one child process for all (its start-up is most of the
time), one iteration and one timing round: checks accuracy and that tilefuse compiled every graph
(``eager_graphs`` = 0), prints the table; exit status 1 otherwise. ``tests/test_benches.py`` runs it
(about a minute on an idle 2-core machine). ``--device cpu`` without ``--cpu-smoke`` runs the GPU
path's code on the CPU (``--precision bf16 --backends inductor`` checks the bf16 paths there).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROW_TAG = "ZOOROW "
BACKENDS = ("tilefuse", "inductor")

# the zoo itself (models, inputs, steps) is benches/model_zoo.py, beside this file
sys.path.insert(0, HERE)
from model_zoo import (  # noqa: E402
    MODES,
    SMOKE,
    Runner,
    Spec,
    _cast,
    _clone,
    build,
    find_spec,
    zoo,
)


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _timed(fn: Any, mod: Any, inputs: Any, device: str) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn(mod, inputs)
    _sync(device)
    return time.perf_counter() - t0


def _tensors(x: Any) -> list:
    """Tensors of a nested output, in order (ModelOutput is a dict)."""
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []


def max_error(ref: Any, res: Any) -> float:
    """max |res - ref| / (1 + |ref|) over every floating element (the harness's check_tolerance)."""
    import torch

    worst = 0.0
    for a, b in zip(_tensors(ref), _tensors(res)):
        if not a.is_floating_point() or a.shape != b.shape or a.numel() == 0:
            continue
        a, b = a.detach().float(), b.detach().float().to(a.device)
        err = ((a - b).abs() / (1 + a.abs())).nan_to_num(nan=float("inf")).max().item()
        both_nan = bool(torch.isnan(a).any()) and bool(torch.isnan(b).any())
        worst = max(worst, 0.0 if both_nan and math.isinf(err) else err)
    return worst


def _counters() -> dict:
    from torch._dynamo.utils import counters

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


def _backend(name: str) -> Any:
    """tilefuse's backend function (found without its entry point, as on a host where the package
    is on PYTHONPATH but not installed), or the name."""
    if name == "tilefuse":
        from tilefuse.backend import tilefuse_backend

        return tilefuse_backend
    return name


def _backend_metrics(backend: str) -> dict:
    if backend == "tilefuse":
        from tilefuse import metrics as m

        return {
            "kernels": m.generated_kernel_count,
            "reused_kernels": m.reused_kernel_count,
            "aten_graphs": m.generated_graph_count,
            "eager_graphs": m.eager_graph_count,
            "fallback_kernels": m.fallback_kernel_count,
            "extern_kernels": m.extern_kernel_count,
        }
    from torch._inductor import metrics as im

    return {"kernels": im.generated_kernel_count}


def _reset_backend_metrics(backend: str) -> None:
    if backend == "tilefuse":
        from tilefuse import metrics as m

        m.reset()
    else:
        from torch._inductor import metrics as im

        im.reset()


def time_and_memory(fn: Any, compiled: Any, mod: Any, inputs: Any, device: str, opts: Any, free: Any) -> dict:
    """Warm-up calls, then on CUDA the peak memory of one eager and one compiled call, then
    ``opts.repeat`` rounds of one eager and one compiled call each (interleaved, synchronized):
    the medians and their ratio."""
    import torch

    out: dict = {}
    for _ in range(opts.warmup):
        with torch.compiler.set_stance("force_eager"):
            fn(mod, inputs)
        compiled(mod, inputs)
    if device == "cuda":
        peaks = []
        for stance, f in (("force_eager", fn), ("default", compiled)):
            free()
            torch.cuda.reset_peak_memory_stats()
            with torch.compiler.set_stance(stance):
                f(mod, inputs)
            torch.cuda.synchronize()
            peaks.append(torch.cuda.max_memory_allocated() / 2**30)
        out["eager_peak_gib"] = round(peaks[0], 3)
        out["peak_gib"] = round(peaks[1], 3)
        out["mem_ratio"] = round(peaks[1] / peaks[0], 3) if peaks[0] else None
    t_eager, t_comp = [], []
    for _ in range(opts.repeat):
        with torch.compiler.set_stance("force_eager"):
            t_eager.append(_timed(fn, mod, inputs, device))
        t_comp.append(_timed(compiled, mod, inputs, device))
    e_med, c_med = statistics.median(t_eager), statistics.median(t_comp)
    out["eager_ms"] = round(e_med * 1e3, 3)
    out["compiled_ms"] = round(c_med * 1e3, 3)
    out["speedup"] = round(e_med / c_med, 4) if c_med > 0 else None
    return out


def measure(spec: Spec, mode: str, backend: str, device: str, opts: argparse.Namespace) -> dict:
    """One row: accuracy, compile time, memory, speedup and counts of ``backend`` on ``spec``."""
    import copy
    import gc

    import torch
    from torch._dynamo.utils import counters, same

    row: dict = {"suite": spec.suite, "model": spec.name, "mode": mode, "backend": backend, "device": device}
    bs = opts.batch_size or spec.batch_size
    row["batch_size"] = bs
    # bf16 inference / bf16 autocast training (the interpreter on the CPU: fp32 unless --precision bf16)
    lowp = (opts.precision == "bf16" or (opts.precision == "auto" and device == "cuda")) and not spec.fp32_only
    runner = Runner(spec, mode, device, amp=lowp and mode == "training")
    tol = spec.tol_training if mode == "training" else spec.tol_inference
    row["tol"] = tol

    def free() -> None:
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()

    grad = torch.enable_grad() if mode == "training" else torch.no_grad()
    # accuracy with deterministic cuDNN algorithms (as the harness's), timing with its defaults
    torch.backends.cudnn.deterministic = True
    with grad:
        try:
            model, inputs = build(spec, device, opts.batch_size, mode)
            model.train(mode == "training")
        except Exception as e:  # noqa: BLE001
            row.update(status="eager_fail", error=f"build: {type(e).__name__}: {e}"[:300])
            return row

        # 1. the fp64 reference
        cosine = False
        fp64 = m64 = in64 = None
        if not spec.skip_accuracy:
            try:
                m64, in64 = copy.deepcopy(model).to(torch.float64), _cast(inputs, torch.float64)
                runner.init_optimizer(m64)
                torch.manual_seed(1337)
                fp64 = _detach(runner.run_n(m64, in64, runner.fn(), opts.iterations))
            except Exception as e:  # noqa: BLE001 - out of memory, or an op without fp64 kernels
                fp64, cosine = None, True
                row["fp64_error"] = f"{type(e).__name__}: {e}"[:200]
            finally:
                m64 = in64 = None
                runner.optimizer = None
                free()
        row["acc_ref"] = "skipped" if spec.skip_accuracy else ("cosine" if cosine else "fp64")

        if lowp and mode == "inference":
            model, inputs = model.to(torch.bfloat16), _cast(inputs, torch.bfloat16)

        # 2. eager, twice (the harness's check that eager itself is deterministic)
        eager_out, eager_same = None, True
        if not spec.skip_accuracy:
            results: list = []
            m = None
            try:
                for _ in range(2):
                    m = copy.deepcopy(model)
                    runner.init_optimizer(m)
                    torch.manual_seed(1337)
                    results.append(_detach(runner.run_n(m, inputs, runner.fn(), opts.iterations)))
                    m = runner.optimizer = None
                    free()
            except Exception as e:  # noqa: BLE001
                row.update(status="eager_fail", error=f"eager: {type(e).__name__}: {e}"[:300])
                return row
            eager_out = results[0]
            try:
                eager_same = same(eager_out, results[1], fp64_ref=None, cos_similarity=False, tol=0, equal_nan=True)
            except Exception:  # noqa: BLE001
                eager_same = False
            results = []
            free()

        # 3. compiled: first call (compile), second call, accuracy
        torch._dynamo.reset()
        counters.clear()
        _reset_backend_metrics(backend)
        mc = copy.deepcopy(model)
        del model
        runner.init_optimizer(mc)
        fn = runner.fn()
        compiled = torch.compile(fn, backend=_backend(backend))
        try:
            torch.manual_seed(1337)
            from torch._dynamo.utils import clone_inputs

            out = None
            for i in range(opts.iterations):  # as run_n: the first call compiles, the last is checked
                args = clone_inputs(inputs) if isinstance(inputs, dict) else _clone(inputs)
                _sync(device)
                t0 = time.perf_counter()
                out = compiled(mc, args)
                _sync(device)
                if i == 0:
                    row["first_call_s"] = round(time.perf_counter() - t0, 3)
            new_out = _detach(runner.results(mc, out))
            del out
        except Exception as e:  # noqa: BLE001
            row.update(_counters(), **_backend_metrics(backend))
            oom = isinstance(e, torch.OutOfMemoryError)
            row.update(status="oom" if oom else "error", error=f"compiled: {type(e).__name__}: {e}"[:300])
            return row
        row.update(_counters(), **_backend_metrics(backend))
        if spec.skip_accuracy:
            row["accuracy"] = "pass_due_to_skip"
        elif not eager_same:
            row["accuracy"] = "eager_two_runs_differ"
        else:
            try:
                ok = same(
                    eager_out,
                    new_out,
                    fp64_ref=fp64,
                    cos_similarity=cosine,
                    tol=tol,
                    equal_nan=True,
                    use_larger_multiplier_for_smaller_tensor=spec.larger_multiplier,
                )
            except Exception:  # noqa: BLE001
                ok = False
            row["accuracy"] = "pass" if ok else "fail_accuracy"
            try:
                row["max_err"] = float(f"{max_error(eager_out, new_out):.3g}")
            except Exception:  # noqa: BLE001
                row["max_err"] = float("nan")
        del eager_out, new_out, fp64
        free()

        # 4. memory and speed, warm, eager and compiled on the same model object
        torch.backends.cudnn.deterministic = False
        try:
            row.update(time_and_memory(fn, compiled, mc, inputs, device, opts, free))
        except Exception as e:  # noqa: BLE001
            oom = isinstance(e, torch.OutOfMemoryError)
            row.update(status="oom" if oom else "error", error=f"timing: {type(e).__name__}: {e}"[:300])
            return row
        if row.get("eager_ms"):
            row["compile_s"] = round(row["first_call_s"] - row["eager_ms"] / 1e3, 3)
        # counts again: a recompile during timing shows here
        row.update(_counters(), **_backend_metrics(backend))
        row["status"] = "ok"
    return row


def _detach(x: Any) -> Any:
    """A detached copy of a nested output (a ModelOutput becomes a plain dict with its keys)."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, dict):
        return {k: _detach(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_detach(v) for v in x]
    return x


def child_main(opts: argparse.Namespace) -> int:
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    torch.backends.cuda.matmul.allow_tf32 = True  # as the harness
    if opts.backend == "tilefuse":
        import tilefuse  # noqa: F401  (registers the backend, checks the environment)
    for spec, mode in [(find_spec(n), m) for n in opts.child.split(",") for m in opts.modes.split(",")]:
        t0 = time.perf_counter()
        try:
            row = measure(spec, mode, opts.backend, opts.device, opts)
        except Exception as e:  # noqa: BLE001
            row = {"suite": spec.suite, "model": spec.name, "mode": mode, "backend": opts.backend}
            row.update(status="error", error=f"{type(e).__name__}: {e}"[:300])
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        print(ROW_TAG + json.dumps(row, default=str), flush=True)
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
    return 0


# --------------------------------------------------------------------------------------------
# parent: one child per model and backend, rows into the CSV, the table

COLUMNS = [
    "suite",
    "model",
    "mode",
    "backend",
    "status",
    "accuracy",
    "acc_ref",
    "max_err",
    "tol",
    "speedup",
    "eager_ms",
    "compiled_ms",
    "first_call_s",
    "compile_s",
    "eager_peak_gib",
    "peak_gib",
    "mem_ratio",
    "graphs",
    "graph_breaks",
    "kernels",
    "reused_kernels",
    "aten_graphs",
    "eager_graphs",
    "fallback_kernels",
    "extern_kernels",
    "batch_size",
    "device",
    "wall_s",
    "error",
    "fp64_error",
]


def _child_env(caches: str, warm: bool, device: str, pycache: str) -> dict:
    env = dict(os.environ)
    if pycache:  # imports from .pyc files after the first child (the GPU host writes none itself)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "python"), env.get("PYTHONPATH", "")) if p)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # kernels on CPU tensors run in Triton's interpreter
    if not warm:
        env["TRITON_CACHE_DIR"] = os.path.join(caches, "triton")
        env["TILEFUSE_CACHE_DIR"] = os.path.join(caches, "tilefuse")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")
    return env


def run_child(specs: list[Spec], modes: list[str], backend: str, opts: argparse.Namespace, log: Any) -> list[dict]:
    """Run one child process for these models and modes; a row for each, made up from the child's
    exit (crash, timeout, oom) where it did not report one."""
    names = ",".join(s.name for s in specs)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", names, "--backend", backend]
    cmd += ["--modes", ",".join(modes), "--device", opts.device, "--repeat", str(opts.repeat)]
    cmd += ["--warmup", str(opts.warmup), "--iterations", str(opts.iterations), "--precision", opts.precision]
    if opts.batch_size:
        cmd += ["--batch-size", str(opts.batch_size)]
    caches = tempfile.mkdtemp(prefix="tf_zoo_")
    t0 = time.perf_counter()
    status, out = None, ""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_child_env(caches, opts.warm_caches, opts.device, opts.bytecode_cache),
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=opts.timeout)
        if proc.returncode != 0:
            status = "crash"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = "timeout"
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    wall = time.perf_counter() - t0
    if log is not None:
        log.write(f"===== {names} {','.join(modes)} {backend} rc={proc.returncode} {wall:.0f}s\n{out}\n")
        log.flush()
    rows = {}
    for line in out.splitlines():
        if line.startswith(ROW_TAG):
            r = json.loads(line[len(ROW_TAG) :])
            rows[r["model"], r["mode"]] = r
    result = []
    for spec, mode in [(s, m) for s in specs for m in modes]:
        if (spec.name, mode) in rows:
            result.append(rows[spec.name, mode])
            continue
        tail = " | ".join(line for line in out.strip().splitlines()[-3:])[-300:]
        oom = "OutOfMemoryError" in out or "out of memory" in out
        result.append(
            {
                "suite": spec.suite,
                "model": spec.name,
                "mode": mode,
                "backend": backend,
                "status": "oom" if oom and status == "crash" else (status or "crash"),
                "device": opts.device,
                "batch_size": opts.batch_size or spec.batch_size,
                "wall_s": round(wall, 1),
                "error": tail,
            }
        )
    return result


def read_csv(path: str) -> list[dict]:
    if not path or not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def append_csv(path: str, row: dict) -> None:
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS})


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _fmt(v: Any, spec: str = ".2f", suffix: str = "") -> str:
    n = _num(v)
    return "-" if n is None else f"{n:{spec}}{suffix}"


def _acc_cell(r: dict | None) -> str:
    if r is None:
        return ""
    if r.get("status") != "ok" and not r.get("accuracy"):
        return str(r.get("status"))
    acc = r.get("accuracy") or r.get("status")
    cell = "pass" if acc == "pass" else ("**FAIL**" if acc == "fail_accuracy" else str(acc))
    if r.get("acc_ref") == "cosine":
        cell += " (cos)"
    if r.get("status") not in ("ok", None, ""):
        cell += f" / {r['status']}"
    return cell


def _passed(r: dict | None) -> bool:
    return r is not None and r.get("status") == "ok" and r.get("accuracy") == "pass"


def report(rows: list[dict], backends: list[str]) -> str:
    """The markdown table: one line per model and mode with every backend, then geomeans."""
    # the last row of each (model, mode, backend) wins (a rerun after --resume replaces nothing)
    by: dict = {}
    order: list = []
    for r in rows:
        key = (r.get("suite"), r.get("model"), r.get("mode"))
        if key not in by:
            by[key] = {}
            order.append(key)
        by[key][r.get("backend")] = r
    backends = [b for b in backends if any(b in v for v in by.values())] or backends
    tf, ind = "tilefuse", "inductor"
    both = tf in backends and ind in backends
    lines: list = []
    summary: list = []
    head = ["model"]
    for b in backends:
        head += [f"{b} acc", f"{b} speedup"]
    if both:
        head += ["tf/ind"]
    for b in backends:
        head += [f"{b} compile s", f"{b} mem", f"{b} graphs/breaks", f"{b} kernels"]
    for suite in [s for s in ("hf", "timm", "llm", "smoke") if any(k[0] == s for k in order)]:
        for mode in MODES:
            keys = [k for k in order if k[0] == suite and k[2] == mode]
            if not keys:
                continue
            lines += [f"### {suite} {mode}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            speed: dict = {b: [] for b in backends}
            ratios = []
            compile_ratios = []
            fails = {b: 0 for b in backends}
            for k in keys:
                cells = [k[1]]
                rs = {b: by[k].get(b) for b in backends}
                for b in backends:
                    r = rs[b]
                    s = _num(r.get("speedup")) if r and r.get("status") == "ok" else None
                    if s:
                        speed[b].append(s)
                    if r is not None and not _passed(r):
                        fails[b] += 1
                    cells += [_acc_cell(r), _fmt(s, ".2f", "x") if r else ""]
                if both:
                    a = _num(rs[tf].get("speedup")) if rs[tf] and rs[tf].get("status") == "ok" else None
                    c = _num(rs[ind].get("speedup")) if rs[ind] and rs[ind].get("status") == "ok" else None
                    # the two compiled models' times against each other: each backend's eager
                    # median comes from its own process, and moved by a third between processes
                    tms, ims = (_num(rs[b].get("compiled_ms")) if rs[b] else None for b in (tf, ind))
                    ratio = (ims / tms if tms and ims else a / c) if a and c else None
                    if ratio:
                        ratios.append(ratio)
                    ca = _num(rs[tf].get("compile_s")) if a else None
                    cc = _num(rs[ind].get("compile_s")) if c else None
                    if ca and cc and ca > 0 and cc > 0:
                        compile_ratios.append(ca / cc)
                    cells.append(_fmt(ratio, ".2f", "x"))
                for b in backends:
                    r = rs[b] or {}
                    kern = _fmt(r.get("kernels"), ".0f")
                    if b == tf and r.get("fallback_kernels") not in (None, ""):
                        kern += f" (fb {_fmt(r.get('fallback_kernels'), '.0f')}"
                        if _num(r.get("eager_graphs")):
                            kern += f", EAGER {_fmt(r.get('eager_graphs'), '.0f')}"
                        kern += ")"
                    gb = f"{_fmt(r.get('graphs'), '.0f')}/{_fmt(r.get('graph_breaks'), '.0f')}" if r else ""
                    cells += [_fmt(r.get("compile_s"), ".1f"), _fmt(r.get("mem_ratio"), ".2f"), gb, kern if r else ""]
                lines.append("| " + " | ".join(cells) + " |")
            cells = ["**geomean**"]
            for b in backends:
                g = geomean(speed[b])
                cells += [f"{fails[b]} not passed", (_fmt(g, ".2f", "x") + f" ({len(speed[b])})") if g else "-"]
            if both:
                g = geomean(ratios)
                cells.append((_fmt(g, ".2f", "x") + f" ({len(ratios)})") if g else "-")
            cells += [""] * (len(head) - len(cells))
            lines += ["| " + " | ".join(cells) + " |", ""]
            summary.append((suite, mode, len(keys), speed, ratios, compile_ratios, fails))
    # the summary first: a line per suite and mode
    top = ["suite", "mode", "models"] + [f"{b} geomean" for b in backends]
    top += ["tf/ind geomean", "compile s tf/ind geomean"] if both else []
    top += [f"{b} not passed" for b in backends]
    head_lines = ["## Summary", "", "| " + " | ".join(top) + " |", "|" + "---|" * len(top)]
    for suite, mode, n, speed, ratios, compile_ratios, fails in summary:
        cells = [suite, mode, str(n)]
        cells += [(_fmt(geomean(speed[b]), ".2f", "x") + f" ({len(speed[b])})") for b in backends]
        if both:
            cells.append(_fmt(geomean(ratios), ".2f", "x") + f" ({len(ratios)})")
            cells.append(_fmt(geomean(compile_ratios), ".2f", "x") + f" ({len(compile_ratios)})")
        cells += [str(fails[b]) for b in backends]
        head_lines.append("| " + " | ".join(cells) + " |")
    lines = head_lines + [""] + lines
    lines.append(
        "acc: pass / **FAIL** (fail_accuracy) / another status; (cos): cosine similarity (no fp64 reference). "
        "speedup: median eager / median compiled. tf/ind: Inductor's median compiled time / tilefuse's (> 1: "
        "tilefuse faster; the speedups' ratio where a time is missing). compile s: first call - eager call. mem: peak compiled / peak eager. kernels: Triton "
        "kernels generated (fb: tilefuse's aten fallback ops; EAGER: graphs tilefuse ran eagerly). geomean: "
        "over the models that ran (count in brackets); 'not passed': rows whose accuracy is not pass. "
        "compile s tf/ind: tilefuse's compile seconds / Inductor's (< 1: tilefuse compiles faster)."
    )
    return "\n".join(lines) + "\n"


def _parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: give i/n, e.g. 2/5") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: i must be in 1..n")
    return i, n


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a positive number")
    return v


def parse_args(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    ap.add_argument("--suite", default="all", choices=("hf", "timm", "llm", "all"))
    ap.add_argument("--set", default="core", choices=("core", "full"), help="HF models: one per family, or all")
    ap.add_argument("--mode", default="both", choices=("inference", "training", "both"))
    ap.add_argument("--only", default="", help="NAME[,NAME]: these models only")
    ap.add_argument("--backends", default="tilefuse,inductor")
    ap.add_argument("--repeat", type=_positive, default=20, help="timing rounds (eager and compiled interleaved)")
    ap.add_argument("--warmup", type=int, default=3, help="warm calls of each before timing")
    ap.add_argument(
        "--precision", default="auto", choices=("auto", "bf16", "fp32"), help="auto: bf16 on CUDA, fp32 on the CPU"
    )
    ap.add_argument("--iterations", type=_positive, default=2, help="calls per accuracy run (the last is checked)")
    ap.add_argument("--batch-size", type=_positive, default=None, help="override every model's batch size")
    ap.add_argument("--csv", default=None, help="rows are appended here (default zoo.csv; --cpu-smoke: none)")
    ap.add_argument("--out", default="", help="write the markdown table here too")
    ap.add_argument("--resume", action="store_true", help="skip (model, mode, backend) rows already in --csv")
    ap.add_argument("--shard", type=_parse_shard, default=None, help="i/n: the i-th of n parts of the model list")
    ap.add_argument(
        "--timeout", type=_positive, default=540, help="seconds per child process (one model and backend, its modes)"
    )
    ap.add_argument("--time-budget", type=_positive, default=None, help="start no child after this many seconds")
    ap.add_argument("--device", default=None, choices=("cuda", "cpu"))
    ap.add_argument("--warm-caches", action="store_true", help="children share the caches (default: cold)")
    ap.add_argument(
        "--bytecode-cache",
        default=os.path.join(tempfile.gettempdir(), "tf_zoo_pycache"),
        help="PYTHONPYCACHEPREFIX of the children ('' : none, Python's default)",
    )
    ap.add_argument("--isolate-modes", action="store_true", help="a process per mode too (default: per backend)")
    ap.add_argument("--log", default="", help="append every child's output to this file")
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    ap.add_argument("--report", action="store_true", help="only print (and --out) the table of --csv")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny models on the CPU through the interpreter")
    # a child process (internal)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--backend", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--modes", default=None, help=argparse.SUPPRESS)
    return ap, ap.parse_args(argv)


def select(opts: argparse.Namespace, ap: argparse.ArgumentParser) -> list[Spec]:
    if opts.cpu_smoke:
        import importlib.util

        specs = [s for s in SMOKE if not s.vision or importlib.util.find_spec("timm") is not None]
    else:
        specs = [s for s in zoo(opts.set) if opts.suite in ("all", s.suite)]
    if opts.only:
        names = [n for n in opts.only.split(",") if n]
        known = {s.name: s for s in zoo("full") + SMOKE}
        for n in names:
            if n not in known:
                ap.error(f"--only: unknown model {n!r} (--list shows them)")
        wanted = set(names)
        specs = [known[n] for n in known if n in wanted]
    if opts.shard:
        i, n = opts.shard
        specs = specs[i - 1 :: n]
    return specs


def main(argv: list[str] | None = None) -> int:
    ap, opts = parse_args(argv)
    if opts.child:
        return child_main(opts)
    backends = [b for b in opts.backends.split(",") if b]
    if not backends or any(b not in BACKENDS for b in backends):
        ap.error(f"--backends {opts.backends!r}: choose one or more of {','.join(BACKENDS)}")
    if opts.cpu_smoke:
        if opts.backends != "tilefuse,inductor" and backends != ["tilefuse"]:
            ap.error("--cpu-smoke runs tilefuse only")
        backends = ["tilefuse"]
        opts.device = "cpu"
        opts.repeat, opts.warmup, opts.iterations = 1, 0, 1
    if opts.csv is None and not opts.cpu_smoke:
        opts.csv = "zoo.csv"
    if opts.report:
        rows = read_csv(opts.csv)
        if not rows:
            ap.error(f"--report: no rows in {opts.csv!r}")
        text = report(rows, backends)
        print(text)
        if opts.out:
            with open(opts.out, "w") as f:
                f.write(text)
        return 0
    specs = select(opts, ap)
    if opts.list:
        for s in specs:
            print(f"{s.suite:5} {s.name:42} batch {s.batch_size:4} {'train+infer' if s.training else 'infer only'}")
        return 0
    if opts.device is None:
        opts.device = "cuda" if _cuda_available() else "cpu"
        if opts.device == "cpu":
            print("no CUDA device: the zoo measures GPUs (try --cpu-smoke); nothing run")
            return 0
    modes = list(MODES) if opts.mode == "both" else [opts.mode]
    done = set()
    if opts.resume and opts.csv:
        done = {(r["model"], r["mode"], r["backend"]) for r in read_csv(opts.csv)}
    log = open(opts.log, "a") if opts.log else None  # noqa: SIM115
    start = time.perf_counter()
    new_rows: list[dict] = []
    try:
        if opts.cpu_smoke:  # one process for every tiny model: its start-up is most of the time
            jobs = [(specs, modes, backends[0])]
        else:  # one process per model and backend (and mode, with --isolate-modes)
            jobs = []
            for s in specs:
                spec_modes = [m for m in modes if m == "inference" or s.training]
                groups = [[m] for m in spec_modes] if opts.isolate_modes else [spec_modes]
                jobs += [([s], g, b) for b in backends for g in groups]
        for job_specs, job_modes, backend in jobs:
            todo = [(s, m) for s in job_specs for m in job_modes if (s.name, m, backend) not in done]
            if not todo:
                continue
            if opts.time_budget and time.perf_counter() - start > opts.time_budget:
                print(f"--time-budget {opts.time_budget}s spent: stopping before {job_specs[0].name} ({backend})")
                break
            for row in run_child(job_specs, job_modes, backend, opts, log):
                if (row["model"], row["mode"], backend) in done:
                    continue
                if opts.csv:
                    append_csv(opts.csv, row)
                new_rows.append(row)
                print(_progress(row), flush=True)
    finally:
        if log is not None:
            log.close()
    rows = read_csv(opts.csv) if opts.csv and not opts.cpu_smoke else new_rows
    text = report(rows, backends)
    print()
    print(text)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
    if opts.cpu_smoke:
        bad = [r for r in new_rows if not _passed(r) or _num(r.get("eager_graphs")) != 0]
        for r in bad:
            print(f"FAILED: {r['model']} {r['mode']}: {r.get('status')} {r.get('accuracy')} {r.get('error', '')}")
        return 1 if bad or not new_rows else 0
    return 0


def _progress(r: dict) -> str:
    parts = [f"{r.get('model')} {r.get('mode')} {r.get('backend')}: {r.get('status')}"]
    if r.get("accuracy"):
        parts.append(f"acc {r['accuracy']} (max_err {r.get('max_err')})")
    if r.get("speedup") is not None:
        parts.append(f"speedup {r['speedup']}x")
    if r.get("compile_s") is not None:
        parts.append(f"compile {r['compile_s']}s")
    if r.get("kernels") is not None:
        parts.append(f"kernels {r['kernels']}")
    if r.get("eager_graphs"):
        parts.append(f"EAGER graphs {r['eager_graphs']}")
    parts.append(f"{r.get('wall_s')}s")
    if r.get("error"):
        parts.append(f"error: {r['error'][:200]}")
    return ", ".join(parts)


def _cuda_available() -> bool:
    """Asked in a child, so the parent never initializes CUDA (nor imports torch)."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


if __name__ == "__main__":
    sys.exit(main())
