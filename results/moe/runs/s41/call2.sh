#!/usr/bin/env bash
# s41 call 2: call 1 again on the tidied emu step of scripts/moe-study.sh (bench_moe gets --emulated-tokens once).
CALL=call2 exec bash "$(dirname "$0")/call1.sh"
