"""The native CSE scope the codegen uses (``tilefuse.codegen.cse.Scope``) against the dict-chain
reference (``DictScope``): random operation sequences over trees of scopes (hypothesis), the
mapping protocol of a scope's own entries, argument errors, and kernels compiled with the native
scope equal to those compiled with the Python one."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tilefuse.codegen import cse
from tilefuse.codegen.cse import DictScope, Scope


KEY_TEXTS = ["tmp1 + tmp2", "tl.load(in_ptr0 + (x0), xmask)", "", "x", "é∑", "tmp1 + tmp2 "]
KEYS = st.sampled_from(KEY_TEXTS)
VARS = st.sampled_from(["tmp1", "tmp2", "tmp3", "acc", ""])
# (op, scope index, key, var / parent index); scope indices are taken modulo the live scopes
OPS = st.lists(
    st.tuples(
        st.sampled_from(["root", "child", "get", "put", "setitem", "local"]),
        st.integers(0, 7),
        KEYS,
        VARS,
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(ops=OPS)
def test_scope_matches_dict_chain(ops):
    model: list[DictScope] = [DictScope()]
    native: list[Scope] = [Scope()]
    for op, i, key, var in ops:
        i %= len(model)
        if op == "root":
            model.append(DictScope())
            native.append(Scope())
        elif op == "child":
            model.append(DictScope(model[i]))
            native.append(Scope(native[i]))
            assert native[-1].parent is native[i]
        elif op == "get":
            assert native[i].get(key) == model[i].get(key)
        elif op == "put":
            model[i].cache[key] = var
            native[i].put(key, var)
        elif op == "setitem":
            model[i].cache[key] = var
            native[i].cache[key] = var
        else:
            m, n = model[i].cache, native[i].cache
            assert (key in n) == (key in m)
            assert len(n) == len(m)
            if key in m:
                assert n[key] == m[key]
            else:
                with pytest.raises(KeyError):
                    n[key]
    for m, n in zip(model, native):
        for key in KEY_TEXTS:
            assert n.get(key) == m.get(key)


def test_child_sees_later_parent_writes_and_shadows_them():
    root = Scope()
    child = Scope(root)
    grandchild = Scope(child)
    root.put("a", "tmp1")
    assert child.get("a") == grandchild.get("a") == "tmp1"
    child.put("a", "tmp2")
    assert root.get("a") == "tmp1" and child.get("a") == grandchild.get("a") == "tmp2"
    assert "a" not in grandchild and len(grandchild) == 0 and len(child) == 1
    assert root.parent is None and grandchild.parent is child


def test_get_returns_the_stored_string_object():
    name = "".join(["tmp", "12"])
    s = Scope()
    s.put("k", name)
    assert s.get("k") is name and s.cache["k"] is name


def test_argument_errors():
    s = Scope()
    with pytest.raises(TypeError):
        s.put(1, "tmp1")
    with pytest.raises(TypeError):
        s.put("k", 1)
    with pytest.raises(TypeError):
        s.get(None)
    with pytest.raises(TypeError):
        Scope(object())
    with pytest.raises(NotImplementedError):
        del s.cache["k"]
    assert "root" in repr(s) and "child" in repr(Scope(s))


@pytest.mark.parametrize("cols", [256, 8192], ids=["persistent", "looped"])
def test_kernels_identical_with_native_scope(monkeypatch, cols):
    """layer_norm + softmax (a looped reduction opens child scopes) compiles to the same kernels
    with the native scope (the codegen's) as with the dict-chain reference."""
    from tilefuse.codegen.triton_kernel import TritonKernelCodegen as cls

    orig = cls.generate
    sources: list[str] = []

    def generate(self):
        k = orig(self)
        sources.append(k.source)
        return k

    monkeypatch.setattr(cls, "generate", generate)
    x = torch.randn(4, cols)
    w, b = torch.randn(cols), torch.randn(cols)

    def f(x):
        return torch.softmax(torch.nn.functional.layer_norm(x, (cols,), w, b), dim=-1)

    def compile_once():
        torch._dynamo.reset()
        sources.clear()
        out = torch.compile(f, backend="tilefuse")(x)
        return list(sources), out

    native_src, native_out = compile_once()
    assert cse.KernelCSE()._scope_class is Scope
    monkeypatch.setattr(cse, "Scope", DictScope)
    python_src, python_out = compile_once()
    assert python_src and native_src == python_src
    torch.testing.assert_close(native_out, python_out)
    if cols == 8192:
        assert any("for roffset in range" in s for s in native_src)
