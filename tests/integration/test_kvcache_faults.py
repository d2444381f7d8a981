"""What a KV-cache run leaves and says when its storage fills or it is stopped (issue 54), on
real file systems (a loop-mounted 200 MB ext4, a full tmpfs) and real processes: entries in
flight reserved (no ENOSPC on a tier whose capacity came from its free space), a killed
run's entries found and removed by ``recover`` and by the next run, SIGTERM saying where the
partial result is, a full tier named."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import last_result

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TIER = ["--gpu-mem-gb", "0", "--cpu-mem-gb", "0", "--generation-mode", "none"]
HANG_S = 60  # a hang guard for a process to reach its first storage write


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Path]:
    """A 200 MB ext4 file system on a loop device, mounted for the test (root only)."""
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("needs root and mkfs.ext4 to loop-mount a file system")
    image, point = tmp_path / "fs.img", tmp_path / "ext4"
    point.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(200 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    if subprocess.run(["mount", "-o", "loop", str(image), str(point)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot loop-mount here")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_entries_in_flight_are_reserved(ext4: Path, workdir: Path,
                                        run_cli: Callable[..., int]) -> None:
    """llama3.1-8b entries scaled to 7-155 MB, eight at once, on a 200 MB ext4 whose free
    space sets the tier's capacity: main dropped entries still being written (their bytes
    on disk, no longer counted) and ended in ENOSPC in 5 runs of 5 here (the issue's 70B run on
    6 GB, scaled); now every request is served and the tier left empty."""
    code = run_cli("kvcache", "--model", "llama3.1-8b", "--num-users", "8", "--max-requests",
                   "24", "--io-depth", "8", "--entry-scale", "0.06", *TIER,
                   "--cache-dir", str(ext4 / "tier"))
    assert code == 0
    kv = last_result(workdir / "reports")["kvcache"]
    assert kv["total_requests"] == 24 and kv["tiers"]["storage"]["write_bytes"] > 200e6
    assert not [p for p in (ext4 / "tier").iterdir()]


def test_a_full_tier_is_named(workdir: Path, run_cli: Callable[..., int],
                              mount: Callable[..., Path],
                              capsys: pytest.CaptureFixture[str]) -> None:
    """A tier on a full file system: one sentence naming the tier and the file (main: "No
    space left on device; check that path"), no folder left there."""
    disk = mount("tmpfs", "size=256k")
    filler = disk / "filler"
    with open(filler, "wb") as handle, pytest.raises(OSError):
        handle.write(b"\0" * (1 << 20))
    assert run_cli("kvcache", "--model", "tiny-1b", "--max-requests", "2", *TIER,
                   "--cache-dir", str(disk)) == 1
    err = capsys.readouterr().err
    assert f"the KV-cache storage tier {disk} cannot be written ({disk}/" in err, err
    assert "No space left on device; free space there" in err
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def _start(tier: Path, reports: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "dliobench", "kvcache", "--model", "tiny-1b", "--num-users",
            "2", "--duration", "60", "--entry-scale", "0.01", *TIER, "--cache-dir", str(tier),
            f"output.folder={reports}"]
    return subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_entries(tier: Path, proc: subprocess.Popen[bytes]) -> Path:
    """The run's folder in ``tier`` once it holds entries and a journaled figures record."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and proc.poll() is None:
        runs = list(tier.glob("*/rank0"))
        journal = runs and list(tier.parent.glob(f"reports/{runs[0].parent.name}/journal/*"))
        if runs and len(list(runs[0].iterdir())) > 2 and journal and \
                b'"k":"kvcache"' in journal[0].read_bytes():
            return runs[0].parent
        time.sleep(0.05)
    raise AssertionError(f"no entries written (exit code {proc.poll()})")


def test_sigterm_says_where_the_partial_result_is(workdir: Path) -> None:
    """main said "terminated (SIGTERM); generated files are kept" (a KV-cache run generates
    none, and deletes its entries) and not where its partial result went."""
    proc = _start(workdir / "tier", workdir / "reports")
    try:
        run = _wait_for_entries(workdir / "tier", proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 143
    said = err.decode().strip().splitlines()[-1]
    where = workdir / "reports" / run.name / "result.json"
    assert said == (f"dliobench: terminated (SIGTERM); what rank 0 served before it is in "
                    f"{where} (status: partial); the cache entries are deleted"), said
    assert last_result(workdir / "reports")["status"] == "partial"
    assert not list((workdir / "tier").iterdir())


def test_a_killed_runs_entries_are_removed_by_recover(workdir: Path,
                                                      run_cli: Callable[..., int],
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """A SIGKILLed run's entries stayed in its tier (main: found by nobody, the next run's
    automatic capacity shrank); ``recover`` of the run removes them and says so."""
    tier = workdir / "tier"
    proc = _start(tier, workdir / "reports")
    try:
        run = _wait_for_entries(tier, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    left = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    assert left > 0
    capsys.readouterr()
    assert run_cli("recover", str(workdir / "reports" / run.name)) == 0
    out = capsys.readouterr().out
    assert f"cache entries) that the killed KV-cache run {run.name} left in {tier}" in out, out
    assert not list(tier.iterdir())


def _holder(folder: Path, stay: bool) -> subprocess.Popen[bytes]:
    """A real process holding ``folder``'s live mark, then exiting (a killed run) or not."""
    code = ("import sys, time; from dliobench.run.kvcache.leftovers import hold; "
            f"hold({str(folder)!r}); print('held', flush=True); "
            f"time.sleep({HANG_S if stay else 0})")
    proc = subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    return proc


def test_the_next_run_removes_a_dead_runs_entries_not_a_live_ones(
        workdir: Path, run_cli: Callable[..., int], caplog: pytest.LogCaptureFixture) -> None:
    """Two runs' folders in the tier: one whose process is gone (removed, said, before the
    free space gives the capacity) and one whose process lives (kept)."""
    tier = workdir / "tier"
    for name in ("dead", "live"):
        (tier / name / "rank0").mkdir(parents=True)
        (tier / name / "rank0" / "u0_c0_t1").write_bytes(b"\0" * 300_000)
    dead, live = _holder(tier / "dead" / "rank0", False), _holder(tier / "live" / "rank0", True)
    try:
        dead.wait()
        caplog.set_level("WARNING", "dliobench")
        assert run_cli("kvcache", "--model", "tiny-1b", "--max-requests", "2", *TIER,
                       "--cache-dir", str(tier)) == 0
    finally:
        live.kill()
        live.wait()
    assert f"removed 300.0 kB (1 cache entries) that the killed KV-cache run dead left in " \
           f"{tier}" in caplog.text
    assert sorted(p.name for p in tier.iterdir()) == ["live"]
