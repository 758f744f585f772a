#!/usr/bin/env bash
# s53 call 6 (nvidia-h200): emulated P = 2, 4, 8 against P = 1 at 8192 and 32768 global tokens on the current kernel
# (correctness only: STEPS=emu of scripts/moe-study.sh, both precisions and orders, every shape and routing; call 5's
# table checks it at 2048). build/s53c5.tar.xz: bench_moe, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/s53c5.tar.xz -C /tmp && mv /tmp/bench_moe build/bench/moe/
source scripts/moe-env.sh
O=$OUT/c6 && mkdir -p $O
T0=$(date +%s)
OUT=$O/study STEPS=emu timeout 540 bash scripts/moe-study.sh > $O/study.log 2>&1
echo "[t=$(( $(date +%s) - T0 ))s] emu rc=$?"
for t in 8192 32768; do
  python3 -c "import json; s=json.load(open('$O/study/emu$t/summary.json')); print($t, {k: s.get(k) for k in ('configs','correct_configs','emulated_ranks_tested')})" 2>&1 | tail -1
done
grep -E "^configs|^orders|bit-identical|differ" $O/study.log | head -12
cd $O && rm -f study/*/blocks.json && tar czf c6.tgz --exclude=c6.tgz * && find . -mindepth 1 -maxdepth 1 ! -name c6.tgz -exec rm -rf {} +
