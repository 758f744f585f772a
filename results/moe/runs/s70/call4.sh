#!/usr/bin/env bash
# s70 call 4: call 3's metrics (no sampling) over more layers at 8192 tokens, on any card: is the L2 fabric between the
# two L2 halves near its limit in the compute-bound layers too (V4-Flash, DeepSeek-V3, DiT-MoE-XL, whose weights the L2
# holds), or only where the DRAM streams (V4-Pro)? One warm fused launch per layer (the fourth of its process), the
# card's own clock. Carry build/s70b.tar.xz (call 2's). Prints per layer: time, SM clock, DRAM busy, the fabric's and
# the L2's other units' busy fractions, DRAM bytes read, the SMs' L2 reads and hit rate.
#   OUT=$OUT bash results/moe/runs/s70/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c4 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
M="$M,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for cfg in deepseek-v4-pro:balanced deepseek-v4-flash:skewed deepseek-v4-flash:balanced deepseek-v3:skewed \
           dit-moe-xl:skewed qwen3-235b-a22b:skewed; do
  shape=${cfg%%:*} routing=${cfg##*:} n=${shape}_${routing}
  timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --metrics "$M" --csv \
    $B/bench_moe --shapes $shape --tokens 8192 --routing $routing --precision w8a8 --orders interleaved --worlds 1 \
    --check-tokens 1 --no-stream --block-s 0.01 --warmup-s 0.01 --rounds 1 --out $O/w/m_$n > $O/w/metrics_$n.csv 2> $O/w/metrics_$n.err
  echo "== $n rc=$?"
  python3 - $O/w/metrics_$n.csv <<'PY'
import csv, sys
v = {r[12]: r[14] for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0] != "ID"}
f = lambda k: float(v.get(k, "nan").replace(",", ""))
units = sorted(((f(k), k.split("__")[1].split(".")[0]) for k in v if k.startswith("lts__") and "pct_of_peak" in k), reverse=True)
print("  %.2f ms at %.0f MHz; DRAM busy %.1f %%, read %.1f GB; SMs' L2 reads %.1f GB, %.0f %% hits" % (
    f("gpu__time_duration.sum") / 1e6, f("gpc__cycles_elapsed.avg.per_second") / 1e6,
    f("dram__cycles_active.avg.pct_of_peak_sustained_elapsed"), f("dram__bytes_read.sum") / 1e9,
    f("lts__t_sectors_srcunit_tex_op_read.sum") * 32 / 1e9,
    100 * f("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum") / f("lts__t_sectors_srcunit_tex_op_read.sum")))
print("  L2 units busy: " + ", ".join("%s %.1f" % (k, x) for x, k in units[:5]))
PY
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/m_*/blocks.json
(cd $O/w && tar czf ../c4.tgz * 2>/dev/null)
rm -rf $O/w
