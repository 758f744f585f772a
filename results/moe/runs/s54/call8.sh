#!/usr/bin/env bash
# s54 call 8 (nvidia-h200): after the review mend (bench_moe's --compare-wave-lag through add_variants; the lagged
# simulation at P = 1 only): DiT-MoE-XL W8A8 at 2K and 8K, both routings, both orders and the lagged one; auto's pick
# and the fused column's backend per row. build/s54c8.tar.xz: bench_moe, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/pk build/bench/moe && tar xJf build/s54c8.tar.xz -C build/pk && mv build/pk/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c8 && mkdir -p $O
timeout 150 build/bench/moe/bench_moe --out $O/run --shapes dit-moe-xl --tokens 2048,8192 --routing balanced,skewed \
  --precision w8a8 --orders wave,interleaved --compare-wave-lag --worlds 1 --check-tokens 1 --block-s 0.05 \
  --warmup-s 0.03 > $O/run.log 2>&1
echo "rc=$?"; grep -E "^dit|^orders|^configs" $O/run.log
python3 - $O/run/summary.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["tokens"], r["routing"], r["auto_order"], r["auto_wave_lag"], r["fused_backend"],
          "sim_wave_lag_us %.1f" % r["sim_wave_lag_us"], "auto_vs_best %.3f" % r["auto_vs_best"], r["correct"])
PY
rm -f $O/run/blocks.json
