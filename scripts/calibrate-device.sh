#!/usr/bin/env bash
# Runs on the GPU machine (device tool) with a carried build: `xstage calibrate` on every local GPU,
# the GPU tests, and optionally compute-sanitizer on a tiny sweep.
#   scripts/calibrate-device.sh BIN_DIR [calibrate|quick|tests|sanitize]...
# BIN_DIR holds the carried binaries side by side: xstage and test_runtime_gpu (from build/src/cli and
# build/tests/runtime). Steps, in the order given: calibrate (the full calibration into results/calibration,
# replacing the committed one, and a copy as $OUT/calibration.tgz), quick (`calibrate --quick` into $OUT/quick),
# tests (test_runtime_gpu, log $OUT/tests.log), sanitize (memcheck on a tiny sweep, $OUT/sanitize*). $OUT: ./out
# when unset. An unknown step is refused before any runs.
# XSTAGE_TEST_STAMPS=FILE (optional) makes the shape test dump the raw stamps of its gap points.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:?usage: scripts/calibrate-device.sh BIN_DIR [calibrate|quick|tests|sanitize]...}
shift
for step in "$@"; do
  case $step in calibrate | quick | tests | sanitize) ;; *) echo "unknown step '$step' (calibrate, quick, tests, sanitize)" >&2; exit 2 ;; esac
done
out=${OUT:-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_lib=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
xs=$build/xstage
ngpu=$(nvidia-smi -L | wc -l)
machine="$(hostname): ${ngpu}x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nvidia-smi topo -m | awk 'NR==2{print $3}') "
for step in "$@"; do
  case $step in
  sanitize)
    echo "== compute-sanitizer (memcheck) on a tiny sweep"
    timeout 80 compute-sanitizer --target-processes all --print-limit 20 "$xs" calibrate --nproc "$ngpu" --quick \
      --only zerogap --runs 1 --anchor-mb 16 --timeout 120 --no-plots -o "$out/sanitize" > "$out/sanitize.log" 2>&1
    grep -E "ERROR SUMMARY|Invalid|========= +(at|by)" "$out/sanitize.log" | head -20
    ;;
  tests)
    echo "== GPU tests"
    "$build/test_runtime_gpu" > "$out/tests.log" 2>&1
    grep -E "OK|FAILED|PASSED|rank check|scenario|G = " "$out/tests.log" | head -40
    ;;
  quick)
    echo "== quick calibrate"
    "$xs" calibrate --nproc "$ngpu" --quick --no-plots -o "$out/quick" 2>&1 | tail -60
    ;;
  calibrate)
    echo "== xstage calibrate --nproc $ngpu"
    start=$(date +%s)
    mkdir -p results/calibration
    "$xs" calibrate --nproc "$ngpu" --machine "$machine" -o results/calibration 2>&1 | tee results/calibration/calibrate.log | tail -45
    tar czf "$out/calibration.tgz" results/calibration
    echo "== wall time $(( $(date +%s) - start )) s"
    ;;
  esac
done
