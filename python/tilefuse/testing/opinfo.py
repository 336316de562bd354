"""The OpInfo sweep: every op of torch's OpInfo database compiled with tilefuse, compared with eager.

torch's own op database (``torch.testing._internal.common_methods_invocations.op_db``) is the
external judge of op coverage. For one OpInfo, ``run_op`` takes a few small sample inputs per dtype
(float32, bfloat16 or float16, an integer type and bool where the op supports them), compiles a
function calling the op with ``torch.compile(fn, backend="tilefuse", fullgraph=False,
dynamic=False)`` while ``tilefuse.config.fallback_on_error`` is off (an internal error raises
instead of silently running eagerly), and compares the result with eager through
``torch.testing.assert_close`` with the OpInfo's tolerances. It classifies the op:

* ``native``: every compared sample matched and no FallbackKernel ran (extern kernels such as mm
  count as native: they are tilefuse's deliberate path for matmuls);
* ``fallback``: every compared sample matched, at least one used a FallbackKernel (aten op called
  from the generated wrapper); ``fallback_ops`` names them;
* ``fail``: a mismatch, or an exception raised by tilefuse (or raised only on tilefuse's path:
  the same function compiled with AOTAutograd's ``aot_eager`` works); ``note`` holds the first line;
* ``skip``: nothing could be judged, with the reason (eager rejects every sample, the op is random
  or nondeterministic, Dynamo/AOTAutograd cannot trace it, an OpInfo skip applies, ...).

``run_op(op, dynamic=True)`` compiles with ``torch.compile(..., dynamic=True)`` instead (symbolic
sizes, and Python ints and floats of the sample as symbols, as Dynamo makes them) and judges by the
same rules: an error raised only on tilefuse's path (``aot_eager`` with ``dynamic=True`` runs the
same calls) is a fail, one that ``aot_eager`` raises too is a skip. The samples of one dtype share
the compiled function, so a sample that passes the guards of a graph compiled for an earlier
sample's sizes runs that graph (``OpResult.reused`` counts them): one graph for all sizes is what
dynamic shapes promise, and a size baked into a kernel shows up there as a wrong value.

Low-precision and float results that differ from eager by more than the tolerance get a second
chance against a float64 reference (inputs upcast, op run eagerly; float dtype arguments upcast too
when the op rejects float64 inputs without them): the compiled result is
accepted when it is no further from that reference than eager is, plus the tolerance. tilefuse
computes low-precision math in float32 and rounds once, where eager may round after each step of a
composite op; that is a difference in rounding, not a wrong result.

This module lives in the package (not under ``tests/``) so that both the pytest CI subset and
``scripts/op_coverage.py`` import it without path tricks, and so that anyone with tilefuse installed
can run the sweep against their install (``python -m tilefuse.testing.opinfo OP [OP ...]``). It
imports torch's testing internals lazily; importing the backend never loads it.

Triton kernels run on the CPU through Triton's interpreter: ``TRITON_INTERPRET=1`` must be set
before triton is imported (``tests/conftest.py`` and the script do; importing this module sets it
when triton is not loaded yet).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
import traceback
from typing import Iterable

if "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import torch.utils._pytree as pytree

from .. import config, metrics

# device the samples are made on: "cpu" (Triton interpreter) or "cuda"; TILEFUSE_TEST_DEVICE (empty or
# unset: cpu), also read by tests/test_backend_ops.py and scripts/op_coverage.py
DEVICE = (os.environ.get("TILEFUSE_TEST_DEVICE") or "").strip() or "cpu"
MAX_SAMPLES = 3  # samples compared per op and dtype (the first that are small enough)
MAX_SAMPLE_NUMEL = 4096  # a sample whose tensors hold more elements in all is passed over
SAMPLE_TIMEOUT_S = 90  # one sample (compile + run) taking longer counts as a failure

FAMILIES_EXCLUDED = ("linalg", "fft", "sparse", "special")  # may fall back: not in the native share

# Ops whose eager result is not a function of the inputs: random sampling, uninitialized memory,
# or results that depend on the order of parallel writes. (Sampling ops are also caught by running
# eager twice with different seeds; these are listed because that check cannot see them all.)
NONDETERMINISTIC = {
    "empty",
    "empty_like",
    "empty_strided",
    "empty_permuted",
    "new_empty",
    "new_empty_strided",
    "bernoulli",
    "multinomial",
    "normal",
    "rand_like",
    "randn_like",
    "randint_like",
    "randint",
    "uniform",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
    "nn.functional.gumbel_softmax",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "torch._C._nn._test_ambiguous_defaults",
}

# The gamma-function family and other special functions that torch.special aliases.
_SPECIAL_NAMES = {"lgamma", "digamma", "polygamma", "mvlgamma", "igamma", "igammac", "erfinv", "i0"}
# Matrix products and factorizations outside the ``linalg.`` namespace.
_LINALG_NAMES = {
    "mm",
    "matmul",
    "bmm",
    "addmm",
    "addmv",
    "addr",
    "addbmm",
    "baddbmm",
    "mv",
    "dot",
    "vdot",
    "inner",
    "outer",
    "ger",
    "tensordot",
    "einsum",
    "kron",
    "chain_matmul",
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "lu",
    "lu_solve",
    "lu_unpack",
    "qr",
    "svd",
    "svd_lowrank",
    "pca_lowrank",
    "det",
    "logdet",
    "inverse",
    "pinverse",
    "triangular_solve",
    "geqrf",
    "ormqr",
    "matrix_exp",
    "cross",
    "__rmatmul__",
    "linalg.det",
    "trapz",
    "cumulative_trapezoid",
    "trapezoid",
}
_LINALG_NAMES -= {"trapz", "cumulative_trapezoid", "trapezoid"}  # reductions, not linear algebra


@dataclasses.dataclass
class OpResult:
    """The sweep's verdict on one OpInfo (see the module docstring for the statuses)."""

    name: str  # OpInfo name, ``.variant`` appended when it has one
    family: str
    status: str = "skip"  # native | fallback | fail | skip
    note: str = ""
    dtypes: list[str] = dataclasses.field(default_factory=list)  # dtypes with a compared sample
    samples: int = 0  # samples compared (matched or failed)
    fallback_ops: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    dynamic: bool = False  # compiled with dynamic=True
    reused: int = 0  # dynamic: samples that ran a graph compiled for an earlier sample's sizes

    def to_dict(self) -> dict:
        """Plain dict (JSON)."""
        return dataclasses.asdict(self)


class SampleTimeout(Exception):
    """A sample ran past SAMPLE_TIMEOUT_S."""


# ------------------------------------------------------------------------------------ the database


def op_db() -> list:
    """torch's OpInfo database (imported on first use; it takes seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def op_name(op) -> str:
    """The sweep's name of an OpInfo: ``name`` or ``name.variant_test_name``."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def find_op(name: str):
    """The OpInfo called ``name`` (as ``op_name`` spells it); KeyError when there is none."""
    for op in op_db():
        if op_name(op) == name:
            return op
    raise KeyError(f"no OpInfo named {name!r}")


_FAMILY_SETS: dict[str, set[int]] | None = None


def _family_sets() -> dict[str, set[int]]:
    global _FAMILY_SETS
    if _FAMILY_SETS is None:
        from torch.testing._internal.opinfo.definitions import fft, linalg, signal as sig, sparse, special

        _FAMILY_SETS = {}
        for fam, mod in (("linalg", linalg), ("fft", fft), ("special", special), ("signal", sig), ("sparse", sparse)):
            _FAMILY_SETS[fam] = {id(o) for o in getattr(mod, "op_db", [])}
    return _FAMILY_SETS


def family(op) -> str:
    """The op's family: linalg, fft, sparse, special (excluded from the native share), or signal,
    masked, nn, reduction, unary, binary, other."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, ReductionOpInfo, UnaryUfuncInfo

    name = op.name
    sets = _family_sets()
    if name.startswith("linalg.") or name in _LINALG_NAMES or id(op) in sets["linalg"]:
        return "linalg"
    if name.startswith("fft.") or name in ("stft", "istft") or id(op) in sets["fft"]:
        return "fft"
    if "sparse" in name or id(op) in sets["sparse"]:
        return "sparse"
    if name.startswith("special.") or name in _SPECIAL_NAMES or id(op) in sets["special"]:
        return "special"
    if name.startswith("signal.") or id(op) in sets["signal"]:
        return "signal"
    if name.startswith("masked.") or name.startswith("_masked."):
        return "masked"
    if isinstance(op, ReductionOpInfo):
        return "reduction"
    if isinstance(op, UnaryUfuncInfo):
        return "unary"
    if isinstance(op, BinaryUfuncInfo):
        return "binary"
    if name.startswith("nn.functional."):
        return "nn"
    return "other"


def select_dtypes(op) -> list[torch.dtype]:
    """The dtypes swept for ``op``: float32, then bfloat16 (float16 when bf16 is unsupported), one
    integer type (int64, else int32) and bool — each only where the op supports it on the CPU.
    An op without float32 (integer-only ops) gets its integer and bool types."""
    sup = set(op.supported_dtypes(DEVICE))
    out = []
    if torch.float32 in sup:
        out.append(torch.float32)
    if torch.bfloat16 in sup:
        out.append(torch.bfloat16)
    elif torch.float16 in sup:
        out.append(torch.float16)
    for dt in (torch.int64, torch.int32):
        if dt in sup:
            out.append(dt)
            break
    if torch.bool in sup:
        out.append(torch.bool)
    if not out and torch.float64 in sup:
        out.append(torch.float64)
    return out


# (test class, test name) whose DecorateInfos the sweep honours: tolerances from all of them,
# skips only from Inductor's OpInfo test and eager's own consistency test (a skip of, say,
# TestCommon.test_compare_cpu is about comparing devices, not about this sweep)
_TOLERANCE_TESTS = {
    ("TestInductorOpInfo", "test_comprehensive"),
    ("TestInductorOpInfo", None),
    ("TestCommon", "test_variant_consistency_eager"),
    ("TestCommon", "test_compare_cpu"),
    ("TestCommon", "test_noncontiguous_samples"),
    ("TestCommon", None),
}
_SKIP_TESTS = {
    ("TestInductorOpInfo", "test_comprehensive"),
    ("TestInductorOpInfo", None),
    ("TestCommon", "test_variant_consistency_eager"),
}


def _active(info, dtype, tests=_TOLERANCE_TESTS) -> bool:
    """A DecorateInfo that applies to this sweep: no test class, or one of ``tests``; device cpu
    (or any); the dtype."""
    if info.device_type not in (None, DEVICE):
        return False
    if info.dtypes is not None and dtype not in info.dtypes:
        return False
    active = info.active_if
    if callable(active):
        try:
            active = active({})
        except Exception:  # noqa: BLE001 - a predicate over test kwargs we do not have
            return False
    if not active:
        return False
    return info.cls_name is None or (info.cls_name, info.test_name) in tests


def _decorate_infos(op) -> Iterable:
    from torch.testing._internal.opinfo.core import DecorateInfo

    for d in list(op.decorators) + list(op.skips):
        if isinstance(d, DecorateInfo):
            yield d


# torch.testing.assert_close's default (atol, rtol) per dtype
_DEFAULT_TOL = {
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-5, 1.6e-2),
    torch.float32: (1e-5, 1.3e-6),
    torch.float64: (1e-7, 1e-7),
}


def tolerances(op, dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing ``op``'s results in ``dtype``: assert_close's defaults for the
    dtype, raised to the largest ``toleranceOverride`` the OpInfo declares for the CPU and this
    dtype on Inductor's or TestCommon's eager-consistency tests (or on every test)."""
    from torch.testing._internal.common_device_type import toleranceOverride

    atol, rtol = _DEFAULT_TOL.get(dtype, (0.0, 0.0))
    for info in _decorate_infos(op):
        if not _active(info, dtype):
            continue
        for dec in info.decorators:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                t = dec.d[dtype]
                atol, rtol = max(atol, t.atol), max(rtol, t.rtol)
    return atol, rtol


def _skip_reason_of(dec) -> str | None:
    """The reason of a ``unittest.skip(reason)`` decorator, None for other decorators."""
    if getattr(dec, "__qualname__", "").startswith("skip.") or getattr(dec, "__name__", "") == "decorator":
        for cell in getattr(dec, "__closure__", None) or ():
            if isinstance(cell.cell_contents, str):
                return cell.cell_contents or "skipped"
        return "skipped"
    return None


def opinfo_skip(op, dtype: torch.dtype) -> str | None:
    """The OpInfo's own skip for this dtype on the CPU (see ``_SKIP_TESTS``), or None."""
    for info in _decorate_infos(op):
        if not _active(info, dtype, _SKIP_TESTS):
            continue
        for dec in info.decorators:
            r = _skip_reason_of(dec)
            if r is not None:
                return f"OpInfo skip: {r}"
    return None


# ------------------------------------------------------------------------------------ one sample


def _copy_tensor(t: torch.Tensor) -> torch.Tensor:
    """An independent copy with the same sizes, strides and storage offset (views stay views)."""
    t = t.detach()
    if t.layout != torch.strided:
        return t.clone()
    st = t.untyped_storage()
    new_st = torch.UntypedStorage(st.nbytes(), device=t.device)
    new_st.copy_(st)
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(new_st, t.storage_offset(), t.shape, t.stride())
    return out


def _copy(tree):
    return pytree.tree_map(lambda v: _copy_tensor(v) if isinstance(v, torch.Tensor) else v, tree)


def _numel(tree) -> int:
    return sum(v.numel() for v in pytree.tree_leaves(tree) if isinstance(v, torch.Tensor))


def _upcast(tree, dtypes: bool = False):
    """Float tensors of ``tree`` as float64 copies; with ``dtypes``, also float dtype arguments (an
    op such as ``_softmax_backward_data(grad, out, dim, input_dtype)`` that insists on them)."""
    low = (torch.float16, torch.bfloat16, torch.float32)

    def f(v):
        if isinstance(v, torch.Tensor) and v.dtype in low:
            return _copy_tensor(v).to(torch.float64)
        if dtypes and isinstance(v, torch.dtype) and v in low:
            return torch.float64
        return v

    return pytree.tree_map(f, tree)


def _first_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {msg[0] if msg else ''}"
    return text[:300]


_TILEFUSE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _from_tilefuse(e: BaseException) -> bool:
    """True when any exception in ``e``'s chain was raised inside tilefuse, its generated modules
    or Triton (the kernels tilefuse generated)."""
    from ..runtime import cache as runtime

    roots = (_TILEFUSE_DIR, os.path.abspath(runtime._CACHE_DIR), os.path.join("site-packages", "triton"))
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for fr in traceback.extract_tb(e.__traceback__):
            fn = os.path.abspath(fr.filename)
            if any(r in fn for r in roots) and f"{os.sep}testing{os.sep}opinfo" not in fn:
                return True
        e = e.__cause__ or e.__context__
    return False


def _innermost(e: BaseException) -> BaseException:
    """The original exception under Dynamo's wrappers (``inner_exception``, ``__cause__``)."""
    seen = set()
    while id(e) not in seen:
        seen.add(id(e))
        nxt = getattr(e, "inner_exception", None) or e.__cause__
        if nxt is None:
            break
        e = nxt
    return e


class _FallbackNames(logging.Handler):
    """Collects the names of the aten ops GraphLowering turned into fallback kernels."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if "no lowering for " in msg:
            self.names.append(msg.split("no lowering for ", 1)[1].split(";", 1)[0])


def _call(op_fn, inp, args, kwargs):
    return op_fn(inp, *args, **kwargs)


def _compiled(op_fn, backend: str, dynamic: bool = False):
    def fn(inp, args, kwargs):
        return op_fn(inp, *args, **kwargs)

    return torch.compile(fn, backend=backend, fullgraph=False, dynamic=dynamic)


def _frames_compiled() -> int:
    """Frames Dynamo has compiled (or tried to) in this process: unchanged over a call means the
    call ran code compiled for an earlier one."""
    from torch._dynamo.utils import counters

    return counters["frames"]["total"]


class _SharedCompile:
    """The compiled function the samples of one op and dtype run through.

    Static: every sample compiles afresh (a new Dynamo cache, tilefuse's counters zeroed).
    Dynamic: the samples share one ``torch.compile(..., dynamic=True)`` function, so a sample whose
    structure passes the guards of a graph compiled for an earlier sample's sizes runs that graph
    (the point of dynamic shapes: one graph for all sizes); the others make Dynamo compile another.
    ``ran`` keeps copies of the samples the function has run, so that an error can be checked
    against ``aot_eager`` given the same sequence of calls."""

    def __init__(self, op_fn, dynamic: bool):
        self.op_fn, self.dynamic = op_fn, dynamic
        self.fn = None
        self.ran: list = []
        self.reused = 0
        self.last_reused = False

    def compiled(self):
        """The tilefuse-compiled function for the next sample (a fresh one unless dynamic)."""
        if self.fn is None or not self.dynamic:
            self.close()
            metrics.reset()
            self.fn = _compiled(self.op_fn, "tilefuse", self.dynamic)
        return self.fn

    def graphs(self) -> int:
        """Graphs tilefuse compiled, or took from its graph cache, since the function was made."""
        return metrics.generated_graph_count + metrics.graph_cache_hits

    def close(self) -> None:
        """Forget the compiled function (and Dynamo's cache)."""
        self.fn = None
        self.ran = []
        torch._dynamo.reset()

    def aot_eager_raises(self, earlier: list, sample_args) -> BaseException | None:
        """The exception ``aot_eager`` (same ``dynamic``) raises on the samples ``earlier`` (those
        the tilefuse function ran before) and then ``sample_args``, or None when it runs them all."""
        torch._dynamo.reset()
        fn = _compiled(self.op_fn, "aot_eager", self.dynamic)
        try:
            for a in [*earlier, sample_args]:
                fn(*_copy(a))
        except SampleTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            return e
        finally:
            torch._dynamo.reset()
        return None


def _float_outputs_ok(got, want, ref, atol, rtol) -> bool:
    """Second chance for a float mismatch: ``got`` is no further from the float64 reference ``ref``
    than eager's ``want`` is (per output, max abs deviation), plus the tolerance."""
    g, w, r = (pytree.tree_leaves(x) for x in (got, want, ref))
    if not (len(g) == len(w) == len(r)):
        return False
    for a, b, c in zip(g, w, r):
        if not isinstance(a, torch.Tensor):
            if a != b:
                return False
            continue
        if (
            not isinstance(b, torch.Tensor)
            or not isinstance(c, torch.Tensor)
            or a.shape != b.shape
            or a.dtype != b.dtype
            or c.shape != a.shape
        ):
            return False
        if not a.dtype.is_floating_point:
            if not torch.equal(a, b):
                return False
            continue
        if atol is None:
            atol_, rtol_ = _DEFAULT_TOL.get(a.dtype, (1e-5, 1.3e-6))
        else:
            atol_, rtol_ = atol, rtol
        c64, a64, b64 = c.double(), a.double(), b.double()
        nan_a, nan_b = torch.isnan(a64), torch.isnan(b64)
        if not torch.equal(nan_a, nan_b):
            return False
        fin = ~nan_a & torch.isfinite(c64)
        if not torch.equal(a64[~fin & ~nan_a], b64[~fin & ~nan_a]):
            return False
        ea = (a64 - c64).abs()[fin]
        eb = (b64 - c64).abs()[fin]
        slack = eb.max().item() if eb.numel() else 0.0
        allowed = atol_ + rtol_ * c64.abs()[fin] + slack
        if ea.numel() and not bool((ea <= allowed).all()):
            return False
    return True


def run_sample(
    op, sample, dtype: torch.dtype, dynamic: bool = False, shared: _SharedCompile | None = None
) -> tuple[str, str, list[str]]:
    """Compile ``op`` on one sample and compare with eager: (status, note, fallback op names),
    status one of native / fallback / fail / skip. ``dynamic``: compiled with ``dynamic=True``;
    ``shared`` (dynamic only): the compiled function shared with the dtype's earlier samples."""
    op_fn = op.op
    inp, args, kwargs = sample.input, tuple(sample.args), dict(sample.kwargs)
    # a float dtype: the OpInfo's tolerances; an integer or bool sample: assert_close's defaults for
    # the output's dtype (exact for integer results, float32's for sin(int64) and the like)
    atol, rtol = tolerances(op, dtype) if dtype.is_floating_point else (None, None)
    # eager, twice with different seeds: a random or nondeterministic op is not judged
    try:
        torch.manual_seed(0)
        want = _call(op_fn, *_copy((inp, args, kwargs)))
        torch.manual_seed(1)
        again = _call(op_fn, *_copy((inp, args, kwargs)))
    except Exception as e:  # noqa: BLE001 - eager rejects the sample: nothing to compare
        return "skip", f"eager raises {_first_line(e)}", []
    try:
        torch.testing.assert_close(again, want, atol=0, rtol=0, equal_nan=True)
    except Exception:  # noqa: BLE001
        return "skip", "nondeterministic or random in eager", []
    if any(
        isinstance(v, torch.Tensor) and (v.is_complex() or v.layout != torch.strided)
        for v in pytree.tree_leaves((want, inp, args, kwargs))
    ):
        return "skip", "complex or non-strided tensors", []

    own = shared is None
    if own:
        shared = _SharedCompile(op_fn, dynamic)
    got, names, err = _run_compiled(shared, (inp, args, kwargs))
    if err is not None:
        return err
    status, note, names = _compare(op_fn, (inp, args, kwargs), got, want, atol, rtol, names)
    if status == "fail" and shared.last_reused:
        note = f"{note} (graph compiled for an earlier sample's sizes)"
    if own:
        shared.close()
    return status, note, names


_Outcome = tuple[str, str, list]  # (status, note, fallback op names)


def _run_compiled(shared: _SharedCompile, sample_args) -> tuple[object, list[str], _Outcome | None]:
    """Run ``sample_args`` through the shared tilefuse-compiled function: (its result, the ops
    lowering turned into fallback kernels meanwhile, None), or (None, [], the verdict) when it
    raised (fail, or skip when ``aot_eager`` raises too) or tilefuse was handed no graph. A
    shared compile whose call raised is closed; ``shared.reused`` counts the calls that ran graphs
    compiled for an earlier sample (Dynamo compiled no frame for them)."""
    names = _FallbackNames()
    logger = logging.getLogger("tilefuse")
    old_level = logger.level
    logger.addHandler(names)
    logger.setLevel(logging.DEBUG)
    fn = shared.compiled()
    earlier = shared.ran
    frames = _frames_compiled()
    try:
        with config.patch(fallback_on_error=False):
            torch.manual_seed(0)
            got = fn(*_copy(sample_args))
    except SampleTimeout:
        shared.close()
        raise
    except Exception as e:  # noqa: BLE001 - classify: tilefuse's fault, or untraceable
        where = " (graph compiled for an earlier sample's sizes)" if earlier and _frames_compiled() == frames else ""
        shared.close()
        if _from_tilefuse(e):
            return None, [], ("fail", f"tilefuse raises {_first_line(_innermost(e))}{where}", names.names)
        e2 = shared.aot_eager_raises(earlier, sample_args)
        if e2 is not None:
            return None, [], ("skip", f"dynamo/aot_autograd cannot compile it: {_first_line(_innermost(e2))}", [])
        return None, [], ("fail", f"raises on tilefuse's path only: {_first_line(_innermost(e))}{where}", names.names)
    finally:
        logger.removeHandler(names)
        logger.setLevel(old_level)
    if shared.graphs() == 0:
        shared.close()
        return None, [], ("skip", "dynamo handed tilefuse no graph", [])
    shared.last_reused = bool(earlier) and _frames_compiled() == frames
    shared.reused += shared.last_reused
    shared.ran.append(_copy(sample_args))
    return got, names.names, None


def _compare(op_fn, sample_args, got, want, atol, rtol, names: list[str]) -> _Outcome:
    """The verdict on a compiled result ``got`` against eager's ``want``; ``names``: the fallback
    ops its compile logged."""
    fallbacks = metrics.fallback_kernel_count
    try:
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True, check_stride=False)
    except Exception as e:  # noqa: BLE001 - AssertionError, or a structural difference
        ok = False
        if any(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in pytree.tree_leaves(want)):
            for dtypes in (False, True):
                try:
                    ref = _call(op_fn, *_upcast(sample_args, dtypes))
                except Exception:  # noqa: BLE001 - the op has no float64 version: no second chance
                    continue
                ok = _float_outputs_ok(got, want, ref, atol, rtol)
                break
        if not ok:
            return "fail", f"mismatch: {_first_line(e)}", names
    return ("fallback" if fallbacks else "native"), "", sorted(set(names))


def _on_alarm(signum, frame):
    raise SampleTimeout(f"sample ran past {SAMPLE_TIMEOUT_S} s")


def iter_samples(op, dtype: torch.dtype, max_samples: int = MAX_SAMPLES, max_numel: int = MAX_SAMPLE_NUMEL):
    """The first ``max_samples`` sample inputs of ``op`` in ``dtype`` holding at most ``max_numel``
    tensor elements in all (small samples keep the interpreter fast)."""
    n = 0
    torch.manual_seed(0)
    for s in op.sample_inputs(DEVICE, dtype, requires_grad=False):
        if _numel((s.input, s.args, s.kwargs)) > max_numel:
            continue
        yield s
        n += 1
        if n >= max_samples:
            return


def run_op(
    op, max_samples: int = MAX_SAMPLES, dtypes: list[torch.dtype] | None = None, *, dynamic: bool = False
) -> OpResult:
    """Sweep one OpInfo over its dtypes (``select_dtypes``) and first small samples; the verdict.
    ``dynamic``: compiled with ``torch.compile(..., dynamic=True)``, one compiled function per dtype
    shared by its samples (see ``_SharedCompile``), judged by the same rules as static."""
    t0 = time.perf_counter()
    res = OpResult(op_name(op), family(op), dynamic=dynamic)
    statuses: list[tuple[str, str]] = []
    fb: set[str] = set()
    skips: list[str] = []
    if op.name in NONDETERMINISTIC or op_name(op) in NONDETERMINISTIC:
        res.note = "random or uninitialized output"
        res.seconds = time.perf_counter() - t0
        return res
    # the per-sample time limit needs SIGALRM, which only the main thread can handle
    use_alarm = (
        hasattr(signal, "SIGALRM") and SAMPLE_TIMEOUT_S > 0 and threading.current_thread() is threading.main_thread()
    )
    dts = dtypes if dtypes is not None else select_dtypes(op)
    if not dts:
        skips.append("no float32/bfloat16/float16/integer/bool dtype on the CPU")
    for dtype in dts:
        reason = opinfo_skip(op, dtype)
        if reason:
            skips.append(reason)
            continue
        compared = False
        try:
            samples = list(iter_samples(op, dtype, max_samples))
        except Exception as e:  # noqa: BLE001 - the OpInfo cannot make samples for this dtype
            skips.append(f"no samples: {_first_line(e)}")
            continue
        if not samples:
            skips.append(f"no sample of at most {MAX_SAMPLE_NUMEL} elements")
        shared = _SharedCompile(op.op, dynamic)
        for s in samples:
            old = signal.signal(signal.SIGALRM, _on_alarm) if use_alarm else None
            if use_alarm:
                signal.alarm(SAMPLE_TIMEOUT_S)
            try:
                status, note, names = run_sample(op, s, dtype, dynamic, shared)
            except SampleTimeout as e:
                status, note, names = "fail", str(e), []
            finally:
                if use_alarm:
                    signal.alarm(0)
                    signal.signal(signal.SIGALRM, old)
            dt = str(dtype).replace("torch.", "")
            if status == "skip":
                skips.append(note)
                continue
            compared = True
            res.samples += 1
            statuses.append((status, f"{dt}: {note}" if note else ""))
            fb.update(names if status != "fail" else [])
        shared.close()
        res.reused += shared.reused
        if compared:
            res.dtypes.append(str(dtype).replace("torch.", ""))
    res.fallback_ops = sorted(fb)
    fails = [n for s, n in statuses if s == "fail"]
    if fails:
        res.status, res.note = "fail", fails[0]
    elif any(s == "fallback" for s, _ in statuses):
        res.status = "fallback"
        res.note = "fallback: " + ", ".join(res.fallback_ops) if res.fallback_ops else ""
    elif statuses:
        res.status = "native"
    else:
        res.status, res.note = "skip", (skips[0] if skips else "no samples")
    res.seconds = time.perf_counter() - t0
    return res


def main(argv: list[str] | None = None) -> int:
    """``python -m tilefuse.testing.opinfo OP [OP ...]``: sweep the named ops, print verdicts."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("ops", nargs="+")
    p.add_argument("--max-samples", type=int, default=MAX_SAMPLES)
    p.add_argument("--dynamic", action="store_true", help="compile with dynamic=True")
    ns = p.parse_args(argv)
    bad = 0
    for name in ns.ops:
        r = run_op(find_op(name), ns.max_samples, dynamic=ns.dynamic)
        bad += r.status == "fail"
        print(json.dumps(r.to_dict()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
