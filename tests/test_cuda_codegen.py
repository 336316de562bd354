"""Generated CUDA kernels compile with Triton's real compiler, without a GPU.

The interpreter runs the CPU flavour of each kernel; the CUDA flavour differs (runtime size
arguments instead of constexprs, libdevice calls, eviction hints, autotuning configs) and only the
GPU machine used to compile it. Here graphs are lowered for fake ``cuda`` tensors (FakeTensorMode
needs no device), the generated module is imported in a subprocess with the interpreter off, and
every kernel is compiled for every candidate config for an sm_90 target (``triton.compile`` with
an explicit ``GPUTarget``: front end, MLIR passes, ptxas). A kernel Triton rejects on the GPU
fails here, in CI.
"""

from __future__ import annotations

import math

import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from tilefuse import config
from tilefuse.codegen.wrapper import WrapperCodegen
from tilefuse.graph import GraphLowering
from tilefuse.ir import graph_context as G
from tilefuse.scheduler import schedule

_COMPILE = textwrap.dedent("""
    import importlib.util, sys, torch, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from tilefuse.runtime.autotune import _triton_config
    TY = {torch.float32: "*fp32", torch.int64: "*i64", torch.int32: "*i32", torch.bool: "*i1",
          torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float64: "*fp64", torch.int8: "*i8",
          torch.uint8: "*u8", torch.int16: "*i16", int: "i64"}
    spec = importlib.util.spec_from_file_location("generated", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    n = fma = 0
    for ln in mod._launchers:
        for cfg in ln.configs:
            sig, consts = {}, {}
            for i, a in enumerate(ln.fn.arg_names):
                if i < len(ln.arg_dtypes):
                    sig[a] = TY[ln.arg_dtypes[i]]
                else:
                    sig[a] = "constexpr"
                    consts[a] = cfg[a]
            tc = _triton_config(cfg)  # the options the runtime compiles with (num_stages: Triton's default)
            opts = {"num_warps": tc.num_warps, "num_stages": tc.num_stages}
            opts["enable_fp_fusion"] = tc.kwargs["enable_fp_fusion"]
            k = triton.compile(ASTSource(ln.fn, sig, consts), target=GPUTarget("cuda", 90, 32), options=opts)
            assert k.asm["cubin"], ln.fn
            n += 1
            fma += k.asm["ptx"].count("fma.rn.f32")
    print("FMA", fma)
    print("COMPILED", n)
""")


def _call_source(src: str) -> str:
    """The generated module's ``call`` function: its text up to the next top-level line."""
    lines = src[src.index("def call") :].splitlines()
    end = next((i for i, ln in enumerate(lines[1:], 1) if ln and not ln[0].isspace()), len(lines))
    return "\n".join(lines[:end]).rstrip() + "\n"


def _cuda_source(fn, *shapes_dtypes) -> str:
    """The wrapper module tilefuse generates for ``fn`` on CUDA tensors of the given
    ``(shape, dtype)``s (fake tensors: no device needed)."""
    mode = FakeTensorMode()
    with mode:
        args = [
            torch.empty(s, dtype=d, device="cuda") if d.is_floating_point else torch.zeros(s, dtype=d, device="cuda")
            for s, d in shapes_dtypes
        ]
    return _cuda_source_of(fn, mode, args)


def _cuda_source_of(fn, mode, args) -> str:
    """The wrapper module tilefuse generates for ``fn`` on the fake CUDA tensors ``args`` of ``mode``."""
    gm = make_fx(fn, tracing_mode="fake")(*args)
    graph = GraphLowering(gm, args, "cuda_codegen")
    with mode:
        graph.run()
    with G.set_graph(graph):
        src, _ = WrapperCodegen(graph, schedule(graph.buffers)).generate()
    return src


def _softmax_family(x, w, b, t):
    return (
        F.softmax(x, -1),
        F.log_softmax(x, 0),
        F.layer_norm(x, x.shape[-1:], w, b),
        F.cross_entropy(x, t),
        torch.logsumexp(x, -1),
        x.sum(),
        x.amax(0),
        x.argmax(-1),
    )


def _pointwise_mix(a, b, i):
    return (
        (a.t() + b).relu(),
        torch.cumsum(a, 1),
        torch.zeros(64, device=a.device).index_add(0, i, a[:, 0]),
        torch.where(a > 0, a.exp2(), a.erf()),
        torch.rand_like(a) * a,
        a.to(torch.bfloat16).sigmoid(),
    )


def _layer_norm_formula(x, w, b):
    """LayerNorm as torch's decomposition computes it (float32 rsqrt of the variance)."""
    mean = x.mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt((x - mean).square().mean(-1, keepdim=True) + 1e-5) * w + b


def _float_division_family(a, b):
    """Floor division, remainder and fmod of floats (libdevice ``fmod`` on the GPU), with tensor
    and literal divisors, negation and -0.0 and -nan constants, in float32, bfloat16 and float64."""
    h, d = a.to(torch.bfloat16), a.double()
    nn = math.copysign(math.nan, -1.0)
    return (
        a // b,
        a % b,
        torch.fmod(a, b),
        a // 0.1,
        a % -0.7,
        torch.fmod(a, 3.0),
        h // h.flip(0),
        h % 0.3,
        d // b.double(),
        d % 0.1,
        torch.fmod(d, d.flip(0)),
        a // -0.0,
        -a,
        h // -0.0,
        -h,
        d * -0.0,
        -d,  # -0.0 constants through their bits
        torch.full_like(a, nn),
        torch.full_like(d, nn),
        torch.full_like(h.half(), nn),
    )  # -nan likewise


def _size_one_scatters(x, v, i, u):
    """Scatters whose target has a size-1 axis (the index's term for it drops out of the address,
    so the store's pointer must be broadcast to the block) and ``~`` of uint8."""
    i1 = (i % 1)[:6]  # every index 0: one segment
    return (
        x.new_zeros(1, 48).index_add(0, i1, v[:6]),
        x.new_zeros(64, 1).scatter_add(1, i1.expand(64, 6), v[:, :6]),
        x.new_zeros(64, 1).scatter(1, i1.expand(64, 6), v[:, :6]),
        ~u,
    )


def _dtype_views(x, h, i):
    """``view(dtype)`` bitcasts of every same-width pair the lowering takes, bfloat16's through
    float32."""
    b = h.to(torch.bfloat16)
    return (
        x.view(torch.int32) + 1,
        (i + 1).view(torch.float32),
        h.view(torch.int16) ^ 3,
        b.view(torch.int16) + 1,
        (h.view(torch.int16) + 1).view(torch.bfloat16),
        b.view(torch.float16),
        h.view(torch.bfloat16),
        x.double().view(torch.int64),
        (i.to(torch.uint8) + 1).view(torch.int8),
    )


_CASES = {
    "looped_scans": (
        lambda a: (
            a.cumsum(1),
            (a * 1e-3 + 1).cumprod(1),
            torch.logcumsumexp(a, 1),
            a.bfloat16().cumsum(1),
            a.t().contiguous().cumsum(0),
        ),
        {},
        [((8, 9999), torch.float32)],
    ),
    "integer_pow": (
        lambda a, b: (a**b, a.to(torch.uint8) ** b.to(torch.uint8), 2 ** b.abs(), a.int() ** b.int()),
        {},
        [((64, 48), torch.int64), ((64, 48), torch.int64)],
    ),
    "dtype_views_bitcast": (
        _dtype_views,
        {},
        [((64, 48), torch.float32), ((64, 48), torch.float16), ((64, 48), torch.int32)],
    ),
    "size_one_scatters_uint8_not": (
        _size_one_scatters,
        {},
        [((64, 48), torch.float32), ((64, 48), torch.float32), ((64,), torch.int64), ((64, 48), torch.uint8)],
    ),
    "float_floor_division_remainder_fmod": (
        _float_division_family,
        {},
        [((64, 48), torch.float32), ((64, 48), torch.float32)],
    ),
    "layer_norm_ptx_rsqrt": (
        _layer_norm_formula,
        {},
        [((64, 300), torch.bfloat16), ((300,), torch.float32), ((300,), torch.float32)],
    ),
    "softmax_family_persistent": (
        _softmax_family,
        {},
        [((64, 300), torch.float32), ((300,), torch.float32), ((300,), torch.float32), ((64,), torch.int64)],
    ),
    "softmax_family_looped_bf16": (
        _softmax_family,
        {"persistent_reduction_threshold": 16},
        [((8, 9999), torch.bfloat16), ((9999,), torch.bfloat16), ((9999,), torch.bfloat16), ((8,), torch.int64)],
    ),
    "pointwise_tiles_scans_atomics_random": (
        _pointwise_mix,
        {},
        [((64, 48), torch.float32), ((48, 64), torch.float32), ((64,), torch.int64)],
    ),
    "pointwise_autotuned": (
        _pointwise_mix,
        {"autotune_pointwise": True},
        [((64, 48), torch.float32), ((48, 64), torch.float32), ((64,), torch.int64)],
    ),
}


def _compile_for_sm90(src: str, tmp_path, **env_vars: str) -> str:
    """Compile every kernel of a generated module for sm_90 in a fresh process (Triton's compiler
    with the runtime's options, no GPU needed); its stdout: ``FMA <fused multiply-adds in the
    PTX>`` and ``COMPILED <kernels>``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "generated.py"
    path.write_text(src)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(
        os.environ,
        TRITON_INTERPRET="0",
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), here) if p),
        **env_vars,
    )
    r = subprocess.run(
        [sys.executable, "-c", _COMPILE, str(path)], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0 and "COMPILED" in r.stdout, r.stdout[-2000:] + r.stderr[-6000:]
    return r.stdout


@pytest.mark.parametrize("case", sorted(_CASES))
def test_generated_cuda_kernels_compile_for_sm90(case, tmp_path):
    fn, opts, args = _CASES[case]
    with config.patch(tiny_kernel_numel=0, **opts):  # small shapes: compile every candidate config
        src = _cuda_source(fn, *args)
    assert "jit_for('cuda')" in src
    if "looped" in case:
        assert "eviction_policy" in src and "tl.maximum(" in src  # eviction hints, online softmax
    out = _compile_for_sm90(src, tmp_path)
    assert int(out.split("COMPILED")[1]) >= src.count("make_launcher(tf_")


def test_products_are_rounded_before_a_sum_unless_fp_fusion_is_on(tmp_path):
    """With ``fp_fusion`` off (the default) a product is rounded before it is added, as eager's
    one-op kernels round it: no fused multiply-add in the PTX; on, Triton contracts them."""
    src = _cuda_source(
        lambda x, s, m: x * s - m, ((64, 40), torch.float32), ((64, 1), torch.float32), ((64, 1), torch.float32)
    )
    assert "enable_fp_fusion" not in src  # a runtime option: the generated module does not fix it
    assert int(_compile_for_sm90(src, tmp_path / "off").split("FMA")[1].split()[0]) == 0
    assert int(_compile_for_sm90(src, tmp_path / "on", TILEFUSE_FP_FUSION="1").split("FMA")[1].split()[0]) > 0


def _launcher_configs(src: str) -> list[list[dict]]:
    """The candidate configs of each ``make_launcher`` call in a generated module."""
    import ast

    out = []
    for line in src.splitlines():
        if "= make_launcher(tf_" in line:
            call = ast.parse(line.split("=", 1)[1].strip()).body[0].value
            out.append(ast.literal_eval(call.args[2]))
    return out


def test_pointwise_kernels_get_one_config_unless_autotune_pointwise():
    """Inductor's pointwise rule: a pointwise kernel launches with one config (1-D: 1024 elements
    per program, 4 warps; a 2-D tile: 64 x 64, 4 warps) unless max_autotune_pointwise (here
    ``autotune_pointwise``); reductions keep several."""
    big = ((4096, 4096), torch.float32)
    assert _launcher_configs(_cuda_source(lambda a: a.sin() + 1, big)) == [[{"XBLOCK": 1024, "num_warps": 4}]]
    with config.patch(autotune_pointwise=True):
        tuned = _launcher_configs(_cuda_source(lambda a: a.sin() + 1, big))
    assert tuned == [
        [{"XBLOCK": 1024, "num_warps": 4}, {"XBLOCK": 512, "num_warps": 4}, {"XBLOCK": 2048, "num_warps": 8}]
    ]
    # a small tensor: the block never exceeds the next power of two of the extent
    assert _launcher_configs(_cuda_source(lambda a: a.sin() + 1, ((5, 7), torch.float32))) == [
        [{"XBLOCK": 64, "num_warps": 4}]
    ]
    # a 2-D tile (pointwise too): one config, 64 x 64 at 4 warps, unless autotune_pointwise
    assert _launcher_configs(_cuda_source(lambda a: a.t() + a, big)) == [[{"YBLOCK": 64, "XBLOCK": 64, "num_warps": 4}]]
    with config.patch(autotune_pointwise=True):
        assert _launcher_configs(_cuda_source(lambda a: a.t() + a, big)) == [
            [
                {"YBLOCK": 64, "XBLOCK": 64, "num_warps": 4},
                {"YBLOCK": 128, "XBLOCK": 64, "num_warps": 8},
                {"YBLOCK": 64, "XBLOCK": 128, "num_warps": 8},
            ]
        ]
    # reductions keep several
    assert all(len(c) > 1 for c in _launcher_configs(_cuda_source(lambda a: a.sum(-1), big)))
    # a long-row sum: split in two stages; the second (64 rows of a few partial sums) is tiny
    # (config.tiny_kernel_numel) and keeps one config
    sums = _launcher_configs(_cuda_source(lambda a: a.sum(-1), ((64, 100000), torch.float32)))
    assert [len(c) > 1 for c in sums] == [True, False], sums


def _lm_head(h, w, b, g):
    # the GPT-2 LM-head products: a 50257-wide output (n), contraction (k) and transposed operand (m)
    return h @ w.t(), torch.addmm(b, h, w.t()), g @ w, g.t() @ h


_LM_HEAD_ARGS = [
    ((512, 768), torch.bfloat16),
    ((50257, 768), torch.bfloat16),
    ((50257,), torch.bfloat16),
    ((512, 50257), torch.bfloat16),
]


def test_misaligned_matrix_products_run_on_padded_operands():
    """Inductor's pad_mm rule: every cuBLAS leading dimension lands on a 16-byte boundary (50257 ->
    50264 for bf16) and the results come back dense, with eager's strides."""
    src = _cuda_source(_lm_head, *_LM_HEAD_ARGS)
    call = _call_source(src)
    calls = [ln for ln in call.splitlines() if "aten.mm" in ln or "aten.addmm" in ln]
    assert len(calls) == 4, call
    # padded operands (n and k padded, the transposed g along m), each padded once: w's rows
    # serve w.t() (n) and w (k), g's columns serve g (k) and g.t() (m), read as transposed views
    assert call.count("_empty_strided_cuda((50264, 768), (768, 1)") == 1  # padded w
    assert call.count("_empty_strided_cuda((512, 50264), (50264, 1)") == 3  # padded g, two padded products
    assert "(768, 50264), (1, 768)" in call and "(50264, 512), (1, 50264)" in call
    # kernels: the pads of w, the bias and g, then one copy of both outputs to eager's strides
    # (padding w.t() and g.t() as separate transposed copies took two more)
    assert call.count("_launcher.run(_stream, ") == 4, call
    # the outputs: eager's dense strides, not views of the padded results
    ret = call[call.index("return") :]
    assert "(512, 50257), (50264, 1)" not in ret
    assert "(512, 50257), (50257, 1)" in call
    with config.patch(pad_mm=False):
        plain = _cuda_source(_lm_head, *_LM_HEAD_ARGS)
    assert "50264" not in plain


def test_slices_of_padded_products_are_returned_with_eager_strides():
    """A slice of a padded product returned by the graph: eager's row stride (50257), not the
    padded one (50264): a copy into a buffer with eager's (gapped) strides."""
    src = _cuda_source(
        lambda h, w: ((h @ w.t())[:, :5], (h @ w.t())[3:]), ((512, 768), torch.bfloat16), ((50257, 768), torch.bfloat16)
    )
    call = _call_source(src)
    assert "(50264, 768), (768, 1)" in call and "(768, 50264), (1, 768)" in call  # the products ran padded
    ret = call[call.index("return") :]
    assert "reinterpret_tensor" not in ret  # no view of a padded product is returned
    assert "_empty_strided_cuda((512, 5), (50257, 1)" in call and "_empty_strided_cuda((509, 50257), (50257, 1)" in call


def test_small_or_aligned_matrix_products_are_not_padded():
    src = _cuda_source(lambda a, b: a @ b, ((64, 100), torch.bfloat16), ((100, 30), torch.bfloat16))
    assert "_empty_strided_cuda((64, 104)" not in src and "(104, 32)" not in src  # below PAD_MM_MIN_MACS
    src = _cuda_source(lambda a, b: a @ b, ((1024, 768), torch.bfloat16), ((768, 4096), torch.bfloat16))
    assert "def tf_" not in src  # aligned: the operands go to cuBLAS as they are


def test_float32_rsqrt_is_the_ptx_instruction_so_norm_kernels_skip_libdevice():
    """rsqrt in float32 (also of a bf16 input, computed in float32) is emitted as the PTX
    instruction libdevice's __nv_rsqrtf compiles to, so a LayerNorm kernel links no libdevice;
    float64 keeps tl.rsqrt. The compile test above builds these kernels for sm_90."""
    x32 = ((64, 300), torch.float32)
    src = _cuda_source(_layer_norm_formula, x32, ((300,), torch.float32), ((300,), torch.float32))
    assert "rsqrt.approx.ftz.f32" in src and "tl.rsqrt(" not in src and "libdevice." not in src
    assert "rsqrt.approx.ftz.f32" in _cuda_source(torch.rsqrt, ((8, 8), torch.bfloat16))
    src64 = _cuda_source(torch.rsqrt, ((8, 8), torch.float64))
    assert "tl.rsqrt(" in src64 and "rsqrt.approx" not in src64


def test_kernel_names_say_kind_and_ops_and_are_unique_in_the_graph():
    """Inductor-style kernel names (``tf_<poi|per|red>_fused_<ops>_<index>``): a profiler's
    kernel list says what each kernel does, and no two kernels of a graph share a name."""
    import re

    def f(x, w, y):
        return (y * 2).sin(), x.sum(-1), (x @ w).softmax(-1)

    src = _cuda_source(f, ((64, 300), torch.float32), ((300, 40), torch.float32), ((1000,), torch.float32))
    names = re.findall(r"^def (tf_\w+)\(", src, re.M)
    assert len(names) == len(set(names)) >= 3
    assert all(re.fullmatch(r"tf_(poi|per|red)(_fused(_[a-z0-9_]+)?)?_\d+", n) for n in names), names
    assert any(n.startswith("tf_poi_fused_") and "sin" in n for n in names), names
    assert any(n.startswith("tf_per_fused_") and "sum" in n for n in names), names
    assert all(f"{n}_launcher = make_launcher({n}," in src for n in names)
    with config.patch(persistent_reduction_threshold=16):
        looped = re.findall(r"^def (tf_\w+)\(", _cuda_source(lambda x: x.sum(-1), ((8, 300), torch.float32)), re.M)
    assert looped and looped[0].startswith("tf_red_fused_sum"), looped


def test_an_atomic_update_kernel_is_named_after_its_update():
    """index_add's kernel accumulates with atomic adds: its name says so (it was ``tf_poi_<n>``)."""
    import re

    src = _cuda_source(
        lambda x, i: torch.ops.aten.index_put(x.new_zeros(8, 16), [i % 8], x, True),
        ((32, 16), torch.float32),
        ((32,), torch.int64),
    )
    names = re.findall(r"^def (tf_\w+)\(", src, re.M)
    assert any("atomic_add" in n for n in names), names


def test_cuda_call_runs_under_its_device_guard_and_allocates_through_the_c_entry_point():
    """A CUDA graph's ``call`` runs under ``torch.cuda._DeviceGuard`` of its tensors' device (kernels
    launch on, and buffers are allocated on, the current device, which need not be theirs) and
    allocates with torch's C entry point ``_empty_strided_cuda``, as Inductor's wrapper does (no
    Python argument parsing per allocation)."""
    src = _cuda_source(lambda a: (a.sin() + 1, a.sum(0)), ((64, 32), torch.float32))
    compile(src, "generated", "exec")  # a valid module
    call = _call_source(src)
    body = call.splitlines()
    guard = next(i for i, ln in enumerate(body) if ln.strip().startswith("with torch.cuda._DeviceGuard("))
    assert body[guard].strip() == "with torch.cuda._DeviceGuard(0):"
    # everything after the guard (allocations, launches, the return) is inside it
    assert all(ln.startswith("        ") for ln in body[guard + 1 :] if ln.strip()), call
    assert "_empty_strided_cuda((64, 32), (32, 1), torch.float32)" in call, call
    assert "torch.empty_strided(" not in call
    assert hasattr(torch._C._dynamo.guards, "_empty_strided_cuda")  # the fast path exists in this torch
    # the stream is fetched once per call, first thing under the guard, and every kernel launches
    # through its launcher's lean ``run`` on it
    assert body[guard + 1].strip() == "_stream = launch_stream(0)" and call.count("launch_stream(") == 1, call
    launches = [ln.strip() for ln in body if "_launcher" in ln]
    assert len(launches) == 2 and all(re.match(r"^tf_\w+_launcher\.run\(_stream, ", ln) for ln in launches), call


def _index_dtypes(src: str) -> set[str]:
    """The index dtypes the kernels of a generated module compute their offsets in."""
    return set(re.findall(r"index = \(.*\)\.to\((tl\.int(?:32|64))\)", src))


def test_a_small_view_of_a_storage_past_int32_indexes_in_int64():
    """24 elements of a 3 x (2**30 + 8) int8 storage: the last row starts at element 2**31 + 16,
    which int32 offsets would wrap (Inductor's can_use_32bit_indexing checks the buffers' storage
    sizes too). Fake tensors: nothing is allocated."""
    mode = FakeTensorMode()
    with mode:
        big = torch.empty_strided((3, 8), (2**30 + 8, 1), dtype=torch.int8, device="cuda")
        small = torch.empty_strided((3, 8), (16, 1), dtype=torch.int8, device="cuda")
        col = torch.empty_strided((2**31 // 4 + 8, 1), (1, 1), dtype=torch.float32, device="cuda")

    def source(fn, x):
        return _cuda_source_of(fn, mode, [x])

    for fn in (lambda x: x * 2, lambda x: x.t() + 1, lambda x: x.sum(1)):
        assert _index_dtypes(source(fn, big)) == {"tl.int64"}, fn
        assert _index_dtypes(source(fn, small)) == {"tl.int32"}, fn
    # 2**29 + 8 float32 elements: under 2**31 - 1 either way, so int32
    assert _index_dtypes(source(lambda x: x + 1, col)) == {"tl.int32"}


def test_float32_division_on_the_gpu_is_ieee_rounded_as_eagers(tmp_path):
    """Triton's float32 ``/`` is PTX's approximate ``div.full.f32``; eager's CUDA kernels round
    divisions exactly, so GPU kernels divide with ``tl.math.div_rn`` (true, floor and trunc
    division, reciprocal; half inputs computed in float32); float64 keeps ``/``, which is exact.
    The kernels compile for sm_90 without a fused multiply-add left."""

    def fn(x, y, h):
        floor = torch.div(x, y, rounding_mode="floor")
        return x / y, torch.reciprocal(x), floor, torch.div(x, y, rounding_mode="trunc"), h / y[0, 0]

    f32 = ((8, 8), torch.float32)
    src = _cuda_source(fn, f32, f32, ((8, 8), torch.bfloat16))
    kernels = src[: src.index("def call")]
    assert kernels.count("tl.math.div_rn(") >= 4, kernels
    assert not [ln for ln in kernels.splitlines() if " / " in ln and "div_rn" not in ln and "//" not in ln]
    out = _compile_for_sm90(src, tmp_path)
    assert int(out.split("COMPILED")[1]) >= 1
    src64 = _cuda_source(lambda x, y: x / y, ((8, 8), torch.float64), ((8, 8), torch.float64))
    assert "div_rn" not in src64 and " / " in src64


def test_polynomial_steps_stay_fused_multiply_adds_without_fp_fusion(tmp_path):
    """The half-precision GELU's erf polynomial spells each Horner step as ``tl.fma``: with
    ``fp_fusion`` off (no contraction of a separate product and sum) its steps are still one
    instruction each."""
    src = _cuda_source(torch.nn.functional.gelu, ((64, 64), torch.bfloat16))
    assert src.count("tl.fma(") == 9, src
    assert int(_compile_for_sm90(src, tmp_path).split("FMA")[1].split()[0]) >= 9
