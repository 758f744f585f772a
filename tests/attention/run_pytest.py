"""Runs a pytest file for CTest: exit 0 when some test passed and none failed, 77 (CTest's SKIP_RETURN_CODE)
when nothing ran or everything was skipped (no torch, no GPU, no pytest), 1 on any failure or error.
pytest itself exits 5 when it collects nothing, which CTest would report as a failure."""
import sys

try:
    import pytest
except ImportError:
    print("SKIPPED: pytest is not installed")
    sys.exit(77)


class Count:
    def __init__(self):
        self.passed = self.failed = 0

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed += 1
        elif report.passed and report.when == "call":
            self.passed += 1

    def pytest_collectreport(self, report):
        if report.failed:
            self.failed += 1


# Guarded: a test that starts processes by spawn (torch.multiprocessing.spawn, as tests/ulysses/test_torch_layout.py)
# re-imports this main module in every child, which without the guard ran pytest again there and failed
# ("start a new process before the current process has finished its bootstrapping phase").
if __name__ == "__main__":
    count = Count()
    rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[count])
    if count.failed or rc not in (0, 5):
        sys.exit(1)
    sys.exit(0 if count.passed else 77)
