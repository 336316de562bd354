"""The loop-level IR's node classes and view functions in one namespace, after Inductor's
``ir.py``: ``from tilefuse.ir import nodes as ir`` then ``ir.Pointwise``, ``ir.reshape_view``, ….

The definitions live by topic:

* ``tilefuse.ir.buffers``: index helpers (``prod``, ``contiguous_strides``, ``digits``, …), layouts
  (``Layout``, ``FixedLayout``, ``FlexibleLayout``), the base ``IRNode``, named storage
  (``Buffer``, ``InputBuffer``, ``ConstantBuffer``) and extern kernels (``ExternKernel``,
  ``FallbackKernel``, ``RandomSeeds``, ``TensorArg``, ``MultiOutput``);
* ``tilefuse.ir.loops``: lazily computed values (``Loops``, ``Pointwise``, ``Reduction`` with its
  split rules, ``Scan``), the buffers they are realized into (``ComputedBuffer``,
  ``MutationBuffer``) and the boxes (``MutableBox``, ``StorageBox``, ``TensorBox``);
* ``tilefuse.ir.views``: ``GenericView``/``ReinterpretView``, the view functions and
  ``realize_input``.

This module re-exports every one of them (private helpers that other layers call included), so a
name keeps one import path whichever module defines it.
"""

from .buffers import (  # noqa: F401
    Buffer,
    ConstantBuffer,
    ExternKernel,
    FallbackKernel,
    FixedLayout,
    FlexibleLayout,
    Index,
    InputBuffer,
    IRNode,
    Layout,
    MultiOutput,
    RandomSeeds,
    TensorArg,
    as_expr,
    contiguous_strides,
    digits,
    iter_index_product,
    prod,
)
from .loops import (  # noqa: F401
    REDUCTION_TYPES,
    ComputedBuffer,
    Loops,
    MutableBox,
    MutationBuffer,
    Pointwise,
    Reduction,
    Scan,
    StorageBox,
    TensorBox,
    _combine_identity,
    masked_tail,
)
from .views import (  # noqa: F401
    BaseView,
    GenericView,
    ReinterpretView,
    _strided_view_chain,
    _view,
    as_storage_and_layout,
    expand_view,
    permute_view,
    realize_input,
    reshape_groups,
    reshape_view,
    slice_bounds,
    slice_view,
    squeeze_view,
    unsqueeze_view,
    unwrap_storage,
    view_strides,
)
