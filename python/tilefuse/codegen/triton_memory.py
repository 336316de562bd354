"""Loads, stores, constants and indirect indices of a generated Triton kernel.

Values a node reads from a buffer written earlier in the same kernel come from registers (store
-> load forwarding); a buffer only read that way, and not needed elsewhere, is never stored or
allocated (the kernel drops such stores once the body is complete). Each load is recorded as a
``heuristics.LoadSite``; its eviction hint is decided and written into the line when the whole
body is known (``TritonKernelCodegen._render_loads``).

Indirect indexing: ``ops.indirect_indexing(value, size)`` in a loop body yields an index symbol
``ind<N>`` (kind ``indirect``) used inside load indices. Codegen defines a variable of that name
from the loaded value (``+ size`` where negative), asserts ``0 <= ind < size`` in unmasked lanes
(``tl.device_assert``, live under the interpreter; on the GPU only in Triton debug mode, as in
Inductor), and masks loads through it with the mask of the lanes that produced the value.
"""

from __future__ import annotations

import torch

from ..ir.loop_body import BodyValue
from ..scheduler import XINDEX
from . import triton_ops as ops
from .heuristics import LoadSite
from .triton_ops import tl_dtype


def _buffer_dtype(name: str) -> torch.dtype:
    """dtype of buffer ``name`` in the graph being compiled."""
    from ..ir import graph_context as G

    return G.dtype_of(name)


class MemoryMixin:
    """Memory and constant ops of ``TritonKernelCodegen``: ``load``, ``store`` (plain and atomic),
    ``constant``, ``index_expr`` and ``indirect_indexing``."""

    def codegen_load(self, a, vals, m, kind: str, dtype: torch.dtype) -> str:
        """``ops.load(name, index[, mask])``: the forwarded register value when the buffer was
        stored earlier in this kernel where the value is visible, else a (masked) ``tl.load``."""
        name, idx = a[0], self._map_index(a[1], m)
        fw = self.forward.get(name)
        if fw is not None:
            var, fkind, lid = fw
            if fkind == "x" or (lid == self.loop_id and (self.persistent or self.in_loop)):
                return var
        if name in self.produced:
            self.needs_memory.add(name)
        ptr = self.args.input(name)
        mask = self.mask_for(idx)
        if len(a) > 2 and mask is not None:
            # a load inside ops.masked: lanes off its mask read nothing (an index-free load stays
            # unmasked: one address, in bounds whatever the mask)
            mask = f"{mask} & ({vals[a[2].idx]})"
        istr = self.index_str(idx)
        # in a reduction kernel, an index without xindex is read by every row-program
        shared = self.reduction and XINDEX not in idx.free_symbols
        if mask is None:
            v = self._load(f"tl.load({ptr} + ({istr}))", ptr, shared)
            return self.cse(f"tl.broadcast_to({v}, {self.shape(kind)})")
        other = ", other=0.0" if dtype.is_floating_point else ", other=0"
        return self._load(f"tl.load({ptr} + ({istr}), {mask}{other})", ptr, shared)

    def _load(self, expr: str, ptr: str, shared: bool) -> str:
        """The variable of load ``expr`` (CSE'd); a new load line is recorded as a load site."""
        var, line = self.cse_define(expr)
        if line is not None:
            self.load_sites.append(LoadSite(line, ptr, self.loop_id - 1 if self.in_loop else -1, shared))
        return var

    def codegen_constant(self, value, dt: torch.dtype, kind: str) -> str:
        """``ops.constant(value, dtype)`` as a block of ``kind``'s shape."""
        signed = ops.negative_zero_or_nan(value, dt)
        if signed is not None:
            # -0.0 and a NaN with its sign bit set: Triton's tl.full builds every zero as +0.0 (its
            # null value) and every NaN from float("nan"), so the value is built from its bits in
            # ``dt``, as torch rounds the scalar (x // -0.0 is -inf for x > 0, as in eager;
            # signbit(full(-nan)) is True in float32/float64/float16)
            ft = torch.float32 if dt == torch.bfloat16 and self.interpret else dt
            it = ops.SAME_WIDTH_INT[ft]
            lit = int(signed.to(ft).view(it).item())
            z = f"tl.full({self.shape(kind)}, {lit}, {tl_dtype(it)}).to({tl_dtype(ft)}, bitcast=True)"
            return self.cse(z if ft == dt else f"{z}.to({tl_dtype(dt)})")
        if dt == torch.bfloat16 and self.interpret:
            # the interpreter cannot build bf16 constants: round in Python (RNE, as torch), build the
            # exactly representable value in fp32 and convert (exact)
            v = float(torch.tensor(float(value), dtype=torch.bfloat16))
            return self.cse(
                f"tl.full({self.shape(kind)}, {ops.const_literal(v, torch.float32)}, tl.float32).to(tl.bfloat16)"
            )
        return self.cse(f"tl.full({self.shape(kind)}, {ops.const_literal(value, dt)}, {tl_dtype(dt)})")

    def codegen_index_expr(self, expr, dt: torch.dtype, m, kind: str) -> str:
        """``ops.index_expr(expr, dtype)``: an index used as data, as a block of ``kind``'s shape."""
        e = self._map_index(expr, m)
        # a block built from a scalar: the interpreter has no bfloat16 scalar constructor, so it is
        # built in float32 and converted (one rounding, as torch's, for integers below 2**24)
        full_dt, to = dt, ""
        if dt == torch.bfloat16 and self.interpret:
            full_dt, to = torch.float32, f".to({tl_dtype(dt)})"
        if e.is_number:  # a constant index (a size-1 range): broadcast_to needs a tensor
            return self.cse(f"tl.full({self.shape(kind)}, {e.int_value}, {tl_dtype(full_dt)}){to}")
        if all(f.name in self.sv.symbols for f in e.free_symbols):
            # sizes only (``x / s0``): a scalar, which broadcast_to cannot take under the interpreter
            return self.cse(f"tl.full({self.shape(kind)}, {self.index_str(e)}, {tl_dtype(full_dt)}){to}")
        return self.cse(f"tl.broadcast_to(({self.index_str(e)}), {self.shape(kind)}).to({tl_dtype(dt)})")

    def _emit_store(self, op, a, vals, m, kind) -> None:
        """``ops.store`` / ``ops.store_reduction``: a masked ``tl.store`` (recorded, so an unneeded
        one can be dropped, and its value forwarded to later loads), or an atomic update."""
        name, idx, value = a[0], self._map_index(a[1], m), a[2]
        v = vals[value.idx] if isinstance(value, BodyValue) else str(value)
        skind = "x" if op == "store_reduction" or (kind == "x") else "xr"
        dt = _buffer_dtype(name)
        ptr = self.args.output(name)
        mask = self.mask_for(idx) or "xmask"
        if self.tiling is not None:
            mask = " & ".join(["ymask", "xmask"] + [p for p in mask.split(" & ") if p not in ("ymask", "xmask")])
        if skind == "xr" and "rmask" not in mask and self.reduction:
            mask = mask + " & rmask"
        vv = v
        if skind == "xr" or not self.reduction:
            vv = f"tl.broadcast_to({v}, {self.shape(skind)})"
        else:
            vv = f"tl.broadcast_to({v}, [XBLOCK, 1])"
        istr = self.index_str(idx)
        if not self._spans_block(idx, skind):
            # the address misses a block axis (a constant address, or one whose size-1 axis dropped
            # out of the index: a scatter into [1, n]): make the pointer the stored block's shape,
            # which Triton's store and atomics require (the value broadcasts only up to the pointer)
            istr = f"{istr} + tl.zeros({self.shape(skind)}, {self.index_dtype})"
        src = value.dtype if isinstance(value, BodyValue) else None
        mode = a[3] if op == "store" and len(a) > 3 else None
        if mode == "atomic_add":
            # accumulates into a buffer other kernels initialized: never forwarded or removed
            self.emit(f'tl.atomic_add({ptr} + ({istr}), {self.cast(vv, src, dt)}, {mask}, sem="relaxed")')
            return None
        if mode in ("atomic_max", "atomic_min"):
            self._emit_atomic_extremum(mode == "atomic_max", ptr, istr, self.cast(vv, src, dt), dt, mask)
            return None
        li = self.emit(f"tl.store({ptr} + ({istr}), {self.cast(vv, src, dt)}, {mask})")
        self.stores.append((name, li))
        self.forward[name] = (v, skind, self.loop_id)
        return None

    def _emit_atomic_extremum(self, is_max: bool, ptr: str, istr: str, v: str, dt: torch.dtype, mask: str) -> None:
        """``ptr[istr] = max(ptr[istr], v)`` (``min`` unless ``is_max``) atomically. Integers use
        Triton's atomic max/min directly. A float is combined on its bits: where the sign bit is
        clear the bits order as the values do (signed integer max/min), where it is set they
        order reversed (unsigned integer min/max). A NaN in ``v`` is first made the NaN that wins
        that comparison against every other bit pattern of the right sign (for max the positive
        quiet NaN, larger than +inf's bits; for min the negative one, larger unsigned than
        -inf's), so a NaN source propagates as torch's amax/amin. The NaN test is on integer
        bits too, so no float rewrite can drop it. A NaN already in the buffer with the other
        sign bit can be displaced: the lowering restores those from its input."""
        if dt not in (torch.float32, torch.float64):
            fn = "tl.atomic_max" if is_max else "tl.atomic_min"
            self.emit(f'{fn}({ptr} + ({istr}), {v}, {mask}, sem="relaxed")')
            return
        wide = dt == torch.float64
        it, ut = ("tl.int64", "tl.uint64") if wide else ("tl.int32", "tl.uint32")
        magnitude = "0x7FFFFFFFFFFFFFFF" if wide else "0x7FFFFFFF"
        inf_bits = "0x7FF0000000000000" if wide else "0x7F800000"
        # quiet NaN bit patterns, the negative one as a signed literal of the integer type
        nan_bits = (
            ("0x7FF8000000000000" if wide else "0x7FC00000")
            if is_max
            else (str(-(1 << 51)) if wide else str(-(1 << 22)))
        )
        bits = self.cse(f"{v}.to({it}, bitcast=True)")
        is_nan = self.cse(f"({bits} & {magnitude}) > {inf_bits}")
        bits = self.cse(f"tl.where({is_nan}, {nan_bits}, {bits})")
        neg = self.cse(f"{bits} < 0")
        signed_fn, unsigned_fn = ("tl.atomic_max", "tl.atomic_min") if is_max else ("tl.atomic_min", "tl.atomic_max")
        self.emit(f'{signed_fn}({ptr}.to(tl.pointer_type({it})) + ({istr}), {bits}, ({mask}) & ~{neg}, sem="relaxed")')
        self.emit(
            f"{unsigned_fn}({ptr}.to(tl.pointer_type({ut})) + ({istr}), {bits}.to({ut}, bitcast=True), "
            f'({mask}) & {neg}, sem="relaxed")'
        )

    def codegen_indirect(self, a, vals, kind) -> None:
        """Define the indirect index symbol as a variable of the same name: the loaded value,
        ``+ size`` where negative (torch's wrap-around), checked to lie in ``[0, size)`` in every
        unmasked lane (``tl.device_assert``, as Inductor's bounds check)."""
        value, size, symbol, check, wrap = a
        v = vals[value.idx]
        name = str(symbol)
        mask = "xmask" if (kind == "x" or not self.reduction) else "xmask & rmask"
        if self.tiling is not None:
            mask = "ymask & xmask"
        size = self.size_str(size)
        self.emit(f"{name} = tl.where({v} < 0, {v} + {size}, {v})" if wrap else f"{name} = {v}")
        if check:
            self.emit(
                f"tl.device_assert(((0 <= {name}) & ({name} < {size})) | ~({mask}), "
                f'"index out of bounds: a value of an index tensor (gather, index, scatter, embedding or '
                f"a loss's class targets) lies outside [0, {size}) (check 0 <= {name} < {size})\")"
            )
        self.indirect_masks[symbol] = mask
        return None
