"""The op vocabulary (``tilefuse.ir.ops``): ``ops.<name>`` outside it fails at trace time, the
loop-body tracer handles every op of it, and it is exactly the set of ops the lowerings (and the
IR's own inner functions) emit, read from their sources."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pytest
import torch

from tilefuse import symbolic as S
from tilefuse.ir.loop_body import LoopBody, _Tracer
from tilefuse.ir.ops import BOOL_RESULT_OPS, ELEMENTWISE_OPS, OP_NAMES, STRUCTURAL_OPS, OpsHandler
from tilefuse.virtualized import ops

PKG = pathlib.Path(__file__).resolve().parent.parent / "python" / "tilefuse"

_DTYPES = {"x": torch.float32, "y": torch.float32, "idx": torch.int64, "seed": torch.int64}


def _trace(fn) -> LoopBody:
    i0 = S.sym("i0")
    return LoopBody.trace(fn, [i0], [], {i0: 8}, _DTYPES.__getitem__)


# ------------------------------------------------------------------------------ unknown ops


def test_unknown_op_raises_at_trace_time():
    def inner(idx):
        return ops.foo(ops.load("x", idx[0]))

    with pytest.raises(AttributeError) as e:
        _trace(inner)
    assert str(e.value).startswith("tilefuse: 'foo' is not an op of the IR vocabulary (tilefuse.ir.ops); ")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda v: ops.add(v), "ops.add takes 2 arguments, 1 given"),
        (lambda v: ops.neg(v, v), "ops.neg takes 1 argument, 2 given"),
        (lambda v: ops.where(v), "ops.where takes 3 arguments, 1 given"),
    ],
    ids=["too_few", "too_many", "structural"],
)
def test_wrong_argument_count_raises_at_trace_time(call, message):
    """An op of the vocabulary called with the wrong number of arguments fails where it is written,
    while the inner function is traced, not later inside the Triton codegen."""

    def inner(idx):
        return call(ops.load("x", idx[0]))

    with pytest.raises(TypeError) as e:
        _trace(inner)
    assert str(e.value).startswith(f"tilefuse: {message} (tilefuse.ir.ops.OpsHandler.")


def test_every_op_accepts_its_documented_argument_counts():
    """OP_ARITY is OpsHandler's signatures: an op with defaults accepts every count in between."""
    from tilefuse.ir.ops import OP_ARITY

    assert set(OP_ARITY) == OP_NAMES
    assert OP_ARITY["add"] == (2, 2) and OP_ARITY["store"] == (3, 4) and OP_ARITY["load"] == (2, 2)
    assert all(0 <= lo <= hi for lo, hi in OP_ARITY.values())


def test_unknown_op_raises_on_access_and_known_ops_are_cached():
    assert not hasattr(ops, "no_such_op")
    with pytest.raises(AttributeError, match="not an op of the IR vocabulary"):
        ops.no_such_op  # noqa: B018 - the access itself is what raises
    # a known op resolves to one cached forwarder (a plain attribute lookup after the first access)
    assert ops.add is ops.add


def test_vocabulary_categories_are_consistent():
    assert BOOL_RESULT_OPS <= ELEMENTWISE_OPS
    assert STRUCTURAL_OPS <= OP_NAMES
    assert ELEMENTWISE_OPS | STRUCTURAL_OPS == OP_NAMES
    for name in OP_NAMES:
        assert getattr(OpsHandler, name).__doc__, f"OpsHandler.{name} has no one-line meaning"


# ------------------------------------------------------------------------------ the tracer


def _structural_call(op: str, idx):
    """Call structural ``op`` through ``ops`` with arguments of its own kind."""
    x = ops.load("x", idx[0])
    seed, offset = ops.load("seed", S.Integer(0)), ops.index_expr(idx[0], torch.int32)
    calls = {
        "load": lambda: x,
        "store": lambda: ops.store("x", idx[0], x),
        "store_reduction": lambda: ops.store_reduction("x", idx[0], x),
        "constant": lambda: ops.constant(1.5, torch.float32),
        "index_expr": lambda: ops.index_expr(idx[0], torch.int64),
        "indirect_indexing": lambda: ops.load("x", ops.indirect_indexing(ops.load("idx", idx[0]), 8)),
        "to_dtype": lambda: ops.to_dtype(x, torch.float16),
        "bitcast": lambda: ops.bitcast(x, torch.int32),
        "where": lambda: ops.where(ops.lt(x, 0.0), x, 0.0),
        "masked": lambda: ops.masked(ops.lt(x, 0.0), lambda: ops.load("y", idx[0]), 0.0),
        "reduction": lambda: ops.reduction(torch.float32, torch.float32, "sum", x),
        "scan": lambda: ops.scan(torch.float32, "sum", x),
        "rand": lambda: ops.rand(seed, offset),
        "randn": lambda: ops.randn(seed, offset),
        "randint64": lambda: ops.randint64(seed, offset, 0, 10),
    }
    return calls[op]()


@pytest.mark.parametrize("op", sorted(OP_NAMES))
def test_tracer_handles_every_op(op):
    assert callable(getattr(_Tracer, op, None)), f"the loop-body tracer has no method for ops.{op}"

    def inner(idx):
        if op in STRUCTURAL_OPS:
            return _structural_call(op, idx)
        nargs = len(inspect.signature(getattr(OpsHandler, op)).parameters) - 1
        args = [ops.load("x", idx[0]), ops.load("y", idx[0])][:nargs]
        return getattr(ops, op)(*args)

    body = _trace(inner)
    recorded = [n.op for n in body.nodes]
    if op == "masked":  # expanded by the tracer: a load under the mask, then a where
        assert any(n.op == "load" and len(n.args) == 3 for n in body.nodes)
        assert recorded[-1] == "where"
        return
    assert op in recorded
    if op in ELEMENTWISE_OPS:
        assert body.nodes[-1].dtype == (torch.bool if op in BOOL_RESULT_OPS else torch.float32)


# ------------------------------------------------------------------------------ lowering sources


def _emitting_sources() -> list[pathlib.Path]:
    """The modules whose inner functions emit ops: the lowerings (a module or a package, with the
    FX passes and decompositions beside them), the IR's own nodes, and symbolic floats."""
    paths = sorted((PKG / "lowering").rglob("*.py"))
    for extra in ("fx_passes", "decompositions"):
        paths += sorted((PKG / extra).rglob("*.py")) + sorted(PKG.glob(f"{extra}.py"))
    paths += [p for p in sorted((PKG / "ir").glob("*.py")) if p.name != "ops.py"]
    paths.append(PKG / "sizevars.py")
    return paths


def _params(fn: ast.FunctionDef | ast.Lambda) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


def _is_ops_getattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "ops"
    )


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)


def _arg_for(call: ast.Call, pos: int, param: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    return call.args[pos] if pos < len(call.args) else None


def _special_cased(fn: ast.FunctionDef, param: str) -> set[str]:
    """Values of ``param`` that ``fn`` handles before dispatching by name: constants ``c`` of an
    ``if`` testing ``param == c`` whose body ends in ``return``/``raise`` without dispatching."""
    out = set()
    for node in ast.walk(fn):
        if not (isinstance(node, ast.If) and isinstance(node.body[-1], (ast.Return, ast.Raise))):
            continue
        if any(_is_ops_getattr(n) for stmt in node.body for n in ast.walk(stmt)):
            continue
        for cmp in ast.walk(node.test):
            if (
                isinstance(cmp, ast.Compare)
                and isinstance(cmp.left, ast.Name)
                and cmp.left.id == param
                and isinstance(cmp.ops[0], ast.Eq)
                and isinstance(cmp.comparators[0], ast.Constant)
            ):
                out.add(cmp.comparators[0].value)
    return out


class _EmittedOps:
    """The op names the sources emit: every ``ops.<name>`` and, for functions that dispatch by name
    (``getattr(ops, p)`` with ``p`` a parameter, directly or by passing it on to such a function),
    every literal name their call sites pass for ``p`` — a constant, a variable assigned constants,
    or the loop variable of a ``for`` over a literal table."""

    def __init__(self, trees: dict[str, ast.Module]):
        self.trees = trees
        self.names: set[str] = set()
        self.unresolved: list[str] = []
        self.dispatchers: dict[str, tuple[int, str, ast.FunctionDef]] = {}
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ops":
                    self.names.add(node.attr)
                if _is_ops_getattr(node) and isinstance(node.args[1], ast.Constant):
                    self.names.add(node.args[1].value)
        self._find_dispatchers()
        for path, tree in trees.items():
            self._visit(tree, path, [tree], [])

    def _find_dispatchers(self) -> None:
        fns = [n for t in self.trees.values() for n in ast.walk(t) if isinstance(n, ast.FunctionDef)]
        changed = True
        while changed:  # a function passing its parameter on to a dispatcher dispatches too
            changed = False
            for fn in fns:
                if fn.name in self.dispatchers:
                    continue
                params = _params(fn)
                for node in ast.walk(fn):
                    name = None
                    if _is_ops_getattr(node) and isinstance(node.args[1], ast.Name):
                        name = node.args[1].id
                    elif isinstance(node, ast.Call) and _callee(node) in self.dispatchers:
                        pos, param, _ = self.dispatchers[_callee(node)]
                        arg = _arg_for(node, pos, param)
                        name = arg.id if isinstance(arg, ast.Name) else None
                    if name in params:
                        self.dispatchers[fn.name] = (params.index(name), name, fn)
                        changed = True
                        break

    def _visit(self, node: ast.AST, path: str, scopes: list, loops: list) -> None:
        if isinstance(node, ast.Call) and _callee(node) in self.dispatchers:
            pos, param, fn = self.dispatchers[_callee(node)]
            arg = _arg_for(node, pos, param)
            values = self._resolve(arg, scopes, loops)
            if values is None:
                self.unresolved.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            else:
                self.names |= values - _special_cased(fn, param)
        for child in ast.iter_child_nodes(node):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                self._visit(child, path, scopes + [node], loops)
            elif isinstance(node, ast.For):
                self._visit(child, path, scopes, loops + [node])
            else:
                self._visit(child, path, scopes, loops)

    def _resolve(self, arg: ast.AST | None, scopes: list, loops: list) -> set | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return {arg.value}
        if not isinstance(arg, ast.Name):
            return None
        if isinstance(scopes[-1], (ast.FunctionDef, ast.Lambda)) and arg.id in _params(scopes[-1]):
            # a parameter passed on: its own callers are resolved (the function is a dispatcher),
            # unless it is a lambda's or a non-dispatching function's, which cannot be resolved
            return set() if getattr(scopes[-1], "name", None) in self.dispatchers else None
        for loop in reversed(loops):  # the loop variable of an enclosing ``for`` over a literal table
            values = self._loop_values(loop, arg.id)
            if values is not None:
                return values
        values = set()
        for node in ast.walk(scopes[-1]):  # a variable assigned constants in the same scope
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == arg.id for t in node.targets):
                v = node.value
                branches = [v.body, v.orelse] if isinstance(v, ast.IfExp) else [v]
                if not all(isinstance(b, ast.Constant) and isinstance(b.value, str) for b in branches):
                    return None
                values |= {b.value for b in branches}
        return values or None

    @staticmethod
    def _loop_values(loop: ast.For, name: str) -> set | None:
        if not isinstance(loop.iter, (ast.List, ast.Tuple)):
            return None
        if isinstance(loop.target, ast.Name) and loop.target.id == name:
            items = loop.iter.elts
        elif isinstance(loop.target, ast.Tuple):
            pos = [k for k, t in enumerate(loop.target.elts) if isinstance(t, ast.Name) and t.id == name]
            if not pos:
                return None
            items = [e.elts[pos[0]] for e in loop.iter.elts if isinstance(e, ast.Tuple)]
        else:
            return None
        if not all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
            return None
        return {i.value for i in items}


def test_vocabulary_is_the_set_of_ops_the_lowerings_emit():
    paths = _emitting_sources()
    assert any("lowering" in p.parts for p in paths)
    emitted = _EmittedOps({str(p.relative_to(PKG)): ast.parse(p.read_text()) for p in paths})
    assert not emitted.unresolved, (
        "op names passed to a function that dispatches with getattr(ops, name) could not be read "
        "from the source (pass a literal, a variable assigned literals, or a literal table's loop "
        "variable):\n" + "\n".join(emitted.unresolved)
    )
    missing = sorted(emitted.names - OP_NAMES)
    unused = sorted(OP_NAMES - emitted.names)
    assert not missing, f"ops the lowerings emit but tilefuse.ir.ops.OpsHandler lacks: {missing}"
    assert not unused, f"ops of tilefuse.ir.ops.OpsHandler that no lowering emits: {unused}"
