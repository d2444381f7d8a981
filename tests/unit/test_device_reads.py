"""Device-read accounting: what the kernel fetched from the device for a rank's process tree."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dliobench.results.assemble import device_reads
from dliobench.results.measured import RankTrace
from dliobench.results.timeline import Timeline
from dliobench.storage import devreads
from dliobench.storage.devreads import DeviceMeter, DeviceReads, counter_for


def _evicted(path: Path, nbytes: int) -> Path:
    with open(path, "wb") as handle:
        handle.write(os.urandom(nbytes))
        handle.flush()
        os.fsync(handle.fileno())
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    return path


def test_a_child_process_reads_count_and_cached_reads_do_not(tmp_path: Path) -> None:
    """A worker process's reads count (it ends inside the window: its parent inherits its
    counter); the same file read again, now cached, adds nothing."""
    data = _evicted(tmp_path / "f", 4 << 20)
    meter = DeviceMeter(str(tmp_path))
    if meter.kind != "device":
        pytest.skip("the tmp folder has no block device: the counter cannot see its reads")
    meter.open()
    subprocess.run(["cat", str(data)], stdout=subprocess.DEVNULL, check=True)
    meter.close()
    assert meter.total >= 4 << 20
    meter.open()
    assert len(data.read_bytes()) == 4 << 20
    meter.close()
    assert meter.total < (4 << 20) + (1 << 20)
    assert meter.result().nbytes == meter.total


def test_memory_and_network_folders() -> None:
    assert counter_for("/dev/shm/x")[0] == "memory"
    assert DeviceMeter("/dev/shm/x").result().nbytes == 0
    kind, why = counter_for("s3://bucket/data")
    assert kind == "unknown" and "network" in why
    assert DeviceMeter("s3://bucket/data").result().nbytes is None


def _trace(rank: int, reads: DeviceReads | None) -> RankTrace:
    trace = RankTrace(rank, "h", Timeline(rank))
    trace.device_reads = reads
    return trace


def test_ranks_are_summed_once_per_process_and_unknown_stays_unknown() -> None:
    """MPI ranks (one process each) add up; ranks that are threads of one process measured
    the same counter, so it counts once; one rank that cannot see its reads makes it unknown."""
    mpi = [_trace(0, DeviceReads(100, "c", 1)), _trace(1, DeviceReads(50, "c", 2))]
    assert device_reads(mpi, 300) == {"device_read_bytes": 150, "device_read_share": 0.5,
                                      "device_read_counter": "c"}
    threads = [_trace(0, DeviceReads(100, "c", 1)), _trace(1, DeviceReads(90, "c", 1))]
    assert device_reads(threads, 100)["device_read_bytes"] == 100
    unseen = [_trace(0, DeviceReads(100, "c", 1)), _trace(1, DeviceReads(None, "nfs", 2))]
    out = device_reads(unseen, 100)
    assert out["device_read_bytes"] is None and out["device_read_counter"] == "unknown: nfs"
    assert device_reads([_trace(0, None)], 100)["device_read_bytes"] is None


def test_descendants_from_children_files_match_a_scan_of_proc() -> None:
    """The meter finds a rank's workers (and theirs) through /proc's children files, as the
    scan of every process's parent it replaced (1.3 ms at each epoch's edges) found them."""
    shell = subprocess.Popen(["sh", "-c", "(sleep 30; true) & sleep 30 & wait"],
                             start_new_session=True)  # a child with a child of its own, too
    try:
        deadline = time.monotonic() + 10
        while len(devreads._descendants_by_scan(shell.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        found = sorted(devreads._descendants(shell.pid))
        assert len(found) == 3 and found == sorted(devreads._descendants_by_scan(shell.pid))
    finally:
        os.killpg(shell.pid, signal.SIGKILL)  # the group the test started, and nothing else
        shell.wait()
