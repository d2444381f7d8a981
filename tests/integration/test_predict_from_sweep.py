"""`predict --from` on a real scaled-down sweep (1 and 2 ranks, the second under the sweep's
own mpiexec; a 4-rank point costs 2.3 s more on a 2-core host and shows nothing the 2-rank
one does not): the projection at every measured count reproduces the AU measured there, within
its band; no count of "0 accelerator(s)" is printed, even for an accelerator faster than
the runs could feed; and a workload of other samples than
the runs read is refused, naming the keys that differ."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dliobench.report.sweep import load_sweep, run_sweep
from tests.conftest import tiny_workload

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workload of 16 KiB samples, 0.02 s per batch of 2, swept over 1 and 2 ranks (5
    counted steps a rank at 2 ranks); its file and the sweep's folder."""
    root = tmp_path_factory.mktemp("swept")
    doc = tiny_workload(dataset={"num_files_train": 24, "record_length_bytes": 16384,
                                 "data_folder": str(root / "data")},
                        reader={"read_threads": 1},
                        train={"epochs": 1, "computation_time": 0.02},
                        metric={"client_ceiling": "off"})
    workload = root / "tiny.yaml"
    workload.write_text(yaml.safe_dump(doc))
    sweep = root / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "scaled", "workload": str(workload),
                                     "output": str(root / "sweeps"),
                                     "axes": {"ranks": [1, 2]}}))
    folder, outcomes = run_sweep(load_sweep(sweep))  # `dliobench sweep` less its HTML report
    assert not any(o.error for o in outcomes), outcomes
    return workload, folder


def test_the_projection_reproduces_the_sweep_it_was_fitted_on(
        swept: tuple[Path, Path], workdir: Path, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    workload, folder = swept
    capsys.readouterr()
    plot = ["--plot", str(workdir / "p.png")]
    assert run_cli("predict", str(workload), "--from", str(folder), "--json", *plot) == 0
    doc = json.loads(capsys.readouterr().out)["calibrated"]
    rows = {r["accelerators"]: r for r in doc["projection"]}
    assert sorted(r["ranks"] for r in doc["runs"]) == [1, 2]
    for run in doc["runs"]:
        r = rows[run["ranks"]]
        assert run["au"] is not None and r["au_low"] <= run["au"] <= r["au_high"], (run, r)
        assert run["comparable"]  # same compute per batch and batch: the same AU
    assert doc["most_at_floor"] != 0
    assert run_cli("predict", str(workload), "--from", str(folder), *plot) == 0
    out = capsys.readouterr().out
    assert " 0 accelerator(s)" not in out and "calibrated by 2 run(s)" in out
    # an accelerator 100 times faster needs more than the runs ever read: no count, not 0
    assert run_cli("predict", str(workload), "train.computation_time=0.0002", "--from",
                   str(folder), *plot) == 0
    out = capsys.readouterr().out
    assert " 0 accelerator(s)" not in out
    assert "at the AU floor    no count known: the runs never saturated the storage" in out \
        or "at the AU floor    not even one accelerator keeps AU at 90%: " in out
    assert "* measured at another compute per batch or batch size than projected" in out

    assert run_cli("predict", str(workload), "dataset.record_length_bytes=8MiB",
                   "--from", str(folder), *plot) == 2
    err = capsys.readouterr().err
    assert "read other samples than tiny asks (dataset.record_length_bytes: 16384 in the " \
        "runs, 8388608 asked)" in err
    assert "add `dataset.record_length_bytes=16384`" in err


def test_runs_of_two_shapes_are_not_fitted_together(
        swept: tuple[Path, Path], workdir: Path, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A run of 8 MiB samples beside the sweep's 16 KiB ones: one bandwidth cannot describe
    both, so the fit is refused, naming the key."""
    workload, folder = swept
    run = next(folder.glob("r1/*/result.json"))
    doc = json.loads(run.read_text())
    doc["config"]["dataset"]["record_length_bytes"] = 8 << 20
    other = workdir / "other" / "run"
    other.mkdir(parents=True)
    (other / "result.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert run_cli("predict", str(workload), "--from", str(folder), str(other)) == 2
    assert "the runs read 2 shapes of samples (2 run(s) with dataset.record_length_bytes=16384" \
        ", 1 with dataset.record_length_bytes=8388608)" in capsys.readouterr().err
