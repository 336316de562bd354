"""Index expressions and masks of a generated Triton kernel.

A node's loop variables are mapped onto the kernel's block indices (``xindex``, ``rindex``, and
``yindex`` in a 2-D tile), simplified over their ranges and printed by the native core's Triton
printer (``texpr``), which only uses truncating ``//``/``%`` where operands are provably
non-negative. The graph's size symbols become kernel parameters ``ks<i>``, and compound divisors
of them ``ps<i>`` parameters the wrapper computes on the host. Masks follow from the block
indices an expression uses, plus the masks of the lanes that produced an indirect index.

The kernel's index dtype is int32 when every offset it computes provably fits
(``index_values_fit_int32``, ``storages_fit_int32``), else int64.
"""

from __future__ import annotations

import torch

from .. import sizevars as SV
from .. import symbolic as S
from ..ir import nodes as ir
from ..scheduler import RINDEX, XINDEX, KernelGroup
from .simd import YINDEX


def index_values_fit_int32(group: KernelGroup) -> bool:
    """Whether every int64 ``index_expr`` value of the group's bodies (an index used as data:
    ``torch.arange``'s ``start + step * i``, an iota) is proven to lie in int32's range over its
    variables' ranges (-2**31 itself excluded: the printer cannot write it as an int32 literal).
    Such values are computed in the kernel's index dtype before their cast, so an int32 kernel
    would wrap ``arange(2**31 - 2, 2**31 + 3)`` (and could not print its 2**31); when one is not
    proven, the kernel indexes in int64. A symbolic range counts as up to 2**31 - 2 (the kernel's
    extent is guarded below 2**31 - 1 for int32 indexing)."""
    for n in group.nodes:
        body = n.body
        ranges = None
        for bn in body.nodes:
            if bn.op != "index_expr" or bn.args[1] != torch.int64:
                continue
            e = bn.args[0]
            if isinstance(e, int) or e.is_number:
                continue  # a constant is emitted as a typed constant (tl.full), not in the index dtype
            if ranges is None:
                ranges = {v: (r if isinstance(r, int) else 2**31 - 1) for v, r in body.var_ranges.items()}
            if not (S.statically_known_lt(e, 2**31 - 1, ranges) and S.statically_known_lt(-(2**31), e, ranges)):
                return False
    return True


def storages_fit_int32(group: KernelGroup, sv: SV.SizeVars) -> bool:
    """Whether the storage extent (``Layout.storage_size``: ``offset + Σ (size_i - 1)·stride_i +
    1`` elements) of every buffer the group's kernel loads from or stores to is below 2**31 - 1
    (static, proven, or guarded): graph inputs (their offset is their data pointer's, so 0),
    constants, the graph's buffers and the views of them. Every memory offset the kernel
    computes lies below its buffer's extent, so then the offsets fit int32; a small view of a
    large storage (24 elements of a 3 x (2**30 + 8) int8 tensor, a column slice of a big matrix)
    has offsets beyond 2**31 that int32 would wrap. Inductor's ``can_use_32bit_indexing``
    likewise checks the buffers' storage sizes besides the kernel's extent. A name the graph does
    not know (none expected) answers False: int64, to be safe."""
    from ..ir import graph_context as G

    graph = G.graph()
    names = [n.buf.get_name() for n in group.nodes]
    for n in group.nodes:
        names += [name for name, _ in (*n.body.loads(), *n.body.stores())]
    sizes = []
    for name in dict.fromkeys(names):  # in order: any guards are taken in the same order each time
        buf = graph.graph_inputs.get(name, graph.name_to_buffer.get(name))
        if buf is None:
            return False
        if isinstance(buf, ir.MutationBuffer):
            buf = buf.target
        sizes.append(buf.layout.storage_size())
    # symbolic sizes: only those no other one bounds are guarded
    return sv.evaluate_all_lt(sizes, 2**31 - 1)


class IndexingMixin:
    """Index expressions, sizes and masks of ``TritonKernelCodegen`` (reads its ``g``, ``sv``,
    ``tiling``, ``reduction``, ``index_dtype``, ``size_symbols``, ``precomputed`` and
    ``indirect_masks``)."""

    _DIVISIONS = {"FloorDiv": slice(1, 2), "CleanDiv": slice(1, 2), "ModularIndexing": slice(1, 3)}

    def shape(self, kind: str) -> str:
        """The block shape of a value of ``kind`` (``"x"``: one per output, ``"xr"``: one per row
        element) as Triton source."""
        if self.tiling is not None:
            return "[YBLOCK, XBLOCK]"
        if not self.reduction:
            return "[XBLOCK]"
        return "[XBLOCK, 1]" if kind == "x" else "[XBLOCK, RBLOCK]"

    def kernel_expr(self, expr):
        """``expr`` with the graph's size symbols renamed to the kernel's ``ks<i>`` parameters
        (numbered in first-use order, so the same kernel in two graphs has the same source), and
        compound divisors hoisted into ``ps<i>`` parameters (``_precompute``)."""
        if isinstance(expr, int):
            return expr
        fs = [f for f in expr.free_symbols if f.name in self.sv.symbols]
        if not fs:
            return expr
        for f in sorted(fs, key=lambda f: f.name):
            if f not in self.size_symbols:
                self.size_symbols[f] = S.sym(
                    f"ks{len(self.size_symbols)}",
                    kind=f.symbol_kind,
                    lower=f.assumed_range[0],
                    upper=f.assumed_range[1],
                )
        return self._precompute(expr.subs({f: self.size_symbols[f] for f in fs}))

    def _precompute(self, expr):
        """Inductor's precomputed size arguments (``IterationRangesEntry.precomputed_args``): a
        divisor or modulus of a FloorDiv / CleanDiv / ModularIndexing that is a compound
        expression of size parameters only (``ks0*ks1``, ``64*ks0``) becomes a ``ps<i>`` kernel
        parameter the wrapper computes once per call on the host, so the kernel divides by one
        value instead of recomputing the product in every lane. Sizes are >= 1, so the products
        are too (``ps`` symbols are positive)."""
        found = []
        stack = [expr]
        while stack:
            e = stack.pop()
            args = e.args
            which = self._DIVISIONS.get(e.kind)
            if which is not None:
                for a in args[which]:
                    if (
                        not a.is_number
                        and not a.is_symbol
                        and a not in found
                        and all(f.symbol_kind == "size" and f in self.size_symbols.values() for f in a.free_symbols)
                    ):
                        found.append(a)
            stack.extend(args)
        if not found:
            return expr
        mapping = {}
        for a in found:
            ps = self.precomputed.get(a)
            if ps is None:
                lo, hi = a.assumed_range
                ps = S.sym(f"ps{len(self.precomputed)}", kind="precomputed", lower=max(lo or 1, 1), upper=hi)
                self.precomputed[a] = ps
            mapping[a] = ps
        return expr.subs(mapping)

    def index_str(self, expr) -> str:
        """An index expression as kernel source, in the kernel's index dtype."""
        return S.texpr(self.kernel_expr(expr), self.index_dtype)

    def size_str(self, size) -> str:
        """A size as kernel source: a literal, or an expression over ``ks<i>`` parameters."""
        if isinstance(size, int):
            return str(size)
        return S.texpr(self.kernel_expr(size), self.index_dtype)

    def mask_for(self, expr) -> str | None:
        """The mask of an access at ``expr``: the masks of the block indices it uses (``ymask``,
        ``xmask``, ``rmask``) and of the lanes its indirect indices came from; None when it uses
        none (one address, in bounds for every lane)."""
        syms = set(expr.free_symbols)
        parts = []
        if XINDEX in syms:
            parts.append("xmask")
        if RINDEX in syms:
            parts.append("rmask")
        if YINDEX in syms:
            parts.insert(0, "ymask")
        for sym_ in syms:
            m = self.indirect_masks.get(sym_)
            if m:
                parts.extend(p for p in m.split(" & ") if p not in parts)
        if not parts:
            return None
        return " & ".join(parts)

    def _map_index(self, expr, m):
        """A node's index expression over the kernel's block indices (``m``: the node's loop
        variables -> their expressions), simplified over the block ranges."""
        if self.tiling is not None:
            ranges = {XINDEX: self.tiling.xnumel, YINDEX: self.tiling.ynumel}
            return S.simplify_with_ranges(expr.subs(m) if m else expr, ranges)
        ranges = {XINDEX: self.g.numel}
        if self.reduction:
            ranges[RINDEX] = self.g.rnumel
        return S.simplify_with_ranges(expr.subs(m) if m else expr, ranges)

    def _spans_block(self, idx, skind: str) -> bool:
        """Whether a store address over ``idx`` is a block of the stored value's whole shape: it
        uses every block axis's index (yindex and xindex in a tiled kernel, xindex, and rindex for
        an ``xr`` store of a reduction kernel). An indirect index alone does not count: its block
        can be narrower (a gather index loaded along one axis only)."""
        syms = idx.free_symbols
        need = [XINDEX]
        if self.tiling is not None:
            need.append(YINDEX)
        if skind == "xr" and self.reduction:
            need.append(RINDEX)
        return all(n in syms for n in need)
