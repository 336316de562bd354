"""Kernel runtime: tilefuse vs PyTorch Inductor, side by side in one process, on CUDA.

For each workload (bf16): compile the same function with ``backend="tilefuse"`` and with
``backend="inductor"``, check both outputs (and, for fwd+bwd, the gradients) against eager, then
time each with ``triton.testing.do_bench`` (``--rounds`` timings per backend, interleaved: the
table gives their medians, and notes a per-round ratio that spread over more than 3%) and print

    tilefuse ms | Inductor ms | ratio (Inductor time / tilefuse time; > 1: tilefuse faster) |
    achieved bandwidth of each as a share of the device-to-device copy bandwidth

The copy bandwidth is measured in the same run (a large tensor copy: 2 × bytes / time). Achieved
bandwidth counts the bytes a perfect kernel must move (every input read once, every output written
once); it is left out for matmul-bound workloads (MLP, transformer block). Kernel counts of both
backends are printed too, and each backend's peak memory over one call (MiB the caching allocator
held beyond what was allocated before the call, outputs included: ``peak_mib``). A workload whose graph tilefuse could not compile (it warns and runs that
graph eagerly) is flagged "EAGER" — its time is then eager's, not tilefuse's.

Usage:
    python benches/runtime.py                 # every workload at full size (needs a CUDA GPU)
    python benches/runtime.py --small         # sizes ~8-16x smaller (less memory and time)
    python benches/runtime.py --only softmax,layernorm
    python benches/runtime.py --profile --only block_fwd_bwd   # top GPU kernels of each backend
    python benches/runtime.py --flush read    # CUDA events after a reading L2 flush (``event_bench``)
    python benches/runtime.py --dynamic --only layernorm   # both backends with dynamic=True
    python benches/runtime.py --cpu-smoke     # every workload once at a tiny size on the CPU, through
                                              # Triton's interpreter, tilefuse vs eager: correctness only
    python benches/runtime.py --dry-run --against aot_eager   # the GPU table's code path on the CPU
Exit status: 0 when every checked output matched eager, 1 otherwise (with --cpu-smoke also when a
workload ran eagerly: then nothing of tilefuse's was checked); without a GPU (and without
--cpu-smoke) it prints why and exits 0 after doing nothing. Options are not abbreviated.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import statistics
import sys
import time
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable

# kernels on CPU tensors need the interpreter, set before triton loads (the parser takes no
# abbreviations, so these are the only spellings: ``--cpu`` would run every graph eagerly)
if "--cpu-smoke" in sys.argv or "--dry-run" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# --------------------------------------------------------------------------------------------
# workloads: plain functions of tensors (parameters passed in), so each backend compiles its own
# copy of the code object and neither cache sees the other.


def silu_mul(x, y):
    return F.silu(x) * y


def bias_gelu(x, b):
    return F.gelu(x + b)


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def rmsnorm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def column_sum(x):
    return x.sum(dim=0)


def transpose_add(a, b):
    return a + b.t()


def nchw_to_nhwc_relu(x):
    return torch.relu(x.permute(0, 2, 3, 1).contiguous())


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w1, b1, w2, b2, n_head: int):
    """A pre-norm GPT-style transformer block: x + attn(ln1(x)); x + mlp(ln2(x))."""
    B, S, D = x.shape
    h = F.layer_norm(x, (D,), ln1_w, ln1_b)
    q, k, v = F.linear(h, w_qkv, b_qkv).split(D, dim=-1)
    q, k, v = (t.view(B, S, n_head, D // n_head).transpose(1, 2) for t in (q, k, v))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + F.linear(a.transpose(1, 2).reshape(B, S, D), w_o, b_o)
    h = F.layer_norm(x, (D,), ln2_w, ln2_b)
    return x + F.linear(F.gelu(F.linear(h, w1, b1), approximate="tanh"), w2, b2)


def block_fwd_bwd(*args):
    """Forward and backward of ``block``: returns the input gradient and every parameter's."""
    *tensors, n_head = args
    out = block(*tensors, n_head=n_head)
    grads = torch.autograd.grad(out.float().square().mean(), tensors)
    return grads


# A 12-layer GPT-2 (transformers' GPT2LMHeadModel, random weights) training step: forward with the
# language-model loss, then the gradient of every parameter. The module only gives the structure:
# the parameters are the workload's arguments (torch.func.functional_call), like the others.
_GPT: dict = {}


def gpt12_train(ids, *params):
    """Loss and every parameter's gradient of one GPT-2 training step on ``ids`` [batch, seq]."""
    model, names = _GPT["model"], _GPT["names"]
    out = torch.func.functional_call(model, dict(zip(names, params)), (ids,), {"labels": ids})
    return (out.loss, *torch.autograd.grad(out.loss, params))


def _gpt_make(size, dtype, device):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from tilefuse import demo

    b, t, layers = SHAPES["gpt12_train"][size]
    model, _ = demo.build_gpt2("tiny" if size == "tiny" else "small", device, n_layer=layers, batch=b, seq=t)
    model = model.to(dtype).train()
    names = [n for n, _ in model.named_parameters()]
    _GPT.update(model=model, names=names)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (b, t), generator=g).to(device)
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    return (ids, *params)


@dataclass
class Workload:
    name: str
    fn: Callable
    make: Callable[[str, torch.dtype, str], tuple]  # (size, dtype, device) -> args
    bytes_moved: Callable[[tuple, Any], int] | None  # (args, output) -> ideal bytes; None: compute-bound
    atol: float = 2e-2
    rtol: float = 2e-2
    train: bool = False  # inputs need requires_grad (fwd+bwd inside the compiled function)
    relative: bool = False  # check max error against rtol x the output's largest magnitude


def _nbytes(*ts) -> int:
    n = 0
    for t in ts:
        if isinstance(t, torch.Tensor):
            n += t.numel() * t.element_size()
        elif isinstance(t, (tuple, list)):
            n += _nbytes(*t)
    return n


def _io_bytes(args, out) -> int:
    return _nbytes(*args) + _nbytes(out)


# sizes per mode: "full" (the Inductor comparison's sizes), "small" (--small), "tiny" (--cpu-smoke)
SHAPES: dict[str, dict[str, tuple]] = {
    "silu_mul": {"full": (8192, 8192), "small": (2048, 4096), "tiny": (8, 33)},
    "bias_gelu": {"full": (8192, 8192), "small": (2048, 4096), "tiny": (8, 33)},
    "softmax": {"full": (32768, 4096), "small": (4096, 4096), "tiny": (8, 33)},
    "layernorm": {"full": (32768, 4096), "small": (4096, 4096), "tiny": (8, 33)},
    "rmsnorm": {"full": (32768, 4096), "small": (4096, 4096), "tiny": (8, 33)},
    "column_sum": {"full": (32768, 4096), "small": (4096, 4096), "tiny": (37, 16)},
    "transpose_add": {"full": (8192, 8192), "small": (2048, 2048), "tiny": (17, 19)},
    "nchw_to_nhwc_relu": {"full": (64, 256, 56, 56), "small": (16, 128, 56, 56), "tiny": (2, 3, 5, 4)},
    "cross_entropy": {"full": (8192, 32000), "small": (2048, 32000), "tiny": (8, 50)},
    "mlp": {"full": (8192, 4096, 16384), "small": (2048, 1024, 4096), "tiny": (8, 16, 32)},  # tokens, d, hidden
    "block": {"full": (8, 1024, 2048, 16), "small": (4, 512, 1024, 8), "tiny": (2, 8, 16, 2)},  # B, S, D, heads
    # batch, sequence, layers of GPT-2 small (768 wide, 12 heads, 50257 tokens); tiny: the demo's tiny model
    "gpt12_train": {"full": (8, 512, 12), "small": (4, 256, 12), "tiny": (2, 16, 2)},
}


def _rand(shape, dtype, device, scale=1.0, requires_grad=False):
    t = torch.randn(shape, dtype=torch.float32, device=device).mul_(scale).to(dtype)
    return t.requires_grad_(requires_grad)


def _block_args(size, dtype, device, train):
    B, S, D, H = SHAPES["block"][size]
    r = lambda *s, scale=0.02: _rand(s, dtype, device, scale, train)  # noqa: E731
    ones = lambda n: torch.ones(n, dtype=dtype, device=device).requires_grad_(train)  # noqa: E731
    zeros = lambda n: torch.zeros(n, dtype=dtype, device=device).requires_grad_(train)  # noqa: E731
    return (
        r(B, S, D, scale=1.0),
        ones(D),
        zeros(D),
        r(3 * D, D),
        zeros(3 * D),
        r(D, D),
        zeros(D),
        ones(D),
        zeros(D),
        r(4 * D, D),
        zeros(4 * D),
        r(D, 4 * D),
        zeros(D),
        H,
    )


def _make(name):
    def make(size, dtype, device):
        s = SHAPES["block" if name.startswith("block") else name][size]
        if name in ("silu_mul",):
            return (_rand(s, dtype, device), _rand(s, dtype, device))
        if name == "bias_gelu":
            return (_rand(s, dtype, device), _rand(s[-1:], dtype, device))
        if name == "layernorm":
            return (_rand(s, dtype, device), _rand(s[-1:], dtype, device), _rand(s[-1:], dtype, device))
        if name == "rmsnorm":
            return (_rand(s, dtype, device), _rand(s[-1:], dtype, device))
        if name == "transpose_add":
            return (_rand(s, dtype, device), _rand(s[::-1], dtype, device))
        if name == "cross_entropy":
            n, c = s
            return (_rand(s, dtype, device), torch.randint(0, c, (n,), device=device))
        if name == "mlp":
            t, d, h = s
            return (
                _rand((t, d), dtype, device),
                _rand((h, d), dtype, device, 0.02),
                _rand((h,), dtype, device, 0.02),
                _rand((d, h), dtype, device, 0.02),
                _rand((d,), dtype, device, 0.02),
            )
        if name == "block":
            return _block_args(size, dtype, device, False)
        if name == "block_fwd_bwd":
            return _block_args(size, dtype, device, True)
        return (_rand(s, dtype, device),)

    return make


def _block_fwd_kw(*args):
    *t, n_head = args
    return block(*t, n_head=n_head)


WORKLOADS: list[Workload] = [
    Workload("silu_mul", silu_mul, _make("silu_mul"), _io_bytes),
    Workload("bias_gelu", bias_gelu, _make("bias_gelu"), _io_bytes),
    Workload("softmax", softmax, _make("softmax"), _io_bytes),
    Workload("layernorm", layernorm, _make("layernorm"), _io_bytes),
    Workload("rmsnorm", rmsnorm, _make("rmsnorm"), _io_bytes),
    Workload("column_sum", column_sum, _make("column_sum"), _io_bytes, atol=1e-1, rtol=2e-2),
    Workload("transpose_add", transpose_add, _make("transpose_add"), _io_bytes),
    Workload("nchw_to_nhwc_relu", nchw_to_nhwc_relu, _make("nchw_to_nhwc_relu"), _io_bytes),
    Workload("cross_entropy", cross_entropy, _make("cross_entropy"), _io_bytes),
    Workload("mlp", mlp, _make("mlp"), None, rtol=3e-2, relative=True),
    Workload("block_fwd", _block_fwd_kw, _make("block"), None, rtol=3e-2, relative=True),
    Workload("block_fwd_bwd", block_fwd_bwd, _make("block_fwd_bwd"), None, rtol=3e-2, relative=True, train=True),
    Workload("gpt12_train", gpt12_train, _gpt_make, None, rtol=5e-2, relative=True, train=True),
]


def _fresh(fn: Callable, tag: str) -> Callable:
    """A copy of ``fn`` with its own (unequal) code object, so Dynamo's per-code caches of the two
    backends never meet."""
    name = f"{fn.__code__.co_name}__{tag}"
    code = (
        fn.__code__.replace(co_name=name, co_qualname=name)
        if hasattr(fn.__code__, "co_qualname")
        else fn.__code__.replace(co_name=name)
    )
    return types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)


# torch.compile's ``dynamic`` for both backends (``--dynamic``: True, symbolic sizes from the first
# call; None, the default: static, recompiling with symbolic sizes only when a size changes)
DYNAMIC: bool | None = None


def _compile(fn: Callable, backend: str) -> Callable:
    return torch.compile(_fresh(fn, backend), backend=backend, dynamic=DYNAMIC)


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in _flat(o)] if isinstance(out, (tuple, list)) else []


def _check(name: str, got, want, atol: float, rtol: float, relative: bool = False) -> str | None:
    """None when close, else a message naming the worst output."""
    g, w = _flat(got), _flat(want)
    if len(g) != len(w):
        return f"{name}: {len(g)} outputs, eager has {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape:
            return f"{name}: output {i} has shape {tuple(a.shape)}, eager {tuple(b.shape)}"
        if relative:
            # bf16 matmul chains: compare the worst error with the output's scale
            err = (a.float() - b.float()).abs().max().item()
            scale = b.float().abs().max().item()
            if not err <= rtol * scale + 1e-6:
                return (
                    f"{name}: output {i} differs from eager (max abs err {err:.3g} > {rtol} x max |eager| {scale:.3g})"
                )
        elif not torch.allclose(a.float(), b.float(), atol=atol, rtol=rtol, equal_nan=True):
            err = (a.float() - b.float()).abs().max().item()
            return f"{name}: output {i} differs from eager (max abs err {err:.3g}, atol {atol}, rtol {rtol})"
    return None


def _run_tilefuse_once(w: Workload, args) -> tuple[Callable, Any, list[str], int]:
    """Compile with tilefuse and call once; return (compiled fn, output, compile-failure warnings, kernels)."""
    from tilefuse import metrics

    metrics.reset()
    fn = _compile(w.fn, "tilefuse")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn(*args)
    fails = [str(r.message).splitlines()[0] for r in rec if str(r.message).startswith("tilefuse:")]
    return fn, out, fails, metrics.generated_kernel_count


def cpu_smoke(only: set[str] | None, dtype: torch.dtype) -> int:
    """Every workload once at a tiny size on the CPU (Triton interpreter), tilefuse vs eager."""
    bad = 0
    print(f"cpu smoke: tilefuse vs eager, tiny shapes, {dtype}, kernels in Triton's interpreter")
    for w in WORKLOADS:
        if only and w.name not in only:
            continue
        torch.manual_seed(0)
        args = w.make("tiny", dtype, "cpu")
        t0 = time.perf_counter()
        want = w.fn(*args)
        try:
            _, got, fails, kernels = _run_tilefuse_once(w, args)
        except Exception as e:  # noqa: BLE001 - report every workload, then fail
            print(f"  {w.name:<20} ERROR {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            bad += 1
            continue
        msg = _check(w.name, got, want, w.atol, w.rtol, w.relative)
        # a graph run eagerly checked nothing of tilefuse's: a failure here, not "ok"
        status = "MISMATCH" if msg is not None else ("EAGER" if fails else "ok")
        bad += msg is not None or bool(fails)
        extra = f"  EAGER ({len(fails)} graph(s) fell back: {fails[0][:200]})" if fails else ""
        print(f"  {w.name:<20} {status:<8} {kernels:>3} kernels  {time.perf_counter() - t0:5.1f} s{extra}")
        if msg:
            print(f"      {msg}")
    print("all workloads match eager" if not bad else f"{bad} workload(s) FAILED")
    return 1 if bad else 0


def _cpu_bench(fn, warmup: int = 1, rep: int = 1) -> float:
    """Wall-clock ms of one call (``--dry-run``: exercises the GPU path's code on the CPU)."""
    fn()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


FLUSHES = ("do_bench", "zero", "read")
_FLUSH_BYTES = 256 * 2**20  # as do_bench's buffer: larger than the H200's 50 MiB L2 several times over


def event_bench(fn: Callable[[], Any], flush: str, warmup: int = 25, rep: int = 100) -> float:
    """Mean ms per call of ``fn`` on CUDA, each call timed with CUDA events right after an L2 flush of
    kind ``flush``: ``"zero"`` writes zeros over a 256 MiB buffer, as ``triton.testing.do_bench``
    does (it leaves the L2 cache full of dirty lines, which the next kernel writes back to DRAM
    while it runs); ``"read"`` sums the same buffer instead (the cache is left holding clean lines,
    evicted for free). A read-only kernel such as the column sum (268 MB read, 16 KB written) pays
    for the zeroing flush's write-backs in full (docs/benchmarks.md: the runtime table under two
    flushes, and the L2 flush study). Otherwise do_bench's procedure: ``fn`` once, five flushed
    calls to estimate its time, ``warmup`` ms of unflushed calls, then ``rep`` ms of timed calls
    (at least one each). Raises ValueError for an unknown ``flush``."""
    if flush not in ("zero", "read"):
        raise ValueError(f"flush must be 'zero' or 'read', got {flush!r}")
    buf = torch.empty(_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    buf.zero_()
    clear = buf.zero_ if flush == "zero" else (lambda: torch.sum(buf, dtype=torch.int32))

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        clear()
        fn()
    end.record()
    torch.cuda.synchronize()
    est = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup / est))):
        fn()
    n = max(1, int(rep / est))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        clear()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    buf = None  # free the flush buffer (a lambda above refers to the name)
    return statistics.mean(s.elapsed_time(e) for s, e in zip(starts, ends))


def _flushed_bench(flush: str) -> Callable[..., float]:
    """The timer for ``--flush``: ``triton.testing.do_bench`` itself, or ``event_bench`` with that flush."""
    if flush == "do_bench":
        from triton.testing import do_bench

        return do_bench
    if flush not in FLUSHES:
        raise ValueError(f"flush must be one of {FLUSHES}, got {flush!r}")
    return lambda fn, warmup=25, rep=100: event_bench(fn, flush, warmup=warmup, rep=rep)


def side_by_side(
    bench: Callable[..., float], fa: Callable[[], Any], fb: Callable[[], Any], rounds: int, rep: int
) -> tuple[float, float, list[float]]:
    """Time ``fa`` and ``fb`` alternately, ``rounds`` times each (a, b, a, b, ...), with ``bench``
    (``triton.testing.do_bench`` or ``event_bench``'s flushed timer: ms per call, ``warmup=25``,
    ``rep`` ms of timing); return their
    median times (ms) and each round's ratio ``b / a``. Interleaving makes a host or device whose
    speed drifts during the run weigh on both alike: a host-bound step (the 12-layer GPT's) moves
    by more from one timing to the next than the difference between the backends
    (docs/benchmarks.md, gpt12_train's host side). Raises ValueError for ``rounds`` < 1."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(bench(fa, warmup=25, rep=rep))
        tb.append(bench(fb, warmup=25, rep=rep))
    return statistics.median(ta), statistics.median(tb), [b / a for a, b in zip(ta, tb)]


def peak_mib(fn: Callable[[], Any], device: str) -> float:
    """MiB the device's caching allocator held at most during one call of ``fn`` beyond what was
    allocated before it (its outputs, which the call returns, included): torch's
    ``max_memory_allocated`` after ``reset_peak_memory_stats``. NaN off CUDA."""
    if device != "cuda":
        return float("nan")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak / 2**20


def copy_bandwidth(device: str = "cuda", gib: float = 1.0, bench: Callable | None = None) -> float:
    """Device-to-device copy bandwidth in GB/s (reads + writes), from a large tensor copy."""
    if bench is None:
        from triton.testing import do_bench as bench

    n = int(gib * 2**30) // 4
    src = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src), warmup=10, rep=100)
    bw = 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9
    src = dst = None  # free both (the timed lambda refers to the names)
    if device == "cuda":
        torch.cuda.empty_cache()
    return bw


def gpu_bench(
    only: set[str] | None,
    size: str,
    dtype: torch.dtype,
    rep: int,
    device: str = "cuda",
    against: str = "inductor",
    rounds: int = 5,
    flush: str = "do_bench",
) -> int:
    """The side-by-side table: each backend's time is the median of ``rounds`` interleaved timings
    (``side_by_side``), and a workload whose per-round ratio spread over more than 3% says so in
    its notes. ``device="cpu"`` (``--dry-run``) runs the same code on the CPU with wall-clock
    timing, to check the script itself; its numbers mean nothing."""
    import torch._inductor.metrics as imetrics

    if device == "cuda":
        do_bench = _flushed_bench(flush)
        dev = torch.cuda.get_device_name()
        copy_bw = copy_bandwidth(device, bench=do_bench)
    else:
        do_bench = _cpu_bench
        dev = "CPU (dry run: Triton interpreter, timings meaningless)"
        copy_bw = copy_bandwidth(device, gib=1 / 64, bench=_cpu_bench)
    print(f"device: {dev}; torch {torch.__version__}; sizes: {size}; dtype: {dtype}; against: {against}")
    timer = {
        "do_bench": "triton.testing.do_bench (zeroing L2 flush)",
        "zero": "CUDA events after a zeroing L2 flush",
        "read": "CUDA events after a reading L2 flush",
    }[flush]
    print(f"timer: {timer if device == 'cuda' else 'wall clock'}")
    copied = "1 GiB" if device == "cuda" else "16 MiB"
    print(
        f"measured device-to-device copy bandwidth: {copy_bw:.0f} GB/s (2 x bytes / time, {copied} copy)"
        + ("; both backends compiled with dynamic=True" if DYNAMIC else "")
        + "\n"
    )
    other = "Inductor" if against == "inductor" else against
    hdr = (
        f"{'workload':<20} {'shape':<22} {'tilefuse ms':>11} {(other + ' ms')[:11]:>11} {'ratio':>6} "
        f"{'tf %copyBW':>10} {'ind %copyBW':>11} {'tf kern':>7} {'ind kern':>8} {'tf MiB':>8} {'ind MiB':>8}  notes"
    )
    print(hdr)
    print("-" * len(hdr))
    bad = 0
    ratios = []
    for w in WORKLOADS:
        if only and w.name not in only:
            continue
        torch.manual_seed(0)
        shape = "x".join(map(str, SHAPES["block" if w.name.startswith("block") else w.name][size]))
        notes = []
        try:
            args = w.make(size, dtype, device)
            want = w.fn(*args)
            tf_fn, got, fails, tf_kernels = _run_tilefuse_once(w, args)
            msg = _check(w.name, got, want, w.atol, w.rtol, w.relative)
            if fails:
                notes.append(f"EAGER: {len(fails)} graph(s) fell back ({fails[0][:160]})")
            if msg:
                bad += 1
                notes.append("MISMATCH " + msg)
            imetrics.reset()
            ind_fn = _compile(w.fn, against)
            ind_out = ind_fn(*args)
            ind_kernels = imetrics.generated_kernel_count
            imsg = _check(w.name, ind_out, want, w.atol, w.rtol, w.relative)
            if imsg:
                notes.append("(Inductor itself differs from eager: " + imsg + ")")
            t_tf, t_ind, round_ratios = side_by_side(do_bench, lambda: tf_fn(*args), lambda: ind_fn(*args), rounds, rep)
            if rounds > 1 and max(round_ratios) > 1.03 * min(round_ratios):
                notes.append(f"ratio per round {min(round_ratios):.2f}-{max(round_ratios):.2f}")
            m_tf = peak_mib(lambda: tf_fn(*args), device)
            m_ind = peak_mib(lambda: ind_fn(*args), device)
        except torch.cuda.OutOfMemoryError:
            print(f"{w.name:<20} {shape:<22} out of memory: rerun with --small")
            bad += 1
            torch.cuda.empty_cache()
            continue
        except Exception as e:  # noqa: BLE001 - report every workload, then fail
            print(f"{w.name:<20} {shape:<22} ERROR {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            bad += 1
            continue
        ratio = t_ind / t_tf
        if not fails and not msg:
            ratios.append(ratio)
        if w.bytes_moved is not None:
            nb = w.bytes_moved(args, want)
            tf_bw = f"{100 * nb / (t_tf * 1e-3) / 1e9 / copy_bw:9.0f}%"
            ind_bw = f"{100 * nb / (t_ind * 1e-3) / 1e9 / copy_bw:10.0f}%"
        else:
            tf_bw, ind_bw = f"{'-':>10}", f"{'-':>11}"
        print(
            f"{w.name:<20} {shape:<22} {t_tf:11.3f} {t_ind:11.3f} {ratio:6.2f} {tf_bw} {ind_bw} "
            f"{tf_kernels:7d} {ind_kernels:8d} {m_tf:8.1f} {m_ind:8.1f}  {'; '.join(notes)}"
        )
        args = want = got = ind_out = None  # free them before the next workload
        if device == "cuda":
            torch.cuda.empty_cache()
    if ratios:
        ratios.sort()
        med = (
            ratios[len(ratios) // 2]
            if len(ratios) % 2
            else (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
        )
        print(
            f"\nratio = {other} time / tilefuse time (> 1: tilefuse faster); median over "
            f"{len(ratios)} fully compiled, matching workloads: {med:.2f}, min {ratios[0]:.2f}"
        )
    print("all outputs match eager" if not bad else f"{bad} workload(s) FAILED (mismatch, error or OOM)")
    return 1 if bad else 0


def profile(only: set[str] | None, size: str, dtype: torch.dtype, against: str = "inductor", top: int = 12) -> int:
    """Per workload and backend: the ``top`` GPU kernels by total CUDA time over 10 calls
    (torch.profiler), to see where one backend loses time to the other; then the wall time per
    call (ms, without the profiler) against the GPU time, and the ``top`` Python functions by own
    time over those calls (cProfile): a wall time well above the GPU time means the host (Python
    and launch overhead) bounds the step, and the listing says where it goes."""
    import cProfile
    import pstats

    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    for w in WORKLOADS:
        if only and w.name not in only:
            continue
        torch.manual_seed(0)
        args = w.make(size, dtype, "cuda")
        tf_fn = _run_tilefuse_once(w, args)[0]
        other = _compile(w.fn, against)
        other(*args)
        for label, fn in (("tilefuse", tf_fn), (against, other)):
            for _ in range(3):
                fn(*args)
            torch.cuda.synchronize()
            with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    fn(*args)
                torch.cuda.synchronize()
            rows = [e for e in prof.key_averages() if e.device_time_total > 0]
            rows.sort(key=lambda e: -e.device_time_total)
            total = sum(e.device_time_total for e in rows) / 10
            print(f"\n== {w.name} / {label}: {total / 1e3:.3f} ms GPU per call")
            for e in rows[:top]:
                print(f"  {e.device_time_total / 10 / 1e3:8.3f} ms  x{e.count // 10:<3} {e.key[:110]}")
            torch.cuda.synchronize()
            collections = []

            def on_gc(phase, info, collections=collections):
                if phase == "start":
                    collections.append(info.get("generation"))

            gc.callbacks.append(on_gc)
            t0 = time.perf_counter()
            try:
                for _ in range(10):
                    fn(*args)
                torch.cuda.synchronize()
            finally:
                gc.callbacks.remove(on_gc)
            wall = (time.perf_counter() - t0) / 10 * 1e3
            print(
                f"   wall {wall:.3f} ms per call (GPU {total / 1e3:.3f} ms: "
                f"{'host-bound' if wall > 1.1 * total / 1e3 else 'GPU-bound'}); garbage collections in "
                f"10 calls by generation: {[collections.count(g) for g in range(3)]}"
            )
            # host-side CUDA API calls (a synchronization or a blocking copy serializes host and GPU)
            with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as hprof:
                for _ in range(10):
                    fn(*args)
                torch.cuda.synchronize()
            api = [e for e in hprof.key_averages() if e.key.startswith("cuda") and "Launch" not in e.key]
            api.sort(key=lambda e: -e.cpu_time_total)
            print(
                "   CUDA runtime calls other than launches, 10 calls: "
                + (", ".join(f"{e.key} x{e.count} {e.cpu_time_total / 1e3:.2f} ms" for e in api[:6]) or "none")
            )
            host = cProfile.Profile()
            host.enable()
            for _ in range(10):
                fn(*args)
            torch.cuda.synchronize()
            host.disable()
            buf = io.StringIO()
            pstats.Stats(host, stream=buf).sort_stats("tottime").print_stats(top)
            lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
            start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
            print(f"   host, 10 calls under cProfile (top {top} by own time):")
            for ln in lines[start : start + top + 1]:
                print("   " + ln[:150])
        args = None
        torch.cuda.empty_cache()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    ap.add_argument("--small", action="store_true", help="smaller sizes (less memory and time)")
    ap.add_argument("--only", default=None, help="comma-separated workload names (default: all)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--rep", type=int, default=100, help="ms of timed calls per measurement (the timer's rep)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="timings per backend, interleaved; the table gives their medians (default 5)",
    )
    ap.add_argument(
        "--flush",
        default="do_bench",
        choices=FLUSHES,
        help="timer and L2 flush before each timed call: triton's do_bench (zeroes 256 MiB; default), "
        "or CUDA events after zeroing ('zero') or reading ('read') 256 MiB; the copy bandwidth "
        "is timed the same way",
    )
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU, correctness only")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--against", default="inductor", help="the backend compared with (default inductor)")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="instead of the table: the top GPU kernels of each backend per workload (torch.profiler)",
    )
    ap.add_argument("--top", type=int, default=12, help="--profile: kernels listed per backend (default 12)")
    ap.add_argument(
        "--dynamic",
        action="store_true",
        help="compile both backends with dynamic=True (symbolic sizes: looped reductions, no "
        "tiny-kernel shortcut), to time the kernels a dynamic-shape model runs",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="run the GPU table's code on the CPU at tiny sizes (checks the script; numbers meaningless)",
    )
    args = ap.parse_args(argv)
    if args.list:
        for w in WORKLOADS:
            print(w.name)
        return 0
    names = {w.name for w in WORKLOADS}
    only = None
    if args.only is not None:
        only = {s.strip() for s in args.only.split(",") if s.strip()}
        if not only:
            ap.error(f"--only {args.only!r}: give one or more workload names; known: {sorted(names)}")
        if only - names:
            ap.error(f"unknown workload(s) {sorted(only - names)}; known: {sorted(names)}")
    if args.rep < 1:
        ap.error(f"--rep {args.rep}: give a positive number of milliseconds")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: give a positive number")
    if args.top < 1:
        ap.error(f"--top {args.top}: give a positive number")
    if (args.cpu_smoke or args.dry_run) and os.environ.get("TRITON_INTERPRET") != "1":
        # main() called from Python without the interpreter: every graph would fall back to eager
        ap.error(
            f"{'--cpu-smoke' if args.cpu_smoke else '--dry-run'} runs kernels in Triton's interpreter, which "
            "must be on before triton is imported: run the script itself, or set TRITON_INTERPRET=1 "
            "in the environment first"
        )
    if args.flush != "do_bench" and (args.cpu_smoke or args.dry_run or args.profile):
        what = (
            "--cpu-smoke checks outputs only"
            if args.cpu_smoke
            else ("--dry-run times with the wall clock" if args.dry_run else "--profile times with torch.profiler")
        )
        ap.error(f"--flush {args.flush}: CUDA-event timing is for the GPU table; {what} (leave --flush out)")
    import torch._dynamo

    known = set(torch._dynamo.list_backends(exclude_tags=()))
    if args.against not in known:
        ap.error(f"--against {args.against!r}: not a torch.compile backend here; choose one of {sorted(known)}")
    dtype = getattr(torch, args.dtype)
    global DYNAMIC
    DYNAMIC = True if args.dynamic else None
    import tilefuse.backend  # noqa: F401  (the backend, registered by entry point; imported for metrics)

    if args.cpu_smoke:
        return cpu_smoke(only, dtype)
    if args.dry_run:
        return gpu_bench(only, "tiny", dtype, args.rep, device="cpu", against=args.against, rounds=args.rounds)
    if not torch.cuda.is_available():
        print(
            "benches/runtime.py: no CUDA GPU here, so there is nothing to time (tilefuse vs Inductor "
            "needs a GPU). Run `python benches/runtime.py --cpu-smoke` for the CPU correctness pass."
        )
        return 0
    if args.profile:
        return profile(only, "small" if args.small else "full", dtype, args.against, args.top)
    return gpu_bench(
        only,
        "small" if args.small else "full",
        dtype,
        args.rep,
        against=args.against,
        rounds=args.rounds,
        flush=args.flush,
    )


if __name__ == "__main__":
    raise SystemExit(main())
