#!/usr/bin/env bash
# One GPU session's checks, in one call (a lent machine costs its start every time it is asked for).
#
#   OUT=/tmp/gpu-out bash benchmarks/gpu_session.sh                  # every step
#   OUT=/tmp/gpu-out bash benchmarks/gpu_session.sh gpu_tests accept  # only these steps
#
# Steps: gpu_tests, check_native, unit_cuda, accept, engine_bench. A lent machine runs one command for at most
# 10 minutes, so a lease may split them over two calls; each step has its own time limit.
#
# Runs, each step's output kept in $OUT/<step>.txt and its exit code in $OUT/summary.txt (a step that
# fails does not stop the others: the point is to learn every result a lease can give):
#   1. the GPU integration tests (pytest -m gpu; tests needing more GPUs than the box has or an
#      installed TensorRT-LLM skip, with the reason), JUnit in $OUT/gpu.xml; all but check_native's;
#   1b. check_native: `regress check --device cuda` on regress's fake trees, upstream's code and
#      their @triton.jit kernel native on the GPU, against `--device cpu`'s verdicts
#      (tests/integration/test_check_native.py, about 3 min serial, so 4 workers), JUnit in
#      $OUT/check_native.xml;
#   2. the unit suite on that machine's CUDA torch, with whatever plugins its image has;
#   3. regress accept on CUDA: clean, stale_req_idx and no_accept_v1_cache_manager at batch 1,8,32, K=4;
#   4. benchmarks/reference_engine.py --device cuda (eager vs graph, map refresh, sentinel overhead).
# regress is installed as a user installs it, from a wheel of this checkout carried in .whl/
# (`pip wheel --no-deps . -w .whl` just before the call: a stale wheel tests old code in children):
# its pytest11 entry point and `regress` command are then what the tests see. Without that wheel
# the checkout is put on PYTHONPATH with PYTEST_PLUGINS standing in for the entry point, which is
# not the same (PYTEST_DISABLE_PLUGIN_AUTOLOAD does not turn PYTEST_PLUGINS off, so the few tests
# that run a pytest with autoload off fail there). A junitparser wheel under .whl/ is installed
# first if the image lacks it.
set -u
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
PY=${PYTHON:-python}
$PY -c "import junitparser" 2>/dev/null || $PY -m pip install -q --no-deps .whl/junitparser-*.whl
wheel=$(ls .whl/trtllm_regress-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ]; then
    $PY -m pip install -q --no-deps --force-reinstall "$wheel"
else
    export PYTHONPATH=$PWD PYTEST_PLUGINS=regress.pytest_plugin
    shim=$(mktemp -d)
    trap 'rm -rf "$shim"' EXIT
    printf '#!/bin/sh\nexec %s -m regress "$@"\n' "$(command -v "$PY")" >"$shim/regress"
    chmod +x "$shim/regress"
    export PATH="$shim:$PATH"
fi
summary="$OUT/summary.txt"
: >"$summary"

wanted() {  # no steps named: every step
    [ -z "$STEPS" ] && return 0
    local s
    for s in $STEPS; do [ "$s" = "$1" ] && return 0; done
    return 1
}
STEPS="$*"

step() {  # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    echo "$name rc=$rc $((SECONDS - start))s" >>"$summary"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
    nproc
    uptime
} >"$OUT/machine.txt" 2>&1

if wanted gpu_tests; then
    step gpu_tests 240 $PY -m pytest -m gpu tests/integration \
        --ignore=tests/integration/test_check_native.py \
        -q -rs -p no:cacheprovider --junitxml="$OUT/gpu.xml"
fi
if wanted check_native; then
    step check_native 300 $PY -m pytest -m gpu tests/integration/test_check_native.py \
        -n 4 -q -rs -p no:cacheprovider --junitxml="$OUT/check_native.xml"
fi
if wanted unit_cuda; then
    step unit_cuda 420 $PY -m pytest tests/unit -n 12 -q -p no:cacheprovider
fi
if wanted accept; then
    for defect in none stale_req_idx no_accept_v1_cache_manager; do
        args=()
        [ "$defect" = none ] || args=(--defect "$defect")
        step "accept_$defect" 120 $PY -m regress accept --device cuda --batch-sizes 1,8,32 \
            --max-draft-len 4 "${args[@]}" --json "$OUT/accept_$defect.json"
    done
fi
if wanted engine_bench; then
    step engine_bench 150 $PY benchmarks/reference_engine.py --device cuda --batch 1 8 32
fi
cat "$summary"
