"""The loop-level IR (``nodes``) and traced loop bodies (``loop_body``)."""

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
    Pointwise,
    Reduction,
    ReinterpretView,
    StorageBox,
    TensorArg,
    TensorBox,
)
