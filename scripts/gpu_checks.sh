#!/usr/bin/env bash
# The GPU checks, in one command for a CUDA machine, each part with a time limit so a batch fits a
# bounded session: the ported templates and the end-to-end modules on CUDA, every gpu-marked
# test, and (optionally) a piece of the model zoo. Logs and the zoo's CSV go to $OUT (default
# ./gpu_out).
#
#   bash scripts/gpu_checks.sh                       # checkout built by scripts/setup.sh (or pip)
#   bash scripts/gpu_checks.sh --wheel DIR/tilefuse-*.whl   # a machine without Rust: the built
#                                                   # wheel's native module is used with this
#                                                   # checkout's Python sources
#   ZOO="--suite timm --mode inference" bash scripts/gpu_checks.sh   # also a zoo piece
#   PROFILE="tf_efficientnet_b0,ghostnet_100" bash scripts/gpu_checks.sh   # and their top kernels,
#                                                   # tilefuse's then Inductor's (benches/profile_model.py)
#
# Parts (seconds, each overridable): TPL_S templates and end-to-end modules (240), GPU_S the
# gpu-marked tests (240), ZOO_S the zoo (its --time-budget; children time out at ZOO_TIMEOUT_S),
# PROFILE_S each profile (90; PROFILE_ARGS adds arguments, e.g. --memory; PROFILE_BACKENDS
# "tilefuse" profiles one backend). TPL_S=0 / GPU_S=0 skip a part.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if [ "${1:-}" = "--wheel" ]; then
    wheel="$2"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tilefuse_site "$wheel" || exit 1
    # the wheel's native module beside this checkout's sources (benches put python/ first)
    "$PY" - "$wheel" <<'EOF' || exit 1
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = next(n for n in z.namelist() if n.startswith("tilefuse/_native") and n.endswith(".so"))
open("python/tilefuse/" + name.split("/")[-1], "wb").write(z.read(name))
EOF
    export PYTHONPATH="$PWD/python:/tmp/tilefuse_site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
nvidia-smi -L 2>/dev/null | tee "$OUT/device.txt"
git log --oneline -1 2>/dev/null | tee -a "$OUT/device.txt"
workers=$("$PY" -c 'import os; print(max(1, min(14, (os.cpu_count() or 2) - 2)))')

if [ "${TPL_S:-240}" != 0 ]; then
echo "== templates and end-to-end modules on CUDA"
TILEFUSE_TEST_DEVICE=cuda timeout "${TPL_S:-240}" "$PY" -m pytest -q -p no:cacheprovider -n "$workers" \
    tests/test_tpl_*.py tests/test_upsample.py tests/test_unbacked.py tests/test_cudagraphs.py \
    tests/test_devices.py tests/test_layout_opt.py "tests/test_backend_ops.py::test_division_by_a_python_number_matches_eager_bit_for_bit" \
    "tests/test_backend_ops.py::test_division_by_a_dynamic_python_number_matches_eager_bit_for_bit" \
    "tests/test_backend_ops.py::test_tensor_division_matches_eager_bit_for_bit" \
    "tests/test_backend_ops.py::test_gelu_lowering_matches_eager" "tests/test_backend_ops.py::test_gelu_read_by_two_kernels_is_recomputed_in_each" \
    > "$OUT/templates.log" 2>&1
grep -E "^FAILED|passed|failed" "$OUT/templates.log" | tail -40
fi

if [ "${GPU_S:-240}" != 0 ]; then
echo "== gpu-marked tests"
# -v: each result is logged as it comes, so a run cut off by the time limit still names its failures
timeout "${GPU_S:-240}" "$PY" -m pytest -v -p no:cacheprovider -m gpu -n "$workers" tests > "$OUT/gpu.log" 2>&1
grep -E "(FAILED|ERROR) tests|passed|failed" "$OUT/gpu.log" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' | sort -u | tail -40
fi

if [ -n "${ZOO:-}" ]; then
    echo "== model zoo: $ZOO"
    # shellcheck disable=SC2086  # ZOO holds several arguments
    "$PY" benches/models.py $ZOO --csv "$OUT/zoo.csv" --resume --time-budget "${ZOO_S:-240}" \
        --timeout "${ZOO_TIMEOUT_S:-200}" --log "$OUT/zoo.log" --bytecode-cache /tmp/tilefuse_pyc \
        2>&1 | grep -E " (tilefuse|inductor): "
    "$PY" benches/models.py --report --csv "$OUT/zoo.csv" --out "$OUT/zoo.md" > /dev/null 2>&1
fi

if [ -n "${PROFILE:-}" ]; then
    for model in ${PROFILE//,/ }; do
        for backend in ${PROFILE_BACKENDS:-tilefuse inductor}; do
            echo "== profile: $model, $backend"
            # shellcheck disable=SC2086  # PROFILE_ARGS holds several arguments
            timeout "${PROFILE_S:-90}" "$PY" benches/profile_model.py --model "$model" --backend "$backend" --top 16 ${PROFILE_ARGS:-} \
                > "$OUT/profile_${model}_${backend}.log" 2>&1
            grep -v Warning "$OUT/profile_${model}_${backend}.log" | tail -"${PROFILE_LINES:-20}" | cut -c1-170
        done
    done
fi
