"""Code generation: one Triton kernel per fused KernelGroup and the Python module that runs a graph.

* ``triton_kernel``: ``TritonKernelCodegen``, a kernel's source and launch facts, assembled from
  ``triton_indexing`` (index expressions, masks), ``triton_memory`` (loads, stores, constants)
  and ``triton_reductions`` (reductions, scans); ``triton`` gathers the public names;
* ``triton_ops``: the op -> Triton source table and dtype conversions;
* ``heuristics``: reduction form, launch configs, tile grid order, eviction hints;
* ``cse``: a kernel's common-subexpression table;
* ``simd``: the 2-D tiling choice of pointwise kernels;
* ``memory_planning``: liveness, buffer reuse, in-place outputs, kernel deduplication;
* ``wrapper``: the generated module's source.
"""
