#!/usr/bin/env bash
# s80 call 1 (any sm_90 GPU). Carry build/s80a.tar.xz (every GPU test binary of main, scripts/gpu-tests-device.sh
# pack) and build/s80b.tar.xz (bench_moe, bench_ulysses, stripped).
#   OUT=$OUT bash results/moe/runs/s80/call1.sh
# What changed on the GPU side this session: xstage_attn_fwd_to_peers' completion target (the CTAs launched, not
# epoch x this call's), the Ulysses layer's input check before its epoch turns, pack_int4's alignment check, the
# timeouts' bound, the Python modules' argument checks and Team.close; the summary files' `software` object and
# `xstage --version`. The kernels did not change. So: every GPU test (new ones among them), the torch-only CPU tests,
# a memcheck of the new Ulysses test, and the harnesses' summary.json and --version on a machine with a driver.
set -uo pipefail
cd "$(dirname "$0")/../../../.." || exit 1
O=$OUT/c1 && mkdir -p "$O/w"
{
OUT=$O bash scripts/gpu-tests-device.sh run build/s80a.tar.xz
B=build/s80b && mkdir -p $B && tar xJf build/s80b.tar.xz -C $B
source scripts/moe-env.sh
export LD_LIBRARY_PATH=$PWD/build/src/kernels/attention:${LD_LIBRARY_PATH:-}
export XSTAGE_ATTENTION_LIB=$PWD/build/src/kernels/attention/libxstage_attention.so PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1
for t in tests/diffusers/test_plumbing_cpu.py tests/ulysses/test_torch_layout.py tests/diffusers/test_diffusers_backend.py; do
  n=$(basename "$t" .py)
  timeout 300 python3 tests/attention/run_pytest.py "$t" > "$O/w/$n.txt" 2>&1
  echo "== $t rc=$? $(tail -1 "$O/w/$n.txt")"
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 200 $CS --tool memcheck --error-exitcode 9 build/tests/ulysses/test_ulysses_gpu \
  --gtest_filter='UlyssesEmulated.RefusedCallKeepsTheOutputBuffers' > $O/w/memcheck_ulysses.txt 2>&1
echo "== memcheck ulysses refused call rc=$? $(grep -E 'ERROR SUMMARY' $O/w/memcheck_ulysses.txt)"
echo "== xstage --version:"; build/src/cli/xstage --version; echo "   rc=$?"
python3 -c "import xstage, xstage.attention as a; print('== python', xstage.__version__, '|', a.library_version())"
timeout 200 $B/bench_moe --shapes dit-moe-xl --tokens 2048 --routing balanced --precision w8a8 --orders wave \
  --worlds 1,2 --no-stream --block-s 0.02 --warmup-s 0.01 --rounds 1 --out $O/w/bm > $O/w/bench_moe.txt 2>&1
echo "== bench_moe rc=$? $(head -1 $O/w/bench_moe.txt)"
python3 -c "import json; s = json.load(open('$O/w/bm/summary.json')); print('   software', s['software'], 'correct', s['correct_configs'], 'of', s['configs'])"
timeout 200 $B/bench_ulysses --quick --ranks 2 --block-s 0.05 --warmup-s 0.02 --out $O/w/ul > $O/w/ulysses.txt 2>&1
echo "== bench_ulysses rc=$? $(head -1 $O/w/ulysses.txt)"; tail -1 $O/w/ulysses.txt
python3 -c "import json; s = json.load(open('$O/w/ul/summary.json')); print('   software', s['software'])"
} 2>&1 | tee $O/out.txt
rm -f $O/w/bm/blocks.json $O/w/ul/blocks.json
(cd $O/w && tar czf ../c1.tgz ./* 2>/dev/null); rm -rf $O/w
