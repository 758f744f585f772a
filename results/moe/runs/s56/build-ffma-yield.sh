#!/usr/bin/env bash
# Builds what ffma-yield.sh runs, from main: bench_moe of main (O, build/), bench_moe and test_moe_layer_gpu built with
# -DXSTAGE_MOE_FFMA_YIELD=0.5625 (Y, build-y/) and =1 (Z, build-z/): the post-build pass scripts/sass-ffma-yield.py on
# the fused kernels' static library; and the mainloop probe of main (O) beside a copy patched by the same pass at
# fraction 1 (the probe is no library: its own promotion runs are patched in the executable). Stripped into
# build/s56fy.tar.xz for the device's `carry` (~6 min on 2 cores for the two extra build folders).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
for v in y:0.5625 z:1; do
  d=build-${v%%:*}
  [ -f "$d/build.ninja" ] || cmake -S . -B "$d" -G Ninja -DCMAKE_BUILD_TYPE=Release -DXSTAGE_MOE_FFMA_YIELD="${v#*:}" > /dev/null
  ninja -C "$d" bench/moe/bench_moe tests/moe_gpu/test_moe_layer_gpu > /dev/null
done
ninja -C build bench/moe/bench_moe bench/moe/mainloop_probe > /dev/null
rm -rf build/pk && mkdir -p build/pk
cp build/bench/moe/bench_moe build/pk/bench_moe_o
cp build-y/bench/moe/bench_moe build/pk/bench_moe_y
cp build-z/bench/moe/bench_moe build/pk/bench_moe_z
cp build-z/tests/moe_gpu/test_moe_layer_gpu build/pk/test_moe_layer_gpu_z
cp build/bench/moe/mainloop_probe build/pk/mainloop_probe_o
cp build/bench/moe/mainloop_probe build/pk/mainloop_probe_z
python3 scripts/sass-ffma-yield.py build/pk/mainloop_probe_z --fraction 1 --require 8
strip build/pk/*
for b in bench_moe_o bench_moe_y bench_moe_z test_moe_layer_gpu_z mainloop_probe_o mainloop_probe_z; do
  python3 scripts/sass-ffma-yield.py "build/pk/$b" --check --fraction 1  # what is left to change: the record of each
done
tar cJf build/s56fy.tar.xz -C build/pk .
rm -rf build/pk
ls -la build/s56fy.tar.xz
