#!/usr/bin/env bash
# `regress check` on every real upstream tree under .real/, on a lent GPU machine, in one call.
#
#   OUT=/tmp/out bash benchmarks/real_trees_gpu.sh            # every tree in .real/*
#   OUT=/tmp/out bash benchmarks/real_trees_gpu.sh eraC eraC-plant-dsl   # only these trees
#
# The trees are real TensorRT-LLM files (read from the code index into /tmp/real/ by a session,
# planted defects included) and are NEVER committed: they travel in .real/, which .gitignore
# ignores, as an ignored path the device call carries (`carry: [".real"]`). Copy them in first:
#   mkdir -p .real && cp -r /tmp/real/eraC* .real/
#
# For each tree, two checks, each a fresh process with its own time limit:
#   1. the default run (every scenario + upstream's production cells), --json $OUT/<tree>.default.json
#   2. --matrix full (the matrix scenario alone, every cell), --json $OUT/<tree>.full.json
# and one line per check in $OUT/summary.txt: tree, mode, exit code, seconds. The text reports are
# kept in $OUT/<tree>.<mode>.txt. Exit codes: 0 pass, 1 a finding, 3 a gap (the sandbox could not
# judge a scenario), anything else an error of regress (see the .txt).
#
# Native GPU mode: when this checkout's `regress check` has `--device` (the native-GPU mode of
# issue 28: upstream's Triton kernels compiled for the GPU, tensors on it), each check runs with
# `--device cuda`; otherwise the CPU mode runs on that machine (Triton's interpreter), and
# summary.txt says so. Same verdicts expected either way: compare with the CPU run recorded in
# benchmarks/check_matrix.md.
#
# regress is installed as benchmarks/gpu_session.sh installs it: a wheel from .whl/ when there is
# one (`pip wheel --no-deps . -w .whl` just before the call), else the checkout on PYTHONPATH.
# The wheel replaces whatever regress $PYTHON has, so on a dev machine run it without .whl/.
# Delete .real/ after the call: upstream code does not stay in a checkout of this repository.
set -u
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
PY=${PYTHON:-python}
LIMIT=${LIMIT:-240}
# regress's own limit per check (its default, 60 s, is for one tree's default run on a quiet box;
# the full matrix is 128 cells), kept under the shell's so regress reports a gap, not a kill
CHECK_TIMEOUT=${CHECK_TIMEOUT:-$((LIMIT - 20))}
REAL=${REAL:-.real}

wheel=$(ls .whl/trtllm_regress-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ]; then
    $PY -m pip install -q --no-deps --force-reinstall "$wheel"
    REGRESS=(regress)
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    REGRESS=("$PY" -m regress)
fi

summary="$OUT/summary.txt"
: >"$summary"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
    $PY -c "import triton; print('triton', triton.__version__)" || echo "triton: not installed"
    nproc
    uptime
} >"$OUT/machine.txt" 2>&1

# DEVICE=cpu runs the same checks in the CPU sandbox (Triton's interpreter): the verdicts to compare.
DEVICE=${DEVICE:-cuda}
device=()
if [ "$DEVICE" = cuda ] && "${REGRESS[@]}" check --help 2>/dev/null | grep -q -- "--device"; then
    device=(--device cuda)
    echo "mode: native GPU (regress check --device cuda)" >>"$summary"
else
    echo "mode: CPU sandbox (Triton's interpreter)" >>"$summary"
fi

trees=("$@")
if [ ${#trees[@]} -eq 0 ]; then
    for dir in "$REAL"/*/; do
        [ -d "$dir/tensorrt_llm" ] && trees+=("$(basename "$dir")")
    done
fi
if [ ${#trees[@]} -eq 0 ]; then
    echo "no trees under $REAL/ (each a folder holding tensorrt_llm/): copy them in first" >&2
    exit 2
fi

check() {  # check TREE MODE ARGS...
    local tree=$1 mode=$2
    shift 2
    local start=$SECONDS
    timeout --kill-after=10 "$LIMIT" "${REGRESS[@]}" check --trtllm-src "$REAL/$tree" \
        --timeout "$CHECK_TIMEOUT" "${device[@]}" "$@" --json "$OUT/$tree.$mode.json" >"$OUT/$tree.$mode.txt" 2>&1
    local rc=$?
    echo "$tree $mode rc=$rc $((SECONDS - start))s" >>"$summary"
}

# JOBS checks at once (default: one per two cores; a lent machine's minutes are the scarce thing).
# Every check is a child of this shell: an interrupt or the end of the script ends them all.
JOBS=${JOBS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
trap 'kill $(jobs -p) 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for tree in "${trees[@]}"; do
    for mode in default full; do
        while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
        if [ $mode = default ]; then
            check "$tree" default &
        else
            check "$tree" full --matrix full --scenario matrix &
        fi
    done
done
wait
sort "$summary"
