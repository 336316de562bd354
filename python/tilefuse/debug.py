"""What a graph's compile did, shown through torch's own debugging outlets.

``GraphDebug`` follows one compile (``backend._lower_and_generate``) and hands each stage's
artifact to:

* torch's structured trace (``TORCH_TRACE=<dir>``, read by ``tlparse``):
  ``torch._logging.trace_structured("artifact", ...)`` entries named ``tilefuse_fx_graph`` (the
  aten graph handed to tilefuse), ``tilefuse_ir_pre_fusion`` (every buffer of the lowered IR with
  its loop body), ``tilefuse_ir_post_fusion`` (the scheduled kernels and extern calls, each
  kernel with its nodes and the fusion decisions about them) and ``tilefuse_output_code`` (the
  generated module), under the compile id Dynamo is compiling;
* the debug folder of ``TORCH_COMPILE_DEBUG=1`` (torch's ``torch._inductor.config.trace.enabled``,
  which may also be patched in-process): ``<torch's debug dir>/tilefuse/<graph name>/`` holding
  ``fx_graph_readable.py``, ``ir_pre_fusion.txt``, ``ir_post_fusion.txt`` and ``output_code.py``
  (the module with its constants, runnable: ``python output_code.py`` times it,
  ``runtime.benchmark``). torch's debug dir is ``torch._inductor.config.trace.debug_dir`` when
  set, else ``torch._dynamo.utils.get_debug_dir()``: ``<TORCH_COMPILE_DEBUG_DIR or the working
  directory>/torch_compile_debug/run_<time>-pid_<pid>``, beside Inductor's ``torchinductor/`` and
  Dynamo's ``torchdynamo/`` folders;
* ``logs.emit_output_code``: ``TORCH_LOGS=output_code``, ``tilefuse.utils.run_and_get_code``,
  Inductor's ``run_and_get_code``.

The graph and IR texts are made only when one of the first two wants them: a debug folder, or
``TORCH_TRACE`` (``TORCH_DTRACE``) set in the environment, which is how torch's trace is switched
on (torch asks for a payload whenever its trace logger has a handler, which a test runner's log
capture also gives it; the texts cost a second trace of every loop body).
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Callable

import torch

from . import logs
from .ir import graph_context as G
from .ir import nodes as ir
from .scheduler import ExternSchedulerNode, KernelGroup, SchedulerNode

_folder_ids = itertools.count()


def trace_requested() -> bool:
    """Whether torch's structured trace was asked for in the environment (``TORCH_TRACE``, or
    ``TORCH_DTRACE``, read by torch at import)."""
    return bool(os.environ.get("TORCH_TRACE") or os.environ.get("TORCH_DTRACE"))


def debug_root() -> str | None:
    """tilefuse's folder inside torch's compile-debug folder when ``TORCH_COMPILE_DEBUG=1``
    (``torch._inductor.config.trace.enabled``), else None."""
    from torch._inductor import config as inductor_config

    if not inductor_config.trace.enabled:
        return None
    from torch._dynamo.utils import get_debug_dir

    return os.path.join(inductor_config.trace.debug_dir or get_debug_dir(), "tilefuse")


def _new_folder(root: str, name: str) -> str | None:
    """A new folder ``<root>/<name>`` (``<name>.<k>`` when that exists); None, with a warning
    on the ``tilefuse`` logger, when it cannot be made (the compile goes on without it)."""
    path = os.path.join(root, name)
    try:
        while os.path.exists(path):
            path = os.path.join(root, f"{name}.{next(_folder_ids)}")
        os.makedirs(path)
    except OSError as e:
        logs.log.warning("tilefuse: no debug folder for graph %s (%s: %s)", name, type(e).__name__, e)
        return None
    return path


def _write(folder: str, filename: str, text: str) -> None:
    """``text`` to ``<folder>/<filename>``; a failure is a warning on the ``tilefuse`` logger."""
    try:
        with open(os.path.join(folder, filename), "w") as f:
            f.write(text)
    except OSError as e:
        logs.log.warning("tilefuse: %s not written to %s (%s: %s)", filename, folder, type(e).__name__, e)


class GraphDebug:
    """The debugging outlets of one graph's compile (module docstring). Create it with the
    aten graph before lowering; call ``pre_fusion``, ``fusion_capture`` (around scheduling),
    ``post_fusion`` and ``output_code`` as the compile goes."""

    def __init__(self, gm: torch.fx.GraphModule, name: str):
        self.name = name
        root = debug_root()
        self.folder = _new_folder(root, name) if root is not None else None
        self.tracing = trace_requested()
        self._emit("tilefuse_fx_graph", lambda: gm.print_readable(print_output=False), "fx_graph_readable.py")

    @property
    def wanted(self) -> bool:
        """Whether a debug folder or the structured trace takes the IR texts."""
        return self.folder is not None or self.tracing

    def _emit(self, artifact: str, payload_fn: Callable[[], str], filename: str) -> None:
        """One text to the trace (as artifact ``artifact``) and the debug folder (as
        ``filename``), made once, only when either wants it."""
        if not self.wanted:
            return
        text = payload_fn()
        if self.tracing:
            torch._logging.trace_structured(
                "artifact", metadata_fn=lambda: {"name": artifact, "encoding": "string"}, payload_fn=lambda: text
            )
        if self.folder is not None:
            _write(self.folder, filename, text)

    def pre_fusion(self, graph: Any) -> None:
        """The lowered IR (``graph``: the GraphLowering after ``run``)."""
        self._emit("tilefuse_ir_pre_fusion", lambda: format_buffers(graph), "ir_pre_fusion.txt")

    def fusion_capture(self) -> Any:
        """A context collecting the fusion decisions of the block (``logs.capture_fusion``) when
        they are wanted, else one collecting nothing."""
        import contextlib

        return logs.capture_fusion() if self.wanted else contextlib.nullcontext([])

    def post_fusion(self, items: list, item_kernels: dict, decisions: list) -> None:
        """The scheduled items, each kernel named as generated (``item_kernels``: item position
        -> kernel name) with the fusion ``decisions`` ((node, text) pairs) about its nodes."""
        self._emit(
            "tilefuse_ir_post_fusion", lambda: format_items(items, item_kernels, decisions), "ir_post_fusion.txt"
        )

    def output_code(self, source: str, constants: dict, path: str | None) -> None:
        """The generated module (``path``: the file it was loaded from)."""
        emit_output_code(self.name, source, constants, path, self.folder)


def emit_output_code(name: str, source: str, constants: dict, path: str | None, folder: str | None = None) -> None:
    """A compiled graph's module to every outlet: ``logs.emit_output_code``, the structured
    trace (``tilefuse_output_code``) and, with ``TORCH_COMPILE_DEBUG=1``, ``output_code.py`` in
    the graph's debug folder (a new folder for a graph taken from the graph cache, which has only
    that file)."""
    logs.emit_output_code(name, source, path)
    torch._logging.trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": "tilefuse_output_code", "encoding": "string"},
        payload_fn=lambda: source,
    )
    if folder is None:
        root = debug_root()
        if root is None:
            return
        folder = _new_folder(root, name)
        if folder is None:
            return
    from .runtime import DebugDirError, write_debug_source

    try:
        write_debug_source(source, folder, name, constants, path=os.path.join(folder, "output_code.py"))
    except DebugDirError as e:
        logs.log.warning("%s", e)


# ---------------------------------------------------------------------------------- IR text
def _arg(a: Any) -> str:
    if isinstance(a, torch.dtype):
        return str(a).replace("torch.", "")
    if isinstance(a, tuple):
        return "(" + ", ".join(_arg(x) for x in a) + ")"
    return str(a)


def format_body(body: Any, indent: str = "    ") -> list[str]:
    """A LoopBody as lines: its loop ranges, then one line per op (``%k = op(args)  # dtype``)."""
    ranges = ", ".join(f"{v}: {n}" for v, n in body.var_ranges.items())
    lines = [f"{indent}loops ({ranges})"]
    for k, n in enumerate(body.nodes):
        dt = f"  # {_arg(n.dtype)}" if n.dtype is not None else ""
        lines.append(f"{indent}%{k} = {n.op}({', '.join(_arg(a) for a in n.args)}){dt}")
    return lines


def _layout(buf: Any) -> str:
    L = getattr(buf, "layout", None)
    if L is None:
        return "(multi-output)"
    size = ", ".join(str(s) for s in L.size)
    stride = ", ".join(str(s) for s in L.stride)
    return f"{_arg(L.dtype)}[{size}] stride ({stride}) on {L.device}"


def format_buffers(graph: Any) -> str:
    """Every buffer of a lowered graph, in creation order: its name, kind, layout and, for a
    computed buffer, its loop body (traced as the scheduler traces it); for an extern call, the
    op and its inputs. The graph's inputs and constants come first."""
    lines = [f"# tilefuse IR of graph {graph.name} before fusion"]
    for name, buf in graph.graph_inputs.items():
        lines.append(f"{name}: {type(buf).__name__} {_layout(buf)}")
    with G.set_graph(graph):
        for buf in graph.buffers:
            lines.append("")
            if isinstance(buf, ir.ComputedBuffer):
                kind = type(buf.data).__name__
                lines.append(f"{buf.name}: {type(buf).__name__} ({kind}) {_layout(buf)}")
                try:
                    lines += format_body(SchedulerNode.create(buf).body)
                except Exception as e:  # noqa: BLE001 - a debug text: say what failed, go on
                    lines.append(f"    (body not traced: {type(e).__name__}: {e})")
            elif isinstance(buf, ir.MultiOutput):
                path = "".join(f"[{p}]" for p in buf.path)
                lines.append(f"{buf.name}: MultiOutput {buf.parent.name}{path} {_layout(buf)}")
            elif isinstance(buf, ir.ExternKernel):
                ins = ", ".join(getattr(x, "name", None) or type(x).__name__ for x in buf.inputs)
                lines.append(f"{buf.name}: {type(buf).__name__} {buf.op}({ins}) {_layout(buf)}")
            else:
                lines.append(f"{buf.name}: {type(buf).__name__} {_layout(buf)}")
    return "\n".join(lines) + "\n"


def format_items(items: list, item_kernels: dict, decisions: list) -> str:
    """The scheduled items in call order: each kernel with its generated name, iteration space,
    nodes (how each sits in the kernel and its loop body) and the fusion decisions about them;
    each extern call with its op."""
    by_node: dict[str, list[str]] = {}
    for node, text in decisions:
        by_node.setdefault(node, []).append(text)
    lines = ["# tilefuse kernels and extern calls after fusion, in call order"]
    for i, it in enumerate(items):
        lines.append("")
        if isinstance(it, KernelGroup):
            kname = item_kernels.get(i, "(no kernel: nothing it computes is used)")
            lines.append(f"#{i} kernel {kname} over ({it.numel}, {it.rnumel}): {len(it.nodes)} node(s)")
            for n in it.nodes:
                kind = it.maps.get(n, ("?",))[0] if hasattr(it, "maps") else "?"
                lines.append(f"  {n.name} as {kind!r}: {_layout(n.buf)}")
                lines += format_body(n.body, "      ")
            for n in it.nodes:
                for text in by_node.get(n.name, ()):
                    lines.append(f"  fusion: {text}")
        elif isinstance(it, ExternSchedulerNode):
            buf = it.buf
            what = getattr(buf, "op", None) or type(buf).__name__
            lines.append(f"#{i} extern {buf.name}: {what} {_layout(buf)}")
        else:
            lines.append(f"#{i} {type(it).__name__}")
    return "\n".join(lines) + "\n"
