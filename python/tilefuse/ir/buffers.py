"""Index helpers, layouts, the base IR node and named storage (input, constant and extern-kernel
buffers), after Inductor's ``ir.py``.

Shapes are lists of sizes: Python ints, or ``tilefuse.symbolic.Expr`` over size symbols for a
graph compiled with dynamic shapes (``tilefuse.sizevars``). Indices are lists of Exprs; a layout
maps an index to an element offset in its storage (element units).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .. import symbolic as S
from ..virtualized import ops

Index = list  # list[S.Expr | int]


def prod(xs) -> int:
    """Product of static sizes (1 for none)."""
    r = 1
    for x in xs:
        r *= x
    return r


def as_expr(v) -> S.Expr:
    """A size (int or symbolic Expr) as an Expr."""
    return v if isinstance(v, S.Expr) else S.Integer(v)


def contiguous_strides(size: Sequence[int]) -> list[int]:
    """Row-major strides of ``size`` (a 0-d tensor has none)."""
    out, acc = [], 1
    for s in reversed(list(size)):
        out.append(acc)
        acc = acc * (max(s, 1) if isinstance(s, int) else s)  # symbolic sizes are >= 1
    return list(reversed(out))


def digits(flat, sizes: list[int]) -> list:
    """Row-major digits of ``flat`` (ranging over prod(sizes)): FloorDiv for the outermost digit,
    ModularIndexing for the others, 0 for size-1 dims (Inductor's range-tree construct)."""
    out = []
    stride = 1
    strides = []
    for s in reversed(sizes):
        strides.append(stride)
        stride *= s
    strides.reverse()
    for k, (s, st) in enumerate(zip(sizes, strides)):
        if s == 1:
            out.append(S.Integer(0))
        elif k == 0 or all(x == 1 for x in sizes[:k]):
            out.append(S.FloorDiv(flat, st) if st != 1 else flat)
        else:
            out.append(S.ModularIndexing(flat, st, s))
    return out


def iter_index_product(sizes: Sequence[int]):
    """Every index tuple of ``sizes`` in row-major order."""
    return itertools.product(*(range(s) for s in sizes))


# ------------------------------------------------------------------------------------------ layouts


@dataclass
class Layout:
    """Device, dtype, size, stride and storage offset of a buffer (element units)."""

    device: torch.device
    dtype: torch.dtype
    size: list
    stride: list
    offset: int = 0

    def make_indexer(self) -> Callable[[Index], Any]:
        """index -> ``offset + Σ index_i·stride_i`` (size-1 dims skipped), as FixedLayout."""
        size, stride, offset = self.size, self.stride, self.offset

        def indexer(index: Index):
            if len(index) != len(size):
                raise ValueError(f"index of rank {len(index)} used on a layout of rank {len(size)}")
            out = offset if isinstance(offset, S.Expr) else S.Integer(offset)
            for i, s, st in zip(index, size, stride):
                if s != 1 and st != 0:
                    out = out + i * st
            return out

        return indexer

    def storage_size(self) -> int:
        if any(s == 0 for s in self.size):
            return 0
        return self.offset + sum((s - 1) * st for s, st in zip(self.size, self.stride)) + 1

    def is_contiguous(self) -> bool:
        return all(s == 1 or st == c for s, st, c in zip(self.size, self.stride, contiguous_strides(self.size)))


class FixedLayout(Layout):
    """A decided layout: strides will not change."""


class FlexibleLayout(Layout):
    """Not yet decided (contiguous by default); frozen to a FixedLayout when a view or an extern
    kernel needs concrete strides."""


# ------------------------------------------------------------------------------------------ base


class IRNode:
    """Base of every IR node: a tensor of ``get_size()``, ``get_dtype()`` on ``get_device()``."""

    def get_size(self) -> list:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def get_numel(self) -> int:
        return prod(self.get_size())

    def make_loader(self) -> Callable[[Index], Any]:
        raise NotImplementedError(f"{type(self).__name__} has no loader")

    def realize(self) -> str | None:
        return None

    def num_reads(self) -> int:
        return 1


# ------------------------------------------------------------------------------------------ buffers


class Buffer(IRNode):
    """Named storage with a layout; the loader reads it through the layout's indexer."""

    def __init__(self, name: str, layout: Layout):
        self.name, self.layout = name, layout

    def get_name(self) -> str:
        return self.name

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        indexer = self.layout.make_indexer()
        name = self.name

        def loader(index):
            return ops.load(name, indexer(index))

        return loader

    def realize(self):
        return self.name

    def freeze_layout(self) -> None:
        if isinstance(self.layout, FlexibleLayout):
            L = self.layout
            self.layout = FixedLayout(L.device, L.dtype, L.size, L.stride, L.offset)


class InputBuffer(Buffer):
    """A graph input (placeholder)."""


class ConstantBuffer(Buffer):
    """A tensor constant of the graph (get_attr), passed to the compiled module like an input."""


# ------------------------------------------------------------------------------------------ extern kernels


class ExternKernel(Buffer):
    """A buffer produced by calling an aten kernel from the wrapper (mm, addmm, convolution, …, or
    any op without a lowering — FallbackKernel). ``inputs`` are realized buffers or
    ReinterpretViews; ``args``/``kwargs`` are the call's arguments with those inputs in place of
    tensors (as ``TensorArg(i)`` markers). ``unbacked_defs``: the data-dependent size symbols its
    result defines, name -> pytree key path into the result (``nonzero``'s row count: ``.size()``
    then ``[0]``; ``.item()``'s value: the empty path), bound by the wrapper right after the call."""

    unbacked_defs: dict = {}

    def __init__(
        self,
        name: str,
        layout: Layout | None,
        op: Any,
        args: tuple,
        kwargs: dict,
        inputs: list,
        outputs_meta: Any = None,
    ):
        super().__init__(name, layout)  # layout None for multi-output kernels
        self.op, self.args, self.kwargs, self.inputs, self.outputs_meta = op, args, kwargs, inputs, outputs_meta

    def get_size(self):
        if self.layout is None:
            raise TypeError("a multi-output kernel has no single size; use its MultiOutputs")
        return self.layout.size


class FallbackKernel(ExternKernel):
    """An aten op with no tilefuse lowering, run as is from the wrapper."""


class RandomSeeds(ExternKernel):
    """The graph's random seeds: an int64 vector drawn from torch's default generator of the
    device once per call (``tilefuse.ir.random_seeds``), one element per random op of the
    graph. Each random op hashes (its seed, the element's flat offset) with Triton's Philox
    (``tl.rand``/``tl.randn``/``tl.randint``), so ``torch.manual_seed`` makes compiled results
    reproducible (Inductor's ``inductor_seeds`` + ``inductor_random``); the values differ from
    eager's, which uses another stream."""

    def add_seed(self) -> int:
        """A new seed slot for one random op: its index in the vector."""
        i = self.args[0]
        self.args = (i + 1,)
        self.layout.size, self.layout.stride = [i + 1], [1]
        return i


@dataclass(frozen=True)
class TensorArg:
    """Marker for the i-th tensor input inside an ExternKernel's args."""

    i: int


class MultiOutput(Buffer):
    """Output ``path`` (a tuple of indices) of a multi-output extern kernel."""

    def __init__(self, name: str, layout: Layout, parent: ExternKernel, path: tuple):
        super().__init__(name, layout)
        self.parent, self.path = parent, path
