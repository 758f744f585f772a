#!/usr/bin/env bash
# The main job: install what is missing, build xstage (Release, into ./build), and run the X-Stage model
# on the embedded h200-nvlink4 preset: the design test for the paper's two kernels (MegaMoE combine
# bursts and FlashAttention fused with the Ulysses all-to-all), with the numbers that decide it.
# Model only: no GPU is needed or used.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${XSTAGE_BUILD_DIR:-build}
bash scripts/deps.sh
# Quiet when it works; on a failure the build's own output is printed (expect ~1.5 min for the CPU target on 2 cores).
log="$build.log"
mkdir -p "$(dirname "$log")"
if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" --target xstage -j "$(nproc)"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "main.sh: the build failed (output above, also in $log)" >&2
  exit 1
fi
x="$build/src/cli/xstage"
echo "== platform (embedded preset: our calibration on nvidia-h200-x2, results/calibration/)"
"$x" platform show h200-nvlink4
echo
echo "== design test, world size from the platform (P = 2)"
"$x" design paper --platform h200-nvlink4
echo
echo "== the same at the paper's world size P = 8 (an extrapolation: R and Q were measured with 2 GPUs)"
"$x" design paper --platform h200-nvlink4 -P 8 | sed -n '/^1)/,$p'
echo
echo "== model check against our calibration data (fit, then the prediction error with nothing refitted)"
"$x" fit results/calibration/calibration.csv
echo
echo "No GPU was used: every number above comes from the model and the recorded platform parameters."
