"""One figure, one value, in every output (issue 49, item 3): the table of figures
(``results.figures``) walked over a small matrix of runs (training with two loaders, a
checkpoint-only run, a KV-cache run, a two-rank run under mpiexec). Each figure a run has must
show the same value, within its printed rounding, in the console, ``result.json``,
``summary.json``, ``runs.csv`` and the report's runs table wherever the table says they hold
it; and every rate or share
the console prints (a number followed by %, MB/s, MiB/s, GB/s, GiB/s, samples/s, tokens/s or
requests/s) must be one of the table's figures of that run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dliobench.report.cells import RESULT_COLUMNS
from dliobench.results.figures import FIGURES, Figure, Output, family_of, markdown
from dliobench.results.storage_reads import read_origin
from tests.conftest import tiny_workload

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "workloads"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent))
UNITS = r"(?:%|MB/s|MiB/s|GB/s|GiB/s|samples/s|tokens/s|requests/s)"
PRINTED = re.compile(r"(?<![\w.,])(\d[\d,]*\.\d+) (" + UNITS + r")(?!\w)")


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A console wide enough that no figure is wrapped across lines."""
    monkeypatch.setenv("COLUMNS", "400")
    yield


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _runs(reports: Path) -> list[Path]:
    return sorted(p for p in reports.iterdir() if (p / "result.json").exists())


def _stored(out: Output, run: Path, csv: pd.DataFrame, result: dict[str, Any]) -> Any:
    if out.file == "runs.csv":
        row = csv.loc[csv["run_id"] == result["run_id"]]
        return None if row.empty or out.path not in row else row.iloc[0][out.path]
    return _get(json.loads((run / out.file).read_text()), out.path)


def _same(fig: Figure, value: float, stored: Any, per_unit: float) -> bool:
    """Equal within the figure's printed rounding (half a unit of its last digit)."""
    return abs(float(stored) / per_unit - value) <= 0.5 * 10 ** -fig.decimals + 1e-9 * abs(value)


def check_run(run: Path, console: str, csv: pd.DataFrame, html: str) -> set[str]:
    """Assert the run's figures agree across its outputs; the names of the figures it has."""
    result = json.loads((run / "result.json").read_text())
    flat = " ".join(console.split())
    had = set()
    for fig in FIGURES:
        value = fig.value(result)
        if value is None:
            continue
        had.add(fig.name)
        if fig.console:
            assert fig.text(result) in flat, f"{fig.name}: {fig.text(result)} not printed"
        for out in fig.outputs:
            stored = _stored(out, run, csv, result)
            assert stored is not None and not pd.isna(stored), f"{fig.name} not in {out}"
            assert _same(fig, value, stored, out.per_unit), (fig.name, out, value, stored)
    origin = read_origin(result)  # the one page-cache rule, printed alike everywhere
    row = csv.loc[csv["run_id"] == result["run_id"]].iloc[0]
    assert bool(row["page_cache_possible"]) is bool(origin.page_cache_possible)
    assert (row["reads_from_storage"] if isinstance(row["reads_from_storage"], str)
            else "") == origin.words()
    if origin.words():
        assert f"reads from storage │ {origin.words()}".split("│")[1].strip() in flat
    summary = json.loads((run / "summary.json").read_text())
    if "honesty" in result and family_of(result) == "training":
        assert result["honesty"]["page_cache_possible"] is origin.page_cache_possible
        assert summary["dliobench"]["page_cache_possible"] is origin.page_cache_possible
    for fig in FIGURES:  # the report's runs table prints runs.csv's figures alike
        if fig.value(result) is not None and any(
                o.file == "runs.csv" and o.path in RESULT_COLUMNS for o in fig.outputs):
            assert fig.text(result) in html, f"{fig.name}: {fig.text(result)} not in the report"
    texts = {fig.text(result) for fig in FIGURES if fig.value(result) is not None}
    for number, unit in PRINTED.findall(flat):
        assert f"{number} {unit}" in texts, (
            f"the console prints {number} {unit}, which no figure of the table accounts for")
    return had


def test_every_output_prints_each_figure_alike(
        workdir: Path, run_cli: Callable[..., int], write_workload: Callable[..., Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    consoles: dict[str, str] = {}
    reports = workdir / "reports"

    def run(*argv: str) -> None:
        before = set(_runs(reports)) if reports.exists() else set()
        assert run_cli(*argv) == 0
        (new,) = set(_runs(reports)) - before
        consoles[new.name] = capsys.readouterr().out

    tiny = write_workload(tiny_workload(train={"epochs": 2, "computation_time": 0.002}))
    run("run", str(tiny), "--no-progress")
    run("run", str(tiny), "reader.data_loader=pytorch", "reader.read_threads=1",
        "--no-progress")
    run("run", str(WORKLOADS / "llama3_8b.yaml"), "checkpoint.scale=0.0001",
        "checkpoint.time_between_checkpoints=0", "checkpoint.checkpoint_folder=ckpt",
        "checkpoint.num_checkpoints_write=1", "checkpoint.num_checkpoints_read=1",
        "--no-progress")
    run("kvcache", str(WORKLOADS / "kvcache_8b_200u.yaml"), "--max-requests", "12",
        "--entry-scale", "0.002", "--cache-dir", str(workdir / "tier"))
    if MPIEXEC:
        before = set(_runs(reports))
        done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "dliobench", "run",
                               str(tiny), "--no-progress"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "COLUMNS": "400"})
        assert done.returncode == 0, done.stderr
        (new,) = set(_runs(reports)) - before
        consoles[new.name] = done.stdout
    assert run_cli("report", str(reports), "--out", str(workdir / "report")) == 0
    csv = pd.read_csv(workdir / "report" / "runs.csv")
    html = (workdir / "report" / "report.html").read_text()
    seen: set[str] = set()
    for run_dir in _runs(reports):
        seen |= check_run(run_dir, consoles[run_dir.name], csv, html)
    # the matrix reaches the table's families: training, checkpoints, DLIO's, KV cache
    assert {"au", "read_MB_per_s", "train_io_mean_MB_per_second", "ckpt_write_aggregate_GB_per_s",
            "save_checkpoint_io_mean_GB_per_second", "kv_tokens_per_s"} <= seen


def test_the_documented_table_is_the_table() -> None:
    docs = (ROOT / "docs" / "results.md").read_text()
    assert markdown() in docs, "paste results.figures.markdown() into docs/results.md"
