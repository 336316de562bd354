"""Property tests: tilefuse's rewriting rules never change an expression's value.

Hypothesis draws small random expression trees over index symbols with declared ranges, size
symbols, a sign-unknown symbol and a bounded signed symbol, combined with ``+ - *``, unary ``-``,
``FloorDiv``, ``ModularIndexing``, ``CleanDiv``, ``CeilDiv``, ``%`` (``Mod``), ``Min`` and ``Max``
(divisors positive, or negative integer literals where floor semantics allow them). Each tree is
built through tilefuse (so every construction rule fires where it applies) and evaluated with
``Expr.evaluate`` at random points inside the symbols' ranges; a pure-Python evaluator of the
*unsimplified* tree with Python's floor ``//`` and ``%`` is the oracle.

One test per rule family (the family's operation at the root, any operations below it), each
with 10_000 examples.
"""

from __future__ import annotations

import pickle
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tilefuse import symbolic as ts

# name -> (Expr, (lo, hi) of the values drawn for it); every range lies inside the assumptions.
SYMBOLS = {
    "x0": (ts.sym("x0", upper=15), (0, 15)),
    "x1": (ts.sym("x1", upper=127), (0, 127)),
    "x2": (ts.sym("x2"), (0, 5000)),
    "s0": (ts.sym("s0"), (1, 64)),
    "s1": (ts.sym("s1", upper=8), (1, 8)),
    "a": (ts.sym("a"), (-300, 300)),
    "n": (ts.sym("n", lower=-20, upper=20), (-20, 20)),
}
POSITIVE = ["s0", "s1"]

EXAMPLES = 10_000
POINTS = 4


# ----------------------------------------------------------------------------- trees
#
# A tree is decoded from one hypothesis-drawn byte string (one draw per example keeps
# generation cheap enough for 10_000 examples per family on a small machine; hypothesis still
# shrinks the bytes, and a zero byte always decodes to the simplest choice). Trees are tuples:
# ("int", v), ("sym", name), ("neg", t), (op, t1, t2) for add/sub/mul/floordiv/cleandiv/ceildiv/
# mod/min/max, ("mi", t, divisor, modulus).

SYM_NAMES = sorted(SYMBOLS)
INTS = [0, 1, 2, -1, 3, 4, -2, 5, 7, 8, -3, 16, 6, -5, 9, 12, -8, 15, 64, -7]
POS_INTS = [1, 2, 3, 4, 8, 5, 16, 7, 6, 12, 9, 64]
OPS = ["add", "sub", "mul", "neg", "floordiv", "mi", "cleandiv", "ceildiv", "mod", "min", "max"]
MAX_DEPTH = 3


class Decoder:
    def __init__(self, data: bytes):
        self.data = data
        self.i = 0

    def byte(self) -> int:
        b = self.data[self.i] if self.i < len(self.data) else 0
        self.i += 1
        return b

    def leaf(self):
        k = self.byte()
        if k % 2 == 0:
            return ("int", INTS[(k // 2) % len(INTS)])
        return ("sym", SYM_NAMES[(k // 2) % len(SYM_NAMES)])

    def positive(self, depth: int = 0):
        k = self.byte()
        choice = k % 5
        if choice == 0 or depth > 0:
            return ("int", POS_INTS[(k // 5) % len(POS_INTS)])
        if choice in (1, 2):
            return ("sym", POSITIVE[choice - 1])
        return ("add" if choice == 3 else "mul", self.positive(depth + 1), self.positive(depth + 1))

    def signed_divisor(self):
        k = self.byte()
        if k % 4 == 3:  # floor division and floor modulus take negative divisors too
            return ("int", -1 - (k // 4) % 9)
        return self.positive()

    def tree(self, depth: int = 0):
        k = self.byte()
        if depth >= MAX_DEPTH or k % 2 == 0:
            self.i -= 1
            return self.leaf()
        return self.node(OPS[(k // 2) % len(OPS)], depth)

    def node(self, op: str, depth: int):
        if op == "neg":
            return ("neg", self.tree(depth + 1))
        if op in ("add", "sub", "mul", "min", "max"):
            return (op, self.tree(depth + 1), self.tree(depth + 1))
        if op in ("floordiv", "mod"):
            return (op, self.tree(depth + 1), self.signed_divisor())
        if op == "mi":
            return (op, self.tree(depth + 1), self.positive(), self.positive())
        if op == "cleandiv":
            # the caller of CleanDiv promises exactness: the base is a multiple of the divisor
            d = self.positive()
            return (op, ("mul", self.tree(depth + 1), d), d)
        if op == "ceildiv":
            return (op, self.tree(depth + 1), self.positive())
        raise AssertionError(op)


def family_tree(family: str, data: bytes):
    d = Decoder(data)
    if family == "arith":
        return d.node(["add", "sub", "mul"][d.byte() % 3], 0)
    if family == "minmax":
        return d.node(["min", "max"][d.byte() % 2], 0)
    return d.node(family, 0)


FAMILIES = ["arith", "floordiv", "mi", "cleandiv", "ceildiv", "mod", "minmax"]
tree_bytes = st.binary(min_size=1, max_size=24)
seeds = st.integers(0, 2**32 - 1)


def sample_points(seed: int):
    """POINTS points inside the symbols' ranges, ends of the ranges drawn often."""
    rng = random.Random(seed)
    pts = []
    for _ in range(POINTS):
        env = {}
        for n, (_, (lo, hi)) in SYMBOLS.items():
            r = rng.random()
            env[n] = lo if r < 0.15 else hi if r < 0.3 else rng.randint(lo, hi)
        pts.append(env)
    return pts


# ----------------------------------------------------------------------------- oracle / builder


def reference(t, env):
    """Value of the unsimplified tree with Python's floor semantics."""
    tag = t[0]
    if tag == "int":
        return t[1]
    if tag == "sym":
        return env[t[1]]
    if tag == "neg":
        return -reference(t[1], env)
    x = reference(t[1], env)
    y = reference(t[2], env)
    if tag == "add":
        return x + y
    if tag == "sub":
        return x - y
    if tag == "mul":
        return x * y
    if tag in ("floordiv", "cleandiv"):
        return x // y
    if tag == "mi":
        return (x // y) % reference(t[3], env)
    if tag == "ceildiv":
        return -((-x) // y)
    if tag == "mod":
        return x % y
    if tag == "min":
        return min(x, y)
    if tag == "max":
        return max(x, y)
    raise AssertionError(tag)


def build(t):
    """The tree built through tilefuse (Python ints stay ints until an Expr meets them)."""
    tag = t[0]
    if tag == "int":
        return t[1]
    if tag == "sym":
        return SYMBOLS[t[1]][0]
    if tag == "neg":
        return -build(t[1])
    x = build(t[1])
    y = build(t[2])
    if tag == "add":
        return x + y
    if tag == "sub":
        return x - y
    if tag == "mul":
        return x * y
    if tag == "floordiv":
        return x // y if isinstance(x, ts.Expr) else ts.FloorDiv(x, y)
    if tag == "cleandiv":
        return ts.CleanDiv(x, y)
    if tag == "mi":
        return ts.ModularIndexing(x, y, build(t[3]))
    if tag == "ceildiv":
        return ts.CeilDiv(x, y)
    if tag == "mod":
        return x % y if isinstance(x, ts.Expr) else ts.Mod(x, y)
    if tag == "min":
        return ts.Min(x, y)
    if tag == "max":
        return ts.Max(x, y)
    raise AssertionError(tag)


def check(tree, pts):
    e = build(tree)
    e = e if isinstance(e, ts.Expr) else ts.Integer(e)
    for env in pts:
        assert e.evaluate(env) == reference(tree, env), (tree, str(e), env)


def _family_test(family):
    @settings(max_examples=EXAMPLES, deadline=None)
    @given(data=tree_bytes, seed=seeds)
    def test(data, seed):
        check(family_tree(family, data), sample_points(seed))

    test.__name__ = f"test_rules_preserve_value_{family}"
    test.__doc__ = f"{family}: the tilefuse-built tree evaluates like the unsimplified tree."
    return test


test_rules_preserve_value_arith = _family_test("arith")
test_rules_preserve_value_floordiv = _family_test("floordiv")
test_rules_preserve_value_modular_indexing = _family_test("mi")
test_rules_preserve_value_cleandiv = _family_test("cleandiv")
test_rules_preserve_value_ceildiv = _family_test("ceildiv")
test_rules_preserve_value_mod = _family_test("mod")
test_rules_preserve_value_minmax = _family_test("minmax")


@settings(max_examples=2_000, deadline=None)
@given(data=tree_bytes, seed=seeds)
def test_python_printer_substitution_and_pickle_values(data, seed):
    """pexpr output evaluates in Python like the expression; substituting every symbol by its
    value, and a pickle round trip, keep the value."""
    tree = Decoder(data).tree()
    e = build(tree)
    e = e if isinstance(e, ts.Expr) else ts.Integer(e)
    code = compile(ts.pexpr(e), "<pexpr>", "eval")
    e2 = pickle.loads(pickle.dumps(e))
    for env in sample_points(seed):
        want = reference(tree, env)
        assert eval(code, {"min": min, "max": max}, dict(env)) == want, (ts.pexpr(e), env)
        assert e2.evaluate(env) == want, (str(e), str(e2), env)
        folded = e.subs({SYMBOLS[n][0]: v for n, v in env.items()})
        assert not folded.free_symbols and folded.evaluate({}) == want, (str(e), env)


def has_integer_term(e) -> bool:
    """Was a core bug (see test_symbolic_api.test_integer_quotient_terms_fold): an Integer left
    as a term of an Add ('2*1', '1 + x0') instead of folded into the constant."""
    if e.kind in ("Integer", "Symbol"):
        return False
    return any(t.kind == "Integer" for t, _ in e.terms) or any(has_integer_term(a) for a in e.args)


@settings(max_examples=2_000, deadline=None)
@given(data=tree_bytes, seed=seeds)
def test_canonical_forms(data, seed):
    """Canonical form: substituting every symbol by its value gives exactly the Integer, and a
    pickle round trip (which rebuilds through the constructors) gives the same node. No Add
    ever keeps an Integer as a term (it joins the constant)."""
    tree = Decoder(data).tree()
    e = build(tree)
    e = e if isinstance(e, ts.Expr) else ts.Integer(e)
    assert not has_integer_term(e), str(e)
    assert pickle.loads(pickle.dumps(e)) == e, str(e)
    for env in sample_points(seed):
        folded = e.subs({SYMBOLS[n][0]: v for n, v in env.items()})
        assert not has_integer_term(folded), str(folded)
        assert folded == reference(tree, env), (str(e), str(folded), env)


# ----------------------------------------------------------------------------- range-aware rules

# x0 and x1 already carry their ranges as assumptions; x2 gets its range only from `ranges`.
RANGES = {SYMBOLS["x0"][0]: 16, SYMBOLS["x1"][0]: 128, SYMBOLS["x2"][0]: 5001}


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=tree_bytes, seed=seeds)
def test_simplify_with_ranges_preserves_value_and_bounds(data, seed):
    """simplify_with_ranges keeps the value at every point inside the ranges, and bound()
    encloses every value taken there (before and after simplification)."""
    tree = Decoder(data).tree()
    e = build(tree)
    e = e if isinstance(e, ts.Expr) else ts.Integer(e)
    r = ts.simplify_with_ranges(e, RANGES)
    lo, hi = ts.bound(e, RANGES)
    rlo, rhi = ts.bound(r, RANGES)
    for env in sample_points(seed):
        want = reference(tree, env)
        assert r.evaluate(env) == want, (str(e), str(r), env)
        assert (lo is None or lo <= want) and (hi is None or want <= hi), (str(e), lo, hi, env)
        assert (rlo is None or rlo <= want) and (rhi is None or want <= rhi), (str(r), rlo, rhi, env)


@settings(max_examples=5_000, deadline=None)
@given(data=tree_bytes, data2=tree_bytes, seed=seeds)
def test_static_queries_are_sound(data, data2, seed):
    """Whenever a statically_known_* query answers True, the relation holds at every sampled
    point inside the ranges."""
    t1, t2 = Decoder(data).tree(), Decoder(data2).tree()
    a, b = build(t1), build(t2)
    checks = [
        (ts.statically_known_equals(a, b, RANGES), lambda p, q: p == q),
        (ts.statically_known_leq(a, b, RANGES), lambda p, q: p <= q),
        (ts.statically_known_lt(a, b, RANGES), lambda p, q: p < q),
        (ts.statically_known_multiple_of(a, b), lambda p, q: p == 0 if q == 0 else p % q == 0),
    ]
    if not any(c for c, _ in checks):
        return
    for env in sample_points(seed):
        p, q = reference(t1, env), reference(t2, env)
        for known, rel in checks:
            assert not known or rel(p, q), (str(a), str(b), env, p, q)


# ----------------------------------------------------------------------------- splitting


def _mixed_radix(digits, radices):
    v = 0
    for d, r in zip(digits, radices):
        v = v * r + d
    return v


def _partition(items, cuts):
    """Split `items` into consecutive groups, cutting after item i when cuts[i]."""
    out, cur = [], []
    for i, it in enumerate(items):
        cur.append(it)
        if i < len(items) - 1 and i < len(cuts) and cuts[i]:
            out.append(cur)
            cur = []
    out.append(cur)
    return out


@settings(max_examples=2_000, deadline=None)
@given(
    factors=st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=5),
    kcuts=st.lists(st.booleans(), min_size=5, max_size=5),
    ncuts=st.lists(st.booleans(), min_size=5, max_size=5),
    merge=st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_split_iteration_ranges_preserves_iteration_order(factors, kcuts, ncuts, merge):
    """A successful split maps the kernel's flat iteration order onto the node's: for every
    assignment of the new variables, the node variables given by the getters are in range and the
    node's row-major flat index equals the kernel's. A failure is CantSplit."""
    import itertools
    import math

    groups = [math.prod(g) for g in _partition(factors, kcuts[: len(factors) - 1])]
    # node sizes: the same digits regrouped, adjacent digits sometimes multiplied together
    sizes, cur = [], 1
    for f, m in zip(factors, merge + [False]):
        cur *= f
        if not m:
            sizes.append(cur)
            cur = 1
    if cur != 1:
        sizes.append(cur)
    lengths = _partition(sizes, ncuts[: len(sizes) - 1])
    try:
        res = ts.split_iteration_ranges(groups, lengths)
    except ts.CantSplit:
        return
    radices = [int(r) for grp in res.new_ranges for r in grp]
    assert math.prod(radices) == math.prod(groups)
    for g, grp in zip(groups, res.new_ranges):
        assert math.prod(int(r) for r in grp) == g
    vs = [ts.sym(f"v{k}") for k in range(res.num_vars)]
    getters = [e for grp in res.apply(vs) for e in grp]
    node_radices = [s for grp in lengths for s in grp]
    for digits in itertools.product(*(range(r) for r in radices)):
        env = {f"v{k}": d for k, d in enumerate(digits)}
        node = [e.evaluate(env) for e in getters]
        assert all(0 <= x < s for x, s in zip(node, node_radices)), (groups, lengths, node)
        assert _mixed_radix(node, node_radices) == _mixed_radix(digits, radices), (groups, lengths)
