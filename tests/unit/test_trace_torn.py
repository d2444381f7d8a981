"""Traces cut short (issue 54): a strace file whose last line was cut mid-call, and a DFTracer
file whose last event was cut, are read up to the cut and the cut is said, on real captures
(tests/data/trace/) cut as a killed tracer or a short copy leaves them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.report.trace import dftracer
from dliobench.report.trace.load import load

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def _cut_strace(tmp_path: Path, keep: int, cut_at: str) -> Path:
    """worker.strace's first ``keep`` lines, then the next one up to ``cut_at`` (no newline)."""
    lines = (DATA / "worker.strace").read_text().splitlines(keepends=True)
    torn = lines[keep]
    path = tmp_path / "torn.strace"
    path.write_text("".join(lines[:keep]) + torn[: torn.index(cut_at) + len(cut_at)])
    return path


def test_a_torn_strace_line_is_left_out_and_said(
        tmp_path: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    """Line 31 returns the file's last 1,936 bytes; cut inside its number (``= 19``), it
    would make the record 8,083 bytes: it is left out (8,064 from the reads before it), and
    the summary and the workload file say the trace was cut."""
    torn = _cut_strace(tmp_path, 30, ") = 19")
    job = tmp_path / "job.yaml"
    assert run_cli("workload", "from-trace", str(torn), "-o", str(job), "--batch-size", "1") == 0
    out = capsys.readouterr().out
    assert "record_length_bytes = 8064" in out
    assert f"the last line of {torn} is cut mid-call" in out
    assert "# Note: the last line of" in job.read_text()
    whole = load(DATA / "worker.strace")
    assert not any("cut mid-call" in n for n in whole.notes)  # the whole file: no note


def test_a_torn_dftracer_line_is_said(tmp_path: Path) -> None:
    """A .pfw whose last event line was cut: the events before it are read, the cut said."""
    text = (DATA / "np_load.pfw").read_text()
    torn = tmp_path / "torn.pfw"
    torn.write_text(text[: len(text) - 200])
    got = dftracer.read(torn)
    assert len(got.reads()) == len(dftracer.read(DATA / "np_load.pfw").reads())
    assert got.notes == [f"1 event line(s) of {torn} are not whole JSON (cut short: its "
                         "process was killed while writing, or the file was truncated); they "
                         "were left out"]
