"""The Python API of tilefuse.symbolic: operators, equality and hashing, errors, substitution,
free symbols, introspection, printers, pickling and the cheap package import."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import pytest

import tilefuse
from tilefuse import _native
from tilefuse import symbolic as ts
from tilefuse.symbolic import (
    Add,
    CantSplit,
    CeilDiv,
    CleanDiv,
    Expr,
    FloorDiv,
    Integer,
    Max,
    Min,
    Mod,
    ModularIndexing,
    Mul,
    pexpr,
    sym,
    symbols,
    texpr,
)

x0, x1, x2, x10 = symbols("x0 x1 x2 x10")
s0, s1 = symbols("s0 s1")
a, b = symbols("a b")  # no prefix kind: sign unknown

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


# ----------------------------------------------------------------------------- operators


@pytest.mark.parametrize(
    "op",
    [
        lambda p, q: p + q,
        lambda p, q: p - q,
        lambda p, q: p * q,
        lambda p, q: p // q,
        lambda p, q: p % q,
    ],
    ids=["add", "sub", "mul", "floordiv", "mod"],
)
def test_binary_operators_match_python_semantics(op):
    for av in (-7, -1, 0, 3, 10):
        for bv in (-4, -3, 2, 5):
            env = {"a": av, "b": bv}
            assert op(a, b).evaluate(env) == op(av, bv)
            assert op(a, bv).evaluate(env) == op(av, bv)  # int on the right
            assert op(av, b).evaluate(env) == op(av, bv)  # reflected: int on the left


def test_operator_results_are_canonical():
    assert x0 + 1 == 1 + x0
    assert (x0 + x1) * 2 == 2 * x0 + 2 * x1
    assert (x0 + x1) * (x0 - x1) == x0 * x0 - x1 * x1
    assert x0 - x0 == 0
    assert 3 - x0 == -x0 + 3
    assert -(-x0) == x0
    assert +x0 is x0
    assert x0**2 == x0 * x0
    assert x0**0 == 1
    assert (x0 + 1) ** 2 == x0 * x0 + 2 * x0 + 1
    assert Add(x0, x1, 3) == x0 + x1 + 3
    assert Add() == 0 and Mul() == 1
    assert ts.Pow(x0 + 1, 2) == (x0 + 1) ** 2 and ts.Pow(x0, 0) == 1
    assert Mul(2, x0, x1) == 2 * x0 * x1


def test_floordiv_and_mod_operators_build_inductor_nodes():
    assert x0 // 16 == FloorDiv(x0, 16)
    assert (x0 // 16).kind == "FloorDiv"
    # % with a provably positive divisor is ModularIndexing(x, 1, d), as Inductor spells it
    assert x0 % 64 == ModularIndexing(x0, 1, 64)
    assert (x0 % s0).kind == "ModularIndexing"
    # divisor of unknown sign: a floor Mod node
    assert (x0 % a).kind == "Mod"
    assert Mod(x0, a) == x0 % a
    assert 100 // x0 == FloorDiv(100, x0)
    assert 100 % s0 == ModularIndexing(100, 1, s0)


def test_integer_folding():
    assert Integer(7) // 2 == 3
    assert Integer(-7) // 2 == -4
    assert Integer(-7) % 3 == 2
    assert Integer(7) % -3 == -2
    assert FloorDiv(-7, 2) == -4
    assert ModularIndexing(-7, 2, 3) == (-7 // 2) % 3
    assert CeilDiv(7, 2) == 4 and CeilDiv(-7, 2) == -3
    assert CleanDiv(12, 4) == 3
    assert Min(3, 1, 2) == 1 and Max(3, 1, 2) == 3
    assert isinstance(Min(3, 1), Expr)


def test_pow_errors():
    with pytest.raises(ValueError, match="non-negative"):
        ts.Pow(x0, -1)
    with pytest.raises(ValueError, match="non-negative"):
        ts.Pow(x0, x1)
    with pytest.raises(ValueError, match="non-negative"):
        x0**-1
    with pytest.raises(TypeError):
        x0**x1
    with pytest.raises(TypeError):
        pow(x0, 2, 5)


def test_true_division_is_refused():
    with pytest.raises(TypeError, match="CleanDiv"):
        x0 / 2
    with pytest.raises(TypeError):
        2 / x0


@pytest.mark.parametrize("other", [1.5, "x0", None, [1], object()])
def test_non_integer_operands_raise_type_error(other):
    with pytest.raises(TypeError):
        x0 + other
    with pytest.raises(TypeError):
        other * x0
    with pytest.raises(TypeError):
        FloorDiv(x0, other)


def test_int_like_operands_are_accepted():
    sympy = pytest.importorskip("sympy")
    np = pytest.importorskip("numpy")
    assert x0 + np.int64(3) == x0 + 3
    assert FloorDiv(x0, np.int32(4)) == FloorDiv(x0, 4)
    assert x0 * sympy.Integer(5) == 5 * x0
    assert (x0 + True) == x0 + 1
    assert x0.evaluate({x0: np.int64(9)}) == 9


# ----------------------------------------------------------------------------- equality / hash


def test_structural_equality():
    assert sym("x0") == x0
    assert sym("x0") is not x0  # distinct Python objects, same interned node
    assert FloorDiv(x0 + 128 * x1, 16) == 8 * x1 + FloorDiv(x0, 16)
    assert x0 != x1
    assert x0 + 1 != x0 + 2
    assert (x0 == "x0") is False
    assert x0 != None  # noqa: E711
    # symbols with different assumptions are different symbols
    assert sym("a") != sym("a", positive=True)
    assert sym("n", lower=0, upper=9) != sym("n", lower=0, upper=10)


def test_integers_compare_and_hash_like_ints():
    for v in (0, 1, -1, -2, 5, 2**61 - 1, 2**61, -(2**61), I64_MAX, I64_MIN):
        e = Integer(v)
        assert e == v and v == e
        assert hash(e) == hash(v), v
        assert e.int_value == v
        assert int(e) == v
    assert {Integer(3): "x"}[3] == "x"
    assert len({Integer(3), 3, x0, sym("x0")}) == 2
    assert x0 != 2**70 and not (x0 == 2**70)  # an int beyond int64 equals nothing


def test_integer_quotient_terms_fold():
    """A quotient monomial of 1 joins the sum's constant (canonical form)."""
    assert CleanDiv(2 * s0, s0) == 2
    assert FloorDiv(x0 * s0 + s0, s0) == x0 + 1
    assert ModularIndexing(x0 * s0 + s0, s0, 7) == ModularIndexing(x0 + 1, 1, 7)


def test_ordering_is_not_defined():
    with pytest.raises(TypeError):
        x0 < x1
    with pytest.raises(TypeError):
        x0 <= 3


def test_hash_is_deterministic_across_processes():
    code = (
        "from tilefuse.symbolic import *; x0, x1, s0 = symbols('x0 x1 s0');"
        "print(hash(ModularIndexing(x0 + s0 * x1, s0, 64) + 3 * FloorDiv(x1, 7)))"
    )
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(outs) == 1
    assert int(outs.pop()) == hash(ModularIndexing(x0 + s0 * x1, s0, 64) + 3 * FloorDiv(x1, 7))


def test_int_conversion_of_symbolic_expression_fails():
    with pytest.raises(TypeError, match="symbolic"):
        int(x0 + 1)
    with pytest.raises(TypeError):
        [1, 2, 3][x0]
    assert [1, 2, 3][Integer(1)] == 2
    assert not Integer(0) and Integer(-1) and x0 and (x0 - x0) == 0 and not (x0 - x0)


# ----------------------------------------------------------------------------- errors


def test_division_by_zero():
    for make in (
        lambda: x0 // 0,
        lambda: x0 % 0,
        lambda: FloorDiv(x0, 0),
        lambda: Mod(x0, 0),
        lambda: CleanDiv(x0, 0),
        lambda: CeilDiv(x0, 0),
        lambda: ModularIndexing(x0, 0, 4),
        lambda: Integer(5) // 0,
        lambda: FloorDiv(x0, a).evaluate({x0: 1, a: 0}),
        lambda: ModularIndexing(x0, 1, b).evaluate({x0: 3, b: 0}),
        lambda: (x0 % a).evaluate({x0: 1, a: 0}),
    ):
        with pytest.raises(ZeroDivisionError):
            make()


def test_non_positive_modulus_and_negative_divisor():
    with pytest.raises(ValueError, match="positive modulus"):
        ModularIndexing(x0, 1, 0)
    with pytest.raises(ValueError, match="positive modulus"):
        ModularIndexing(x0, 2, -3)
    with pytest.raises(ValueError, match="positive divisor"):
        ModularIndexing(x0, -2, 3)


def test_overflow():
    for make in (
        lambda: Integer(2**63),
        lambda: Integer(I64_MIN - 1),
        lambda: x0 + 2**63,
        lambda: 2**64 * x0,
        lambda: FloorDiv(x0, 2**100),
        lambda: Integer(I64_MAX) + 1,
        lambda: Integer(2**62) * 4,
        lambda: -Integer(I64_MIN),
        lambda: (x0 * x0).evaluate({x0: 2**40}),
        lambda: (x0 + 1).evaluate({x0: I64_MAX}),
        lambda: x0.evaluate({x0: 2**63}),
        lambda: sym("n", lower=2**63),
        lambda: x0.subs({x0: 2**64}),
    ):
        with pytest.raises(OverflowError):
            make()


def test_unknown_symbol_names_the_symbol():
    e = FloorDiv(x0 + 128 * x1, 16)
    with pytest.raises(ValueError, match="'x1'"):
        e.evaluate({x0: 1})
    with pytest.raises(ValueError, match="'x0'"):
        e.evaluate({"x1": 1})


@pytest.mark.parametrize("name", ["", "0x", "a-b", "a b", "x.0", "_x", "é"])
def test_bad_symbol_names(name):
    with pytest.raises(ValueError, match="invalid symbol name"):
        sym(name)


def test_bad_symbol_assumptions():
    with pytest.raises(ValueError, match="no possible value"):
        sym("n", lower=5, upper=4)
    with pytest.raises(ValueError):
        sym("s0", positive=False)  # sizes are >= 1
    with pytest.raises(ValueError, match="unknown symbol kind"):
        sym("n", kind="vector")


def test_other_errors():
    with pytest.raises(ValueError, match="at least one"):
        Min()
    with pytest.raises(ValueError, match="at least one"):
        Max()
    with pytest.raises(ValueError, match="index dtype"):
        texpr(x0, "tl.float32")
    with pytest.raises(ValueError, match="int32"):
        texpr(x0 + 2**40, "tl.int32")
    with pytest.raises(TypeError):
        Integer(x0)
    with pytest.raises(TypeError):
        x0.evaluate({x0: 1.5})
    with pytest.raises(TypeError):
        x0.evaluate({1: 1})
    with pytest.raises(TypeError):
        x0.evaluate([1])


def test_cant_split_is_an_exception_class_of_the_module():
    assert issubclass(CantSplit, Exception)
    assert CantSplit is _native.CantSplit
    assert CantSplit.__module__ == "tilefuse._native"
    with pytest.raises(CantSplit):
        raise CantSplit("x")


# ----------------------------------------------------------------------------- symbols


def test_symbol_kinds_and_ranges():
    assert x0.symbol_kind == "index" and x0.assumed_range == (0, None)
    assert s0.symbol_kind == "size" and s0.assumed_range == (1, None)
    assert sym("ks0").symbol_kind == "size"
    assert sym("ps0").symbol_kind == "precomputed"
    assert sym("r0_0").symbol_kind == "index"
    assert sym("tmp3").symbol_kind == "indirect"
    assert sym("u0").symbol_kind == "unbacked"
    assert a.symbol_kind == "other" and a.assumed_range == (None, None)
    assert sym("n", positive=True).symbol_kind == "size"
    assert sym("n", nonnegative=True).symbol_kind == "index"
    assert sym("n", positive=True).assumed_range == (1, None)
    assert sym("n", positive=False).assumed_range == (None, 0)
    assert sym("n", nonnegative=False).assumed_range == (None, -1)
    assert sym("n", lower=3, upper=9).assumed_range == (3, 9)
    assert sym("x0", upper=63).assumed_range == (0, 63)
    assert sym("x0", kind="size").assumed_range == (1, None)
    assert sym("x0", positive=True) != x0
    assert x0.is_nonnegative and not x0.is_positive and s0.is_positive
    assert not a.is_nonnegative
    assert (x0 - 1).is_nonnegative is False
    assert (x0 * s0 + s1).is_positive


def test_symbols_helper():
    p, q, r = symbols("p0, q0 r1")
    assert (p.name, q.name, r.name) == ("p0", "q0", "r1")
    assert symbols("n m", positive=True) == (sym("n", positive=True), sym("m", positive=True))


# ----------------------------------------------------------------------------- subs / free symbols


def test_subs():
    e = FloorDiv(x0 + 128 * x1, 16)
    assert e.subs({x1: 2}) == FloorDiv(x0, 16) + 16
    assert e.subs({"x1": 2}) == e.subs({x1: 2})
    assert e.subs({x0: 16 * x2}) == x2 + 8 * x1  # rules re-fire on the way up
    assert (x0 + 2 * x1).subs({x0: x1, x1: x0}) == x1 + 2 * x0  # simultaneous
    assert (x0 * x1 + 1).subs({x0 * x1: x2}) == x2 + 1  # a sub-expression key
    assert e.subs({}) == e
    assert e.subs({"nope": 3}) == e
    assert ModularIndexing(x0, 1, s0).subs({s0: 64}) == ModularIndexing(x0, 1, 64)
    with pytest.raises(ZeroDivisionError):
        FloorDiv(x0, s0).subs({s0: 0})
    with pytest.raises(TypeError):
        e.subs({x0: 1.5})
    with pytest.raises(TypeError):
        e.subs({1.5: x0})


def test_free_symbols():
    e = ModularIndexing(x0 + s0 * x1, s0, 64) + x10 + x2
    fs = e.free_symbols
    assert isinstance(fs, frozenset)
    assert fs == {x0, x1, x2, x10, s0}
    assert e.sorted_free_symbols() == (s0, x0, x1, x2, x10)  # x2 before x10
    assert Integer(5).free_symbols == frozenset()
    assert e.has(x10) and e.has(s0 * x1) and not e.has(s1)


def test_evaluate_with_names_and_symbols():
    e = ModularIndexing(x0 + s0 * x1, s0, 64) - 3 * FloorDiv(x1, 7)
    env = {x0: 5, "x1": 100, s0: 9}
    assert e.evaluate(env) == ((5 + 9 * 100) // 9) % 64 - 3 * (100 // 7)
    sympy = pytest.importorskip("sympy")
    assert (x0 + 1).evaluate({x0: sympy.Integer(4)}) == 5
    assert (x0 + 1).evaluate({x0: Integer(4)}) == 5

    class M(dict):
        pass

    assert (x0 + 1).evaluate(M(x0=2)) == 3


# ----------------------------------------------------------------------------- introspection


@pytest.mark.parametrize(
    "e",
    [
        x0 + 64 * x1 + 7,
        x0 * x1 * s0,
        x0 * x0 * x1,
        FloorDiv(x0, 16),
        ModularIndexing(x0, s0, 64),
        CleanDiv(x0 + a, 4),
        Mod(x0, a),
        Min(x0, x1, 5),
        Max(x0, a),
        3 * x0,
        -x0,
        x0**5,
        7 * x0 * x0 * s1,
        (x0 + 1) ** 2 * s0 - 4,
    ],
)
def test_func_of_args_rebuilds(e):
    assert e.func(*e.args) == e

    def walk(node, depth=0):
        # args are strictly smaller, so a generic walk terminates
        assert depth < 20
        for a in node.args:
            walk(a, depth + 1)

    walk(e)


def test_introspection():
    e = 3 + 64 * x1 + x0
    assert e.kind == "Add"
    assert e.constant == 3
    assert e.terms == ((x0, 1), (x1, 64))
    assert set(e.args) == {Integer(3), x0, 64 * x1}
    m = 2 * x0 * x0 * s0
    assert m.kind == "Mul" and m.terms == ((x0 * x0 * s0, 2),) and m.constant == 0
    assert m.args == (Integer(2), s0, x0**2)
    assert (x0 * x0 * s0).kind == "Mul"
    assert (x0 * x0 * s0).factors == ((s0, 1), (x0, 2))
    assert (x0 * x0 * s0).args == (s0, x0**2)
    assert (x0**3).kind == "Pow" and (x0**3).args == (x0, Integer(3))
    assert (-x0).kind == "Mul" and (-x0).args == (Integer(-1), x0)
    assert x0.factors == ((x0, 1),) and x0.terms == ((x0, 1),)
    assert Integer(4).terms == () and Integer(4).constant == 4
    assert x0.kind == "Symbol" and x0.is_symbol and x0.name == "x0" and x0.args == ()
    assert Integer(4).kind == "Integer" and Integer(4).is_integer and Integer(4).is_number
    assert not x0.is_integer and x0.int_value is None and Integer(4).name is None
    mi = ModularIndexing(x0, s0, 64)
    assert mi.kind == "ModularIndexing" and mi.args == (x0, s0, Integer(64))
    assert CleanDiv(x0 + a, 4).kind == "CleanDiv"
    assert Min(x0, a).kind == "Min" and Max(x0, a).kind == "Max"


def test_repr_is_sympy_like():
    assert str(FloorDiv(x0 + 128 * x1, 16)) == "8*x1 + (x0//16)"
    assert repr(ModularIndexing(x0 + 4096 * x1, 64, 64)) == "ModularIndexing(x0, 64, 64)"
    assert str(x0 - 2 * x1 - 1) == "x0 - 2*x1 - 1"
    assert str(Integer(-5)) == "-5"
    assert str(Min(x0, a)) in ("Min(a, x0)", "Min(x0, a)")


# ----------------------------------------------------------------------------- printers


def test_pexpr_is_python_source():
    e = ModularIndexing(x0, 4, 8) + 3 * s0
    assert pexpr(e) == "3*s0 + ((x0 // 4) % 8)"
    assert pexpr(Min(x0, 3)) in ("min(3, x0)", "min(x0, 3)")
    for expr in (
        FloorDiv(a - 7, 3) + Mod(a, b) * 2,
        ModularIndexing(a, 3, 5) - CeilDiv(a, 4),
        Max(a, b, 2) + Min(a, -3),
        CleanDiv(4 * a + 8, 4),
        a * a * b - 3,
    ):
        for av in (-9, -1, 0, 4, 13):
            for bv in (-5, 3, 7):
                env = {"a": av, "b": bv}
                assert eval(pexpr(expr), {"min": min, "max": max}, env) == expr.evaluate(env)


def test_texpr_plain_only_when_provably_nonnegative():
    assert texpr(FloorDiv(x0, 16)) == "(x0 // 16)"
    assert texpr(ModularIndexing(x0, 1, 64), "tl.int32") == "(x0 % 64)"
    assert texpr(x0 + 64 * x1, "tl.int32") == "x0 + 64*x1"
    assert "tl.where" in texpr(FloorDiv(a, 16))
    assert "tl.where" in texpr(ModularIndexing(a, 1, 64))
    assert "tl.where" in texpr(FloorDiv(x0 - 5, 4))
    assert "tl.where" in texpr(Mod(x0, a))
    assert texpr(Min(x0, x1)) == "tl.minimum(x0, x1)"
    assert texpr(Max(x0, x1, a)).startswith("tl.maximum(")
    assert texpr(Integer(2**40)) == str(2**40)
    assert texpr(x0, "int32") == texpr(x0, "torch.int32") == "x0"


# ----------------------------------------------------------------------------- copy / pickle


@pytest.mark.parametrize(
    "e",
    [
        Integer(-3),
        x0,
        sym("n", lower=2, upper=9),
        sym("x5", kind="size"),
        FloorDiv(x0 + 128 * x1, 16),
        ModularIndexing(x0 + s0 * x1, s0, 64) * x2 + 5,
        CleanDiv(x0 + a, 4),
        Mod(x0, a) - Min(x0, a, 7) + Max(s0, a),
        (x0 * x0 * s1) ** 2,
    ],
)
def test_pickle_and_copy_round_trip(e):
    assert pickle.loads(pickle.dumps(e)) == e
    assert copy.copy(e) is e and copy.deepcopy(e) is e


def test_malformed_pickle_tree():
    with pytest.raises((ValueError, TypeError)):
        _native._from_tree(("Nope", 1))


# ----------------------------------------------------------------------------- package


def test_import_is_cheap_and_lazy():
    code = (
        "import sys, tilefuse; "
        "assert 'torch' not in sys.modules and 'sympy' not in sys.modules, 'heavy import'; "
        "assert 'tilefuse._native' not in sys.modules; "
        "import tilefuse.symbolic; assert 'torch' not in sys.modules and 'sympy' not in sys.modules; "
        "print(tilefuse.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == tilefuse.__version__ == _native.__version__


def test_lazy_submodule_attribute():
    assert tilefuse.symbolic is ts
    with pytest.raises(AttributeError):
        tilefuse.no_such_submodule


def test_public_names():
    for name in ts.__all__:
        assert hasattr(ts, name), name


def test_type_stubs_cover_the_native_module():
    import ast
    import pathlib

    stub = pathlib.Path(_native.__file__).with_name("_native.pyi")
    if not stub.exists():  # pragma: no cover - installed without stubs
        pytest.skip("no _native.pyi next to the extension")
    tree = ast.parse(stub.read_text())
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    top |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    public = {n for n in dir(_native) if not n.startswith("__")}
    assert public <= top | {"__version__"}, public - top
    assert top - {"ExprLike"} <= public | {"__version__"} | {n for n in top if n.startswith("_")}
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Expr")
    members = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    native_members = {n for n in dir(Expr) if not n.startswith("__")}
    assert native_members <= members, native_members - members
    assert (members - {m for m in members if m.startswith("__")}) <= native_members


def test_deep_nesting_is_a_clear_error_not_a_crash():
    e = sym("x0")
    with pytest.raises(ValueError, match="levels deep"):
        for _ in range(5000):
            e = FloorDiv(e + 1, 2)
    # printing stays linear in the expression's size (each child printed once)
    import time

    s0 = sym("s0")
    e = sym("x0")
    for k in range(40):
        e = Max(FloorDiv(e, s0 + k), 1) if k % 2 else FloorDiv(Max(e, 1), s0 + k)
    t0 = time.perf_counter()
    text = str(e)
    assert time.perf_counter() - t0 < 1.0 and "Max" in text


def test_domain_errors_of_evaluate_simplify_and_split():
    m = ModularIndexing(x0, 2, x1)
    with pytest.raises(ValueError, match="modulus"):
        m.evaluate({x0: 5, x1: -1})
    with pytest.raises(ValueError, match="empty range"):
        ts.simplify_with_ranges(x0 + 1, {x0: 0})
    with pytest.raises(ValueError, match="negative"):
        ts.split_iteration_ranges([-4, 1], [[-4], []])
