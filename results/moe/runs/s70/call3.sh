#!/usr/bin/env bash
# s70 call 3: call 2's ncu reading on an H200 (exits at once on any other card unless ANY_GPU=1), at the card's own
# clock (--clock-control none: ncu otherwise locks the SM clock at base, 1.5 GHz in call 2), and with the L2's
# throughput broken down into its sub-metrics (which unit binds), DRAM and L2 bytes, L2 hit rate of the SMs' reads and
# the tensor pipe's active fraction. V4-Pro 8K skewed and balanced (the bar's points), V4-Flash 8K skewed (a
# compute-bound layer beside them). A warm launch (the fourth of the process: the check's, then the timed blocks'),
# where call 2 and this script's first H100 run took the process's first. On any other card (unless ANY_GPU=1) only V4-Pro skewed's metrics run.
# Carry build/s70b.tar.xz (call 2's).
#   OUT=$OUT bash results/moe/runs/s70/call3.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c3 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:dram__throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum"
M="$M,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
M="$M,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpc__cycles_elapsed.avg.per_second"
M="$M,dram__cycles_elapsed.avg.per_second,gpu__time_duration.sum,lts__cycles_elapsed.avg.per_second"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
run() {  # name shape tokens routing
  local a="$B/bench_moe --shapes $2 --tokens $3 --routing $4 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.01 --warmup-s 0.01 --rounds 1"
  timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --metrics "$M" --csv \
    $a --out $O/w/m_$1 > $O/w/metrics_$1.csv 2> $O/w/metrics_$1.err
  echo "$1 metrics rc=$?"
  if ! grep -q lts__throughput $O/w/metrics_$1.csv; then  # a metric name this ncu lacks: the breakdowns alone
    tail -3 $O/w/metrics_$1.err
    timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --csv --metrics \
      "breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,gpu__time_duration.sum" \
      $a --out $O/w/m_$1 > $O/w/metrics_$1.csv 2>> $O/w/metrics_$1.err
    echo "$1 metrics (fallback) rc=$?"
  fi
  grep -E "lts__throughput|dram__throughput.avg.pct|gmma|duration|cycles_elapsed.avg.per_second" $O/w/metrics_$1.csv | cut -d, -f12- | head -30
  [ $H200 = 1 ] || [ "${ANY_GPU:-0}" = 1 ] || return 0
  timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --section MemoryWorkloadAnalysis -o $O/w/$1 $a --out $O/w/b_$1 > $O/w/$1_run.txt 2>&1
  echo "$1 sections rc=$?"
  $CU/ncu --import $O/w/$1.ncu-rep --page source --print-source sass --csv 2> /dev/null | gzip > $O/w/src_$1.csv.gz
  $CU/ncu --import $O/w/$1.ncu-rep --page details --csv 2> /dev/null | gzip > $O/w/details_$1.csv.gz
}
run pro_skew deepseek-v4-pro 8192 skewed
[ $H200 = 1 ] || [ "${ANY_GPU:-0}" = 1 ] || { echo "not an H200: V4-Pro skewed's metrics only"; exit 0; }
run pro_bal deepseek-v4-pro 8192 balanced
run flash_skew deepseek-v4-flash 8192 skewed
} 2>&1 | tee $O/out.txt
rm -rf $O/w/*.ncu-rep $O/w/*_*/blocks.json
(cd $O/w && tar czf ../c3.tgz * 2>/dev/null)
rm -rf $O/w
