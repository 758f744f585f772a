#!/usr/bin/env bash
# s70 call 8: row groups of a fixed size. Call 7's build (session 62's group-rows.patch) with MoeLayout::group_of cutting
# an expert's rows into groups of group_rows rows (the last one shorter) instead of one group per expert
# (results/moe/runs/s70/group-rows-sized.patch; not in main): the same weight tile read by G / 2 weight-sharing pairs
# together, while a group's Linear-2 tiles wait only for its own G rows' Linear-1 tiles. By count (weight_reads), skewed
# V4-Pro 8K reads its weights for 32.0 GB with pairs alone, 27.9 with G = 4, 26.8 with 6, 26.3 with 8, 25.4 once.
# Part 1: ncu's DRAM bytes and time of one warm launch per G. Part 2: G = 4 and 8 beside 0 in one process (ABBA
# blocks), two processes. Carry build/s70b.tar.xz and build/s70d.tar.xz (bench_moe_rgc, stripped of debug info).
#   OUT=$OUT bash results/moe/runs/s70/call8.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
{ [ -x $B/bench_moe_rgc ] || tar xJf build/s70d.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c8 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
M="dram__cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum"
M="$M,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed"
M="$M,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum"
Q="--tokens 8192 --precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --no-stream"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for cfg in deepseek-v4-pro:skewed:0 deepseek-v4-pro:skewed:4 deepseek-v4-pro:skewed:6 deepseek-v4-pro:skewed:8 \
           deepseek-v4-pro:balanced:4 deepseek-v4-flash:skewed:4 deepseek-v4-flash:balanced:4; do
  IFS=: read -r shape routing gr <<< "$cfg"; n=${shape}_${routing}_g${gr}
  timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --metrics "$M" --csv \
    $B/bench_moe_rgc --shapes $shape --routing $routing $Q --group-rows $gr --block-s 0.01 --warmup-s 0.01 --rounds 1 \
    --out $O/w/m_$n > $O/w/metrics_$n.csv 2> $O/w/metrics_$n.err
  echo "== $shape $routing group_rows $gr: rc=$?"
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
  grep -h -o '"correct": *[a-z]*' $O/w/m_$n/summary.json 2>/dev/null | sort | uniq -c | tr '\n' ' '; echo
done
for i in 1 2; do
  timeout 200 $B/bench_moe_rgc --shapes deepseek-v4-pro,deepseek-v4-flash --routing balanced,skewed $Q \
    --compare-group-rows 4,8 --block-s 0.05 --warmup-s 0.03 --out $O/w/p$i > $O/w/p$i.log 2>&1
  echo "== timing process $i: rc=$?"
  [ -f $O/w/p$i/moe.csv ] && grep -E "fused_interleaved" $O/w/p$i/moe.csv | cut -d, -f1,7,10,11,14,16,19
  grep -h -o '"variants_bitwise_equal": *[a-z]*\|"correct": *[a-z]*' $O/w/p$i/summary.json 2>/dev/null | sort | uniq -c | tr '\n' ' '; echo
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/m_*/blocks.json $O/w/p*/blocks.json
(cd $O/w && tar czf ../c8.tgz * 2>/dev/null)
rm -rf $O/w
