#!/usr/bin/env bash
# s68 call 8: the MoE Python tests through the C ABI (the new "w8a8-packed" format among them) and, on an H200 only,
# call 4's bench (packed beside row-major, processes N M M N N M M N). Carry build/s68e.tar.xz (this tree's
# libxstage_attention.so and bench_moe, main d0d9743's bench_moe as bench_moe_main; stripped).
#   OUT=$OUT bash results/moe/runs/s68/call8.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/pk68e && mkdir -p $B && { [ -f $B/libxstage_attention.so ] || tar xJf build/s68e.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c8 && mkdir -p $O/w
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
export XSTAGE_ATTENTION_LIB="$PWD/$B/libxstage_attention.so" PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1
timeout 200 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/w/test_python_moe.log 2>&1
echo "test_python_moe rc=$? $(tail -1 $O/w/test_python_moe.log)"
grep -E "FAILED|Error" $O/w/test_python_moe.log | head -5
if grep -q H200 $O/w/gpu.txt; then
  Q="--shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.05 --warmup-s 0.03"
  i=0
  for b in bench_moe bench_moe_main bench_moe_main bench_moe bench_moe bench_moe_main bench_moe_main bench_moe; do
    i=$((i + 1)); extra=""; [ $b = bench_moe ] && extra="--compare-packed"
    timeout 120 $B/$b $Q $extra --out $O/w/p$i > $O/w/p$i.log 2>&1
    echo "== process $i $b: rc=$?"
    [ -f $O/w/p$i/moe.csv ] && grep -E "fused_interleaved" $O/w/p$i/moe.csv | cut -d, -f1,7,10,11,14,16
  done
fi
} 2>&1 | tee $O/out.txt
(cd $O/w && tar czf ../logs.tgz $(ls -d p*/moe.csv 2>/dev/null) *.log *.txt 2>/dev/null)
rm -rf $O/w
