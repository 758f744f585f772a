#!/usr/bin/env bash
# Installs what xstage needs when it is missing: Debian packages (compiler, CMake, Ninja, GoogleTest,
# nlohmann-json, CLI11, python3-matplotlib for the calibration plots) and the PyPI package nvidia-cutlass
# (CuTe/CUTLASS headers).
# The CUDA toolkit (nvcc, NCCL 2.28 headers and library) must already be installed.
set -euo pipefail
need=()
have_hdr() { [ -e "/usr/include/$1" ]; }
command -v cmake >/dev/null   || need+=(cmake)
command -v g++ >/dev/null     || need+=(g++)
command -v ninja >/dev/null   || need+=(ninja-build)
have_hdr gtest/gtest.h        || need+=(libgtest-dev)
have_hdr nlohmann/json.hpp    || need+=(nlohmann-json3-dev)
have_hdr CLI/CLI.hpp          || need+=(libcli11-dev)
# The calibration plots (xstage calibrate, scripts/plot_calibration.py): Debian's matplotlib for /usr/bin/python3.
{ /usr/bin/python3 -c "import matplotlib" 2>/dev/null || python3 -c "import matplotlib" 2>/dev/null; } || need+=(python3-matplotlib)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "deps: missing ${need[*]} (install them with apt-get as root)" >&2
    exit 1
  fi
fi
if ! python3 -c "import cutlass_library" 2>/dev/null; then
  echo "deps: installing nvidia-cutlass (CuTe/CUTLASS headers) from PyPI"
  python3 -m pip install -q --disable-pip-version-check nvidia-cutlass==4.2.0.0
fi
