"""Sweeps and the max-accelerator search, for real: each point is a dliobench run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dliobench.base.errors import ConfigError
from dliobench.report.sweep import load_sweep, points, with_overrides
from tests.conftest import tiny_workload

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_shipped_sweep_files_parse(name: str) -> None:
    spec = load_sweep(CONFIGS / name)
    assert spec.workload.exists()
    assert points(spec)


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_shipped_sweep_files_load_every_point(name: str, run_cli: Callable[..., int],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run checks every point's settings (a combined axis naming the workload too) and
    takes overrides after the options, as `run` does."""
    spec = load_sweep(CONFIGS / name)
    code = run_cli("sweep", str(CONFIGS / name), "--dry-run", "train.epochs=1")
    out = capsys.readouterr().out
    assert f"{len(points(spec))} point(s)" in out and "train.epochs=1" in out
    # a point whose loader's extra is not installed here (DALI) is said, and the exit is 1
    lacking = "cannot run here" in out
    assert code == (1 if lacking else 0)
    assert ("all points load; nothing was run" in out) is not lacking


def test_dry_run_names_the_points_whose_loader_does_not_import(tmp_path: Path) -> None:
    """DALI hidden from a real `dliobench sweep --dry-run` (a package named ``nvidia`` first
    on its path, without ``dali``): the DALI point cannot run here and the dry run says so,
    with the install command, instead of 'all points load'."""
    shadow = tmp_path / "shadow" / "nvidia"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"workload": str(CONFIGS.parent / "workloads/default.yaml"),
                                     "axes": {"reader.data_loader": ["native", "dali"]}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(shadow.parent), str(CONFIGS.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "dliobench", "sweep", str(sweep), "--dry-run"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    dali = next(line for line in lines if "r1-reader.data_loader=dali:" in line)
    assert "cannot run here: NVIDIA DALI is not installed; install it with" in dali
    assert "cannot run here" not in next(line for line in lines
                                         if "r1-reader.data_loader=native:" in line)
    assert "1 of 2 point(s) cannot run here" in done.stdout
    assert "all points load" not in done.stdout


def test_a_point_that_does_not_load_stops_the_sweep_before_anything_runs(
        tmp_path: Path, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"workload": str(CONFIGS.parent / "workloads/default.yaml"),
                                    "output": str(tmp_path / "out"),
                                    "axes": {"reader.read_threads": [1, -1]}}))
    assert run_cli("sweep", str(path)) == 2
    assert "point r1-reader.read_threads=-1: reader.read_threads" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_linked_axes_vary_together(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"workload": "w.yaml", "axes": {
        "ranks": [1, 2], "a,b": [[1, "x"], [2, "y"]], "c": [True]}}))
    got = points(load_sweep(path))
    assert got == [(1, {"a": 1, "b": "x", "c": True}), (1, {"a": 2, "b": "y", "c": True}),
                   (2, {"a": 1, "b": "x", "c": True}), (2, {"a": 2, "b": "y", "c": True})]


def test_override_of_an_axis_key_is_refused(run_cli: Callable[..., int],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_sweep(CONFIGS / "layout_comparison.yaml")
    with pytest.raises(ConfigError, match=r"dataset\.data_folder is set by an axis"):
        with_overrides(spec, ["++workload.dataset.data_folder=/elsewhere"])
    assert with_overrides(spec, ["storage.storage_root=/elsewhere"]).overrides[-1] == \
        "storage.storage_root=/elsewhere"
    assert run_cli("sweep", str(CONFIGS / "layout_comparison.yaml"),
                   "dataset.data_folder=/elsewhere") == 2
    assert "set by an axis" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_runs_points_and_survives_a_failure(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    workload = write_workload(tiny_workload(train={"epochs": 1}))
    sweep = workdir / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "t", "workload": str(workload), "output": str(workdir / "sweeps"),
        "axes": {"ranks": [1, 2], "reader.batch_size": [2, 99]}}))
    assert run_cli("sweep", str(sweep)) == 1  # batch 99 cannot run: reported, not fatal
    out = capsys.readouterr().out
    assert "2 of 4 points ran" in out
    # each point's progress as it runs: n of N, its name, then how it ended (compute 0: rates)
    assert "point 1 of 4: r1-reader.batch_size=2: running" in out
    assert re.search(r"point 1 of 4: r1-reader.batch_size=2: [\d,.]+ samples/s, [\d,.]+ MB/s "
                     r"\(compute 0: no AU\) in [\d.]+ s", out)
    assert "point 4 of 4: r2-reader.batch_size=99: error: " in out
    assert re.search(r"point 3 of 4: r2-reader.batch_size=2: epoch 1/1: [\d,.]+ samples/s, "
                     r"[\d,.]+ MB/s", out)  # a point's own progress, passed on as it runs
    assert "report:" in out and next((workdir / "sweeps").glob("*/report/report.html"))
    summary = json.loads(next((workdir / "sweeps").glob("*/sweep.json")).read_text())
    by_name = {p["name"]: p for p in summary["points"]}
    assert by_name["r2-reader.batch_size=2"]["run_dir"]
    assert "reader.batch_size=99" in by_name["r1-reader.batch_size=99"]["error"]
    result = json.loads(Path(by_name["r2-reader.batch_size=2"]["run_dir"], "result.json")
                        .read_text())
    assert result["ranks_count"] == 2


@pytest.mark.slow
def test_find_max_accelerators_answers(workdir: Path, write_workload: Callable[..., Path],
                                       run_cli: Callable[..., int],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = tiny_workload(train={"epochs": 1, "computation_time": 0.02, "allreduce_bytes": 0},
                        accelerators={"fake": {"computation_time": 0.02, "au": 0.5}})
    workload = write_workload(doc)
    code = run_cli("sweep", str(workload), "--find-max-accelerators", "--accelerator", "fake",
                   "--max-accelerators", "2", "--output", str(workdir / "sweeps"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "this storage sustains at least 2 fake accelerator(s) for tiny (cap reached" in out
    summary = json.loads(next((workdir / "sweeps").glob("*/sweep.json")).read_text())
    assert [p["ranks"] for p in summary["points"]] == [1, 2]
    assert summary["search"]["best"] == 2 and summary["search"]["cap_reached"] is True
    alone = summary["search"]["storage_alone"]  # the storage's own rate, compute 0
    assert alone["bytes_per_s"] > 0 and f"the storage alone, compute 0 on {alone['ranks']} " \
        "rank(s)" in out


def test_workloads_can_be_an_axis() -> None:
    spec = load_sweep(CONFIGS / "unet3d_bert_scaling.yaml")
    got = points(spec)
    assert {Path(s["workload"]).name for _, s in got} == {"unet3d.yaml", "bert.yaml"}
    assert all(Path(s["workload"]).exists() for _, s in got)
    assert {r for r, _ in got} == {1, 2, 4}


@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
@pytest.mark.slow
def test_the_shipped_layout_comparison_measures_and_labels_each_layout(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    """Compute 0 and O_DIRECT: the three layouts are measured on the storage, and the
    report names each by the sweep file's label."""
    # 64 KiB samples, not the file's 1 MiB: 48 MiB written and read, not 768 (O_DIRECT-aligned)
    assert run_cli("sweep", str(CONFIGS / "layout_comparison.yaml"),
                   "dataset.record_length_bytes=64KiB", "--output", str(workdir / "sweeps")) == 0
    out = capsys.readouterr().out
    assert "one shared file: " in out and "MB/s (compute 0: no AU)" in out
    folder = next((workdir / "sweeps").iterdir())
    table = (folder / "report" / "runs.csv").read_text()
    for label in ("file per sample", "16 samples per file", "one shared file"):
        assert label in table
    results = [json.loads(p.read_text()) for p in folder.glob("*/*/result.json")]
    assert len(results) == 3
    assert all(r["config"]["reader"]["odirect"] and r["metrics"]["bytes_per_s"] for r in results)
    assert {r["config"]["dataset"]["record_length_bytes"] for r in results} == {64 << 10}
    assert {r["verdict"]["limiter"] for r in results} == {"not applicable"}


def test_a_sweep_never_shows_a_secret(workdir: Path, write_workload: Callable[..., Path],
                                      run_cli: Callable[..., int],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Credentials given to a sweep (fixed or as an axis) are redacted in what it prints,
    in its point folders' names and in sweep.json."""
    from dliobench.report.sweep import PointOutcome, load_sweep, point_name, save_summary

    workload = write_workload(tiny_workload(train={"epochs": 1}))
    sweep = workdir / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "t", "workload": str(workload), "output": str(workdir / "sweeps"),
        "overrides": ["storage.s3_secret_access_key=FIXEDSECRET"],
        "axes": {"storage.s3_access_key_id": ["AXISKEYID1", "AXISKEYID2"]}}))
    assert run_cli("sweep", str(sweep), "--dry-run") == 0
    out = capsys.readouterr().out
    assert "2 point(s)" in out and "<redacted>" in out
    assert "FIXEDSECRET" not in out and "AXISKEYID" not in out
    spec = load_sweep(sweep)
    settings = {"storage.s3_access_key_id": "AXISKEYID1"}
    assert "AXISKEYID" not in point_name(1, settings)
    workdir.joinpath("s").mkdir()
    path = save_summary(workdir / "s", spec, [PointOutcome(point_name(1, settings), 1,
                                                           settings)])
    assert "SECRET" not in path.read_text() and "AXISKEYID" not in path.read_text()
