#!/usr/bin/env bash
# Set up a fresh machine for tilefuse: a virtualenv in .venv with the pinned dependencies, and the
# package (Python + the Rust extension tilefuse._native) installed from this checkout.
# Needs: python3 (>= 3.10) with venv, and a Rust toolchain (cargo). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo (Rust) is needed to build tilefuse's native core; install it from https://rustup.rs" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -r requirements-dev.txt
# maturin develop: release build of tilefuse._native, package installed in place from python/
# (its pip step re-lists every already-installed dependency: filtered out, errors still shown)
log=$(mktemp)
status=0
maturin develop --release -q >"$log" 2>&1 || status=$?
grep -v -e "^Requirement already satisfied" -e "^Looking in links" -e "^Ignoring " "$log" || true
rm -f "$log"
if [ "$status" -ne 0 ]; then echo "error: maturin develop failed (exit $status)" >&2; exit "$status"; fi
python -c "import tilefuse._native" 
