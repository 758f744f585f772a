#!/usr/bin/env bash
# s70 call 2: where the consumer warps spend a bar-point layer, per SASS instruction, on today's kernel. ncu's warp-state
# sampling (SourceCounters, WarpStateStats, with SpeedOfLight and MemoryWorkloadAnalysis for the DRAM rate) of one fused
# launch of the lean W8A8 Interleaved kernel on V4-Pro at 8192 tokens, skewed and balanced (132 SMs), and, as session
# 43's call 6 did before the fmaf fix, at 2048 tokens on 32 CTAs (every tile a half tile). Carry build/s70b.tar.xz
# (this tree's bench_moe, stripped of host symbols only; the device code keeps -lineinfo). The SASS with line info
# comes back too (nvdisasm on the device), to map each sampled address to its source line.
#   OUT=$OUT bash results/moe/runs/s70/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
B=build/s70b && mkdir -p $B && { [ -x $B/bench_moe ] || tar xJf build/s70b.tar.xz -C $B; }
source scripts/moe-env.sh
O=$OUT/c2 && mkdir -p $O/w
CU=$(dirname "$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)")
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/w/gpu.txt
run() {  # name tokens routing ctas
  local ctas=""; [ "$4" != 0 ] && ctas="--ctas $4"
  timeout 240 $CU/ncu -k regex:moe_fused_kernel -c 1 --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --section MemoryWorkloadAnalysis -o $O/w/$1 \
    $B/bench_moe --out $O/w/b_$1 --shapes deepseek-v4-pro --tokens $2 --routing $3 --precision w8a8 \
    --orders interleaved $ctas --worlds 1 --check-tokens 1 --no-time > $O/w/$1_run.txt 2>&1
  echo "$1 ncu rc=$?"; tail -2 $O/w/$1_run.txt
  $CU/ncu --import $O/w/$1.ncu-rep --page source --print-source sass --csv 2> /dev/null | gzip > $O/w/src_$1.csv.gz
  $CU/ncu --import $O/w/$1.ncu-rep --page details --csv 2> /dev/null | gzip > $O/w/details_$1.csv.gz
  echo "$1: $(zcat $O/w/src_$1.csv.gz | wc -l) source lines"
}
run skew8k 8192 skewed 0
run bal8k 8192 balanced 0
run bal2k32 2048 balanced 32
# the lean W8A8 Interleaved kernel's SASS with line info, to map the sampled addresses
ROOT=$PWD && mkdir -p $O/w/elf && (cd $O/w/elf && $CU/cuobjdump -xelf all "$ROOT/$B/bench_moe" > /dev/null)
ls $O/w/elf | head
for f in $O/w/elf/*.cubin; do $CU/nvdisasm --print-line-info -c "$f" 2> /dev/null | gzip > "$O/w/$(basename "$f" .cubin).sass.gz"; done
ls -la $O/w/*.sass.gz | head
} 2>&1 | tee $O/out.txt
rm -rf $O/w/elf $O/w/*.ncu-rep $O/w/b_*/blocks.json
(cd $O/w && tar czf ../c2.tgz * 2>/dev/null)
rm -rf $O/w
