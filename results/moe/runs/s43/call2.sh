#!/usr/bin/env bash
# s43 call 2: what the fused kernel's full Linear-1 mainloop can do with its 8K data mix, apart from the rest of the
# kernel. The mainloop probe's new l1-tma-mix row: the kernel's TMA loads and its two-batch K block (4 x 48 KB stages,
# one producer thread), A from 8 MB that the L2 keeps, the weights streamed once from a 16 GB source (HBM); set
# against the same process's l1-tma (the old row) and a 16 MB source (everything from L2), and against the fused
# layer and its cuBLASLt ceiling (bench_moe, V4-Pro 8K W8A8, in this call). Probe runs in the order H L H66 H, the
# bench, then H again. build/probe43.tar.xz: mainloop_probe (this session's source) and bench_moe (main's, 11dd1f1's
# kernel), stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/probe43.tar.xz -C build/bench/moe
source scripts/moe-env.sh
P=build/bench/moe/mainloop_probe
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $OUT/machine.txt
probe() {  # $1 tag, rest: probe arguments
  local tag=$1; shift
  $P --pipe-only --json $OUT/$tag.json "$@" > $OUT/$tag.log 2>&1
  echo "$tag rc=$?"; grep -E '^(variant|l1-tma|l1-pipe|short-none|short-tma )' $OUT/$tag.log
}
probe H1 --src-mb 16384
probe L1 --src-mb 16
probe H66 --src-mb 16384 --ctas 66
probe H2 --src-mb 16384
timeout 200 build/bench/moe/bench_moe --out $OUT/bench --shapes deepseek-v4-pro,deepseek-v4-flash --tokens 8192 \
  --routing balanced,skewed --precision w8a8 --orders interleaved --worlds 1 --check-tokens 4 --block-s 0.1 \
  --warmup-s 0.05 > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E '^(shape|deepseek)' $OUT/bench.log
probe H3 --src-mb 16384
cd $OUT && rm -f bench/blocks.json && tar czf call2.tgz --exclude=call2.tgz * && ls
# (as run; the device tool returned only 8 of the files. Next time keep only the archive, as s37's calls do:
#  find . -mindepth 1 -maxdepth 1 ! -name call2.tgz -exec rm -rf {} +)
