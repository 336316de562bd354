#!/usr/bin/env bash
# Linters and structural checks (run by scripts/test.sh before the tests; needs scripts/setup.sh's
# .venv): ruff (lint + format, config in pyproject.toml), rustfmt and clippy (warnings are errors,
# with and without the Python bindings), the layer contract (import-linter, pyproject.toml), the
# package's size limits (scripts/check_sizes.py), and the native module's type stubs against the
# built module (mypy's stubtest).
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
echo "== ruff"
ruff check .
ruff format --check .
echo "== cargo fmt / clippy"
cargo fmt --check
cargo clippy -q --all-targets -- -D warnings
cargo clippy -q --all-targets --features python -- -D warnings
echo "== layer contract"
lint-imports --no-cache
echo "== sizes"
python scripts/check_sizes.py python/tilefuse
echo "== stubtest"
allow=()
if [ -f python/tilefuse/_native.stubtest-allowlist ]; then
    allow=(--allowlist "$PWD/python/tilefuse/_native.stubtest-allowlist")
fi
# from outside the checkout, so the installed package (with its built extension) is what is checked
(cd / && python -m mypy.stubtest tilefuse._native "${allow[@]}")
