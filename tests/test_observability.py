"""Seeing what tilefuse did with torch's own tools (issue 45): the generated module on
``TORCH_LOGS=output_code`` and fusion decisions on ``TORCH_LOGS=fusion``; ``run_and_get_code``
(tilefuse's and Inductor's); ``TORCH_TRACE`` artifacts and the ``TORCH_COMPILE_DEBUG=1`` folder;
generated modules that run as scripts and time their kernels; graph cache entries carried by
``torch.compiler.save_cache_artifacts`` / ``load_cache_artifacts``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import tilefuse
from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401
from tilefuse import config, metrics
from tilefuse.utils import run_and_get_code

pytestmark = GPU_MARKS

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tilefuse.__file__)))


def _env(**extra: str) -> dict:
    """The environment of a child Python: this tilefuse first on the path, no graph cache."""
    env = dict(os.environ, TILEFUSE_GRAPH_CACHE="0")
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PKG_PARENT, env.get("PYTHONPATH")) if p)
    return env


def _two_kernels(x, y):
    return x.sum(1), y * 2  # two iteration spaces: two kernels, one refused fusion


def test_output_code_and_fusion_logs_and_run_and_get_code(capfd):
    """``set_logs(output_code=True, fusion=True)`` (``TORCH_LOGS=output_code,fusion``) prints the
    generated module and the fusion decisions through torch's handler; tilefuse's
    ``run_and_get_code`` and Inductor's both return the module's source."""
    from torch._inductor.utils import run_and_get_code as inductor_run_and_get_code

    x, y = torch.randn(16, 40), torch.randn(7)
    f = torch.compile(_two_kernels, backend="tilefuse")
    torch._logging.set_logs(output_code=True, fusion=True)
    try:
        (out, inductor_sources), sources = run_and_get_code(inductor_run_and_get_code, f, x, y)
    finally:
        torch._logging.set_logs()
    for a, b in zip(out, _two_kernels(x, y)):
        torch.testing.assert_close(a, b)
    assert metrics.generated_graph_count == 1 and metrics.generated_kernel_count == 2
    assert len(sources) == 1 and inductor_sources == sources
    src = sources[0]
    assert "def call(args):" in src and re.search(r"@_jit\ndef tf_\w+\(", src) and "tl.store(" in src
    err = capfd.readouterr().err
    kernel = re.search(r"def (tf_\w+)\(", src).group(1)
    assert re.search(rf"\[__output_code\].*def {kernel}\(", err), err[-3000:]
    assert re.search(r"\[__output_code\] Output code of tilefuse graph \w+ written to: .+\.py", err), err[-3000:]
    assert re.search(r"\[__fusion\] cannot fuse buf\d+ into kernel #0 .*: iteration_space", err), err[-3000:]


def test_output_code_is_silent_by_default(capfd):
    """Without ``output_code`` on, nothing of the module is printed."""
    torch.compile(lambda a: a.cos() + 1, backend="tilefuse")(torch.randn(5))
    assert "__output_code" not in capfd.readouterr().err


_SCRIPT = """
import torch
def f(x, w):  # a reduction, a matmul (extern), a sort (fallback: an operator constant) and a tensor constant
    y = torch.softmax(x @ w, -1) * torch.tensor([0.5, 2.0, 1.0, 3.0], device=x.device)
    return y, torch.argsort(y, -1)
torch.manual_seed(0)
x, w = torch.randn(6, 8, device=DEV), torch.randn(8, 4, device=DEV)
got = torch.compile(f, backend="tilefuse")(x, w)
torch.testing.assert_close(got[0], f(x, w)[0])
"""


@pytest.mark.skipif(sys.platform != "linux", reason="subprocess with torch's environment variables")
def test_torch_trace_and_compile_debug_folder_and_runnable_module(tmp_path):
    """``TORCH_TRACE`` gets tilefuse's artifacts; ``TORCH_COMPILE_DEBUG=1`` writes tilefuse's
    folder beside torch's (under ``TORCH_COMPILE_DEBUG_DIR``); the ``output_code.py`` written
    there runs as a script and prints the time per call and per kernel, with bytes and GB/s."""
    trace = tmp_path / "trace"
    env = _env(TORCH_TRACE=str(trace), TORCH_COMPILE_DEBUG="1", TORCH_COMPILE_DEBUG_DIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-c", f"DEV = {DEVICE!r}\n" + textwrap.dedent(_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    logged = "".join(p.read_text() for p in trace.iterdir())
    names = ("tilefuse_fx_graph", "tilefuse_ir_pre_fusion", "tilefuse_ir_post_fusion", "tilefuse_output_code")
    for name in names:
        assert f'"name": "{name}"' in logged, name
    if shutil.which("tlparse"):  # the dev requirements install it: tlparse's own pages list them
        site = tmp_path / "tl"
        r = subprocess.run(
            ["tlparse", *map(str, trace.iterdir()), "-o", str(site), "--no-browser", "--overwrite"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        pages = {p.name for p in site.rglob("tilefuse_*.txt")}
        assert {re.sub(r"_\d+\.txt$", "", p) for p in pages} == set(names), pages
        code = next(p for p in site.rglob("tilefuse_output_code_*.txt")).read_text()
        assert "def call(" in code and "_jit" in code, code[:500]
    (folder,) = (tmp_path / "torch_compile_debug").glob("run_*/tilefuse/*")
    files = {p.name: p.read_text() for p in folder.iterdir()}
    assert set(files) == {"fx_graph_readable.py", "ir_pre_fusion.txt", "ir_post_fusion.txt", "output_code.py"}
    assert "torch.ops.aten.mm" in files["fx_graph_readable.py"]
    assert re.search(r"buf\d+: ComputedBuffer \(Reduction\)", files["ir_pre_fusion.txt"])
    assert re.search(r"%\d+ = exp\(", files["ir_pre_fusion.txt"])
    assert re.search(r"#\d+ kernel tf_\w+ over", files["ir_post_fusion.txt"])
    assert re.search(r"#\d+ extern buf\d+: aten\.mm", files["ir_post_fusion.txt"])
    assert "  fusion: " in files["ir_post_fusion.txt"]
    assert "_embedded_constants = " in files["output_code.py"]

    out = subprocess.run(
        [sys.executable, str(folder / "output_code.py")],
        env=_env(TRITON_INTERPRET="1" if DEVICE == "cpu" else "0"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert re.match(rf"graph \w+ on {DEVICE}\S*: [\d.]+ ms per call", lines[0]), out.stdout
    rows = [ln.split() for ln in lines if ln.startswith("tf_")]
    assert rows, out.stdout
    for name, launches, nbytes, ms, gbps, *_ in rows:
        assert int(launches) >= 1 and int(nbytes) > 0 and float(ms) > 0 and float(gbps) >= 0, out.stdout
    assert "rest (extern calls, Python)" in lines[-1]


def test_cache_artifacts_carry_graph_cache_entries(tmp_path, monkeypatch):
    """A compile's graph cache entry goes into ``torch.compiler.save_cache_artifacts()``; a fresh
    process with an empty cache directory loads them (``torch.compiler.load_cache_artifacts``)
    and its compile of the same function is a graph cache hit with the same result."""
    from tilefuse.runtime import cache as rt_cache
    from tilefuse.runtime import graph_cache

    code = "def g(x):\n    return torch.softmax(x * 2, -1).cos()\n"
    ns: dict = {"torch": torch}
    exec(code, ns)
    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path / "first"))
    graph_cache.clear()
    x = torch.arange(24.0).reshape(4, 6) / 7
    with config.patch(graph_cache=True):
        want = torch.compile(ns["g"], backend="tilefuse")(x)
    assert metrics.generated_graph_count == 1
    data, info = torch.compiler.save_cache_artifacts()
    assert any(k.startswith("graphs/") for k in info.tilefuse_artifacts), info
    graph_cache.clear()
    (tmp_path / "artifacts.bin").write_bytes(data)
    child = (
        textwrap.dedent(f"""
        import json, torch
        import tilefuse.backend  # torch learns tilefuse's artifact type
        from tilefuse import metrics
        info = torch.compiler.load_cache_artifacts(open({str(tmp_path / "artifacts.bin")!r}, "rb").read())
    """)
        + code
        + textwrap.dedent(f"""
        x = torch.arange(24.0, device={DEVICE!r}).reshape(4, 6) / 7
        out = torch.compile(g, backend="tilefuse")(x)
        print(json.dumps({{"loaded": len(info.tilefuse_artifacts), "hits": metrics.graph_cache_hits,
                          "generated": metrics.generated_graph_count, "out": out.cpu().tolist()}}))
    """)
    )
    env = _env(TILEFUSE_GRAPH_CACHE="1", TILEFUSE_CACHE_DIR=str(tmp_path / "second"))
    run = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(run.stdout.strip().splitlines()[-1])
    assert res["loaded"] >= 1 and res["hits"] == 1 and res["generated"] == 0, (res, run.stderr[-2000:])
    torch.testing.assert_close(torch.tensor(res["out"], device="cpu"), want.cpu())


def test_cache_artifact_paths_stay_inside_the_cache_dir(tmp_path, monkeypatch):
    """An artifact is written only below ``graphs/`` or ``cubin/`` of the cache directory."""
    from tilefuse.runtime import cache as rt_cache
    from tilefuse.runtime.cache_artifacts import TilefuseCacheArtifact

    monkeypatch.setattr(rt_cache, "_CACHE_DIR", str(tmp_path / "c"))
    TilefuseCacheArtifact("graphs/k.pkl", b"entry").populate_cache()
    assert (tmp_path / "c" / "graphs" / "k.pkl").read_bytes() == b"entry"
    for bad in ("../evil", "graphs/../../evil", "other/x", "/abs/x", "graphs/"):
        TilefuseCacheArtifact(bad, b"x").populate_cache()
    assert sorted(p.name for p in (tmp_path / "c").rglob("*")) == ["graphs", "k.pkl"]


def test_generated_module_main_options(capsys, tmp_path):
    """``python <generated module>.py``'s options: ``--no-per-kernel`` says how many kernels the
    module defines (not "extern calls only"), and ``--iters`` below 1 is a usage error."""
    from tilefuse.runtime.benchmark import compiled_module_main

    _, (src,) = run_and_get_code(
        torch.compile(lambda a: a.cos() + 1, backend="tilefuse"), torch.randn(5, device=DEVICE)
    )
    path = tmp_path / "tf_generated_module.py"  # Triton's JIT reads its kernels' source from the file
    path.write_text(src)
    g: dict = {"__name__": "tf_generated_module"}
    exec(compile(src, str(path), "exec"), g)
    res = compiled_module_main(g, ["--no-per-kernel", "--iters", "1"])
    assert res["kernels"] == {} and res["defined"] == 1 and res["call_ms"] > 0, res
    out = capsys.readouterr().out
    assert "1 Triton kernel(s) defined, not timed one by one" in out and "extern calls only" not in out, out
    res = compiled_module_main(g, ["--iters", "1"])
    assert len(res["kernels"]) == 1 and next(iter(res["kernels"].values()))["bytes"] == 2 * 5 * 4, res
    for bad in ("0", "-2"):
        with pytest.raises(SystemExit):
            compiled_module_main(g, ["--iters", bad])
        assert "must be at least 1" in capsys.readouterr().err


def test_run_and_get_code_of_a_model_with_trainable_parameters():
    """A forward call of a model whose parameters require grad returns the forward's and the
    backward's modules (``eager_backward``, the default), forward first; under ``no_grad`` only the
    forward's; with ``eager_backward`` off the backward's only when ``fn`` runs the backward."""
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 4).to(DEVICE)
    x = torch.randn(2, 8, device=DEVICE)
    compiled = torch.compile(m, backend="tilefuse")

    def titles(sources):
        return [re.search(r"graph (\w+?)_\d+", s.splitlines()[0]).group(1) for s in sources]

    out, sources = run_and_get_code(compiled, x)
    torch.testing.assert_close(out, m(x))
    assert titles(sources) == ["forward", "backward"], [s.splitlines()[0] for s in sources]
    with torch.no_grad():
        assert titles(run_and_get_code(compiled, x)[1]) == ["inference"]
    with config.patch(eager_backward=False):
        assert titles(run_and_get_code(compiled, x)[1]) == ["forward"]
        assert titles(run_and_get_code(lambda t: compiled(t).sum().backward(), x)[1]) == ["forward", "backward"]


def test_load_cache_artifacts_takes_bytes_not_a_path(tmp_path):
    """``tilefuse.load_cache_artifacts`` given a path (str or Path) raises TypeError saying what it
    takes; bytes that are no artifacts give None, as torch's."""
    for wrong in ("warm.bin", tmp_path / "warm.bin"):
        with pytest.raises(TypeError, match=r"bytes save_cache_artifacts\(\) returned"):
            tilefuse.load_cache_artifacts(wrong)
    assert tilefuse.load_cache_artifacts(bytearray(b"no artifacts here")) is None
