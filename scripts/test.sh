#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: the linters and structural checks (scripts/lint.sh;
# whole runs only), the Rust core's cargo tests (unit, integration and property tests) and the Python
# suite (pytest; Triton kernels run on the CPU through TRITON_INTERPRET=1; tests marked `gpu` are
# skipped without a CUDA device). Arguments go to pytest in place of the whole suite and skip the
# linters: `bash scripts/test.sh tests/test_config.py -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
if [ $# -eq 0 ]; then
    bash scripts/lint.sh
fi
echo "== cargo test"
cargo test --release
echo "== pytest"
# arguments, when given, say what to run instead of the whole suite (test files, -k, -x, ...)
if [ $# -gt 0 ]; then
    python -m pytest -q "$@"
else
    # one worker per core (pytest-xdist): the tests compile and run kernels on the CPU, one
    # process each, and share nothing but the on-disk caches, which take concurrent writers
    python -m pytest -q -n "$(python -c 'import os; print(max(1, min(os.cpu_count() or 1, 4)))')" tests
fi
echo "== scripts/test.sh: every step passed"
