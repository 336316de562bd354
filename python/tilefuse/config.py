"""tilefuse configuration.

Every option has a default, can be overridden by an environment variable (read at import), and can
be overridden per compile through ``torch.compile(m, backend="tilefuse", options={...})``. An
environment variable that is empty (``TILEFUSE_PAD_MM=``) or only blanks counts as not set: the
option keeps its default.

Options:
    fallback_on_error (bool, env TILEFUSE_FALLBACK_ON_ERROR, default True): an exception while
        compiling a graph emits one warning and runs that graph eagerly; so does a kernel Triton
        rejects when it is built (before the first call on the GPU, from the compile workers'
        results; at the first run under the interpreter); False re-raises (tests).
    debug_dir (str | None, env TILEFUSE_DEBUG_DIR): write each graph's generated wrapper and
        kernels to this directory (``<graph name>_<source hash>.py``, with the module's
        constants: ``python <file>`` times it, ``runtime.benchmark``). ``TORCH_COMPILE_DEBUG=1``
        writes a fuller folder per graph instead (docs/debugging.md).
    persistent_reduction_threshold (int, default 4096): reductions with rnumel up to this run in
        one block (persistent: the row is read from memory once and kept in registers, so a
        LayerNorm or softmax of 4096-wide rows is one pass); longer ones loop over RBLOCK chunks.
        Inductor's threshold is 1024; an H200 keeps a 4096-element row of a program in registers
        without spilling. Outer reductions stay persistent only up to ``OUTER_PERSISTENT_MAX``
        (64).
    realize_reads_threshold (int, default 4) and realize_opcount_threshold (int, default 30): a
        lazily computed (pointwise) value with more than one consumer is realized into a buffer
        when it reads more buffers than the first or has more ops than the second; otherwise it
        is recomputed (inlined) in each consumer (Inductor's ``mark_reuse`` rule and thresholds).
    max_inline_ops (int, default 64): a pointwise value whose inner function grew beyond this many
        ops is realized instead of being inlined further.
    tiling (bool, env TILEFUSE_TILING, default True): pointwise kernels with transposed access
        iterate over 2-D [YBLOCK, XBLOCK] tiles (codegen/simd.py); False keeps every pointwise
        kernel 1-D.
    autotune (bool, env TILEFUSE_AUTOTUNE, default True): on the GPU, Triton's autotuner times each
        kernel's candidate launch configs (block sizes, warps) at its first launch and keeps the
        fastest (timings cached on disk); False launches the heuristic's first choice. Under the
        interpreter one config is used either way.
    autotune_pointwise (bool, env TILEFUSE_AUTOTUNE_POINTWISE, default False): pointwise
        kernels get autotuning candidates too (1-D: 512 and 2048 elements per program besides
        1024; 2-D tiles: 128 x 64 and 64 x 128 at 8 warps besides 64 x 64 at 4); by default they
        launch with the one heuristic config, as Inductor's pointwise kernels do unless
        ``max_autotune_pointwise``: fewer kernels to compile and time on the first call (on the
        H200 the first config was within 1% of the best for 7 of 9 1-D kernels and for both
        benchmark tiles, docs/benchmarks.md). Reductions are autotuned either way (when
        ``autotune`` is on).
    tiny_kernel_numel (int, env TILEFUSE_TINY_KERNEL_NUMEL, default 65536): on the GPU, a kernel
        with autotuning candidates (a reduction, or with ``autotune_pointwise`` a
        pointwise kernel or 2-D tile) whose iteration space (outputs x reduction length, or the tile's
        extents) is static and at most this many elements launches with the heuristic's first
        config instead of being autotuned: at that size the launch, not the config, sets
        its time, and each candidate is one more compile and timing on the first call
        (``codegen.heuristics.is_tiny``). 0: every such kernel is autotuned.
    compile_workers (int, env TILEFUSE_COMPILE_WORKERS, default: the CPU cores this process may
        use): on the GPU, every kernel of a graph (every candidate config) is compiled right after
        the graph's module is loaded, by this many worker processes; 1 compiles them one after
        another in this process; 0 leaves compilation to Triton's JIT at each kernel's first launch.
    compile_pool (str, env TILEFUSE_COMPILE_POOL, default "process"): what runs the parallel
        compiles: "process" (forked worker processes; Triton's front end holds the GIL) or
        "thread" (a thread pool driven by Triton's AsyncCompileMode).
    precompile_overlap (bool, env TILEFUSE_PRECOMPILE_OVERLAP, default True): with the process
        pool, a graph's compile returns once its compile workers are forked, and they compile its
        kernels while this process goes on (lowering a training step's backward graph, Dynamo's
        guards); the first call of any compiled graph waits for every graph's workers
        (``runtime.start_precompile``, ``metrics.phase_seconds["precompile_wait"]``). False waits
        for each graph's kernels before its compile returns.
    precompile_wait_all (bool, env TILEFUSE_PRECOMPILE_WAIT_ALL, default True): with
        ``precompile_overlap``, a compiled graph's first call waits for every batch of kernels
        still compiling in workers (no kernel launches, and no autotuning times its configs,
        while workers occupy the CPU cores). False: it waits only for its own graph's batch, so
        a training graph's backward batch (``eager_backward``) compiles on during the forward's
        run and Dynamo's tracing of the next graph, and is waited for at the first backward.
    symbolic_shapes (bool, env TILEFUSE_SYMBOLIC_SHAPES, default True): a graph Dynamo hands over
        with symbolic sizes (dynamic shapes) is compiled once for all sizes (kernels take sizes as
        arguments; facts the kernels rely on become guards). A graph that cannot be compiled
        symbolically, or every such graph when False, is compiled once per concrete input shape
        instead (``backend.SpecializingGraph``; logged).
    graph_cache (bool, env TILEFUSE_GRAPH_CACHE, default True): a graph compiled before (in this
        process, or in any process sharing ``TILEFUSE_CACHE_DIR``) with the same code, input
        metadata and options reuses that compile's module instead of being lowered and generated
        again (``tilefuse.runtime.graph_cache``; guards on symbolic sizes are checked and replayed).
    warmup (bool, env TILEFUSE_WARMUP, default True): on a CUDA machine, Triton's one-time set-up
        (its driver's helper module, its install's cache key, its compiler's initialization) runs
        in background threads from ``torch.compile``'s backend lookup on (or backend entry, when
        ``tilefuse.backend`` was imported before Dynamo), overlapping Dynamo's and AOTAutograd's
        tracing (``runtime.start_warmup``); False leaves it to the first kernel compile. When the
        graph cache expects hits (an earlier process with the same code stored kernel launch
        records in this cache directory), the compiler's part waits for the first graph that
        misses. At the lookup only the environment variable is known, not ``torch.compile``'s
        options.
    triton_key_from_stat (bool, env TILEFUSE_TRITON_KEY_FROM_STAT, default True): on a CUDA
        machine, Triton's cache key of its own install is made from its files' sizes, times and
        inodes instead of hashing their contents (``libtriton.so``: about 415 MB, 0.4-0.9 s per
        process), for the whole process, from the first compile or backend lookup on
        (``runtime.use_stat_triton_key``); False keeps Triton's key. Process-wide: only the
        environment variable sets it (``torch.compile``'s options cannot: it is in place before
        they are read); once in use it stays for the process.
    min_cut_partition (bool, env TILEFUSE_MIN_CUT_PARTITION, default True): training graphs are split
        into forward and backward by torch's min-cut rematerialization partitioner, as Inductor
        does: a value the backward can recompute cheaply (a pointwise chain over tensors it saves
        anyway) is recomputed in the backward's kernels instead of being saved by the forward.
        False: AOTAutograd's default partitioner (saves every intermediate the backward uses).
    split_long_normalizers (bool, env TILEFUSE_SPLIT_LONG_NORMALIZERS, default True): the row
        maximum and sum of exponentials of a softmax, log_softmax, logsumexp or cross-entropy over
        a last dim longer than ``persistent_reduction_threshold`` are computed per chunk of the row
        (persistent reductions of at most that length) and then combined, instead of by one looped
        online reduction over the row (``lowering.softmax._normalizer_chunks``). False: looped.
    pause_gc (bool, env TILEFUSE_PAUSE_GC, default True): Python's cyclic garbage collector is
        paused while Dynamo compiles a frame for tilefuse (its bytecode tracing, guards and the
        backend call: ``backend.install_dynamo_gc_pause``, through Dynamo's compile callbacks)
        and while tilefuse compiles (the backend's AOTAutograd trace and partition, and each
        graph's lowering, scheduling and code generation), as a full collection walks the whole
        heap of torch and Dynamo objects: 0.4-0.5 s each, several per 12-layer GPT training step's
        first call. The pause ends with the compile (Dynamo then collects the young generations
        after the frame, ``run_gc_after_compile``); nothing is kept alive longer than that, and
        the first call's peak memory did not rise (3.2-3.3 GB either way, development machine).
        Frames compiled for other backends, and for a user backend that wraps tilefuse's, are
        left alone; after ``torch._dynamo.reset()`` (which clears Dynamo's callbacks) the first
        frame's tracing runs with the collector on unless ``backend.install_dynamo_gc_pause()``
        is called after the reset. The collector is process-wide: other threads run without it
        meanwhile, and one that disables it during the compile finds it enabled after. False:
        the collector runs as usual.
    eager_backward (bool, env TILEFUSE_EAGER_BACKWARD, default True): a training graph's backward
        is compiled right after its forward, inside the same backend call (AOTAutograd's
        ``force_non_lazy_backward_lowering``), instead of at the first backward. With
        ``precompile_overlap`` the backward is then lowered while the forward's kernels compile in
        the workers, and the forward's first call waits for both batches once, instead of waiting
        for the forward's batch and later, at the backward, lowering and waiting again. A graph
        whose backward never runs costs its backward's compile. False: lazily, as Inductor.
    reorder_for_peak_memory (bool, env TILEFUSE_REORDER_FOR_PEAK_MEMORY, default True): after fusion,
        the scheduler may order the graph's kernels and extern calls for peak memory: graph order,
        graph order with memory-freeing items hoisted, or a least-peak-memory-first greedy
        topological order, whichever has the lowest estimated peak, when it saves at least
        ``MIN_PEAK_GAIN`` (5%) of the memory in play and does not raise the peak while the caller
        holds the graph's inputs (``scheduler.memory.order_for_peak_memory``; Inductor's
        ``reorder_for_peak_memory``); it brings a transformer block's training step below
        Inductor's peak (docs/benchmarks.md, memory_peak.py). False: graph order.
    reorder_for_comm_overlap (bool, env TILEFUSE_REORDER_FOR_COMM_OVERLAP, default True): in a graph
        holding collectives (``torch.distributed``'s functional collectives: tensor parallelism,
        ``_functional_collectives`` calls), each collective is issued as soon as its inputs are
        computed and each wait on its result runs as late as its consumers allow, with the
        independent kernels in between (``scheduler.comms.order_for_overlap``; Inductor's
        ``raise_comms`` and ``sink_waits``, which Inductor leaves off by default); the
        collectives keep their graph order. False: the scheduled order (graph order, or the
        peak-memory order).
    cudagraphs (bool, env TILEFUSE_CUDAGRAPHS, default False): each compiled CUDA graph (forward,
        backward, inference) runs under torch's CUDA graph trees, as Inductor's
        ``mode="reduce-overhead"`` (which, like ``"max-autotune"``, turns this on): after a first
        call outside them (compiling and autotuning) and an eager warm-up, the graph's launches
        are recorded once per size and replayed, in one memory pool per device shared by the
        step's graphs; outputs stay valid until the graph runs again. A graph that cannot be captured
        (CPU tensors, an op that syncs with the host, ...) runs without, logged once
        (``tilefuse.runtime.cudagraphs``). It does not change the generated code: not part of the
        graph cache key.
    realize_broadcast_opcount (int, default 3; an option, no environment variable): an
        elementwise op's operand computed from a reduction's result with at least this many ops
        and read through a broadcast (each of its values read 8 times or more, in a result of
        65,536 elements or more) is stored once, in the reduction's kernel, instead of being
        recomputed for every element (``lowering.common._realize_costly_broadcast``, which also
        realizes such operands computing a transcendental function, whatever this says); 0 or
        less realizes every such operand of a reduction, a large value none of them.
    fp_fusion (bool, env TILEFUSE_FP_FUSION, default False): let the GPU compiler contract a
        multiplication and an addition into one fused multiply-add (Triton's ``enable_fp_fusion``,
        on by default in Triton). Off, every operation of a fused kernel rounds its result as
        eager's one-op-per-kernel code does, so a product is rounded before it is added: a fused
        ``x * s - max`` would otherwise skip the rounding of ``x * s`` that eager does, and a
        softmax of large logits magnifies that last-place difference into visibly different
        probabilities. The kernels tilefuse generates are bound by memory traffic, where the
        extra instructions cost nothing measurable.
    pad_mm (bool, env TILEFUSE_PAD_MM, default True): large CUDA matrix products whose sizes leave
        a cuBLAS leading dimension off 16-byte alignment run on zero-padded operands
        (``lowering.extern._mm_padding``); a graph output that is (a view of) such a product comes back
        with eager's strides.

    layout_optimization (bool, env TILEFUSE_LAYOUT_OPTIMIZATION, default True): a graph on CUDA
        whose 2-D convolutions are expected to run faster channels-last
        (``layout_opt.decide_layout_opt``) has its values stored as eager stores them in the
        channels-last model, its convolutions given channels-last operands; outputs the user sees
        keep eager's strides, a training forward's saved activations do not
        (``tilefuse.layout_opt``).

Runtime tunables: module constants that ``tilefuse.runtime`` reads each time it uses them (so a
test may ``monkeypatch.setattr(config, NAME, value)``); each has an environment variable, read at
import, that must hold a positive number, and none is a per-compile option:
    AUTOTUNE_WARMUP_MS (float, env TILEFUSE_AUTOTUNE_WARMUP_MS, default 1) and AUTOTUNE_REP_MS
        (float, env TILEFUSE_AUTOTUNE_REP_MS, default 4): the warm-up and repetition windows (ms)
        of ``triton.testing.do_bench`` when Triton's autotuner times one candidate config
        (``runtime.autotune._time_config``), instead of Triton's 25 + 100 ms per config. Each
        timed run follows an L2 flush of about 70 us, so 4 ms is still about 50 runs of a 10 us
        kernel.
    FORKED_COMPILE_TIMEOUT_S (float, env TILEFUSE_FORKED_COMPILE_TIMEOUT_S, default 300): forked
        compile workers that give no result for this many seconds are given up on: they are
        killed and the jobs they did not report are compiled in this process
        (``runtime.workers.ForkedBatch.collect``).
    WARMUP_SWITCH_INTERVAL_S (float, env TILEFUSE_WARMUP_SWITCH_INTERVAL_S, default 0.0002): the
        interpreter's thread switch interval (``sys.setswitchinterval``) while Triton's warm-up
        threads run (``runtime.warmup``): their file reads and hashing give the GIL up often, and
        at Python's default 5 ms each return waits that long for a main thread busy tracing. The
        interval is only ever lowered, and put back when the last warm-up thread ends.

Lowering tunables (module constants read by ``tilefuse.lowering`` at each use; not options: set
only by assignment, e.g. by tests; no environment variable):
    PAD_MM_MIN_MACS (int, default 2**27): with ``pad_mm``, a product is padded only when it has
        at least this many multiply-adds (m*n*k); below it the padding copies cost about what the
        aligned kernel saves.
    PAD_MM_DEVICE_TYPES (tuple of str, default ("cuda",)): the device types whose products are
        padded (cuBLAS's); tests add "cpu", with ``PAD_MM_MIN_MACS`` lowered, to run the padded
        path under Triton's interpreter.
    LAYOUT_OPT_DEVICE_TYPES (tuple of str, default ("cuda",)): the device types whose graphs may be
        laid out channels-last by ``layout_optimization`` (cuDNN's convolutions gain from it);
        tests add "cpu".
    CONV_BIAS_POINTWISE_DEVICE_TYPES (tuple of str, default ("cuda",)): the device types whose
        convolutions run without their bias, the bias added by a pointwise op that fuses into
        the next kernel (``lowering.extern._convolution``; aten's cuDNN path adds it in a kernel
        of its own, its CPU kernels inside the convolution); tests add "cpu".
    SCATTER_PROD_MAX_WORK (int, default 2**22): the most multiply-adds (the target's element count
        times the index's extent along the scatter dim) a ``scatter_reduce(..., "prod")`` may take,
        gathering each output element's factors (``lowering.scatter._scatter_prod``); a larger
        one runs as the aten kernel, whose work is linear in the index.

Size tunable (a module constant read by ``tilefuse.sizevars`` when a graph's size symbols are
made; not an option):
    UNBACKED_SYMINT_FALLBACK (int, default 8192): the hint of a data-dependent (unbacked) size
        symbol (``u0``: the length of ``nonzero``'s result, an ``.item()`` value), which has no
        example value; clamped to the symbol's value range. Inductor's
        ``unbacked_symint_fallback``. Read only by heuristics (block sizes, tiling, fusion
        scores, memory estimates), never by a decision the generated code's correctness rests
        on: those are proven from the symbols' ranges and the ShapeEnv's facts, or take the
        path that is correct for every size.

IR tunables (module constants read by ``tilefuse.ir.loops.Reduction`` at each use, like the
scheduler's below: not options, not in the graph cache's key):
    SPLIT_TARGET_PROGRAMS (int, default 512): a reduction whose kernel would run on fewer programs
        than this is split in two kernels (partials over chunks, then a reduction of the partials;
        ``Reduction.num_splits``), so the device's multiprocessors all get work.
    SPLIT_OUTER_ROWS (int, default 64): the outputs one program of an outer reduction (columns
        across rows) covers, when counting its programs.
    SPLIT_MIN_CHUNK (int, default 2048) and SPLIT_MIN_CHUNK_OUTER (int, default 256): the fewest
        elements per chunk of a split inner / outer reduction: shorter chunks cost more in the
        second kernel than they gain in parallelism.
    SPLIT_MAX_UNSPLIT_INNER (int, default 8192): an inner reduction of at most this many elements
        per output is never split (Inductor's ``inner_reduction_splits`` rule: one program reduces
        it faster than two kernels).

Graph cache tunable (module constant, not an option):
    GRAPH_CACHE_MAX_CONSTANT_BYTES (int, default 64 MiB): a graph holding a tensor constant larger
        than this is not cached (``runtime.graph_cache``): its key would hash every byte.

Scheduler tunables (module constants read by ``tilefuse.scheduler`` at each use; not options:
``torch.compile``'s options and ``patch`` do not take them, and they are not part of the graph
cache's key; tests set them with ``monkeypatch.setattr(config, NAME, value)``):
    MAX_FUSION_SIZE (int, default 64): at most this many nodes per fused kernel (Inductor's
        ``max_fusion_size``): Triton's compile time grows faster than a kernel's size, while the
        memory traffic of the same nodes split over several kernels is the same
        (``scheduler.fusion.max_fusion_size``).
    FUSION_LOOKBACK (int, default 8): a node that does not fit the latest kernel may move back
        to join one of this many items before it, when none in between writes a buffer it reads
        (horizontal fusion); beyond it, only a kernel sharing a buffer with the node takes it
        (``scheduler.Placement``).
    FEW_ROWS (int, default 64) and LONG_ROW (int, default 32768): a reduction over fewer than
        FEW_ROWS output rows, each longer than LONG_ROW elements, runs on too few programs to
        carry fused pointwise work in its loop (``scheduler.fusion.few_rows_long_loop``); beyond
        the lookback, no pointwise node joins the loop of a reduction over fewer than FEW_ROWS
        rows unless it reads what that kernel writes (``scheduler.fusion.far_guest_few_rows``).
        Symbolic sizes are judged by their size hints.
    MIN_PEAK_GAIN (float, default 0.05): with ``reorder_for_peak_memory``, an order other than
        graph order must lower the estimated peak by this fraction of the memory in play (the
        graph's inputs plus graph order's peak) to be taken
        (``scheduler.memory.order_for_peak_memory``).
"""

from __future__ import annotations

import contextlib
import numbers
import os
import sys
from collections.abc import Mapping
from typing import Any, Iterator


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


# every environment variable tilefuse reads (option variables add themselves as they are read,
# below; TILEFUSE_CACHE_DIR is read by tilefuse.runtime); names starting with TILEFUSE_TEST_ are
# the test suite's own
ENVIRONMENT_VARIABLES: set[str] = {"TILEFUSE_CACHE_DIR"}


def _env_value(name: str) -> str | None:
    """The environment variable ``name`` without surrounding blanks, or None when it is unset or
    empty (only blanks): ``TILEFUSE_PAD_MM=`` means "not set", the option keeps its default, for
    every option (a ``TILEFUSE_DEBUG_DIR`` of ``" /tmp/d "`` is ``/tmp/d``)."""
    ENVIRONMENT_VARIABLES.add(name)
    v = os.environ.get(name)
    return v.strip() if v is not None and v.strip() else None  # surrounding blanks dropped


def _env_bool(name: str, default: bool) -> bool:
    """A bool option from the environment (``default`` when unset or empty); ValueError naming the
    variable for anything but 1/0, true/false, yes/no, on/off (a typo must not silently mean
    "on")."""
    v = _env_value(name)
    if v is None:
        return default
    w = v.strip().lower()
    if w in _TRUE:
        return True
    if w in _FALSE:
        return False
    raise ValueError(
        f"environment variable {name}={v!r} is not a boolean: use 1/0, true/false, yes/no or on/off, "
        f"or unset it (default {default})"
    )


def _env_int(name: str, default: int) -> int:
    """An int option from the environment (``default`` when unset or empty); ValueError naming the
    variable when it is not an integer."""
    v = _env_value(name)
    if v is None:
        return default
    try:
        return int(v.strip())
    except ValueError:
        raise ValueError(
            f"environment variable {name}={v!r} is not an integer: give a whole number, or unset it (default {default})"
        ) from None


def _env_float(name: str, default: float) -> float:
    """A positive number from the environment (``default`` when unset or empty); ValueError
    naming the variable when it is not a positive finite number."""
    v = _env_value(name)
    if v is None:
        return default
    try:
        f = float(v)
    except ValueError:
        f = float("nan")
    if not 0 < f < float("inf"):
        raise ValueError(
            f"environment variable {name}={v!r} is not a positive number: give one, or unset it (default {default})"
        )
    return f


fallback_on_error: bool = _env_bool("TILEFUSE_FALLBACK_ON_ERROR", True)
debug_dir: str | None = _env_value("TILEFUSE_DEBUG_DIR")
persistent_reduction_threshold: int = _env_int("TILEFUSE_PERSISTENT_REDUCTION_THRESHOLD", 4096)
realize_reads_threshold: int = 4
realize_opcount_threshold: int = 30
max_inline_ops: int = 64
realize_broadcast_opcount: int = 3
autotune: bool = _env_bool("TILEFUSE_AUTOTUNE", True)
autotune_pointwise: bool = _env_bool("TILEFUSE_AUTOTUNE_POINTWISE", False)
tiny_kernel_numel: int = _env_int("TILEFUSE_TINY_KERNEL_NUMEL", 65536)
tiling: bool = _env_bool("TILEFUSE_TILING", True)
split_long_normalizers: bool = _env_bool("TILEFUSE_SPLIT_LONG_NORMALIZERS", True)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


compile_workers: int = _env_int("TILEFUSE_COMPILE_WORKERS", _usable_cores())
compile_pool: str = (_env_value("TILEFUSE_COMPILE_POOL") or "process").lower()  # as booleans: any case
precompile_overlap: bool = _env_bool("TILEFUSE_PRECOMPILE_OVERLAP", True)
precompile_wait_all: bool = _env_bool("TILEFUSE_PRECOMPILE_WAIT_ALL", True)
symbolic_shapes: bool = _env_bool("TILEFUSE_SYMBOLIC_SHAPES", True)
graph_cache: bool = _env_bool("TILEFUSE_GRAPH_CACHE", True)
# matrix products on CUDA whose sizes leave a cuBLAS leading dimension off 16-byte alignment are
# run on zero-padded operands (lowering.extern._mm_padding: Inductor's pad_mm rule, by size, not timing)
pad_mm: bool = _env_bool("TILEFUSE_PAD_MM", True)
fp_fusion: bool = _env_bool("TILEFUSE_FP_FUSION", False)
# convolutional graphs laid out channels-last where that pays (tilefuse.layout_opt)
layout_optimization: bool = _env_bool("TILEFUSE_LAYOUT_OPTIMIZATION", True)
warmup: bool = _env_bool("TILEFUSE_WARMUP", True)
triton_key_from_stat: bool = _env_bool("TILEFUSE_TRITON_KEY_FROM_STAT", True)
min_cut_partition: bool = _env_bool("TILEFUSE_MIN_CUT_PARTITION", True)
pause_gc: bool = _env_bool("TILEFUSE_PAUSE_GC", True)
eager_backward: bool = _env_bool("TILEFUSE_EAGER_BACKWARD", True)
reorder_for_peak_memory: bool = _env_bool("TILEFUSE_REORDER_FOR_PEAK_MEMORY", True)
reorder_for_comm_overlap: bool = _env_bool("TILEFUSE_REORDER_FOR_COMM_OVERLAP", True)
cudagraphs: bool = _env_bool("TILEFUSE_CUDAGRAPHS", False)
# the kernel report (``tilefuse.report``): a path here makes ``import tilefuse`` start collecting
# for the whole process and write the HTML page there when it exits. Environment only, not an option.
report_path: str | None = _env_value("TILEFUSE_REPORT")

# --- runtime
# (documented in the module docstring, "Runtime tunables"; not options: ``patch`` and
# ``torch.compile``'s options do not take them)
AUTOTUNE_WARMUP_MS: float = _env_float("TILEFUSE_AUTOTUNE_WARMUP_MS", 1)
AUTOTUNE_REP_MS: float = _env_float("TILEFUSE_AUTOTUNE_REP_MS", 4)
FORKED_COMPILE_TIMEOUT_S: float = _env_float("TILEFUSE_FORKED_COMPILE_TIMEOUT_S", 300.0)
WARMUP_SWITCH_INTERVAL_S: float = _env_float("TILEFUSE_WARMUP_SWITCH_INTERVAL_S", 2e-4)

# --- codegen
# Tunables of the Triton kernel generator's launch heuristics (``tilefuse.codegen.heuristics``)
# and kernel naming. Module constants, not options: no environment variable, not accepted in
# ``torch.compile``'s options; read at each use, so a test may patch them here.

# An outer reduction (columns across rows) stays persistent only for rows up to this length: it
# reads each row once per column block, so a short row lets many columns share a program, and a
# longer one loops over row chunks with wide column blocks instead (``heuristics.is_persistent``).
OUTER_PERSISTENT_MAX: int = 64
# A looped inner reduction over rows at least this long, in a kernel that stores only per-row
# results, tries 4096-element row chunks as its second candidate instead of 1024
# (``heuristics.gpu_configs``): long rows with one maximum and one exp per element run faster
# with more elements per program.
LONG_ROW_MIN: int = 16384
# A 1-D pointwise kernel with at least this many arithmetic ops per element (``heuristics.alu_ops``:
# its ``tmpN = ...`` lines other than loads, constants and plain casts; a fused multiply-add is one)
# is ALU-bound at 1024 elements per program, so its first config takes 2048 (16 per thread at 4
# warps: more independent work per thread). A bias + exact GELU with the polynomial erf (18 ops,
# its Horner steps fused multiply-adds) runs measurably faster at 2048 than at 1024 on an H200,
# and no faster at 4096; light kernels (SiLU x mul, 6 ops) stay at 1024.
ALU_HEAVY_POINTWISE_OPS: int = 16
# 2-D tile configs (YBLOCK, XBLOCK, num_warps) of tiled pointwise kernels, the first the one
# launched unless ``autotune_pointwise`` (``heuristics.configs``): of the tile shapes measured on
# an H200 for a bf16 transpose-add and an NCHW -> NHWC copy these three were within 2% of the best
# for both, the first within 1%; square 32x32 tiles were 10-40% slower.
TILE_CONFIGS: tuple[tuple[int, int, int], ...] = ((64, 64, 4), (128, 64, 8), (64, 128, 8))
# At most this many op names in a generated kernel's name (``codegen.triton_kernel.kernel_name``;
# Inductor's ``kernel_name_max_ops`` is 10).
KERNEL_NAME_MAX_OPS: int = 6

# --- sizes
UNBACKED_SYMINT_FALLBACK: int = 8192

# --- lowering
# tunables of the lowerings (module-level, not options; documented in the module docstring)
PAD_MM_MIN_MACS: int = 1 << 27
PAD_MM_DEVICE_TYPES: tuple[str, ...] = ("cuda",)
LAYOUT_OPT_DEVICE_TYPES: tuple[str, ...] = ("cuda",)
CONV_BIAS_POINTWISE_DEVICE_TYPES: tuple[str, ...] = ("cuda",)
SCATTER_PROD_MAX_WORK: int = 1 << 22

# --- scheduler (tunables, documented in the module docstring; not per-compile options)
MAX_FUSION_SIZE: int = 64
FUSION_LOOKBACK: int = 8
FEW_ROWS: int = 64
LONG_ROW: int = 32768
MIN_PEAK_GAIN: float = 0.05

# --- IR: split reductions (documented in the module docstring; not per-compile options)
SPLIT_TARGET_PROGRAMS: int = 512
SPLIT_OUTER_ROWS: int = 64
SPLIT_MIN_CHUNK: int = 2048
SPLIT_MIN_CHUNK_OUTER: int = 256
SPLIT_MAX_UNSPLIT_INNER: int = 8192

# --- graph cache
GRAPH_CACHE_MAX_CONSTANT_BYTES: int = 64 << 20

_OPTIONS = (
    "fallback_on_error",
    "debug_dir",
    "persistent_reduction_threshold",
    "realize_reads_threshold",
    "realize_opcount_threshold",
    "max_inline_ops",
    "autotune",
    "autotune_pointwise",
    "tiny_kernel_numel",
    "tiling",
    "split_long_normalizers",
    "compile_workers",
    "compile_pool",
    "precompile_overlap",
    "precompile_wait_all",
    "symbolic_shapes",
    "graph_cache",
    "pad_mm",
    "fp_fusion",
    "realize_broadcast_opcount",
    "layout_optimization",
    "warmup",
    "triton_key_from_stat",
    "min_cut_partition",
    "pause_gc",
    "eager_backward",
    "reorder_for_peak_memory",
    "reorder_for_comm_overlap",
    "cudagraphs",
)


# options that hold for the whole process (set from the environment, or by ``patch`` in tests):
# they take effect at the backend lookup, before ``torch.compile``'s options are known
_PROCESS_OPTIONS = {"triton_key_from_stat": "TILEFUSE_TRITON_KEY_FROM_STAT"}


def validate(options: dict[str, Any] | None, per_compile: bool = True) -> dict[str, Any]:
    """Check ``torch.compile(..., options=...)``: raises ValueError naming unknown keys, and
    TypeError when a value's type does not match the option's (a bool option given the string
    ``"false"`` would otherwise count as true). ``per_compile`` (torch.compile's options, not
    ``patch``): a process-wide option (``triton_key_from_stat``) is a ValueError naming its
    environment variable, since it took effect before the options were read."""
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(
            f"tilefuse options must be a dict of option names to values (e.g. options={{'tiling': "
            f"False}}), not {type(options).__name__} {options!r}"
        )
    options = dict(options or {})
    unknown = sorted(k for k in options if k not in _OPTIONS)
    if unknown:
        raise ValueError(
            f"unknown tilefuse option(s) {unknown}; known options: {[k for k in _OPTIONS if k not in _PROCESS_OPTIONS]}"
        )
    if per_compile:
        for k in options:
            if k in _PROCESS_OPTIONS:
                raise ValueError(
                    f"tilefuse option {k!r} holds for the whole process and cannot be given per "
                    f"compile: set the environment variable {_PROCESS_OPTIONS[k]} (to 0 to switch it "
                    f"off) before the first torch.compile"
                )
    g = globals()
    for k, v in options.items():
        default = g[k]
        if k == "debug_dir":
            ok = v is None or isinstance(v, (str, os.PathLike))
            want = "a directory path (str) or None"
            if isinstance(v, str) and not v.strip():
                options[k] = None  # empty or blank: off, as the environment variable
        elif isinstance(default, bool):
            # a bool or numpy's bool_ (named "bool" since numpy 2), stored as a Python bool; not
            # ints: 0/1 could be a misplaced count
            is_np_bool = type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_")
            ok, want = isinstance(v, bool) or is_np_bool, "True or False"
            if ok:
                v = options[k] = bool(v)
        elif isinstance(default, int):
            # any integral type (a numpy integer too), stored as a Python int
            ok, want = isinstance(v, numbers.Integral) and not isinstance(v, bool), "an int"
            if ok:
                v = options[k] = int(v)
        elif isinstance(default, str):
            ok, want = isinstance(v, str), "a str"
            if ok and k in _CHOICES:
                v = options[k] = v.strip().lower()  # as the environment variable: any case
        else:
            ok, want = True, ""
        if not ok:
            t = type(v)
            tname = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
            raise TypeError(f"tilefuse option {k!r} must be {want}, got {tname} {v!r}")
        _check_value(k, v)
    return options


# the smallest value each int option takes, and the values of the str options
_MIN = {
    "persistent_reduction_threshold": 1,
    "realize_reads_threshold": 0,
    "realize_opcount_threshold": 0,
    "max_inline_ops": 1,
    "compile_workers": 0,
    "tiny_kernel_numel": 0,
}
_CHOICES = {"compile_pool": ("process", "thread")}


def _check_value(k: str, v: Any) -> None:
    """ValueError for an option value outside its range (raised when the option is given, not
    later while compiling, where it would only make every graph fall back to eager)."""
    if k in _MIN and v < _MIN[k]:
        raise ValueError(f"tilefuse option {k!r} must be >= {_MIN[k]}, got {v}")
    if k in _CHOICES and v not in _CHOICES[k]:
        raise ValueError(f"tilefuse option {k!r} must be one of {_CHOICES[k]}, got {v!r}")
    if k == "debug_dir" and v is not None and os.path.exists(v) and not os.path.isdir(v):
        raise ValueError(
            f"tilefuse option 'debug_dir' must be a directory (created if missing), but {str(v)!r} is an existing file"
        )


for _k, _env in (
    ("persistent_reduction_threshold", "TILEFUSE_PERSISTENT_REDUCTION_THRESHOLD"),
    ("tiny_kernel_numel", "TILEFUSE_TINY_KERNEL_NUMEL"),
    ("compile_workers", "TILEFUSE_COMPILE_WORKERS"),
    ("compile_pool", "TILEFUSE_COMPILE_POOL"),
    ("debug_dir", "TILEFUSE_DEBUG_DIR"),
):
    try:
        _check_value(_k, globals()[_k])
    except ValueError as _e:
        raise ValueError(f"{_e} (from the environment variable {_env}; fix or unset it)") from None


def unknown_environment_variables(environ: Any = None) -> list[str]:
    """The ``TILEFUSE_*`` variables set in ``environ`` (default ``os.environ``) that tilefuse does
    not read (a misspelt ``TILEFUSE_TILNG=0`` would otherwise be ignored without a word, where a
    misspelt ``options`` key is an error), sorted; ``TILEFUSE_TEST_*`` (the test suite's) and empty
    or blank ones (which count as not set, as for every option) excepted."""
    env = os.environ if environ is None else environ
    return sorted(
        k
        for k in env
        if k.startswith("TILEFUSE_")
        and k not in ENVIRONMENT_VARIABLES
        and not k.startswith("TILEFUSE_TEST_")
        and str(env[k]).strip()
    )


def stacklevel_outside(skip: tuple[str, ...], pseudo: str, depth: int = 1) -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the function ``depth`` frames above
    this one point at the first frame, walking out, whose file neither starts with a path in
    ``skip`` nor is a pseudo-file starting with ``pseudo`` (``"<frozen"``: the import machinery;
    ``"<"``: every generated or frozen code object). The import machinery's own frames
    (``importlib._bootstrap``) are not counted, as ``warnings`` does not count them. 1 (that
    function itself) when every frame is skipped. Shared by the import-time warning here and
    ``runtime.user_stacklevel``."""
    frame, level = sys._getframe(depth), 1
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(pseudo) and not os.path.abspath(name).startswith(skip):
            return level
        frame = frame.f_back
        if frame is not None and not (
            "importlib" in frame.f_code.co_filename and "_bootstrap" in frame.f_code.co_filename
        ):
            level += 1
    return 1


def _warn_unknown_environment_variables() -> None:
    """One UserWarning at import naming ``unknown_environment_variables()``, pointed at the
    importing line outside tilefuse (the import machinery's frames skipped)."""
    unknown = unknown_environment_variables()
    if not unknown:
        return
    import warnings

    import importlib
    import runpy

    # frames that are not the user's: tilefuse, the import machinery, ``python -m``, and torch
    # (Dynamo's backend lookup imports tilefuse when torch.compile names it)
    skip = [
        os.path.dirname(os.path.abspath(__file__)) + os.sep,
        os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep,
        os.path.abspath(runpy.__file__),
    ]
    torch = sys.modules.get("torch")
    if getattr(torch, "__file__", None):
        skip.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    level = stacklevel_outside(tuple(skip), "<frozen")
    warnings.warn(
        f"tilefuse does not read the environment variable(s) {unknown} (misspelt?): they have no "
        f"effect. The ones it reads: {sorted(ENVIRONMENT_VARIABLES)}",
        UserWarning,
        stacklevel=level,
    )


@contextlib.contextmanager
def patch(**overrides: Any) -> Iterator[None]:
    """Temporarily set options (``with config.patch(fallback_on_error=False): ...``)."""
    overrides = validate(overrides, per_compile=False)
    g = globals()
    old = {k: g[k] for k in overrides}
    g.update(overrides)
    try:
        yield
    finally:
        g.update(old)


_warn_unknown_environment_variables()
