#!/usr/bin/env bash
# Everything the next device session runs, built here from main in one go (a fresh checkout: ~12 min on 2 cores):
# build/s57pad.tar.xz (padding.sh), and session 56's build/s56fy.tar.xz and session 55's build/s55c2.tar.xz
# (results/moe/runs/s56/build-next.sh, which leaves main's sources as they are). Carry all three in every call.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
bash results/moe/runs/s56/build-next.sh
bash results/moe/runs/s57/build-padding.sh
ls -la build/s57pad.tar.xz build/s56fy.tar.xz build/s55c2.tar.xz
