#!/usr/bin/env bash
# s32 call 5: where a full tile's time goes. ncu (clocks not locked) on one fused launch of DeepSeek-V3 8K balanced
# (256 rows per expert: every tile a full tile, weight-sharing pairs) and of V4-Pro 8K skewed, Interleaved: speed of
# light, the pipes' utilization (the tensor pipe's share of the elapsed cycles), the warp states.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for t in "deepseek-v3 balanced" "deepseek-v4-pro skewed"; do
  set -- $t
  el "ncu $1 $2"
  timeout 240 "$NCU" -k regex:moe_fused_kernel -c 1 --clock-control none \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis \
    build/bench/moe/bench_moe --out $OUT/ncu-$1 --shapes $1 --tokens 8192 --routing $2 --precision w8a8 \
    --orders interleaved --worlds 1 --check-tokens 1 --no-time > $OUT/ncu-$1.txt 2>&1
  echo "rc=$?"
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache|Executed Ipc|Issue Slots Busy|SM Busy|Warp Cycles Per Issued|Tensor|tensor|Stall|Hit Rate" $OUT/ncu-$1.txt | head -40
done
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
