"""The Triton generator's parts on their own: the op table (``codegen.triton_ops``), the eviction
rule (``codegen.heuristics.eviction_policies``) and the kernel's CSE table (``codegen.cse``)."""

from __future__ import annotations

import torch

from tilefuse.codegen import triton_ops
from tilefuse.codegen.cse import KernelCSE
from tilefuse.codegen.heuristics import LoadSite, eviction_policies, next_pow2

# the math ops of the loop-body vocabulary the Triton table renders (memory, constant, index,
# cast, reduction and scan ops are emitted by the kernel itself)
MATH_OPS = {
    "add", "sub", "mul", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor",
    "rand", "randn", "randint64", "truediv", "floordiv", "truncdiv", "remainder", "fmod", "ipow",
    "lshift", "rshift", "atan", "atan2", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh",
    "hypot", "signbit", "neg", "abs", "reciprocal", "relu", "maximum", "minimum", "fmax", "fmin",
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "sigmoid", "erf", "erf_poly", "floor", "ceil",
    "log10", "expm1", "log1p", "tanh", "tan", "trunc", "round", "sign", "pow", "logical_and",
    "logical_or", "logical_xor", "logical_not", "bitwise_not", "isnan", "isinf",
}  # fmt: skip


def _render(op, x, dtype, interpret=True):
    lines = []

    def cse(expr):
        lines.append(expr)
        return f"t{len(lines)}"

    return triton_ops.math_source(op, triton_ops.MathCall(x, dtype, [None] * len(x), cse, interpret)), lines


def test_the_op_table_covers_the_math_vocabulary_by_name():
    assert set(triton_ops.MATH_OPS) == MATH_OPS
    try:
        _render("no_such_op", ["a"], torch.float32)
    except NotImplementedError as e:
        assert "ops.no_such_op" in str(e)
    else:
        raise AssertionError("an unknown op must raise")


def test_op_table_entries_render_their_rules():
    assert _render("add", ["a", "b"], torch.bool)[0] == "a | b"  # bool + bool is logical or
    assert _render("add", ["a", "b"], torch.float32)[0] == "a + b"
    assert _render("neg", ["a"], torch.float32)[0] == "a * -1.0"  # flips the sign of a zero
    assert _render("floor", ["a"], torch.int32)[0] == "a"
    assert _render("expm1", ["a"], torch.float32, interpret=False)[0] == "libdevice.expm1(a)"
    if torch.version.hip is None:  # the PTX instruction on NVIDIA GPUs
        assert "inline_asm_elementwise" in _render("rsqrt", ["a"], torch.float32, interpret=False)[0]
    assert _render("rsqrt", ["a"], torch.float32)[0] == "tl.rsqrt(a)"
    # interpreter formulas name their intermediates through the CSE function, in order
    src, named = _render("atan", ["a"], torch.float32)
    assert named[0] == "a.to(tl.float64)" and src.endswith(".to(tl.float32)")


def test_casts_follow_torch():
    assert triton_ops.cast("x", torch.float32, torch.bool, False) == "(x != 0)"
    assert triton_ops.cast("x", torch.bool, torch.float32, False) == "x.to(tl.int8).to(tl.float32)"
    assert "0x7FFF" in triton_ops.cast("x", torch.float32, torch.bfloat16, True)  # RNE on the bits
    assert triton_ops.cast("x", torch.float32, torch.bfloat16, False) == "x.to(tl.bfloat16)"
    assert triton_ops.const_literal(300, torch.int8) == "44"  # wraps as torch does
    assert triton_ops.reduction_identity("max", torch.int32) == str(-(2**31))
    assert next_pow2(1) == 1 and next_pow2(5) == 8


def test_eviction_policies():
    sites = [
        LoadSite(3, "in_ptr0", 0, False),  # read again in loop 1: keep
        LoadSite(4, "in_ptr1", 0, False),  # read once: stream
        LoadSite(5, "in_ptr2", -1, True),  # every row-program reads it: keep
        LoadSite(9, "in_ptr0", 1, False),  # the last read
        LoadSite(12, "in_ptr3", -1, False),  # outside the loops
    ]
    assert eviction_policies(sites, looped=True, persistent_reduce_only=False) == [
        "evict_last",
        "evict_first",
        "evict_last",
        "evict_first",
        None,
    ]
    per_row = [LoadSite(2, "in_ptr0", -1, False), LoadSite(3, "in_ptr1", -1, True)]
    assert eviction_policies(per_row, looped=False, persistent_reduce_only=True) == ["evict_first", "evict_last"]
    assert eviction_policies(per_row, looped=False, persistent_reduce_only=False) == [None, "evict_last"]


def test_kernel_cse_scopes():
    t = KernelCSE()
    t.bind("a + b", "tmp1")
    t.enter_loop()
    assert t.lookup("a + b") == "tmp1"  # the kernel's definitions are visible in a loop
    t.bind("c * d", "tmp2")
    assert t.lookup("c * d") == "tmp2"
    t.leave_loop()
    assert t.lookup("c * d") is None  # a loop's definitions end with it
    t.enter_loop()
    assert t.lookup("c * d") is None and t.lookup("a + b") == "tmp1"
