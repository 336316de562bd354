"""tilefuse's cache directory: where generated modules, graph cache entries (``graphs/``) and
static launchers' cubins (``cubin/``) are written.

The directory is ``TILEFUSE_CACHE_DIR`` (read at import), else ``<tmp>/tilefuse_<uid>``; it is
checked at first use (``cache_dir``) and replaced by a private temporary directory, with one
warning, when it cannot be used.

Compiled binaries are cached by Triton itself (``~/.triton/cache`` or ``TRITON_CACHE_DIR``) under
a hash of the kernel's source and dependencies *and its first line number* in the module
(``JITFunction.cache_key``), the specialization, the compile options and the Triton version.
Module files are named by their source hash (``loader.load_module``), so the same graph compiled
again, in this or another process, finds every kernel in that cache; the file's path and the
module's name are not part of the key.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import warnings


def _default_cache_dir() -> str:
    """``<tmp>/tilefuse_<uid>``: the cache directory when ``TILEFUSE_CACHE_DIR`` is unset."""
    return os.path.join(tempfile.gettempdir(), f"tilefuse_{os.getuid()}")


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the function calling this one point at
    the user's code: the first frame, walking out, whose file is neither in tilefuse nor in torch
    (a compile runs under Dynamo's and AOTAutograd's frames; the user's line is the call of the
    compiled function). 1 (the calling function itself) when every frame is theirs."""
    import torch

    from .. import config

    skip = (
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
        os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    )
    return config.stacklevel_outside(skip, "<", depth=2)


def _cache_dir_from_env() -> str:
    """``TILEFUSE_CACHE_DIR``, else ``<tmp>/tilefuse_<uid>``; empty or blank counts as unset (as
    for every option)."""
    from .. import config

    return config._env_value("TILEFUSE_CACHE_DIR") or _default_cache_dir()


_CACHE_DIR = _cache_dir_from_env()
_CHECKED_CACHE_DIR: str | None = None  # the value of _CACHE_DIR that cache_dir() has checked


class DebugDirError(RuntimeError):
    """``config.debug_dir`` cannot be written (a file of that name, no permission)."""


def cache_dir() -> str:
    """tilefuse's cache directory: ``TILEFUSE_CACHE_DIR`` (read at import), else
    ``<tmp>/tilefuse_<uid>``. Holds the generated modules, ``graphs/`` (``graph_cache``) and
    ``cubin/``. Checked at first use (``_checked_cache_dir``): when it cannot be used, one warning
    says why and a private temporary directory serves this process instead, so compiling goes on
    (without reuse across processes)."""
    global _CACHE_DIR, _CHECKED_CACHE_DIR
    if _CACHE_DIR != _CHECKED_CACHE_DIR:
        _CACHE_DIR = _checked_cache_dir(_CACHE_DIR)
        _CHECKED_CACHE_DIR = _CACHE_DIR
    return _CACHE_DIR


def _checked_cache_dir(path: str) -> str:
    """``path`` if tilefuse can use it as its cache directory, else a new private temporary
    directory (with a warning saying why and what to do). Unusable: it cannot be created or is a
    file (``make_cache_dir``), or it is the default ``<tmp>/tilefuse_<uid>`` but owned by another
    user or writable by others — a shared temporary folder where someone else could place the
    pickled graph cache entries this process would load (an explicit ``TILEFUSE_CACHE_DIR`` is
    trusted as given, so a team may share one). The private directory is removed when the
    process exits."""
    default = path == _default_cache_dir()
    try:
        make_cache_dir(path, mode=0o700 if default else 0o777)
        if default:
            st = os.stat(path)
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise RuntimeError(
                    f"tilefuse: the default cache directory {path!r} is owned by another user or "
                    f"writable by others, so its contents cannot be trusted; set TILEFUSE_CACHE_DIR "
                    f"to a directory of your own"
                )
        return path
    except RuntimeError as e:
        private = tempfile.mkdtemp(prefix="tilefuse_private_")
        atexit.register(_remove_private_dir, private, os.getpid())  # nothing else will reuse it
        warnings.warn(
            f"{e}. Using {private} for this process instead: its compiled graphs will not be reused "
            f"by other processes.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        return private


def _remove_private_dir(path: str, owner_pid: int) -> None:
    """At exit: remove a private cache directory, in the process that made it only (a forked
    child that runs exit handlers must not take it from its parent)."""
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


def make_cache_dir(path: str, mode: int = 0o777) -> None:
    """Create ``path`` (a cache directory; ``mode`` as ``os.makedirs``'s) if needed; RuntimeError
    saying what to do when it cannot be one (it or a parent is a file, it cannot be created for
    any other reason the OS gives, or it is not writable)."""
    try:
        os.makedirs(path, mode=mode, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RuntimeError(
            f"tilefuse: cache directory {path!r} (or a folder above it) exists and is not a "
            f"directory; point TILEFUSE_CACHE_DIR at a directory (or unset it)"
        ) from None
    except OSError as e:  # no permission, a read-only or pseudo file system, a name too long, ...
        raise RuntimeError(
            f"tilefuse: cannot create cache directory {path!r} ({e}); point TILEFUSE_CACHE_DIR at a writable directory"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise RuntimeError(
            f"tilefuse: cache directory {path!r} is not writable; point TILEFUSE_CACHE_DIR at a writable directory"
        )
