"""Small models trained with tilefuse: losses and every gradient must match eager step by step.

The transformer block covers embedding (indirect loads), causal attention through explicit
matmul + masked_fill(-inf) + softmax, layer norm, tanh-GELU MLP, residuals and cross-entropy,
forward and backward. Also: graph outputs that are views of inputs, in-place ops on inputs.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import tilefuse  # noqa: F401
from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401 (autouse fixture)
from tilefuse import config, metrics


# CPU tensors through Triton's interpreter (CI), or CUDA when TRITON_INTERPRET=0 on a GPU machine
# (then every test carries the ``gpu`` marker); tensors and parameters are created on the default
# device, set per test
pytestmark = GPU_MARKS


class Block(torch.nn.Module):
    """A GPT-style block with a token/position embedding in front and a vocabulary head behind."""

    def __init__(self, d=16, heads=2, T=8, V=11, p_drop=0.0):
        super().__init__()
        self.emb = torch.nn.Embedding(V, d)
        self.pos = torch.nn.Parameter(torch.randn(T, d) * 0.1)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.head = torch.nn.Linear(d, V)
        self.heads = heads
        self.drop = torch.nn.Dropout(p_drop)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, idx, tgt):
        B, T = idx.shape
        x = self.emb(idx) + self.pos[:T]
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(h.shape[-1], -1)
        hd = q.shape[-1] // self.heads
        q, k, v = [t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / hd**0.5
        att = self.drop(att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1))


def _train_and_compare(model, batches, lr=0.1, atol=1e-5, rtol=1e-4):
    ref = copy.deepcopy(model)
    cm = torch.compile(model, backend="tilefuse")
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    ropt = torch.optim.SGD(ref.parameters(), lr=lr)
    for args in batches:
        loss, rloss = cm(*args), ref(*args)
        opt.zero_grad()
        ropt.zero_grad()
        loss.backward()
        rloss.backward()
        torch.testing.assert_close(loss, rloss, atol=atol, rtol=rtol)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
        opt.step()
        ropt.step()
    return ref


def test_transformer_block_trains_like_eager_without_fallbacks():
    torch.manual_seed(0)
    metrics.reset()
    m = Block()
    batches = [(torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))) for _ in range(3)]
    _train_and_compare(m, batches)
    # embedding backward (index_put with accumulate) is an atomic-add kernel: nothing falls back
    assert metrics.fallback_kernel_count == 0, metrics.fallback_kernel_count
    assert metrics.extern_kernel_count > 0


def test_transformer_block_with_dropout_trains_reproducibly_without_fallbacks():
    # dropout is a native Philox kernel: it does not draw eager's mask, so the check is that a
    # fixed seed reproduces loss and gradients exactly, that dropout is active, and that nothing
    # falls back (the mask of the forward is the one the backward uses: see test_random.py)
    torch.manual_seed(0)
    m = Block(p_drop=0.2)
    idx, tgt = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))
    cm = torch.compile(m, backend="tilefuse")
    metrics.reset()
    runs = []
    for seed in (5, 5, 6):
        m.zero_grad()
        torch.manual_seed(seed)
        loss = cm(idx, tgt)
        loss.backward()
        runs.append((loss.detach().clone(), [p.grad.clone() for p in m.parameters()]))
    assert metrics.fallback_kernel_count == 0, metrics.fallback_kernel_count
    (l5, g5), (l5b, g5b), (l6, _) = runs
    assert torch.equal(l5, l5b) and all(torch.equal(a, b) for a, b in zip(g5, g5b))
    assert not torch.equal(l5, l6)
    m.eval()
    with torch.no_grad():
        assert not torch.equal(m(idx, tgt), l5)  # without dropout the loss differs


def test_transformer_block_eval_inference():
    torch.manual_seed(1)
    m = Block().eval()
    idx, tgt = torch.randint(0, 11, (3, 8)), torch.randint(0, 11, (3, 8))
    metrics.reset()
    with torch.no_grad():
        got = torch.compile(m, backend="tilefuse")(idx, tgt)
        want = m(idx, tgt)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert metrics.fallback_kernel_count == 0


class MLP(torch.nn.Module):
    """SiLU/LayerNorm/GELU MLP with a cross-entropy plus L2 loss."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(10, 24),
            torch.nn.SiLU(),
            torch.nn.LayerNorm(24),
            torch.nn.Linear(24, 24),
            torch.nn.GELU(),
            torch.nn.Linear(24, 5),
        )

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y) + 0.1 * self.net(x).pow(2).mean()


def test_mlp_with_layernorm_trains_like_eager():
    torch.manual_seed(2)
    batches = [(torch.randn(7, 10), torch.randint(0, 5, (7,))) for _ in range(3)]
    metrics.reset()
    _train_and_compare(MLP(), batches)
    assert metrics.fallback_kernel_count == 0


def test_layer_norm_gelu_softmax_backward_match():
    torch.manual_seed(3)
    x = torch.randn(6, 20, requires_grad=True)
    w = torch.randn(20, requires_grad=True)
    b = torch.randn(20, requires_grad=True)

    def f(a, w_, b_):
        h = F.layer_norm(a, (20,), w_, b_)
        return (F.gelu(h).softmax(-1) * torch.arange(20.0, device=a.device)).sum() + F.log_softmax(h, 0)[0].sum()

    metrics.reset()
    got = torch.compile(f, backend="tilefuse")(x, w, b)
    gg = torch.autograd.grad(got, (x, w, b))
    want = f(x, w, b)
    gw = torch.autograd.grad(want, (x, w, b))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for a, c in zip(gg, gw):
        torch.testing.assert_close(a, c, atol=1e-5, rtol=1e-4)
    assert metrics.fallback_kernel_count == 0


def test_outputs_that_are_views_of_inputs():
    x = torch.randn(4, 6)
    cf = torch.compile(lambda a: (a.view(2, 12), a[:, 2:5], a.t(), a.unsqueeze(0), a.sum(0)), backend="tilefuse")
    got = cf(x)
    want = (x.view(2, 12), x[:, 2:5], x.t(), x.unsqueeze(0), x.sum(0))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    x.add_(1)  # the view outputs alias x, as eager's do
    torch.testing.assert_close(got[1], x[:, 2:5])


def test_inplace_ops_on_graph_inputs():
    def f(a, b, c):
        a.mul_(2)
        b[1:3] = a[:2] + 1
        c.clamp_(max=0.5)
        return a + b.sum() + c

    args = [torch.randn(4, 3), torch.randn(5, 3), torch.randn(3)]
    ref = [t.clone() for t in args]
    got = torch.compile(f, backend="tilefuse")(*args)
    want = f(*ref)
    torch.testing.assert_close(got, want)
    for a, r in zip(args, ref):
        torch.testing.assert_close(a, r)


def test_small_cnn_with_batchnorm_trains_like_eager_and_updates_running_stats():
    torch.manual_seed(4)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 5),
    )

    class Wrap(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    model = Wrap(m)
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))) for _ in range(2)]
    metrics.reset()
    ref = _train_and_compare(model, batches, atol=1e-5, rtol=1e-4)
    # batch norm (decomposed) is native; only max-pool forward/backward run through aten
    # batch norm (decomposed) and max pooling (forward and backward) are native; conv is extern
    assert metrics.fallback_kernel_count == 0, metrics.fallback_kernel_count
    torch.testing.assert_close(model.net[1].running_mean, ref.net[1].running_mean)
    torch.testing.assert_close(model.net[1].running_var, ref.net[1].running_var)


def test_transformer_block_under_bf16_autocast_and_in_fp16():
    torch.manual_seed(5)
    idx, tgt = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))
    m = Block()
    ref = copy.deepcopy(m)
    metrics.reset()
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        loss = torch.compile(m, backend="tilefuse")(idx, tgt)
        rloss = ref(idx, tgt)
    loss.backward()
    rloss.backward()
    torch.testing.assert_close(loss, rloss, atol=2e-2, rtol=2e-2)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=2e-2, rtol=2e-2)
    assert metrics.fallback_kernel_count == 0
    torch._dynamo.reset()
    m16 = Block().to(torch.float16)
    ref16 = copy.deepcopy(m16)
    loss = torch.compile(m16, backend="tilefuse")(idx, tgt)
    rloss = ref16(idx, tgt)
    loss.backward()
    rloss.backward()
    torch.testing.assert_close(loss, rloss, atol=1e-2, rtol=1e-2)
    for p, q in zip(m16.parameters(), ref16.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-2, rtol=1e-2)


def test_dynamic_shapes_specialized_per_concrete_shape_when_symbolic_shapes_off():
    # the last-resort path for graphs with symbolic sizes (tests/test_dynamic.py has the symbolic one)
    f = lambda a, b: torch.softmax(a * 2, -1) + b.sum()  # noqa: E731
    with config.patch(symbolic_shapes=False):
        cf = torch.compile(f, backend="tilefuse", dynamic=True)
        metrics.reset()
        for n in [3, 5, 3]:
            x, y = torch.randn(n, 7), torch.randn(n)
            torch.testing.assert_close(cf(x, y), f(x, y))
    assert metrics.generated_graph_count == 2  # one static compile per distinct shape, reused after
    assert metrics.symbolic_graph_count == 0


def test_transformer_block_with_changing_sequence_length_trains_like_eager():
    torch.manual_seed(6)
    m = Block(T=16)
    batches = [(torch.randint(0, 11, (2, T)), torch.randint(0, 11, (2, T))) for T in (4, 7, 4)]
    _train_and_compare(m, batches)
