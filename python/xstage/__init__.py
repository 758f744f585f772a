"""xstage Python bindings (ctypes; no build-time torch dependency)."""

__version__ = "0.1.0"  # CMakeLists.txt's project(VERSION); the CPU test cpu.version holds the two equal
