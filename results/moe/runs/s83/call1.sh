#!/usr/bin/env bash
# s83 call 1 (any sm_90 GPU). Carry build/s83d.tar.xz (scripts/gpu-tests-device.sh pack of this session's build) and
# build/s83c.tar.xz (bench_moe, stream_probe, mainloop_probe of the same build).
#   1. the whole GPU suite (scripts/gpu-tests-device.sh run), the first since the build folder was rebuilt;
#   2. the probes with their default two rounds (the first GPU run since session 82's review mend of balanced_passes);
#   3. the bar's four rows (DeepSeek-V4 Flash / Pro, W8A8, 8192 tokens, balanced / skewed, P = 1) with long blocks.
#   OUT=$OUT bash results/moe/runs/s83/call1.sh
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c1 && mkdir -p "$O"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s83d.tar.xz
echo "== gpu-tests-device.sh rc=$?"
B=$(mktemp -d) && tar xJf build/s83c.tar.xz -C $B || exit 1
source scripts/moe-env.sh
timeout 150 $B/stream_probe --gb 4 --reps 1 --csv $O/stream.csv > $O/stream_probe.txt 2>&1
echo "== stream_probe rc=$?"; head -8 $O/stream_probe.txt
timeout 150 $B/mainloop_probe --kblocks 512 --reps 2 --json $O/mainloop.json > $O/mainloop_probe.txt 2>&1
echo "== mainloop_probe rc=$?"; head -6 $O/mainloop_probe.txt
timeout 200 $B/bench_moe --shapes deepseek-v4-flash,deepseek-v4-pro --tokens 8192 --routing balanced,skewed \
  --precision w8a8 --orders wave,interleaved --worlds 1 --check-tokens 1 --block-s 0.3 --warmup-s 0.3 --rounds 2 \
  --min-calls 5 --out $O/bar > $O/bar.txt 2>&1
echo "== bench_moe bar rows rc=$?"; tail -12 $O/bar.txt
rm -f $O/bar/blocks.json
} 2>&1 | tee $O/out.txt
