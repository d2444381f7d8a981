"""Real ranks under a real ``mpiexec`` (the mpich wheel's), 2 and 4 ranks on 2 cores.

Timing bounds are loose: 4 ranks share 2 cores.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import last_result, manifest_files, rank_pid, tiny_workload

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]


@pytest.fixture
def aborted_job_cleanup() -> Iterator[None]:
    """Remove the shared-memory segments an aborted MPICH job leaves in /dev/shm (2 MB each;
    MPI_Abort does not unlink them), so that the fault tests do not fill it up."""
    shm = Path("/dev/shm")
    before = set(shm.glob("mpich_shm_*"))
    yield
    for leftover in set(shm.glob("mpich_shm_*")) - before:
        leftover.unlink(missing_ok=True)


def mpi_cmd(ranks: int, *args: str) -> list[str]:
    assert MPIEXEC is not None
    return [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "dliobench", *args]


def mpirun(ranks: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mpi_cmd(ranks, *args), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_share_the_dataset_and_one_result(ranks: int, workdir: Path,
                                                write_workload: Callable[..., Path]) -> None:
    doc = tiny_workload(dataset={"num_files_train": 24},
                        reader={"sample_shuffle": "seed", "file_shuffle": "seed"},
                        train={"computation_time": 0.005, "allreduce_bytes": 1 << 20})
    proc = mpirun(ranks, "run", str(write_workload(doc)), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["ranks_count"] == ranks
    assert [r["rank"] for r in result["ranks"]] == list(range(ranks))
    m = result["metrics"]
    assert m["exactly_once"] is True
    # every rank takes the same steps: 24 samples / ranks, in batches of 2
    steps = (24 // ranks) // 2
    delivered = sum(e["delivered"] for r in result["ranks"] for e in r["epochs"])
    assert delivered == 2 * ranks * steps * 2
    assert delivered + m["undelivered_samples"] == 2 * 24
    assert m["comm_s"] > 0  # a real allreduce after each step
    assert result["nodes"][0]["ranks"] == list(range(ranks))
    assert result["launcher"] == "mpi" and result["provenance"]["mpi_library"]  # MPICH Version
    csv_rows = (workdir / "reports" / result["run_id"] / "timeline.csv").read_text().splitlines()
    assert {row.split(",")[0] for row in csv_rows[1:]} == {str(r) for r in range(ranks)}
    assert len(manifest_files(workdir / "data/tiny")) == 24
    assert len(list((workdir / "data/tiny/train").iterdir())) == 24


@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
def test_failing_rank_names_itself_and_ends_the_job(
        workdir: Path, write_workload: Callable[..., Path], aborted_job_cleanup: None) -> None:
    path = write_workload(tiny_workload(dataset={"num_files_train": 8}, train={"epochs": 1}))
    assert mpirun(2, "generate", str(path), "--no-progress").returncode == 0
    victim = workdir / "data/tiny/train/img_0000007.npz"  # read by rank 1 (no shuffle)
    raw = bytearray(victim.read_bytes())
    raw[3000] ^= 0xFF
    victim.write_bytes(bytes(raw))
    shm = set(Path("/dev/shm").glob("mpich_shm_*"))
    start = time.monotonic()
    proc = mpirun(2, "run", str(path), "--no-progress", "train.computation_time=0.05")
    assert proc.returncode != 0
    assert set(Path("/dev/shm").glob("mpich_shm_*")) <= shm  # the abort unlinked its segment
    assert time.monotonic() - start < 60
    assert "rank 1 of 2" in proc.stderr and "img_0000007.npz" in proc.stderr
    assert "Traceback" not in proc.stderr
    # the failing rank assembled the partial result from every rank's journal: its own
    # records, and rank 0's up to its last journaled second
    result = last_result(workdir / "reports")
    assert result["status"] == "partial" and result["ranks_launched"] == 2
    assert [r["rank"] for r in result["ranks"]] == [0, 1]
    assert "img_0000007.npz" in " ".join(result["errors"])
    ended = {e["rank"]: e for e in result["ranks_ended"]}
    assert ended[1]["ended"] == "error" and "img_0000007.npz" in ended[1]["why"]
    # rank 1's first batch came before the damaged sample: that step reaches the user
    rows = (workdir / "reports" / result["run_id"] / "timeline.csv").read_text().splitlines()
    steps = [dict(zip(rows[0].split(","), row.split(","), strict=True)) for row in rows[1:]]
    assert [(s["rank"], s["epoch"], s["step"], s["samples"]) for s in steps
            if s["rank"] == "1"] == [("1", "0", "0", "2")]
    assert int(steps[0]["bytes"]) > 0 and float(steps[0]["compute_s"]) >= 0.05


def _training_rank(workdir: Path, marker: str, rank: int) -> int:
    """The pid of ``rank`` of the job started with workload ``marker``, once it trains."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if (workdir / "reports").exists() and any((workdir / "reports").iterdir()):
            pid = rank_pid(marker, rank)
            if pid is not None:
                return pid
    raise AssertionError(f"rank {rank} never started training")


def _journaled(workdir: Path, rank: int) -> bool:
    """Whether ``rank`` of the one run in ``workdir/reports`` has journaled a step."""
    return any(b'{"k":"steps"' in path.read_bytes()
               for path in (workdir / "reports").glob(f"*/journal/rank-{rank:05d}.jsonl"))


def test_killed_rank_leaves_journals_that_recover_makes_a_result(
        workdir: Path, write_workload: Callable[..., Path], aborted_job_cleanup: None) -> None:
    """SIGKILL rank 1 of 3: MPICH's mpiexec SIGKILLs ranks 0 and 2 at once (nothing of
    theirs runs after), and the job ends within seconds; what every rank measured until its
    last second is in its journal, and `dliobench recover` makes it the partial result."""
    path = write_workload(tiny_workload(dataset={"num_files_train": 12},
                                        train={"epochs": 500, "computation_time": 0.01}),
                          "killme.yaml")
    proc = subprocess.Popen(mpi_cmd(3, "run", str(path), "--no-progress"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = _training_rank(workdir, "killme.yaml", 1)
        deadline = time.monotonic() + 60
        while not all(_journaled(workdir, r) for r in range(3)) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - killed < 10
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = next((workdir / "reports").iterdir())
    assert not (run_dir / "result.json").exists()  # nothing of the job ran after the kill
    assert f"dliobench recover {run_dir.relative_to(workdir)}" in err  # said at the start
    done = subprocess.run([sys.executable, "-m", "dliobench", "recover", str(run_dir)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "partial" and result["ranks_launched"] == 3
    assert [r["rank"] for r in result["ranks"]] == [0, 1, 2]
    assert all(r["steps"] > 0 for r in result["ranks"])  # counted steps of every rank
    ended = result["ranks_ended"]
    assert [(e["rank"], e["ended"]) for e in ended] == [(r, "no end record") for r in range(3)]
    assert all(e["steps"] > 0 and e["last_step"]["epoch"] >= 0 and "killed" in e["why"]
               for e in ended)
    rows = (run_dir / "timeline.csv").read_text().splitlines()[1:]
    assert {row.split(",")[0] for row in rows} == {"0", "1", "2"}
    assert f"status: partial; rank 0: {ended[0]['steps']} steps" in done.stdout


def test_all_ranks_checkpoint_shards(workdir: Path, write_workload: Callable[..., Path]) -> None:
    doc = tiny_workload(model={"name": "tiny", "model_size_bytes": 1_000_001},
                        workflow={"checkpoint": True},
                        checkpoint={"checkpoint_folder": "ckpt", "type": "all_ranks", "keep": True,
                                    "steps_between_checkpoints": 2},
                        train={"epochs": 1, "allreduce_bytes": 0})
    proc = mpirun(2, "run", str(write_workload(doc)), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    # 8 samples / 2 ranks / batch 2 = 2 steps: one checkpoint after step 2
    assert result["checkpoint"]["count"] == 1
    shards = sorted((workdir / "ckpt" / result["run_id"]).glob("*/rank-*.bin"))
    assert [s.stat().st_size for s in shards] == [500_001, 500_000]
    assert result["metrics"]["comm_s"] == 0


@pytest.mark.parametrize("name", ["unet3d", "bert", "cosmoflow"])
def test_workloads_under_four_ranks(name: str, workdir: Path) -> None:
    workload = Path(__file__).resolve().parents[2] / "workloads" / f"{name}.yaml"
    proc = mpirun(4, "run", str(workload), "--no-progress", "dataset.data_folder=data",
                  "dataset.num_files_train=8", "dataset.num_samples_per_file=2",
                  "dataset.record_length_bytes=16KiB", "dataset.record_length_bytes_stdev=0",
                  "dataset.record_length_bytes_resize=0", "dataset.num_subfolders_train=0",
                  "reader.batch_size=1", "reader.read_threads=1", "train.epochs=1",
                  "train.total_training_steps=-1", "train.computation_time=0.002",
                  "train.allreduce_bytes=64KiB",
                  "reader.data_loader=native")  # unet3d ships pytorch: 4 ranks' torch, +10 s
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["ranks_count"] == 4 and len(result["ranks"]) == 4
    assert result["metrics"]["exactly_once"] is True
    assert all(r["samples"] > 0 for r in result["ranks"])


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow (the tensorflow extra) is not installed")
def test_tensorflow_loader_under_two_ranks(workdir: Path) -> None:
    """ResNet-50 scaled down through tf.data on 2 ranks: TFRecordDataset reads each rank's
    files (2 at a time), every sample once, bytes counted, departures listed."""
    workload = Path(__file__).resolve().parents[2] / "workloads" / "resnet50.yaml"
    proc = mpirun(2, "run", str(workload), "--no-progress", "dataset.data_folder=data",
                  "dataset.num_files_train=8", "dataset.num_samples_per_file=6",
                  "dataset.record_length_bytes=16KiB", "dataset.record_length_bytes_resize=0",
                  "reader.batch_size=4", "reader.read_threads=2", "reader.data_loader=tensorflow",
                  "train.epochs=2", "train.computation_time=0.002")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["config"]["reader"]["data_loader"] == "tensorflow"
    assert result["ranks_count"] == 2 and result["metrics"]["exactly_once"] is True
    files = sorted((workdir / "data").rglob("*.tfrecord"))
    with (workdir / "reports" / result["run_id"] / "timeline.csv").open() as f:
        read = sum(int(row["bytes"]) for row in csv.DictReader(f))  # counted steps or not
    assert read == 2 * sum(f.stat().st_size for f in files)  # every file once an epoch
    assert any("TFRecordDataset opens the TFRecord files itself" in d
               for d in result["deviations"])
    assert "tensorflow" not in proc.stderr.lower()  # no substitution warning, no TF log lines


@pytest.mark.parametrize(("name", "shape"), [
    ("retinanet", ["dataset.num_files_train=16", "dataset.record_length_bytes=16KiB",
                   "reader.batch_size=2"]),
    ("dlrm", ["dataset.num_files_train=4", "dataset.num_samples_per_file=4096",
              "dataset.parquet.row_group_size=1024", "reader.batch_size=1024"]),
])
def test_v3_workloads_under_two_ranks(name: str, shape: list[str], workdir: Path) -> None:
    """MLPerf Storage v3.0's JPEG and Parquet workloads, scaled down, on 2 ranks."""
    workload = Path(__file__).resolve().parents[2] / "workloads" / f"{name}.yaml"
    proc = mpirun(2, "run", str(workload), "--no-progress", "dataset.data_folder=data",
                  *shape, "reader.read_threads=1", "reader.data_loader=native", "train.epochs=1",
                  "train.computation_time=0.001")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["ranks_count"] == 2 and result["metrics"]["exactly_once"] is True
    assert all(r["samples"] > 0 for r in result["ranks"])


def test_staging_under_two_ranks(workdir: Path, write_workload: Callable[..., Path]) -> None:
    local = workdir / "nvme"
    doc = tiny_workload(storage={"stage_to": str(local), "stage_scope": "node"},
                        train={"allreduce_bytes": 0})
    proc = mpirun(2, "run", str(write_workload(doc)), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["staging"]["files"] == 8  # the node's two ranks copied 4 files each
    assert result["metrics"]["exactly_once"] is True
    assert not list(local.iterdir())


def test_one_shared_file_read_by_all_ranks(workdir: Path,
                                           write_workload: Callable[..., Path]) -> None:
    doc = tiny_workload(dataset={"format": "hdf5", "num_files_train": 1,
                                 "num_samples_per_file": 24},
                        reader={"file_access": "shared", "sample_shuffle": "seed"},
                        train={"allreduce_bytes": 0})
    proc = mpirun(4, "run", str(write_workload(doc)), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["metrics"]["exactly_once"] is True
    assert all(r["samples"] > 0 for r in result["ranks"])


def test_killed_mpi_generation_resumes_only_the_missing_files(
        workdir: Path, write_workload: Callable[..., Path], aborted_job_cleanup: None) -> None:
    """mpiexec -n 2 generate, killed once both ranks have journaled files: the next generate
    keeps every journaled file (same inode) and writes exactly the others, to the bytes a
    fresh generation writes."""
    shape = ["dataset.num_files_train=6000", "dataset.record_length_bytes=4KiB"]
    path = write_workload(tiny_workload())
    folder = workdir / "data/killed"
    cmd = mpi_cmd(2, "generate", str(path), "--no-progress", f"dataset.data_folder={folder}",
                  *shape)
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    journals = [folder / f"dliobench-manifest/journal-000000/rank-0000{r}.bin" for r in (0, 1)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if all(j.exists() and j.stat().st_size for j in journals):
            break
        time.sleep(0.01)
    assert proc.poll() is None, "generation ended before it could be killed; enlarge it"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert all(j.exists() and j.stat().st_size for j in journals)
    time.sleep(0.2)
    held = manifest_files(folder)  # the journals folded in: what was durable when killed
    assert 0 < len(held) < 6000
    inodes = {name: (folder / "train" / name).stat().st_ino for name in held}
    done = mpirun(2, "generate", str(path), "--no-progress", f"dataset.data_folder={folder}",
                  *shape)
    assert done.returncode == 0, done.stderr
    assert f"wrote {6000 - len(held)} of 6000 files" in done.stdout
    assert {n: (folder / "train" / n).stat().st_ino for n in held} == inodes
    assert len(manifest_files(folder)) == 6000
    fresh = workdir / "data/fresh"  # one process (writer processes): faster than 1 rank
    subprocess.run([sys.executable, "-m", "dliobench", "generate", str(path), "--no-progress",
                    f"dataset.data_folder={fresh}", *shape], check=True, capture_output=True)
    for name in sorted(held)[:50] + sorted(set(manifest_files(folder)) - set(held))[:50]:
        assert (folder / "train" / name).read_bytes() == (fresh / "train" / name).read_bytes()


@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
def test_sigterm_to_an_mpi_job_writes_a_partial_result(
        workdir: Path, write_workload: Callable[..., Path], aborted_job_cleanup: None) -> None:
    """What Slurm does at a time limit: SIGTERM to every process of the job. The job ends
    with 143 and the measurements so far in a partial result, no traceback."""
    path = write_workload(tiny_workload(train={"epochs": 2000, "computation_time": 0.002}),
                          "term.yaml")
    proc = subprocess.Popen(mpi_cmd(2, "run", str(path), "--no-progress"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _training_rank(workdir, "term.yaml", 1)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err
    assert "terminated" in err and "Traceback" not in err
    result = json.loads(next((workdir / "reports").glob("*/result.json")).read_text())
    assert result["status"] == "partial" and result["metrics"]["steps"] > 0
    # rank 0 waited for rank 1's end record, then assembled both ranks' journals
    assert [(e["rank"], e["ended"]) for e in result["ranks_ended"]] == [
        (0, "terminated"), (1, "terminated")]
    assert "(status: partial)" in err


def test_a_stopped_rank_ends_a_generation_and_the_files_written_stay_recorded(
        workdir: Path, write_workload: Callable[..., Path], aborted_job_cleanup: None) -> None:
    """SIGSTOP rank 1 of a 2-rank generation: rank 0 writes its share, waits for rank 1 for
    the stall timeout, ends the job saying so; the next generate writes only what is missing."""
    # 10,000 files a rank: its first journal record comes after 1,000 of them, and small
    # files are written at ~20,000/s, so the rest leave time to stop it (2,000 a rank did not
    # under a loaded full run: rank 1 finished first)
    shape = ["dataset.num_files_train=20000", "dataset.record_length_bytes=4KiB",
             "train.stall_timeout_s=2"]
    path = write_workload(tiny_workload(), "genstall.yaml")
    folder = workdir / "data/stalled"
    proc = subprocess.Popen(mpi_cmd(2, "generate", str(path), "--no-progress",
                                    f"dataset.data_folder={folder}", *shape),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = None
    journal = folder / "dliobench-manifest/journal-000000/rank-00001.bin"
    try:
        deadline = time.monotonic() + 60
        while stopped is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
            if journal.exists() and journal.stat().st_size:  # rank 1 is writing (files
                stopped = rank_pid("genstall.yaml", 1)  # appear as they are created)
        assert stopped is not None, "generation ended before rank 1 could be stopped"
        os.kill(stopped, signal.SIGSTOP)
        _, err = proc.communicate(timeout=60)  # hang guard: the timeout is 2 s
        assert proc.returncode != 0
        assert "made no progress for" in err and "train.stall_timeout_s" in err, err
        assert "Traceback" not in err
    finally:
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.2)
    held = manifest_files(folder)
    assert 10000 <= len(held) < 20000, (err, sorted((folder / "dliobench-manifest").rglob("*")))
    done = subprocess.run([sys.executable, "-m", "dliobench", "generate", str(path),
                           "--no-progress", f"dataset.data_folder={folder}", *shape],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"wrote {20000 - len(held)} of 20000 files" in done.stdout


def test_a_stopped_rank_ends_the_job_after_the_stall_timeout(
        workdir: Path, write_workload: Callable[..., Path], aborted_job_cleanup: None) -> None:
    """SIGSTOP one rank (what a hung file system looks like to MPI): the other rank waits at
    its next collective, then ends the job with one sentence instead of hanging."""
    path = write_workload(tiny_workload(train={"epochs": 2000, "computation_time": 0.002,
                                               "stall_timeout_s": 2}), "stall.yaml")
    proc = subprocess.Popen(mpi_cmd(2, "run", str(path), "--no-progress"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = None
    try:
        stopped = _training_rank(workdir, "stall.yaml", 1)
        deadline = time.monotonic() + 60
        while not _journaled(workdir, 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(stopped, signal.SIGSTOP)
        _, err = proc.communicate(timeout=60)  # hang guard: the timeout is 2 s
        assert proc.returncode != 0
        assert "rank 0 of 2" in err and "made no progress for" in err, err
        assert "train.stall_timeout_s" in err and "Traceback" not in err
    finally:
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    # rank 0 assembled the partial result from both ranks' journals before ending the job
    result = last_result(workdir / "reports")
    assert result["status"] == "partial" and [r["rank"] for r in result["ranks"]] == [0, 1]
    ended = {e["rank"]: e for e in result["ranks_ended"]}
    assert ended[0]["ended"] == "stalled" and "made no progress" in ended[0]["why"]
    assert ended[1]["ended"] == "no end record" and ended[1]["steps"] > 0
    assert "(status: partial)" in err


@pytest.mark.parametrize(("args", "said"), [
    (["dataset.num_files_train=2", "reader.drop_last=false"], "3 ranks but only 2 sample(s)"),
    (["train.bogus=1"], "unknown key 'train.bogus'"),
    (["dataset.format=jpeg", "dataset.sample_checksums=true"], "jpeg is lossy"),
], ids=["ranks", "key", "format"])
def test_a_configuration_error_is_one_line_from_the_job(workdir: Path, args: list[str],
                                                         said: str) -> None:
    proc = mpirun(3, "run", *args, "dataset.data_folder=data", "--no-progress", timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert not (workdir / "data").exists()


def test_two_ranks_read_a_dlio_dataset_exactly_once(workdir: Path) -> None:
    from tests.dlio_written import write_dlio_dataset

    write_dlio_dataset(workdir / "dlio", files=12, dim=32, subfolders=3)
    proc = mpirun(2, "run", "workload=default", f"++workload.dataset.data_folder={workdir}/dlio",
                  "++workload.dataset.num_files_train=12",
                  "++workload.dataset.num_subfolders_train=3", "++workload.reader.batch_size=2",
                  "++workload.train.computation_time=0.001", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["ranks_count"] == 2 and result["metrics"]["exactly_once"] is True
    assert result["config"]["dataset"]["layout"] == "dlio"
    delivered = sum(e["delivered"] for r in result["ranks"] for e in r["epochs"])
    assert delivered == 12 * result["config"]["train"]["epochs"]  # 6 per rank and epoch
