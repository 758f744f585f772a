"""xstage Python bindings (ctypes; no build-time torch dependency)."""
