#!/usr/bin/env bash
# Builds what padding.sh runs, from main (session 57's MoeLayerParams::zero_padding and bench_moe --compare-padding):
# bench_moe, mainloop_probe (--power) and test_moe_layer_gpu, stripped into build/s57pad.tar.xz for the device's `carry` (~4 min on 2 cores
# from a fresh build folder, seconds from a built one).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
[ -f build/build.ninja ] || { bash scripts/deps.sh > /dev/null; cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null; }
ninja -C build bench/moe/bench_moe bench/moe/mainloop_probe tests/moe_gpu/test_moe_layer_gpu > /dev/null
rm -rf build/pk57 && mkdir -p build/pk57
cp build/bench/moe/bench_moe build/bench/moe/mainloop_probe build/tests/moe_gpu/test_moe_layer_gpu build/pk57/
strip build/pk57/*
tar cJf build/s57pad.tar.xz -C build/pk57 .
rm -rf build/pk57
ls -la build/s57pad.tar.xz
