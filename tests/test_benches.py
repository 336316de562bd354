"""The benchmark scripts' own behaviour on a machine without a GPU: bad arguments are refused with
a message before any measurement starts, and the CPU path of ``benches/compile_time.py`` produces
a table row with numbers and tilefuse's phases."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benches", "compile_time.py")


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("args, message", [
    (("--backends", "tilefsue"), "--backends 'tilefsue': choose from"),
    (("--modes", ","), "give one or more of"),
    (("--only", "softmax,nosuch"), "unknown workload 'nosuch'"),
    (("--profile", "nosuch"), "unknown workload 'nosuch'"),
    (("--device", "gpu"), "invalid choice: 'gpu'"),
])
def test_compile_time_refuses_bad_arguments(args, message):
    r = _run(*args, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]


def test_compile_time_cpu_row():
    r = _run("--device", "cpu", "--only", "softmax,", "--modes", "static", "--backends", "tilefuse")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    row = next(line for line in r.stdout.splitlines() if line.startswith("| softmax | static |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[2]) > 0 and float(cells[4]) > 0  # aot_eager's and tilefuse's first calls, s
    assert re.search(r"tilefuse phases \(s\): lower=\d", r.stdout)
