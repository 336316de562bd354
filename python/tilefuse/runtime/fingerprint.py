"""Triton's cache key of its own install, made from file metadata instead of file contents.

Every kernel Triton compiles is cached under a key that includes ``triton_key()``, a hash of the
contents of Triton's Python files and of ``libtriton.so``; computing it is a one-time cost per
process. ``use_stat_triton_key`` (``config.triton_key_from_stat``) replaces it, for the whole
process, with ``triton_install_fingerprint``: a hash of those files' sizes, times and inodes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time

log = logging.getLogger("tilefuse")


def triton_install_fingerprint(root: str | None = None) -> str:
    """A cache key for the Triton install at ``root`` (default: the imported ``triton``
    package's folder) made from file metadata instead of file contents: the relative path,
    size, modification and status-change times (ns) and inode of every file under its
    ``compiler``, ``backends`` and ``language`` folders, of ``runtime/cache.py`` and of
    ``_C/libtriton.*``, hashed with SHA-256; returned as ``"<triton version>-tilefuse-stat-<hex>"``.

    Triton's own key (``triton.runtime.cache.triton_key``) hashes the contents of the same
    Python files and of ``libtriton.so`` (about 415 MB for Triton 3.6): 0.4-0.9 s per process,
    which a graph's first compile waits for unless the warm-up thread has finished it. This key
    covers a superset of those files and changes whenever any of them is rewritten, replaced or
    touched (reinstalling Triton changes the inode and times), the check ccache makes of its
    compiler by default (``compiler_check = mtime``); a file changed in the last 2 s, which a
    same-size rewrite inside the timestamps' granularity could hide, has its contents hashed as
    well. Takes about 5 ms. Raises OSError when ``root`` cannot be read."""
    import triton

    if root is None:
        root = os.path.dirname(os.path.abspath(triton.__file__))
    files = [os.path.join(root, "runtime", "cache.py")]
    c_dir = os.path.join(root, "_C")
    if os.path.isdir(c_dir):
        files += sorted(os.path.join(c_dir, f) for f in os.listdir(c_dir) if f.startswith("libtriton."))
    for sub in ("compiler", "backends", "language"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames.sort()
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            files += [os.path.join(dirpath, f) for f in sorted(filenames)]
    h = hashlib.sha256()
    racy_after = time.time_ns() - 2_000_000_000
    for f in files:
        st = os.stat(f)
        h.update(
            f"{os.path.relpath(f, root)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode()
        )
        if max(st.st_mtime_ns, st.st_ctime_ns) > racy_after:
            # written in the last 2 s: a same-size rewrite inside the file system's timestamp
            # granularity would keep every field above, so its contents count too (git's
            # "racily clean" rule)
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return f"{triton.__version__}-tilefuse-stat-{h.hexdigest()}"


def use_stat_triton_key() -> bool:
    """With ``config.triton_key_from_stat`` (the default), make Triton's cache key of its own
    install ``triton_install_fingerprint()`` for this process: ``triton.runtime.cache.triton_key``
    (read by ``get_cache_key``, the key of every compiled kernel in Triton's cache) and the name
    ``triton.runtime.autotuner`` imported it under (the autotuner's timing cache) are replaced
    by a function returning the fingerprint; the original stays as its ``__wrapped__``. Every
    kernel this process compiles, tilefuse's or not, is then cached under the fingerprint:
    Triton's cache entries differ from a process without tilefuse, nothing else does (torch's
    own copy, ``torch._inductor.runtime.triton_compat.triton_key``, is left alone). Returns
    whether the fingerprint is in use. Left as it is (False) when the option is off, when
    either name no longer holds Triton's function (a Triton without them, or another library
    replaced it), or when the install cannot be read (logged at debug level). Idempotent."""
    from .. import config

    try:
        import triton.runtime.autotuner as tune
        import triton.runtime.cache as tcache
    except ImportError:
        return False
    current = getattr(tcache, "triton_key", None)
    if getattr(current, "tilefuse_stat_key", False):
        return True
    if not config.triton_key_from_stat or current is None or getattr(tune, "triton_key", current) is not current:
        return False
    try:
        key = triton_install_fingerprint()
    except OSError as e:
        log.debug("tilefuse: Triton's install cannot be fingerprinted (%s); its own key stays", e)
        return False

    def stat_triton_key() -> str:
        return key

    stat_triton_key.tilefuse_stat_key = True
    stat_triton_key.__wrapped__ = current
    stat_triton_key.cache_clear = lambda: None  # callers of the lru_cache'd original may call it
    tcache.triton_key = stat_triton_key
    if hasattr(tune, "triton_key"):
        tune.triton_key = stat_triton_key
    return True
