"""A run says how many of its counted bytes came from the storage device, and a run whose
bytes came from this host's page cache is never storage-limited."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result, tiny_workload

PINNED = "metric.client_ceiling=100000"  # far above the demand: the ceiling never decides
# the device's rule alone (a busy host's: test_client_limits.py)
CPU_OFF = "metric.client_cpu_busy=off"


def test_a_page_cached_second_run_is_never_storage_limited(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    """The same wait-limited workload twice (32 MiB, no eviction during training): the first
    run reads the files generation wrote and evicted, from the device; the second finds every
    page cached. Its waits are the client's: it is client-limited, with ~0 device bytes."""
    path = write_workload(tiny_workload(dataset={"record_length_bytes": 4 << 20},
                                        reader={"read_threads": 0},
                                        train={"epochs": 1, "computation_time": 0.0005}))
    assert run_cli("run", str(path), "--no-progress", PINNED, CPU_OFF) == 0
    first = last_result(workdir / "reports")
    counted = first["metrics"]["bytes"]
    assert first["honesty"]["device_read_bytes"] >= 0.5 * counted, first["honesty"]
    assert first["verdict"]["limiter"] == "storage"  # its bytes came from the device
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress", PINNED, CPU_OFF, "--output",
                   str(workdir / "cached")) == 0
    second = last_result(workdir / "cached")
    honesty, verdict = second["honesty"], second["verdict"]
    assert honesty["device_read_bytes"] is not None
    assert honesty["device_read_bytes"] <= 0.05 * counted, honesty
    assert honesty["device_read_counter"].startswith("/proc/<pid>/io read_bytes")
    assert verdict["meets_floor"] is False and verdict["limiter"] == "client", verdict
    assert verdict["device_read_share"] == honesty["device_read_share"]
    out = capsys.readouterr().out
    assert "storage-limited" not in out and "client-limited" in out
    assert "came from the storage" in out and "read from the device" in out
