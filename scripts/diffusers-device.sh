#!/usr/bin/env bash
# One device call for the diffusers integration (run from the repo root on the GPU machine; carry .whl and
# the build that holds libxstage_attention.so, default build/):
#   bash scripts/diffusers-device.sh [LIB.so]
# Installs the carried diffusers wheel(s) from .whl/ into /tmp/site (no index, no deps: torch, numpy,
# huggingface-hub, safetensors, regex, requests, Pillow come with the machine's image), then runs
#   1. the CPU decision test (tests/diffusers/check_decision.py)
#   2. the plumbing test on CPU tensors with real diffusers (tests/diffusers/test_plumbing_cpu.py)
#   3. the GPU tests (tests/diffusers/test_diffusers_backend.py): Flux/Wan at world size 1, the dispatcher,
#      fallbacks, the Ulysses path at one rank, and 2 ranks under torchrun when 2 GPUs are present
# and writes the log to $OUT/diffusers.log and step 3's whole output to $OUT/diffusers-gpu.log (OUT defaults
# to results/diffusers/dev). Exit status: 0 when
# every step passed (the 2-rank test may skip: one GPU), else 1. GPU_TIMEOUT: step 3's limit (420 s).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-results/diffusers/dev}
LIB=${1:-build/src/kernels/attention/libxstage_attention.so}
mkdir -p "$OUT"
LOG=$OUT/diffusers.log

main() {

echo "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)" \
     "x $(nvidia-smi -L 2>/dev/null | wc -l)  $(date -u)"
if ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "FAIL: no wheels under .whl/ (carry .whl)"; return 1
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "FAIL: pip install of .whl/*.whl"; return 1; }
export PYTHONPATH=/tmp/site:$PWD/python:$PWD/tests/diffusers${PYTHONPATH:+:$PYTHONPATH}
export XSTAGE_ATTENTION_LIB=$LIB
[ -f "$LIB" ] || { echo "FAIL: $LIB not found (carry the build)"; return 1; }
XSTAGE_ATTENTION_LIB=$(realpath "$LIB")
export XSTAGE_ATTENTION_LIB
python3 -c 'import sys, torch, diffusers, huggingface_hub, safetensors; print("python", sys.version.split()[0], "torch", torch.__version__, "diffusers", diffusers.__version__, "from", diffusers.__file__, "hub", huggingface_hub.__version__, "safetensors", safetensors.__version__, "GPUs", torch.cuda.device_count())' \
  || { echo "FAIL: import diffusers"; return 1; }
python3 -c 'import xstage.ulysses' 2>/dev/null && echo "xstage.ulysses: present" || echo "xstage.ulysses: MISSING (Ulysses tests skip)"

status=0
echo "== 1. decision logic (CPU)"
timeout 60 python3 tests/diffusers/check_decision.py 2>&1 | tail -3
rc=${PIPESTATUS[0]}; echo "decision rc=$rc"; [ "$rc" = 0 ] || status=1

echo "== 2. plumbing on CPU tensors, real diffusers (incl. 2 gloo ranks)"
timeout 240 python3 tests/attention/run_pytest.py -p no:warnings tests/diffusers/test_plumbing_cpu.py 2>&1 | tail -15
rc=${PIPESTATUS[0]}; echo "plumbing rc=$rc"; [ "$rc" = 0 ] || status=1

echo "== 3. GPU: Flux/Wan through xstage (world size 1), dispatcher, fallbacks, Ulysses P=1, torchrun P=2"
# the whole pytest output goes to $OUT/diffusers-gpu.log; the console (and diffusers.log) keeps the result lines
timeout ${GPU_TIMEOUT:-420} python3 tests/attention/run_pytest.py -s -p no:warnings tests/diffusers/test_diffusers_backend.py \
  > "$OUT/diffusers-gpu.log" 2>&1
rc=$?
grep -E "^(diffusers |flux|wan|dispatch|ulysses|world|PASS|FAIL|SKIPPED|E  |.*[0-9]+ (passed|failed|skipped|error))" \
  "$OUT/diffusers-gpu.log" | tail -150
[ "$rc" = 0 ] || tail -60 "$OUT/diffusers-gpu.log"
echo "gpu rc=$rc (77: all skipped)"; [ "$rc" = 0 ] || status=1

echo "== summary: status=$status (log: $LOG)"
return $status
}

main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
