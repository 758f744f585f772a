#!/usr/bin/env bash
# s70 call 5: the ceiling GEMMs' FLOPs per L2 byte and L2 fabric load, for call 4's comparison. bench_moe's ceiling
# (cuBLASLt FP8, 128x128 block scales) is two GEMMs of M = T k rows, [2I x H] and [H x I]: the same for any expert
# count, so a custom shape with V4-Pro's (V4-Flash's) hidden, inter and top-k but 8 experts times the same ceiling
# while its unfused backend launches few GEMMs. ncu takes call 4's metrics on the first 300 cuBLASLt launches of the
# process (the unfused check, then the timed blocks); the ceiling's are the long ones (M = 49152): printed, the four
# longest kernels of each process with the mean of each. Any card; carry
# build/s70b.tar.xz (call 2's).
#   OUT=$OUT bash results/moe/runs/s70/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
M="$M,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,launch__grid_size"
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for cfg in pro:7168:3072 flash:4096:2048; do
  IFS=: read -r n H I <<< "$cfg"
  timeout 240 $CU/ncu --clock-control none -k regex:'xmma|nvjet|gemm|cutlass' -c 300 --metrics "$M" --csv \
    $B/bench_moe --custom ceil_$n:$H:$I:8:6 --shapes ceil_$n --tokens 8192 --routing balanced --precision w8a8 \
    --orders interleaved --worlds 1 --check-tokens 1 --no-stream --block-s 0.01 --warmup-s 0.01 --rounds 1 \
    --out $O/w/m_$n > $O/w/metrics_$n.csv 2> $O/w/metrics_$n.err
  echo "== ceiling $n (H $H, I $I, M 49152) rc=$?"; tail -2 $O/w/metrics_$n.err
  python3 - $O/w/metrics_$n.csv <<'PY'
import csv, sys, collections
k = collections.OrderedDict()
for r in csv.reader(open(sys.argv[1])):
    if len(r) > 14 and r[0] != "ID":
        k.setdefault((r[0], r[4][:60]), {})[r[12]] = r[14]
f = lambda v, m: float(v.get(m, "nan").replace(",", ""))
longest = sorted(k.items(), key=lambda kv: -f(kv[1], "gpu__time_duration.sum"))[:4]
for (i, name), v in longest:
    l2 = f(v, "lts__t_sectors_srcunit_tex_op_read.sum") * 32
    fab = f(v, "lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed")
    t = f(v, "gpu__time_duration.sum")
    print("  %s grid %s: %.3f ms at %.0f MHz; L2->SM %.1f GB (%.2f TB/s, %.0f %% hits), DRAM %.1f GB, busy %.1f %%; fabric %.1f %%" % (
        name[:40], v.get("launch__grid_size"), t / 1e6, f(v, "gpc__cycles_elapsed.avg.per_second") / 1e6, l2 / 1e9,
        l2 / t / 1e3, 100 * f(v, "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum") / max(1, f(v, "lts__t_sectors_srcunit_tex_op_read.sum")),
        f(v, "dram__bytes_read.sum") / 1e9, f(v, "dram__cycles_active.avg.pct_of_peak_sustained_elapsed"), fab))
PY
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/m_*/blocks.json
(cd $O/w && tar czf ../c5.tgz * 2>/dev/null)
rm -rf $O/w
