"""The ``ops`` handler: lowerings write loop bodies as calls ``ops.add(a, b)``, ``ops.load(name,
index)``, …; whatever handler is installed decides what those calls do (trace them into a
LoopBody, or emit Triton source). As Inductor's ``torch._inductor.virtualized``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

_state = threading.local()


def current_handler() -> Any:
    h = getattr(_state, "handler", None)
    if h is None:
        raise RuntimeError("tilefuse internal error: an ops.* call happened outside a loop-body trace")
    return h


@contextlib.contextmanager
def set_ops_handler(handler: Any) -> Iterator[Any]:
    prev = getattr(_state, "handler", None)
    _state.handler = handler
    try:
        yield handler
    finally:
        _state.handler = prev


class _OpsProxy:
    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            return getattr(current_handler(), name)(*args, **kwargs)

        call.__name__ = name
        return call


ops = _OpsProxy()
