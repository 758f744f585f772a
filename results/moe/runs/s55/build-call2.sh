#!/usr/bin/env bash
# Builds what call2.sh runs, from main with a configured build folder (cmake -S . -B build -G Ninja
# -DCMAKE_BUILD_TYPE=Release): bench_moe of main (O), bench_moe and test_moe_layer_gpu with lean-narrow-silu.patch (N),
# bench_moe with the patch and XSTAGE_MOE_SILU_TANH (T), and with XSTAGE_MOE_SCALE_AHEAD (S); stripped into
# build/s55c2.tar.xz for the device's `carry`.
# Leaves the patch applied (git apply -R results/moe/runs/s55/lean-narrow-silu.patch takes it back).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
K=src/kernels/moe/moe_kernel.cuh
git diff --quiet -- "$K" src/kernels/moe/moe_params.hpp || { echo "build-call2: $K or moe_params.hpp has changes" >&2; exit 1; }
rm -rf build/pk && mkdir -p build/pk
ninja -C build bench/moe/bench_moe > /dev/null
cp build/bench/moe/bench_moe build/pk/bench_moe_o
git apply results/moe/runs/s55/lean-narrow-silu.patch
variant() {  # bench_moe with macro $1 defined at the top of the kernel header, as build/pk/$2
  sed -i "0,/^#pragma once/s//&\n#define $1 1/" "$K"
  grep -q "^#define $1 1" "$K"
  ninja -C build bench/moe/bench_moe > /dev/null
  cp build/bench/moe/bench_moe "build/pk/$2"
  sed -i "/^#define $1 1\$/d" "$K"
}
variant XSTAGE_MOE_SILU_TANH bench_moe_t
variant XSTAGE_MOE_SCALE_AHEAD bench_moe_s
ninja -C build bench/moe/bench_moe tests/moe_gpu/test_moe_layer_gpu > /dev/null
cp build/bench/moe/bench_moe build/tests/moe_gpu/test_moe_layer_gpu build/pk/
strip build/pk/*
tar cJf build/s55c2.tar.xz -C build/pk .
rm -rf build/pk
ls -la build/s55c2.tar.xz
