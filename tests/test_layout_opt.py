"""Layout optimization (``tilefuse.layout_opt``), bias as a pointwise op after a convolution
(``lowering.extern._convolution``) and loops in a buffer's storage order
(``scheduler.nodes.stored_loop_order``).

On the CPU the rules are switched on by adding "cpu" to ``config.LAYOUT_OPT_DEVICE_TYPES`` and
``config.CONV_BIAS_POINTWISE_DEVICE_TYPES`` (on CUDA they are on by default); results are
compared with eager, and the generated wrapper is read to check that the rules engaged: which
strides each buffer is allocated with and what each convolution is called with.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from _tf_testutil import DEVICE, strict_on_device  # noqa: F401
from tilefuse import config
from tilefuse.layout_opt import channels_last_metas, conv_class, decide_layout_opt
from tilefuse.utils import run_and_get_code


@pytest.fixture
def layout_rules_on(monkeypatch):
    monkeypatch.setattr(config, "LAYOUT_OPT_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(config, "CONV_BIAS_POINTWISE_DEVICE_TYPES", ("cuda", "cpu"))


class _ConvNeXtBlock(nn.Module):
    """Depthwise 7x7 convolution, LayerNorm over channels in NHWC, MLP, residual (ConvNeXt's)."""

    def __init__(self, c: int):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(torch.nn.functional.gelu(self.pw1(self.ln(y)))).permute(0, 3, 1, 2)
        return x + y


class _Net(nn.Module):
    """A patchify stem with BatchNorm, two ConvNeXt blocks, a pooled linear head."""

    def __init__(self, c: int = 32):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, c, 4, stride=4), nn.BatchNorm2d(c)
        self.b1, self.b2 = _ConvNeXtBlock(c), _ConvNeXtBlock(c)
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        return self.head(self.b2(self.b1(x)).mean((2, 3)))


def _allocations(src: str, externs: bool = False) -> list[tuple[tuple, tuple]]:
    """(size, stride) of every buffer the wrapper allocates; with ``externs`` also of every extern
    result it holds (``ensure_strides``: a convolution's result, which a pointwise kernel may
    overwrite in place instead of allocating its own output)."""
    out = []
    alloc = r"(?:_empty_strided_\w+\(|ensure_strides\(buf\d+, )" if externs else r"_empty_strided_\w+\("
    for m in re.finditer(alloc + r"\(([\d, ]+)\), \(([\d, ]+)\)", src):
        out.append(tuple(int(v) for v in m.group(1).split(",") if v.strip()))
        out[-1] = (out[-1], tuple(int(v) for v in m.group(2).split(",") if v.strip()))
    return out


def _conv_calls(src: str) -> list[str]:
    return [ln for ln in src.splitlines() if "aten.convolution.default" in ln and "ensure_strides" not in ln]


def _compile(model, x):
    torch.manual_seed(0)
    with torch.no_grad():
        ref = model(x)
        out, codes = run_and_get_code(torch.compile(model, backend="tilefuse"), x)
    return ref, out, "\n".join(codes)


def test_convnet_laid_out_channels_last(layout_rules_on):
    torch.manual_seed(0)
    model, x = _Net().eval(), torch.randn(2, 3, 32, 32)
    ref, out, src = _compile(model, x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    allocs = _allocations(src, externs=True)
    c, h = 32, 8
    nchw_cl = ((2, c, h, h), (h * h * c, 1, h * c, c))
    nchw = ((2, c, h, h), (c * h * h, h * h, h, 1))
    # the BatchNorm + ReLU after the stem is stored channels-last, nothing NCHW of that shape
    assert nchw_cl in allocs and nchw not in allocs, allocs
    # the LayerNorm over channels of permute(0, 2, 3, 1) writes a contiguous NHWC buffer (the
    # permute of a channels-last value is a free view), no other layout of that shape
    nhwc = [a for a in allocs if a[0] == (2, h, h, c)]
    assert nhwc and all(a[1] == (h * h * c, h * c, c, 1) for a in nhwc), nhwc
    # the input image and the stem's weight are converted once; every convolution's result is
    # declared channels-last, and each runs without its bias (added in the next kernel)
    assert ((2, 3, 32, 32), (3072, 1, 96, 3)) in allocs
    for ln in src.splitlines():
        if "ensure_strides" in ln and "(2, 32, 8, 8)" in ln:
            assert ln.rstrip().endswith("(2048, 1, 256, 32))"), ln
    calls = _conv_calls(src)
    assert len(calls) == 3 and all(", None, [" in ln for ln in calls), calls


def test_layout_optimization_off_keeps_nchw(layout_rules_on):
    torch.manual_seed(0)
    model, x = _Net().eval(), torch.randn(2, 3, 32, 32)
    with config.patch(layout_optimization=False):
        ref, out, src = _compile(model, x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    allocs = _allocations(src)
    assert not any(s[1] == 1 and len(s) == 4 for _, s in allocs), allocs
    # the bias rule is separate: still applied
    assert all(", None, [" in ln for ln in _conv_calls(src))


def test_bias_stays_in_the_convolution_off_the_listed_devices(monkeypatch):
    monkeypatch.setattr(config, "LAYOUT_OPT_DEVICE_TYPES", ())
    monkeypatch.setattr(config, "CONV_BIAS_POINTWISE_DEVICE_TYPES", ())
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()).eval(), torch.randn(2, 3, 16, 16)
    ref, out, src = _compile(model, x)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    calls = _conv_calls(src)
    assert len(calls) == 1 and ", None, [" not in calls[0], calls


@pytest.mark.parametrize("transposed", [False, True])
def test_bias_as_pointwise_matches_eager(layout_rules_on, transposed):
    torch.manual_seed(0)
    conv = nn.ConvTranspose2d(4, 6, 3, stride=2) if transposed else nn.Conv2d(4, 6, 3, groups=2)
    model, x = nn.Sequential(conv, nn.SiLU()).eval(), torch.randn(2, 4, 9, 9)
    ref, out, src = _compile(model, x)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert all(", None, [" in ln for ln in _conv_calls(src))


def test_graph_output_keeps_eager_strides(layout_rules_on):
    """A convolution's result returned by the graph comes back in eager's (NCHW) strides."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 96, 3, padding=1), nn.ReLU(), nn.Conv2d(96, 96, 3, padding=1)).eval()
    x = torch.randn(2, 3, 16, 16)
    ref, out, src = _compile(model, x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    assert out.stride() == ref.stride() == (96 * 256, 256, 16, 1)
    assert ((2, 96, 16, 16), (96 * 256, 1, 16 * 96, 96)) in _allocations(src, externs=True)


def _fx(fn, *args):
    return make_fx(fn, tracing_mode="fake")(*args)


def _conv_graph(cin, cout, groups=1, k=3, n_extra=0):
    w = torch.randn(cout, cin // groups, k, k)

    def f(x, w):
        y = torch.ops.aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], groups)
        for _ in range(n_extra):
            y = y + 1
        return y

    return _fx(f, torch.randn(2, cin, 16, 16), w)


def test_decide_layout_opt_rules(layout_rules_on):
    cpu = torch.device("cpu")
    assert decide_layout_opt(_conv_graph(128, 128), is_inference=True, device=cpu)
    assert decide_layout_opt(_conv_graph(128, 128), is_inference=False, device=cpu)
    # the same graph: not on a device type left out, not when off
    assert not decide_layout_opt(_conv_graph(128, 128), is_inference=True, device=torch.device("meta"))
    with config.patch(layout_optimization=False):
        assert not decide_layout_opt(_conv_graph(128, 128), is_inference=True, device=cpu)
    # grouped convolutions (several input channels per group) are slower channels-last
    g = _conv_graph(128, 128, groups=4)
    assert conv_class(next(n for n in g.graph.nodes if n.op == "call_function")) == "grouped"
    assert not decide_layout_opt(g, is_inference=True, device=cpu)
    assert not decide_layout_opt(g, is_inference=False, device=cpu)
    # training graphs: Inductor's rules (at least twice the input channels of the output's, or
    # only small convolutions: left NCHW); inference weighs the FLOPs instead
    wide_in = _conv_graph(256, 64)
    assert conv_class(next(n for n in wide_in.graph.nodes if n.op == "call_function")) == "in_out"
    assert not decide_layout_opt(wide_in, is_inference=False, device=cpu)
    assert decide_layout_opt(wide_in, is_inference=True, device=cpu)
    small = _conv_graph(32, 32)
    assert not decide_layout_opt(small, is_inference=False, device=cpu)
    assert decide_layout_opt(small, is_inference=True, device=cpu)
    # depthwise ones are not grouped in that sense
    dw = _conv_graph(128, 128, groups=128)
    assert conv_class(next(n for n in dw.graph.nodes if n.op == "call_function")) == "default"
    assert decide_layout_opt(dw, is_inference=True, device=cpu)
    # a graph of many nodes per convolution is left alone
    assert not decide_layout_opt(_conv_graph(128, 128, n_extra=300), is_inference=True, device=cpu)
    # no convolution: nothing to gain
    assert not decide_layout_opt(_fx(lambda x: x * 2, torch.randn(2, 4, 8, 8)), is_inference=True, device=cpu)


def test_decide_layout_opt_needs_static_sizes(layout_rules_on):
    def f(x, w):
        return torch.ops.aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(2, 64, 16, 16), torch.randn(64, 64, 3, 3))
    assert not decide_layout_opt(gm, is_inference=True, device=torch.device("cpu"))


def test_channels_last_metas_follow_eager_rules():
    """The channels-last model's strides: pointwise after a convolution channels-last, an op on
    its permute to NHWC contiguous (eager's original graph gave it permuted strides)."""

    def f(x, w):
        y = torch.ops.aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        z = torch.relu(y)
        return z.permute(0, 2, 3, 1) * 2, z.sum((2, 3), keepdim=True)

    gm = _fx(f, torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3))
    metas = {n.name: v for n, v in channels_last_metas(gm).items()}
    assert metas["convolution"].stride() == (576, 1, 96, 16)
    assert metas["relu"].stride() == (576, 1, 96, 16)
    assert (
        metas["mul"].is_contiguous()
        and not gm.graph.find_nodes(op="call_function", target=torch.ops.aten.mul.Tensor)[0].meta["val"].is_contiguous()
    )
    metas_by_node = channels_last_metas(gm)
    assert all(v.shape == n.meta["val"].shape for n, v in metas_by_node.items())
    # every tensor-valued node is listed, unchanged strides too (the reduction's [2, 16, 1, 1])
    assert {n.name for n in metas_by_node} >= {"convolution", "relu", "permute", "mul", "sum_1"}


def test_pointwise_loops_follow_the_stored_order():
    """A pointwise result stored transposed (eager's strides for ``x.t() * 2``) is computed in its
    storage order: one flat, coalesced kernel, load and store both at ``xindex``."""
    x = torch.randn(64, 32)
    f = torch.compile(lambda x: x.t() * 2, backend="tilefuse")
    out, codes = run_and_get_code(f, x)
    torch.testing.assert_close(out, x.t() * 2)
    assert out.stride() == (1, 32)
    src = "\n".join(codes)
    assert re.search(r"tl\.load\(in_ptr0 \+ \(xindex\)", src) and re.search(r"tl\.store\(out_ptr0 \+ \(xindex\)", src)
    assert "yindex" not in src


def test_stored_loop_order_rule():
    from tilefuse.ir import nodes as ir
    from tilefuse.scheduler.nodes import stored_loop_order

    def buf(size, stride):
        lay = ir.FixedLayout(torch.device("cpu"), torch.float32, size, stride)
        return ir.ComputedBuffer("b", lay, ir.Pointwise(torch.device("cpu"), torch.float32, lambda i: None, size))

    assert stored_loop_order(buf([2, 8, 4, 4], [128, 1, 32, 8])) == [0, 2, 3, 1]
    assert stored_loop_order(buf([2, 8, 4, 4], [128, 16, 4, 1])) is None  # row-major already
    assert stored_loop_order(buf([2, 1, 4, 4], [16, 1, 4, 1])) is None  # size-1 dims aside
    assert stored_loop_order(buf([4, 4], [0, 1])) is None  # an expanded dim


def test_training_step_laid_out_channels_last(layout_rules_on):
    """A training step: the forward stores its saved activations channels-last (not copied back to
    eager's NCHW), AOTAutograd compiles the backward for those strides, the backward's
    convolution gradients read channels-last values; gradients equal eager's, with eager's
    strides."""
    import copy

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 96, 3, padding=1),
        nn.BatchNorm2d(96),
        nn.ReLU(),
        nn.Conv2d(96, 128, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, 10),
    )
    compiled_model = copy.deepcopy(model)
    x = torch.randn(4, 3, 16, 16)

    def step(m, x):
        out = m(x)
        out.sum().backward()
        return out

    # full float32 convolutions: cuDNN's TF32 kernels for NCHW and channels-last operands round
    # differently, well past these tolerances
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        ref = step(model, x)
        out, codes = run_and_get_code(torch.compile(lambda x: step(compiled_model, x), backend="tilefuse"), x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), compiled_model.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4, msg=name)
        assert q.grad.stride() == p.grad.stride(), name
    assert len(codes) == 2
    forward, backward = codes
    for src in (forward, backward):
        big = [a for a in _allocations(src) if len(a[0]) == 4 and a[0][2:] == (16, 16)]
        assert big and all(st[1] == 1 for _, st in big), big  # every activation channels-last
    assert backward.count("aten.convolution_backward.default") == 2


class _InvertedBottleneck(nn.Module):
    """ConvNeXt's block, channels-last in the middle: 7x7 depthwise convolution, layer norm over
    the channels, two pointwise convolutions around a GELU, and the residual."""

    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pw1, self.pw2 = nn.Conv2d(c, 4 * c, 1), nn.Conv2d(4 * c, c, 1)

    def forward(self, x):
        y = self.norm(self.dw(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x + self.pw2(F.gelu(self.pw1(y)))


def _live_peak(src: str) -> int:
    """The largest sum of sizes (elements) of the buffers the wrapper's call holds at once:
    allocations and extern results (``ensure_strides``) live until their ``del``, a name bound
    to another buffer (reuse, in place) shares its storage."""
    call = src[src.index("def call(") :]
    storage: dict[str, int] = {}  # buffer name -> storage id
    sizes: dict[int, int] = {}
    ids = iter(range(1 << 30))
    cur = peak = 0
    for ln in call.splitlines():
        s = ln.strip()
        new = re.match(r"(buf\d+) = (?:_empty_strided_\w+\(|ensure_strides\(buf\d+, )\(([\d, ]+)\)", s)
        alias = re.match(r"(buf\d+) = (?:reinterpret_tensor\()?(buf\d+)\b", s)
        if new and storage.get(new.group(1)) is None:
            sid = next(ids)
            sizes[sid] = math.prod(int(v) for v in new.group(2).split(",") if v.strip())
            storage[new.group(1)] = sid
            cur += sizes[sid]
        elif alias and not s.startswith(f"{alias.group(1)} = ensure_strides"):
            storage[alias.group(1)] = storage.get(alias.group(2))
            if storage[alias.group(1)] is None:
                storage.pop(alias.group(1))
        elif re.match(r"buf\d+ = _c\d+\(", s):
            storage[s.split(" ")[0]] = None  # an extern result: its size comes with ensure_strides
        dead = re.match(r"del (buf\d+)", s)
        if dead:
            sid = storage.pop(dead.group(1), None)
            if sid is not None and sid not in storage.values():
                cur -= sizes.pop(sid)
        peak = max(peak, cur)
    return peak


def test_storage_is_not_held_for_reuse_across_a_convolution(layout_rules_on):
    # two ConvNeXt blocks: the first block's normalized input dies at its first pointwise
    # convolution; held in the pool for the second block's normalization, it would be live
    # through both convolutions. Released instead, the largest live set is the hidden
    # activation and two block-sized values (the residual and the convolution's result), as
    # eager and Inductor hold
    torch.manual_seed(0)
    c, hw = 8, 16
    model, x = nn.Sequential(_InvertedBottleneck(c), _InvertedBottleneck(c)).eval(), torch.randn(2, c, hw, hw)
    ref, out, src = _compile(model, x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    block = 2 * c * hw * hw
    assert _live_peak(src) <= 4 * block + 2 * block, (_live_peak(src), block)
