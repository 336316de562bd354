"""The ``ops`` handler: lowerings write loop bodies as calls ``ops.add(a, b)``, ``ops.load(name,
index)``, …; whatever handler is installed decides what those calls do (trace them into a
LoopBody). As Inductor's ``torch._inductor.virtualized``. The op names ``ops`` accepts are the
vocabulary of ``tilefuse.ir.ops``, which registers it here (``register_vocabulary``).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

_state = threading.local()


def get_scoped(attr: str, what: str) -> Any:
    """The value ``scoped(attr, ...)`` installed for this thread; RuntimeError naming ``what``
    when none is."""
    v = getattr(_state, attr, None)
    if v is None:
        raise RuntimeError(f"tilefuse internal error: {what}")
    return v


@contextlib.contextmanager
def scoped(attr: str, value: Any) -> Iterator[Any]:
    """Install ``value`` as this thread's ``attr`` for the ``with`` block (restoring the previous
    one after): the one mechanism behind the ops handler and the current graph."""
    prev = getattr(_state, attr, None)
    setattr(_state, attr, value)
    try:
        yield value
    finally:
        setattr(_state, attr, prev)


def current_handler() -> Any:
    """The ops handler installed for this thread (``set_ops_handler``); RuntimeError when none is."""
    return get_scoped("handler", "an ops.* call happened outside a loop-body trace")


def set_ops_handler(handler: Any):
    """Install ``handler`` for the ``with`` block: ``ops.<name>(...)`` calls ``handler.<name>(...)``."""
    return scoped("handler", handler)


# the ops ``ops`` accepts, name -> (fewest, most) arguments: set by ``tilefuse.ir.ops`` (a higher
# layer) when it is imported
_vocabulary: dict[str, tuple[int, int]] | None = None


def register_vocabulary(arity: dict[str, tuple[int, int]]) -> None:
    """Make the keys of ``arity`` the ops ``ops`` accepts, each taking between ``arity[name][0]``
    and ``arity[name][1]`` arguments (``tilefuse.ir.ops.OP_ARITY``, registered when that module is
    imported; the IR package imports it). Replaces an earlier vocabulary."""
    global _vocabulary
    _vocabulary = dict(arity)
    ops.__dict__.clear()


def _forwarder(name: str, fewest: int, most: int):
    def call(*args, **kwargs):
        n = len(args) + len(kwargs)
        if n < fewest or n > most:
            want = str(fewest) if fewest == most else f"{fewest} to {most}"
            raise TypeError(
                f"tilefuse: ops.{name} takes {want} argument{'' if most == 1 else 's'}, {n} given "
                f"(tilefuse.ir.ops.OpsHandler.{name})"
            )
        return getattr(current_handler(), name)(*args, **kwargs)

    call.__name__ = name
    return call


class _OpsProxy:
    """``ops``: ``ops.<name>(...)`` calls the current handler's ``<name>``. A name is checked
    against the vocabulary on its first access only: its forwarder is then cached in the instance
    dict, so later accesses are a plain attribute lookup (one per ``ops`` call of every traced
    inner function, on the compile-time hot path). A name outside the vocabulary raises
    AttributeError, and a call with the wrong number of arguments TypeError, where it is written,
    while the inner function is traced."""

    def __getattr__(self, name: str):
        if _vocabulary is None:
            raise AttributeError(f"tilefuse: ops.{name} used before tilefuse.ir.ops registered the op vocabulary")
        if name not in _vocabulary:
            raise AttributeError(
                f"tilefuse: {name!r} is not an op of the IR vocabulary (tilefuse.ir.ops); add it to "
                "tilefuse.ir.ops.OpsHandler, the loop-body tracer and the Triton codegen, or write it "
                "with the ops there"
            )
        fn = self.__dict__[name] = _forwarder(name, *_vocabulary[name])
        return fn


ops = _OpsProxy()
