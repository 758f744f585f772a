"""Shared preamble of the Python GPU tests: skips the calling test module unless torch sees an sm_90 GPU,
and puts the repository's python/ folder first on sys.path. Usage, at the top of a test module:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    from torch_sm90 import torch  # noqa: E402  (skips the module without torch or an sm_90 GPU)
"""
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip(f"needs an sm_90 GPU, found {torch.cuda.get_device_name()}", allow_module_level=True)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
