"""The benchmark harness of generated modules: ``python <generated module>.py``.

Every generated module ends with what this needs (``codegen.wrapper.module_trailer``): the graph's
name, ``_input_specs`` (each argument of ``call``: a tensor's size, stride, dtype, device and
storage offset as compiled, a size argument's value) and ``_kernel_info`` (per kernel: the nodes
fused into it, its ops, the buffers it reads and writes and the bytes that moves), and a
``__main__`` block calling ``compiled_module_main``. That builds random inputs of the recorded
layouts (``torch._dynamo.testing.rand_strided``, as Inductor's compiled-module harness: normal
floats, integer and boolean tensors zero, so index inputs stay in range), runs ``call`` once
(compiling and autotuning its kernels), then prints

* the time per call: ``triton.testing.do_bench`` on CUDA (its median, ms); on the CPU the mean
  wall time of a few calls (kernels run in Triton's interpreter: the number says how the
  interpreter does, not a device);
* per kernel: its launches per call, the bytes those move (``_kernel_info``'s estimate: the whole
  of each buffer argument, read or written), its time per call (each launch timed again on its
  own, on the same arguments, right after it ran: ``do_bench`` on CUDA, wall time on the CPU)
  and the achieved bandwidth (bytes / time, GB/s); and what the extern calls and the Python in
  between take (the call's time minus the kernels').

Constants. A module's constants (tensors the graph holds, the operator objects of extern calls)
are module globals injected when tilefuse loads it; the copies written to a debug folder carry
them in the file (``embed_constants``, a base64 pickle; tensors larger than
``EMBED_MAX_TENSOR_BYTES`` become random tensors of their layout, as the inputs). The copy under
tilefuse's cache directory has none and refuses to run when it needs them.
"""

from __future__ import annotations

import argparse
import base64
import io
import pickle
import re
import sys
import time
import zlib
from typing import Any

EMBED_MAX_TENSOR_BYTES = 64 << 20
_EMBED_MARKER = "_embedded_constants = "
_MAIN_MARKER = 'if __name__ == "__main__":\n'


# ---------------------------------------------------------------------------------- constants
def _random_tensor(size: tuple, stride: tuple, dtype: Any, device: str) -> Any:
    """A random tensor of the given layout (a large constant left out of a debug copy)."""
    import torch
    from torch._dynamo.testing import rand_strided

    if device.startswith("cuda") and not torch.cuda.is_available():
        device = "cpu"
    return rand_strided(size, stride, dtype, device)


class _ConstantPickler(pickle.Pickler):
    """Pickles a module's constants: operator overloads by name (``graph_cache``'s rule), tensors
    larger than the limit as a random tensor of their layout."""

    def reducer_override(self, obj: Any) -> Any:
        import torch

        from .graph_cache import _reduce_op

        if isinstance(obj, torch._ops.OpOverload):
            return _reduce_op(obj)
        if isinstance(obj, torch.Tensor) and obj.numel() * obj.element_size() > EMBED_MAX_TENSOR_BYTES:
            return _random_tensor, (tuple(obj.shape), tuple(obj.stride()), obj.dtype, str(obj.device))
        return NotImplemented


def embed_constants(source: str, constants: dict) -> str:
    """``source`` (a generated module) with ``constants`` written into it, for a copy that runs
    as a script: one ``_embedded_constants = "<base64>"`` line before its ``__main__`` block (the
    kernels' lines do not move). ``source`` unchanged when it has no such block or the
    constants do not pickle (the copy then refuses to run, saying so)."""
    at = source.rfind(_MAIN_MARKER)
    if at < 0:
        return source
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    buf = io.BytesIO()
    try:
        with unset_fake_temporarily():
            _ConstantPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(constants)
    except Exception:  # noqa: BLE001 - a copy without its constants still reads as source
        return source
    data = base64.b64encode(zlib.compress(buf.getvalue())).decode()
    return f'{source[:at]}{_EMBED_MARKER}"{data}"\n\n\n{source[at:]}'


def _load_constants(g: dict) -> None:
    """Put the module's constants into its globals ``g`` from its embedded copy; SystemExit when
    the module has none and needs them."""
    if "_constants" in g:  # loaded by tilefuse: injected already
        return
    data = g.get("_embedded_constants")
    if data is None:
        src = _module_source(g)
        if "_constants[" in src or re.search(r"\b_c\d+\b", src):
            raise SystemExit(
                "tilefuse: this copy of the module does not carry its constants; run the copy "
                "tilefuse writes to its debug folder (TORCH_COMPILE_DEBUG=1, or "
                "options={'debug_dir': ...}), which does"
            )
        g["_constants"] = {}
        return
    g.update(pickle.loads(zlib.decompress(base64.b64decode(data))))


def _module_source(g: dict) -> str:
    try:
        with open(g.get("__file__") or "") as f:
            return f.read()
    except OSError:
        return ""


# ---------------------------------------------------------------------------------- inputs
def make_inputs(specs: list) -> list:
    """Random arguments for ``call`` from ``_input_specs`` (see the module docstring).
    SystemExit naming the device when a tensor's device is CUDA and none is available."""
    import torch
    from torch._dynamo.testing import rand_strided

    out: list = []
    for spec in specs:
        kind = spec[0]
        if kind == "tensor":
            _, size, stride, dtype, device, offset = spec
            if device.startswith("cuda") and not torch.cuda.is_available():
                raise SystemExit(f"tilefuse: this module was compiled for {device}, and no CUDA device is available")
            dt = getattr(torch, dtype.replace("torch.", ""))
            t = rand_strided(size, stride, dt, device, extra_size=offset)
            if offset:
                t = torch.as_strided(t, size, stride, offset)
            out.append(t)
        elif kind == "float":
            out.append(float(spec[1]))
        else:
            out.append(spec[1])
    return out


# ---------------------------------------------------------------------------------- timing
def _on_cuda(inputs: list) -> bool:
    import torch

    return any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)


def time_ms(fn: Any, cuda: bool, iters: int) -> float:
    """Milliseconds per run of ``fn``: ``triton.testing.do_bench``'s median on CUDA, else the
    mean wall time of ``iters`` runs."""
    if cuda:
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=5, rep=max(20, iters)))
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e3 / iters


class _TimedLauncher:
    """Stands in for a kernel's launcher during the per-kernel pass: each launch runs once as
    usual (the call goes on with its results), then is timed again on its own arguments."""

    def __init__(self, name: str, launcher: Any, info: dict, cuda: bool, iters: int, rows: dict):
        self.name, self.launcher, self.info, self.cuda, self.iters, self.rows = name, launcher, info, cuda, iters, rows

    def __call__(self, *args: Any) -> None:
        import torch

        self.launcher(*args)
        ms = time_ms(lambda: self.launcher(*args), self.cuda, self.iters)
        nbytes = self.info.get("bytes")
        if nbytes is None:  # symbolic sizes: this launch's own tensors
            twice = set(self.info.get("twice", ()))
            nbytes = sum(
                a.numel() * a.element_size() * (2 if i in twice else 1)
                for i, a in enumerate(args)
                if isinstance(a, torch.Tensor)
            )
        row = self.rows.setdefault(self.name, [0, 0, 0.0])
        row[0] += 1
        row[1] += nbytes
        row[2] += ms

    def run(self, stream: int | None, *args: Any) -> None:
        """A generated CUDA wrapper's launch (``KernelLauncher.run``): timed as ``__call__``."""
        self(*args)


def benchmark(g: dict, iters: int | None = None, per_kernel: bool = True) -> dict:
    """Run the module whose globals are ``g`` on random inputs of its recorded layouts and time
    it (see the module docstring). Returns ``{"graph", "device", "call_ms", "kernels": {name:
    {"launches", "bytes", "ms", "gbps", "ops"}}, "defined", "per_kernel"}`` (per call;
    ``defined``: the kernels the module defines; ``kernels`` is empty without ``per_kernel``).
    ``iters``: timed runs on the CPU, do_bench's milliseconds of timing on CUDA (None: the
    default, 3 or 100); ValueError when it is below 1."""
    if iters is not None and iters < 1:
        raise ValueError(f"iters must be at least 1, not {iters}")
    _load_constants(g)
    inputs = make_inputs(g["_input_specs"])
    cuda = _on_cuda(inputs)
    iters = iters or (100 if cuda else 3)
    call = g["call"]
    call(list(inputs))  # compiles (and autotunes) every kernel
    call_ms = time_ms(lambda: call(list(inputs)), cuda, iters)
    rows: dict = {}
    if per_kernel:
        info = g.get("_kernel_info", {})
        saved = {k: g[f"{k}_launcher"] for k in info if f"{k}_launcher" in g}
        try:
            for k, ln in saved.items():
                # each launch: do_bench's shortest run (20 ms) on CUDA, a tenth of the calls' runs on the CPU
                g[f"{k}_launcher"] = _TimedLauncher(k, ln, info[k], cuda, 20 if cuda else max(1, iters // 10), rows)
            call(list(inputs))
        finally:
            g.update({f"{k}_launcher": ln for k, ln in saved.items()})
    kernels = {}
    for k, (n, nbytes, ms) in rows.items():
        kernels[k] = {
            "launches": n,
            "bytes": nbytes,
            "ms": ms,
            "gbps": nbytes / (ms * 1e6) if ms > 0 else 0.0,
            "ops": g.get("_kernel_info", {}).get(k, {}).get("ops", []),
        }
    device = next((str(t.device) for t in inputs if hasattr(t, "device")), "cpu")
    return {
        "graph": g.get("_graph_name", "?"),
        "device": device,
        "call_ms": call_ms,
        "kernels": kernels,
        "defined": len(g.get("_kernel_info", {})),
        "per_kernel": per_kernel,
    }


def format_report(res: dict) -> str:
    """The printed table of ``benchmark``'s result."""
    lines = [f"graph {res['graph']} on {res['device']}: {res['call_ms']:.4f} ms per call"]
    ks = res["kernels"]
    if not res.get("per_kernel", True):
        lines.append(f"{res.get('defined', 0)} Triton kernel(s) defined, not timed one by one (--no-per-kernel)")
        return "\n".join(lines)
    if not ks:
        lines.append("no Triton kernels (extern calls only)")
        return "\n".join(lines)
    width = max(len("kernel"), *(len(k) for k in ks))
    lines.append(f"{'kernel':<{width}}  {'launches':>8}  {'bytes':>12}  {'ms':>10}  {'GB/s':>9}  ops")
    total = 0.0
    for k, r in sorted(ks.items(), key=lambda kv: -kv[1]["ms"]):
        total += r["ms"]
        ops = ",".join(r["ops"][:6])
        lines.append(f"{k:<{width}}  {r['launches']:>8}  {r['bytes']:>12}  {r['ms']:>10.4f}  {r['gbps']:>9.2f}  {ops}")
    # the kernels are timed apart from the calls, so with noisy timings (the CPU) the sum can
    # exceed a call's time: the rest is then shown as 0
    rest = max(0.0, res["call_ms"] - total)
    lines.append(f"kernels: {total:.4f} ms per call; the rest (extern calls, Python): {rest:.4f} ms")
    return "\n".join(lines)


def _at_least_one(text: str) -> int:
    """``--iters``'s value: an integer of at least 1 (argparse's error otherwise)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def compiled_module_main(g: dict, argv: list | None = None) -> dict:
    """``python <generated module>.py [--iters N] [--no-per-kernel]``: benchmark the module whose
    globals are ``g`` and print the table (``format_report``); returns ``benchmark``'s result."""
    p = argparse.ArgumentParser(description=f"time tilefuse graph {g.get('_graph_name', '?')} on random inputs")
    p.add_argument(
        "--iters",
        type=_at_least_one,
        default=None,
        help="on the CPU, timed runs (default: 3); on CUDA, milliseconds of timing for do_bench (default: 100)",
    )
    p.add_argument("--no-per-kernel", action="store_true", help="time whole calls only")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    res = benchmark(g, a.iters, not a.no_per_kernel)
    print(format_report(res))
    return res
