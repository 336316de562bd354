"""Layout comparisons shared by ``GraphLowering`` and the lowerings."""

from __future__ import annotations

from typing import Sequence

from .. import sizevars as SV


def strides_match(size: Sequence, stride: Sequence, want: Sequence, sv: SV.SizeVars) -> bool:
    """Whether ``stride`` equals ``want`` on every dim of ``size`` other than 1 (the strides torch
    compares; an empty tensor's never matter). Symbolic strides must be provably equal: no guard
    is taken (equal by the graph's existing guards counts: ``SizeVars.known_equal``), and a stride
    not proven equal counts as different (a copy, correct for every size)."""
    if any(isinstance(s, int) and s == 0 for s in size):
        return True
    return len(stride) == len(want) and all(s == 1 or sv.known_equal(a, b) for s, a, b in zip(size, stride, want))
