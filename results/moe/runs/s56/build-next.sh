#!/usr/bin/env bash
# Everything the next device session runs, built here in one go from main (a fresh checkout: ~10 min on 2 cores):
# build/s56fy.tar.xz (ffma-yield.sh) and build/s55c2.tar.xz (results/moe/runs/s55/call2.sh). Session 55's build applies
# lean-narrow-silu.patch to the kernel and leaves it applied; this script takes it back, so main's sources are as
# they were. Carry both tarballs (~8 MB each) in every call: `carry: ["build/s56fy.tar.xz", "build/s55c2.tar.xz"]`.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
[ -f build/build.ninja ] || { bash scripts/deps.sh > /dev/null; cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null; }
bash results/moe/runs/s56/build-ffma-yield.sh
bash results/moe/runs/s55/build-call2.sh
git apply -R results/moe/runs/s55/lean-narrow-silu.patch
ninja -C build > /dev/null  # the build folder back on main's sources
git diff --quiet -- src/kernels/moe || { echo "build-next: src/kernels/moe differs from HEAD" >&2; exit 1; }
ls -la build/s56fy.tar.xz build/s55c2.tar.xz
