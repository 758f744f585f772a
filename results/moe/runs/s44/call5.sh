#!/usr/bin/env bash
# s44 call 5 (call 4 again, records of 8 words: also the A loads' issue time and the stages pending): where a pipeline stage's round trip goes, from the producer's side (diagnostic build, stage-rec.patch:
# the traced kernel records per stage the empty wait, the last load's issue and the full barrier's completion as seen
# by polls while the producer waits; XSTAGE_STAGE_REC). build/rec44b.tar.xz: the stripped diagnostic bench_moe.
# One process per layer (timed first, then one traced launch whose first 16 CTAs are recorded), once:
# W8A8 8K V4-Pro balanced / skewed, V4-Flash balanced (Interleaved), V4-Pro 2K balanced on 32 CTAs.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
mkdir -p build/bench/moe && tar xJf build/rec44b.tar.xz -C build/bench/moe
source scripts/moe-env.sh
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/rec
run() {  # name, bench arguments
  local n=$1; shift
  XSTAGE_STAGE_REC=$OUT/rec/$n timeout 100 build/bench/moe/bench_moe_rec --out $OUT/$n --precision w8a8 --orders interleaved \
    --worlds 1 --check-tokens 1 --block-s 0.05 --warmup-s 0.03 --trace "$@" > $OUT/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^deepseek' $OUT/$n.log | awk '{print $5, $10}' | tr '\n' ' ') $(ls $OUT/rec | grep -c "^$n\.")"
}
run pb1 --shapes deepseek-v4-pro --tokens 8192 --routing balanced
run ps1 --shapes deepseek-v4-pro --tokens 8192 --routing skewed
run fb1 --shapes deepseek-v4-flash --tokens 8192 --routing balanced
run p2k1 --shapes deepseek-v4-pro --tokens 2048 --routing balanced --ctas 32
el analysis
python3 results/moe/runs/s44/stage_rec.py $OUT/rec/*.bin --ghz 1.75 | tee $OUT/analysis.txt
# the records, compacted (each CTA's used rows, times relative to its first record) for the results folder
python3 - "$OUT/rec" <<'PY'
import glob, struct, sys, numpy as np
for f in sorted(glob.glob(sys.argv[1] + "/*.bin")):
    with open(f, "rb") as h:
        c, u, w = struct.unpack("3i", h.read(12))
        a = np.frombuffer(h.read(), dtype=np.uint64).reshape(c, u, w).astype(np.int64)
    out = {}
    for i in range(c):
        n = int(np.count_nonzero(a[i, :, 2]))
        x = a[i, :n].copy()
        base = x[0, 0] if n else 0
        for j in range(5):
            x[:, j] = np.where(x[:, j] > 0, x[:, j] - base, -1)
        out[f"cta{i}"] = x
    np.savez_compressed(f[:-4] + ".npz", **out)
PY
rm -f $OUT/rec/*.bin $OUT/rec/p2k1.0.npz
ls -la $OUT/rec
el done
cd $OUT && rm -f */blocks.json && tar czf call5.tgz --exclude=call5.tgz * && find . -mindepth 1 -maxdepth 1 ! -name call5.tgz -exec rm -rf {} +
