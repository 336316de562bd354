"""``python -m tilefuse.report [-o report.html] [--no-peaks] (script.py | -m module) [args...]``: run a
script (or a module, as ``python -m`` does) with the kernel report collecting, then write the page
(``tilefuse.report``).

The script runs as ``python script.py args...`` would run it (``__name__ == "__main__"``, its
folder first on ``sys.path``, ``sys.argv`` set to the script and its arguments). The page is written
even when the script exits with an error status or raises; the command then exits with the
script's status (1 for an exception, after its traceback). An output path that is a folder is a
usage error before the script runs; a page that cannot be written is said in one line, and the
command exits with 1 (or the script's own error status).

Without a CUDA GPU, and with ``TRITON_INTERPRET`` unset, importing tilefuse here switches Triton's
interpreter on (``tilefuse.backend.interpreter_switched_on``), so the script's CPU graphs run as
tilefuse's kernels and are reported; the command says so on stderr, and the page's Device line too.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import traceback


def _top_level_found(module: str) -> bool:
    """Whether the top-level package of ``module`` can be found from the working directory (as
    ``python -m`` looks for it), without importing anything."""
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(module.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False
    finally:
        sys.path.pop(0)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the script with collection on, write the page; returns the exit status."""
    ap = argparse.ArgumentParser(
        prog="python -m tilefuse.report",
        description="Run a script that uses torch.compile(..., backend='tilefuse') and write an HTML page "
        "with every kernel's fused ops, bytes moved, time, bandwidth and FLOP/s against the device's "
        "measured peaks, a roofline plot, the extern calls and the refused fusions.",
    )
    ap.add_argument("-o", "--output", default="tilefuse_report.html", help="the page to write (default: %(default)s)")
    ap.add_argument("--no-peaks", action="store_true", help="do not measure the device's peak bandwidth and FLOP/s")
    ap.add_argument("-m", dest="as_module", action="store_true", help="run a module, as `python -m MODULE` would")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the script (or, with -m, the module) and its arguments")
    ns = ap.parse_args(argv)
    if not ns.command:
        ap.error("give a script to run, or -m and a module")
    target, args = ns.command[0], ns.command[1:]
    if not ns.as_module and not os.path.isfile(target):
        ap.error(f"no such script: {target!r} (give the path of a Python file, or -m and a module)")
    if ns.as_module and not _top_level_found(target):
        ap.error(
            f"no module named {target.partition('.')[0]!r} (give a module importable from here, or a script's path)"
        )
    if os.path.isdir(ns.output):
        ap.error(f"-o {ns.output!r} is a folder: give the path of the page to write (e.g. {ns.output}/report.html)")

    from .. import backend
    from . import collect

    if backend.interpreter_switched_on:
        print(
            "tilefuse: no CUDA GPU, so Triton's interpreter is on for this run (TRITON_INTERPRET=1): CPU graphs "
            "run as tilefuse's Triton kernels, slowly, and the report shows them. The script run on its own "
            "runs them eagerly unless TRITON_INTERPRET=1 is set before torch is imported.",
            file=sys.stderr,
        )
    rep = collect()
    rep.workload = " ".join(["-m"] * ns.as_module + ns.command)
    status = 0
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [target, *args]
    sys.path.insert(0, os.getcwd() if ns.as_module else os.path.dirname(os.path.abspath(target)))
    try:
        if ns.as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # noqa: BLE001 - the script's error: shown, and the page still written
        traceback.print_exc()
        status = 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    try:
        path = rep.write_html(ns.output, peaks=not ns.no_peaks)
    except OSError as e:
        print(f"tilefuse: kernel report not written to {ns.output!r}: {e}", file=sys.stderr)
        return status or 1
    print(f"tilefuse: kernel report of {rep.summary()}: {path}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
