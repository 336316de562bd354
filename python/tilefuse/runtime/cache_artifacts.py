"""tilefuse's graph cache in torch's portable cache artifacts ("mega-cache").

``torch.compiler.save_cache_artifacts()`` returns, as one ``bytes`` object, every cache entry the
compiles of this process made or used; ``torch.compiler.load_cache_artifacts(data)`` writes them
into the caches of another process (another machine), so its compiles are cache hits. torch
collects them through ``torch.compiler._cache.CacheArtifactManager``, whose artifact types are
registered with ``CacheArtifactFactory.register`` (Inductor's, AOTAutograd's, autotuning's, ...).
This module registers one more, ``"tilefuse"`` (``CacheInfo.tilefuse_artifacts`` lists them):
each artifact is one file of tilefuse's cache directory (``cache.cache_dir()``), keyed by its
path there:

* ``graphs/<key>.pkl``: a graph cache entry (the generated module, its constants, guards and
  counters; ``graph_cache``), recorded when it is stored and when it is read from disk;
* ``graphs/<key>.launch.pkl`` and the ``cubin/<hash>.cubin`` files it names: the launch records
  of a CUDA graph's kernels (their chosen configs and compiled binaries), recorded when stored
  after a graph's first call and when read by a hit. Records name cubins by absolute path; a
  cubin moved to another cache directory is found by its file name
  (``static_launcher._load_record``).

Loading writes each file under this process's cache directory (only below ``graphs/`` and
``cubin/``; an artifact naming any other path is skipped with a warning), replacing a file of the
same name. A graph key covers tilefuse's code, torch's and Triton's versions and the options, so an
entry made elsewhere is used only where it was made for the same ones.

torch knows the ``"tilefuse"`` type only once this module is imported: ``import tilefuse.backend``
(done by ``torch.compile(..., backend="tilefuse")``) imports it. A process that loads artifacts
before compiling anything must import it first, or call ``tilefuse.load_cache_artifacts(data)``,
which does; otherwise torch's loader fails on the unknown type and loads nothing.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from torch.compiler._cache import CacheArtifact, CacheArtifactFactory, CacheArtifactManager

log = logging.getLogger("tilefuse")

ARTIFACT_TYPE = "tilefuse"
_ALLOWED_DIRS = ("graphs", "cubin")


@CacheArtifactFactory.register
class TilefuseCacheArtifact(CacheArtifact):
    """One file of tilefuse's cache directory: ``key`` its path there (``graphs/...`` or
    ``cubin/...``), ``content`` its bytes."""

    @staticmethod
    def type() -> str:
        return ARTIFACT_TYPE

    def populate_cache(self) -> None:
        """Write the file under this process's cache directory (atomically)."""
        path = _local_path(self.key)
        if path is None:
            log.warning("tilefuse: ignoring a cache artifact with an unexpected path %r", self.key)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(self.content)
        os.replace(tmp, path)


def _local_path(key: str) -> str | None:
    """The file of ``key`` under the cache directory, or None when ``key`` is not a plain file
    name below one of ``_ALLOWED_DIRS``."""
    from .cache import cache_dir

    parts = key.split("/")
    if len(parts) != 2 or parts[0] not in _ALLOWED_DIRS or parts[1] in ("", ".", "..") or "\\" in parts[1]:
        return None
    return os.path.join(cache_dir(), parts[0], parts[1])


def record(key: str, content: bytes) -> None:
    """Add one file (``key``: its path under the cache directory) to torch's artifacts of this
    process. Never raises: a failure only leaves it out of ``save_cache_artifacts``."""
    try:
        CacheArtifactManager.record_artifact(ARTIFACT_TYPE, key, content)
    except Exception as e:  # noqa: BLE001 - portability only
        log.debug("tilefuse: cache artifact %s not recorded (%s: %s)", key, type(e).__name__, e)


def record_launches(key: str, content: bytes, records: list) -> None:
    """Record a graph's launch records file (``graphs/<key>.launch.pkl``, bytes ``content``) and
    every cubin file its ``records`` name."""
    record(f"graphs/{key}.launch.pkl", content)
    for rec in records:
        for entry in (rec or {}).get("entries", {}).values():
            path = entry[1] if isinstance(entry, tuple) and len(entry) == 2 else None
            if isinstance(path, str) and os.path.exists(path):
                try:
                    with open(path, "rb") as f:
                        record(f"cubin/{os.path.basename(path)}", f.read())
                except OSError as e:
                    log.debug("tilefuse: cubin %s not recorded (%s)", path, e)


def save_cache_artifacts() -> Any:
    """``torch.compiler.save_cache_artifacts()``: ``(bytes, CacheInfo)`` of everything cached by
    this process's compiles (tilefuse's graph cache entries included), or None when nothing was."""
    import torch

    return torch.compiler.save_cache_artifacts()


def load_cache_artifacts(data: bytes) -> Any:
    """``torch.compiler.load_cache_artifacts(data)`` with tilefuse's artifact type known (this
    module imported): the caches filled from ``data`` (``save_cache_artifacts()[0]`` of another
    process); returns torch's ``CacheInfo`` (``.tilefuse_artifacts``: the files written), or None
    when ``data`` does not load. TypeError when ``data`` is not bytes (a path, say: torch would
    log a traceback and return None)."""
    import torch

    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(
            f"load_cache_artifacts takes the bytes save_cache_artifacts() returned (e.g. "
            f"open(path, 'rb').read()), not {type(data).__name__}"
        )
    return torch.compiler.load_cache_artifacts(bytes(data))
