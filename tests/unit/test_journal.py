"""Per-rank journals of measurements (``results.journal``) and the result assembled from them
(``results.recover``): real training on a real dataset, real files."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset.prepare import prepare
from dliobench.results.assemble import build_result
from dliobench.results.hostcpu import HostCpu
from dliobench.results.journal import Journal, journal_path, read_journal
from dliobench.results.measured import RankTrace
from dliobench.results.recover import assemble, write_header
from dliobench.results.timeline import Timeline
from dliobench.run.facts import run_facts
from dliobench.run.loop import train
from dliobench.run.planning import resolve
from dliobench.storage.devreads import DeviceReads
from dliobench.storage.latency import LatencyLog
from tests.conftest import tiny_workload


def _trained(tmp_path: Path) -> tuple[Any, Any, Path, Any]:
    """One rank trained 3 epochs with a checkpoint each epoch, journaled in a run folder."""
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path / 'data'}", "dataset.num_files_train=8",
                         "dataset.record_length_bytes=4096", "reader.batch_size=2",
                         "train.epochs=3", "train.computation_time=0.001",
                         "workflow.checkpoint=true", "checkpoint.model_size=64KiB",
                         f"checkpoint.checkpoint_folder={tmp_path / 'ckpt'}"])
    world, comm = World.single(), LocalComm()
    ready = prepare(resolve(cfg, world, comm), world, comm, show_progress=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    facts = run_facts(cfg)
    write_header(run_dir, cfg, "run-1", "2026-01-01T00:00:00+00:00", ready.total_bytes,
                 {"launcher": "none"}, facts, 1)
    trace = train(ready.plan, world, comm, False, "run-1", run_dir)
    return cfg, ready, run_dir, (trace, facts)


def _plain(doc: Any) -> Any:
    return json.loads(json.dumps(doc))


def test_a_runs_journal_makes_the_result_its_traces_make(tmp_path: Path) -> None:
    """The result assembled from the journal alone is the one the in-memory trace makes:
    every step, epoch check, checkpoint and figure went through the journal."""
    cfg, ready, run_dir, (trace, facts) = _trained(tmp_path)
    recovered, timelines = assemble(run_dir)
    direct = build_result(cfg, "run-1", "complete", [trace], "2026-01-01T00:00:00+00:00",
                          recovered["finished_at"], ready.total_bytes,
                          {"launcher": "none", "ranks_launched": 1,
                           "ranks_ended": recovered["ranks_ended"]}, facts)
    assert recovered["status"] == "complete" and recovered["checkpoint"]["count"] == 3
    assert _plain(recovered) == _plain(direct)
    assert timelines[0].rows == trace.timeline.rows
    assert recovered["ranks_ended"] == [{
        "rank": 0, "host": trace.host, "steps": 12,
        "last_step": {"epoch": 2, "step": 3, "t_start_s": trace.timeline.rows[-1][2]},
        "last_record_at": recovered["ranks_ended"][0]["last_record_at"],
        "ended": "complete", "why": "training completed"}]


def test_a_torn_or_damaged_record_is_left_out(tmp_path: Path) -> None:
    """A rank killed while appending leaves half a line: it fails its check and is left out,
    as is a record damaged in place; every whole record before and after is read."""
    _, _, run_dir, (trace, _) = _trained(tmp_path)
    path = journal_path(run_dir, 0)
    lines = path.read_bytes().splitlines(keepends=True)
    steps = [i for i, line in enumerate(lines) if b'"k":"steps"' in line]
    lost = len(json.loads(lines[steps[0]][9:])["rows"])
    damaged = bytearray(lines[steps[0]])
    damaged[-3] ^= 0x01  # a bit flipped inside the first steps record
    lines[steps[0]] = bytes(damaged)
    path.write_bytes(b"".join(lines) + lines[steps[-1]][:40])  # and a torn last line
    back = read_journal(path)
    assert back.damaged == 2 and back.end is not None and back.end["how"] == "complete"
    assert back.trace.timeline.rows == trace.timeline.rows[lost:]
    assert [c.epoch for c in back.trace.checks] == [0, 1, 2]


def test_object_store_latencies_and_figures_survive_the_journal(tmp_path: Path) -> None:
    """A rank's request latencies journaled epoch by epoch (only the new ones each time) add
    up to the rank's whole log when read back; the last figures win."""
    trace = RankTrace(3, "node7", Timeline(3))
    journal = Journal(journal_path(tmp_path, 3), trace, every_s=60)
    whole = LatencyLog()
    for epoch in range(3):
        part = LatencyLog()
        for i in range(50):
            part.record(1e-4 * (i + epoch), 1e-3 * (i + 1))
        whole.merge(part)
        journal.progress((1.0 + epoch, 2.0 + epoch, 0.5), part,
                         DeviceReads(4096 * epoch, "device", 42), [f"deviation {epoch}"],
                         HostCpu(90 * epoch, 100 * epoch, (0, 1)))
    journal.close("complete")
    back = read_journal(journal_path(tmp_path, 3))
    assert back.trace.requests is not None
    assert back.trace.requests.summary() == whole.summary()
    t = back.trace
    assert (t.host, t.cpu_s, t.cpu_wall_s, t.cpu_cores) == ("node7", 3.0, 4.0, 0.5)
    assert t.device_reads == DeviceReads(8192, "device", 42)
    assert t.host_cpu == HostCpu(180, 200, (0, 1))  # the host's CPUs, counted windows (1.12)
    assert t.deviations == ["deviation 2"] and back.end is not None and back.damaged == 0


def test_a_killed_run_is_recovered_from_its_journal(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    """SIGKILL a one-process run once it journaled steps: nothing of it runs after, its
    journal holds what it measured until its last second, `dliobench recover` makes the
    partial result."""
    path = write_workload(tiny_workload(train={"epochs": 500, "computation_time": 0.005}),
                          "killed.yaml")
    proc = subprocess.Popen([sys.executable, "-m", "dliobench", "run", str(path),
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        journals = workdir / "reports"
        while time.monotonic() < deadline and not any(
                b'"k":"steps"' in p.read_bytes() for p in journals.glob("*/journal/rank-*")):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = next(journals.iterdir())
    assert not (run_dir / "result.json").exists()
    done = subprocess.run([sys.executable, "-m", "dliobench", "recover", str(run_dir)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "partial" and result["metrics"]["steps"] > 0
    assert result["ranks_ended"][0]["ended"] == "no end record"
    assert f"result: {run_dir}/result.json (status: partial; rank 0:" in done.stdout


def test_report_points_a_killed_runs_folder_to_recover(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    """`dliobench report` on a folder a killed job left (journals, no result.json) names the
    command that assembles its result, in one sentence."""
    run = workdir / "reports" / "run"
    (run / "journal").mkdir(parents=True)
    (run / "journal" / "run.json").write_text("{}")
    assert run_cli("report", str(run), "-o", str(workdir / "out")) != 0
    err = capsys.readouterr().err
    assert f"`dliobench recover {run}` assembles its partial result" in err
    assert len(err.strip().splitlines()) == 1


def test_recover_refuses_a_complete_result(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str],
        write_workload: Callable[..., Path]) -> None:
    assert run_cli("run", str(write_workload(tiny_workload())), "--no-progress") == 0
    run = next((workdir / "reports").iterdir())
    assert not (run / "journal").exists()  # a complete result holds every record
    assert run_cli("recover", str(run)) != 0
    assert "holds a complete result already" in capsys.readouterr().err


@pytest.mark.parametrize(("make", "said"), [
    (lambda run: run.mkdir(), "no journal/run.json in it"),
    (lambda run: (run / "journal").mkdir(parents=True)
     or (run / "journal/run.json").write_text("{"), "cannot be read"),
], ids=["empty", "damaged-header"])
def test_recover_says_why_a_folder_cannot_be_recovered(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str],
        make: Callable[[Path], Any], said: str) -> None:
    run = workdir / "reports" / "run"
    run.parent.mkdir()
    make(run)
    assert run_cli("recover", str(run)) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
