#!/usr/bin/env bash
# One device call for the attention kernel (run from the repo root; writes under $OUT, default
# results/attention/dev):
#   scripts/attention-device.sh [--lib-before OLD.so] [LIB.so]
# LIB defaults to build-attn/src/kernels/attention/libxstage_attention.so. Steps, in order ($STEPS,
# default "pytest bench"):
#   pytest       Python module tests on the GPU (tests/attention/test_python_module.py) + protocol CPU tests
#   ctest        the attention GPU ctests of build-attn
#   check        own fp32 reference check of LIB (bench/attention/attention_check.py)
#   sanitize     compute-sanitizer memcheck on small shapes
#   bench        protocol benchmark (docs/BENCHMARKING.md) on the full grid, with --lib-before if given:
#                $OUT/attention.csv, summary.json, attention_blocks.json (written after every shape)
#   bench-quick  the same on 4 shapes
# Extra benchmark arguments: BENCH_ARGS (e.g. "--graph" or "--shapes 128:24:32K:c"). Per-step time limits (s):
# PYTEST_TIMEOUT 120, CTEST_TIMEOUT 60, CHECK_TIMEOUT 70, SAN_TIMEOUT 60, BENCH_TIMEOUT 540.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-results/attention/dev}
LIB=build-attn/src/kernels/attention/libxstage_attention.so
BEFORE=()
while [ $# -gt 0 ]; do
  case $1 in
    --lib-before) BEFORE=(--lib-before "$2"); shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) [ -z "${lib_given:-}" ] || { echo "one LIB.so only (a second: $1)" >&2; exit 2; }
       LIB=$1 lib_given=1; shift ;;
  esac
done
mkdir -p "$OUT"
export XSTAGE_ATTENTION_LIB=$LIB
status=0
echo "== device: $(nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,driver_version --format=csv,noheader | head -1)  $(date -u)"
for step in ${STEPS:-pytest bench}; do
  case $step in
    pytest) echo "== pytest: Python module on $LIB"
      timeout ${PYTEST_TIMEOUT:-120} python3 tests/attention/run_pytest.py tests/attention/test_python_module.py 2>&1 | tail -4
      echo "pytest rc=${PIPESTATUS[0]}"
      python3 tests/bench/test_bench_protocol.py | tail -1 ;;
    ctest) echo "== ctest (attention, gpu) on build-attn"
      timeout ${CTEST_TIMEOUT:-60} ctest --test-dir build-attn -L gpu -R attention --output-on-failure 2>&1 | tail -25 ;;
    check) echo "== check $LIB"
      timeout ${CHECK_TIMEOUT:-70} python3 bench/attention/attention_check.py check "$OUT" "$LIB" 2>&1 | grep -v "^OK " | tail -40 ;;
    sanitize) echo "== compute-sanitizer on $LIB"
      timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 9 \
        python3 bench/attention/attention_check.py sanitize "$OUT" "$LIB" 2>&1 | grep -v "^$" | grep -v "'ok': True" | tail -12
      echo "sanitizer rc=${PIPESTATUS[0]}" ;;
    bench|bench-quick) echo "== $step: protocol benchmark on $LIB ${BEFORE[*]}"
      # the CSV goes to $OUT/attention.csv; the log keeps the per-shape lines and the table
      quick=(); [ "$step" = bench-quick ] && quick=(--quick)
      # shellcheck disable=SC2086  # BENCH_ARGS: words on purpose
      timeout "${BENCH_TIMEOUT:-540}" python3 bench/attention/bench_attention.py --lib "$LIB" "${BEFORE[@]}" --out "$OUT" \
        "${quick[@]}" ${BENCH_ARGS:-} 2>&1 | grep -v "^[0-9a-z]*,\|^# dtype,"
      rc=${PIPESTATUS[0]}; echo "bench rc=$rc"; [ "$rc" = 0 ] || status=$rc ;;
    *) echo "unknown step $step"; status=2 ;;
  esac
done
exit $status
