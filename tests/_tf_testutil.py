"""Shared by the test modules: which device the end-to-end tests run on, and lowering + scheduling
a function without compiling it.

``TRITON_INTERPRET=1`` (the default, set by conftest.py): CPU tensors through Triton's
interpreter. ``TRITON_INTERPRET=0`` on a GPU machine: the same tests on CUDA, carrying the ``gpu``
marker (``GPU_MARKS``)."""

from __future__ import annotations

import logging
import os

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("0", "")
DEVICE = "cpu" if INTERPRET else "cuda"
GPU_MARKS = (
    []
    if DEVICE == "cpu"
    else [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]
)


@pytest.fixture(autouse=True)
def strict_on_device():
    """Autouse (in every test module that imports it): the test runs with ``DEVICE`` as torch's
    default device, with a fresh Dynamo state and counters, tilefuse's metrics zeroed, and
    compile errors raised instead of falling back to eager (``config.fallback_on_error``)."""
    from tilefuse import config, metrics

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    metrics.reset()
    prev = torch.get_default_device()
    torch.set_default_device(DEVICE)
    try:
        with config.patch(fallback_on_error=False):
            yield
    finally:
        torch.set_default_device(prev)
        torch._dynamo.reset()


def scheduled(fn, *args, decompose: bool = False):
    """(scheduled items, graph): ``fn`` traced to an aten graph (with the backend's
    decompositions when ``decompose``), lowered and scheduled."""
    from tilefuse.graph import GraphLowering
    from tilefuse.ir import graph_context as G
    from tilefuse.decompositions import decompositions
    from tilefuse.lowering import lowerings
    from tilefuse.scheduler import schedule

    gm = make_fx(fn, decomposition_table=decompositions(lowered=lowerings) if decompose else None)(*args)
    graph = GraphLowering(gm, list(args), "test")
    graph.run()
    with G.set_graph(graph):
        return schedule(graph.buffers), graph


def groups_of(fn, *args):
    """(kernel groups, graph) of ``fn`` (see ``scheduled``)."""
    from tilefuse.scheduler import KernelGroup

    items, graph = scheduled(fn, *args)
    return [i for i in items if isinstance(i, KernelGroup)], graph


class FallbackReasons(logging.Handler):
    """While installed (``with FallbackReasons() as r``), collects the lines in which graph
    lowering says why an op runs as an aten fallback kernel (``r.lines``): a test that asserts
    "no fallback kernel ran" names the ops and reasons when it fails."""

    _MARKS = ("no lowering for", "declined", "needs static sizes", "cannot hold")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._logger = logging.getLogger("tilefuse")
        self._level = self._logger.level

    def emit(self, record):
        msg = record.getMessage()
        if any(m in msg for m in self._MARKS):
            self.lines.append(msg)

    def __enter__(self):
        self._level = self._logger.level
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc):
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
        return False
