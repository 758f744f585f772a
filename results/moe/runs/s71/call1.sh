#!/usr/bin/env bash
# s71 call 1. Carry build/s71a.tar.xz: main d4f04e7's test_moe_layer_gpu, stream_probe, mainloop_probe and bench_moe
# (stripped of debug info).
#   OUT=$OUT bash results/moe/runs/s71/call1.sh [fabric] [sanitize] [h200]
# (the call ran: h200 and fabric on an H200, fabric and sanitize on any other card; carry build/s70b.tar.xz too for h200)
# fabric: is the L2 fabric's load (s70: 78-91 % busy in every large 8K layer, 39-47 % in the ceiling GEMM) a property
#   of streaming weights from DRAM, or of the layer's own traffic? ncu on one launch each of: stream_probe's rows
#   (TMA weight boxes only, 132 / 66 CTAs, with and without an A box from the L2, CTA pairs multicasting), the
#   mainloop probe's l1-tma-mix (a full tile's pipeline with tensor work, weights from HBM, A from the L2), and the
#   layer (V4-Pro 8K balanced and skewed, a warm launch). Same metrics as s70 call 6.
# sanitize: memcheck, synccheck and racecheck on main's MoE layer tests (small shapes; P = 1 and emulated P = 2, 8;
#   pairs; W4A8 and bf16): the kernel code of the table of record, last sanitized inside s68's packed-weights test.
# h200: on an H200 only, s70's calls 6 and 3 (the time against DRAM bytes and the L2 reading there).
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s71a && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s71a.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c1 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
M="$M,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,launch__grid_size"
show() {  # every profiled launch of an ncu CSV: time, clock, DRAM, the SMs' L2 reads, hits, fabric
  python3 - "$@" <<'PY'
import csv, sys, collections
k = collections.OrderedDict()
for r in csv.reader(open(sys.argv[1])):
    if len(r) > 14 and r[0] != "ID":
        k.setdefault(r[0], {"name": r[4]})[r[12]] = r[14]
f = lambda v, m: float(v.get(m, "nan").replace(",", ""))
labels = sys.argv[2].split(",") if len(sys.argv) > 2 else []
for j, (i, v) in enumerate(k.items()):
    lab = labels[j] if j < len(labels) else v["name"][:30]
    if lab == "-":
        continue
    t = f(v, "gpu__time_duration.sum"); l2 = f(v, "lts__t_sectors_srcunit_tex_op_read.sum") * 32
    print("  %-22s grid %4s: %7.3f ms %4.0f MHz; DRAM %6.2f GB %5.2f TB/s busy %5.1f %%; L2->SM %6.2f GB %5.2f TB/s %3.0f %% hits; fabric %5.1f %%" % (
        lab, v.get("launch__grid_size"), t / 1e6, f(v, "gpc__cycles_elapsed.avg.per_second") / 1e6,
        f(v, "dram__bytes_read.sum") / 1e9, f(v, "dram__bytes_read.sum") / t / 1e3,
        f(v, "dram__cycles_active.avg.pct_of_peak_sustained_elapsed"), l2 / 1e9, l2 / t / 1e3,
        100 * f(v, "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum") / max(1, f(v, "lts__t_sectors_srcunit_tex_op_read.sum")),
        f(v, "lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed")))
PY
}
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
for step in "$@"; do
  case $step in
    fabric)
      # stream_probe: configs in its order (rows layout first), a warm-up and one timed launch each; the timed ones
      # of configs 0-3 (132 / 96 / 66 / 33 CTAs), 10 (an A box of 64 rows from the L2), 13 (A 64 rows + a 600 ns hold
      # per stage), 15 (CTA pairs multicasting the weights)
      timeout 240 $CU/ncu --clock-control none -k regex:stream_kernel -c 32 --metrics "$M" --csv \
        $B/stream_probe --gb 8 --reps 1 > $O/w/stream.csv 2> $O/w/stream.err
      echo "== stream_probe rc=$?"; tail -2 $O/w/stream.err
      L=-,w132,-,w96,-,w66,-,w33,-,-,-,-,-,-,-,-,-,-,-,-,-,w132+A64,-,-,-,-,-,w132+A64+600ns,-,-,-,pairs132
      show $O/w/stream.csv "$L"
      timeout 200 $CU/ncu --clock-control none -k regex:tma_kernel -c 2 --metrics "$M" --csv \
        $B/mainloop_probe --pipe-only --src-mb 16384 --rows l1-tma-mix --ctas 132 --reps 1 > $O/w/probe.csv 2> $O/w/probe.err
      echo "== mainloop_probe l1-tma-mix rc=$?"; tail -2 $O/w/probe.err
      show $O/w/probe.csv "-,l1-tma-mix132"
      for routing in balanced skewed; do
        timeout 200 $CU/ncu --clock-control none -k regex:moe_fused_kernel --launch-skip 3 -c 1 --metrics "$M" --csv \
          $B/bench_moe --shapes deepseek-v4-pro --tokens 8192 --routing $routing --precision w8a8 --orders interleaved \
          --worlds 1 --check-tokens 1 --no-stream --block-s 0.01 --warmup-s 0.01 --rounds 1 --out $O/w/m_$routing \
          > $O/w/layer_$routing.csv 2> $O/w/layer_$routing.err
        echo "== layer V4-Pro 8K $routing rc=$?"
        show $O/w/layer_$routing.csv "v4pro-8k-$routing"
      done ;;
    sanitize)
      F='MoeLayerGpu.SingleRank:MoeLayerGpu.SingleRankPartialTiles:MoeLayerGpu.EmulatedP2:MoeLayerGpu.EmulatedP8'
      F="$F:MoeLayerGpu.CtaPairsSingleRank:MoeLayerGpu.EmptyExpertsAndIdleRanks:MoeLayerGpu.W4A8SingleRank"
      F="$F:MoeLayerGpu.Bf16SingleRank"
      for tool in memcheck synccheck racecheck; do
        f=$F; [ $tool = racecheck ] && f='MoeLayerGpu.SingleRank:MoeLayerGpu.CtaPairsSingleRank:MoeLayerGpu.EmulatedP2'
        timeout 120 $SAN --tool $tool --print-limit 20 $B/test_moe_layer_gpu --gtest_filter="$f" > $O/w/$tool.log 2>&1
        echo "== $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|^\[  (PASSED|FAILED) |OK \]|FAILED \]" $O/w/$tool.log | tail -12
      done ;;
    h200)
      if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
        OUT=$O bash results/moe/runs/s70/call6.sh; ANY_GPU=1 OUT=$O bash results/moe/runs/s70/call3.sh
      else echo "== h200: not an H200, skipped"; fi ;;
  esac
done
} 2>&1 | tee $O/out.txt
rm -rf $O/w/m_*/blocks.json
(cd $O/w && tar czf ../c1.tgz * 2>/dev/null)
rm -rf $O/w
