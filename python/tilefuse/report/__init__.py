"""The kernel report: run a workload, then read per kernel what it fused, how many bytes it moved,
how long it took, and how close it came to the device's measured peaks, in one HTML page.

From the command line (``python -m tilefuse.report --help``)::

    python -m tilefuse.report -o report.html train.py --steps 3

runs ``train.py`` (its arguments after the script's name) with collection on and writes the page.
In-process::

    import tilefuse.report
    with tilefuse.report.collect() as rep:
        model = torch.compile(model, backend="tilefuse")
        for _ in range(3):
            model(x)
    rep.write_html("report.html")

or ``TILEFUSE_REPORT=report.html python train.py``: collection starts when tilefuse is imported
and the page is written when the process exits.

What is measured and how: ``tilefuse.report.collect`` (the data), ``tilefuse.report.peaks`` (the
device's peaks), ``tilefuse.report.page`` (the page). Call the compiled functions at least twice:
a call's time is the median over the calls after the first.
"""

from __future__ import annotations

import atexit
import datetime
import os
import platform
import sys

import torch

from .collect import Collector, GraphRecord, ItemRecord
from .page import EAGER_WHY, render
from .peaks import Peaks, measure_peaks

__all__ = ["Collector", "GraphRecord", "ItemRecord", "Peaks", "Report", "collect", "measure_peaks"]


class Report(Collector):
    """A ``Collector`` that writes the HTML page (``write_html``)."""

    workload: str = ""

    def devices(self) -> list[str]:
        """The devices of the graphs compiled while collecting, in first-seen order."""
        return list(dict.fromkeys(g.device for g in self.graphs))

    def html(self, peaks: bool | Peaks = True) -> str:
        """The page. ``peaks``: True measures the device's peaks now (``measure_peaks``, about a
        second), False leaves them out, or pass a ``Peaks``."""
        self.stop()
        if peaks is True:
            devs = self.devices()
            p = measure_peaks(devs[0] if devs else ("cuda" if torch.cuda.is_available() else "cpu"))
        else:
            p = peaks or None
        import triton

        devs = self.devices()
        name = torch.cuda.get_device_name() if any(d.startswith("cuda") for d in devs) else platform.processor()
        meta = {
            "Workload": self.workload or " ".join(sys.argv),
            "Device": f"{', '.join(devs) or 'none'} ({name or platform.machine()})" + _interpreter_note(),
            "Versions": f"torch {torch.__version__}, triton {triton.__version__}, Python {platform.python_version()}",
            "Written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        }
        return render(self.graphs, p, meta, eager_graphs=self.eager_graphs)

    def summary(self) -> str:
        """One line on what the report holds: its graphs, kernels and calls, and the graphs that
        ran eagerly and so are not in it (with what to do about it)."""
        n = sum(len(g.items) for g in self.graphs)
        line = f"{len(self.graphs)} graph(s), {n} kernels and calls"
        if self.eager_graphs:
            line += f"; {self.eager_graphs} graph(s) ran eagerly and are not in it ({EAGER_WHY})"
        return line

    def write_html(self, path: str | os.PathLike, peaks: bool | Peaks = True) -> str:
        """Stop collecting and write the page to ``path`` (its folder made if needed); returns
        the path. OSError when it cannot be written."""
        text = self.html(peaks)
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path


def _interpreter_note() -> str:
    """The page's word on Triton's interpreter: whether it ran the CPU kernels, and whether
    tilefuse switched it on (a process without a CUDA GPU that imported tilefuse before triton)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return ""
    from .. import backend

    if backend.interpreter_switched_on:
        return (
            "; Triton's interpreter, switched on by tilefuse (no CUDA GPU, TRITON_INTERPRET unset): the "
            "script run on its own runs its CPU graphs eagerly unless TRITON_INTERPRET=1 is set before "
            "torch is imported"
        )
    return "; Triton's interpreter (TRITON_INTERPRET=1)"


def collect(reset_dynamo: bool = True) -> Report:
    """A ``Report`` collecting from now (also a context manager: ``with collect() as rep``; the
    ``with`` block's end stops collecting). ``reset_dynamo``: reset Dynamo first, so functions
    compiled earlier compile again and are seen (their graphs are otherwise not in the report)."""
    return Report(reset_dynamo).start()


def _collect_until_exit(path: str) -> Report:
    """``TILEFUSE_REPORT=<path>``: collect for the whole process and write the page at exit (from
    ``import tilefuse``: nothing was compiled by tilefuse before, so Dynamo is not reset)."""
    rep = collect(reset_dynamo=False)
    pid = os.getpid()

    def write() -> None:
        if os.getpid() != pid:  # a forked child exiting through Python: the parent writes the page
            return
        try:
            path_written = rep.write_html(path)
            print(f"tilefuse: kernel report written to {path_written}: {rep.summary()}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - at exit, say why rather than print a traceback
            print(f"tilefuse: kernel report not written to {path!r}: {type(e).__name__}: {e}", file=sys.stderr)

    atexit.register(write)
    return rep
