"""The kernel report (``tilefuse.report``): a small MLP + LayerNorm workload run with collection on,
in-process and through ``python -m tilefuse.report`` / ``TILEFUSE_REPORT`` in a subprocess; the
written page is parsed (``html.parser``) and its structure and numbers checked: kernel rows with
their fused aten ops, bytes > 0, times > 0, the ranking sorted by total time, the roofline SVG,
the extern matrix products with their FLOPs, and refused fusions with their rules and reasons.
A headless Chromium, when one is installed, renders the page to a screenshot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser

import pytest
import torch

from _tf_testutil import DEVICE, GPU_MARKS, strict_on_device  # noqa: F401
from tilefuse import config, metrics
from tilefuse.scheduler import RULES

pytestmark = GPU_MARKS

_PYTHONPATH = os.pathsep.join(
    p for p in [os.path.dirname(os.path.dirname(config.__file__)), os.environ.get("PYTHONPATH")] if p
)


def mlp_ln(x, w1, b1, w2, g, y):
    """An MLP (two products, bias + GELU), a LayerNorm over its output, and y·2 over 7 elements:
    a node over another iteration space than the row kernel's (an ``iteration_space`` refusal)."""
    h = torch.nn.functional.gelu(x @ w1 + b1)
    z = torch.nn.functional.layer_norm(h @ w2, (w2.shape[1],), g)
    return z, y * 2


def _args():
    torch.manual_seed(0)
    return (
        torch.randn(8, 16),
        torch.randn(16, 32),
        torch.randn(32),
        torch.randn(32, 16),
        torch.randn(16),
        torch.randn(7),
    )


class _Page(HTMLParser):
    """Rows of the page's tables (``{table id or class: [(tr attrs, [cell texts])]}``), the
    peaks' attributes, and whether the roofline figure holds an ``<svg>``."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list] = {}
        self.peaks: dict = {}
        self.svg_in_figure = False
        self._table = self._row = self._cell = None
        self._figure = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") or a.get("class")
            self.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table and ("data-kind" in a or "data-rule" in a):
            self._row = (a, [])
            self.tables[self._table].append(self._row)
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "figure" and a.get("id") == "roofline-figure":
            self._figure = True
        elif tag == "svg" and self._figure:
            self.svg_in_figure = True
        elif tag == "p" and a.get("id") == "peaks":
            self.peaks = a

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row[1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "figure":
            self._figure = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _check_page(text: str, peaks: bool) -> _Page:
    """The structure and numbers every report of ``mlp_ln`` has."""
    page = _Page(text)
    ranking = [a for a, _ in page.tables["ranking"]]
    kernels = [a for a in ranking if a["data-kind"] == "kernel"]
    externs = [a for a in ranking if a["data-kind"] == "extern"]
    assert len(kernels) >= 2 and len(externs) == 2, ranking
    totals = [float(a["data-total"]) for a in ranking]
    assert totals == sorted(totals, reverse=True), totals
    for a in ranking:
        assert float(a["data-seconds"]) > 0 and int(a["data-bytes"]) > 0 and int(a["data-calls"]) == 3, a
        assert a["data-name"] and a["data-graph"]
    # the products: 2·m·n·k FLOPs each, from torch's FLOP formulas
    assert sorted(float(a["data-flops"]) for a in externs) == [2 * 8 * 16 * 32] * 2
    assert all(a["data-name"] == "aten.mm.default" for a in externs)
    # kernels: their fused aten ops (the GELU, the LayerNorm), arithmetic and bytes
    kern_rows = page.tables["kernels"]
    ops = " ".join(cells[2] for _, cells in kern_rows)
    assert "gelu" in ops.split() and "native_layer_norm" in ops.split() and "mul" in ops, ops
    assert all(float(a["data-flops"]) > 0 for a, _ in kern_rows)
    assert sum(len(cells) == 13 for _, cells in kern_rows) == len(kern_rows)
    # refused fusions: named rules with their reasons, the iteration-space one among them
    refusals = page.tables["refusals"]
    assert refusals and all(a["data-rule"] in {r.__name__ for r in RULES} and cells[4] for a, cells in refusals)
    spaces = [cells[4] for a, cells in refusals if a["data-rule"] == "iteration_space"]
    assert any("(7, 1)" in s for s in spaces), refusals
    assert page.svg_in_figure, "no roofline <svg> in figure#roofline-figure"
    if peaks:
        assert float(page.peaks["data-bandwidth"]) > 0 and float(page.peaks["data-flops"]) > 0, page.peaks
    return page


def test_report_in_process(tmp_path):
    """``collect()`` around three calls of a compiled MLP + LayerNorm: the results equal eager's,
    the page has every launch and call with its numbers, and once the collection stops the
    compiled graph runs its own ``call`` again (no timing)."""
    pytest.importorskip("matplotlib")
    import tilefuse.report

    args = _args()
    with tilefuse.report.collect() as rep:
        f = torch.compile(mlp_ln, backend="tilefuse")
        for _ in range(3):
            got = f(*args)
    for g, w in zip(got, mlp_ln(*args)):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    assert metrics.generated_kernel_count >= 2 and metrics.fallback_kernel_count == 0
    assert len(rep.graphs) == 1
    assert not rep.running and rep.graphs[0].device.startswith(DEVICE)
    fake = tilefuse.report.Peaks(DEVICE, 1e10, {"float32": 1e11}, "given")
    path = rep.write_html(tmp_path / "sub" / "report.html", peaks=fake)
    page = _check_page(open(path, encoding="utf-8").read(), peaks=True)
    assert float(page.peaks["data-bandwidth"]) == 1e10
    # collection stopped: another call adds no sample
    n = [len(it.samples) for it in rep.graphs[0].items]
    f(*args)
    assert [len(it.samples) for it in rep.graphs[0].items] == n


def test_refused_fusions_name_kernels_by_their_numbers_in_the_graph_tables(tmp_path):
    """A refused fusion's row names the kernel that refused the node and the kernel it ended in by
    the numbers of the graph's Kernels and extern tables (the graph's call order: the matrix
    products come first, so the scheduler's positions are not the page's numbers). Checked
    against the fusion log captured beside the report: the row numbered as the refusing kernel
    holds every buffer the log says that kernel held, and the row it ended in holds the node."""
    import re

    import tilefuse.report
    from tilefuse import logs

    with logs.capture_fusion() as decisions, tilefuse.report.collect() as rep:
        f = torch.compile(mlp_ln, backend="tilefuse")
        for _ in range(2):
            f(*_args())
    page = _Page(rep.html(peaks=tilefuse.report.Peaks(DEVICE, 1e10, {"float32": 1e11})))
    # the graph's tables: number -> (kind, buffers)
    rows = {int(c[0]): ("kernel", set(c[3].split(", "))) for _, c in page.tables["kernels"]}
    rows.update({int(c[0]): ("extern", {c[2]}) for _, c in page.tables["externs"]})
    assert sorted(rows) == list(range(len(rows))) and len(rows) == len(rep.graphs[0].items) == 5, rows
    assert [rows[i][0] for i in range(5)][:2] == ["extern", "kernel"], rows  # mm, then GELU's kernel
    logged = {}
    for node, text in decisions:
        m = re.fullmatch(r"cannot fuse (\S+) into (kernel|extern) #\d+ \[?([^\]]*?)\]?( over .*)?: (\w+): .*", text)
        if m:
            logged.setdefault((node, m[5]), []).append((m[2], set(m[3].split(", "))))
    refusals = page.tables["refusals"] + page.tables.get("refusals-routine", [])
    assert len(refusals) == len(logged) >= 2, (refusals, logged)
    space = [cells for a, cells in refusals if a["data-rule"] == "iteration_space"]
    assert space and "(7, 1)" in space[0][4], refusals
    for a, cells in refusals:
        node, rule = a["data-node"], a["data-rule"]
        by = [int(n) for n in a["data-by"].split()]
        assert len(by) == len(logged[node, rule]) == int(a["data-count"]), (a, logged[node, rule])
        for n, (kind, held) in zip(by, logged[node, rule]):
            assert rows[n][0] == kind and held <= rows[n][1], (node, rule, n, rows[n], held)
        assert cells[2].startswith(f"#{by[0]} "), cells
        ended = int(a["data-ended"])
        assert rows[ended][0] == "kernel" and node in rows[ended][1] and cells[5].startswith(f"#{ended} "), cells


def test_a_graph_the_report_cannot_record_runs_as_compiled(monkeypatch):
    """A failure while recording a graph (here: tracing its fused ops) leaves that graph out of
    the report with one warning; the graph still runs tilefuse's kernels and gives eager's result."""
    import tilefuse.report
    from tilefuse.ir import loops

    def broken(*args):
        raise RuntimeError("origins unavailable")

    monkeypatch.setattr(loops, "buffer_origins", broken)
    x = torch.randn(4, 8)
    with tilefuse.report.collect() as rep:
        f = torch.compile(lambda t: t.sin() * 2, backend="tilefuse")
        with pytest.warns(UserWarning, match="left out of the report .*origins unavailable"):
            got = f(x)
    torch.testing.assert_close(got, x.sin() * 2)
    assert rep.graphs == [] and metrics.generated_kernel_count == 1 and metrics.eager_graph_count == 0


_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    sys.path.insert(0, {tests!r})
    from test_report import mlp_ln, _args

    assert sys.argv[1:] == ["--steps", "3"], sys.argv
    f = torch.compile(mlp_ln, backend="tilefuse", options={{"fallback_on_error": False}})
    args = [a.to({device!r}) for a in _args()]
    for _ in range(int(sys.argv[2])):
        out = f(*args)
    for g, w in zip(out, mlp_ln(*args)):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    """
)


def _run(cmd: list[str], tmp_path, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=_PYTHONPATH, TILEFUSE_CACHE_DIR=str(tmp_path / "cache"), **env)
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600, cwd=tmp_path)


@pytest.mark.skipif(sys.platform != "linux", reason="subprocess")
def test_report_command_and_environment_variable(tmp_path):
    """``python -m tilefuse.report -o page.html script.py --steps 3`` runs the script with its
    arguments and writes the page (peaks measured); ``TILEFUSE_REPORT=page.html python
    script.py`` writes the same report at exit."""
    pytest.importorskip("matplotlib")
    script = tmp_path / "work.py"
    script.write_text(_SCRIPT.format(tests=os.path.dirname(__file__), device=DEVICE))
    out = tmp_path / "cli.html"
    r = _run([sys.executable, "-m", "tilefuse.report", "-o", str(out), str(script), "--steps", "3"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "kernel report of 1 graph(s)" in r.stderr
    _check_page(out.read_text(encoding="utf-8"), peaks=True)
    env_out = tmp_path / "env.html"
    r = _run([sys.executable, str(script), "--steps", "3"], tmp_path, TILEFUSE_REPORT=str(env_out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"kernel report written to {env_out}" in r.stderr
    _check_page(env_out.read_text(encoding="utf-8"), peaks=True)
    # a script that is not there: a usage error naming it
    r = _run([sys.executable, "-m", "tilefuse.report", str(tmp_path / "nope.py")], tmp_path)
    assert r.returncode == 2 and "no such script" in r.stderr


_CPU_SCRIPT = textwrap.dedent(
    """
    import torch

    f = torch.compile(lambda x: x.sin() * 2, backend="tilefuse")
    x = torch.randn(4, 8)
    for _ in range(2):
        torch.testing.assert_close(f(x), x.sin() * 2)
    """
)


@pytest.mark.skipif(sys.platform != "linux" or torch.cuda.is_available(), reason="subprocess, no CUDA GPU")
def test_report_command_on_a_machine_without_a_gpu(tmp_path):
    """Without a CUDA GPU and with TRITON_INTERPRET unset, ``python -m tilefuse.report`` switches
    Triton's interpreter on and says so, on stderr and in the page's Device line: the CPU graph is
    in the report as a kernel. With TRITON_INTERPRET=0 the graph runs eagerly; the page and the
    console count it as left out, instead of suggesting nothing was compiled with tilefuse."""
    script = tmp_path / "cpu work.py"  # a space in the path
    script.write_text(_CPU_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "out dir" / "on.html"
    cmd = [sys.executable, "-m", "tilefuse.report", "--no-peaks", "-o", str(out), str(script)]
    r = subprocess.run(
        cmd,
        env=dict(env, PYTHONPATH=_PYTHONPATH, TILEFUSE_CACHE_DIR=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Triton's interpreter is on for this run" in r.stderr and "UserWarning" not in r.stderr, r.stderr
    assert "kernel report of 1 graph(s), 1 kernels and calls:" in r.stderr, r.stderr
    text = out.read_text(encoding="utf-8")
    assert "switched on by tilefuse" in text and 'id="eager"' not in text
    assert [a["data-kind"] for a, _ in _Page(text).tables["ranking"]] == ["kernel"]

    off = tmp_path / "off.html"
    r = _run(
        [sys.executable, "-m", "tilefuse.report", "--no-peaks", "-o", str(off), str(script)],
        tmp_path,
        TRITON_INTERPRET="0",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "interpreter is on" not in r.stderr and "run eagerly" in r.stderr, r.stderr
    assert "kernel report of 0 graph(s), 0 kernels and calls; 1 graph(s) ran eagerly" in r.stderr, r.stderr
    text = off.read_text(encoding="utf-8")
    assert 'id="eager" data-count="1"' in text and "the graphs it was given ran eagerly" in text
    assert "switched on" not in text and "was the workload compiled" not in text


def test_report_main_runs_a_module(tmp_path, monkeypatch):
    """``python -m tilefuse.report -m MODULE args`` (``main`` called in the process): the module
    runs as ``__main__`` with its arguments, and the page has its graph."""
    pytest.importorskip("matplotlib")
    from tilefuse.report.__main__ import main

    (tmp_path / "tf_report_work.py").write_text(_SCRIPT.format(tests=os.path.dirname(__file__), device=DEVICE))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "m.html"
    assert main(["-o", str(out), "--no-peaks", "-m", "tf_report_work", "--steps", "3"]) == 0
    page = _check_page(out.read_text(encoding="utf-8"), peaks=False)
    assert "not measured" in out.read_text(encoding="utf-8") and not page.peaks.get("data-bandwidth")
    with pytest.raises(SystemExit):
        main(["-o", str(out)])  # nothing to run: a usage error
    with pytest.raises(SystemExit) as e:
        main(["-o", str(out), "-m", "tf_report_no_such_module.sub"])  # a usage error, not a traceback
    assert e.value.code == 2


def test_report_main_output_paths_and_a_script_that_raises(tmp_path, capsys):
    """``-o`` naming a folder is a usage error before the script runs; a page that cannot be
    written is said in one line with status 1; a script that raises gets its traceback, its page
    written, and status 1; a script that compiles nothing gets a page that says so."""
    from tilefuse.report.__main__ import main

    script = tmp_path / "no graph.py"
    script.write_text("import sys\nprint('ran', sys.argv[1:])\n")
    with pytest.raises(SystemExit) as e:
        main(["--no-peaks", "-o", str(tmp_path), str(script)])
    assert e.value.code == 2 and "is a folder" in capsys.readouterr().err
    (tmp_path / "a file").write_text("")
    assert main(["--no-peaks", "-o", str(tmp_path / "a file" / "r.html"), str(script), "-o", "x"]) == 1
    out, err = capsys.readouterr()
    assert "ran ['-o', 'x']" in out and "kernel report not written to" in err and "Traceback" not in err, err
    page = tmp_path / "page.html"
    assert main(["--no-peaks", "-o", str(page), str(script)]) == 0
    assert (
        'id="no-graphs"' in page.read_text(encoding="utf-8")
        and "kernel report of 0 graph(s)" in capsys.readouterr().err
    )
    script.write_text("raise ValueError('the script failed')\n")
    assert main(["--no-peaks", "-o", str(page), str(script)]) == 1
    err = capsys.readouterr().err
    assert "ValueError: the script failed" in err and f"kernel report of 0 graph(s), 0 kernels and calls: {page}" in err


def _browser() -> str | None:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.skipif(_browser() is None, reason="no headless Chromium installed")
def test_report_renders_in_chromium(tmp_path):
    """The page of a small run, rendered by headless Chromium to a PNG screenshot of a plausible
    size (a page that failed to render is a few kB of white)."""
    pytest.importorskip("matplotlib")
    import tilefuse.report

    with tilefuse.report.collect() as rep:
        f = torch.compile(lambda x: torch.softmax(x, -1) * 2, backend="tilefuse")
        for _ in range(2):
            f(torch.randn(4, 32))
    page = rep.write_html(tmp_path / "r.html", peaks=tilefuse.report.Peaks(DEVICE, 1e10, {"float32": 1e11}))
    shot = tmp_path / "shot.png"
    r = subprocess.run(
        [
            _browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,900",
            f"--screenshot={shot}",
            f"file://{page}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, len(data)


def test_no_cyclic_collection_runs_inside_a_timed_cpu_launch():
    """A full collection takes hundreds of ms on a big heap: on the CPU it would be charged to
    whichever launch it interrupts, so the collector is off inside each timed launch and extern
    call, and as it was afterwards (also after one that raised)."""
    import gc

    from tilefuse.report.collect import ItemRecord, _GraphTimers

    rec = ItemRecord(kind="kernel", graph="g", name="k", buf="buf0", device="cpu")
    ext = ItemRecord(kind="extern", graph="g", name="aten.mm", buf="buf1", device="cpu")
    timers = _GraphTimers(None, [rec], {"buf1": ext}, cuda=False)
    seen = []

    def launch(*args):
        seen.append(gc.isenabled())

    def fails(*args):
        seen.append(gc.isenabled())
        raise RuntimeError("launch failed")

    assert gc.isenabled()
    timers.kernel(0, launch, torch.ones(4))
    timers.extern("buf1", lambda a: seen.append(gc.isenabled()) or a * 2, torch.ones(4))
    with pytest.raises(RuntimeError, match="launch failed"):
        timers.kernel(0, fails, torch.ones(4))
    assert seen == [False, False, False] and gc.isenabled()
    assert rec.calls >= 1 and all(t >= 0 for t in rec.samples)
