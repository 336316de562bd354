"""The ``ops`` handler: lowerings write loop bodies as calls ``ops.add(a, b)``, ``ops.load(name,
index)``, …; whatever handler is installed decides what those calls do (trace them into a
LoopBody, or emit Triton source). As Inductor's ``torch._inductor.virtualized``.
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
    return get_scoped("handler", "an ops.* call happened outside a loop-body trace")


def set_ops_handler(handler: Any):
    return scoped("handler", handler)


class _OpsProxy:
    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            return getattr(current_handler(), name)(*args, **kwargs)

        call.__name__ = name
        return call


ops = _OpsProxy()
