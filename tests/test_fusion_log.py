"""The fusion rules (``tilefuse.scheduler.fusion``) and their debug log on ``tilefuse.fusion``:
each refused fusion is logged with the rule that refused it and the concrete values, each
accepted one with the rules it passed; the compiled results still equal eager's."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from _tf_testutil import scheduled
from tilefuse import config
from tilefuse.ir import graph_context as G
from tilefuse.scheduler import RULES, KernelGroup, Refusal, SchedulerNode, fusion

FUSION_LOG = "tilefuse.fusion"


def _fusion_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == FUSION_LOG]


def _refusals(lines: list[str]) -> list[tuple[str, str, str, str]]:
    """(node, kernel, rule, reason) of each ``cannot fuse`` line."""
    out = []
    for line in lines:
        m = re.fullmatch(r"cannot fuse (\S+) into (.+?): (\w+): (.+)", line)
        if m:
            out.append(m.groups())
    return out


def _schedule_logged(caplog, fn, *args, decompose=False):
    with caplog.at_level(logging.DEBUG, logger=FUSION_LOG):
        items, graph = scheduled(fn, *args, decompose=decompose)
    return items, graph, _fusion_lines(caplog)


def _assert_compiles_like_eager(fn, *args, atol=1e-5, rtol=1e-5):
    want = fn(*args)
    got = torch.compile(fn, backend="tilefuse")(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol)


def test_a_pointwise_node_over_another_numel_is_refused_by_iteration_space(caplog):
    """Row sums of x (64 rows of 300) and then y·2 over 7 elements: neither 64 nor 64·300
    elements, so the row-sum kernel cannot take it; the log names the rule and both spaces."""

    def f(x, y):
        return x.sum(1), y * 2

    args = torch.randn(64, 300), torch.randn(7)
    items, _, lines = _schedule_logged(caplog, f, *args)
    assert [(g.numel, g.rnumel) for g in items if isinstance(g, KernelGroup)] == [(64, 300), (7, 1)]
    refused = _refusals(lines)
    assert len(refused) == 1, lines
    node, kernel, rule, reason = refused[0]
    assert rule == "iteration_space" and kernel.startswith("kernel #0 [") and kernel.endswith("over (64, 300)")
    assert reason == "node (numel, rnumel) = (7, 1), kernel (64, 300)"
    assert any(line.startswith(f"new kernel #1 [{node}] over (7, 1) for {node}") for line in lines), lines
    _assert_compiles_like_eager(f, *args)


def test_an_epilogue_that_fuses_is_logged_with_the_rules_it_passed(caplog):
    """2·rowsum joins the row-sum kernel as its epilogue ('x'): one ``fused`` line naming the
    kernel, the kind and every rule it passed, and no refusal."""

    def f(x):
        return x.sum(1) * 2 + 1

    x = torch.randn(64, 300)
    items, _, lines = _schedule_logged(caplog, f, x)
    assert len(items) == 1 and len(items[0].nodes) == 2
    assert _refusals(lines) == []
    (fused,) = [line for line in lines if line.startswith("fused ")]
    m = re.fullmatch(r"fused (\S+) into kernel #0 \[(\S+)\] over \(64, 300\) as x \(latest; passed (.+)\)", fused)
    assert m, fused
    assert m.group(1) == items[0].nodes[1].name and m.group(2) == items[0].nodes[0].name
    passed = m.group(3).split(", ")
    kernel_rules = [r.__name__ for r in fusion.KERNEL_RULES]
    assert set(kernel_rules) <= set(passed) and "loop_guest" in passed
    _assert_compiles_like_eager(f, x)


def test_max_fusion_size_refusal_with_a_patched_limit(caplog, monkeypatch):
    """With ``config.MAX_FUSION_SIZE`` patched to 2, three independent outputs over one space
    make kernels of 2 and 1 nodes; the third is refused by max_fusion_size with both counts."""
    monkeypatch.setattr(config, "MAX_FUSION_SIZE", 2)

    def f(a, b, c):
        return a * 2, b + 3, c.sin()

    args = tuple(torch.randn(8, 16) for _ in range(3))
    items, _, lines = _schedule_logged(caplog, f, *args)
    assert [len(i.nodes) for i in items] == [2, 1]
    refused = [r for r in _refusals(lines) if r[2] == "max_fusion_size"]
    assert refused and refused[0][3] == "the kernel has 2 nodes, MAX_FUSION_SIZE is 2", lines
    _assert_compiles_like_eager(f, *args)


def test_an_in_place_update_kernel_takes_no_other_node(caplog):
    """index_add's atomic update of the zero-initialized buffer is a kernel of its own: the
    reader of its result, over the same 32 elements, is refused by in_place_update (naming the
    updated buffer) and, one kernel further back, by written_in_between (the initializing kernel
    wrote what the update changes after it)."""

    def f(x, b, y):
        z = torch.zeros(4, 8).index_add(0, b, x)
        return z * 2 + y

    args = torch.randn(4, 8), torch.tensor([0, 1, 1, 3]), torch.randn(4, 8)
    items, _, lines = _schedule_logged(caplog, f, *args)
    assert [len(i.nodes) for i in items] == [1, 1, 1]
    init, update = items[0].nodes[0].name, items[1].nodes[0].name
    assert any(line.startswith(f"new kernel #1 [{update}]") and "in-place update" in line for line in lines), lines
    rules = {(kernel.split(" [")[0], rule, reason) for _, kernel, rule, reason in _refusals(lines)}
    assert ("kernel #1", "in_place_update", f"the kernel updates {init} in place") in rules, lines
    assert ("kernel #0", "written_in_between", f"it reads ['{init}'], written by an item in between") in rules
    _assert_compiles_like_eager(f, *args)


def test_a_read_at_another_index_than_written_is_refused(caplog):
    """The row sums reversed (``s.flip(0)``) read s at 63 - xindex where the kernel wrote it at
    xindex: that value is in another program's registers, so the epilogue gets a kernel of its
    own (read_at_written_index names both indices)."""

    def f(x):
        s = x.sum(1)
        return s, s.flip(0) * 2

    x = torch.randn(64, 300)
    items, _, lines = _schedule_logged(caplog, f, x)
    assert len(items) == 2
    (refused,) = _refusals(lines)
    assert refused[2] == "read_at_written_index", lines
    assert re.search(r"reads buf\d+ at .*xindex.*, written at xindex by buf\d+", refused[3]), refused
    _assert_compiles_like_eager(f, x)


def test_an_outer_reduction_refuses_an_unrelated_pointwise_node_in_its_loop(caplog):
    """A column sum (outer reduction) and a pointwise node over the whole input that touches no
    buffer at an index the kernel does: refused by outer_reduction_mix."""

    def f(x, g):
        y = x * g
        return y.sum(0), y * 2 + x

    args = torch.randn(64, 48), torch.randn(64, 48)
    _, _, lines = _schedule_logged(caplog, f, *args)
    refused = [r for r in _refusals(lines) if r[2] == "outer_reduction_mix"]
    assert refused and "(xr) would meet an outer reduction" in refused[0][3], lines
    _assert_compiles_like_eager(f, *args)


def test_few_rows_long_loop_with_patched_thresholds(caplog, monkeypatch):
    """8 row sums of 300 elements take x·3 (2400 elements) into their loop by default; with
    ``config.LONG_ROW`` patched to 100 the rows count as long and few, and few_rows_long_loop
    refuses it, naming the rows, their length and both thresholds."""

    def f(x):
        return x.sum(1), x * 3

    x = torch.randn(8, 300)
    items, _, lines = _schedule_logged(caplog, f, x)
    # reads nothing the row sums write (a loop guest), but no other kernel takes it
    assert len(items) == 1 and [r[2] for r in _refusals(lines)] == ["loop_guest"]
    assert any(line.startswith("fused ") and " as xr (a loop guest" in line for line in lines), lines
    caplog.clear()
    monkeypatch.setattr(config, "LONG_ROW", 100)
    items, _, lines = _schedule_logged(caplog, f, x)
    assert len(items) == 2
    (refused,) = _refusals(lines)
    assert refused[2] == "few_rows_long_loop"
    assert refused[3].endswith("would run inside a loop over 8 rows of 300 elements (FEW_ROWS 64, LONG_ROW 100)")
    _assert_compiles_like_eager(f, x)


def test_loop_guest_and_producer_first_send_a_node_to_its_producer(caplog):
    """A full sum of y (one output, 64 elements) between the row sums of x and t = 2·rowsum:
    t fits the full sum's loop first but reads nothing it writes (loop_guest, kept as the last
    resort), then joins its producer, the row-sum kernel, as its epilogue."""

    def f(x, y):
        s = x.sum(1)
        c = y.sum()
        return c, s * 2

    args = torch.randn(64, 300), torch.randn(64)
    items, _, lines = _schedule_logged(caplog, f, *args)
    (guest,) = [r for r in _refusals(lines) if r[2] == "loop_guest"]
    assert guest[1].startswith("kernel #1 [") and guest[3].endswith("kept as the last resort"), guest
    assert any(
        line.startswith(f"fused {guest[0]} into kernel #0 [") and "its producer" in line and "producer_first" in line
        for line in lines
    ), lines
    _assert_compiles_like_eager(f, *args)


def test_a_far_node_refused_by_far_guest_few_rows(caplog):
    """y·2 shares y with the full sum of y ten kernels back, beyond the lookback: inside that
    one-output sum's loop it would run on one program (far_guest_few_rows)."""

    def f(y, *zs):
        c = y.sum()
        outs = [z.cos().sum(0) for z in zs]
        return (c, y * 2, *outs)

    args = (torch.randn(8, 300), *(torch.randn(3, 5 + k) for k in range(config.FUSION_LOOKBACK + 2)))
    _, _, lines = _schedule_logged(caplog, f, *args)
    refused = [r for r in _refusals(lines) if r[2] == "far_guest_few_rows"]
    assert refused and refused[0][1].startswith("kernel #0 [") and "1 rows, fewer than FEW_ROWS 64" in refused[0][3]
    _assert_compiles_like_eager(f, *args, atol=1e-3)


def test_extern_calls_and_their_outputs_in_the_log(caplog):
    """A product (extern call) between a kernel and a reader of its result: the reader is
    refused by extern_call at the product and by written_in_between before it."""

    def f(a, w):
        b = a.sin() * 2
        c = b @ w
        return c, c * 3

    args = torch.randn(4, 8), torch.randn(8, 4)
    _, _, lines = _schedule_logged(caplog, f, *args)
    rules = [r[2] for r in _refusals(lines)]
    assert "extern_call" in rules and "written_in_between" in rules, lines
    _assert_compiles_like_eager(f, *args)


def test_nothing_is_logged_unless_debug_is_on(caplog):
    def f(x, y):
        return x.sum(1), y * 2

    with caplog.at_level(logging.INFO, logger=FUSION_LOG):
        scheduled(f, torch.randn(64, 300), torch.randn(7))
    assert _fusion_lines(caplog) == []


# ------------------------------------------------------------------ every rule, called directly


class _FakeNode(SimpleNamespace):
    """A stand-in for a SchedulerNode, hashed by identity as the real one (``eq=False``)."""

    __hash__ = object.__hash__
    __eq__ = object.__eq__


def _fake_node(name, *, reduction=False, writes=(), hint=None, mutation_of=None):
    node = _FakeNode(
        name=name,
        numel=7,
        rnumel=1,
        is_reduction=lambda: reduction,
        is_mutation=lambda: mutation_of is not None,
        write_names=frozenset(writes),
        buf=SimpleNamespace(target=SimpleNamespace(name=mutation_of)),
    )
    if hint is not None:
        node._reduction_hint = hint
    return node


def _rule_cases(real_node, graph) -> dict:
    """A call of each rule that makes it refuse, by rule."""
    red = _fake_node("r", reduction=True, hint="outer", writes=("s",))
    pw = _fake_node("p")
    maps = {pw: ("xr", {}, [("a", 1)], [("p", 2)]), red: ("red", {}, [("a", 3)], [("s", 0)])}
    writer, reader = _fake_node("w"), _fake_node("q")
    regs = {writer: ("xr", {}, [], [("t", "xindex*300 + rindex")]), reader: ("x", {}, [("t", "xindex")], [])}
    same = {writer: regs[writer], reader: ("x", {}, [("t", "xindex*300 + rindex")], [])}
    guest = KernelGroup([red, pw], 1, 64, {pw: ("xr", {}, [], [])})
    with G.set_graph(graph):
        return {
            fusion.extern_call: fusion.extern_call(SimpleNamespace(name="buf9")),
            fusion.written_in_between: fusion.written_in_between({"buf1", "buf2"}, {"buf2", "buf3"}),
            fusion.iteration_space: fusion.iteration_space(KernelGroup([], 64, 300), pw),
            fusion.in_place_update: fusion.in_place_update(KernelGroup([_fake_node("m", mutation_of="buf4")], 7, 1)),
            fusion.max_fusion_size: fusion.max_fusion_size(KernelGroup([pw] * config.MAX_FUSION_SIZE, 7, 1)),
            fusion.every_node_maps: fusion.every_node_maps([real_node], real_node.numel + 1, 1, {}),
            fusion.few_rows_long_loop: fusion.few_rows_long_loop([pw], 8, config.LONG_ROW + 1, {pw: ("xr",)}),
            fusion.outer_reduction_mix: fusion.outer_reduction_mix(KernelGroup([red], 7, 1), pw, maps),
            fusion.read_at_written_index: fusion.read_at_written_index([writer, reader], regs),
            fusion.x_reads_loop_value: fusion.x_reads_loop_value([writer, reader], same),
            fusion.loop_guest: fusion.loop_guest(guest, pw, {"a"}),
            fusion.producer_first: fusion.producer_first(KernelGroup([red], 7, 1), {"a"}, 3),
            fusion.far_guest_few_rows: fusion.far_guest_few_rows(guest, pw, {"a"}),
        }


def test_every_rule_has_a_docstring_and_refuses_under_its_own_name():
    """Each rule in ``RULES`` states its rule in a docstring, and its refusal carries its own
    name and a reason with the concrete values; the cases cover every rule in the list (a new
    rule needs a case here)."""
    items, graph = scheduled(lambda x: x.sum(1), torch.randn(4, 8))
    real = items[0].nodes[0]
    assert isinstance(real, SchedulerNode)
    cases = _rule_cases(real, graph)
    assert set(cases) == set(RULES) and len(RULES) == len({r.__name__ for r in RULES})
    for rule in RULES:
        assert rule.__doc__ and len(rule.__doc__.split()) >= 15, rule.__name__
        refusal = cases[rule]
        assert isinstance(refusal, Refusal), rule.__name__
        assert refusal.rule == rule.__name__
        assert refusal.reason and "%" not in refusal.reason, (rule.__name__, refusal.reason)
    assert cases[fusion.written_in_between].reason == "it reads ['buf2'], written by an item in between"
    assert cases[fusion.in_place_update].reason == "the kernel updates buf4 in place"
    assert cases[fusion.every_node_maps].reason.startswith(f"{real.name} (numel 4, rnumel 8)")
    assert cases[fusion.x_reads_loop_value].reason == "q (once per row) reads t, written inside the loop by w"
    assert "a loop-guest fit at item #3 is pending" in cases[fusion.producer_first].reason


def test_try_fuse_returns_the_first_refusal_in_rule_order():
    """``try_fuse`` stops at the first refusing rule: a full kernel is refused for its size
    before its iteration space is looked at."""
    items, graph = scheduled(lambda x, y: (x.sum(1), y * 2), torch.randn(64, 300), torch.randn(7))
    rows, other = items
    with G.set_graph(graph):
        r = fusion.try_fuse(rows, other.nodes[0])
        assert r.rule == "iteration_space"
        full = KernelGroup(rows.nodes * config.MAX_FUSION_SIZE, rows.numel, rows.rnumel, rows.maps)
        assert fusion.try_fuse(full, other.nodes[0]).rule == "max_fusion_size"
        fused = fusion.try_fuse(KernelGroup([], 7, 1), other.nodes[0])
        assert isinstance(fused, KernelGroup) and fused.maps[other.nodes[0]][0] == "x"


@pytest.mark.skipif(sys.platform != "linux", reason="subprocess with TORCH_LOGS")
def test_torch_logs_shows_the_fusion_log(tmp_path):
    """``TORCH_LOGS=+tilefuse`` (torch's logging settings, by module name) shows the fusion
    decisions through torch's handler, without any handler set up by the program."""
    script = tmp_path / "run.py"
    script.write_text(
        "import torch\n"
        "f = torch.compile(lambda x, y: (x.sum(1), y * 2), backend='tilefuse')\n"
        "f(torch.randn(64, 300), torch.randn(7))\n"
    )
    env = dict(os.environ, TORCH_LOGS="+tilefuse", TRITON_INTERPRET="1", TILEFUSE_GRAPH_CACHE="0")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [os.path.dirname(config.__file__) + "/..", env.get("PYTHONPATH")] if p
    )
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"cannot fuse buf\d+ into kernel #0 \[buf\d+\] over \(64, 300\): iteration_space", out.stderr), (
        out.stderr[-2000:]
    )
