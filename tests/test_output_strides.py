"""Graph outputs come back with eager's strides (Inductor's ``keep_output_stride``).

Every output of a compiled graph must have the strides of its FX meta value on each dim longer
than 1: callers (and AOTAutograd, which regenerates aliased outputs from them) see what eager
gives. Checked here against eager, values and ``.stride()``: values a matrix product also reads,
views of intermediates, slices of zero-padded matrix products, broadcasts; outputs aliasing graph
inputs keep aliasing them; and the common case (strides already eager's) costs no copy kernel.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import config, metrics

pytestmark = GPU_MARKS


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def compile_and_compare(fn, *args, kernels=None, atol=1e-5, rtol=1e-5, **compile_kw):
    """``fn`` compiled vs eager on copies of ``args``: every output's values and strides equal
    (shapes only for an empty output); returns (compiled outputs, eager outputs, compiled args)."""
    metrics.reset()
    cargs = [a.clone() for a in args]
    eargs = [a.clone() for a in args]
    got = _as_tuple(torch.compile(fn, backend="tilefuse", **compile_kw)(*cargs))
    want = _as_tuple(fn(*eargs))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol, msg=lambda m: f"output {i}: {m}")
        if w.numel():  # an empty tensor's strides are not compared (as torch and Inductor do)
            assert g.stride() == w.stride(), (i, g.stride(), w.stride())
        else:
            assert g.shape == w.shape
    if kernels is not None:
        assert metrics.generated_kernel_count == kernels, metrics.generated_kernel_count
    assert metrics.fallback_kernel_count == 0
    return got, want, cargs


def test_output_also_read_by_a_matmul_keeps_transposed_strides():
    # eager: y has x.t()'s column-major strides; the matmul must not make tilefuse store it row-major
    def f(x, w):
        y = x.t() * 2
        return y, y @ w

    got, _, _ = compile_and_compare(f, torch.randn(6, 7), torch.randn(6, 5), kernels=1)
    assert got[0].stride() == (1, 7)
    assert metrics.extern_kernel_count == 1  # y is stored once, with eager's strides: no copy kernel


def test_output_also_read_by_a_batched_matmul_3d():
    def f(x, w):
        y = torch.relu(x.permute(0, 2, 1))
        return y, torch.bmm(y, w)

    compile_and_compare(f, torch.randn(3, 5, 4), torch.randn(3, 5, 2), kernels=1)


def test_diagonal_of_softmax_is_a_strided_view():
    n = 8
    got, _, _ = compile_and_compare(lambda x: torch.softmax(x, -1).diagonal(), torch.randn(n, n))
    assert got[0].stride() == (n + 1,)


def test_view_outputs_of_a_returned_value_share_its_buffer():
    def f(x):
        y = torch.softmax(x, -1)
        return y.diagonal(), y, y.t(), y[1:, ::2]

    got, _, _ = compile_and_compare(f, torch.randn(6, 6), kernels=1)
    storage = got[1].untyped_storage().data_ptr()
    assert all(g.untyped_storage().data_ptr() == storage for g in got)  # views of y, as in eager


def test_views_of_intermediates():
    def f(x):
        a = (x * 2).diagonal()  # lazy, not strided: computed into eager's gapped layout
        b = (x + 1).t()  # strided view of a realized value
        c = torch.exp(x)[:, 1:4]  # a slice
        d = (x - 1).unsqueeze(1).expand(6, 3, 6)  # a broadcast: stride 0
        e = x.sum(0, keepdim=True).expand(4, 6)  # a broadcast reduction
        return a, b, c, d, e

    compile_and_compare(f, torch.randn(6, 6))


def test_scatter_into_an_expanded_tensor_is_a_dense_output():
    """torch's meta function lays ``slice_scatter`` of an expanded input out like that input
    (strides ``(0, 0, 0)``), while eager's kernel writes a contiguous tensor. Stored with the meta's
    strides, every element shared one memory location and the last write won: the gradient of
    ``slice_scatter(x, y).sum()`` w.r.t. ``x`` came back all zeros (a public report against
    Inductor; ``aot_eager`` is right). A computed value that varies along a dim the meta strides
    expand is returned with eager's dense strides; a value that really is the same along it
    (the expanded ``s + 1`` below) keeps the stride 0."""

    def grad_of_scatter(x, y):
        x = x.detach().requires_grad_(True)
        out = torch.slice_scatter(x, y, dim=1, start=0, end=6).sum(dim=1)
        out.sum().backward()
        return x.grad

    x, y = torch.randn(4, 13, 33), torch.randn(4, 6, 33)
    want = grad_of_scatter(x, y)
    got = torch.compile(grad_of_scatter, backend="tilefuse")(x, y)
    assert want[:, 6:].eq(1).all() and want[:, :6].eq(0).all()
    assert torch.equal(got, want) and got.stride() == want.stride()

    def forward(s, y):
        e = s.expand(4, 13, 33)
        return torch.slice_scatter(e, y, 1, 0, 6), torch.select_scatter(e * 2, y[:, 0], 1, 3), (s + 1).expand(4, 13, 33)

    got, want, _ = compile_and_compare(forward, torch.randn(()), torch.randn(4, 6, 33))
    assert want[0].stride() == (429, 33, 1) and want[2].stride() == (0, 0, 0)


def test_outputs_aliasing_graph_inputs_keep_aliasing_them():
    def f(x):
        return x.t(), x[::2], x.diagonal(), x[1:, 2:]

    x = torch.randn(6, 6)
    got, want, cargs = compile_and_compare(f, x, kernels=0)
    base = cargs[0].untyped_storage().data_ptr()
    for g, w in zip(got, want):
        assert g.untyped_storage().data_ptr() == base
        assert g.storage_offset() == w.storage_offset()
    cargs[0].add_(1)  # the outputs are views of the input, as eager's are
    torch.testing.assert_close(got[1], cargs[0][::2])
    torch.testing.assert_close(got[2], cargs[0].diagonal())


@pytest.mark.parametrize("view", ["none", "t", "slice"])
def test_inplace_mutation_returned(view):
    def f(x, y):
        x.add_(1)
        out = x if view == "none" else (x.t() if view == "t" else x[::2])
        return out, y * 2

    x = torch.randn(4, 6)
    got, want, cargs = compile_and_compare(f, x, torch.randn(3))
    torch.testing.assert_close(cargs[0], x + 1)  # the input was mutated
    assert got[0].untyped_storage().data_ptr() == cargs[0].untyped_storage().data_ptr()
    if view == "none":
        assert got[0] is cargs[0]


def test_training_outputs_and_grads_keep_the_graphs_strides():
    """Forward outputs have eager's strides; the backward graph's outputs (the gradients) have its
    FX meta values' strides, which are AOTAutograd's, as ``aot_eager`` and Inductor return them
    (eager's autograd engine gives x's gradient other strides here: (7, 1))."""
    x = torch.randn(5, 7, requires_grad=True)
    w = torch.randn(5, 3, requires_grad=True)

    def f(a, b):
        y = torch.tanh(a.t())
        return y, y @ b

    def grads(out):
        return torch.autograd.grad(out[0].sum() + out[1].pow(2).sum(), (x, w))

    got = torch.compile(f, backend="tilefuse")(x, w)
    want = f(x, w)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride()
    torch._dynamo.reset()
    ref = torch.compile(f, backend="aot_eager")(x, w)
    for g, e, r in zip(grads(got), grads(want), grads(ref)):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
        assert g.stride() == r.stride()


def test_padded_matrix_product_slices_get_eager_strides(monkeypatch):
    """pad_mm (forced on this device, at any size): a slice of a product computed on zero-padded
    operands is a view with the padded row stride (28 here); as an output it comes back with
    eager's (27)."""
    monkeypatch.setattr(config, "PAD_MM_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(config, "PAD_MM_MIN_MACS", 0)
    a, b, c = torch.randn(16, 9), torch.randn(9, 27), torch.randn(27)

    def f(a, b, c):
        p = a @ b
        return p[:, :5], p, p.t(), torch.addmm(c, a, b)[2:]

    with config.patch(pad_mm=True):
        got, _, _ = compile_and_compare(f, a, b, c, atol=1e-4, rtol=1e-4)
    assert got[0].stride() == (27, 1)
    assert metrics.extern_kernel_count == 2
    with config.patch(pad_mm=False):
        compile_and_compare(f, a, b, c, atol=1e-4, rtol=1e-4, kernels=0)


def test_a_gradient_used_plain_and_transposed_is_padded_once(monkeypatch, tmp_path):
    """An LM-head-like product (vocabulary 97, off the 4-element fp32 alignment) in training: the
    logits' gradient ``g`` feeds ``g @ W`` (padded along its columns) and ``g.t() @ h`` (padded
    along the rows of the transposed view, the same columns of ``g``): one padded copy serves
    both, the second as its transposed view, and ``g`` is computed straight into it (no unpadded
    copy). Gradients are eager's."""
    monkeypatch.setattr(config, "PAD_MM_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(config, "PAD_MM_MIN_MACS", 0)
    torch.manual_seed(0)
    h = torch.randn(32, 16, device=DEVICE, requires_grad=True)
    w = torch.randn(97, 16, device=DEVICE, requires_grad=True)

    def f(h, w):
        return (h @ w.t()).square().mean()

    with config.patch(pad_mm=True, debug_dir=str(tmp_path)):
        torch.compile(f, backend="tilefuse")(h, w).backward()
    got = h.grad.clone(), w.grad.clone()
    h.grad = w.grad = None
    f(h, w).backward()
    torch.testing.assert_close(got[0], h.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[1], w.grad, atol=1e-5, rtol=1e-4)
    bwd = "".join(p.read_text() for p in tmp_path.iterdir() if p.name.startswith("backward"))
    bwd = bwd.replace("_empty_strided_cuda(", "torch.empty_strided(")  # the CUDA and CPU allocation entry points
    bwd = bwd.replace("_empty_strided_cpu(", "torch.empty_strided(")
    assert bwd.count("empty_strided((32, 100)") == 1, bwd  # g padded to 100 columns, once
    assert "empty_strided((32, 97)" not in bwd  # computed straight into its padded buffer
    assert "reinterpret_tensor(buf" in bwd and "(100, 32), (1, 100)" in bwd  # ... and used transposed


def test_a_3d_gradient_input_used_transposed_first_is_padded_once(monkeypatch, tmp_path):
    """The GPT training step's backward after a graph break: the logits' gradient arrives as a
    ``[batch, seq, vocab]`` graph input, read as ``[batch * seq, vocab]``, and the first product
    uses it transposed (``g.t() @ h``, the weight gradient), the second plain (``g @ W``). One
    padded copy of ``g`` serves both (it had been one padded transposed copy plus one padded
    copy, 2 x 412 MB per step at vocabulary 50257); results are eager's."""
    monkeypatch.setattr(config, "PAD_MM_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(config, "PAD_MM_MIN_MACS", 0)
    torch.manual_seed(0)
    g3, h, w = torch.randn(2, 16, 97), torch.randn(32, 16), torch.randn(97, 16)

    def f(g3, h, w):
        g = g3.view(-1, g3.shape[-1])
        return g.t() @ h, g @ w

    with config.patch(pad_mm=True, debug_dir=str(tmp_path)):
        compile_and_compare(f, g3, h, w, atol=1e-4, rtol=1e-4)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    src = src.replace("_empty_strided_cuda(", "torch.empty_strided(")  # the CUDA and CPU allocation entry points
    src = src.replace("_empty_strided_cpu(", "torch.empty_strided(")
    assert src.count("empty_strided((32, 100)") == 1, src  # g padded to 100 columns, once
    assert "empty_strided((100, 32)" not in src  # no padded transposed copy
    assert "(100, 32), (1, 100)" in src  # the padded copy, read transposed


def test_dynamic_shapes_outputs_keep_eager_strides():
    def f(x, w):
        y = x.t() * 2
        s = torch.softmax(x, -1)
        return y, y @ w, torch.softmax(x * 2, -1).diagonal(), x[::2], s, s.diagonal(), x.diagonal()

    cf = torch.compile(f, backend="tilefuse", dynamic=True)
    for n in (6, 9):
        x, w = torch.randn(n, n), torch.randn(n, 3)
        got = cf(x, w)
        want = f(x, w)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
            assert g.stride() == e.stride()
    assert metrics.specialized_graph_count == 0


@pytest.mark.parametrize("name", ["view_then_mul", "mul_then_view", "mul_view_add", "channels_last"])
def test_dynamic_view_with_literal_sizes_keeps_eager_strides(name):
    """``t.view(6, 4)`` of a permuted ``[s0, s1, 4]`` input: the lowered sizes are the literal
    ``[6, 4]``, the FX meta value's ``[s0*s1, 4]``, equal only by Dynamo's guard
    ``s0*s1 == 6`` (``SizeVars.known_equal`` asks the ShapeEnv). Unproven, the output was
    stored contiguously: strides ``(4, 1)`` for eager's ``(1, 6)``."""
    fns = {
        "view_then_mul": lambda t: t.view(6, 4) * 2,
        "mul_then_view": lambda t: (t * 2).view(6, 4),
        "mul_view_add": lambda t: (t * 2).view(6, 4) + 1,
        "channels_last": lambda t: (t * 2).view(2, 3, 20),
    }
    if name == "channels_last":
        x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    else:
        x = torch.randn(4, 2, 3).permute(1, 2, 0)
    compile_and_compare(fns[name], x, dynamic=True)
    assert metrics.symbolic_graph_count == 1


@pytest.mark.parametrize("size", [(3, 4), (2, 2), (7, 3), (4, 3)])
def test_adaptive_avg_pool_of_a_channels_last_input_stays_channels_last(size):
    """torch's decomposition of ``_adaptive_avg_pool2d`` (gathers and a mean) made a contiguous
    result for windows that do not divide the input; eager and the op's meta function keep
    channels-last (``decompositions._in_the_inputs_memory_format``)."""
    x = torch.randn(2, 4, 7, 9).contiguous(memory_format=torch.channels_last)
    compile_and_compare(lambda t: F.adaptive_avg_pool2d(t, size), x)
    compile_and_compare(lambda t: F.adaptive_avg_pool2d(t, size), x.contiguous())


@pytest.mark.parametrize(
    "case, kernels, externs",
    [("mlp_inference", 1, 2), ("mlp_training", 4, 6), ("layer_norm_inference", 1, 0), ("layer_norm_training", 3, 0)],
)
def test_no_copy_kernels_when_strides_already_match(case, kernels, externs):
    """Contiguous graphs: the same kernels as before outputs were checked against eager's
    strides (forward + backward counted together for training)."""
    torch.manual_seed(0)
    if case.startswith("mlp"):
        model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
        x = torch.randn(8, 12)
    else:
        model = torch.nn.LayerNorm(48)
        x = torch.randn(6, 48)
    metrics.reset()
    cm = torch.compile(model, backend="tilefuse")
    if case.endswith("inference"):
        with torch.no_grad():
            out = cm(x)
            want = model(x)
    else:
        x.requires_grad_(True)
        out = cm(x)
        want = model(x)
        out.pow(2).sum().backward()
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    assert out.stride() == want.stride()
    assert (metrics.generated_kernel_count, metrics.extern_kernel_count) == (kernels, externs)
    assert metrics.fallback_kernel_count == 0


def test_layer_norm_softmax_block_outputs():
    def f(x, w, b):
        h = F.layer_norm(x, (16,), w, b)
        return h, h.softmax(-1).transpose(0, 1), h.mean(-1)

    compile_and_compare(f, torch.randn(4, 5, 16), torch.randn(16), torch.randn(16))


def test_empty_outputs():
    def f(x):
        return x[:, 3:3].t(), (x * 2)[2:2], torch.softmax(x, -1)[:0].diagonal()

    compile_and_compare(f, torch.randn(4, 5))


def test_batch_norm_of_a_transposed_input_keeps_torchs_meta_strides_and_views_of_it_work():
    """A batch norm's output has torch's meta strides (the input's layout, as Inductor returns
    it), also where eager's kernel picks contiguous (a ``BatchNorm1d`` of a transposed
    ``[N, C, L]`` view). AOTAutograd regenerates returned views from those strides: returning the
    output with ``y.transpose(1, 2).reshape(N, -1)`` (a view under the meta strides) must work in
    grad mode. Giving the output eager's contiguous layout instead makes that call raise ("view
    size is not compatible")."""
    torch.manual_seed(0)
    bn_c, bn_e = torch.nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)
    x = torch.randn(3, 7, 4).transpose(1, 2)

    def f(bn, a):
        y = bn(a)
        return y, y.transpose(1, 2).reshape(3, -1)

    xc, xe = [x.detach().clone().requires_grad_(True) for _ in range(2)]
    got = torch.compile(lambda a: f(bn_c, a), backend="tilefuse")(xc)
    want = f(bn_e, xe)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
    # torch's meta strides, which AOTAutograd's fake tensors carry: on the CPU the input's layout
    # (28, 1, 4); on CUDA, where an affine batch norm is cuDNN's (its weight decides), eager's
    # kernel gives contiguous (28, 7, 1)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty_strided(x.shape, x.stride(), device=DEVICE)
        stats = torch.zeros(4, device=DEVICE), torch.ones(4, device=DEVICE)
        affine = torch.ones(4, device=DEVICE), torch.zeros(4, device=DEVICE)
        meta_stride = F.batch_norm(fake, *stats, *affine, training=True).stride()
    assert got[0].stride() == meta_stride
    if DEVICE == "cpu":
        assert meta_stride == x.stride()  # where eager's kernel picks contiguous
    torch.testing.assert_close(bn_c.running_var, bn_e.running_var)
    (got[0].sum() + got[1].pow(2).sum()).backward()
    (want[0].sum() + want[1].pow(2).sum()).backward()
    torch.testing.assert_close(xc.grad, xe.grad, atol=1e-5, rtol=1e-5)
