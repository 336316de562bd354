"""tilefuse's loggers (Python ``logging``), named in one place.

``tilefuse`` is the package's logger (graph compiles, fallbacks, cache and memory-order
decisions); ``tilefuse.fusion`` (a child: whatever shows ``tilefuse`` at DEBUG shows it too) logs
the scheduler's fusion decisions at DEBUG, one line per decision: ``cannot fuse <node> into
<kernel>: <rule>: <reason>`` and ``fused <node> into <kernel> as <kind> (...)``.

Turn them on with ``logging.getLogger("tilefuse").setLevel(logging.DEBUG)`` (plus a handler,
e.g. ``logging.basicConfig()``), or through torch's logging settings: ``TORCH_LOGS="+tilefuse"``
(``torch._logging.set_logs(modules={"tilefuse": logging.DEBUG})``) enables ``tilefuse`` and its
children with torch's handler; torch accepts the name because it is an importable module.
Nothing here is registered with torch's log registry: ``TORCH_LOGS`` is parsed when torch is
imported, before tilefuse can register a name (an unknown name makes ``import torch`` raise), and
a registered log has its ``propagate`` turned off by torch, which would detach these loggers from
the application's own handlers.
"""

from __future__ import annotations

import logging

LOG_NAME = "tilefuse"
FUSION_LOG_NAME = "tilefuse.fusion"

log = logging.getLogger(LOG_NAME)
fusion_log = logging.getLogger(FUSION_LOG_NAME)
