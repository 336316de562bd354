"""The loop-level IR: node classes (``nodes``, which re-exports ``buffers``, ``loops`` and
``views``), the op vocabulary of inner functions (``ops``) and traced loop bodies
(``loop_body``)."""

from .loop_body import BodyNode, BodyValue, LoopBody  # noqa: F401
from .nodes import *  # noqa: F401,F403
from .nodes import (  # noqa: F401
    Buffer,
    ComputedBuffer,
    ConstantBuffer,
    ExternKernel,
    FallbackKernel,
    FixedLayout,
    FlexibleLayout,
    GenericView,
    InputBuffer,
    IRNode,
    Layout,
    Loops,
    MultiOutput,
    MutationBuffer,
    Pointwise,
    RandomSeeds,
    Reduction,
    ReinterpretView,
    Scan,
    StorageBox,
    TensorArg,
    TensorBox,
)
