#!/usr/bin/env bash
# s49 call 9 (nvidia-h200): the GPU tests whose poison fills now wait before the teams' non-blocking streams run
# (fill_now), and bench_moe's emulated-rank check (its poison now waits too). build/s49c9.tar.xz: stripped
# test_moe_layer_gpu, test_unfused_gpu, test_unfused_ep_gpu, test_peer_store_gpu, bench_moe.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/tests/moe_gpu build/tests/kernel build/bench/moe && tar xJf build/s49c9.tar.xz -C /tmp
mv /tmp/test_moe_layer_gpu /tmp/test_unfused_gpu /tmp/test_unfused_ep_gpu build/tests/moe_gpu/
mv /tmp/test_peer_store_gpu build/tests/kernel/ && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
O=$OUT/c9 && mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
el gtests
for b in build/tests/kernel/test_peer_store_gpu build/tests/moe_gpu/test_moe_layer_gpu build/tests/moe_gpu/test_unfused_gpu \
         build/tests/moe_gpu/test_unfused_ep_gpu; do
  n=$(basename $b)
  timeout 300 $b > $O/$n.log 2>&1; rc=$?
  echo "$n rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/$n.log | grep -vE '^\[  SKIPPED \] [A-Z]' | tr '\n' ' ')"
done
el bench-emulated
timeout 120 build/bench/moe/bench_moe --out $O/emu --shapes qwen3-30b-a3b,deepseek-v4-flash --tokens 2048 --routing skewed \
  --precision w8a8 --orders wave,interleaved --worlds 1,2,4,8 --emulated-tokens 2048 --check-tokens 1 --no-time > $O/emu.log 2>&1
echo "rc=$?"; grep -E "^configs|emulated|DIFFER" $O/emu.log | head -8
el done
cd $O && rm -f */blocks.json && tar czf ../call9.tgz * && cd .. && rm -rf c9
