"""The accelerator's name where a run's figures are a profile's, and straggler nodes in
`dliobench report`: one real tiny run, its console and its report."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from dliobench.cli.main import main
from tests.conftest import tiny_workload


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real run that names no accelerator but uses its workload's b200 profile's compute
    time per batch (as a user giving unet3d's b200 figures does); and its console."""
    root = tmp_path_factory.mktemp("accel")
    doc = tiny_workload(dataset={"data_folder": str(root / "data")},
                        train={"computation_time": 0.003, "accelerator": "", "epochs": 1},
                        accelerators={"h100": {"computation_time": 0.006, "au": 0.9},
                                      "b200": {"computation_time": 0.003, "au": 0.9}})
    (root / "w.yaml").write_text(yaml.safe_dump(doc))
    out = root / "console.txt"
    with open(out, "w") as handle, pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdout", handle)
        assert main(["run", str(root / "w.yaml"), "--no-progress", "--output",
                     str(root / "runs")]) == 0
    return root, out.read_text()


def _csv(root: Path, runs: Path) -> list[dict[str, str]]:
    assert main(["report", str(runs), "-o", str(root / "out")]) == 0
    with open(root / "out" / "runs.csv") as handle:
        return list(csv.DictReader(handle))


def test_a_profile_s_figures_are_named_as_that_profile(run_dir: tuple[Path, str]) -> None:
    """Console and report both say b200, not "custom" (they said "custom" before)."""
    root, console = run_dir
    assert "1 × b200 (0.003 s/batch)" in console and "custom" not in console
    [row] = _csv(root, root / "runs")
    assert row["accelerator"] == "b200"
    assert "straggler_nodes" not in row  # one node: no column


def test_report_names_the_straggler_node(run_dir: tuple[Path, str], tmp_path: Path) -> None:
    """The real run's result.json edited to hold two nodes, the second a straggler (as
    results.nodes writes them: nodes[] and metrics.straggler_nodes); the report's table
    and its per-node table name it."""
    root, _ = run_dir
    [src] = (root / "runs").iterdir()
    shutil.copytree(src, tmp_path / "runs" / src.name)
    path = tmp_path / "runs" / src.name / "result.json"
    doc = json.loads(path.read_text())
    first = doc["nodes"][0]
    doc["nodes"] = [{**first, "host": "node-a"},
                    {**first, "host": "node-b", "samples_per_s": first["samples_per_s"] / 2}]
    doc["metrics"]["straggler_nodes"] = ["node-b"]
    path.write_text(json.dumps(doc))
    [row] = _csv(tmp_path, tmp_path / "runs")
    assert row["straggler_nodes"] == "node-b"
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<th>straggler node(s)</th>" in page and "<h2>Per node</h2>" in page
    assert "<td>node-b</td><td>1</td>" in page and "<td>yes</td>" in page


@pytest.mark.parametrize(("named", "compute", "batch", "expected"), [
    ("b200", 0.003, 2, "b200"),      # named, its figures
    ("b200", 0.05, 2, "custom"),     # named, compute time overridden to no profile's
    ("b200", 0.006, 3, "h100"),      # named, but the figures are another profile's
    ("", 0.006, 4, "custom"),        # h100 sets batch 3, not 4
    ("", 0.006, 3, "h100"),
    ("v100", 0.5, 2, "v100"),        # a result written without the named profile
])
def test_profile_name(named: str, compute: float, batch: int, expected: str) -> None:
    from dliobench.config.profiles import profile_name

    cfg = {"train": {"accelerator": named, "computation_time": compute},
           "reader": {"batch_size": batch},
           "accelerators": {"b200": {"computation_time": 0.003, "batch_size": None},
                            "h100": {"computation_time": 0.006, "batch_size": 3}}}
    assert profile_name(cfg) == expected
