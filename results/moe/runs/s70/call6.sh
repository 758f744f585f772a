#!/usr/bin/env bash
# s70 call 6: does the layer's time follow its DRAM bytes where call 3 found it DRAM-bound (an H100, skewed V4-Pro
# 8K)? The pair modes change how often the popular experts' weights come from DRAM (MoeLayerParams::pair_share: 0 =
# auto = 3 here, weights shared by any two row blocks; 2 only by two full ones; 1 never, A shared instead) and
# --row-order 1 where the short rows run, --cluster 1 single CTAs (nothing shared); ncu reads the DRAM bytes and the time of one warm launch each (call 4's
# metrics). Any card; carry build/s70b.tar.xz (call 2's).
#   OUT=$OUT bash results/moe/runs/s70/call6.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c6 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
M="$M,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for cfg in skewed:0:0:0 skewed:1:0:0 skewed:2:0:0 skewed:0:0:1 skewed:0:1:0 skewed:0:0:0 balanced:0:0:0 balanced:1:0:0; do
  IFS=: read -r routing ps ro cl <<< "$cfg"; n=${routing}_ps${ps}_ro${ro}_cl${cl}
  timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --metrics "$M" --csv \
    $B/bench_moe --shapes deepseek-v4-pro --tokens 8192 --routing $routing --precision w8a8 --orders interleaved \
    --pair-share $ps --row-order $ro --cluster $cl --worlds 1 --check-tokens 1 --no-stream --block-s 0.01 --warmup-s 0.01 --rounds 1 \
    --out $O/w/m_$n > $O/w/metrics_$n.csv 2> $O/w/metrics_$n.err
  echo "== V4-Pro 8K $routing, pair_share $ps, row_order $ro, cluster $cl: rc=$?"
  python3 - $O/w/metrics_$n.csv <<'PY'
import csv, sys
v = {r[12]: r[14] for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0] != "ID"}
f = lambda k: float(v.get(k, "nan").replace(",", ""))
print("  %.2f ms at %.0f MHz; DRAM busy %.1f %%, read %.2f GB (%.2f TB/s); SMs' L2 reads %.1f GB, %.0f %% hits; fabric %.1f %%" % (
    f("gpu__time_duration.sum") / 1e6, f("gpc__cycles_elapsed.avg.per_second") / 1e6,
    f("dram__cycles_active.avg.pct_of_peak_sustained_elapsed"), f("dram__bytes_read.sum") / 1e9,
    f("dram__bytes_read.sum") / f("gpu__time_duration.sum"), f("lts__t_sectors_srcunit_tex_op_read.sum") * 32 / 1e9,
    100 * f("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum") / f("lts__t_sectors_srcunit_tex_op_read.sum"),
    f("lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed")))
PY
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/m_*/blocks.json
(cd $O/w && tar czf ../c6.tgz * 2>/dev/null)
rm -rf $O/w
