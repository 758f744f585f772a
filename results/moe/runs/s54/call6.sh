#!/usr/bin/env bash
# s54 call 6 (nvidia-h200): the final build's MoE GPU tests (the lagged order is a bit-identical variant of every
# Expert-Wave case), memcheck on HalfAndFullTiles (lagged waves among its variants), the Python MoE tests (the C ABI's
# third order, "expert-wave-lagged", bit-identical to the others; auto's pick for DiT-MoE-XL), then held-out points of
# auto's lag rule (fitted on call 4's 2K / 8K / 32K): DiT-MoE-XL at 1024, 4096, 16384 tokens, both routings, W8A8 and
# W4A8, all three orders timed in one process. Same binaries as call 5 (build/s54c5.tar.xz).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk && tar xJf build/s54c5.tar.xz -C build/pk
mkdir -p build/bench/moe build/tests/moe_gpu build/src/kernels/attention
mv build/pk/bench_moe build/bench/moe/ && mv build/pk/test_moe_layer_gpu build/tests/moe_gpu/ && mv build/pk/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
O=$OUT/c6 && mkdir -p $O/runs
timeout 150 build/tests/moe_gpu/test_moe_layer_gpu > $O/test_moe_layer_gpu.log 2>&1
echo "test_moe_layer_gpu rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/test_moe_layer_gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $O/test_moe_layer_gpu.log | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 120 $CS --tool memcheck --error-exitcode 9 build/tests/moe_gpu/test_moe_layer_gpu \
  --gtest_filter='MoeLayerGpu.HalfAndFullTiles' > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tr '\n' ' ')"
timeout 120 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
for p in w8a8 w4a8; do
  timeout 60 build/bench/moe/bench_moe --out $O/runs/$p --shapes dit-moe-xl --tokens 1024,4096,16384 \
    --routing balanced,skewed --precision $p --orders wave,interleaved --compare-wave-lag --worlds 1 --check-tokens 1 \
    --block-s 0.05 --warmup-s 0.03 > $O/runs/$p.log 2>&1
  echo "$p rc=$?"
  python3 - $O/runs/$p/summary.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["tokens"], r["routing"], r["auto_order"], "lag" if r.get("auto_wave_lag") else "-",
          "auto_vs_best %.3f" % r.get("auto_vs_best", float("nan")), r.get("fused_backend"), r.get("correct"))
PY
  awk -F, 'NR>1 && $10 ~ /fused/ {printf "%-6s %-9s %-20s %8.3f\n",$6,$7,$10,$11}' $O/runs/$p/moe.csv
done
tar czf $O/runs.tgz -C $O runs && rm -rf $O/runs
