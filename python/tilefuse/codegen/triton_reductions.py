"""Reductions and scans of a generated Triton kernel.

A reduction kernel works on 2-D blocks ``[XBLOCK, RBLOCK]``: ``xindex`` a column of output rows,
``rindex`` a row of elements. *Persistent* (the row fits one block, ``heuristics.is_persistent``):
every reduction is one ``tl`` reduction over the block's row axis, and two equal reductions of one
value share one line (CSE). *Looped*: ``for roffset in range(0, rnumel, RBLOCK)`` with
accumulators made before the loop (lines inserted at the loop's start), updated inside it, and
finished after it (the loop's pending finishers); a node that needs a reduction finished earlier
in the kernel starts a new loop.

``sumexp`` (``Σ exp(v - max v)``) and ``sqdev`` (``Σ (v - mean v)²``) are one-pass forms (online
softmax, Welford) that share their row maximum / sum with the plain max / sum reductions of the
same value in the same loop.
"""

from __future__ import annotations

import torch

from ..ir.dtypes import accumulator_dtype
from .triton_ops import reduction_identity, tl_dtype


class ReductionMixin:
    """Reductions and scans of ``TritonKernelCodegen`` (reads and extends its loop state:
    ``loop_start``, ``loop_pending_reductions``, ``looped_max``, ``row_max_of_sumexp``,
    ``sumexp_of``, ``looped_of``)."""

    def codegen_scan(self, a, vals) -> str:
        """Inclusive scan (``sum`` / ``prod`` / ``logsumexp``) of a value along the row. Persistent:
        ``tl.cumsum`` / ``tl.cumprod`` / an associative scan with the log-add-exp combine over the
        whole row. Looped: the same scan of each chunk combined with a per-row carry, the
        combination of every earlier chunk (a ``[XBLOCK, 1]`` accumulator made before the loop,
        advanced by the chunk's reduction after its scan), so a row of any length — symbolic
        included — is scanned in one pass (Inductor splits long scans the same way). Under the
        interpreter a float32 scan (sum, product, log-add-exp) combines and carries in float64:
        it scans a row one element after another, so a float32 running sum's error grows with the
        row (2.2e-4 at 3000 elements against eager's 3.8e-6; a logcumsumexp of 5000 rows 2.3e-5
        against 4.8e-7), and eager's CPU kernels accumulate float32 in float64 (ATen's CPU
        acc_type)."""
        dtype, stype, value = a
        vb = self.cse(f"tl.broadcast_to({vals[value.idx]}, [XBLOCK, RBLOCK]).to({tl_dtype(dtype)})")
        ident = {"sum": "0", "prod": "1", "logsumexp": 'float("-inf")'}[stype]
        m = self.cse(f"tl.where(xmask & rmask, {vb}, {ident})")
        wide = self.interpret and dtype == torch.float32
        sdt = "tl.float64" if wide else tl_dtype(dtype)
        if wide:
            m = self.cse(f"{m}.to(tl.float64)")
        if stype == "logsumexp":
            scanned = f"tl.associative_scan({m}, 1, _logaddexp_combine)"
        else:
            scanned = f"tl.{'cumsum' if stype == 'sum' else 'cumprod'}({m}, 1)"
        if self.persistent:
            return self.cse(f"{scanned}.to({tl_dtype(dtype)})" if wide else scanned)
        carry = self.newvar()
        self._insert_inits([f"{carry} = tl.full([XBLOCK, 1], {ident}, {sdt})"])
        chunk = self.newvar()
        self.emit(f"{chunk} = {scanned}")
        out = self.newvar()
        if stype == "sum":
            self.emit(f"{out} = {chunk} + {carry}")
            self.emit(f"{carry} = {carry} + tl.sum({m}, 1)[:, None]")
        elif stype == "prod":
            self.emit(f"{out} = {chunk} * {carry}")
            self.emit(f"{carry} = {carry} * tl.reduce({m}, 1, _prod_combine)[:, None]")
        else:
            self.emit(f"{out} = _logaddexp_combine({chunk}, {carry})")
            self.emit(f"{carry} = _logaddexp_combine({carry}, tl.reduce({m}, 1, _logaddexp_combine)[:, None])")
        if wide:
            return self.cse(f"{out}.to({tl_dtype(dtype)})")
        return out

    # ------------------------------------------------------------------ reductions
    def codegen_reduction(self, a, vals) -> str:
        """``ops.reduction(dtype, src_dtype, rtype, value)``: the row's reduction as a
        ``[XBLOCK, 1]`` value (the variable named; in a looped kernel defined once the loop
        closes). Types sum, prod, any, max, min (NaN-propagating for floats), argmax, argmin
        (first index of the extreme, NaN the extreme), sumexp and sqdev (``_codegen_sumexp``,
        ``_codegen_sqdev``)."""
        dtype, src_dtype, rtype, value = a
        v = vals[value.idx]
        if rtype == "sumexp":
            return self._codegen_sumexp(v, dtype)
        if rtype == "sqdev":
            return self._codegen_sqdev(v, dtype)
        acc_dt = dtype if rtype not in ("argmax", "argmin") else src_dtype
        if rtype in ("argmax", "argmin"):
            # float16 / bfloat16 values compare in their accumulator dtype (float32)
            acc_dt = accumulator_dtype(src_dtype)
        ident = reduction_identity(rtype, acc_dt)
        tdt = tl_dtype(acc_dt)
        vb = self.cse(f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])")
        is_float = acc_dt.is_floating_point
        if self.persistent:
            # CSE'd: two nodes reducing the same value the same way (a softmax's amax and the
            # maximum inside its sumexp) share one reduction
            m = self.cse(f"tl.where(xmask & rmask, {vb}, {ident})")
            return self.cse(self.final_reduce(rtype, m, "rindex", is_float, tdt))
        if (rtype, vb, tdt) in self.looped_of:
            # the same reduction of the same value earlier in this loop (var_mean's and a layer
            # norm's sums of one row): one accumulator
            return self.looped_of[(rtype, vb, tdt)]
        out = self.looped_of[(rtype, vb, tdt)] = self.newvar()
        if rtype == "max" and is_float:
            shared = self.row_max_of_sumexp.get((vb, tdt))
            if shared is not None:
                # a looped sumexp of the same value keeps this row maximum already (its running
                # maximum): no second accumulator, no second maximum per element
                self.loop_pending_reductions.append(lambda: self.emit(f"{out} = {shared}"))
                return out
        # looped: accumulators before the loop, update inside, finish after it
        accv = self.newvar()
        redirect: dict = {}  # "row_max": set when a sumexp of the same value takes this maximum over
        inits = [f"{accv} = tl.full([XBLOCK, RBLOCK], {ident}, {tdt})"]
        acci = None
        if rtype in ("argmax", "argmin"):
            acci = self.newvar()
            inits.append(f"{acci} = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int64)")
        self._insert_inits(inits)
        vv = f"{vb}.to({tdt})"
        if rtype == "sum":
            self.emit(f"{accv} = tl.where(xmask & rmask, {accv} + {vv}, {accv})")
        elif rtype == "prod":
            self.emit(f"{accv} = tl.where(xmask & rmask, {accv} * {vv}, {accv})")
        elif rtype == "any":
            self.emit(f"{accv} = tl.where(xmask & rmask, {accv} | ({vv} != 0), {accv})")
        elif rtype in ("max", "min"):
            if is_float:  # NaN-propagating (torch: a NaN is the extreme); one max.NaN instruction
                fn = "maximum" if rtype == "max" else "minimum"
                self.emit(
                    f"{accv} = tl.where(xmask & rmask, tl.{fn}({accv}, {vv}, "
                    f"propagate_nan=tl.PropagateNan.ALL), {accv})"
                )
                if rtype == "max":
                    # a sumexp of the same value later in this loop takes this maximum over
                    # (_codegen_sumexp): it drops the lane accumulator and finishes from its own
                    self.looped_max[(vb, tdt)] = (accv, redirect)
            else:
                cmp = ">" if rtype == "max" else "<"
                self.emit(f"{accv} = tl.where(xmask & rmask & ({vv} {cmp} {accv}), {vv}, {accv})")
        else:
            cmp = ">" if rtype == "argmax" else "<"
            # each lane keeps its first extreme value: the first element it sees (even one equal to
            # the identity, e.g. a row of -inf or of zeros), then strictly better ones, and a NaN
            # once one appears (torch: NaN is the extreme)
            better = f"({vv} {cmp} {accv})"
            if is_float:
                better = f"({better} | (({vv} != {vv}) & ({accv} == {accv})))"
            self.emit(f"_take = xmask & rmask & (({acci} == 2147483647) | {better})")
            self.emit(f"{accv} = tl.where(_take, {vv}, {accv})")
            self.emit(f"{acci} = tl.where(_take, rindex.to(tl.int64), {acci})")

        def finish():
            if "row_max" in redirect:
                self.emit(f"{out} = {redirect['row_max']}")
                return
            self.emit(f"{out} = " + self.final_reduce(rtype, accv, acci, is_float, tdt))

        self.loop_pending_reductions.append(finish)
        return out

    def _codegen_sumexp(self, v: str, dtype: torch.dtype) -> str:
        """``Σ exp(v - max v)`` per row (``Reduction`` type sumexp). Persistent: the row's maximum,
        then the sum, both from registers. Looped: the online-softmax recurrence in one pass — a
        running row maximum ``m`` (one block reduction per iteration) and per-lane sums of
        ``exp(v - m)``, rescaled by ``exp(m_old - m_new)`` when ``m`` grows; a float max
        reduction of the same value in the same loop (the amax beside every softmax, log_softmax
        and logsumexp) is that running maximum, so the row costs one maximum and one ``exp`` per
        element. Masked positions enter as ``-inf`` and the exponent is taken against
        ``m`` with ``-inf`` replaced by 0, so no per-element guard is needed: a looped row of only
        ``-inf`` sums to 0 (never ``exp(-inf + inf)``; persistent: 0 too in a ``reduce_only`` kernel,
        else its length, see below), a row
        whose maximum is ``+inf`` or that holds a NaN gives NaN (eager: ``exp(inf - inf)``)."""
        tdt = tl_dtype(dtype)
        vb0 = self.cse(f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])")
        vb = self.cse(f"{vb0}.to({tdt})")
        key = (vb0, tdt)
        if key in self.sumexp_of:
            # softmax, log_softmax, logsumexp and a cross-entropy of the same rows: one normalizer
            return self.sumexp_of[key]
        out = self.sumexp_of[key] = self.newvar()

        def finish_from(mv: str, terms: str) -> None:
            self.emit(f"{out} = tl.sum({terms}, 1)[:, None]")
            self.emit(f'{out} = tl.where({mv} == float("inf"), float("nan"), {out})')

        if self.persistent and self.reduce_only:
            # no per-element output shares the exp: the exponent against the maximum with -inf
            # replaced by 0, no per-element guard (a row of only -inf sums to 0, as looped): fewer
            # ops per element than the guarded form below, which a memory-bound row notices
            mx = self.cse(
                self.final_reduce(
                    "max", self.cse(f'tl.where(xmask & rmask, {vb0}, float("-inf"))'), "rindex", True, tdt
                )
            )
            mx = self.cse(f"{mx}.to({tdt})")
            base = self.cse(f'tl.where({mx} == float("-inf"), 0.0, {mx})')
            finish_from(mx, f"tl.where(xmask & rmask, tl.exp({vb} - {base}), 0.0)")
            return out
        if self.persistent:
            # the row maximum as a max reduction of the same value emits it: shared (CSE) with the
            # amax a softmax or logsumexp computes beside it. NaN-propagating: a NaN row sums to NaN.
            # The terms are exp(v - max) exactly as a softmax's output computes them, so the
            # compiler shares that exp between the sum and the output (one exp per element; any
            # other form here computes a second exp per element); a row of only -inf then counts
            # 1 per element (exp(-inf + inf) is taken as 1)
            mx = self.cse(
                self.final_reduce(
                    "max", self.cse(f'tl.where(xmask & rmask, {vb0}, float("-inf"))'), "rindex", True, tdt
                )
            )
            mx = self.cse(f"{mx}.to({tdt})")
            finish_from(mx, f"tl.where(xmask & rmask, tl.where({vb} == {mx}, 1.0, tl.exp({vb} - {mx})), 0.0)")
            return out
        # the masked value (-inf off the row), shared with a max reduction of the same value
        m = self.cse(f'tl.where(xmask & rmask, {vb}, float("-inf"))')
        # the running maximum is per row ([XBLOCK, 1], one block reduction per iteration) and the
        # sums per lane, rescaled by the row's exp(m_old - m_new): one exp per element (a per-lane
        # maximum needs two, which made long rows ALU-bound)
        accm, accs, nm = self.newvar(), self.newvar(), self.newvar()
        self._insert_inits(
            [f'{accm} = tl.full([XBLOCK, 1], float("-inf"), {tdt})', f"{accs} = tl.full([XBLOCK, RBLOCK], 0, {tdt})"]
        )
        self.emit(f"{nm} = tl.maximum({accm}, {self._nan_extreme(m, 'max')}, propagate_nan=tl.PropagateNan.ALL)")
        base = self.newvar()
        self.emit(f'{base} = tl.where({nm} == float("-inf"), 0.0, {nm})')
        self.emit(f"{accs} = {accs} * tl.exp({accm} - {base}) + tl.exp({m} - {base})")
        self.emit(f"{accm} = {nm}")
        # a max reduction of the same value: emitted earlier in this loop, its lane accumulator
        # goes (its lines blanked, its finisher reads the running maximum); emitted later, it
        # finds the running maximum here (codegen_reduction)
        earlier = self.looped_max.pop(key, None)
        if earlier is not None:
            accv, redirect = earlier
            redirect["row_max"] = accm
            for i, line in enumerate(self.lines):
                if line is not None and line.lstrip().startswith(f"{accv} = "):
                    self.lines[i] = None  # dropped when the kernel is assembled
        self.row_max_of_sumexp[key] = accm

        def finish():
            finish_from(accm, accs)

        self.loop_pending_reductions.append(finish)
        return out

    def _codegen_sqdev(self, v: str, dtype: torch.dtype) -> str:
        """``Σ (v - mean v)²`` per row (``Reduction`` type sqdev, Inductor's Welford M2), in
        ``dtype``. Persistent: the row's mean from the registers (its sum is the one a mean
        reduction of the same value emits, shared by CSE), then the sum of squared deviations.
        Looped, one pass (Welford) over the values less the row's first one (a shift that keeps
        the running means small, see below): per lane a running mean and M2; at iteration ``k`` every lane
        still inside the row has seen ``k + 1`` elements, so the update weight ``1 / (k + 1)`` is
        one scalar per iteration (no per-element count or division); after the loop the lanes are
        combined by Chan's rule — lane ``j`` holds ``c_j = ceil((rnumel - j) / RBLOCK)`` elements,
        ``mean = Σ c_j·mean_j / rnumel`` and ``M2 = Σ (M2_j + c_j·(mean_j - mean)²)`` — using only
        sums, no custom combine. An infinite or NaN element gives NaN (as eager's variance)."""
        tdt = tl_dtype(dtype)
        vb = self.cse(f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])")
        if self.persistent:
            total = self.cse(
                self.final_reduce("sum", self.cse(f"tl.where(xmask & rmask, {vb}, 0)"), "rindex", True, tdt)
            )
            mean = self.cse(f"{total} / rnumel")
            dev = self.cse(f"tl.where(xmask & rmask, {vb} - {mean}, 0.0)")
            return self.cse(f"tl.sum({dev} * {dev}, 1)[:, None]")
        if ("sqdev", vb, tdt) in self.looped_of:
            return self.looped_of[("sqdev", vb, tdt)]
        out, accmean, accm2, delta = self.newvar(), self.newvar(), self.newvar(), self.newvar()
        shift, dev = self.newvar(), self.newvar()
        self.looped_of[("sqdev", vb, tdt)] = out
        self._insert_inits(
            [
                f"{shift} = tl.full([XBLOCK, 1], 0, {tdt})",
                f"{accmean} = tl.full([XBLOCK, RBLOCK], 0, {tdt})",
                f"{accm2} = tl.full([XBLOCK, RBLOCK], 0, {tdt})",
            ]
        )
        vv = self.cse(f"{vb}.to({tdt})")
        # the values are taken relative to the row's first one (only iteration 0's lane 0 adds to
        # the shift): the lanes' running means stay near 0 instead of near the row's mean, so
        # their rounding error scales with the spread, not with the mean (unshifted, rows of mean
        # 1e4 and spread 1 lost 1e-4 to 2e-4 of the variance in float32; two-pass: 7e-7), and a
        # constant row's squared deviations are exactly 0
        self.emit(f"{shift} = {shift} + tl.sum(tl.where(rindex == 0, {vv}, 0.0), 1)[:, None]")
        self.emit(f"{dev} = {vv} - {shift}")
        # the iteration's count as a float of the accumulator's type (under the interpreter the
        # loop index is a Python int, whose 1.0 / count is already a float64)
        count = "(roffset // RBLOCK + 1)"
        if dtype == torch.float64 and not self.interpret:
            count = f"{count}.to(tl.float64)"
        self.emit(f"{delta} = {dev} - {accmean}")
        self.emit(f"{accmean} = tl.where(xmask & rmask, {accmean} + {delta} * (1.0 / {count}), {accmean})")
        self.emit(f"{accm2} = tl.where(xmask & rmask, {accm2} + {delta} * ({dev} - {accmean}), {accm2})")

        def finish():
            cnt, mean = self.newvar(), self.newvar()
            self.emit(f"{cnt} = ((rnumel - tl.arange(0, RBLOCK)[None, :] + (RBLOCK - 1)) // RBLOCK).to({tdt})")
            self.emit(f"{mean} = tl.sum({accmean} * {cnt}, 1)[:, None] / rnumel")
            self.emit(f"{out} = tl.sum({accm2} + {cnt} * ({accmean} - {mean}) * ({accmean} - {mean}), 1)[:, None]")

        self.loop_pending_reductions.append(finish)
        return out

    def _insert_inits(self, lines: list[str]) -> None:
        """Insert accumulator initializations before the open loop's ``for`` line, in order, at the
        indentation outside the loop (``_insert_line`` keeps recorded line indices valid)."""
        pad = "    " * (self.indent - 1)
        for k, line in enumerate(lines):
            self._insert_line(self.loop_start + k, pad + line)

    def _nan_extreme(self, m: str, rtype: str) -> str:
        """Row max/min of float ``m`` (``[XBLOCK, RBLOCK]`` -> ``[XBLOCK, 1]``) with NaN as the
        extreme (torch's rule). On the GPU one reduction tree with a NaN-propagating combine
        (``max.NaN``); under the interpreter, which runs a custom combine element by element in
        Python, NumPy's own max/min plus an is-NaN max (two vectorized reductions)."""
        if self.interpret:
            return f'tl.where(tl.max(({m} != {m}).to(tl.int8), 1) > 0, float("nan"), tl.{rtype}({m}, 1))[:, None]'
        return f"tl.reduce({m}, 1, _{rtype}_nan_combine)[:, None]"

    def final_reduce(self, rtype: str, m: str, idx: str | None, is_float: bool, tdt: str) -> str:
        """Source reducing the ``[XBLOCK, RBLOCK]`` block ``m`` along its rows to ``[XBLOCK, 1]``
        by ``rtype``; ``idx``: the element indices for argmax/argmin (``"rindex"``, or a looped
        kernel's index accumulator)."""
        if rtype == "sum":
            return f"tl.sum({m}, 1)[:, None]"
        if rtype == "prod":
            return f"tl.reduce({m}, 1, _prod_combine)[:, None]"
        if rtype == "any":
            return f"(tl.max(({m} != 0).to(tl.int8), 1) > 0)[:, None]"
        if rtype in ("max", "min"):
            if is_float:
                return self._nan_extreme(m, rtype)
            return f"tl.{rtype}({m}, 1)[:, None]"
        # argmax / argmin: first index of the extreme value; NaN counts as the extreme
        best = f"tl.{'max' if rtype == 'argmax' else 'min'}({m}, 1)[:, None]"
        ids = "tl.broadcast_to(rindex.to(tl.int64), [XBLOCK, RBLOCK])" if idx == "rindex" else idx
        hit = f"({m} == {best})"
        if is_float:
            hit = f"({hit} | ({m} != {m}))"
            anynan = f"(tl.max(({m} != {m}).to(tl.int8), 1) > 0)[:, None]"
            hit = f"tl.where({anynan}, {m} != {m}, {m} == {best})"
        return f"tl.min(tl.where({hit}, {ids}, 9223372036854775807), 1)[:, None]"
