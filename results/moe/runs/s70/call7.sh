#!/usr/bin/env bash
# s70 call 7: session 62's row groups (results/moe/runs/s62/group-rows.patch, applied to ec10415 unchanged; not in
# main) against call 6's line: on the H100 skewed V4-Pro's time follows its DRAM bytes (~0.30 ms per GB), and its
# popular experts' weights come from DRAM once per weight-sharing pair (6.6 GB more than once). Part 1: ncu's DRAM bytes
# and time of one warm launch per group size (call 6's metrics). Part 2: the same process times group_rows 2 and 4
# beside 0 (bench_moe --compare-group-rows, the protocol's ABBA blocks), two processes. Carry build/s70b.tar.xz (main's
# bench_moe) and build/s70c.tar.xz (bench_moe_rg: the patched build, stripped of debug info).
#   OUT=$OUT bash results/moe/runs/s70/call7.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
{ [ -x $B/bench_moe_rg ] || tar xJf build/s70c.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c7 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
M="dram__cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum"
M="$M,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed"
M="$M,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum"
Q="--tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for cfg in bench_moe:deepseek-v4-pro:skewed:0 bench_moe_rg:deepseek-v4-pro:skewed:0 bench_moe_rg:deepseek-v4-pro:skewed:2 \
           bench_moe_rg:deepseek-v4-pro:skewed:4 bench_moe_rg:deepseek-v4-pro:balanced:2 bench_moe_rg:deepseek-v4-flash:skewed:2 \
           bench_moe_rg:deepseek-v4-flash:balanced:2; do
  IFS=: read -r bin shape routing gr <<< "$cfg"; n=${bin}_${shape}_${routing}_g${gr}
  extra=""; [ $bin = bench_moe_rg ] && extra="--group-rows $gr"
  timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --metrics "$M" --csv \
    $B/$bin --shapes $shape --routing $routing $Q $extra --block-s 0.01 --warmup-s 0.01 --rounds 1 \
    --out $O/w/m_$n > $O/w/metrics_$n.csv 2> $O/w/metrics_$n.err
  echo "== $bin $shape $routing group_rows $gr: rc=$?"
  python3 - $O/w/metrics_$n.csv <<'PY'
import csv, sys
v = {r[12]: r[14] for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0] != "ID"}
f = lambda k: float(v.get(k, "nan").replace(",", ""))
print("  %.2f ms at %.0f MHz; DRAM busy %.1f %%, read %.2f GB; SMs' L2 reads %.1f GB, %.0f %% hits; fabric %.1f %%" % (
    f("gpu__time_duration.sum") / 1e6, f("gpc__cycles_elapsed.avg.per_second") / 1e6,
    f("dram__cycles_active.avg.pct_of_peak_sustained_elapsed"), f("dram__bytes_read.sum") / 1e9,
    f("lts__t_sectors_srcunit_tex_op_read.sum") * 32 / 1e9,
    100 * f("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum") / f("lts__t_sectors_srcunit_tex_op_read.sum"),
    f("lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed")))
PY
done
for i in 1 2; do
  timeout 200 $B/bench_moe_rg --shapes deepseek-v4-pro,deepseek-v4-flash --routing balanced,skewed $Q \
    --compare-group-rows 2,4 --block-s 0.05 --warmup-s 0.03 --out $O/w/p$i > $O/w/p$i.log 2>&1
  echo "== timing process $i: rc=$?"
  [ -f $O/w/p$i/moe.csv ] && grep -E "fused_interleaved" $O/w/p$i/moe.csv | cut -d, -f1,7,10,11,14,16,19
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/m_*/blocks.json $O/w/p*/blocks.json
(cd $O/w && tar czf ../c7.tgz * 2>/dev/null)
rm -rf $O/w
