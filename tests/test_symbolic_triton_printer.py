"""The Triton printer (texpr) is floor-correct: printed expressions run inside a @triton.jit
kernel under Triton's interpreter (TRITON_INTERPRET=1, set by conftest before triton is
imported; kernels run on CPU tensors) and must equal Python's floor semantics.

Triton's integer ``//`` and ``%`` truncate toward zero (C semantics), so texpr may print them
plainly only where the dividend is provably non-negative and the divisor positive; everywhere
else it must print a floor-correct ``tl.where`` form. Each row checks which form was printed and
runs it over negative and positive values, for both index dtypes (int32 and int64).
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import pytest

assert os.environ.get("TRITON_INTERPRET") in ("0", "1") or "triton" not in sys.modules, (
    "TRITON_INTERPRET must be set before triton is imported (tests/conftest.py does this; set it "
    "to 0 on a GPU machine to run the `gpu` tests on the device)"
)
os.environ.setdefault("TRITON_INTERPRET", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilefuse import symbolic as ts  # noqa: E402

N = 64
NAMES = ["x0", "x1", "s0", "s1", "a", "b"]
x0, x1, s0, s1, a, b = (ts.sym(n) for n in NAMES)

# id -> (expression, Python oracle, plain form expected?, needs small values)
ROWS = {
    # provably non-negative operands: plain // and %
    "fd_index": (x0 // 16, lambda v: v["x0"] // 16, True, False),
    "mi_index": (ts.ModularIndexing(x0, 4, 8), lambda v: (v["x0"] // 4) % 8, True, False),
    "mod_index": (x0 % 64, lambda v: v["x0"] % 64, True, False),
    "fd_sym_divisor": (ts.FloorDiv(x0 + 64 * x1, s0), lambda v: (v["x0"] + 64 * v["x1"]) // v["s0"], True, False),
    "mi_sym": (
        ts.ModularIndexing(x0 + s0 * x1, s0, s1),
        lambda v: ((v["x0"] + v["s0"] * v["x1"]) // v["s0"]) % v["s1"],
        True,
        True,
    ),
    "c1": (ts.FloorDiv(x0 + 128 * x1, 16), lambda v: (v["x0"] + 128 * v["x1"]) // 16, True, False),
    "minmax_index": (
        ts.Min(x0, x1) + ts.Max(x0, s0),
        lambda v: min(v["x0"], v["x1"]) + max(v["x0"], v["s0"]),
        True,
        False,
    ),
    "ceildiv_index": (ts.CeilDiv(x0, 4), lambda v: -((-v["x0"]) // 4), True, False),
    "mod_sym_index": (x0 % s0, lambda v: v["x0"] % v["s0"], True, False),
    # possibly-negative operands: floor-correct forms
    "fd_neg": (ts.FloorDiv(a, 4), lambda v: v["a"] // 4, False, False),
    "fd_neg_shift": (ts.FloorDiv(a - 7, 3), lambda v: (v["a"] - 7) // 3, False, False),
    "fd_index_minus": (ts.FloorDiv(x0 - 5, 4), lambda v: (v["x0"] - 5) // 4, False, False),
    "fd_neg_divisor": (ts.FloorDiv(a, -3), lambda v: v["a"] // -3, False, False),
    "fd_index_neg_divisor": (ts.FloorDiv(x0, -3), lambda v: v["x0"] // -3, False, False),
    "fd_sign_unknown_divisor": (ts.FloorDiv(a, b), lambda v: v["a"] // v["b"], False, False),
    "fd_neg_sym_divisor": (ts.FloorDiv(a, s0), lambda v: v["a"] // v["s0"], False, False),
    "mi_neg": (ts.ModularIndexing(a, 1, 64), lambda v: v["a"] % 64, False, False),
    "mi_neg_shift": (ts.ModularIndexing(a - 3, 4, 8), lambda v: ((v["a"] - 3) // 4) % 8, False, False),
    "mi_of_fd_neg": (
        ts.ModularIndexing(ts.FloorDiv(a, 3), 1, 5),
        lambda v: (v["a"] // 3) % 5,
        False,
        False,
    ),
    "mod_neg": (a % 7, lambda v: v["a"] % 7, False, False),
    "mod_neg_sym": (a % s0, lambda v: v["a"] % v["s0"], False, False),
    "mod_sign_unknown": (ts.Mod(a, b), lambda v: v["a"] % v["b"], False, False),
    "mod_index_by_signed": (ts.Mod(x0, b), lambda v: v["x0"] % v["b"], False, False),
    "mod_neg_divisor": (a % -5, lambda v: v["a"] % -5, False, False),
    "ceildiv_neg": (ts.CeilDiv(a, 3), lambda v: -((-v["a"]) // 3), False, False),
    "fd_product": (ts.FloorDiv(x0 * a, 4), lambda v: (v["x0"] * v["a"]) // 4, False, True),
    "fd_quadratic": (ts.FloorDiv(a * a - 50, 7), lambda v: (v["a"] * v["a"] - 50) // 7, False, True),
    "fd_square": (ts.FloorDiv(a * a + 3, 7), lambda v: (v["a"] * v["a"] + 3) // 7, True, True),
    "minmax_neg": (
        ts.FloorDiv(ts.Max(a, b), 2) + ts.Min(a, -x0),
        lambda v: max(v["a"], v["b"]) // 2 + min(v["a"], -v["x0"]),
        False,
        False,
    ),
}


def _values(dtype: torch.dtype, small: bool, seed: int) -> dict[str, list[int]]:
    rng = random.Random(seed)
    big = 3_000_000_000 if dtype == torch.int64 and not small else 1000
    edge = [0, 1, -1, 2, -2, 3, -3, 4, -4, 7, -7, 63, -64, 64]
    vals: dict[str, list[int]] = {}
    vals["a"] = edge + [rng.randint(-big, big) for _ in range(N - len(edge))]
    vals["b"] = [rng.choice([-1, 1]) * rng.randint(1, 9) for _ in range(N)]
    idx_hi = 100_000_000 if dtype == torch.int64 and not small else 3000
    for n in ("x0", "x1"):
        vals[n] = [0, 1, 4, 5, 15, 16, 63, 64] + [rng.randint(0, idx_hi) for _ in range(N - 8)]
    for n in ("s0", "s1"):
        vals[n] = [rng.randint(1, 40) for _ in range(N)]
    return vals


_KERNELS: dict[tuple[str, str], object] = {}


def _kernel(tmp_path_factory, rid: str, index_dtype: str, src_expr: str):
    key = (rid, index_dtype)
    if key in _KERNELS:
        return _KERNELS[key]
    params = ", ".join(f"{n}_ptr" for n in NAMES)
    loads = "\n".join(f"    {n} = tl.load({n}_ptr + offs)" for n in NAMES)
    src = (
        "import triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\n"
        f"def kernel({params}, out_ptr, N: tl.constexpr):\n"
        "    offs = tl.arange(0, N)\n"
        f"{loads}\n"
        f"    result = ({src_expr}) + tl.zeros([N], dtype={index_dtype})\n"
        "    tl.store(out_ptr + offs, result)\n"
    )
    d = tmp_path_factory.mktemp("kernels")
    mod_name = f"tf_texpr_{rid}_{index_dtype.replace('.', '_')}"
    path = d / f"{mod_name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _KERNELS[key] = mod.kernel
    return mod.kernel


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("0", "", "false", "False")


DEVICES = [
    pytest.param("cpu", marks=pytest.mark.skipif(not _interpreting(), reason="needs TRITON_INTERPRET=1")),
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(
                _interpreting() or not torch.cuda.is_available(), reason="needs a CUDA GPU with TRITON_INTERPRET unset"
            ),
        ],
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", ["tl.int32", "tl.int64"])
@pytest.mark.parametrize("rid", list(ROWS))
def test_texpr_matches_floor_semantics(tmp_path_factory, rid, index_dtype, device):
    expr, oracle, plain, small = ROWS[rid]
    src = ts.texpr(expr, index_dtype)
    if plain:
        assert "tl.where" not in src, src
    else:
        assert "tl.where" in src, src
    dtype = torch.int32 if index_dtype == "tl.int32" else torch.int64
    vals = _values(dtype, small, seed=sum(map(ord, rid)))
    kernel = _kernel(tmp_path_factory, rid, index_dtype, src)
    tensors = [torch.tensor(vals[n], dtype=dtype, device=device) for n in NAMES]
    out = torch.empty(N, dtype=dtype, device=device)
    kernel[(1,)](*tensors, out, N=N)
    got = out.cpu().tolist()
    for i in range(N):
        env = {n: vals[n][i] for n in NAMES}
        want = oracle(env)
        assert expr.evaluate(env) == want, (rid, env)
        assert got[i] == want, (rid, src, env, got[i], want)


@pytest.mark.skipif(not _interpreting(), reason="checks the interpreter")
def test_interpreter_truncates(tmp_path_factory):
    """Guard: the interpreter's integer // and % truncate like the GPU, so the rows above really
    tell a plain form from a floor-correct one."""
    k = _kernel(tmp_path_factory, "naive", "tl.int64", "a // 4 + 1000 * (a % 4)")
    vals = _values(torch.int64, True, 0)
    out = torch.empty(N, dtype=torch.int64)
    k[(1,)](*[torch.tensor(vals[n], dtype=torch.int64) for n in NAMES], out, N=N)
    i = vals["a"].index(-7)
    assert out[i].item() == -1 + 1000 * -3  # C semantics, not Python's -2 + 1000 * 1


def _scalar_kernel(tmp_path_factory, rid: str, index_dtype: str, src_expr: str):
    """A kernel computing ``src_expr`` from constexpr parameters: Python ints, as tilefuse's
    kernels get their size parameters under the interpreter."""
    params = ", ".join(f"{n}: tl.constexpr" for n in NAMES)
    src = (
        "import triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\n"
        f"def kernel(out_ptr, {params}):\n"
        f"    result = ({src_expr}) + tl.zeros([1], dtype={index_dtype})\n"
        "    tl.store(out_ptr + tl.arange(0, 1), result)\n"
    )
    d = tmp_path_factory.mktemp("scalar_kernels")
    mod_name = f"tf_texpr_scalar_{rid}_{index_dtype.replace('.', '_')}"
    path = d / f"{mod_name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


@pytest.mark.skipif(not _interpreting(), reason="checks the interpreter")
@pytest.mark.parametrize("rid", [r for r, row in ROWS.items() if not row[2]])
def test_floor_correct_forms_also_floor_on_python_ints(tmp_path_factory, rid):
    """The floor-correct forms are right where their operands are Python ints, whose ``//`` and
    ``%`` already floor (size parameters are constexprs under the interpreter): correcting a
    Python quotient again gave ``-3 // 2 == -3``."""
    expr, oracle, _, small = ROWS[rid]
    src = ts.texpr(expr, "tl.int64")
    kernel = _scalar_kernel(tmp_path_factory, rid, "tl.int64", src)
    vals = _values(torch.int64, True, seed=sum(map(ord, rid)))
    out = torch.empty(1, dtype=torch.int64)
    for i in range(16):  # the edge values of ``a`` (0, +-1, ..., -64) and a few random ones
        env = {n: vals[n][i] for n in NAMES}
        kernel[(1,)](out, **env)
        assert out.item() == oracle(env), (rid, src, env, out.item())
