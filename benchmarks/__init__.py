"""Measurements that are not tests: run each script as ``python -m benchmarks.<folder>.<script>``
from the repository root (README.md in this folder lists them)."""
