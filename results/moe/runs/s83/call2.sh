#!/usr/bin/env bash
# s83 call 2 (any sm_90 GPU; replaces call 1, which never found a machine). Carry build/s83f.tar.xz (gpu-tests pack of
# this session's build: the dispatch's batched loads), build/s83c.tar.xz (bench_moe and the probes of main 6328f4e, the
# old dispatch) and build/s83e.tar.xz (bench_moe of the new dispatch), all three in one archive, build/s83g.tar.xz
# (the pack's files, old/bench_moe, old/mainloop_probe, new/bench_moe; xz -9e: the tree and three archives were over
# the device's 64 MiB).
#   1. the whole GPU suite of the new build (scripts/gpu-tests-device.sh run): the dispatch changed;
#   2. old against new dispatch, processes in balanced order A B B A (scripts/moe-ab.sh), each process with its own
#      unfused baseline and ceiling: the bar's four rows (DeepSeek-V4 8K W8A8), and Qwen3-30B-A3B at 8K and 32K
#      (the layer whose dispatch is the largest part: 2 KB rows, top-8, intermediate 768);
#   (the probes' step was dropped at 01:20: the device time left after the failed asks)
#   OUT=$OUT bash results/moe/runs/s83/call2.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c2 && mkdir -p "$O"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s83g.tar.xz
echo "== gpu-tests-device.sh rc=$?"
mkdir -p build/s83ab && tar xJf build/s83g.tar.xz -C build/s83ab ./old ./new || exit 1
source scripts/moe-env.sh
P="--precision w8a8 --orders interleaved --worlds 1 --check-tokens 1 --block-s 0.2 --warmup-s 0.2 --rounds 1"
BINS="build/s83ab/old/bench_moe build/s83ab/new/bench_moe" OUT=$O/v4 timeout 200 bash scripts/moe-ab.sh \
  --shapes deepseek-v4-flash,deepseek-v4-pro --tokens 8192 --routing balanced,skewed $P
echo "== moe-ab V4 8K rc=$?"
BINS="build/s83ab/old/bench_moe build/s83ab/new/bench_moe" OUT=$O/qw timeout 120 bash scripts/moe-ab.sh \
  --shapes qwen3-30b-a3b --tokens 8192,32768 --routing balanced $P
echo "== moe-ab Qwen3-30B rc=$?"
rm -f $O/*/ab/*/blocks.json
tar czf $O/ab.tgz -C $O v4 qw && rm -rf $O/v4 $O/qw
} 2>&1 | tee $O/out.txt
