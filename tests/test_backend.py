"""End-to-end: torch.compile(backend="tilefuse") against eager. Runs on the CPU through Triton's
interpreter when TRITON_INTERPRET=1 (CI), and on CUDA when it is 0 on a GPU machine — then every
test here carries the ``gpu`` marker. Kernel counts assert fusion."""

from __future__ import annotations

import functools
import os
import re
import types
import warnings

import pytest
import torch

from tilefuse import config, metrics
from _tf_testutil import strict_on_device  # noqa: F401 (autouse fixture)

torch.manual_seed(0)

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("0", "")
DEVICE = "cpu" if INTERPRET else "cuda"
if DEVICE == "cuda":
    pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]


def _devices():
    return [DEVICE]


def compile_and_check(fn, *args, atol=1e-5, rtol=1e-5, kernels=None, fallbacks=0):
    metrics.reset()
    cf = torch.compile(fn, backend="tilefuse")
    got = cf(*args)
    want = fn(*args)
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)
    if kernels is not None:
        assert metrics.generated_kernel_count == kernels, metrics.generated_kernel_count
    assert metrics.fallback_kernel_count == fallbacks, metrics.fallback_kernel_count
    return got


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("n", [1, 3, 127, 1025])
def test_pointwise_chain_sizes(device, n):
    x = torch.randn(n, device=device)
    y = torch.randn(n, device=device)
    compile_and_check(lambda a, b: torch.sigmoid(a * 2 - b).exp() + torch.relu(b), x, y, kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_pointwise_low_precision(dtype):
    x = torch.randn(64, 33, dtype=dtype)
    y = torch.randn(33, dtype=dtype)
    # eager rounds to the low precision after every op, tilefuse once at the end (fp32 opmath)
    tol = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 4e-2}[dtype]
    compile_and_check(lambda a, b: (a + b) * a.sin() / (b.abs() + 1), x, y, atol=tol, rtol=tol, kernels=1)


def test_integer_and_bool_ops():
    a = torch.randint(-50, 50, (5, 7))
    b = torch.randint(1, 9, (5, 7))
    compile_and_check(lambda x, y: (x // y, x % y, x * y - 3, torch.maximum(x, y), x > y, (x > 0) & (y > 3)), a, b)


def test_broadcast_transpose_add_is_one_kernel():
    x = torch.randn(17, 19)
    y = torch.randn(19, 17)
    compile_and_check(lambda a, b: a + b.t(), x, y, kernels=1)


def test_noncontiguous_inputs():
    base = torch.randn(8, 10, 12)
    perm = base.permute(2, 0, 1)
    sl = base[:, 1:9:2, ::3]
    ex = torch.randn(1, 10, 1).expand(8, 10, 12)
    compile_and_check(lambda p, s, e: p.sum(0) + 1, perm, sl, ex)
    compile_and_check(lambda p, s, e: s * 2 + e[:, 1:9:2, ::3], perm, sl, ex)


def test_lazily_negated_inputs_are_read_with_their_sign():
    # z.conj().imag is a view with the negative bit set: its memory holds the un-negated values
    z = torch.randn(6, 5, dtype=torch.complex64)
    x = z.conj().imag
    assert x.is_neg()
    compile_and_check(lambda t: t * 3 + 1, x)
    compile_and_check(lambda t: t.sum(0), x)


@pytest.mark.parametrize("shape,dim", [((7, 33), -1), ((7, 33), 0), ((4, 5, 6), (0, 2)), ((3, 1500), 1), ((1,), 0)])
def test_reductions(shape, dim):
    x = torch.randn(*shape)
    compile_and_check(
        lambda a: (a.sum(dim), a.amax(dim), a.amin(dim), a.mean(dim, keepdim=True)), x, atol=1e-4, rtol=1e-4
    )


def test_argmax_argmin_and_any():
    x = torch.randn(6, 40)
    x[2, 5] = x[2].max() + 1
    compile_and_check(lambda a: (a.argmax(1), a.argmin(0), (a > 1.5).any(1), a.argmax()), x)


def test_looped_reduction_softmax():
    # rnumel above the persistent threshold: looped reductions, several loops in one kernel
    x = torch.randn(3, 2000)
    with config.patch(persistent_reduction_threshold=1024, split_long_normalizers=False):
        compile_and_check(lambda a: torch.softmax(a, -1), x, kernels=1)
    # cut into 2 chunks of 1000 instead: the chunks' max / sum-exp, their combination, the output
    torch._dynamo.reset()
    with config.patch(persistent_reduction_threshold=1024):
        compile_and_check(lambda a: torch.softmax(a, -1), x, kernels=3)


def test_softmax_is_one_kernel():
    x = torch.randn(10, 37)
    compile_and_check(lambda a: torch.softmax(a, -1), x, kernels=1)


def test_layer_norm_forward_is_one_kernel():
    ln = torch.nn.LayerNorm(48)
    x = torch.randn(6, 48)
    with torch.no_grad():
        compile_and_check(ln, x, atol=1e-5, rtol=1e-5, kernels=1)


def test_pointwise_after_matmul_is_one_kernel():
    a, b, bias = torch.randn(8, 16), torch.randn(16, 12), torch.randn(12)
    compile_and_check(lambda x, y, c: torch.nn.functional.gelu(x @ y + c) * 2, a, b, bias, kernels=1, atol=1e-4)
    assert metrics.extern_kernel_count == 1


def test_fallback_kernel_for_unlowered_op():
    x = torch.randn(5, 9)
    compile_and_check(lambda a: torch.sort(a, 1)[0] * 2, x, fallbacks=1)


def test_output_is_view_of_input():
    x = torch.randn(4, 6)
    cf = torch.compile(lambda a: (a.t(), a[1:3], a * 1), backend="tilefuse")
    t, s, m = cf(x)
    assert t.data_ptr() == x.data_ptr() and s.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(t, x.t())
    torch.testing.assert_close(s, x[1:3])


def test_inplace_on_graph_input_keeps_torch_semantics():
    def f(a, b):
        a.add_(b)
        return a * 2

    x, y = torch.randn(5), torch.randn(5)
    x2 = x.clone()
    out = torch.compile(f, backend="tilefuse")(x, y)
    ref = f(x2, y)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x, x2)


def test_training_mlp_grads_match_eager():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    ref.load_state_dict(model.state_dict())
    cm = torch.compile(model, backend="tilefuse")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(8, 12)
        y = torch.randn(8, 4)
        loss = torch.nn.functional.mse_loss(cm(x), y)
        rloss = torch.nn.functional.mse_loss(ref(x), y)
        opt.zero_grad()
        ropt.zero_grad()
        loss.backward()
        rloss.backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)
        opt.step()
        ropt.step()
        torch.testing.assert_close(loss, rloss, atol=1e-5, rtol=1e-5)


def test_training_step_warns_nothing_about_boxed_arguments():
    """AOTAutograd warns ("... returning a function that doesn't take boxed arguments") when a
    compiled graph lacks ``_boxed_call``; Dynamo wraps the backward's compiled graph in
    ``torch._dynamo.disable``, so the mark must be one that wrapping keeps."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    ref.load_state_dict(model.state_dict())
    x = torch.randn(5, 6)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loss = torch.compile(model, backend="tilefuse")(x).pow(2).sum()
        loss.backward()
    boxed = [str(m.message) for m in w if "boxed" in str(m.message)]
    assert boxed == [], boxed
    rloss = ref(x).pow(2).sum()
    rloss.backward()
    torch.testing.assert_close(loss, rloss, atol=1e-5, rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)


def test_compile_error_falls_back_to_eager_with_one_warning(monkeypatch):
    import tilefuse.scheduler as sch

    def boom(*a, **k):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(sch, "schedule", boom)
    x = torch.randn(4)
    metrics.reset()
    with config.patch(fallback_on_error=True):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = torch.compile(lambda a: a * 3 + 1, backend="tilefuse")(x)
    torch.testing.assert_close(out, x * 3 + 1)
    msgs = [str(m.message) for m in w if "tilefuse" in str(m.message)]
    assert len(msgs) == 1 and "injected failure" in msgs[0], msgs
    # the metrics say so too: one graph runs eagerly, none was compiled
    assert metrics.eager_graph_count == 1 and metrics.generated_graph_count == 0
    torch._dynamo.reset()
    with pytest.raises(Exception, match="injected failure"):
        torch.compile(lambda a: a * 3 + 1, backend="tilefuse")(x)


def _scatter_into_one_row(x, b):
    return torch.zeros(1, 4, device=x.device).index_add(0, b, x) * 2


def test_a_kernel_that_fails_to_build_at_the_first_run_falls_back_to_eager(monkeypatch):
    """A kernel Triton rejects when it is built, at the graph's first run (as a scatter into a
    size-1 axis was before its store got a block pointer: the bug is put back here), runs the
    graph eagerly with one warning naming the graph and the error; later calls stay eager
    without warning; fallback_on_error=False raises it; the caller's own errors (an index out of
    bounds, a device assert) are raised, not fallen back from."""
    from tilefuse.codegen.triton import TritonKernelCodegen

    # the old rule: a block pointer only for a constant address
    monkeypatch.setattr(TritonKernelCodegen, "_spans_block", lambda self, idx, skind: self.mask_for(idx) is not None)
    dev = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
    x, b = torch.randn(6, 4, device=dev), torch.zeros(6, dtype=torch.long, device=dev)
    torch._dynamo.reset()
    metrics.reset()
    with config.patch(fallback_on_error=True, graph_cache=False):
        f = torch.compile(_scatter_into_one_row, backend="tilefuse")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = f(x, b)
            again = f(x * 2, b)
    # compiled, then run eagerly (counted once, not once per call)
    assert metrics.eager_graph_count == 1 and metrics.generated_graph_count == 1
    torch.testing.assert_close(out, _scatter_into_one_row(x, b))
    torch.testing.assert_close(again, _scatter_into_one_row(x * 2, b))
    msgs = [str(m.message) for m in w if "tilefuse" in str(m.message)]
    assert (
        len(msgs) == 1 and "failed to build at its first run" in msgs[0] and "running that graph eagerly" in msgs[0]
    ), msgs
    assert w[[str(m.message) for m in w].index(msgs[0])].filename == __file__  # the user's line
    torch._dynamo.reset()
    with config.patch(fallback_on_error=False, graph_cache=False):
        with pytest.raises(Exception, match="(?i)broadcast|shape"):
            torch.compile(_scatter_into_one_row, backend="tilefuse")(x, b)
    # a backward (the embedding's gradient scatter), whose inputs the run frees: on the CPU it falls
    # back at its first run, on the GPU before it (the compile workers' failure is recorded)
    emb = torch.nn.Embedding(1, 8, device=dev)
    ids = torch.zeros(2, 5, dtype=torch.long, device=dev)
    torch._dynamo.reset()
    metrics.reset()
    with config.patch(fallback_on_error=True, graph_cache=False):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.compile(lambda i: emb(i).pow(2).sum(), backend="tilefuse")(ids).backward()
    assert metrics.eager_graph_count == 1  # the backward; the forward runs its kernels
    got, emb.weight.grad = emb.weight.grad, None
    emb(ids).pow(2).sum().backward()
    torch.testing.assert_close(got, emb.weight.grad)
    msgs = [str(m.message) for m in w if "failed to build" in str(m.message)]
    assert len(msgs) == 1 and "'backward_" in msgs[0], msgs
    monkeypatch.undo()
    # an index out of bounds is the caller's error, raised as such under fallback_on_error too
    if dev == "cpu":
        torch._dynamo.reset()
        with config.patch(fallback_on_error=True, graph_cache=False):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with pytest.raises(Exception, match="index out of bounds"):
                    torch.compile(lambda a, i: a[i] * 2, backend="tilefuse")(x, torch.tensor([7]))
        assert not [m for m in w if "eagerly" in str(m.message)]


def test_backend_is_registered_by_entry_point():
    assert "tilefuse" in torch._dynamo.list_backends()


def test_unknown_option_is_a_clear_error():
    with pytest.raises(Exception, match="unknown tilefuse option"):
        torch.compile(lambda a: a + 1, backend="tilefuse", options={"no_such_option": 1})(torch.randn(2))


def test_option_values_of_the_wrong_type_are_a_clear_error():
    for opts, msg in (
        ({"fallback_on_error": "false"}, "must be True or False"),
        ({"tiling": 0}, "must be True or False"),
        ({"persistent_reduction_threshold": "64"}, "must be an int"),
    ):
        torch._dynamo.reset()
        with pytest.raises(Exception, match=msg):
            torch.compile(lambda a: a + 1, backend="tilefuse", options=opts)(torch.randn(2))


def test_option_values_out_of_range_are_a_clear_error():
    # raised when the option is given, not while compiling (where it would only make every graph
    # fall back to eager with a warning)
    for opts, msg in (
        ({"compile_pool": "fork"}, "must be one of"),
        ({"compile_workers": -3}, "must be >= 0"),
        ({"persistent_reduction_threshold": 0}, "must be >= 1"),
    ):
        torch._dynamo.reset()
        with pytest.raises(Exception, match=msg), config.patch(fallback_on_error=True):
            torch.compile(lambda a: a + 1, backend="tilefuse", options=opts)(torch.randn(2))


@pytest.mark.parametrize(
    "env,msg",
    [
        ("TILEFUSE_COMPILE_WORKERS=abc", "TILEFUSE_COMPILE_WORKERS='abc' is not an integer"),
        ("TILEFUSE_FALLBACK_ON_ERROR=flase", "is not a boolean"),
        ("TILEFUSE_COMPILE_POOL=fork", "environment variable TILEFUSE_COMPILE_POOL"),
    ],
)
def test_bad_environment_values_name_the_variable(env, msg):
    import subprocess
    import sys

    k, v = env.split("=")
    # at ``import tilefuse`` already (the package imports its config), as docs/configuration.md says
    r = subprocess.run(
        [sys.executable, "-c", "import tilefuse"],
        capture_output=True,
        text=True,
        env=dict(os.environ, **{k: v}),
        timeout=120,
    )
    assert r.returncode != 0 and msg in r.stderr, r.stderr[-2000:]


def test_metrics_do_not_count_kernels_of_a_graph_that_fell_back(monkeypatch):
    import tilefuse.runtime as R

    def broken(*a, **k):
        raise RuntimeError("simulated load failure")

    monkeypatch.setattr(R, "load_module", broken)
    metrics.reset()
    with config.patch(fallback_on_error=True), pytest.warns(UserWarning, match="simulated load failure") as rec:
        out = torch.compile(lambda a: a.sin() + 1, backend="tilefuse")(torch.randn(3))
    assert out.shape == (3,)
    # the warning points at the user's line (the compiled function's call), not into tilefuse or torch
    w = next(w for w in rec if "simulated load failure" in str(w.message))
    assert os.path.abspath(w.filename) == os.path.abspath(__file__), w.filename
    assert metrics.generated_kernel_count == 0 and metrics.generated_graph_count == 0
    assert metrics.eager_graph_count == 1


def test_debug_dir_receives_generated_code(tmp_path):
    with config.patch(debug_dir=str(tmp_path)):
        torch.compile(lambda a: a.cos() + 1, backend="tilefuse")(torch.randn(3))
    files = list(tmp_path.glob("*.py"))
    assert files and "@_jit" in files[0].read_text()


def test_sdpa_training_grads_match_eager():
    """Attention forward and backward stay whole (extern kernels), so what the forward saves is
    what the backward expects; both count as extern kernels, not as fallbacks (the backward was
    reported among the "fallback kernels (aten)" before)."""
    q, k, v = (torch.randn(1, 2, 6, 8, requires_grad=True) for _ in range(3))
    f = lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True).sum()  # noqa: E731
    metrics.reset()
    g = torch.autograd.grad(torch.compile(f, backend="tilefuse")(q, k, v), (q, k, v))
    want = torch.autograd.grad(f(q, k, v), (q, k, v))
    for a, b in zip(g, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert metrics.fallback_kernel_count == 0
    assert metrics.extern_kernel_count == 2  # the forward's attention and the backward's


def test_integer_constant_wraps_like_torch_and_int_to_bf16():
    x = torch.randint(-5, 5, (7,), dtype=torch.int32)
    compile_and_check(lambda a: a * 2**31 + 1, x)
    compile_and_check(lambda a: a.to(torch.bfloat16) * 2, x)


def test_ensure_strides_copies_mismatched_layouts_and_passes_missing_outputs():
    from tilefuse.runtime import ensure_strides

    t = torch.arange(6.0).reshape(2, 3).t()  # strides (1, 3)
    out = ensure_strides(t, (3, 2), (2, 1))
    assert out.stride() == (2, 1) and torch.equal(out, t)
    assert ensure_strides(t, (3, 2), (1, 3)) is t
    assert ensure_strides(None, (3, 2), (2, 1)) is None  # an optional output the kernel skipped
    with pytest.raises(RuntimeError, match="shape"):
        ensure_strides(t, (2, 3), (3, 1))


def test_pointwise_work_is_not_fused_into_a_few_row_looped_reduction(tmp_path):
    # a full reduction of a large tensor runs on few programs; the pointwise producer stays in its
    # own (fully parallel) kernel, while the small-row persistent case still fuses
    x = torch.randn(40001)

    def f(a):
        b = (a * 2).sin()  # two readers: a pointwise node of 40001 elements
        return b.argmax(), b * 3  # arg-reductions are never split: one program

    # without the rule all of b, the argmax and b * 3 would share the one-program reduction kernel;
    # with it, b and b * 3 share a parallel pointwise kernel and the argmax runs alone
    # (b is realized: its two readers would otherwise each recompute it)
    with config.patch(debug_dir=str(tmp_path), realize_opcount_threshold=1):
        compile_and_check(f, x, kernels=2, atol=1e-2, rtol=1e-4)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    red = src[src.index("rnumel = 40001") :]
    red = red[: red.index("def ")]
    assert "sin(" not in red and "xnumel = 1\n" in src
    y = torch.randn(8, 100)
    compile_and_check(lambda a: torch.softmax(a * 2, -1), y, kernels=1)


def _grn(x, gamma, beta):
    # a global response norm (ConvNeXt-V2, channels-last): per (image, channel) a norm over the
    # pixels, divided by its mean over the channels, scales every pixel
    gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
    nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
    return x + torch.addcmul(beta, gamma, x * nx)


@pytest.mark.parametrize("opcount", [3, 1000])
def test_costly_broadcast_operand_is_stored_once_by_its_reduction(tmp_path, opcount):
    # sqrt(sum) / (mean + eps) is computed once per (image, channel), in the kernel of the
    # channel mean, and loaded by the scaling of every pixel; with the rule off (an op count no
    # operand reaches) the scaling recomputes the square root and the division at every pixel
    x, gamma, beta = torch.randn(4, 32, 32, 64), torch.randn(64), torch.randn(64)
    with config.patch(debug_dir=str(tmp_path), realize_broadcast_opcount=opcount):
        compile_and_check(_grn, x, gamma, beta, kernels=3, atol=1e-4, rtol=1e-4)
    src = _generated(tmp_path)
    scale = src[src.index("def tf_poi_") :]
    scale = scale[: scale.index("\n\n\n")]
    assert ("sqrt" in scale) == (opcount > 3), scale
    # the stored operand: one value per (image, channel)
    assert ("((4, 1, 1, 64), (64, 64, 64, 1)" in src) == (opcount == 3), src[src.index("def call") :]


def _rotary(q, positions, inv_freq):
    # a rotary position embedding: cos and sin of position x frequency per (batch, position,
    # frequency), applied to every head of q
    freqs = positions[:, :, None].float() * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    half = q.shape[-1] // 2
    rotated = torch.cat([-q[..., half:], q[..., :half]], dim=-1)
    return q * cos + rotated * sin


def test_transcendental_broadcast_operand_is_computed_once_per_value(tmp_path):
    # cos and sin are read by each of the 8 heads: computed once into a buffer (a kernel of
    # their own), not once per head inside the rotation's kernel
    q, pos, inv = torch.randn(2, 8, 64, 64), torch.arange(64).expand(2, 64), torch.rand(32)
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(_rotary, q, pos, inv, kernels=2, atol=1e-5, rtol=1e-5)
    src = _generated(tmp_path)
    kernels = [k[: k.index("\n\n\n")] for k in src.split("def tf_")[1:]]
    rotation = [k for k in kernels if "xnumel = 65536" in k]
    assert len(rotation) == 1 and "tl.cos(" not in rotation[0] and "tl.sin(" not in rotation[0], kernels
    assert any("tl.cos(" in k and "tl.sin(" in k for k in kernels if k not in rotation), kernels


def test_full_reductions_are_split_and_fused_horizontally(tmp_path):
    # 40000 = 16 chunks of 2500: every reduction becomes partials over 16 rows + a final one, and
    # the independent reductions of one tensor share both kernels (horizontal fusion)
    x = torch.randn(40000)
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(
            lambda a: (a.sum(), a.amax(), a.amin(), (a > 3).any(), a.mean()), x, kernels=2, atol=1e-4, rtol=1e-4
        )
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert "xnumel = 16" in src and "rnumel = 2500" in src and "rnumel = 16" in src


def test_column_sum_is_an_outer_split_reduction(tmp_path):
    x = torch.randn(8192, 6)
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(lambda a: a.sum(0), x, kernels=2, atol=1e-4, rtol=1e-4)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    # 8192 rows split in 32 chunks of 256 (outer: each program covers many columns)
    assert "xnumel = 192" in src and "rnumel = 256" in src


def test_cheap_values_with_several_readers_are_inlined_not_written(tmp_path):
    # cross-entropy's fp32 copy of the logits and x - max each have two readers; writing them
    # would add two full-size fp32 tensors of traffic. Only the small per-row buffers and the
    # loss are allocated.
    x = torch.randn(8, 300).to(torch.bfloat16)
    t = torch.randint(0, 300, (8,))
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(lambda a, b: torch.nn.functional.cross_entropy(a, b), x, t, atol=2e-2, rtol=2e-2)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    # the CPU's and CUDA's allocation entry points
    src = src.replace("_empty_strided_cuda(", "torch.empty_strided(").replace(
        "_empty_strided_cpu(", "torch.empty_strided("
    )
    assert "torch.empty_strided((" in src and "empty_strided((8, 300)" not in src


def test_extern_input_that_is_a_view_of_a_computed_value_reads_its_buffer(tmp_path):
    # mm(y.t(), w) and mm(y, v) of one computed y: y is computed once, into one buffer, and the
    # transposed operand is a strided view of it (no second, transposed recomputation)
    a = torch.randn(6, 8, 12)
    w = torch.randn(48, 5)
    v = torch.randn(12, 7)

    def f(x, m, n):
        y = torch.nn.functional.gelu(x * 2).reshape(48, 12)
        return y.t() @ m, y @ n

    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(f, a, w, v, kernels=1, atol=1e-4, rtol=1e-4)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert src.count("erf(") == 1  # gelu computed once
    assert ", (12, 48), (1, 12), " in src and "reinterpret_tensor(" in src  # a view of the one buffer


def test_matrix_products_write_into_pooled_buffers(tmp_path):
    # mm / addmm / bmm results go into buffers the wrapper allocates (out=): no stride check after
    # them, and a dead product's storage is handed to a later product of the same size
    a, w1, w2, w3, b = (
        torch.randn(32, 16),
        torch.randn(16, 16),
        torch.randn(16, 16),
        torch.randn(16, 16),
        torch.randn(16),
    )
    x3, y3 = torch.randn(4, 8, 16), torch.randn(4, 16, 8)

    def f(x, p, q, r, bias, u, v):
        h = torch.relu(x @ p)
        h = torch.tanh(torch.addmm(bias, h, q, beta=0.5))
        return torch.sigmoid(h @ r), torch.bmm(u, v) * 2

    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(f, a, w1, w2, w3, b, x3, y3, atol=1e-4, rtol=1e-4)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert src.count("torch.mm(") == 2 and "torch.addmm(" in src and "beta=0.5" in src and "torch.bmm(" in src
    assert src.count(", out=buf") == 4 and "ensure_strides(buf" not in src
    assert "# reused" in src  # x @ p's storage, dead after relu, taken by a later allocation


def _generated(tmp_path) -> str:
    return "".join(p.read_text() for p in tmp_path.iterdir())


@pytest.mark.parametrize("batch", [(), (4,)])
def test_pointwise_output_is_stored_over_its_dying_input(tmp_path, batch):
    # an MLP: the bias + GELU kernel stores over the first product's memory (in_out_ptr), and the
    # second product's bias kernel over the second product's: one allocation per product. With a
    # batch dimension the products are [64, n] matrices and the kernels' outputs [4, 16, n]
    # tensors over the same memory
    def mlp(x, w1, b1, w2, b2):
        h = torch.nn.functional.gelu(x @ w1.t() + b1, approximate="tanh")
        return h @ w2.t() + b2

    rows = (16,) if batch else (64,)
    args = (
        torch.randn(*batch, *rows, 32),
        torch.randn(128, 32) * 0.2,
        torch.randn(128),
        torch.randn(32, 128) * 0.1,
        torch.randn(32),
    )
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(mlp, *args, atol=1e-4, rtol=1e-4)
    src = _generated(tmp_path)
    assert src.count("# in place") == 2 and "in_out_ptr0" in src, src
    call = src.split("\ndef call(")[1]
    assert call.count("_empty_strided_cpu(") + call.count("_empty_strided_cuda(") == 2, call
    placed = [ln for ln in call.splitlines() if ln.endswith("# in place")]
    assert all(("reinterpret_tensor(" in ln) == bool(batch) for ln in placed), placed


@pytest.mark.parametrize("case", ["read_later", "graph_output", "other_dtype", "transposed", "flipped", "two_readers"])
def test_no_in_place_store_where_the_input_is_still_needed_or_laid_out_otherwise(tmp_path, case):
    # each graph has a product whose result one pointwise kernel reads; the kernel's output must
    # not take the product's memory: the product is read again, returned, of another dtype, read
    # at other positions than the output's, or read by two outputs of the kernel
    a, w = torch.randn(16, 24), torch.randn(24, 16)

    def f(x, p):
        h = x @ p
        if case == "read_later":
            return torch.relu(h) @ h
        if case == "graph_output":
            return torch.relu(h), h
        if case == "other_dtype":
            return torch.relu(h).to(torch.float16)
        if case == "transposed":
            return torch.relu(h.t()) + 1
        if case == "flipped":  # a 1-D kernel whose lanes read other lanes' elements
            return torch.relu(h.flip(-1)) + 1
        return torch.relu(h), torch.sigmoid(h)

    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(f, a, w, atol=1e-3, rtol=1e-3)
    if case == "transposed":
        # the output has eager's transposed strides and its loops run in that storage order
        # (scheduler.nodes.stored_loop_order): each lane reads h at the position it writes, so
        # the product's memory is taken
        assert "# in place" in _generated(tmp_path)
    else:
        assert "# in place" not in _generated(tmp_path)


def test_in_place_store_chains_through_several_kernels(tmp_path):
    # a product, then pointwise kernels separated by products that read their results: every
    # pointwise result lands in the memory of the product before it, values as eager
    def f(x, p, q):
        h = torch.tanh(x @ p)
        g = torch.sigmoid(h @ q) * 3
        return torch.relu(g @ p.t()) - 1

    a, w, v = torch.randn(32, 16), torch.randn(16, 16), torch.randn(16, 16)
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(f, a, w, v, atol=1e-4, rtol=1e-4)
    assert _generated(tmp_path).count("# in place") == 3


def test_batch_norm_and_activation_store_over_the_convolution_result(tmp_path):
    # inference conv -> batch norm -> ReLU6, twice: each pointwise kernel stores in place over its
    # convolution's fresh result (the storage aten allocated, after its stride check), so no
    # second activation-sized buffer is allocated; the second convolution's result takes the
    # storage freed by the first, values as eager
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU6(),
        torch.nn.Conv2d(8, 8, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU6(),
    ).eval()
    for bn in (m[1], m[4]):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 12, 12)
    # full float32 convolutions (cuDNN's TF32 rounds its NCHW and channels-last kernels apart)
    with torch.no_grad(), config.patch(debug_dir=str(tmp_path)), torch.backends.cudnn.flags(allow_tf32=False):
        compile_and_check(m, x, atol=1e-4, rtol=1e-4)
    src = _generated(tmp_path)
    call = src[src.index("def call(") :]
    assert call.count("# in place") == 2, call
    assert call.count("aten.convolution.default") == 2
    # the kernels' outputs are the convolutions' storage: no allocation of the activation size
    assert not re.search(r"_empty_strided_\w+\(\(2, 8, 12, 12\)", call), call


def test_in_place_kernel_autotuned_sees_its_input_restored(tmp_path):
    # with pointwise autotuning each candidate config runs the kernel once more: the input the
    # kernel stores over is restored before every run (a mutated argument), so the result is
    # that of one run
    def f(x, p):
        return torch.exp(x @ p) * 0.5 + 1

    a, w = torch.randn(64, 32) * 0.1, torch.randn(32, 64) * 0.1
    with config.patch(debug_dir=str(tmp_path), autotune_pointwise=True, tiny_kernel_numel=0):
        compile_and_check(f, a, w, atol=1e-4, rtol=1e-4)
    assert "# in place" in _generated(tmp_path)


def test_identical_kernels_of_repeated_layers_are_defined_once(tmp_path):
    # three identical LayerNorm+GELU layers: three launches of one kernel definition
    def f(x, w, b):
        for _ in range(3):
            x = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (16,), w, b)) @ torch.eye(
                16, device=x.device
            )
        return x

    x, w, b = torch.randn(8, 16), torch.randn(16), torch.randn(16)
    with config.patch(debug_dir=str(tmp_path)):
        compile_and_check(f, x, w, b, atol=1e-4, rtol=1e-4)
    assert metrics.reused_kernel_count >= 2
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    n_defs = len(re.findall(r"@_jit\ndef tf_(?:poi|per|red)_", src))
    assert n_defs == metrics.generated_kernel_count - metrics.reused_kernel_count


def test_misaligned_matrix_products_match_eager():
    """mm/addmm with a 1001-wide output, contraction and transposed operand: on CUDA they run on
    zero-padded operands (Inductor's pad_mm rule); results and their strides are eager's."""
    dt = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    h = torch.randn(256, 768, dtype=dt)
    w = torch.randn(1001, 768, dtype=dt) / 30
    b = torch.randn(1001, dtype=dt)
    g = torch.randn(256, 1001, dtype=dt) / 30

    def fn(h, w, b, g):
        return h @ w.t(), torch.addmm(b, h, w.t(), beta=0.5), g @ w, g.t() @ h

    metrics.reset()
    got = torch.compile(fn, backend="tilefuse")(h, w, b, g)
    want = fn(h, w, b, g)
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, atol=2e-2, rtol=2e-2)
        assert x.stride() == y.stride()
    assert metrics.fallback_kernel_count == 0


def test_decomposition_table_keeps_what_tilefuse_lowers():
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings

    aten = torch.ops.aten
    table = decompositions(lowered=lowerings)
    # lowered ops reach the lowering whole, except the three the min-cut partitioner must see
    # through (detach -> alias, log_softmax -> torch's amax / exp / sum decomposition, layer norm)
    assert {k for k in table if k in lowerings} == {
        aten.detach.default,
        aten._log_softmax.default,
        aten.native_layer_norm.default,
    }
    for op in (aten.transpose.int, aten.split.Tensor, aten._unsafe_view.default, aten.t.default, aten.gelu.default):
        assert op in lowerings and op not in table
    # still decomposed: tilefuse's own picks; nearest upsampling (which export's core table adds)
    # is not: it is lowered with eager's rule (lowering.upsample)
    assert aten.native_layer_norm.default in table and aten.gelu_backward.default in table
    for op in (aten.upsample_nearest2d.default, aten.upsample_nearest2d.vec, aten._upsample_nearest_exact1d.default):
        assert op not in table
    assert decompositions(lowered=lowerings) is table  # built once per process
    # an inference graph (no backward to partition) keeps log_softmax and layer norm whole as well
    inference = decompositions(training=False, lowered=lowerings)
    assert {k for k in inference if k in lowerings} == {aten.detach.default}
    assert decompositions(False, lowered=lowerings) is inference
    assert {k.overloadpacket for k in set(table) - set(inference)} == {aten._log_softmax, aten.native_layer_norm}


@pytest.mark.parametrize("grad", [False, True])
def test_log_softmax_reaches_its_lowering_whole_only_without_a_backward(grad, monkeypatch):
    """Inference graphs trace with ``decompositions(training=False)``: log_softmax (and so a
    cross-entropy's) and layer norm reach their lowerings whole, skipping the decompositions'
    trace; a graph with a backward still decomposes both for the min-cut partitioner. Both match
    eager, and so does the gradient."""
    from tilefuse import backend as tf_backend
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings

    seen = []
    real = tf_backend.compile_graph

    def spy(gm, ex, kind):
        seen.append((kind, {n.target for n in gm.graph.nodes if n.op == "call_function"}))
        return real(gm, ex, kind)

    x = torch.randn(6, 40, requires_grad=grad)
    t = torch.randint(0, 40, (6,))
    w = torch.randn(40)
    f = lambda a, b: torch.nn.functional.cross_entropy(  # noqa: E731
        torch.log_softmax(torch.nn.functional.layer_norm(a, (40,), w, w * 2), -1) * 2, b
    )
    torch._dynamo.reset()
    monkeypatch.setattr(tf_backend, "compile_graph", spy)
    got = torch.compile(f, backend="tilefuse")(x, t)
    want = f(x, t)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    kinds = [k for k, _ in seen]
    assert kinds == (["forward", "backward"] if grad else ["inference"]), kinds
    for op in (torch.ops.aten._log_softmax.default, torch.ops.aten.native_layer_norm.default):
        assert (op in seen[0][1]) == (not grad), seen[0][1]
    if grad:
        (gx,) = torch.autograd.grad(got, x)
        (wx,) = torch.autograd.grad(want, x)
        torch.testing.assert_close(gx, wx, atol=1e-5, rtol=1e-5)
    assert decompositions(training=False, lowered=lowerings) is not decompositions(training=True, lowered=lowerings)


def test_views_the_table_no_longer_decomposes_match_eager():
    """transpose / t / split / unbind / squeeze / _unsafe_view reach tilefuse's own view lowerings
    (they used to be rewritten by torch's core decompositions first)."""
    x = torch.randn(6, 1, 10)

    def f(x):
        a, b = x.squeeze(1).split([4, 6], dim=1)
        p, *_ = x.transpose(0, 2).unbind(0)
        return a.t() * 2, b.reshape(3, 2, 6).sum(1), p + 1, torch.ops.aten._unsafe_view(x, [60]).cumsum(0)

    compile_and_check(f, x.to(DEVICE), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("grad", [True, False])
def test_multilabel_margin_loss_runs_as_the_aten_op_not_torchs_wrong_decomposition(grad):
    """torch 2.11's Python decomposition of ``multilabel_margin_loss_forward`` (the op's Autograd
    kernel under AOTAutograd's trace) sums over the positions after a target's -1 as class 0:
    3.25 for eager's 0.0163. tilefuse sets it aside while tracing
    (``decompositions.without_wrong_torch_decompositions``): the aten op runs, loss and gradient equal
    eager's, and torch's kernel is back in place after the compile."""
    from torch._C import DispatchKey

    import torch.nn.functional as F

    op = torch.ops.aten.multilabel_margin_loss_forward.default
    before = op.py_kernels.get(DispatchKey.Autograd)
    targets = torch.tensor([[3, -1, 0, 0, 0], [0, -1, 0, 0, 0], [2, 1, -1, 4, 4], [1, 2, 3, 0, 4]])
    x = torch.randn(4, 5).to(DEVICE).requires_grad_(grad)
    t = targets.to(DEVICE)
    for reduction in ("mean", "none"):
        torch._dynamo.reset()
        fn = functools.partial(F.multilabel_margin_loss, reduction=reduction)
        got, want = torch.compile(fn, backend="tilefuse")(x, t), fn(x, t)
        torch.testing.assert_close(got, want)
        if grad:
            (gg,), (gw,) = torch.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), x)
            torch.testing.assert_close(gg, gw)
    assert op.py_kernels.get(DispatchKey.Autograd) is before


def test_a_fallback_node_without_meta_value_is_an_error_not_a_none_output():
    """A node tilefuse runs as an aten/Python call needs its meta value (the output's shape and
    dtype); a hand-built graph without one fails to compile (eager fallback, or the error under
    ``fallback_on_error=False``) instead of returning None."""
    from tilefuse.backend import compile_graph

    def scale(t):
        return t * 2

    g = torch.fx.Graph()
    g.output((g.call_function(scale, (g.placeholder("x"),)),))
    gm = torch.fx.GraphModule({}, g)
    x = torch.rand(5, device=DEVICE)
    with config.patch(fallback_on_error=False), pytest.raises(Exception, match="has no meta value"):
        compile_graph(gm, [x])
    with config.patch(fallback_on_error=True), pytest.warns(UserWarning, match="has no meta value"):
        out = compile_graph(gm, [x])([x])
    torch.testing.assert_close(out[0], x * 2)  # the graph ran eagerly


def test_training_partition_recomputes_pointwise_chains_in_the_backward(monkeypatch):
    """With the min-cut partitioner (default, Inductor's) the forward saves fewer tensors for the
    backward than AOTAutograd's default partitioner (a tanh-GELU's intermediates are recomputed
    from its input); gradients are eager's either way."""
    import tilefuse.backend as B

    saved = {}
    real = B.compile_graph

    def spy(gm, example_inputs, kind="forward", *a, **k):
        if kind == "forward":
            out = next(n for n in gm.graph.nodes if n.op == "output")
            saved["n"] = len(out.args[0])
        return real(gm, example_inputs, kind, *a, **k)

    monkeypatch.setattr(B, "compile_graph", spy)
    torch.manual_seed(0)
    w1, w2 = torch.randn(16, 32, requires_grad=True), torch.randn(32, 8, requires_grad=True)
    x = torch.randn(4, 16)

    def f(x, w1, w2):
        return torch.nn.functional.gelu(x @ w1, approximate="tanh").mul(1.5).sin().matmul(w2).sum()

    results = {}
    for mc in (True, False):
        torch._dynamo.reset()
        a, b = w1.detach().to(DEVICE).requires_grad_(), w2.detach().to(DEVICE).requires_grad_()
        metrics.reset()
        cf = torch.compile(f, backend="tilefuse", options={"min_cut_partition": mc})
        cf(x.to(DEVICE), a, b).backward()
        results[mc] = (saved["n"], a.grad, b.grad, metrics.phase_seconds.get("partition", 0.0))
    a, b = w1.detach().to(DEVICE).requires_grad_(), w2.detach().to(DEVICE).requires_grad_()
    f(x.to(DEVICE), a, b).backward()
    for mc in (True, False):
        torch.testing.assert_close(results[mc][1], a.grad, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(results[mc][2], b.grad, atol=1e-4, rtol=1e-4)
    assert results[True][0] < results[False][0], results  # fewer forward outputs saved
    # the min-cut partitioner's time is a compile phase of its own (0 when it is not used)
    assert results[True][3] > 0 and results[False][3] == 0, results


def test_cross_entropy_training_saves_the_logits_and_row_normalizer_not_the_log_probs(monkeypatch):
    """A language-model loss (bf16 logits upcast with ``.float()``, as transformers computes it):
    log_softmax decomposes to ``(x - amax) - log(sum(exp(x - amax)))`` and detach to alias, so the
    min-cut partitioner saves the bf16 logits and per-row values and recomputes the log-probs in the
    backward instead of saving them as a float32 [rows, vocab] tensor (Inductor's partition).
    Loss and gradient match eager."""
    import tilefuse.backend as B

    saved = {}
    real = B.compile_graph

    def spy(gm, example_inputs, kind="forward", *a, **k):
        if kind == "forward":
            out = next(n for n in gm.graph.nodes if n.op == "output")
            saved["outs"] = [
                (tuple(o.meta["val"].shape), o.meta["val"].dtype)
                for o in out.args[0]
                if isinstance(o, torch.fx.Node) and isinstance(o.meta.get("val"), torch.Tensor)
            ]
        return real(gm, example_inputs, kind, *a, **k)

    monkeypatch.setattr(B, "compile_graph", spy)
    torch.manual_seed(0)
    rows, vocab = 64, 1000
    logits = torch.randn(rows, vocab, device=DEVICE).to(torch.bfloat16)
    target = torch.randint(0, vocab, (rows,), device=DEVICE)
    target[3] = -100  # an ignored position

    def f(logits, target):
        return torch.nn.functional.cross_entropy(logits.float(), target, ignore_index=-100)

    torch._dynamo.reset()
    a = logits.clone().requires_grad_()
    loss = torch.compile(f, backend="tilefuse")(a, target)
    loss.backward()
    b = logits.clone().requires_grad_()
    want = f(b, target)
    want.backward()
    torch.testing.assert_close(loss, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(a.grad.float(), b.grad.float(), atol=1e-3, rtol=1e-2)
    big = [s for s in saved["outs"] if s[0] == (rows, vocab)]
    assert big == [((rows, vocab), torch.bfloat16)], saved["outs"]  # the logits themselves, nothing float32
    assert ((rows, 1), torch.float32) in saved["outs"]  # the row maximum / log of the sum-exp


def test_torch_compile_mode_is_ignored_with_one_warning_per_mode():
    from tilefuse import backend

    backend._IGNORED_MODES_WARNED.discard("max-autotune")
    x = torch.randn(5)
    with pytest.warns(UserWarning, match="ignores torch.compile's mode='max-autotune'") as rec:
        got = torch.compile(lambda t: t * 3 + 1, backend="tilefuse", mode="max-autotune")(x)
    assert [os.path.abspath(w.filename) for w in rec if "ignores" in str(w.message)] == [os.path.abspath(__file__)]
    torch.testing.assert_close(got, x * 3 + 1)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # once per mode and process
        torch.testing.assert_close(torch.compile(lambda t: t - 2, backend="tilefuse", mode="max-autotune")(x), x - 2)
        torch.testing.assert_close(torch.compile(lambda t: t * 5, backend="tilefuse", mode="default")(x), x * 5)


def test_unknown_compile_mode_and_options_of_the_wrong_kind_are_clear_errors():
    x = torch.randn(3)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="mode='max_autotune'.*not a mode torch knows"):
        torch.compile(lambda t: t + 1, backend="tilefuse", mode="max_autotune")(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="options must be a dict of option names to values.*not list"):
        torch.compile(lambda t: t + 1, backend="tilefuse", options=["tiling"])(x)


def test_unknown_tilefuse_environment_variables_are_named_at_import():
    """A misspelt ``TILEFUSE_*`` variable is named in one warning at ``import tilefuse`` (pointing at
    the importing line); the ones tilefuse reads and the test suite's ``TILEFUSE_TEST_*`` are not."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEFUSE_")}
    code = "import warnings; warnings.simplefilter('always')\nimport tilefuse\n"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env, TILEFUSE_TILNG="0", TILEFUSE_TILING="0", TILEFUSE_TEST_X="1", TILEFUSE_CACHE_DIR="/tmp/x"),
    )
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "does not read" in ln]
    assert len(lines) == 1 and "['TILEFUSE_TILNG']" in lines[0] and lines[0].startswith("<string>:2:"), r.stderr
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env, TILEFUSE_TILING="0", TILEFUSE_TEST_X="1", TILEFUSE_EMPTY=" "),
    )
    assert r.returncode == 0 and "does not read" not in r.stderr, r.stderr  # empty counts as not set
    # loaded by torch.compile's backend lookup (no import tilefuse): the user's torch.compile line
    code = (
        "import warnings; warnings.simplefilter('always')\nimport torch\n"
        "torch.compile(lambda x: x + 1, backend='tilefuse')(torch.ones(2))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(env, TILEFUSE_TILNG="0", TRITON_INTERPRET="1"),
    )
    lines = [ln for ln in r.stderr.splitlines() if "does not read" in ln]
    assert r.returncode == 0 and len(lines) == 1 and lines[0].startswith("<string>:3:"), r.stderr[-3000:]
    from tilefuse import config

    assert config.unknown_environment_variables({"TILEFUSE_PAD_MM": "1", "TILEFUSE_PADMM": "1", "OTHER": "1"}) == [
        "TILEFUSE_PADMM"
    ]


def test_gc_paused_pauses_only_an_enabled_collector_and_always_restores_it():
    import gc

    from tilefuse.backend import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the outer block re-enables
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        with gc_paused():
            1 / 0
    assert gc.isenabled()
    with config.patch(pause_gc=False), gc_paused():
        assert gc.isenabled()
    gc.disable()  # a collector the user turned off stays off
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("pause", [True, False])
def test_the_collector_is_paused_while_a_graph_compiles(monkeypatch, pause):
    # a training step: the backend's trace and the forward's compile (inside Dynamo's frame
    # compile) and the backward's compile (there too with eager_backward, else at the first
    # backward: both run here, with the default and lazily below) all run without the collector
    # when pause_gc is on; it is enabled again once the call returns
    import gc

    import tilefuse.backend as tb

    seen = []
    orig = tb._compile

    def spy(gm, ex, name):
        seen.append((name.split("_")[0], gc.isenabled()))
        return orig(gm, ex, name)

    monkeypatch.setattr(tb, "_compile", spy)
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    f = torch.compile(lambda a, b: torch.tanh(a @ b).sum(), backend="tilefuse", options={"pause_gc": pause})
    f(x, w).backward()
    assert sorted(k for k, _ in seen) == ["backward", "forward"]
    assert all(enabled is not pause for _, enabled in seen), seen
    assert gc.isenabled()
    torch.testing.assert_close(w.grad, torch.autograd.grad(torch.tanh(x @ w).sum(), w)[0], atol=1e-5, rtol=1e-5)


def test_lazy_backward_compile_runs_without_the_collector(monkeypatch):
    import gc

    import tilefuse.backend as tb

    seen = []
    orig = tb._compile
    monkeypatch.setattr(
        tb, "_compile", lambda gm, ex, name: (seen.append((name, gc.isenabled())), orig(gm, ex, name))[1]
    )
    w = torch.randn(8, 8, requires_grad=True)
    out = torch.compile(lambda a, b: torch.tanh(a @ b).sum(), backend="tilefuse", options={"eager_backward": False})(
        torch.randn(4, 8), w
    )
    assert [n.split("_")[0] for n, _ in seen] == ["forward"]
    out.backward()
    assert [n.split("_")[0] for n, _ in seen] == ["forward", "backward"]
    assert not any(enabled for _, enabled in seen) and gc.isenabled()


@pytest.mark.parametrize("eager", [True, False])
def test_eager_backward_compiles_the_backward_with_the_forward(monkeypatch, eager):
    # config.eager_backward: the backward graph is compiled inside the forward's backend call
    # (before the forward's first run), else at the first backward; gradients as eager either way
    import tilefuse.backend as tb

    seen = []
    orig = tb._compile
    monkeypatch.setattr(tb, "_compile", lambda gm, ex, name: (seen.append(name.split("_")[0]), orig(gm, ex, name))[1])
    torch.manual_seed(0)
    w = torch.randn(16, 8, requires_grad=True)
    x = torch.randn(4, 16)

    def step(a, b):
        return torch.nn.functional.gelu(a @ b).square().mean()

    out = torch.compile(step, backend="tilefuse", options={"eager_backward": eager})(x, w)
    assert seen == (["forward", "backward"] if eager else ["forward"])
    out.backward()
    assert seen == ["forward", "backward"]
    torch.testing.assert_close(w.grad, torch.autograd.grad(step(x, w), w)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("eager", [True, False])
def test_retain_graph_and_create_graph_backward_match_eager(eager):
    # backward(retain_graph=True) twice and a first-order autograd.grad(create_graph=True) run as
    # in eager with either backward compile (an eagerly compiled backward once refused both:
    # AOTAutograd's donated buffers)
    def f(x):
        return (x @ x.t()).softmax(-1)[:, 0].sum()

    torch.manual_seed(0)
    x = torch.randn(4, 6, requires_grad=True)
    want = torch.autograd.grad(f(x), x)[0]
    g = torch.compile(f, backend="tilefuse", options={"eager_backward": eager})
    loss = g(x)
    loss.backward(retain_graph=True)
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * want, atol=1e-5, rtol=1e-5)
    x.grad = None
    (got,) = torch.autograd.grad(g(x), x, create_graph=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_retain_graph_backward_with_dynamic_shapes_matches_eager():
    # dynamic=True: AOTAutograd compiles a backward that saves sizes before its first call on any
    # backend; tilefuse's donates no buffer, so retaining the graph works for every size
    def f(x):
        return (x @ x.t()).softmax(-1)[:, 0].sum()

    g = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (4, 6):
        x = torch.randn(n, 6, requires_grad=True)
        loss = g(x)
        loss.backward(retain_graph=True)
        loss.backward()
        torch.testing.assert_close(x.grad, 2 * torch.autograd.grad(f(x), x)[0], atol=1e-5, rtol=1e-5)


def test_eager_backward_compile_error_falls_back_for_the_backward_only(monkeypatch):
    # an internal error in the backward's (eager) compile: one warning, that graph runs eagerly,
    # the forward stays compiled, gradients as eager
    import tilefuse.backend as tb

    orig = tb._compile

    def failing(gm, ex, name):
        if name.startswith("backward"):
            raise RuntimeError("injected backward failure")
        return orig(gm, ex, name)

    monkeypatch.setattr(tb, "_compile", failing)
    metrics.reset()
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    with config.patch(fallback_on_error=True), pytest.warns(UserWarning, match="injected backward failure"):
        out = torch.compile(lambda a, b: torch.sin(a @ b).sum(), backend="tilefuse")(x, w)
    out.backward()
    assert metrics.generated_graph_count == 1  # the forward
    torch.testing.assert_close(w.grad, torch.autograd.grad(torch.sin(x @ w).sum(), w)[0], atol=1e-5, rtol=1e-5)


class _FakePending:
    """Stands in for a runtime.PendingPrecompile (forked workers need a GPU): ``wait`` records
    itself and leaves the pending list, as the real one does."""

    def __init__(self, log):
        from tilefuse import runtime

        self.log, self._runtime = log, runtime
        runtime.PENDING_PRECOMPILES[self] = None

    @property
    def done(self):
        return self not in self._runtime.PENDING_PRECOMPILES

    def wait(self):
        self._runtime.PENDING_PRECOMPILES.pop(self, None)
        self.log.append(self)
        return 0.25


class _EchoModule:
    _launchers: list = []

    @staticmethod
    def call(args):
        out = (args[0] + 1,)
        args.clear()
        return out


@pytest.mark.parametrize("wait_all", [True, False])
def test_a_first_call_waits_for_every_pending_batch_or_its_own(wait_all):
    # config.precompile_wait_all (read when the graph is compiled): the first call of a graph
    # finishes every batch still compiling in workers, or only its own (a backward's batch then
    # compiles on through the forward's run); the wait is counted in the precompile_wait phase
    from tilefuse import runtime
    from tilefuse.backend import CompiledGraph

    assert not runtime.PENDING_PRECOMPILES
    log: list = []
    older, own, newer = _FakePending(log), _FakePending(log), _FakePending(log)
    try:
        with config.patch(precompile_wait_all=wait_all):
            g = CompiledGraph(_EchoModule(), "", [None], "forward_x", 0.0, pending=own)
        metrics.reset()
        assert g([torch.tensor(1.0)])[0].item() == 2.0
        if wait_all:
            assert log == [older, own, newer] and not runtime.PENDING_PRECOMPILES
            assert metrics.phase_seconds["precompile_wait"] == pytest.approx(0.75)
        else:
            assert log == [own] and list(runtime.PENDING_PRECOMPILES) == [older, newer]
            assert metrics.phase_seconds["precompile_wait"] == pytest.approx(0.25)
            assert g([torch.tensor(2.0)])[0].item() == 3.0 and log == [own]  # waited once
    finally:
        runtime.PENDING_PRECOMPILES.clear()


def test_free_inputs_after_last_use_places_each_del_after_the_last_line_naming_it():
    import random

    from tilefuse.codegen.memory_planning import free_inputs_after_last_use

    rng = random.Random(0)
    inputs = ["arg0", "arg1", "arg10", "arg2", "arg3"]
    for _ in range(200):
        body = []
        for k in range(rng.randint(0, 8)):
            used = rng.sample(inputs, rng.randint(0, 3))
            body.append(f"buf{k} = kernel({', '.join(used + ['buf_x'])})")
        returned = ", ".join(rng.sample(inputs + ["buf0"], rng.randint(0, 2)))
        out = free_inputs_after_last_use(body, inputs, returned)
        assert [ln for ln in out if not ln.startswith("del ")] == body  # only dels added
        for name in inputs:
            dels = [k for k, ln in enumerate(out) if ln == f"del {name}"]
            uses = [k for k, ln in enumerate(out) if re.search(rf"\b{name}\b", ln) and not ln.startswith("del ")]
            if re.search(rf"\b{name}\b", returned):
                assert dels == []
            else:
                assert len(dels) == 1 and all(u < dels[0] for u in uses), (name, out)
                # right after the last use (or first of all when unused)
                assert dels[0] - 1 == (uses[-1] if uses else -1) or out[dels[0] - 1].startswith("del ")


def test_a_graph_input_is_released_once_the_call_is_done_with_it():
    # the call takes its inputs in a list it clears: an input read only by the first kernel is
    # gone (no reference left) by the time the matmul's epilogue kernel launches
    import weakref

    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.backend import compile_graph
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings

    def f(a, b):
        return torch.relu((a * 2) @ b) + 1

    a, b = torch.randn(16, 8), torch.randn(8, 4)
    gm = make_fx(f, decomposition_table=decompositions(lowered=lowerings))(a, b)
    cg = compile_graph(gm, [a, b], "inference")
    assert "del arg0" in cg.source
    want = f(a, b)
    first, *rest = cg.module._launchers
    assert rest, cg.source
    seen = []
    ref = None

    class Spy:
        def __init__(self, ln):
            self.ln = ln

        def __call__(self, *args):
            seen.append(ref())
            return self.ln(*args)

    mod = cg.module
    for name, val in list(vars(mod).items()):
        if val is rest[-1]:
            setattr(mod, name, Spy(val))
    args = [a.clone(), b]
    ref = weakref.ref(args[0])
    got = cg(args)
    torch.testing.assert_close(got[0], want)
    assert seen == [None]


def test_a_kernel_no_config_of_which_compiled_ahead_falls_back_before_the_first_run():
    """On the GPU the workers compile every kernel before the first call: a kernel none of whose
    configs compiled is found before anything runs (``runtime.unbuildable_kernels``), so the graph
    runs eagerly from untouched inputs, a GPU backward's too (it keeps no inputs); stubs stand in
    for the module and the precompile batch here."""
    import types

    from tilefuse.backend import CompiledGraph

    def kernel(name):
        fn = lambda: None  # noqa: E731
        fn.__name__ = name
        return fn

    def never(args):
        raise AssertionError("the module must not run")

    module = types.SimpleNamespace(
        _launchers=[types.SimpleNamespace(fn=kernel("tf_poi_0"), cuda=True, configs=[{}])], call=never
    )
    pending = types.SimpleNamespace(failures=[("tf_poi_0 XBLOCK=1024,num_warps=4", "CompilationError: at 3:4: bad")])
    gm = torch.fx.symbolic_trace(lambda a: a * 2 + 1)
    cg = CompiledGraph(module, "", [((3,), (1,))], "backward_7", 0.0, pending=pending)
    cg.eager_graph, cg.hold_first_inputs = gm, False
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = cg([x])
        again = cg([x + 1])
    torch.testing.assert_close(out[0] if isinstance(out, (list, tuple)) else out, x * 2 + 1)
    torch.testing.assert_close(again[0] if isinstance(again, (list, tuple)) else again, (x + 1) * 2 + 1)
    msgs = [str(m.message) for m in w if "tilefuse" in str(m.message)]
    assert len(msgs) == 1 and "'backward_7'" in msgs[0] and "tf_poi_0" in msgs[0] and "bad" in msgs[0], msgs


def test_the_aten_graph_kept_for_a_fallback_is_dropped_after_a_good_first_call():
    """The aten graph a compiled graph keeps for a failed kernel build (fallback_on_error) is let go
    once the first call has built and run every kernel: its nodes and fake values are not kept
    alive for every later garbage collection to walk."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tilefuse.backend import CompiledGraph, compile_graph

    x = torch.randn(8, 4)
    gm = make_fx(lambda a: (a.sin() * 2).sum(1))(x)
    with config.patch(fallback_on_error=True, graph_cache=False):
        cg = compile_graph(gm, [x])
    assert isinstance(cg, CompiledGraph) and cg.eager_graph is gm
    out = cg([x])
    torch.testing.assert_close(out[0] if isinstance(out, (list, tuple)) else out, (x.sin() * 2).sum(1))
    assert cg.eager_graph is None
    with config.patch(fallback_on_error=False, graph_cache=False):
        assert compile_graph(gm, [x]).eager_graph is None  # nothing to fall back to: nothing kept


def _gc_state_during_bytecode_tracing(monkeypatch, compile_fn):
    """Whether the collector was enabled each time Dynamo's bytecode tracer ran while
    ``compile_fn()`` compiled and called a function."""
    import gc

    from torch._dynamo import symbolic_convert

    seen = []
    orig = symbolic_convert.InstructionTranslator.run

    def spy(self):
        seen.append(gc.isenabled())
        return orig(self)

    monkeypatch.setattr(symbolic_convert.InstructionTranslator, "run", spy)
    compile_fn()
    assert gc.isenabled()
    return seen


@pytest.mark.parametrize(
    "backend, options, paused",
    [
        ("tilefuse", None, True),
        ("tilefuse", {"pause_gc": False}, False),
        ("aot_eager", None, False),  # another backend's frames are left alone
    ],
)
def test_the_collector_is_paused_while_dynamo_traces_a_frame_for_tilefuse(monkeypatch, backend, options, paused):
    import tilefuse.backend as tb

    torch._dynamo.reset()  # clears Dynamo's compile callbacks
    assert tb.install_dynamo_gc_pause()  # registered again (the demo does this after its resets)
    x = torch.randn(5, 7)

    def fn(a):
        return torch.relu(a).sum(0) * 2

    kw = {"options": options} if options else {}
    compiled = torch.compile(fn, backend=backend, **kw)
    seen = _gc_state_during_bytecode_tracing(monkeypatch, lambda: torch.testing.assert_close(compiled(x), fn(x)))
    assert seen and all(enabled is not paused for enabled in seen), seen
    assert tb._options_if_compiling_for_tilefuse() is None  # not inside a frame compile


def test_the_collector_is_enabled_again_after_a_failed_frame_compile(monkeypatch):
    import gc

    import tilefuse.backend as tb

    assert tb.install_dynamo_gc_pause()

    def breaks(a):
        print("graph break")  # a graph break: fullgraph=True makes Dynamo raise
        return a + 1

    seen = []

    def check():
        with pytest.raises(Exception, match="(?i)graph break|print|Unsupported"):
            torch.compile(breaks, backend="tilefuse", fullgraph=True)(torch.randn(3))

    seen = _gc_state_during_bytecode_tracing(monkeypatch, check)
    assert seen and not any(seen)
    assert gc.isenabled() and not tb._DYNAMO_GC_PAUSE["paused"]


def test_the_collector_pause_is_registered_again_by_the_first_backend_call_after_a_reset(monkeypatch):
    # a reset clears Dynamo's compile callbacks without telling tilefuse: the first frame after it
    # is traced with the collector running, every later one is paused again
    import tilefuse.backend as tb

    torch._dynamo.reset()
    compiled = [torch.compile(lambda a, k=k: a * k, backend="tilefuse") for k in (2, 3)]
    x = torch.randn(4)
    seen = _gc_state_during_bytecode_tracing(
        monkeypatch, lambda: [torch.testing.assert_close(c(x), x * k) for c, k in zip(compiled, (2, 3))]
    )
    assert seen == [True, False], seen
    assert tb._pause_gc_at_frame_compile in torch._dynamo.callback_handler.start_callbacks


@pytest.mark.parametrize(
    "outer, inner, paused", [(False, True, False), (True, False, True), (None, False, False), ({}, False, True)]
)
@pytest.mark.parametrize("mapping", [dict, types.MappingProxyType])
def test_the_call_sites_options_decide_the_pause_over_a_partials(monkeypatch, outer, inner, paused, mapping):
    # torch.compile(backend=partial(tilefuse_backend, options=A), options=B) runs the backend with
    # B (the call's keywords override the partial's): the tracing's pause follows B, else A; any
    # mapping of options counts, as config.validate accepts any
    import tilefuse.backend as tb

    tb.install_dynamo_gc_pause()
    backend = functools.partial(tb.tilefuse_backend, options=mapping({"pause_gc": inner}))
    given = {} if outer == {} else {"pause_gc": outer}
    kw = {} if outer is None else {"options": mapping({**given, "tiling": True})}
    compiled = torch.compile(lambda a: a.cos() + 1, backend=backend, **kw)
    x = torch.randn(6)
    seen = _gc_state_during_bytecode_tracing(monkeypatch, lambda: torch.testing.assert_close(compiled(x), x.cos() + 1))
    assert seen and all(enabled is not paused for enabled in seen), seen


_GC_PAUSE_SUBPROCESS = r"""
import gc, sys
import torch
import tilefuse.backend as tb  # before Dynamo was imported: the pause is registered all the same
from torch._dynamo import symbolic_convert
seen = []
orig = symbolic_convert.InstructionTranslator.run
def spy(self):
    seen.append(gc.isenabled())
    return orig(self)
symbolic_convert.InstructionTranslator.run = spy
torch.testing.assert_close(torch.compile(lambda a: a.cos() - 1, backend="tilefuse")(torch.randn(3)).shape,
                           torch.Size([3]))
torch._dynamo.reset()
calls = []
@torch._dynamo.on_compile_end
def failing_end(args):  # another library's end callback, registered before tilefuse's, that raises once
    calls.append(1)
    if len(calls) == 1:
        raise RuntimeError("end callback failed")
tb.install_dynamo_gc_pause()
if sys.argv[1] == "front":  # put before tilefuse's end callback after its registration
    torch._dynamo.callback_handler.end_callbacks.remove(failing_end)
    torch._dynamo.callback_handler.end_callbacks.insert(0, failing_end)
f = torch.compile(lambda a: a.sin() + 1, backend="tilefuse")
try:
    f(torch.randn(3))
except Exception as e:
    print("raised", type(e).__name__)
print("enabled", gc.isenabled(), "seen", seen)
"""


@pytest.mark.parametrize("where", ["registered", "front"])
def test_the_pause_covers_the_first_frame_and_survives_a_failing_end_callback(where):
    # in a fresh process: tilefuse.backend imported before Dynamo still pauses the first frame's
    # tracing, and another end callback that raises (which stops Dynamo's list there), registered
    # before tilefuse's or put in front of it, cannot leave the collector off, as tilefuse's end
    # callback runs first
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", _GC_PAUSE_SUBPROCESS, where],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TRITON_INTERPRET="1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "raised" in out and "enabled True seen [False, False]" in out, out + r.stderr[-2000:]


def test_an_error_while_aotautograd_traces_runs_the_graph_eagerly(monkeypatch):
    """An internal error before any of tilefuse's compilers runs (while AOTAutograd traces, under
    tilefuse's decomposition set-up) follows ``fallback_on_error`` too: one warning and the graph
    runs eagerly with eager's results; with the option off it raises."""
    from tilefuse import backend

    def broken(gm, example_inputs, opts):
        raise RuntimeError("trace broke")

    monkeypatch.setattr(backend, "_aot_compile", broken)
    x = torch.randn(8)
    with config.patch(fallback_on_error=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(lambda t: t.sin() + 1, backend="tilefuse")(x)
    torch.testing.assert_close(out, x.sin() + 1)
    assert metrics.eager_graph_count == 1
    assert [w for w in caught if "trace broke" in str(w.message) and "eagerly" in str(w.message)]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="trace broke"):
        torch.compile(lambda t: t.cos(), backend="tilefuse")(x)
