"""CUDA graphs for compiled graphs (``mode="reduce-overhead"``, option ``cudagraphs``).

A compiled graph's callable (forward, backward or inference) is handed to torch's CUDA-graph
trees, ``torch._inductor.cudagraph_trees.cudagraphify_impl``, the machinery Inductor's
``reduce-overhead`` mode uses: one private memory pool per device shared by every graph of a
step (a forward and its backward record into the same pool, in the order they run), an eager
warm-up run before each recording, parameters and buffers as static inputs whose addresses are
checked at each replay (a changed address records again), other tensor inputs copied into the
pool's static buffers, outputs valid until the graph runs again (a replay writes into the same
output tensors; an output of the warm-up or the recording read after the next call raises
torch's error), ``torch.compiler.cudagraph_mark_step_begin()`` honoured, and one recording per
distinct value of the graph's integer inputs (its dynamic sizes).

What this module adds around the trees, each rule with its reason:

- ``skip_reason``: a graph that cannot be captured runs without CUDA graphs, logged once on the
  ``tilefuse`` logger (INFO for a graph with no CUDA tensor, where there is nothing to capture;
  WARNING otherwise, as Inductor's ``log_cudagraph_skip_and_bump_counter``) and counted in
  ``metrics.cudagraph_skip_count`` and Inductor's ``counters["inductor"]["cudagraph_skips"]``:
  CPU tensors, several devices, an op Inductor's ``get_first_incompatible_cudagraph_node`` names
  (host syncs, data-dependent sizes), non-tensor inputs other than sizes and generators, inputs
  with internal memory overlap, a mutated input that is not static, and symbolic sizes under
  Inductor's ``triton.cudagraph_skip_dynamic_graphs``.
- The first call runs outside the trees (for a graph compiled per shape, the first call at each
  size). tilefuse's first call of a module waits for its kernels' compile workers, autotunes
  (timing candidates with ``do_bench``, which synchronizes and allocates an L2-flush buffer) and
  stores launch records; run by the trees' warm-up, that would allocate inside the private pool,
  which keeps what it reserved. After that call every kernel is compiled and tuned, so the
  trees' warm-up and recording launch only (a symbolic graph's new size may need a binary for
  new integer properties: the warm-up, an eager run, compiles it).
- Misaligned tensor inputs are copied to aligned memory in the runs the trees make eagerly
  (warm-up, and graphs they decide not to record). tilefuse's launchers key a binary by its
  pointers' 16-byte alignment; a recording copies non-static inputs into fresh (aligned) pool
  buffers, so a warm-up on a misaligned input would leave the recording a new key, that is a
  Triton compile during stream capture.
- Dynamic sizes: at most ``torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit``
  (8) sizes are recorded per graph; later sizes run without CUDA graphs, logged once. Inductor
  only warns past that number; a bound keeps the pool's memory from growing with every size.
- A backward that runs outside the trees tells the device's tree manager so
  (``set_to_running_backward``), as Inductor's ``maybe_handle_backward_generation`` does, so a
  cudagraphed forward is not left pending a backward.
- The callable given to the trees empties its argument list, as they assert (tilefuse's modules
  already do; an eager fallback's boxed callable does not).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from .. import metrics
from .compile_ahead import PENDING_PRECOMPILES, finish_pending

log = logging.getLogger("tilefuse")

# tilefuse's launchers key binaries by 16-byte pointer alignment (launcher._direct_key)
_ALIGN = 16


class ForwardDevice:
    """The CUDA device of a training graph's cudagraphed forward, shared with its backward
    (Inductor's ``BoxedDeviceIndex``): a backward running outside the trees tells that device's
    tree manager."""

    def __init__(self) -> None:
        self.index: int | None = None


def _tensors(val: Any):
    if isinstance(val, (list, tuple)):
        for v in val:
            yield from _tensors(v)
    elif hasattr(val, "device") and hasattr(val, "dtype") and hasattr(val, "shape"):
        yield val


def graph_devices(gm: Any, example_inputs: list) -> dict:
    """The devices of a graph's tensors (its inputs and every node's value), each with the name
    of the first node or input found on it."""
    found: dict = {}
    for node in gm.graph.nodes:
        for t in _tensors(node.meta.get("val")):
            found.setdefault(t.device, node.name)
    for i, x in enumerate(example_inputs):
        for t in _tensors(x):
            found.setdefault(t.device, f"input {i}")
    found.pop(_device("meta"), None)
    return found


def _device(name: str) -> Any:
    import torch

    return torch.device(name)


def mutated_input_indices(gm: Any) -> list[int]:
    """Positions of the graph inputs whose storage an op of the graph writes (a schema argument
    marked as written, on the input or a view of it), found by torch's ``find_input_mutations``
    (Dynamo's ``cudagraphs`` backend); direct writes to a placeholder when that cannot read the
    graph's values. AOTAutograd hands tilefuse functional graphs (it applies input mutations
    itself after the graph returns, outside any recording), so this is normally empty."""
    try:
        from torch._dynamo.backends.cudagraphs import find_input_mutations

        return sorted(find_input_mutations(gm.graph))
    except Exception:  # noqa: BLE001 - a node without a fake value: the direct check below
        pass
    import torch

    positions = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    out: set[int] = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        for k, arg in enumerate(node.target._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            v = node.args[k] if k < len(node.args) else node.kwargs.get(arg.name)
            for a in v if isinstance(v, (list, tuple)) else (v,):
                if a in positions:
                    out.add(positions[a])
    return sorted(out)


def static_input_indices(gm: Any, kind: str) -> list[int]:
    """The inputs whose addresses the trees may assume fixed, as Inductor chooses them: for a
    forward or inference graph AOTAutograd's ``static_input_indices`` (parameters and buffers,
    and inputs marked static); for a backward the saved tensors ahead of the tangents
    (``count_tangents``: they come from the forward, in the trees' pool when it was recorded).
    None known: every tensor input is copied in."""
    if kind == "backward":
        try:
            from torch._inductor.utils import count_tangents

            return list(range(count_tangents(gm)))
        except Exception:  # noqa: BLE001 - an unexpected input order: copy every input
            return []
    from torch._guards import TracingContext

    meta = getattr(TracingContext.try_get(), "fw_metadata", None)
    return list(getattr(meta, "static_input_indices", None) or [])


def skip_reason(gm: Any, example_inputs: list, static_idxs: list[int], mutated_idxs: list[int]) -> str | None:
    """Why the graph cannot run under CUDA graphs, or None (the checks of Inductor's
    ``CompiledFxGraph`` and ``compile_fx``, in the same order of precedence)."""
    import torch
    from torch._inductor import config as inductor_config

    devices = graph_devices(gm, example_inputs)
    cpu = devices.get(_device("cpu"))
    if cpu is not None:
        return f"CPU tensors ({cpu})"
    if not devices:
        return "no CUDA tensors"
    if len(devices) > 1 or next(iter(devices)).type != "cuda":
        return f"tensors on {', '.join(sorted(str(d) for d in devices))}"
    symbolic = any(
        isinstance(x, torch.SymInt)
        or (isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride())))
        for x in example_inputs
    )
    if symbolic and inductor_config.triton.cudagraph_skip_dynamic_graphs:
        return "symbolic sizes, with torch._inductor.config.triton.cudagraph_skip_dynamic_graphs=True"
    node = _first_incompatible_node(gm)
    if node is not None:
        return f"op {node.target} cannot be captured (node {node.name})"
    bad = [
        i for i, x in enumerate(example_inputs) if not isinstance(x, (torch.Tensor, torch.SymInt, int, torch.Generator))
    ]
    if bad:
        return f"non-tensor inputs (input {bad[0]}: {type(example_inputs[bad[0]]).__name__})"
    from torch._inductor.output_code import complex_memory_overlap

    if any(isinstance(x, torch.Tensor) and complex_memory_overlap(x) for x in example_inputs):
        return "an input whose elements overlap in memory"
    mutated = [i for i in mutated_idxs if i not in set(static_idxs)]
    if mutated:
        return f"mutated inputs ({len(mutated)}, e.g. input {mutated[0]}) that are not parameters or buffers"
    return None


def _first_incompatible_node(gm: Any) -> Any:
    """The first node Inductor's ``get_first_incompatible_cudagraph_node`` refuses (host syncs,
    data-dependent sizes, ops tagged ``cudagraph_unsafe``), or whose op's overload packet is in
    its ``FORBIDDEN_CUDAGRAPH_OPS`` (that list names ``aten._local_scalar_dense`` without an
    overload, which its own check, by the overload's name, never matches)."""
    import torch
    from torch._inductor.utils import FORBIDDEN_CUDAGRAPH_OPS, get_first_incompatible_cudagraph_node

    for node in gm.graph.nodes:
        if (
            isinstance(node.target, torch._ops.OpOverload)
            and str(node.target.overloadpacket) in FORBIDDEN_CUDAGRAPH_OPS
        ):
            return node
    return get_first_incompatible_cudagraph_node(gm)


def log_skip(name: str, reason: str, cuda: bool) -> None:
    """The one log line of a graph that runs without CUDA graphs, and its counts."""
    from torch._dynamo.utils import counters

    metrics.cudagraph_skip_count += 1
    counters["inductor"]["cudagraph_skips"] += 1
    log.log(
        logging.WARNING if cuda else logging.INFO,
        "tilefuse: graph '%s' runs without CUDA graphs: %s",
        name,
        reason,
    )


def _tree_factory() -> Callable[..., Any]:
    """torch's CUDA-graph trees (a seam for the CPU tests, which have no CUDA graphs)."""
    from torch._inductor.cudagraph_trees import cudagraphify_impl

    return cudagraphify_impl


def _tree_manager(device_index: int) -> Any:
    from torch._inductor.cudagraph_trees import get_manager

    return get_manager(device_index, create_if_none_exists=False)


def _aligned(args: list) -> None:
    """Each CUDA tensor of ``args`` whose address is not 16-byte aligned replaced by an aligned
    copy with its strides (the graph is functional: a copy of an input reads the same); left as
    it is while a stream is capturing (a recording's inputs are the trees' aligned copies)."""
    import torch

    capturing = None
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_cuda and a.data_ptr() % _ALIGN:
            if capturing is None:
                capturing = torch.cuda.is_current_stream_capturing()
            if capturing:
                return
            from torch._inductor.utils import clone_preserve_strides

            args[i] = clone_preserve_strides(a)


class CudaGraphed:
    """A compiled graph's boxed callable run through torch's CUDA-graph trees (the module's
    docstring gives the rules). Called with one list (AOTAutograd's boxed convention), which it
    empties."""

    def __init__(
        self,
        fn: Callable[[list], Any],
        name: str,
        kind: str,
        example_inputs: list,
        static_idxs: list[int],
        mutated_idxs: list[int],
        device_index: int,
        gm: Any,
        constants: tuple = (),
        forward_device: ForwardDevice | None = None,
        compiles_per_size: bool = False,
    ):
        from torch._inductor import config as inductor_config
        from torch._inductor.cudagraph_utils import get_placeholder_info

        # an instance attribute, as CompiledGraph's: Dynamo's wrapper of a backward copies __dict__
        self._boxed_call = True
        self.fn, self.name, self.kind = fn, name, kind
        self.static_idxs, self.mutated_idxs = list(static_idxs), tuple(mutated_idxs)
        self.device_index = device_index
        self.constants = tuple(constants)
        self.forward_device = forward_device
        self.int_positions = [i for i, x in enumerate(example_inputs) if _is_int(x)]
        output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        outs = output.args[0] if isinstance(output.args[0], (list, tuple)) else (output.args[0],)
        self.stack_traces = [getattr(a, "stack_trace", None) for a in outs]
        self.placeholders = tuple(get_placeholder_info(gm.graph))
        self.limit = inductor_config.triton.cudagraph_dynamic_shape_warn_limit
        # ``fn`` compiles a module per size (a graph compiled per shape): each size's first call
        # compiles and autotunes, so each runs outside the trees, not only the very first
        self.compiles_per_size = compiles_per_size
        self._tree: Any = None  # the trees' callable, made at the first call that enters them
        self._sizes: set = set()  # integer-input values the trees take (at most ``limit``)
        self._ran = False  # whether the first call (outside the trees) has run
        self._limit_logged = False
        self.calls_outside = 0  # calls that ran outside the trees (first calls, sizes past the limit)

    def __call__(self, *call_args: Any) -> Any:
        args = call_args[0] if len(call_args) == 1 and isinstance(call_args[0], list) else list(call_args)
        key = tuple(args[i] for i in self.int_positions)
        if key not in self._sizes:
            if self.limit and len(self._sizes) >= self.limit:
                if not self._limit_logged:
                    self._limit_logged = True
                    log_skip(
                        self.name,
                        f"it ran at more than {self.limit} distinct sizes "
                        f"(torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit); "
                        f"sizes beyond the first {self.limit} run without them",
                        True,
                    )
                return self._run_outside(args)
            self._sizes.add(key)
            if not self._ran or self.compiles_per_size:
                self._ran = True
                return self._run_outside(args)
        return self._run_tree(args)

    def _run_outside(self, args: list) -> Any:
        self.calls_outside += 1
        if self.kind == "backward":
            note_backward_outside_trees(self.forward_device)
        out = self.fn(args)
        args.clear()
        return out

    def _run_tree(self, args: list) -> Any:
        if PENDING_PRECOMPILES:
            # kernels of another graph still compiling in workers (a graph compiled since): waited
            # for here, not by the compiled graph inside a warm-up or a recording
            waited = finish_pending()
            metrics.precompile_seconds += waited
            metrics.add_phase("precompile_wait", waited)
        if self._tree is None:
            self._tree = _tree_factory()(
                self._model,
                args,
                self.static_idxs,
                device_index=self.device_index,
                stack_traces=self.stack_traces,
                is_backward=self.kind == "backward",
                is_inference=self.kind == "inference",
                constants=self.constants,
                placeholders=self.placeholders,
                mutated_input_idxs=self.mutated_idxs,
            )
        return self._tree(args)

    def _model(self, args: list) -> Any:
        """What the trees warm up, record, or run eagerly: the compiled graph on ``args``,
        emptied after."""
        _aligned(args)
        try:
            return self.fn(args)
        finally:
            args.clear()


def _is_int(x: Any) -> bool:
    import torch

    return isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool)


def note_backward_outside_trees(forward_device: ForwardDevice | None) -> None:
    """A backward about to run outside the trees: the tree manager of its forward's device, if
    any, is told (Inductor's ``maybe_handle_backward_generation``)."""
    if forward_device is None or forward_device.index is None:
        return
    manager = _tree_manager(forward_device.index)
    if manager is not None:
        manager.set_to_running_backward()


def cudagraphify(
    fn: Callable[[list], Any],
    gm: Any,
    example_inputs: list,
    kind: str,
    name: str,
    forward_device: ForwardDevice | None = None,
    constants: tuple = (),
    compiles_per_size: bool = False,
) -> Callable[[list], Any]:
    """``fn`` (a compiled graph's boxed callable) to run under CUDA graph trees, or ``fn`` itself
    when the graph cannot be (``skip_reason``, logged once). ``kind``: "forward", "backward" or
    "inference"; ``forward_device`` is shared by a training graph's forward and backward;
    ``constants``: the module's tensor constants; ``compiles_per_size``: ``fn`` compiles a module
    for each new size at its first call there."""
    static_idxs = static_input_indices(gm, kind)
    mutated_idxs = mutated_input_indices(gm)
    reason = skip_reason(gm, example_inputs, static_idxs, mutated_idxs)
    if reason is not None:
        cuda = any(d.type == "cuda" for d in graph_devices(gm, example_inputs))
        log_skip(name, reason, cuda)
        return outside_trees(fn, kind, forward_device)
    (device,) = graph_devices(gm, example_inputs)
    index = device.index
    if index is None:
        import torch

        index = torch.cuda.current_device()
    if kind == "forward" and forward_device is not None:
        forward_device.index = index
    metrics.cudagraph_graph_count += 1
    log.debug("tilefuse: graph '%s' runs under CUDA graph trees on cuda:%d", name, index)
    return CudaGraphed(
        fn,
        name,
        kind,
        example_inputs,
        static_idxs,
        mutated_idxs,
        index,
        gm,
        constants,
        forward_device,
        compiles_per_size=compiles_per_size,
    )


def outside_trees(fn: Callable[[list], Any], kind: str, forward_device: ForwardDevice | None) -> Callable[[list], Any]:
    """``fn`` as it runs when its graph is not captured: a backward first tells its forward's
    tree manager at each call; other graphs unchanged."""
    return _BackwardOutsideTrees(fn, forward_device) if kind == "backward" else fn


class _BackwardOutsideTrees:
    """A backward that cannot be captured, whose forward may have been: each call tells the
    forward's tree manager first (``note_backward_outside_trees``)."""

    def __init__(self, fn: Callable[[list], Any], forward_device: ForwardDevice | None):
        self._boxed_call = True
        self.fn, self.forward_device = fn, forward_device

    def __call__(self, *call_args: Any) -> Any:
        args = call_args[0] if len(call_args) == 1 and isinstance(call_args[0], list) else list(call_args)
        note_backward_outside_trees(self.forward_device)
        return self.fn(args)
