"""The main job (``python -m tilefuse.demo``) at its tiny size on the CPU: GPT-2 from transformers
compiled by tilefuse must match eager, in inference and for one training step's gradients.

A run in which tilefuse gave up on a graph and ran it eagerly would match eager trivially, so these
tests also require that every graph Dynamo captured was compiled by tilefuse."""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip(
    "transformers", reason="the demo compiles transformers' GPT-2 (pip install -r requirements-dev.txt)"
)

from tilefuse import demo  # noqa: E402

# the tiny model on the CPU through Triton's interpreter (CI), or on CUDA when TRITON_INTERPRET=0
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET", "0") not in ("0", "") else "cuda"
if DEVICE == "cuda" and not torch.cuda.is_available():
    pytest.skip("TRITON_INTERPRET=0 without a CUDA GPU", allow_module_level=True)


def _assert_all_compiled(res: demo.Result) -> None:
    assert not res.failures, f"{len(res.failures)} graph(s) ran eagerly: {res.failures}"
    assert res.tilefuse_graphs >= 1
    assert res.generated_kernels >= 1


def test_build_gpt2_is_deterministic():
    m1, ids1 = demo.build_gpt2("tiny", "cpu", seed=3)
    m2, ids2 = demo.build_gpt2("tiny", "cpu", seed=3)
    assert torch.equal(ids1, ids2)
    for (n, a), (_, b) in zip(m1.named_parameters(), m2.named_parameters()):
        assert torch.equal(a, b), n
    assert ids1.shape == (demo.SIZES["tiny"]["batch"], demo.SIZES["tiny"]["seq"])


def test_demo_gpt2_inference_matches_eager():
    res = demo.run_gpt2(device=DEVICE, size="tiny", reps=1)
    assert res.logits_close, f"compiled logits differ from eager: max abs err {res.max_abs_err:.3g}"
    assert res.max_abs_err <= 1e-4
    _assert_all_compiled(res)


def test_demo_gpt2_training_step_grads_match_eager():
    res = demo.run_gpt2(device=DEVICE, size="tiny", train=True, reps=1, n_layer=1)
    assert res.grads_close, "gradients differ from eager:\n" + "\n".join(res.grad_mismatches)
    assert res.loss_err is not None and res.loss_err <= 1e-4
    _assert_all_compiled(res)


def test_demo_reports_partial_eager_runs(capsys):
    """Whatever the backend's state, the report must say how many graphs ran eagerly."""
    res = demo.run_gpt2(device=DEVICE, size="tiny", reps=1, n_layer=1)
    # the comparison itself must hold: a graph that ran eagerly is eager's result
    assert res.logits_close, f"max abs err {res.max_abs_err:.3g}"
    demo.report(res)
    out = capsys.readouterr().out
    assert (
        "Triton kernels in use" in out
        and "fallback kernels" in out
        and "first call (Dynamo + AOTAutograd + tilefuse)" in out
    )
    if res.failures:
        assert f"WARNING: {len(res.failures)} graph(s) could not be compiled" in out
    else:
        assert "no eager fallback" in out


def test_demo_main_exit_status(monkeypatch):
    """main() returns 1 (and says FAILED) when the compiled results differ from eager; the
    mismatch is forced by marking a real run's comparison as failed."""
    real = demo.run_gpt2

    def mismatching(**kw):
        res = real(**kw)
        res.logits_close = False
        return res

    monkeypatch.setattr(demo, "run_gpt2", mismatching)
    assert demo.main(["--device", DEVICE, "--size", "tiny", "--reps", "1"]) == 1


def test_demo_cuda_without_a_gpu_is_a_usage_error(monkeypatch, capsys):
    """``--device cuda`` on a machine without CUDA exits 2 (a usage error, as the docstring says),
    not 1 (which means the results differ from eager), and says what to do."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(demo, "run_gpt2", lambda **kw: pytest.fail("nothing should run"))
    with pytest.raises(SystemExit) as e:
        demo.main(["--device", "cuda", "--size", "tiny"])
    assert e.value.code == 2
    assert "--device cuda given but torch.cuda.is_available() is False: leave --device out" in capsys.readouterr().err


@pytest.mark.parametrize("reps", ["0", "-1"])
def test_demo_reps_below_one_is_a_usage_error(reps, monkeypatch, capsys):
    """``--reps 0`` used to end in a StatisticsError traceback after compiling; now it exits 2
    before anything runs (and ``run_gpt2(reps=0)`` is a ValueError)."""
    monkeypatch.setattr(demo, "run_gpt2", lambda **kw: pytest.fail("nothing should run"))
    with pytest.raises(SystemExit) as e:
        demo.main(["--reps", reps])
    assert e.value.code == 2
    assert f"--reps {reps}: give at least 1 timed call" in capsys.readouterr().err
    monkeypatch.undo()
    with pytest.raises(ValueError, match="reps=0: give at least 1"):
        demo.run_gpt2(device="cpu", reps=0)


def test_symbolic_section_runs(capsys):
    assert demo.main(["--symbolic"]) == 0
    assert "all checks passed" in capsys.readouterr().out


def _result(**kw) -> demo.Result:
    base = dict(
        device="cpu",
        size="tiny",
        config=dict(demo.SIZES["tiny"]),
        logits_close=True,
        max_abs_err=0.0,
        compile_s=0.1,
        eager_ms=1.0,
        compiled_ms=1.0,
    )
    return demo.Result(**{**base, **kw})


def test_report_counts_graphs_reused_from_the_graph_cache(capsys):
    demo.report(_result(compiled_graphs=0, cached_graphs=2, generated_kernels=5))
    out = capsys.readouterr().out
    assert "graphs compiled by tilefuse: 0 (2 reused from the graph cache)" in out
    assert "every graph Dynamo captured was compiled by tilefuse, 2 of them" in out and "no eager fallback" in out
    demo.report(_result(compiled_graphs=3))
    out = capsys.readouterr().out
    assert "graphs compiled by tilefuse: 3\n" in out and "reused from the graph cache" not in out
    assert "every graph Dynamo captured was compiled by tilefuse (no eager fallback)" in out


def test_main_counts_cached_graphs_as_compiled(monkeypatch, capsys):
    """A run whose only tilefuse graphs came from the graph cache is not "trivially" OK: those
    graphs ran tilefuse's code."""
    failure = "tilefuse: compiling forward graph 'forward_1' failed (X: y); running that graph eagerly"
    for cached, trivial in ((1, False), (0, True)):
        monkeypatch.setattr(demo, "run_gpt2", lambda **kw: _result(cached_graphs=cached, failures=[failure]))
        assert demo.main(["--device", "cpu", "--size", "tiny", "--reps", "1"]) == 0
        out = capsys.readouterr().out
        assert ("OK only trivially" in out) == trivial
        assert "WARNING: 1 graph(s) could not be compiled" in out


def test_demo_second_run_reuses_graphs_from_the_graph_cache(tmp_path, monkeypatch, capsys):
    from tilefuse import config
    from tilefuse.runtime import cache as rt_cache
    from tilefuse.runtime import graph_cache

    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path / "tfcache"))
    graph_cache.clear()
    try:
        with config.patch(graph_cache=True):
            first = demo.run_gpt2(device=DEVICE, size="tiny", reps=1, n_layer=1)
            second = demo.run_gpt2(device=DEVICE, size="tiny", reps=1, n_layer=1)
    finally:
        graph_cache.clear()
    assert first.logits_close and second.logits_close
    assert first.compiled_graphs >= 1 and first.cached_graphs == 0
    assert second.compiled_graphs == 0 and second.cached_graphs == first.compiled_graphs
    assert not second.failures and second.generated_kernels == first.generated_kernels
    demo.report(second)
    out = capsys.readouterr().out
    assert f"graphs compiled by tilefuse: 0 ({second.cached_graphs} reused from the graph cache)" in out
    assert "no eager fallback" in out


def test_report_says_when_the_interpreter_is_off_and_the_timing_is_eagers(capsys, monkeypatch):
    """On the CPU without TRITON_INTERPRET=1 the graphs run eagerly: the header says the
    interpreter is off, and the time per call is not presented as tilefuse's."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    demo.report(_result(failures=["graph 'inference_0' failed (RuntimeError: set TRITON_INTERPRET=1)"]))
    out = capsys.readouterr().out
    assert "Triton interpreter OFF" in out and "ran eagerly: not a tilefuse figure" in out
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    demo.report(_result(compiled_graphs=1))
    out = capsys.readouterr().out
    assert "on CPU, Triton interpreter\n" in out and "interpreter: not a performance figure" in out
