"""Per-op-family checks of the tilefuse backend: compiled vs eager on random inputs.

Every op family the lowerings claim (``tilefuse.lowering.lowerings``) is run compiled and eagerly
on contiguous, permuted, expanded and sliced inputs, over several sizes and dtypes, and must match
with no fallback kernel. Low-precision tolerances reflect eager's rounding after every op while
tilefuse computes in fp32 and rounds once (Inductor's opmath behaviour).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tilefuse  # noqa: F401  (registers the backend, enables the interpreter)
from tilefuse import config, metrics
from tilefuse.testing import opinfo


@pytest.fixture(autouse=True)
def _strict():
    torch._dynamo.reset()
    torch.manual_seed(0)
    with config.patch(fallback_on_error=False):
        yield
    torch._dynamo.reset()


TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    torch.float64: (1e-7, 1e-7),
}


# TILEFUSE_TEST_DEVICE=cuda runs this module's checks on the GPU (real Triton, libdevice math)
DEVICE = opinfo.DEVICE  # TILEFUSE_TEST_DEVICE (empty means cpu)


def to_device(a):
    """``a`` on DEVICE with the same sizes, strides and storage offset (views stay views)."""
    if not isinstance(a, torch.Tensor) or a.device.type == DEVICE:
        return a
    base = a._base if a._base is not None else a
    return base.to(DEVICE).as_strided(a.shape, a.stride(), a.storage_offset())


def check(fn, *args, tol=None, kernels=None, fallbacks=0, exact=False):
    """Compile ``fn`` with tilefuse, compare with eager, check counters; returns the result."""
    args = tuple(to_device(a) for a in args)
    metrics.reset()
    got = torch.compile(fn, backend="tilefuse")(*args)
    try:
        want = fn(*args)
    except NotImplementedError as e:
        # an aten kernel the device lacks (CUDA's scatter of bool): eager on the CPU is the reference
        if "not implemented for" not in str(e) or DEVICE == "cpu":
            raise
        want = fn(*(a.cpu() if isinstance(a, torch.Tensor) else a for a in args))
        want = want.to(DEVICE) if isinstance(want, torch.Tensor) else want
    if exact:
        torch.testing.assert_close(got, want, atol=0, rtol=0, equal_nan=True)
    else:
        atol, rtol = tol if tol is not None else (1e-5, 1e-5)
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)
    assert metrics.fallback_kernel_count == fallbacks, metrics.fallback_kernel_count
    if kernels is not None:
        assert metrics.generated_kernel_count == kernels, metrics.generated_kernel_count
    return got


def make(shape, dtype=torch.float32, layout="contiguous", low=-3.0, high=3.0):
    """A tensor of ``shape``/``dtype`` in the given memory ``layout``: contiguous, permuted
    (transposed storage), expanded (stride-0 leading dim) or sliced (step-2 slice of a larger one)."""

    def rand(s):
        if dtype == torch.bool:
            return torch.rand(s) > 0.5
        if not dtype.is_floating_point:
            return torch.randint(int(low), int(high) + 1, s, dtype=dtype)
        return (torch.rand(s) * (high - low) + low).to(dtype)

    shape = list(shape)
    if layout == "contiguous" or len(shape) == 0:
        return rand(shape)
    if layout == "permuted":
        return rand(shape[::-1]).permute(*reversed(range(len(shape))))
    if layout == "expanded":
        return rand([1] + shape[1:]).expand(shape)
    if layout == "sliced":
        big = rand(shape[:-1] + [shape[-1] * 2 + 1])
        return big[..., 1::2]
    raise ValueError(layout)


LAYOUTS = ["contiguous", "permuted", "expanded", "sliced"]

# ------------------------------------------------------------------------------ elementwise

UNARY_FLOAT = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
    "round": torch.round,
    "sign": torch.sign,
    "relu": torch.relu,
    "reciprocal": lambda x: torch.reciprocal(x + 10),
    "log": lambda x: torch.log(x.abs() + 0.1),
    "log2": lambda x: torch.log2(x.abs() + 0.1),
    "log10": lambda x: torch.log10(x.abs() + 0.1),
    "log1p": lambda x: torch.log1p(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "isnan": lambda x: torch.isnan(x.log()),
    "isinf": lambda x: torch.isinf(1 / torch.floor(x)),
    "square": torch.square,
    "pow3": lambda x: x**3,
    "pow_half": lambda x: x.abs() ** 0.5,
    "pow_frac": lambda x: x.abs() ** 1.7,
    "pow_neg_half": lambda x: (x.abs() + 1) ** -0.5,
    "gelu_erf": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "hardtanh": F.hardtanh,
    "leaky_relu": F.leaky_relu,
    "softplus": F.softplus,
    "elu": F.elu,
    "dropout_eval": lambda x: F.dropout(x, 0.5, training=False) * 2,
    "nan_to_num": lambda x: torch.nan_to_num(x.log()),
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float32(name):
    fn = UNARY_FLOAT[name]
    check(fn, make([5, 7], layout="permuted"), tol=(2e-5, 2e-5), kernels=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "gelu_tanh", "silu", "log", "round", "rsqrt"])
def test_unary_low_precision(name, dtype):
    check(UNARY_FLOAT[name], make([6, 9], dtype, "sliced"), tol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_exact_gelu_half_precision_uses_polynomial_erfc(dtype, tmp_path):
    # half-precision exact GELU: erf from the log2-erfc polynomial (no libdevice erf), matching
    # eager over [-8, 8] (both tails, the cutoff at |x/sqrt(2)| = 4) and at +-inf and NaN;
    # float32 keeps erf. GELU(+inf) is +inf, compared with that value: eager's CPU kernel gives
    # NaN there on its vectorized (AVX-512) path and +inf on its scalar path
    x = torch.cat([torch.linspace(-8, 8, 4001), torch.tensor([-5.657, 5.657, float("-inf"), float("nan")])])
    bias = torch.linspace(-0.5, 0.5, x.numel())
    with config.patch(debug_dir=str(tmp_path)):
        check(lambda a, b: F.gelu(a + b), x.to(dtype), bias.to(dtype), tol=TOL[dtype], kernels=1)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert ("erf(" in src) == (dtype == torch.float32)
    assert ("exp2(" in src) == (dtype != torch.float32)
    torch._dynamo.reset()
    top = to_device(torch.tensor([float("inf"), 3.0, float("inf")], dtype=dtype))
    got = torch.compile(lambda a: F.gelu(a), backend="tilefuse")(top)
    assert got[0].item() == float("inf") and got[2].item() == float("inf")


def test_exact_gelu_half_precision_gradient_matches_eager():
    x = to_device((torch.randn(16, 33) * 3).to(torch.bfloat16)).requires_grad_()
    w = to_device(torch.randn(33, dtype=torch.bfloat16))
    fn = lambda a, b: (F.gelu(a * b) * b).float().sum()  # noqa: E731
    got = torch.compile(fn, backend="tilefuse")(x, w)
    (g_got,) = torch.autograd.grad(got, x)
    want = fn(x, w)
    (g_want,) = torch.autograd.grad(want, x)
    torch.testing.assert_close(got, want, atol=0.5, rtol=1e-2)
    torch.testing.assert_close(g_got, g_want, atol=1.6e-2, rtol=1.6e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gelu_read_by_two_kernels_is_recomputed_in_each(dtype, tmp_path):
    # ConvNeXt-V2's global response norm: a GELU read by a column sum (one kernel) and by the
    # scaling (another). The GELU is one op of the loop body, so both kernels recompute it from
    # x and no buffer of its values (nor of a polynomial's intermediate) is written: three
    # kernels (sum, mean of the norms, scaling), the GELU's formula in two of them
    x = make([48, 40], dtype)

    def grn(a):
        g = F.gelu(a)
        n = g.float().pow(2).sum(0, keepdim=True).sqrt()
        return g * (n / (n.mean() + 1e-6)).to(g.dtype) + g

    with config.patch(debug_dir=str(tmp_path)):
        check(grn, x, tol=TOL[dtype], kernels=3)
    src = "".join(p.read_text() for p in tmp_path.glob("*.py"))
    formula = "tl.exp2(" if dtype == torch.bfloat16 else "erf("
    assert src.count(formula) == 2, src.count(formula)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_gelu_lowering_matches_eager(approximate, dtype):
    # the lowering's formulas against eager's kernel, both forms, every float dtype, inf and NaN
    x = torch.cat([torch.linspace(-6, 6, 501), torch.tensor([float("-inf"), float("nan"), -0.0, 1e-20])])
    check(lambda a: F.gelu(a * 1.5, approximate=approximate), x.to(dtype), tol=TOL[dtype], kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("divisor", [3.7, 1e-6, -0.0, float("inf"), 7])
def test_division_by_a_python_number_matches_eager_bit_for_bit(dtype, divisor):
    # eager divides on the CPU and multiplies by the reciprocal on CUDA (a CPU scalar divisor);
    # the lowering follows the device, so the results are identical, zeros and infinities too
    x = torch.cat([make([64], dtype, low=-1e4, high=1e4), torch.tensor([0.0, float("inf"), float("nan")], dtype=dtype)])
    check(lambda a: a / divisor, x, exact=True, kernels=1)


@pytest.mark.parametrize("divisor", [3.7, 1e-6, 7])
def test_division_by_a_dynamic_python_number_matches_eager_bit_for_bit(divisor):
    # under dynamic=True Dynamo passes the float as a 0-d CPU tensor: still a CPU scalar to
    # eager's CUDA kernel (a reciprocal multiply), and to the lowering
    torch._dynamo.reset()
    x = to_device(torch.cat([make([64], low=-1e4, high=1e4), torch.tensor([0.0, float("inf"), float("nan")])]))
    f = torch.compile(lambda a, d: torch.softmax(a / d, -1), backend="tilefuse", dynamic=True)
    for d in (divisor, divisor * 3):
        torch.testing.assert_close(f(x, d), torch.softmax(x / d, -1), atol=0, rtol=0, equal_nan=True)


def test_tensor_division_matches_eager_bit_for_bit():
    # eager's CUDA kernels divide with IEEE rounding; so do the kernels (not Triton's
    # approximate float32 division), whatever the operands' dtypes
    x, y = make([4, 257], low=-1e6, high=1e6), make([4, 257], low=0.001, high=7.0)
    check(lambda a, b: (a / b, torch.reciprocal(b), torch.div(a, b, rounding_mode="floor")), x, y, exact=True)
    check(lambda a, b: a.to(torch.bfloat16) / b, x, y, exact=True)


def test_gelu_of_integers_raises_eagers_error():
    # no integer GELU in eager: the lowering leaves the op to aten, whose error the user gets
    f = torch.compile(lambda a: F.gelu(a) + 1, backend="tilefuse")
    with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
        f(to_device(torch.arange(5, dtype=torch.int32)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [1, 3, 127, 1025])
def test_binary_arith_layouts_sizes(layout, n):
    x = make([2, n], layout=layout)
    y = make([2, n], layout="contiguous")
    check(
        lambda a, b: (a + b, a - 2 * b, a * b, a / (b.abs() + 1), torch.maximum(a, b), torch.minimum(a, b)),
        x,
        y,
        kernels=1,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64])
def test_binary_dtypes(dtype):
    x, y = make([4, 33], dtype, "permuted"), make([33], dtype)

    def fns(a, b):
        return (
            a + b,
            a * b - a,
            torch.maximum(a, b),
            torch.minimum(a, b),
            a == b,
            a < b,
            a >= b,
            torch.where(a > b, a, b),
            torch.clamp(a, -1, 2),
        )

    check(fns, x, y, tol=TOL.get(dtype, (0, 0)))


def test_clamp_min_and_clamp_max_bound_their_own_side():
    """``clamp_max(x, hi)`` is ``minimum(x, hi)`` and ``clamp_min(x, lo)`` ``maximum(x, lo)``: their
    one bound comes positionally, so a lowering shared with ``clamp(x, min, max)`` took
    clamp_max's upper bound for a lower one (``clamp_max(a, -3)`` computed ``maximum(a, -3)``).
    int8 bitwise ops and max / clamps over broadcast operands spanning the whole int8 range, and
    float clamps with scalar and tensor bounds; exact."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (4, 1, 8), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (1, 5, 8), dtype=torch.int8, generator=g)
    a[0, 0, :2], b[0, 0, :2] = torch.tensor([-128, 127], dtype=torch.int8), -1
    check(
        lambda a, b: (
            torch.maximum(a & b, b),
            torch.clamp_min(a | b, 3),
            torch.clamp_max(a ^ b, -3),
            torch.clamp_max(torch.maximum(a & b, a | b) ^ b, 100),
            torch.clamp(a ^ b, -50, 50),
        ),
        a,
        b,
        exact=True,
    )
    x, hi = make([6, 7]), make([7])
    check(
        lambda x, hi: (x.clamp_max(0.5), x.clamp_min(-0.5), torch.clamp_max(x, hi), torch.clamp_min(x, hi)),
        x,
        hi,
        exact=True,
    )


def test_mixed_dtype_promotion():
    a = make([5, 6], torch.float16)
    b = make([5, 6], torch.int64)
    c = make([6], torch.bfloat16)
    d = make([5, 6], torch.bool)
    check(
        lambda w, x, y, z: (w + x, w * y, x * 2.5, x + z, z.float() + w, y / x.clamp(min=1)),
        a,
        b,
        c,
        d,
        tol=TOL[torch.bfloat16],
    )


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_div_rounding_modes(mode, dtype):
    a = make([7, 9], dtype, low=-20, high=20)
    b = make([7, 9], dtype, low=1, high=6) * torch.where(torch.rand(7, 9) > 0.5, 1, -1).to(dtype)
    check(lambda x, y: (torch.div(x, y, rounding_mode=mode), torch.div(x, 3, rounding_mode=mode)), a, b)


def test_remainder_and_fmod_signs():
    a = torch.arange(-9, 9).reshape(3, 6)
    b = torch.tensor([4, -4, 3, -3, 5, -5])
    check(lambda x, y: (torch.remainder(x, y), x % 4, torch.remainder(x.float(), y.float())), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_float_floor_division_and_remainder_as_aten_computes_them(dtype):
    """Floor division and remainder of floats follow aten's formulas (fmod first), not
    ``floor(a / b)`` and ``a - floor(a / b) * b``: ``1.0 // 0.1`` is 9.0 (the rounded quotient
    10.0 floored gave 10.0), ``inf // 2.0`` is nan, ``1.0 % inf`` is 1.0 (nan before), and a zero
    result keeps eager's sign. Compared bit for bit, zeros' signs included."""
    inf, nan = float("inf"), float("nan")
    vals = [1.0, -1.0, inf, -inf, nan, 0.0, -0.0, 5.5, -5.5, 1e30, 7.0, -7.0, 0.3, 1e-3]
    divs = [0.1, -0.1, 2.0, -2.0, inf, -inf, 0.0, -0.0, nan, 3.0, 1e-3, 0.7]
    a = torch.tensor([x for x in vals for _ in divs], dtype=dtype)
    b = torch.tensor([y for _ in vals for y in divs], dtype=dtype)

    def f(x, y):
        return (
            torch.floor_divide(x, y),
            torch.div(x, y, rounding_mode="floor"),
            torch.remainder(x, y),
            x // 0.1,
            x % 2.0,
            x // inf,
            x % -inf,
        )

    got = check(f, a, b, exact=True)
    want = f(to_device(a), to_device(b))
    for g, w in zip(got, want):
        assert torch.equal(torch.signbit(g) | g.isnan(), torch.signbit(w) | w.isnan())
    assert got[0][vals.index(1.0) * len(divs)].item() == 9.0  # 1.0 // 0.1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_negative_zero_constants_and_negation_keep_the_sign_bit(dtype):
    """``-0.0`` as a constant (Triton's ``tl.full`` builds every zero as +0.0) and ``-x`` of +0.0
    (Triton's unary minus is ``0 - x``) keep eager's sign: ``x // -0.0`` is -inf for x > 0, ``-0.0
    % x`` and ``-(x * 0)`` are -0.0. Compared with the sign of every zero."""
    x = torch.tensor([1.0, -1.0, 0.0, -0.0, 5.0, float("inf"), float("nan")], dtype=dtype)

    def f(x):
        return x // -0.0, -0.0 % x, x / -0.0, x * -0.0, x + -0.0, -x, -(x * 0), torch.full_like(x, -0.0) + x * 0

    got = check(f, x, exact=True)
    want = f(to_device(x))
    for g, w in zip(got, want):
        assert torch.equal(torch.signbit(g) | g.isnan(), torch.signbit(w) | w.isnan()), (g, w)
    assert got[0][0].item() == float("-inf") and torch.signbit(got[5][2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log1p_expm1_and_tanh_keep_their_precision_near_zero(dtype):
    """``log1p``/``expm1`` (and softplus, ELU, logaddexp built on them) and ``tanh`` to within a few
    ulp, relative, for tiny arguments: without libdevice they were ``log(1 + x)``, ``exp(x) - 1``
    and ``2 * sigmoid(2x) - 1``, which gave ``log1p(1e-10) == 0`` and ``softplus(-20) == 0``;
    special values and the signs of zeros as eager."""
    x = torch.tensor(
        [
            1e-30,
            1e-10,
            -1e-10,
            1e-7,
            1e-5,
            -1e-7,
            0.3,
            -0.5,
            -1.0,
            -2.0,
            -20.0,
            20.0,
            100.0,
            -100.0,
            0.0,
            -0.0,
            float("inf"),
            float("-inf"),
            float("nan"),
            1e30,
        ],
        dtype=dtype,
    )

    def f(x):
        return (
            torch.log1p(x),
            torch.expm1(x),
            F.softplus(x),
            F.elu(x),
            torch.logaddexp(torch.zeros_like(x), x),
            torch.tanh(x),
        )  # tanh(1e-10) was 0 too (2 * sigmoid(2x) - 1)

    eps = torch.finfo(dtype).eps
    got = check(f, x, tol=(0.0, 4 * eps))
    for g, w in zip(got, f(to_device(x))):
        assert torch.equal(torch.signbit(g) | g.isnan(), torch.signbit(w) | w.isnan()), (g, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_nan_constants_keep_the_sign_bit_as_torch_rounds_them(dtype):
    """A NaN fill with its sign bit set (``copysign(nan, -1)``) keeps it in the dtypes where torch's
    conversion keeps it (float32/64, float16) and loses it where torch's does (bfloat16): the
    generated constant must not be ``float("nan")``, always positive (checked with ``signbit``)."""
    neg_nan = math.copysign(math.nan, -1.0)
    x = torch.tensor([1.0, -2.0, 0.5], dtype=dtype)

    def f(x):
        return (
            torch.signbit(torch.full_like(x, neg_nan)),
            torch.signbit(torch.full_like(x, math.nan)),
            torch.full_like(x, neg_nan),
        )

    def f2(x):  # a NaN computed in float32 and rounded to the dtype: eager's bfloat16 rounding
        # makes it positive, Triton's conversion keeps the sign (docs/backend.md, known differences)
        return torch.signbit(x * 0 + neg_nan)

    got = check(f, x, exact=True)
    want = f(to_device(x))
    for g, w in zip(got[:2], want[:2]):
        assert torch.equal(g.cpu(), w.cpu()), (g, w)
    assert bool(want[0][0]) == (dtype != torch.bfloat16)  # torch's own rule, as documented above
    assert got[2].isnan().all()
    if dtype != torch.bfloat16:
        check(f2, x, exact=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_bitwise_and_logical(dtype):
    a, b = make([6, 5], dtype, low=-8, high=8), make([5], dtype, low=-8, high=8)
    check(
        lambda x, y: (
            x & y,
            x | y,
            x ^ y,
            ~x,
            torch.logical_and(x, y),
            torch.logical_or(x, y),
            torch.logical_xor(x, y),
            torch.logical_not(x),
        ),
        a,
        b,
        exact=True,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int8, torch.bool])
def test_sign_and_bool_add(dtype):
    # on the GPU, nested tl.where of literals can give +1 for the sign of a negative bf16; bool +
    # bool is logical or in torch, while Triton's int1 add wraps
    x = make([7, 9], dtype, low=-5, high=5)
    if dtype.is_floating_point:
        x[0, :4] = torch.tensor([float("nan"), -0.0, 0.0, float("-inf")], dtype=dtype)
    check(lambda a: (torch.sign(a), torch.sgn(a), a + a, a * a if dtype != torch.bool else a & a), x, exact=True)


def test_factories_without_tensor_inputs_run_on_their_device():
    # a graph with no tensor inputs takes its device from the factory calls (was: always the CPU)
    got = check(
        lambda: (
            torch.zeros(3, 4, device=DEVICE) + torch.arange(4, device=DEVICE),
            torch.full((5,), 2.5, device=DEVICE),
            torch.ones(2, dtype=torch.int64, device=DEVICE),
        )
    )
    assert all(t.device.type == DEVICE for t in got)


def test_where_with_scalars_and_inf():
    x = make([4, 10], layout="sliced")
    m = torch.rand(4, 10) > 0.3
    check(
        lambda a, c: (
            torch.where(c, a, float("-inf")),
            torch.where(c, 0.0, a),
            a.masked_fill(~c, -1e9),
            torch.where(c, 1, 2),
        ),
        x,
        m,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_clamp_variants(dtype):
    x = make([3, 11], dtype, low=-10, high=10)
    lo = make([11], dtype, low=-5, high=0)
    check(
        lambda a, b: (a.clamp(min=-2), a.clamp(max=3), a.clamp(-2, 3), torch.clamp(a, min=b), F.relu6(a)),
        x,
        lo,
        tol=(1e-6, 1e-6),
    )


def test_pow_tensor_tensor_and_scalars():
    x = make([4, 8]).abs() + 0.5
    y = make([4, 8], low=-2, high=2)
    i = make([4, 8], torch.int64, low=0, high=4)
    check(lambda a, b, c: (a**b, torch.pow(2.0, b), c**2, (-a) ** 3, a**0, a**-1), x, y, i, tol=(1e-5, 1e-5))


@pytest.mark.parametrize(
    "src,dst",
    [
        (torch.float32, torch.int64),
        (torch.float32, torch.float16),
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float16),
        (torch.int64, torch.float32),
        (torch.bool, torch.float32),
        (torch.float32, torch.bool),
        (torch.int64, torch.bool),
        (torch.bool, torch.int64),
        (torch.float32, torch.bfloat16),
    ],
)
def test_casts(src, dst):
    x = make([3, 13], src, layout="permuted", low=-5, high=5)
    if src.is_floating_point:
        x[0, 0] = 0
    check(lambda a: a.to(dst), x, exact=True)


def test_integer_overflow_wraps_like_torch():
    x = torch.tensor([2**62, -(2**62), 7], dtype=torch.int64)
    check(lambda a: a * 4 + 1, x, exact=True)


def test_small_views_of_a_storage_past_int32_offsets_read_the_right_elements():
    """A 3 x 8 view of a 3 x (2**30 + 8) int8 storage: its last row starts at element
    2**31 + 16, so the kernel must compute offsets in int64 (it used to wrap them in int32 and read
    outside the storage: a crash). The storage is left uninitialized apart from the viewed
    elements, so only their pages are touched."""
    big = torch.empty(3, 2**30 + 8, dtype=torch.int8)
    x = big[:, :8]
    x.copy_(torch.arange(24, dtype=torch.int8).view(3, 8))
    check(lambda a: a * 2, x, exact=True)
    check(lambda a: (a.t() + 1, a.sum(1)), x, exact=True)


def test_nan_propagation():
    x = torch.tensor([1.0, float("nan"), -2.0, float("inf")])
    y = torch.tensor([float("nan"), 0.0, 3.0, 1.0])
    check(
        lambda a, b: (
            torch.maximum(a, b),
            torch.minimum(a, b),
            torch.fmax(a, b),
            torch.fmin(a, b),
            a.amax(),
            torch.clamp(a, 0, 1),
            torch.relu(a),
            torch.sign(a),
        ),
        x,
        y,
    )


# ------------------------------------------------------------------------------ reductions


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "mean", "var", "std"])
def test_reduction_ops(op, layout):
    x = make([6, 10], layout=layout, low=0.5, high=1.5)
    fn = getattr(torch, op)
    check(lambda a: (fn(a, 1), fn(a, 0, keepdim=True), fn(a, -1, keepdim=False)), x, tol=(1e-4, 1e-4))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
def test_arg_reductions(op, dtype):
    x = make([5, 17], dtype, layout="permuted", low=-50, high=50)
    fn = getattr(torch, op)
    check(lambda a: (fn(a, 1), fn(a, 0, keepdim=True), fn(a)), x, exact=True)


def test_any_all_and_bool_reductions():
    x = make([4, 9], torch.bool)
    y = make([4, 9], torch.int64, low=0, high=2)
    check(
        lambda a, b: (a.any(1), a.all(0), a.any(), b.any(-1), a.sum(1), b.all(), torch.count_nonzero(b, 1)),
        x,
        y,
        exact=True,
    )


def test_reduction_multi_dims_and_dtype_arg():
    x = make([3, 4, 5, 6], layout="permuted")
    i = make([3, 5], torch.int64, low=-3, high=3)
    check(
        lambda a, b: (
            a.sum((0, 2)),
            a.mean((1, 3), keepdim=True),
            a.amax((0, 1, 2)),
            a.sum(dtype=torch.float64),
            b.sum(1),
            b.sum(1, dtype=torch.float32),
            b.prod(1),
            a.var((0, 3), correction=0),
            a.std(2, unbiased=True),
        ),
        x,
        i,
        tol=(1e-4, 1e-4),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_reductions_accumulate_in_fp32(dtype):
    # 1000 fp16 values of ~1: a fp16 accumulator would lose precision; eager accumulates in fp32
    x = (torch.rand(4, 1000) + 0.5).to(dtype)
    check(lambda a: (a.sum(1), a.mean(1), a.amax(1), a.var(1), a.sum(1, dtype=torch.float32)), x, tol=TOL[dtype])


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "argmax", "argmin", "any", "mean", "var"])
def test_looped_reductions(op):
    # rnumel above the persistent threshold: reductions loop over RBLOCK chunks
    x = make([3, 2500], low=0.999, high=1.001)
    with config.patch(persistent_reduction_threshold=1024):
        if op == "any":
            check(lambda a: (a > 1.0009).any(1), x, exact=True)
        else:
            fn = getattr(torch, op)
            check(lambda a: fn(a, 1), x, tol=(1e-4, 1e-4))


@pytest.mark.parametrize("threshold", [1, 2, 3, 4])
def test_normalizers_split_into_chunks_wholly_past_the_row_end(threshold):
    """A short ``persistent_reduction_threshold`` cuts rows of 5, 7 or 9 into power-of-two chunk
    counts some of whose chunks lie wholly past the row's end (8 chunks of 1 for a row of 5):
    such a chunk, like one of -inf only, adds nothing to the row's sum (it made every softmax,
    log_softmax, logsumexp and cross-entropy NaN at threshold 1); rows of -inf keep eager's
    results."""
    for n in (5, 7, 9):
        torch._dynamo.reset()
        x = make([4, n])
        x[1, :] = float("-inf")
        x[2, 0] = float("-inf")
        y = to_device(torch.tensor([1, 3, 2, 0]) % n)
        with config.patch(persistent_reduction_threshold=threshold):
            check(
                lambda a, b: (
                    a.softmax(-1),
                    a.log_softmax(-1),
                    a.logsumexp(-1),
                    F.cross_entropy(a[[0, 2, 3]], b[[0, 2, 3]]),
                ),
                x,
                y,
                tol=(1e-5, 1e-5),
            )


def test_reduction_sizes_one_and_odd():
    for shape in ([1, 1], [1, 3], [127, 1], [3, 127]):
        torch._dynamo.reset()
        x = make(shape)
        check(lambda a: (a.sum(1), a.amax(0), a.mean(), a.argmax(1)), x, tol=(1e-4, 1e-4))


def test_full_reduction_of_large_tensor():
    x = make([1025, 3])
    check(lambda a: (a.sum(), a.amax(), a.argmin()), x, tol=(1e-4, 1e-4))


# ------------------------------------------------------------------------------ views


def test_reshape_between_incompatible_shapes():
    x = make([6, 10], layout="permuted")  # non-contiguous: reshape must re-index
    check(lambda a: (a.reshape(4, 15) * 2, a.reshape(2, 3, 5, 2).sum(2), a.reshape(-1)[7:40:3] + 1), x)


def test_permute_then_reshape_then_reduce():
    x = make([2, 3, 4, 5])
    check(lambda a: a.permute(0, 2, 1, 3).reshape(8, 15).amax(1) + a.transpose(1, 3).reshape(2, -1).sum(1)[0], x)


def test_expand_slice_select_squeeze():
    x = make([4, 1, 9])
    check(
        lambda a: (
            a.expand(4, 3, 9) * 2,
            a[:, :, 1:8:3] + 1,
            a[2, 0] - 1,
            a.select(2, -1) * 3,
            a.squeeze(1).t() + 0,
            a.unsqueeze(0).unsqueeze(-1) * 1,
            a[..., ::2].sum(-1),
        ),
        x,
    )


def test_t_transpose_and_negative_steps_free():
    x = make([7, 5], layout="sliced")
    y = make([5, 7])
    check(lambda a, b: (a.t() + b, b.transpose(0, 1) * a, (a.t() * b).t()), x, y, kernels=1)


def test_chained_views_of_computed_values():
    x = make([4, 6, 8])
    check(lambda a: (a.exp().transpose(0, 2)[1:, ::2].reshape(-1, 3) + 1).sum(0), x, tol=(1e-4, 1e-4))


# ------------------------------------------------------------------------------ composites


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_softmax_log_softmax(dtype):
    x = make([6, 37], dtype, layout="permuted")
    check(lambda a: torch.softmax(a, -1), x, tol=TOL[dtype], kernels=1)
    torch._dynamo.reset()
    check(lambda a: (torch.log_softmax(a, 0), torch.softmax(a, 0, dtype=torch.float32)), x, tol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_layer_norm(dtype):
    ln = torch.nn.LayerNorm(40).to(DEVICE, dtype)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
        check(ln, make([5, 40], dtype), tol=TOL[dtype] if dtype != torch.float32 else (1e-5, 1e-5), kernels=1)


def test_layer_norm_without_affine_and_3d():
    x = make([2, 3, 24], layout="sliced")
    check(lambda a: F.layer_norm(a, (24,)) + F.layer_norm(a, (3, 24)), x, tol=(1e-5, 1e-5))


def test_matmul_epilogues():
    a, b, bias = make([8, 16]), make([16, 12]), make([12])
    check(lambda x, y, c: torch.tanh(x @ y + c) * 2 - 1, a, b, bias, kernels=1, tol=(1e-4, 1e-4))
    torch._dynamo.reset()
    check(lambda x, y, c: F.silu(torch.addmm(c, x, y)).sum(1), a, b, bias, tol=(1e-4, 1e-4))
    torch._dynamo.reset()
    check(
        lambda x, y: torch.softmax(torch.bmm(x, y), -1), make([2, 5, 7]), make([2, 7, 6]), tol=(1e-5, 1e-5), kernels=1
    )


def test_conv_epilogue_bias_activation_residual_is_one_kernel():
    # convolution is an extern call; bias + ReLU + residual add after it fuse into one kernel
    x, w, b = make([2, 3, 9, 9]), make([5, 3, 3, 3]), make([5])
    r = make([2, 5, 7, 7])
    check(lambda a, k, c, res: F.relu(F.conv2d(a, k) + c[:, None, None]) + res, x, w, b, r, kernels=1, tol=(1e-4, 1e-4))


def test_mutations_of_graph_inputs_copy_and_index_put():
    def f(a, b, idx, v):
        a.copy_(b * 2)  # copy_ into an input
        b.index_put_((idx,), v, accumulate=True)  # in-place accumulate into another input
        return a.sum() + b.sum()

    a, b = make([6, 4]), make([6, 4])
    idx, v = torch.tensor([0, 2, 2, 5]), make([4, 4])
    args = [to_device(t) for t in (a, b, idx, v)]
    ref = [t.clone() for t in args]
    got = torch.compile(f, backend="tilefuse")(*args)
    want = f(*ref)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for t, r in zip(args, ref):
        torch.testing.assert_close(t, r, atol=1e-6, rtol=1e-6)


def test_inputs_aliasing_one_storage():
    # two graph inputs that are views of one tensor: a write through one is seen through the other
    def f(a, b):
        a.add_(1)
        return b * 2

    base = to_device(make([8, 3]))
    ref = base.clone()
    got = torch.compile(f, backend="tilefuse")(base[:5], base[3:])
    want = f(ref[:5], ref[3:])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(base, ref)


def test_creation_ops():
    x = make([3, 4])
    check(
        lambda a: (
            a + torch.ones(3, 4, device=a.device),
            torch.zeros_like(a) + 1,
            torch.full_like(a, 2.5) * a,
            torch.arange(4, device=a.device) + a,
            torch.arange(2, 14, 3, device=a.device).float() * 2,
            torch.arange(0.5, 3.0, 0.25, device=a.device) + 1,
            torch.arange(5, dtype=torch.float16, device=a.device),
        ),
        x,
    )


# ------------------------------------------------------------------------------ indirect indexing


def test_embedding_is_an_indirect_load_fused_with_its_consumer():
    w = make([11, 6])
    i = torch.tensor([[1, 10, 0], [3, 3, 7]])
    check(lambda a, b: F.embedding(b, a) * 2 + 1, w, i, kernels=1)


def test_index_select_gather_and_advanced_indexing():
    x = make([5, 7], layout="permuted")
    i = torch.tensor([4, 0, 2, 2])
    j = torch.tensor([[0, 6], [1, 5], [2, 4], [3, 3], [6, 0]])
    neg = torch.tensor([-1, 1, -5])
    check(
        lambda a, b, c, d: (
            a.index_select(0, b) + 1,
            a.index_select(1, b),
            torch.gather(a, 1, c),
            a[b],
            a[:, b] * 2,
            a[d],
            a[b, b],
        ),
        x,
        i,
        j,
        neg,
    )


def test_cross_entropy_forward_has_no_fallback():
    logits = make([6, 9])
    tgt = torch.tensor([0, 8, 3, 3, -100, 1])
    check(lambda a, t: F.cross_entropy(a, t), logits, tgt, tol=(1e-5, 1e-5))


@pytest.mark.skipif(
    DEVICE != "cpu",
    reason="the bounds check is a tl.device_assert: live in Triton's interpreter; "
    "on a GPU compiled in debug mode only, and a device-side assert leaves the CUDA context unusable",
)
def test_out_of_range_index_raises():
    w = make([5, 3])
    with pytest.raises(Exception, match="index out of bounds"):
        torch.compile(lambda a, b: F.embedding(b, a), backend="tilefuse")(w, torch.tensor([1, 7]))
    # a negative embedding index is out of range too (eager: IndexError), not the last row
    torch._dynamo.reset()
    with pytest.raises(Exception, match="index out of bounds"):
        torch.compile(lambda a, b: F.embedding(b, a) * 2, backend="tilefuse")(w, torch.tensor([0, -1]))
    # index_add likewise (eager: an index error; torch's decomposition wrapped -1 to the last row)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="index out of bounds"):
        torch.compile(lambda a, b: a.index_add(0, b, a[:2] * 2), backend="tilefuse")(w, torch.tensor([0, -1]))


def test_index_add_with_alpha_repeated_indices_and_transposed_operands():
    x, s = make([5, 4]), make([6, 4])
    i = torch.tensor([0, 4, 2, 0, 1, 4])
    check(lambda a, b, c: a.index_add(0, b, c), x, i, s, tol=(1e-5, 1e-5))
    check(lambda a, b, c: a.t().index_add(1, b, c.t(), alpha=2.5) * 2, x, i, s, tol=(1e-5, 1e-5))
    check(lambda a, b, c: a.int().index_add(0, b, (c * 10).int()), x, i, s, exact=True)


def test_non_adjacent_advanced_indices_go_first():
    # index tensors on dims 0 and 2 (not adjacent): their broadcast dims lead the result
    x = make([4, 3, 5, 2], layout="permuted")
    i, j = torch.tensor([[0, 3, 1]]), torch.tensor([4, 0, 2])
    check(lambda a, b, c: (a[b, :, c] * 2, a[:, 1:, c, :] + 1, a[:, c % 3, :, 1] - 1, a[b, 1, c, 0]), x, i, j)


# ------------------------------------------------------------------------------ select-style ops


def test_cat_is_one_pointwise_kernel():
    a, b, c = make([3, 4]), make([3, 1], layout="sliced"), make([4, 3], layout="contiguous").t()
    check(lambda x, y, z: torch.cat([x, y * 2, z], 1) + 1, a, b, c, kernels=1)
    torch._dynamo.reset()
    check(
        lambda x, y: torch.cat([x, y.to(torch.float16), torch.empty(0, device=x.device)], 0), make([2, 5]), make([3, 5])
    )


def test_cat_masks_each_inputs_loads_to_its_slice(tmp_path):
    # Inductor's masked cat: every load of a cat input is masked to that input's slice (beyond
    # xmask), so a lane reads one input only; inputs may be computed (b * 2), transposed or of
    # another dtype, and the backward of a split is such a cat
    import re

    a, b, c = make([5, 3]), make([5, 4], layout="permuted"), make([5, 2], torch.float16)
    with config.patch(debug_dir=str(tmp_path)):
        check(lambda x, y, z: torch.cat([x, y * 2, z], 1) - 1, a, b, c, kernels=1)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    loads = re.findall(r"tl\.load\([^\n]*", src)
    assert len(loads) == 3 and all("xmask & (tmp" in ld for ld in loads), loads
    torch._dynamo.reset()
    x = to_device(torch.randn(6, 9)).requires_grad_()
    fn = lambda t: sum(p.square().sum() * (k + 1) for k, p in enumerate(t.split(3, 1)))  # noqa: E731
    (g_got,) = torch.autograd.grad(torch.compile(fn, backend="tilefuse")(x), x)
    (g_want,) = torch.autograd.grad(fn(x), x)
    torch.testing.assert_close(g_got, g_want)


@pytest.mark.parametrize("pad", [(1, 2), (0, 0, 2, 1), (-1, 2, 1, -1), (3, 0, 0, 0)])
def test_constant_pad_nd(pad):
    x = make([4, 5], layout="permuted")
    check(lambda a: F.pad(a, pad, value=-2.5) * 2, x, kernels=1)


def test_slice_and_select_scatter():
    x, s1, s2, s3 = make([6, 8]), make([6, 3]), make([2, 8]), make([6])
    check(
        lambda a, b, c, d: (
            torch.slice_scatter(a, b, 1, 1, 7, 2),
            torch.slice_scatter(a, c, 0, -3, -1),
            torch.select_scatter(a, d, 1, -2),
        ),
        x,
        s1,
        s2,
        s3,
    )


def test_scatter_value_one_hot_and_general():
    """One write per row: a pointwise where; other shapes: a store kernel into a copy."""
    x = torch.zeros(5, 7)
    idx = torch.tensor([[0], [6], [3], [3], [1]])
    check(lambda a, i: a.scatter(1, i, -1.0) + 1, x, idx, kernels=1)
    torch._dynamo.reset()
    idx2 = torch.tensor([[0, 2], [6, 5], [3, 1], [3, 0], [1, 4]])
    check(lambda a, i: a.scatter(1, i, -1.0) + 1, x, idx2)
    torch._dynamo.reset()
    src = make([5, 3], torch.bfloat16)
    check(lambda a, i, s: a.scatter(1, i, s) * 2, make([5, 7], torch.bfloat16), idx2, src, exact=True)
    check(lambda a, i, s: a.scatter(0, i, s), make([7, 2]), torch.tensor([[6, 0], [2, 5]]), make([3, 3]), exact=True)


# ------------------------------------------------------------------------------ more lowerings


def test_flip_repeat_diagonal_views():
    x = make([4, 6], layout="permuted")
    check(
        lambda a: (
            a.flip(1) + 1,
            a.flip(0, 1) * a,
            a.repeat(2, 1, 3) - 1,
            torch.diagonal(a, 1) * 2,
            torch.diagonal(a, -2) + 0,
            a.roll(2, 1) * 2,
        ),
        x,
    )


def test_max_min_dim_values_and_indices():
    x = make([5, 9], layout="sliced")
    check(lambda a: (a.max(1), a.min(0, keepdim=True), torch.max(a, -1).indices), x, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vector_norms(dtype):
    x = make([5, 12], dtype)
    check(
        lambda a: (
            torch.linalg.vector_norm(a, dim=1),
            a.norm(),
            torch.linalg.vector_norm(a, 1, dim=0),
            torch.linalg.vector_norm(a, float("inf"), dim=1),
            torch.linalg.vector_norm(a, float("-inf")),
        ),
        x,
        tol=TOL[dtype] if dtype != torch.float32 else (1e-5, 1e-5),
    )


def test_fmod_and_shifts():
    x = make([4, 7], low=-9, high=9)
    i = make([4, 7], torch.int64, low=-64, high=64)
    s = make([7], torch.int64, low=0, high=5)
    check(
        lambda a, b, c: (torch.fmod(a, 0.7), torch.fmod(b, 5), torch.fmod(b, -3), b << 2, b >> c, b >> 1),
        x,
        i,
        s,
        tol=(1e-6, 1e-6),
    )


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.float64])
def test_other_dtypes(dtype):
    x = make([4, 9], dtype, low=0, high=100)
    check(lambda a: (a + 1, a.sum(1), a * 3 - 2, a.amax(0), a.to(torch.float32) / 7), x, tol=(1e-6, 1e-6))


def test_std_low_precision_rounds_once():
    x = make([4, 33], torch.bfloat16)
    check(lambda a: (a.std(1), a.var(0)), x, tol=(0, 0))


def test_index_put_accumulate_and_scatter_add_with_repeated_indices():
    x = make([6, 4])
    idx = torch.tensor([1, 3, 1, 1, 5, -1])
    v = make([6, 4])
    col = torch.tensor([[0, 3, 3, 1], [2, 2, 2, 2], [1, 0, 3, 3]])
    check(
        lambda a, i, b, c: (
            torch.index_put(a, [i], b, accumulate=True) * 2,
            a.scatter_add(0, i.abs().view(6, 1).expand(6, 4), b) + 1,
            a[:3].scatter_add(1, c, b[:3, :4]),
            torch.index_put(a, [i], b[0], accumulate=True),
        ),
        x,
        idx,
        v,
        col,
        tol=(1e-5, 1e-5),
    )


@pytest.mark.parametrize(
    "case",
    [
        "index_add_dim0",
        "index_add_dim1",
        "index_put_accumulate",
        "index_put",
        "scatter_add",
        "scatter",
        "scatter_scalar",
        "scatter_reduce_amax",
        "scatter_reduce_mean",
        "gather_backward",
        "index_select_backward",
    ],
)
def test_scatter_into_a_size_one_axis(case):
    """A scatter whose target has a size-1 axis: the indirect index along it drops out of the
    store's address, which must still be a block of the stored value's shape (otherwise Triton
    raises "Cannot broadcast" at the first call, on the GPU and under the interpreter)."""
    z = torch.zeros(6, dtype=torch.long)
    v = make([6, 4])
    fns = {
        "index_add_dim0": (lambda a, i, b: torch.zeros_like(a).index_add(0, i, b), make([1, 4]), z, v),
        "index_add_dim1": (lambda a, i, b: a.index_add(1, i, b.t()), make([4, 1]), z, v),
        "index_put_accumulate": (lambda a, i, b: a.index_put((i,), b, accumulate=True), make([1, 4]), z, v),
        "index_put": (lambda a, i, b: a.index_put((i[:1],), b[:1]), make([1, 4]), z, v),
        "scatter_add": (lambda a, i, b: a.scatter_add(1, i.expand(4, 6), b.t()), make([4, 1]), z, v),
        "scatter": (lambda a, i, b: a.scatter(1, i.expand(4, 6), b.t()), make([4, 1]), z, v),
        "scatter_scalar": (lambda a, i, b: a.scatter(1, i.expand(4, 6), 2.5) + b.sum(), make([4, 1]), z, v),
        "scatter_reduce_amax": (lambda a, i, b: a.scatter_reduce(1, i.expand(4, 6), b.t(), "amax"), make([4, 1]), z, v),
        "scatter_reduce_mean": (lambda a, i, b: a.scatter_reduce(1, i.expand(4, 6), b.t(), "mean"), make([4, 1]), z, v),
    }
    if case in fns:
        fn, *args = fns[case]
        with config.patch(fallback_on_error=False):
            check(fn, *args, tol=(1e-5, 1e-5))
        return
    # backward of a gather from [4, 1] and of an index_select from [1, 3]: scatters into them
    src = to_device(make([4, 1] if case == "gather_backward" else [1, 3])).requires_grad_()
    idx = to_device(torch.zeros(4, 5, dtype=torch.long) if case == "gather_backward" else z)
    fn = (lambda a, i: a.gather(1, i)) if case == "gather_backward" else (lambda a, i: a.index_select(0, i))
    with config.patch(fallback_on_error=False):
        torch.compile(lambda a, i: fn(a, i).square().sum(), backend="tilefuse")(src, idx).backward()
    got, src.grad = src.grad, None
    fn(src, idx).square().sum().backward()
    torch.testing.assert_close(got, src.grad)


def test_embedding_of_one_row_backward():
    """nn.Embedding(1, d) (RoBERTa's token-type embedding): its backward scatters into one row."""
    emb = torch.nn.Embedding(1, 8).to(DEVICE)
    ids = to_device(torch.zeros(2, 5, dtype=torch.long))
    with config.patch(fallback_on_error=False):
        torch.compile(lambda i: emb(i).pow(2).sum(), backend="tilefuse")(ids).backward()
    got, emb.weight.grad = emb.weight.grad, None
    emb(ids).pow(2).sum().backward()
    torch.testing.assert_close(got, emb.weight.grad)


def test_bitwise_not_of_unsigned_and_signed_integers():
    """``~`` of uint8 is an xor with 0xFF (the interpreter's ``~`` failed on unsigned arrays)."""
    u = torch.tensor([[0, 1, 200, 255], [3, 4, 5, 128]], dtype=torch.uint8)
    check(
        lambda a, b, c: (~a, ~(a + a.flip(0)), torch.bitwise_not(a) * 2, (~a).to(torch.int32) + 1, ~b, ~c),
        u,
        u.to(torch.int8),
        u.to(torch.int64) - 100,
        exact=True,
    )


def test_int64_arange_beyond_int32_matches_eager(tmp_path):
    """An int64 ``arange`` whose values leave int32's range (start near 2**31, a step of 2**30,
    negative starts down to -2**31) computes them in int64: the kernel indexes in int64 when an
    index used as data is not proven to fit int32 (``_index_values_fit_int32``); they wrapped, or
    the kernel failed to print 2**31, before. An ordinary arange keeps int32 indexing."""
    cases = [
        lambda: torch.arange(2**31 - 2, 2**31 + 3),
        lambda: torch.arange(0, 5 * 2**30, 2**30),
        lambda: torch.arange(2**31, 2**31 + 3),
        lambda: torch.arange(-(2**31) + 2, -(2**31) - 3, -1),
        lambda: torch.arange(-(2**31), -(2**31) + 5),
        lambda: torch.arange(7) + (2**31 - 2),
    ]
    for f in cases:
        torch._dynamo.reset()
        check(f, exact=True, kernels=1)
    x = to_device(torch.arange(5))
    torch._dynamo.reset()
    check(lambda a: a + torch.arange(2**31 - 2, 2**31 + 3), x, exact=True)
    torch._dynamo.reset()
    with config.patch(debug_dir=str(tmp_path)):
        check(lambda a: a + torch.arange(5) * 3 - 7, x, exact=True, kernels=1)
    src = "".join(p.read_text() for p in tmp_path.iterdir())
    assert "xindex = (xoffset + tl.arange(0, XBLOCK)).to(tl.int32)" in src, src


def test_integer_linspace_is_computed_in_float64():
    """An integer ``linspace`` past 2**24 keeps every value (torch's reference decomposition
    multiplied in float32: ``linspace(2**31 - 10, 2**31 + 10, 5)`` gave 2**31 five times);
    ``_linspace_integers_in_float64``. Float results stay the reference's."""
    x = to_device(torch.tensor(0))
    big = 2**31
    for f in (
        lambda a: torch.linspace(big - 10, big + 10, 5, dtype=torch.int64) + a,
        lambda a: torch.linspace(-(2**40), 2**40, 100, dtype=torch.int64) + a,
        lambda a: torch.linspace(2**24 - 10, 2**24 + 10, 5, dtype=torch.int64) * (a + 1),
        lambda a: torch.linspace(0, 10, 4, dtype=torch.int32) + a,
        lambda a: torch.linspace(-3, 3, 9, dtype=torch.int8) + a,
    ):
        torch._dynamo.reset()
        check(f, x, exact=True)
    torch._dynamo.reset()
    check(lambda a: torch.linspace(-1.5, 2.0, 11) + a, x)


def test_embedding_backward_is_native():
    w = to_device(make([9, 5])).requires_grad_()
    i = to_device(torch.tensor([[1, 8, 1], [0, 1, -1]]).remainder(9))

    metrics.reset()
    out = torch.compile(lambda a, b: F.embedding(b, a).sum(1), backend="tilefuse")(w, i)
    out.pow(2).sum().backward()
    g = w.grad.clone()
    w.grad = None
    F.embedding(i, w).sum(1).pow(2).sum().backward()
    torch.testing.assert_close(g, w.grad)
    assert metrics.fallback_kernel_count == 0


def test_fallback_result_with_unexpected_strides_is_copied_into_the_compiled_layout():
    from tilefuse.runtime import ensure_strides

    t = to_device(torch.randn(3, 4)).t()  # strides (1, 4)
    fixed = ensure_strides(t, (4, 3), (3, 1))
    assert fixed.stride() == (3, 1)
    torch.testing.assert_close(fixed, t)
    assert ensure_strides(t, (4, 3), (1, 4)) is t
    with pytest.raises(RuntimeError, match="expected"):
        ensure_strides(t, (3, 4), (4, 1))


@pytest.mark.parametrize(
    "k,s,p,d,shape",
    [(2, None, 0, 1, (2, 3, 8, 8)), (3, 2, 1, 1, (1, 2, 7, 9)), (3, 1, 1, 2, (2, 5, 6)), (2, 3, 1, 1, (1, 1, 7, 7))],
)
def test_max_pool2d_forward_indices_and_backward(k, s, p, d, shape):
    x = make(list(shape))
    x.view(-1)[3] = float("nan")

    def fwd(a):
        return F.max_pool2d(a, k, s, p, d, return_indices=True)

    check(fwd, x, exact=True)
    # backward: the compiled forward's autograd graph runs max_pool2d_with_indices_backward
    torch._dynamo.reset()
    metrics.reset()
    xa = to_device(make(list(shape))).requires_grad_()
    xb = xa.detach().clone().requires_grad_()
    out = torch.compile(lambda a: F.max_pool2d(a, k, s, p, d) * 1, backend="tilefuse")(xa)
    go = torch.randn_like(out)
    out.backward(go)
    F.max_pool2d(xb, k, s, p, d).backward(go)
    torch.testing.assert_close(xa.grad, xb.grad, atol=1e-6, rtol=1e-6)
    assert metrics.fallback_kernel_count == 0


def test_low_precision_index_put_accumulate_falls_back():
    x = make([5, 3], torch.bfloat16)
    i = torch.tensor([0, 4, 0])
    v = make([3, 3], torch.bfloat16)
    check(
        lambda a, b, c: torch.index_put(a, [b], c, accumulate=True) * 2, x, i, v, tol=TOL[torch.bfloat16], fallbacks=1
    )


def test_bf16_constants_and_masked_fill_with_inf():
    x = make([4, 8], torch.bfloat16)
    m = torch.rand(4, 8) > 0.3
    m[:, 0] = True
    check(
        lambda a, b: (a.masked_fill(~b, float("-inf")).softmax(-1), a * 0.1 + 3.3, torch.full_like(a, 1.7)),
        x,
        m,
        tol=TOL[torch.bfloat16],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_index_put_with_a_boolean_mask(dtype):
    """``x[mask] = v`` / ``+= v`` with one mask over leading dims and ``v`` the same for every
    selected row is pointwise (any dtype); ``v`` with a row per True falls back."""
    x = make([5, 4], dtype)
    m = torch.tensor([True, True, False, True, False])
    v = make([4], dtype)
    for acc in (False, True):
        check(lambda a, b, c: torch.index_put(a, [b], c, accumulate=acc), x, m, v, exact=True)
        check(lambda a, b, c: torch.index_put(a, [b], c[None], accumulate=acc), x, m, v, exact=True)
        check(lambda a, b, c: torch.index_put(a, [b], c[:1], accumulate=acc), x, m, v, exact=True)
        check(
            lambda a, b, c: torch.index_put(a, [b], c[0], accumulate=acc),
            x,
            m.view(5, 1).expand(5, 4).clone(),
            v,
            exact=True,
        )
    check(lambda a, b, c: torch.index_put(a, [b], c), x, m, make([3, 4], dtype), exact=True, fallbacks=1)


def test_index_put_without_accumulate_and_padding_idx_grads():
    """index_put without accumulate is a store kernel (any dtype, as no atomics are needed)."""
    x = make([5, 3])
    i = torch.tensor([4, 0])
    v = make([2, 3])
    check(lambda a, b, c: torch.index_put(a, [b], c) + 1, x, i, v)
    check(
        lambda a, b, c: torch.index_put(a, [b], c) * 2,
        make([5, 3], torch.bfloat16),
        i,
        make([3], torch.bfloat16),
        exact=True,
    )
    check(lambda a, b: a.index_copy(0, b, torch.ones(2, 3, device=a.device)), x, i)
    check(lambda a: F.max_unpool1d(*F.max_pool1d(a, 2, return_indices=True), 2), make([2, 3, 8]))
    torch._dynamo.reset()
    emb = torch.nn.Embedding(7, 4, padding_idx=0).to(DEVICE)
    ref = torch.nn.Embedding(7, 4, padding_idx=0).to(DEVICE)
    ref.load_state_dict(emb.state_dict())
    idx = to_device(torch.tensor([[0, 3, 3], [6, 0, 1]]))
    metrics.reset()
    torch.compile(emb, backend="tilefuse")(idx).sin().sum().backward()
    ref(idx).sin().sum().backward()
    torch.testing.assert_close(emb.weight.grad, ref.weight.grad)
    assert emb.weight.grad[0].abs().sum() == 0
    assert metrics.fallback_kernel_count == 0


# ------------------------------------------------------------------------------ scans


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_cumsum_cumprod(dtype):
    x = make([5, 9], dtype, layout="permuted", low=-2, high=2)
    if dtype == torch.bool:
        check(lambda a: (a.cumsum(1), a.cumsum(0)), x, exact=True)
        return
    tol = TOL.get(dtype, (0, 0))
    check(lambda a: (a.cumsum(1) * 2, a.cumsum(0), torch.cumprod(a, 1), a.cumsum(1, dtype=torch.float64)), x, tol=tol)


def test_long_float32_cumsum_is_as_accurate_as_eagers():
    """A float32 running sum over 3000-element rows at torch's default tolerances. Under Triton's
    interpreter the scan runs element after element: in float32 its error reached 2.2e-4 (eager's
    CPU kernel, which accumulates in float64: 3.8e-6), so there it accumulates in float64 too."""
    if DEVICE != "cpu":
        pytest.skip("the interpreter's scan; a GPU scans in parallel")
    torch.manual_seed(0)
    x = torch.randn(64, 3000)
    got = torch.compile(lambda a: (a.cumsum(1), a.cumprod(1)), backend="tilefuse")(x)
    ref = x.double().cumsum(1)
    assert (got[0].double() - ref).abs().max() <= 2 * (x.cumsum(1).double() - ref).abs().max()
    torch.testing.assert_close(got[0], x.cumsum(1))
    torch.testing.assert_close(got[1], x.cumprod(1))
    assert metrics.eager_graph_count == 0 and metrics.fallback_kernel_count == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logcumsumexp_with_infinities_and_nan(dtype):
    x = make([6, 37], dtype, layout="permuted", low=-20, high=20)
    x[0, :6] = torch.tensor([float("-inf"), float("-inf"), 2.0, float("inf"), float("inf"), 1.0], dtype=dtype)
    x[1, 3] = float("nan")
    x[2, :] = float("-inf")
    tol = TOL.get(dtype, (1e-5, 1e-5))
    check(lambda a: (torch.logcumsumexp(a, 1) * 2, torch.logcumsumexp(a, 0)), x, tol=tol)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_integer_pow_with_a_tensor_exponent_is_torchs_powi(dtype):
    """An integer ``a ** b`` with a tensor exponent (it ran as the aten op): square-and-multiply
    over the exponent type's bits, products wrapping as eager's, and torch's rule for negative
    exponents (1, ±1 for a == -1, else 0). Brute force against eager over every sign and
    exponents up to 70 (wrapping), exact."""
    gen = torch.Generator().manual_seed(0)
    lo = 0 if dtype == torch.uint8 else -9
    a = torch.randint(lo, 10, (40, 7), generator=gen).to(dtype)
    b = torch.randint(lo, 71 if dtype != torch.int8 else 71, (40, 7), generator=gen).to(dtype)
    a[0, :4] = torch.tensor([0, 1, 0, 1]).to(dtype)
    check(lambda x, y: x**y, a, b, exact=True)
    check(lambda x, y: 3 ** y.abs() + x.t().contiguous().t() ** 2, a, b, exact=True)


def test_per_sample_gradients_with_vmap_of_grad():
    """functorch's ``vmap(grad(f))`` traces ``_to_copy`` of a Python number (the constant 2.5 as
    a float32 tensor): a 0-d tensor of the node's dtype (a lowering that takes every input for a
    tensor raises AttributeError)."""
    from torch.func import grad, vmap

    w, x = make([3]), make([5, 3])
    check(lambda w, x: vmap(grad(lambda w, x: (x @ w) * 2.5), in_dims=(None, 0))(w, x), w, x)
    check(lambda w, x: vmap(grad(lambda w, x: ((x @ w) - 1).pow(2)), in_dims=(None, 0))(w, x), w, x, tol=(1e-4, 1e-5))


def test_cumsum_fuses_with_reduction():
    x = make([4, 30])
    check(lambda a: a.cumsum(1) / a.sum(1, keepdim=True), x, kernels=1, tol=(1e-5, 1e-5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_long_scans_loop_over_chunks_with_a_carry(dtype):
    """Rows longer than the persistent threshold (4096) are scanned chunk by chunk, each chunk's
    scan combined with a per-row carry of the chunks before it (``TritonKernel.codegen_scan``);
    they ran as aten kernels before. Along the contiguous dim (chunks of 1024-2048) and across
    rows (an outer scan: chunks of 8-32), fused with a reduction of the same rows; against
    eager, no fallback, one kernel per graph."""
    x = make([3, 5000], dtype, low=-2, high=2)
    tol = TOL.get(dtype, (0, 0)) if dtype != torch.float32 else (1e-4, 1e-5)
    if dtype == torch.float16:
        tol = (0.3, 2e-3)  # a float16 running sum of 5000 values rounded once (eager: after every add)
    check(lambda a: a.cumsum(1), x, kernels=1, tol=tol)
    across = lambda a: a.t().contiguous().cumsum(0)  # noqa: E731
    if dtype != torch.float16:
        check(across, x, tol=tol, kernels=1)
    else:
        # CUDA eager adds half-precision columns in half precision, one rounding per row (on the
        # H200 its sums drifted by up to 1.1 from the exact ones); the reference is the float32
        # scan rounded once, which tilefuse computes (within one float16 ulp, 0.0625 below 128)
        xd = to_device(x)
        metrics.reset()
        got = torch.compile(across, backend="tilefuse")(xd)
        assert metrics.fallback_kernel_count == 0 and metrics.generated_kernel_count == 1
        torch.testing.assert_close(got, across(xd.float()).half(), atol=0.07, rtol=1e-3)
        exact = across(xd.double())
        assert (got.double() - exact).abs().max() <= (across(xd).double() - exact).abs().max() + 0.07
    if dtype.is_floating_point:
        near_one = lambda a: (a * 1e-4 + 1).cumprod(1)  # noqa: E731
        check(near_one, x, kernels=1, tol=(tol[0] * 10, 1e-3))
        check(
            lambda a: (a.cumsum(1) / a.sum(1, keepdim=True).abs(), torch.logcumsumexp(a, 1)), x, tol=(tol[0] * 10, 1e-3)
        )


@pytest.mark.parametrize("n", [20, 5000])
def test_scan_with_a_narrowing_dtype_rounds_the_input_first(n):
    """``cumsum(dtype=float16)`` casts the input to float16 and then scans (torch's rule); the
    scan must not skip that rounding and sum float32 values eager never sees (3002 for eager's
    3000 after 3000 values of 1.0004; int32 2049 became 2050, not 2048). Short
    (persistent) and long (looped) rows; cumprod and bfloat16 alike. The reference is torch's
    rule with a float32 accumulator rounded once: CUDA eager adds half precision in half
    precision (its sum of 5000 float16 ones stops at 2048), CPU eager accumulates in float32."""

    def check_ref(fn, ref, x, tol):
        xd = to_device(x)
        metrics.reset()
        got = torch.compile(fn, backend="tilefuse")(xd)
        assert metrics.fallback_kernel_count == 0 and metrics.generated_kernel_count == 1
        torch.testing.assert_close(got, ref(xd), atol=tol[0], rtol=tol[1])
        return got

    ints = torch.tensor([2049, 1], dtype=torch.int32)
    got = check_ref(
        lambda a: a.cumsum(0, dtype=torch.float16), lambda a: a.half().float().cumsum(0).half(), ints, (0, 0)
    )
    assert got.tolist() == [2048.0, 2048.0]
    x = torch.full((n,), 1.0004)
    got = check_ref(lambda a: a.cumsum(0, dtype=torch.float16), lambda a: a.half().float().cumsum(0).half(), x, (0, 0))
    assert got[-1].item() == float(n)  # 1.0004 rounds to 1 in float16; n ones sum exactly
    y = make([3, n], low=0.5, high=1.5)
    check_ref(
        lambda a: a.cumsum(1, dtype=torch.bfloat16),
        lambda a: a.bfloat16().float().cumsum(1).bfloat16(),
        y,
        TOL[torch.bfloat16],
    )
    check_ref(
        lambda a: (a * 1e-3 + 1).cumprod(1, dtype=torch.float16),
        lambda a: (a * 1e-3 + 1).half().float().cumprod(1).half(),
        y,
        (1e-3, 2e-3),
    )
    z = make([n, 2], torch.float16)
    check_ref(
        lambda a: a.cumsum(0, dtype=torch.bfloat16),
        lambda a: a.bfloat16().float().cumsum(0).bfloat16(),
        z,
        TOL[torch.bfloat16],
    )
    if DEVICE == "cpu":  # eager itself, where it accumulates in float32
        check(lambda a: a.cumsum(0, dtype=torch.float16), x, tol=(0, 0))


def test_long_float32_logcumsumexp_and_cumprod_match_eager_at_default_tolerance():
    """Under the interpreter float32 scans combine in float64, as eager's CPU kernels: a
    logcumsumexp down 5000 rows was 2.3e-5 from the exact result in float32 (eager 4.8e-7),
    beyond assert_close's default 1e-5. On a GPU the combine is float32."""
    tol = (1e-5, 1.3e-6) if DEVICE == "cpu" else (1e-4, 1e-5)
    check(lambda a: torch.logcumsumexp(a, 0), make([5000, 3]), kernels=1, tol=tol)
    check(lambda a: (a * 1e-4 + 1).cumprod(0), make([5000, 3]), kernels=1, tol=tol)


def test_scan_to_bool_raises_as_eager():
    """Eager has no bool scan kernel: ``cumsum(dtype=torch.bool)`` runs the aten op, which raises
    eager's error (it returned a bool tensor)."""
    x = to_device(make([4, 5]))
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        x.cumsum(0, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        torch.compile(lambda a: a.cumsum(0, dtype=torch.bool), backend="tilefuse")(x)


def test_long_logcumsumexp_carries_infinities_and_nan_across_chunks():
    """A row whose first 3000 values are -inf (the carry stays -inf through whole chunks), one
    with a NaN in its first chunk (NaN from there on), one with +inf in its last chunk."""
    x = make([3, 5000], low=-20, high=20)
    x[0, :3000] = float("-inf")
    x[1, 100] = float("nan")
    x[2, 4500] = float("inf")
    check(lambda a: torch.logcumsumexp(a, 1), x, kernels=1, tol=(1e-4, 1e-5))


def test_cumsum_backward():
    x = to_device(make([3, 7])).requires_grad_()
    y = x.detach().clone().requires_grad_()
    w = torch.arange(7.0, device=DEVICE)
    metrics.reset()
    (torch.compile(lambda a: a.cumsum(1).sin(), backend="tilefuse")(x) * w).sum().backward()
    (y.cumsum(1).sin() * w).sum().backward()
    torch.testing.assert_close(x.grad, y.grad)
    assert metrics.fallback_kernel_count == 0


# ------------------------------------------------------------------------------ OpInfo sweep regressions
# Cases the OpInfo sweep (tests/test_opinfo.py, scripts/op_coverage.py) found wrong or crashing.


def test_empty_reshape_and_repeat_of_an_empty_tensor():
    """A view of an empty tensor must not build a ``% 0`` index (it raised ValueError)."""
    x = make([0, 1, 5, 5])
    check(lambda a: F.unfold(a, 2), x)
    check(lambda a: (a.reshape(0, 25) + 1, a.repeat(2, 1, 1, 1) * 2), x)
    check(lambda a: a.repeat(3, 0) + 1, make([2, 3]))


def test_constant_index_expression_in_a_one_element_kernel():
    """A kernel of one element simplifies its index to a constant; it must still be a tensor
    (multi_margin_loss on 0-d inputs crashed the interpreter)."""
    x, t = make([]), torch.tensor(0)
    check(lambda a, b: F.multi_margin_loss(a, b), x, t)
    check(lambda a: torch.arange(1, device=a.device) + a, make([1]))


def test_complex_intermediates_fall_back():
    """Ops on complex tensors run as aten ops (generated kernels hold no complex dtype)."""
    x = make([4, 6])
    got = check(lambda a: torch.view_as_real(torch.fft.rfft(a).permute(1, 0)) * 2, x, fallbacks=3)
    assert got.shape == (4, 4, 2)


def test_kernel_dtype_check_reads_plain_tensors_tuples_and_inputs():
    """``graph._kernel_dtypes_only``: a node is generated only when every tensor it
    produces (a tensor, or tensors in a tuple / list) and every tensor it reads has a kernel dtype."""
    from tilefuse.graph import _kernel_dtypes_only

    g = torch.fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    n = g.call_function(torch.add, (a, b))
    f32, c64 = torch.empty(2), torch.empty(2, dtype=torch.complex64)
    cases = [
        ((f32, f32, f32), True),
        ((f32, c64, f32), False),  # reads a complex input
        ((c64, f32, f32), False),  # produces a complex tensor
        (((f32, c64), f32, f32), False),  # a multi-output node, one complex result
        (([f32, f32], f32, None), True),  # a list result; an input without a tensor value
        ((f32, 3, torch.empty(2, dtype=torch.uint32)), False),
    ]
    for (out, va, vb), want in cases:
        n.meta["val"], a.meta["val"], b.meta["val"] = out, va, vb
        assert _kernel_dtypes_only(n) is want, (out, va, vb)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_pow_negative_base_and_special_values(dtype):
    """Under the interpreter pow is computed from exp/log: a negative base with a non-integer
    exponent is NaN, with an odd integer exponent negative; pow(1, nan) = pow(nan, 0) = 1."""
    a = torch.tensor([-1.7658, -2.0, -2.0, 0.0, 1.0, float("nan"), 3.0, 0.0, -1.0, -0.0, -0.0, 0.5], dtype=dtype)
    b = torch.tensor(
        [-8.4784, 3.0, 2.0, 2.5, float("nan"), 0.0, -1.5, -1.0, float("inf"), -3.0, 3.0, float("-inf")], dtype=dtype
    )
    check(lambda x, y: torch.pow(x, y), a, b, tol=TOL[dtype])
    check(lambda y: 2.5**y, b, tol=TOL[dtype])
    check(lambda x: torch.pow(x, 1.3), a, tol=TOL[dtype])
    # infinite and zero bases against every kind of exponent, the sign of a zero result included:
    # pow(-inf, 1.5) = inf and pow(-inf, -1.5) = 0 (were NaN), pow(-inf, -3) = -0.0 (was +0.0)
    base = torch.tensor([float("-inf"), float("inf"), -0.0, 0.0], dtype=dtype)[:, None]
    expo = torch.tensor([1.5, -1.5, 1 / 3, -3.0, 3.0, 2.0, -2.0, float("inf"), float("-inf")], dtype=dtype)
    got = check(lambda x, y: torch.pow(x, y), base, expo, tol=TOL[dtype])
    want = torch.pow(base, expo)
    assert torch.equal(torch.signbit(got.cpu()), torch.signbit(want)), (got, want)
    got = check(lambda x: torch.pow(x, -3), base, tol=TOL[dtype])
    assert torch.equal(torch.signbit(got.cpu()), torch.signbit(torch.pow(base, -3))), got


def test_integer_pow_with_a_constant_exponent():
    a = torch.tensor([2, -3, 4, 0, 7])
    check(lambda x: torch.pow(x, 3), a, exact=True)  # small: repeated multiplication
    check(lambda x: torch.pow(x, 41), a, exact=True)  # large: powi (wrapping products)
    with pytest.raises(Exception, match="negative integer powers"):  # eager's error, from the aten op
        torch.compile(lambda x: torch.pow(x, -2), backend="tilefuse")(to_device(a))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int32])
def test_bool_to_other_dtypes(dtype):
    """bool -> bf16 went through int8 bits under the interpreter (True became 9e-41)."""
    x = torch.tensor([[True, False, True], [False, True, True]])
    check(lambda a: a.to(dtype) * 3, x, exact=True)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("k, s, p", [(2, 2, 0), (3, 2, 1), ((3, 2), (2, 1), (1, 0))])
def test_avg_pool2d(k, s, p, ceil_mode, count_include_pad):
    x = make([2, 3, 7, 6])
    check(lambda a: F.avg_pool2d(a, k, s, p, ceil_mode, count_include_pad), x, kernels=1)


def test_avg_pool2d_divisor_override_low_precision_and_integers():
    check(lambda a: F.avg_pool2d(a, 3, 2, 1, divisor_override=5), make([1, 2, 6, 6]), kernels=1)
    check(lambda a: F.avg_pool2d(a, 2), make([2, 5, 5], torch.bfloat16), tol=TOL[torch.bfloat16])
    if DEVICE == "cpu":  # aten has no integer avg_pool2d on CUDA, so there is nothing to compare with
        xi = torch.randint(-20, 20, (1, 2, 5, 6))
        check(lambda a: F.avg_pool2d(a, 2, 1, 1, ceil_mode=True, count_include_pad=False), xi, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_max_pool2d_ceil_mode_and_integers(dtype):
    if DEVICE != "cpu" and not dtype.is_floating_point:
        pytest.skip("aten has no integer max_pool2d on CUDA to compare with")
    x = make([2, 3, 7, 6], dtype, low=-50, high=50)
    check(lambda a: F.max_pool2d(a, 3, 2, 1, ceil_mode=True, return_indices=True), x, exact=True)
    check(lambda a: F.max_pool2d(a, 2, 2, 0, ceil_mode=True), x, exact=True)


def test_copy_broadcasts_and_converts():
    """``aten.copy`` (functionalized ``copy_``) lowers natively."""

    def f(a, b):
        out = torch.zeros(3, 4, dtype=torch.float16, device=a.device)
        out.copy_(b)
        return out * 2, a.clone().copy_(b) + 1

    check(f, make([3, 4]), make([4], torch.int64), tol=TOL[torch.float16])


SPECIAL_VALUES = [
    0.0,
    -0.0,
    1e-30,
    -3e-7,
    0.2,
    -0.4142,
    0.5,
    -0.99,
    1.0,
    -1.0,
    1.5,
    -7.25,
    1e4,
    -3e30,
    float("inf"),
    float("-inf"),
    float("nan"),
]


@pytest.mark.parametrize("name", ["atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inverse_trig_and_hyperbolic(name, dtype):
    """Under the interpreter these are float64 formulas (no libdevice): compared with eager on
    special values (signed zeros, +-1, infinities, NaN) and a random spread."""
    x = torch.cat([torch.tensor(SPECIAL_VALUES), torch.randn(40) * 3]).to(dtype)
    fn = getattr(torch, name)
    check(lambda a: fn(a), x, tol=TOL[dtype])
    check(lambda a: fn(a), torch.arange(-4, 5), tol=TOL[torch.float32])  # int -> float


def test_atan2_quadrants_zeros_and_infinities():
    v = torch.tensor(SPECIAL_VALUES)
    y, x = v[:, None].expand(17, 17), v[None, :].expand(17, 17)
    check(lambda a, b: torch.atan2(a, b), y.contiguous(), x.contiguous())


def test_float64_inverse_trig_falls_back_under_the_interpreter():
    """The float64 formulas are not exact enough for a float64 result: aten computes it."""
    if DEVICE != "cpu":
        pytest.skip("on the GPU libdevice computes float64 natively")
    check(lambda a: torch.atan(a) + 1, torch.randn(8, dtype=torch.float64), tol=TOL[torch.float64], fallbacks=1)


def test_signbit_copysign_hypot_angle():
    v = torch.tensor(SPECIAL_VALUES)
    w = v.flip(0)
    check(lambda a: torch.signbit(a), v, exact=True)
    check(lambda a: torch.signbit(a), torch.tensor([-3, 0, 5]), exact=True)
    check(lambda a, b: torch.copysign(a, b), v, w)
    check(lambda a, b: torch.hypot(a, b), v, w)
    check(lambda a: torch.angle(a), v)
    check(lambda a: torch.angle(a), torch.tensor([-3, 0, 5]))


@pytest.mark.parametrize("decimals", [0, 2, -1])
def test_round_decimals(decimals):
    x = torch.tensor([0.125, -2.5, 3.14159, 1234.5678, -0.005, 15.0, float("nan")])
    # on the GPU, x * 10**d / 10**d may differ from aten's rounding by one ulp (3e-7 relative)
    check(lambda a: torch.round(a, decimals=decimals), x, exact=DEVICE == "cpu", tol=(0, 3e-7))


def test_unfold_view():
    x = make([4, 9])
    check(lambda a: a.unfold(1, 3, 2) * 2, x, kernels=1)
    check(lambda a: a.unfold(0, 4, 1).sum(-1), x)


@pytest.mark.parametrize("ord", [0, 1.5, 3, 2])
def test_vector_norm_any_order(ord):
    x = make([3, 7])
    x[0, 2] = 0
    check(lambda a: torch.linalg.vector_norm(a, ord, dim=1), x, tol=(1e-5, 1e-5))
    check(lambda a, b: torch.dist(a, b, ord), x, make([7]), tol=(1e-5, 1e-5))


@pytest.mark.parametrize("offset, d1, d2", [(0, 0, 1), (1, 0, 1), (-2, 1, 2), (1, 2, 0)])
def test_diagonal_scatter(offset, d1, d2):
    x = make([4, 5, 3])
    src = torch.diagonal(x, offset, d1, d2).clone().normal_()
    check(lambda a, b: torch.diagonal_scatter(a, b, offset, d1, d2), x, src, exact=True)


@pytest.mark.parametrize("offset, d1, d2", [(1, 0, 1), (-2, 0, 1), (2, 2, 0)])
def test_diagonal_scatter_dynamic_is_native(offset, d1, d2):
    # under dynamic=True the diagonal's length is src's symbolic last size: one graph, no aten
    # fallback, exact for three shapes
    fn = lambda a, b: torch.diagonal_scatter(a, b, offset, d1, d2) * 2  # noqa: E731
    metrics.reset()
    c = torch.compile(fn, backend="tilefuse", dynamic=True)
    for shape in [(5, 7, 4), (6, 9, 3), (4, 4, 5)]:
        x = to_device(make(shape))
        src = torch.diagonal(x, offset, d1, d2).clone().normal_()
        torch.testing.assert_close(c(x, src), fn(x, src), atol=0, rtol=0)
    assert metrics.fallback_kernel_count == 0 and metrics.eager_graph_count == 0


def test_index_select_of_a_0d_tensor():
    check(lambda a, i: a.index_select(0, i) * 2, torch.tensor(3.5), torch.tensor([0]), exact=True)


def test_as_strided_within_a_contiguous_tensor_is_a_view():
    """as_strided reading only the tensor's own elements (group_norm's graphs) is native; one that
    reads past them depends on memory beyond the tensor and runs as the aten op."""
    x = make([1, 6, 3])
    check(lambda a, w, b: F.group_norm(a, 2, w, b, 1e-5), x, make([6]), make([6]), tol=(2e-5, 2e-5))
    check(lambda a: torch.as_strided(a * 2, (3, 2), (2, 3), 1) + 1, make([12]), exact=True)
    # a slice of an input may read the rest of the input's elements: still a view of the input
    base = make([20])
    check(lambda a: torch.as_strided(a[:10], (2, 2), (1, 2), 12) + 1, base, exact=True)
    # past the input's own elements (the input is a view of a larger tensor): the aten op
    big = make([30])
    check(lambda a: torch.as_strided(a[:10], (2, 2), (1, 2), 22) + 1, big[3:23], exact=True, fallbacks=1)
    # inside an input with a storage offset
    check(lambda a: torch.as_strided(a, (2, 2), (1, 3), 5) * 2, big[3:23], exact=True)


@pytest.mark.parametrize("offset", [0, 1, 5])
def test_as_strided_of_a_permuted_intermediate_reads_eagers_storage_order(offset):
    """Eager computes ``x * 2`` of a transposed (or channels-last) ``x`` in ``x``'s layout, and
    ``as_strided`` reads that storage: the view must follow the value's eager strides, not the
    contiguous layout tilefuse might store it in (the aten op on a contiguous ``x * 2`` reads
    other elements: ``[0, 16, 8, 2]`` for eager's ``[0, 4, 2, 6]``). Native (no fallback) for
    dense layouts; brute force: eager's own values."""
    x = torch.arange(12.0).view(3, 4).t()
    check(lambda a: (a * 2).as_strided((2, 2), (1, 2), offset) + 1, x, exact=True)
    check(lambda a: (a * 2).as_strided((3, 2), (2, 1), offset), x, exact=True)
    nhwc = torch.arange(2 * 3 * 4 * 5.0).view(2, 4, 5, 3).permute(0, 3, 1, 2)  # channels-last
    check(lambda a: (a - 1).as_strided((4, 6), (7, 2), offset) * 3, nhwc, exact=True)
    # a dense layout with a size-1 dim of any stride
    odd = torch.arange(6.0).view(2, 3).t().unsqueeze(1)
    check(lambda a: (a + 1).as_strided((2, 2), (1, 3), offset // 5), odd, exact=True)


@pytest.mark.parametrize("name", ["slice_step", "select", "split", "permute_slice", "expand", "input_slice"])
def test_as_strided_of_a_view_of_a_permuted_intermediate_reads_its_bases_storage(name):
    """``as_strided`` of a view (slice, select, split, permute, expand) of a computed value reads
    the storage of that value, laid out by the value's eager strides (transposed here): the
    lowering follows the FX view chain back to the value (``lowering.strided._storage_base``), not
    tilefuse's contiguous ``x * 2``. Brute force: eager's own values; no fallback kernel."""
    fns = {
        "slice_step": lambda a: (a * 2)[:, ::2].as_strided((3, 2), (1, 5), 1) + 1,
        "select": lambda a: (a * 2)[1].as_strided((2, 2), (3, 1), 2) + 1,
        "split": lambda a: (a * 2).split(3, 1)[1].as_strided((2, 3), (2, 7)) + 1,
        "permute_slice": lambda a: (a * 2).t()[1:].as_strided((4,), (5,), 9),
        "expand": lambda a: (a * 2)[:, :1].expand(8, 4).as_strided((5,), (3,), 2),
        "input_slice": lambda a: a[:, 1::2].as_strided((3, 3), (2, 9), 4) - 1,
    }
    x = torch.arange(48.0).view(6, 8).t()
    check(fns[name], x, exact=True)


@pytest.mark.parametrize("name", ["dense", "slice_step", "after_mm", "graph_output", "input_slice"])
def test_as_strided_with_symbolic_sizes_reads_eagers_storage(name):
    """With ``dynamic=True`` the lowering cannot prove the view's reads in range, so ``as_strided``
    runs as the aten op, on the storage owner realized in its eager (here transposed) layout
    (``lowering.strided._in_eager_layout``: laid out so before it is realized, or copied when an
    extern kernel realized it first) or on the graph input itself, not on tilefuse's contiguous
    ``x * 2``. Brute force: eager's own values and strides."""
    fns = {
        "dense": lambda a: (a * 2).as_strided((2, 2), (1, 2), 1) + 1,
        "slice_step": lambda a: (a * 2)[:, ::2].as_strided((3, 2), (1, 5), 1) + 1,
        "after_mm": lambda a: (
            (a * 2) @ torch.ones(6, 3, device=a.device),
            (a * 2)[:, ::2].as_strided((3, 2), (1, 5), 1) + 1,
        ),
        "graph_output": lambda a: (a * 2, (a * 2)[1].as_strided((2, 2), (3, 1), 2) + 1),
        "input_slice": lambda a: a[:, 1::2].as_strided((3, 3), (2, 9), 4) - 1,
    }
    fn = fns[name]
    x = to_device(torch.arange(48.0).view(6, 8).t())
    metrics.reset()
    got = torch.compile(fn, backend="tilefuse", dynamic=True)(x)
    want = fn(x)
    assert metrics.symbolic_graph_count == 1
    assert metrics.fallback_kernel_count == 1
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        torch.testing.assert_close(g, w, atol=0, rtol=0)
        assert g.stride() == w.stride()


def _fill_through_as_strided(a):
    y = a * 2
    y.as_strided((2, 2), (1, 4), 1).fill_(-1.0)
    return y


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name", ["scatter", "inplace_fill", "input", "after_mm"])
def test_as_strided_scatter_writes_eagers_storage_positions(name, dynamic):
    """``as_strided_scatter`` (functionalization's form of an in-place write through an
    ``as_strided`` view) clones its input and writes at storage positions of the clone, so the
    input must have eager's (here transposed) strides: otherwise it puts ``-1`` at ``(0, 2),
    (1, 1)`` … of tilefuse's contiguous ``x * 2`` (``[0, -1, -1, 36]`` for eager's
    ``[0, -1, 24, 36]``). Brute force: eager's own values and strides."""
    fns = {
        "scatter": lambda a: torch.as_strided_scatter(
            a * 2, torch.full((2, 2), -1.0, device=a.device), (2, 2), (1, 4), 1
        ),
        "inplace_fill": _fill_through_as_strided,
        "input": lambda a: (
            torch.as_strided_scatter(a, torch.full((2, 3), -1.0, device=a.device), (2, 3), (3, 1), 2) + 1
        ),
        "after_mm": lambda a: ((a * 2) @ torch.ones(4, 3, device=a.device), _fill_through_as_strided(a)),
    }
    fn = fns[name]
    x = to_device(torch.arange(24.0).view(4, 6).t())
    metrics.reset()
    got = torch.compile(fn, backend="tilefuse", dynamic=dynamic)(x)
    want = fn(x)
    # with symbolic sizes the in-place fill's as_strided (read for full_like) is the aten op too
    assert metrics.fallback_kernel_count == (2 if dynamic and name in ("inplace_fill", "after_mm") else 1)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        torch.testing.assert_close(g, w, atol=0, rtol=0)
        assert g.stride() == w.stride()


_DTYPE_VIEW_CHAINS = {
    # a slice of a computed value, viewed as int32, read by as_strided over the whole storage
    "gap": lambda x: (x * 2)[:, :7].view(torch.int32).as_strided((6, 8), (8, 1), 0),
    "step": lambda x: (x * 2)[:, ::2].view(torch.int32).as_strided((4, 4), (1, 4), 0),
    "after_slice": lambda x: (x * 2)[1:].view(torch.int32).as_strided((2, 3), (1, 2), 8),
    "before_slice": lambda x: (x * 2)[1:].view(torch.int32).as_strided((2, 3), (1, 2), 0),
    "input": lambda x: x[1:].view(torch.int32).as_strided((2, 3), (1, 2), 0) + 1,
}


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", sorted(_DTYPE_VIEW_CHAINS))
def test_as_strided_through_a_dtype_view_of_the_same_size_reads_the_owners_storage(name, layout, dynamic):
    """A ``view(dtype)`` of the same element size keeps the storage's positions: the view chain
    continues through it to the storage's owner, read with its bits reinterpreted (a chain that
    stops at the dtype view, whose tilefuse value is a bitcast copy of the slice only, reads
    garbage, wrong elements or out of bounds). Brute force: eager's bits."""
    fn = _DTYPE_VIEW_CHAINS[name]
    x = torch.arange(48.0).view(6, 8) if layout == "contiguous" else torch.arange(48.0).view(8, 6).t()
    x = to_device(x)
    metrics.reset()
    got = torch.compile(fn, backend="tilefuse", dynamic=dynamic)(x)
    want = fn(x)
    assert torch.equal(got, want), (got, want)
    assert metrics.eager_graph_count == 0


def test_as_strided_of_a_non_dense_input_through_a_dtype_view_reads_the_inputs_storage():
    """The input is a strided view of a larger tensor: the aten op reads its storage, through an
    aliasing aten ``view(dtype)`` of the input (tilefuse's bitcast copies the elements only)."""
    big = torch.arange(96.0).view(6, 16)
    check(lambda a: a.view(torch.int32).as_strided((3, 4), (2, 16), 1) + 1, big[:, ::2], exact=True, fallbacks=2)


def test_as_strided_through_a_dtype_view_of_another_size_runs_the_graph_eagerly():
    """Through a view to another element size, storage positions count other units: that graph
    runs eagerly with one warning (an error with ``fallback_on_error=False``)."""
    x = to_device(torch.arange(24, dtype=torch.int32).view(4, 6))
    fn = lambda a: (a + 1).view(torch.int16)[:, ::2].as_strided((3, 2), (1, 4), 1) * 2  # noqa: E731
    with pytest.raises(Exception, match="another element size"):
        torch.compile(fn, backend="tilefuse")(x)
    torch._dynamo.reset()
    metrics.reset()
    with config.patch(fallback_on_error=True), pytest.warns(UserWarning, match="another element size"):
        got = torch.compile(fn, backend="tilefuse")(x)
    assert torch.equal(got, fn(x)) and metrics.eager_graph_count == 1


_BITCAST_PAIRS = [
    (torch.float32, torch.int32),
    (torch.int32, torch.float32),
    (torch.float16, torch.int16),
    (torch.int16, torch.float16),
    (torch.bfloat16, torch.int16),
    (torch.int16, torch.bfloat16),
    (torch.bfloat16, torch.float16),
    (torch.float16, torch.bfloat16),
    (torch.float64, torch.int64),
    (torch.int64, torch.float64),
    (torch.int8, torch.uint8),
    (torch.uint8, torch.int8),
]


@pytest.mark.parametrize("src, dst", _BITCAST_PAIRS, ids=[f"{a}-{b}".replace("torch.", "") for a, b in _BITCAST_PAIRS])
def test_view_as_a_dtype_of_the_same_size_is_a_bitcast(src, dst):
    """``x.view(dtype)`` of the same element size reinterprets each element's bits in the kernel
    (``ops.bitcast``), of a computed and a transposed value; brute force: every result's bits
    equal eager's, NaN, infinities, -0.0 and subnormals among the floats, every bit pattern's
    neighbourhood (random over the whole range) among the integers."""
    gen = torch.Generator().manual_seed(0)
    if src.is_floating_point:
        x = (torch.randn(6, 9, generator=gen) * 100).to(src)
        x[0, :5] = torch.tensor([math.nan, -math.inf, math.inf, -0.0, torch.finfo(src).tiny / 4]).to(src)
    else:
        info = torch.iinfo(src)
        lo, hi = max(info.min, -(2**62)), min(info.max, 2**62)
        x = torch.randint(lo, hi, (6, 9), generator=gen, dtype=torch.int64).to(src)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

    def bits(t):
        return t.contiguous().view(ints[t.dtype.itemsize])

    # bit-preserving ops around the views (a copy of a transposed value; negation would do, but
    # the interpreter's x * -1.0 keeps a NaN's sign where the GPU's fneg and eager flip it)
    for fn in (
        lambda a: a.view(dst),
        lambda a: a.t().contiguous().view(dst),
        lambda a: a.t().view(dst).view(src).contiguous(),
    ):
        metrics.reset()
        xs = to_device(x)
        got = torch.compile(fn, backend="tilefuse")(xs)
        want = fn(xs)
        assert got.dtype == want.dtype and got.stride() == want.stride()
        assert torch.equal(bits(got), bits(want)), (bits(got), bits(want))
        assert metrics.fallback_kernel_count == 0


def test_dense_layout_matches_torchs_own_test():
    """``lowering.strided._dense_layout`` against torch's ``is_non_overlapping_and_dense`` (brute force
    over small sizes and strides)."""
    import itertools

    from torch._prims_common import is_non_overlapping_and_dense_or_false
    from tilefuse.lowering.strided import _dense_layout

    for size in itertools.product([0, 1, 2, 3], repeat=2):
        for stride in itertools.product([0, 1, 2, 3, 6], repeat=2):
            t = torch.empty(0).as_strided(size, stride) if 0 in size else torch.empty(64).as_strided(size, stride)
            assert _dense_layout(list(size), list(stride)) == is_non_overlapping_and_dense_or_false(t), (size, stride)


def test_kernel_whose_values_are_all_unused_is_not_launched():
    """An empty adaptive pool computes index tensors read only by an empty buffer: no kernel."""
    check(lambda a: F.adaptive_avg_pool1d(a, 5), make([0, 8, 7]), kernels=0)


def test_embedding_bag_unused_outputs_are_not_checked():
    """aten's CPU embedding_bag leaves outputs nobody reads empty where the meta kernel sizes
    them; only outputs that are read are checked against their expected shape."""
    w, idx, off = make([10, 3], torch.bfloat16), torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 3])
    check(lambda a, i, o: F.embedding_bag(i, a, o, mode="sum"), w, idx, off, tol=TOL[torch.bfloat16], fallbacks=1)


def test_scatter_reduce_add_and_multiply():
    x, idx = make([4, 5]), torch.tensor([[0, 1, 0], [3, 3, 3]])
    check(lambda a, i, s: a.scatter(0, i, s, reduce="add"), x, idx, make([2, 3]), tol=(1e-5, 1e-5))
    check(lambda a, i: a.scatter(1, i, 2.0, reduce="add"), x, idx, tol=(1e-5, 1e-5))
    check(lambda a, i, s: a.scatter(0, i, s, reduce="multiply"), x, idx, make([2, 3]))
    check(lambda a, i: a.scatter(1, i, -2.0, reduce="multiply"), x, idx)
    xi = make([4, 5], torch.int64, low=-50, high=50)
    check(
        lambda a, i, s: a.scatter(0, i, s, reduce="multiply"),
        xi,
        idx,
        make([2, 3], torch.int64, low=-50, high=50),
        exact=True,
    )


SCATTER_REDUCE_NATIVE = {  # reduce -> dtypes that lower natively (the rest fall back to aten)
    "sum": (torch.float32, torch.int64),
    "mean": (torch.float32, torch.int64),
    "amax": (torch.float32, torch.int64, torch.bfloat16),
    "amin": (torch.float32, torch.int64, torch.bfloat16),
    "prod": (torch.float32, torch.int64, torch.bfloat16),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_two(reduce, include_self, dtype):
    """scatter_reduce along a negative dim with repeated indices, an index smaller than ``src``
    and rows no index points to (which keep ``x`` also when ``include_self=False``)."""
    x = make([5, 6], dtype, low=-9, high=9)
    idx = torch.tensor([[0, 4, 0, 0], [2, 2, 0, 4], [4, 4, 4, 4]])
    src = make([3, 5], dtype, low=-9, high=9)
    exact = reduce in ("amax", "amin") or not dtype.is_floating_point
    check(
        lambda a, i, s: a.scatter_reduce(-2, i, s, reduce, include_self=include_self) * 2,
        x,
        idx,
        src,
        exact=exact,
        tol=TOL.get(dtype),
        fallbacks=0 if dtype in SCATTER_REDUCE_NATIVE[reduce] else 1,
    )


def test_scatter_reduce_integer_mean_floors_and_narrow_dtypes():
    """Integer mean divides with floor (as torch: -1/3 -> -1); amax/amin of bool, int8, uint8 and
    fp16 combine exactly in a wider dtype; float64 and int32 use their own atomics."""
    x = torch.tensor([5, -7, 9, 0])
    i = torch.tensor([0, 0, 1, 1, 3])
    s = torch.tensor([-4, -2, 3, -8, -1])
    for inc in (True, False):
        check(lambda a, b, c: a.scatter_reduce(0, b, c, "mean", include_self=inc), x, i, s, exact=True)
        check(lambda a, b, c: a.scatter_reduce(0, b, c, "mean", include_self=inc), x.int(), i, s.int(), exact=True)
    for dt in (torch.bool, torch.int8, torch.uint8, torch.float16, torch.float64, torch.int32):
        lo, hi = (0, 250) if dt == torch.uint8 else (-100, 100)
        xd, sd = make([4, 3], dt, low=lo, high=hi), make([5, 3], dt, low=lo, high=hi)
        ii = torch.tensor([[3, 0, 1], [3, 3, 1], [0, 2, 1], [3, 0, 0], [1, 1, 1]])
        for red in ("amax", "amin"):
            for inc in (True, False):
                check(lambda a, b, c: a.scatter_reduce(0, b, c, red, include_self=inc), xd, ii, sd, exact=True)
    check(
        lambda a, b, c: a.scatter_reduce(0, b, c, "sum", include_self=False),
        make([4, 3], torch.float64),
        ii,
        make([5, 3], torch.float64),
        tol=TOL[torch.float64],
    )


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_scatter_reduce_amax_amin_propagate_nan(reduce, include_self, dtype):
    """A NaN in ``src`` wins wherever it lands, whatever else lands there (positive or negative
    values, infinities, in any order); with ``include_self`` a NaN of ``x`` (positive or negative
    sign bit) is kept, otherwise a scattered-to position forgets it."""

    def exact_bits(values):  # NaN sign bits kept (a Python float -> bf16 conversion drops them)
        t = torch.tensor(values, dtype=torch.float32)
        if dtype != torch.bfloat16:
            return t.to(dtype)
        return (t.view(torch.int32) >> 16).to(torch.int16).view(torch.bfloat16)

    nan = float("nan")
    x = exact_bits([nan, -nan, nan, 1.0, -1.0, 0.0, -0.0, 2.0])
    i = torch.tensor([0, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 7, 7, 5])
    s = exact_bits(
        [3.0, -3.0, float("inf"), nan, 5.0, -5.0, nan, -nan, float("-inf"), -nan, 7.0, float("inf"), float("-inf"), 0.5]
    )
    assert torch.signbit(x[1]) and torch.signbit(s[7]) and not torch.signbit(s[6])
    check(lambda a, b, c: a.scatter_reduce(0, b, c, reduce, include_self=include_self), x, i, s, exact=True)
    # the same, every NaN given the other sign bit, and all on one target (one atomic race)
    check(
        lambda a, b, c: a.scatter_reduce(0, b, c, reduce, include_self=include_self),
        -x,
        torch.zeros(14, dtype=torch.int64),
        -s,
        exact=True,
    )
    check(
        lambda a, b, c: a.scatter_reduce(0, b, c, reduce, include_self=include_self),
        x,
        torch.full((14,), 3),
        s,
        exact=True,
    )


def test_scatter_prod_gathers_its_factors():
    """prod (and scatter reduce="multiply") has no atomic: each output multiplies the sources
    whose index names it. Index smaller than x on every dim, zeros/inf/NaN factors, int64
    products that wrap as torch's; fp16; past the size limit it falls back."""
    x = make([4, 5, 3])
    idx = torch.tensor([[[3, 0], [3, 3], [1, 0]], [[0, 0], [2, 3], [3, 3]]])
    src = make([2, 3, 2])
    src[0, 0, 0], src[1, 1, 1], src[1, 2, 0] = 0.0, float("inf"), float("nan")
    for inc in (True, False):
        check(lambda a, b, c: a.scatter_reduce(1, b, c, "prod", include_self=inc), x, idx, src, tol=(1e-5, 1e-5))
        check(
            lambda a, b, c: a.scatter_reduce(0, b.clamp(max=1), c, "prod", include_self=inc) * 3,
            x.half(),
            idx,
            src.half(),
            tol=TOL[torch.float16],
        )
    big = torch.full((4, 5, 3), 3**20)
    check(lambda a, b, c: a.scatter_reduce(1, b, c, "prod"), big, idx, torch.full((2, 3, 2), 7**11), exact=True)
    check(
        lambda a, b, c: a.scatter_reduce(1, b, c, "prod", include_self=False),
        make([4, 5, 3], torch.int8, low=-9, high=9),
        idx,
        make([2, 3, 2], torch.int8, low=-9, high=9),
        exact=True,
    )
    xl, il = make([4096, 2]), torch.randint(0, 4096, (1025, 2))
    check(lambda a, b, c: a.scatter_reduce(0, b, c, "prod"), xl, il, make([1025, 2]), fallbacks=1)


def test_bool_accumulation_is_logical_or():
    """bool scatter_add / index_put(accumulate=True) / scatter_reduce sum is an or, prod an and:
    an atomic max / min in int32."""
    x = torch.tensor([[True, False, False], [False, False, True], [True, True, False]])
    i = torch.tensor([[0, 0, 1], [0, 2, 1], [2, 0, 1], [1, 1, 1]])
    v = torch.tensor([[True, False, False], [False, True, False], [False, False, False], [True, True, True]])
    check(lambda a, b, c: a.scatter_add(0, b[:3], c[:3]), x, i, v, exact=True)
    check(lambda a, b, c: torch.index_put(a, [b[:, 0]], c, accumulate=True), x, i, v, exact=True)
    for red in ("sum", "prod", "amax", "amin"):
        for inc in (True, False):
            check(lambda a, b, c: a.scatter_reduce(0, b[:3], c, red, include_self=inc), x, i, v, exact=True)


def test_scatter_reduce_2d_dims_and_empty_index():
    x = make([3, 4, 5])
    idx = torch.tensor([[[4, 0], [4, 4]], [[1, 1], [0, 3]]])
    src = make([2, 3, 3])
    for red in ("sum", "mean", "amax", "amin"):
        check(lambda a, b, c: a.scatter_reduce(2, b, c, red, include_self=False) + 1, x, idx, src)
        check(lambda a, b, c: a.scatter_reduce(-1, b, c, red), x, idx, src)
    check(
        lambda a, b, c: a.scatter_reduce(1, b, c, "amax", include_self=False),
        x,
        torch.zeros(3, 0, 5, dtype=torch.int64),
        src,
        exact=True,
    )


@pytest.mark.parametrize("shape, out", [([2, 3, 7, 6], (3, 4)), ([3, 5, 5], (5, 2)), ([1, 2, 9, 4], (2, 1))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adaptive_max_pool2d(shape, out, dtype):
    x = make(shape, dtype, low=-50, high=50)
    check(lambda a: F.adaptive_max_pool2d(a, out, return_indices=True), x, exact=True, kernels=1)


def test_adaptive_max_pool1d_with_nan():
    x = make([2, 3, 10])
    x[0, 1, 4] = float("nan")
    check(lambda a: F.adaptive_max_pool1d(a, 4, return_indices=True), x, exact=True)


def test_static_broadcast_matches_torch_including_errors():
    """``lowering.broadcast_shapes`` on static sizes gives torch.broadcast_shapes' result, and a
    RuntimeError exactly where torch raises one (random shapes, brute force)."""
    import random

    from tilefuse.lowering import broadcast_shapes

    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randint(1, 3)
        shapes = [[rng.choice((0, 1, 1, 2, 3)) for _ in range(rng.randint(0, 3))] for _ in range(n)]
        try:
            want = list(torch.broadcast_shapes(*[tuple(s) for s in shapes]))
        except RuntimeError:
            with pytest.raises(RuntimeError, match="do not broadcast"):
                broadcast_shapes(*shapes)
            continue
        assert broadcast_shapes(*shapes) == want, shapes
