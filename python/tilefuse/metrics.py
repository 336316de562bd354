"""Counters of what tilefuse generated, as Inductor's ``torch._inductor.metrics``.

``generated_kernel_count``: Triton kernels generated since the last ``reset()`` (one per fused
kernel, counted when its source is generated). ``reused_kernel_count``: of those, kernels whose
source was identical to an earlier kernel of the same graph (a repeated layer), so the earlier
kernel is launched again instead of being defined, compiled and autotuned a second time.
``generated_graph_count``: graphs compiled.
``eager_graph_count``: graphs that run eagerly (aten ops, no tilefuse kernels) because
compiling them failed, or one of their kernels failed to build before or at their first run, with
``config.fallback_on_error`` on (each also gave one warning). 0 means every graph handed to
tilefuse runs its compiled code. A graph whose kernel failed at its first run was compiled, so it
is in ``generated_graph_count`` too; one whose compile failed is not.
``fallback_kernel_count``: aten ops that ran through a FallbackKernel (no native lowering).
``extern_kernel_count``: extern kernel calls (mm, bmm, addmm, convolution, attention).
``symbolic_graph_count``: graphs with symbolic sizes compiled once for all sizes (a graph taken
from the graph cache counts too: the count is of graphs in use, as the kernel counts).
``specialized_graph_count``: graphs with symbolic sizes that could not be compiled symbolically
and are compiled per concrete input shape instead (``backend.SpecializingGraph``).
``phase_seconds``: wall seconds per compile phase, summed over graphs: ``cache_key`` (the graph
cache's key: hashing the graph, its inputs' metadata and the options; with ``config.graph_cache``),
``cache_lookup`` (reading and unpickling an entry, or finding none), ``lower`` (GraphLowering),
``schedule``, ``codegen`` (kernels and wrapper), ``load`` (writing and importing the module; on a
graph cache hit, reading the launch records and importing the entry's module),
``precompile`` (compiling kernels ahead: submitting the jobs and forking the workers, or, with
``config.precompile_overlap`` off, the whole compile), ``precompile_wait`` (a first call waiting
for the workers still compiling and loading their binaries), ``autotune`` (first launches that time their configs),
``restore`` (a graph cache hit loading its kernels' cubins from launch records), ``first_run`` (each
compiled graph's first call, autotuning excepted: the kernels' first launches), ``cache_store``
(writing a graph cache entry and, after the first call, its kernels' launch records), ``partition``
(AOTAutograd's min-cut partitioner splitting a training graph, ``config.min_cut_partition``).
``graph_cache_hits``: graphs whose compiled module came from the graph cache
(``tilefuse.runtime.graph_cache``) instead of being compiled; a hit adds the kernel, fallback
and extern counts its graph had when compiled, but not ``generated_graph_count``.
``precompile_seconds``: wall seconds spent compiling CUDA kernels ahead of their first launch
(``tilefuse.runtime.precompile``; 0 on the CPU).
``precompile_job_seconds``: the seconds each compile job (one kernel, one config) took in its
forked worker, in the order they finished: their sum against ``precompile_seconds`` times the
worker count tells whether compiling ahead is bound by the number of jobs or by the slowest one.
``precompile_job_labels``: for each entry of ``precompile_job_seconds``, the job's kernel and
config (``"tf_red_fused_max_sumexp_3 XBLOCK=1,RBLOCK=2048,num_warps=4"``; ``"?"`` when unknown), to find the
kernel on the critical path.
``precompile_load_seconds``: of the precompile time, the part this process spent loading the
binaries the workers compiled (each job run again here as a cache hit).
``precompile_batch_seconds``: per batch of forked workers, seconds from its start (fork) to its
last report: against the job sum / worker count it shows the fork and scheduling overhead.
``warmup_seconds``: how long each part of Triton's one-time warm-up took in its background thread
(``tilefuse.runtime.start_warmup``): ``driver`` (Triton's CUDA driver and its helper module),
``key`` (``triton_key``, a hash of Triton's install) and ``compiler`` (the first compile's set-up).
``autotune_config_seconds``: per config timed by the autotuner at a kernel's first launch,
``(first launch, timing)`` wall seconds: its first launch synchronized (finding the binary in
Triton's cache, loading it on the device, setting up its launcher) and then
``triton.testing.do_bench``'s timing of it (``runtime._time_config``). Their sums against the
``autotune`` phase show what of autotuning is per-candidate set-up and what is timing.
``cudagraph_graph_count``: graphs run under torch's CUDA graph trees (option ``cudagraphs``,
``mode="reduce-overhead"``; ``tilefuse.runtime.cudagraphs``). ``cudagraph_skip_count``: graphs
compiled with that option that run without CUDA graphs (CPU tensors, an op that cannot be captured,
...), each logged once with the reason; a graph whose sizes went past the recording limit counts
too.
``warmup_wait_seconds``: how long this process's compiles waited for those threads
(``tilefuse.runtime.wait_warmup``), time otherwise hidden inside the ``load`` phase.
"""

generated_kernel_count: int = 0
reused_kernel_count: int = 0
generated_graph_count: int = 0
eager_graph_count: int = 0
fallback_kernel_count: int = 0
extern_kernel_count: int = 0
symbolic_graph_count: int = 0
specialized_graph_count: int = 0
graph_cache_hits: int = 0
cudagraph_graph_count: int = 0
cudagraph_skip_count: int = 0
precompile_seconds: float = 0.0
phase_seconds: dict = {}
precompile_job_seconds: list = []
precompile_job_labels: list = []
precompile_load_seconds: float = 0.0
precompile_batch_seconds: list = []
warmup_seconds: dict = {}
warmup_wait_seconds: float = 0.0
autotune_config_seconds: list = []


def reset() -> None:
    """Set every counter to 0."""
    global \
        generated_kernel_count, \
        reused_kernel_count, \
        generated_graph_count, \
        fallback_kernel_count, \
        extern_kernel_count
    global eager_graph_count
    global precompile_seconds, symbolic_graph_count, specialized_graph_count, phase_seconds, graph_cache_hits
    global precompile_job_seconds, precompile_job_labels, warmup_seconds, warmup_wait_seconds
    global precompile_load_seconds, precompile_batch_seconds, autotune_config_seconds
    global cudagraph_graph_count, cudagraph_skip_count
    phase_seconds = {}
    cudagraph_graph_count = 0
    cudagraph_skip_count = 0
    autotune_config_seconds = []
    precompile_load_seconds = 0.0
    precompile_batch_seconds = []
    warmup_seconds = {}
    warmup_wait_seconds = 0.0
    precompile_job_seconds = []
    precompile_job_labels = []
    graph_cache_hits = 0
    symbolic_graph_count = 0
    specialized_graph_count = 0
    generated_kernel_count = 0
    reused_kernel_count = 0
    generated_graph_count = 0
    eager_graph_count = 0
    fallback_kernel_count = 0
    extern_kernel_count = 0
    precompile_seconds = 0.0


_COUNTERS = (
    "generated_kernel_count",
    "reused_kernel_count",
    "generated_graph_count",
    "eager_graph_count",
    "fallback_kernel_count",
    "extern_kernel_count",
    "precompile_seconds",
    "symbolic_graph_count",
    "specialized_graph_count",
    "graph_cache_hits",
)


def add_phase(name: str, seconds: float) -> None:
    """Add ``seconds`` to compile phase ``name`` (``phase_seconds``)."""
    phase_seconds[name] = phase_seconds.get(name, 0.0) + seconds


def snapshot() -> dict:
    """The current counter values (for ``restore``)."""
    g = globals()
    return {k: g[k] for k in _COUNTERS}


def restore(values: dict) -> None:
    """Set the counters back to a ``snapshot()`` (a graph whose compile failed ran eagerly: what
    it generated is not counted)."""
    globals().update({k: values[k] for k in _COUNTERS if k in values})
