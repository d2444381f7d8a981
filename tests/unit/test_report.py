"""`dliobench report` and `--trace`: the files' contents against the runs' own result files."""

from __future__ import annotations

import base64
import csv
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from dliobench.cli.main import main
from dliobench.report.factors import differing_keys, factors_of
from dliobench.report.runs import counted_steps
from tests.conftest import tiny_workload


def _workload(root: Path) -> Path:
    doc = tiny_workload(dataset={"data_folder": str(root / "data")},
                        train={"computation_time": 0.002})
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(root: Path, *overrides: str) -> None:
    argv = ["run", str(_workload(root)), "--no-progress", "--output", str(root / "runs"),
            *overrides]
    assert main(argv) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real runs: the tiny workload, with 1 read thread, and with batch 4."""
    root = tmp_path_factory.mktemp("report")
    _run(root)
    _run(root, "reader.read_threads=1")
    _run(root, "reader.batch_size=4", "--trace")
    return root


def _results(root: Path) -> dict[str, dict[str, Any]]:
    docs = [json.loads(p.read_text()) for p in (root / "runs").glob("*/result.json")]
    return {d["run_id"]: d for d in docs}


def _report(root: Path, *args: str, out: str = "out") -> Path:
    assert main(["report", str(root / "runs"), "-o", str(root / out), *args]) == 0
    return root / out


@pytest.fixture(scope="module")
def report(runs: Path) -> Path:
    """``dliobench report`` of the three runs, made once: the tests below only read it."""
    return _report(runs, out="shared-report")


def test_csv_values_equal_the_results(runs: Path, report: Path) -> None:
    out = report
    results = _results(runs)
    with open(out / "runs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(r["run_id"] for r in rows) == sorted(results)
    for row in rows:
        res = results[row["run_id"]]
        m = res["metrics"]
        assert float(row["au"]) == pytest.approx(m["au"])
        assert float(row["au_min"]) == pytest.approx(m["au_min"])
        assert float(row["samples_per_s"]) == pytest.approx(m["samples_per_s"])
        assert float(row["mb_per_s"]) == pytest.approx(m["bytes_per_s"] / 1e6)
        assert float(row["wait_p50_ms"]) == pytest.approx(m["wait_p50_s"] * 1e3)
        assert float(row["wait_p99_ms"]) == pytest.approx(m["wait_p99_s"] * 1e3)
        assert int(row["ranks"]) == res["ranks_count"] == 1
        assert int(row["read_threads"]) == res["config"]["reader"]["read_threads"]
        assert int(row["batch"]) == res["config"]["reader"]["batch_size"]
        assert int(row["reader.batch_size"]) == res["config"]["reader"]["batch_size"]
        assert row["format"] == "npz" and row["loader"] == "native"
        assert (row["commit"] or None) == res["commit"]  # no commit outside a git checkout
        assert row["dliobench_version"] == res["dliobench_version"]
        assert row["hosts"] == res["machine"]["host"]
    differing = {c for c in rows[0] if "." in c}
    assert differing == {"reader.read_threads", "reader.batch_size"}  # not output.folder


def test_html_holds_every_run_and_its_images(runs: Path) -> None:
    out = _report(runs, "--timeline-run", sorted(_results(runs))[0])
    page = (out / "report.html").read_text()
    for run_id in _results(runs):
        assert run_id in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    pngs = sorted(out.glob("*.png"))
    assert {p.name for p in pngs} == {"comparison.png", "wait_cdf.png", "timeline.png"}
    assert sorted(base64.b64decode(i) for i in images) == sorted(p.read_bytes() for p in pngs)
    assert "http" not in page.split("<body>")[0] and "<script" not in page
    assert "Not drawn: no set of runs" in page  # one rank only: no scaling plot
    assert "read_threads" in page and " MB/s" in page and " %" in page and " ms" in page
    assert "page cache" in page


def test_html_opens_with_the_results(report: Path) -> None:
    """After the first section's answers, the runs table holds what each run achieved, the
    column the page-cache note points to among them (it used to sit past the right edge of
    one wide table), then the settings of each run, the settings that differ as a list."""
    page = (report / "report.html").read_text()
    first = page.index("<table")
    headers = re.findall(r"<th>([^<]*)</th>", page[first:page.index("</thead>", first)])
    assert headers == ["run", "workload", "AU", "AU floor", "verdict", "samples/s", "read",
                       "wait p99", "reads from storage"]
    assert page.index('id="answers"') < page.index('id="runs"') < page.index(
        'id="settings"') < page.index("Settings that differ") < page.index("<img")
    assert "<code>reader.read_threads</code>" in page and "common settings" not in page
    rows = re.findall(r"<tr>(.*?)</tr>", page[page.index("<tbody>"):page.index("</tbody>")])
    assert len(rows) == 3 and all("meets the floor" in r or "-limited" in r or "not applicable"
                                  in r or "below" in r for r in rows)


def test_html_notes_other_versions_and_machines(runs: Path, tmp_path: Path) -> None:
    for src in (runs / "runs").iterdir():
        shutil.copytree(src, tmp_path / "runs" / src.name)
    other = sorted((tmp_path / "runs").iterdir())[0] / "result.json"
    doc = json.loads(other.read_text())
    doc["machine"].update(host="elsewhere", hosts=["elsewhere"])
    doc["dliobench_version"] = "0.0.9"
    other.write_text(json.dumps(doc))
    page = (_report(tmp_path) / "report.html").read_text()
    assert "different dliobench versions: 0.0.9" in page
    assert "different machines: elsewhere" in page


def _trace_sums(trace: dict[str, Any]) -> tuple[dict[int, str], dict[int, float]]:
    names, sums = {}, defaultdict(float)
    for e in trace["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "X" and e["name"] in ("wait", "compute"):
            assert e["tid"] == 0 and e["dur"] > 0
            sums[e["pid"]] += e["dur"]
    return names, dict(sums)


def _check_trace(run_dir: Path, path: Path | None = None) -> dict[int, str]:
    trace = json.loads((path or run_dir / "trace.json").read_text())
    timeline = pd.read_csv(run_dir / "timeline.csv")
    names, sums = _trace_sums(trace)
    expect = timeline.groupby("rank")[["wait_s", "compute_s"]].sum().sum(axis=1) * 1e6
    assert sums == pytest.approx(expect.to_dict(), rel=1e-6)
    assert {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"} <= {
        "wait", "compute", "comm", "ckpt"}
    return names


def test_run_trace_has_one_process_per_rank(runs: Path) -> None:
    traced = [p for p in (runs / "runs").iterdir() if (p / "trace.json").exists()]
    assert len(traced) == 1  # only the run made with --trace
    host = json.loads((traced[0] / "result.json").read_text())["machine"]["host"]
    assert _check_trace(traced[0]) == {0: f"rank 0 ({host})"}


def test_report_trace_writes_traces_after_the_fact(runs: Path, tmp_path: Path) -> None:
    run_dir = next(p for p in sorted((runs / "runs").iterdir())
                   if not (p / "trace.json").exists())  # one made without --trace
    shutil.copytree(run_dir, tmp_path / run_dir.name)
    assert main(["report", "--trace", str(tmp_path / run_dir.name), "-o",
                 str(tmp_path / "out")]) == 0
    _check_trace(tmp_path / run_dir.name, tmp_path / "out/traces" / f"{run_dir.name}.trace.json")
    assert not (tmp_path / run_dir.name / "trace.json").exists()  # -o: the run is untouched
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Not drawn: there is only one run" in page


def test_unknown_timeline_run_and_empty_folder_are_errors(runs: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert main(["report", str(runs / "runs"), "-o", str(tmp_path / "o"),
                 "--timeline-run", "nope"]) == 2
    assert "--timeline-run nope: no such run" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "no result.json" in capsys.readouterr().err


def test_differing_keys_group_keys_that_change_together() -> None:
    settings = [{"a.x": 1, "a.y": "p", "b": 4, "c": 0},
                {"a.x": 2, "a.y": "q", "b": 4, "c": 0},
                {"a.x": 1, "a.y": "p", "b": 8, "c": 0, "d": 1}]
    keys = differing_keys(settings)
    assert keys == ["a.x", "a.y", "b", "d"]
    assert factors_of(settings, keys) == [("a.x", "a.y"), ("b", "d")]


def test_counted_steps_skip_the_first_and_last_of_each_epoch_per_rank() -> None:
    rows = [{"rank": r, "epoch": e, "step": s, "wait_s": float(s)}
            for r in (0, 1) for e in (0, 1) for s in range(4)]
    counted = counted_steps(pd.DataFrame(rows), 1, 1)
    assert len(counted) == 2 * 2 * 2
    assert set(counted["step"]) == {1, 2}


def test_a_key_implied_by_another_joins_its_setting() -> None:
    from dliobench.report.factors import factors_of

    runs = [{"files": 256, "spf": 1, "access": "multi", "threads": 1},
            {"files": 16, "spf": 16, "access": "multi", "threads": 1},
            {"files": 1, "spf": 256, "access": "shared", "threads": 1},
            {"files": 256, "spf": 1, "access": "multi", "threads": 4}]
    factors = factors_of(runs, ["access", "files", "spf", "threads"])
    assert sorted(map(sorted, factors)) == [["access", "files", "spf"], ["threads"]]


def test_a_data_folder_per_run_does_not_hide_the_tier() -> None:
    runs = [{"dataset.num_files_train": files, "storage.storage_root": tier,
             "dataset.data_folder": f"{tier}/layout-{files}"}
            for tier in ("/local", "/slow") for files in (1, 16, 256)]
    keys = differing_keys(runs)
    assert factors_of(runs, keys) == [("dataset.num_files_train",), ("storage.storage_root",)]
    only_folders = [{"dataset.data_folder": "/a", "x": 1}, {"dataset.data_folder": "/b", "x": 1}]
    assert factors_of(only_folders, ["dataset.data_folder"]) == [("dataset.data_folder",)]
    labels = run_set_labels(runs)
    assert labels[4] == "num_files_train=16; storage_root=/slow"
    assert len(set(labels)) == 6 and not any("[" in label for label in labels)


def run_set_labels(settings: list[dict[str, object]]) -> list[str]:
    """Labels the report would give runs with these settings."""
    from dliobench.report.labels import run_labels

    rows = [{"run_id": f"r{i}", "ranks": 1, **s} for i, s in enumerate(settings)]
    frame = pd.DataFrame(rows)
    return run_labels(frame, factors_of(settings, differing_keys(settings)))


def test_two_settings_draw_a_group_per_value_and_a_bar_per_other_value(
        tmp_path: Path) -> None:
    """A 3 x 2 comparison (batch x threads) groups by the setting with three values and names
    each bar by the sweep label's part that matches the other setting."""
    from dliobench.report.plots.comparison import _groups_and_bars
    from dliobench.report.runs import load_runs
    from dliobench.report.tables import run_set

    for batch in (4, 2, 8):
        for threads in (2, 1):
            _run(tmp_path, f"reader.batch_size={batch}", f"reader.read_threads={threads}",
                 f"output.label=batch of {batch} / {threads} threads")
    rs = run_set(load_runs([tmp_path / "runs"]))
    groups, bars = _groups_and_bars(rs)
    pairs = {(g, b) for g, b in zip(groups, bars, strict=True)}
    assert pairs == {(f"batch of {b}", f"{t} threads") for b in (4, 2, 8) for t in (2, 1)}
    out = _report(tmp_path)
    html = (out / "report.html").read_text()
    assert "A group of bars per value of the setting with the most values" in html
    assert (out / "comparison.png").stat().st_size > 10_000


def test_runs_without_compute_show_no_au_and_settings_name_values_by_label(
        tmp_path: Path) -> None:
    """At compute 0 AU means nothing: the table says n/a, not 0.0 %; each differing value is
    named by the sweep label's part for it, not by a list of every run."""
    for threads in (1, 2):
        _run(tmp_path, "train.computation_time=0", f"reader.read_threads={threads}",
             f"output.label=tiny / {threads} threads")
    html = (_report(tmp_path) / "report.html").read_text()
    first = html[html.index("<tbody>"):html.index("</tbody>")]
    rows = re.findall(r"<tr>(.*?)</tr>", first)
    assert len(rows) == 2
    assert all(re.findall(r"<td[^>]*>(.*?)</td>", r)[2] == "n/a" for r in rows)  # AU
    assert "<b>1</b> (1 threads)" in html and "<b>2</b> (2 threads)" in html
