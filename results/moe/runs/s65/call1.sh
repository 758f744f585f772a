#!/usr/bin/env bash
# s65 call 1 (nvidia-h200; an H100 runs the tests only): main's GPU tests after this session's host changes (the C ABI's
# dtype as an int, the schedulers' host validation), the Python tests of attention, team, Ulysses and MoE; on an H200
# also session 64's unrun call 4 (mainloop_probe rows l1-bulkaw-mix / short-bulkaw-k, each CTA count twice).
# Carry build/s65.tar.xz (libxstage_attention.so, the GPU test binaries and mainloop_probe of main 2199e80, stripped).
#   OUT=$OUT bash results/moe/runs/s65/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk65 && mkdir -p $B && tar xJf build/s65.tar.xz -C $B
source scripts/moe-env.sh
export LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}"
O=$OUT/c1 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for t in test_attention_gpu test_ulysses_gpu test_peer_store_gpu test_runtime_gpu test_moe_layer_gpu test_unfused_gpu test_fp8_wgmma_gpu; do
  timeout 240 $B/$t > $O/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED" $O/$t.log | head
done
export XSTAGE_ATTENTION_LIB="$PWD/$B/libxstage_attention.so" PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1
for t in tests/attention/test_python_module.py tests/attention/test_python_team.py tests/ulysses/test_python_ulysses.py tests/moe_gpu/test_python_moe.py; do
  timeout 240 python3 tests/attention/run_pytest.py $t > $O/$(basename $t .py).log 2>&1
  echo "$t rc=$? $(tail -1 $O/$(basename $t .py).log)"
done
if grep -q H200 $O/gpu.txt; then
  for rep in 1 2; do
    for c in 132 66 33; do
      timeout 60 $B/mainloop_probe --pipe-only --src-mb 16384 --ctas $c --json $O/probe${c}_$rep.json > $O/probe${c}_$rep.log 2>&1
      echo "== probe $c CTAs, run $rep: rc=$?"
      grep -E "^(variant|l1-tma-mix|l1-tma1-mix|l1-bulkw-mix|l1-tmak-mix|l1-bulkaw-mix|short-tma-k|short-bulkw-k|short-bulkaw-k) " $O/probe${c}_$rep.log
    done
  done
fi
cd $O && tar czf ../c1.tgz . && cd .. && rm -rf $O
