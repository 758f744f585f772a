#!/usr/bin/env bash
# s53 call 5 (nvidia-h200): the P = 1 table of record again, on the current kernel (s52's per-rank token counts) and
# auto's tie rule: STEPS="w8 w4 merge" of scripts/moe-study.sh (84 points, both orders, emulated P = 2, 4, 8 at 2048
# tokens); then the Python MoE tests on the new C ABI library (order="auto" follows the rule).
# build/s53c5.tar.xz: bench_moe and libxstage_attention.so, stripped.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe build/src/kernels/attention && tar xJf build/s53c5.tar.xz -C /tmp
mv /tmp/bench_moe build/bench/moe/ && mv /tmp/libxstage_attention.so build/src/kernels/attention/
source scripts/moe-env.sh
O=$OUT/c5 && mkdir -p $O
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
for st in w8 w4 merge; do
  OUT=$O/study STEPS=$st timeout 230 bash scripts/moe-study.sh >> $O/study.log 2>&1
  el "$st rc=$?"
done
grep -E "^configs|^orders|^simulator" $O/study.log
python3 -c "import json; s=json.load(open('$O/study/moe/summary.json')); print({k: s[k] for k in ('correct_configs','geomean_fused_vs_unfused_p1','min_fused_vs_unfused_p1','ceiling_fraction_v4_w8a8_8k','ceiling_fraction_v4_w8a8_32k','configs_fused_slower')})"
export XSTAGE_ATTENTION_LIB=$(realpath build/src/kernels/attention/libxstage_attention.so) PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
timeout 100 python3 tests/attention/run_pytest.py tests/moe_gpu/test_python_moe.py > $O/test_python_moe.log 2>&1
el "test_python_moe rc=$? $(tail -1 $O/test_python_moe.log)"
cd $O && rm -f study/*/blocks.json && tar czf c5.tgz --exclude=c5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name c5.tgz -exec rm -rf {} +
