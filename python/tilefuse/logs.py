"""tilefuse's loggers (Python ``logging``) and its outlets into torch's logging, named in one place.

``tilefuse`` is the package's logger (graph compiles, fallbacks, cache and memory-order
decisions); ``tilefuse.fusion`` (a child: whatever shows ``tilefuse`` at DEBUG shows it too) logs
the scheduler's fusion decisions at DEBUG, one line per decision: ``cannot fuse <node> into
<kernel>: <rule>: <reason>``, ``fused <node> into <kernel> as <kind> (...)`` and ``new <kernel>
for <node>: <why>``.

Turn them on with ``logging.getLogger("tilefuse").setLevel(logging.DEBUG)`` (plus a handler,
e.g. ``logging.basicConfig()``), or through torch's logging settings: ``TORCH_LOGS="+tilefuse"``
(``torch._logging.set_logs(modules={"tilefuse": logging.DEBUG})``) enables ``tilefuse`` and its
children with torch's handler; torch accepts the name because it is an importable module.

torch's own artifact names reach tilefuse's output too, through loggers made by torch's
``getArtifactLogger`` under the ``torch.tilefuse`` name (so they print through the handler torch
puts on its ``torch`` logger, and ``TORCH_LOGS_OUT`` files):

* ``TORCH_LOGS=output_code`` (``set_logs(output_code=True)``): every compiled graph's generated
  module (wrapper and Triton kernels) and the file it was loaded from (``output_code_log``);
* ``TORCH_LOGS=fusion`` (``set_logs(fusion=True)``): the fusion decisions above, when the
  ``tilefuse.fusion`` logger is not on already (each decision is printed once).

tilefuse registers no artifact name of its own: torch reads ``TORCH_LOGS`` when it is imported,
before tilefuse could register one (an unknown name makes ``import torch`` raise), and a name
registered later takes effect only through torch's private re-initialization. The two names above
are the ones torch documents for the same information from Inductor.

Besides the loggers, ``capture_fusion`` and ``capture_code`` collect the same decisions and
generated sources for a caller (the debug folder, ``tilefuse.utils.run_and_get_code``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch._logging

LOG_NAME = "tilefuse"
FUSION_LOG_NAME = "tilefuse.fusion"
TORCH_LOG_PREFIX = "torch.tilefuse"

log = logging.getLogger(LOG_NAME)
fusion_log = logging.getLogger(FUSION_LOG_NAME)
output_code_log = torch._logging.getArtifactLogger(TORCH_LOG_PREFIX, "output_code")
torch_fusion_log = torch._logging.getArtifactLogger(TORCH_LOG_PREFIX, "fusion")

# active captures: lists receiving (node name, decision text) / generated module sources
_fusion_captures: list[list[tuple[str, str]]] = []
_code_captures: list[list[str]] = []


def artifact_enabled(logger: logging.Logger) -> bool:
    """Whether torch's logging settings turned the artifact logger ``logger`` on. torch sets an
    artifact logger that is off by default to DEBUG and ``propagate`` only when its name is
    enabled; its level alone also says DEBUG when an ancestor (``+inductor``) is at DEBUG, while
    its records then reach no handler."""
    return logger.propagate and logger.isEnabledFor(logging.DEBUG)


def fusion_enabled() -> bool:
    """Whether fusion decisions are wanted: the ``tilefuse.fusion`` logger at DEBUG, torch's
    ``fusion`` artifact on, or a ``capture_fusion`` block open (checked once per ``schedule``)."""
    return bool(_fusion_captures) or fusion_log.isEnabledFor(logging.DEBUG) or artifact_enabled(torch_fusion_log)


def log_fusion(node: str, msg: str, *args: object, extra: dict | None = None) -> None:
    """One fusion decision about node ``node`` (a buffer name), ``msg % args``: to
    ``tilefuse.fusion`` at DEBUG if that is on, else to torch's ``fusion`` artifact if that is
    on; and to every open ``capture_fusion`` list. ``extra``: attributes set on the log record
    (``logging``'s ``extra``), for handlers that read the decision's parts."""
    if fusion_log.isEnabledFor(logging.DEBUG):
        fusion_log.debug(msg, *args, extra=extra)
    elif artifact_enabled(torch_fusion_log):
        torch_fusion_log.debug(msg, *args, extra=extra)
    if _fusion_captures:
        text = msg % args
        for sink in _fusion_captures:
            sink.append((node, text))


@contextlib.contextmanager
def capture_fusion() -> Iterator[list[tuple[str, str]]]:
    """Collect the fusion decisions made inside the block, as ``(node name, text)`` pairs in
    order, into the list it yields (whatever the loggers' levels)."""
    sink: list[tuple[str, str]] = []
    _fusion_captures.append(sink)
    try:
        yield sink
    finally:
        _fusion_captures.remove(sink)


@contextlib.contextmanager
def capture_code() -> Iterator[list[str]]:
    """Collect the source of every module a graph compiled (or taken from the graph cache)
    inside the block uses, in order, into the list it yields."""
    sink: list[str] = []
    _code_captures.append(sink)
    try:
        yield sink
    finally:
        _code_captures.remove(sink)


def emit_output_code(graph_name: str, source: str, path: str | None) -> None:
    """A compiled graph's generated module ``source`` (loaded from ``path``): logged on torch's
    ``output_code`` artifact, handed to open ``capture_code`` lists, and to the hook Inductor's
    ``torch._inductor.utils.run_and_get_code`` installs (``GraphLowering.save_output_code``,
    looked up only when ``torch._inductor.graph`` is imported: nothing else sets it)."""
    if artifact_enabled(output_code_log):
        output_code_log.debug("Output code of tilefuse graph %s:\n%s", graph_name, source)
        if path:
            output_code_log.debug("Output code of tilefuse graph %s written to: %s", graph_name, path)
    for sink in _code_captures:
        sink.append(source)
    import sys

    inductor_graph = sys.modules.get("torch._inductor.graph")
    hook = getattr(getattr(inductor_graph, "GraphLowering", None), "save_output_code", None)
    if hook is not None:
        hook(source)
