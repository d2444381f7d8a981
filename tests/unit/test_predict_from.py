"""`dliobench predict --from`: the fit of the storage's bandwidth and the client ceiling, and
the projection, on result folders.

One tiny real run gives a real result.json; copies of it then hold the figures runs on a
storage of known bandwidth B behind clients of known ceiling C would measure (AU = min(1,
c x min(C, B/n) / s)), each epoch's rate a little off the run's, as real epochs are.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from dliobench.cli.main import main
from dliobench.config.load import load
from dliobench.report.calibrate import SATURATED_BELOW, fit, point
from dliobench.report.projection import project, table
from tests.conftest import tiny_workload

C = 0.05  # compute per step, s
BATCH = 2
EPOCH_NOISE = (-0.004, 0.0, 0.004)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A tiny real run (2 epochs of 8 npz files of 64 KiB, 0.05 s per batch of 2) and its
    workload file."""
    root = tmp_path_factory.mktemp("real")
    doc = tiny_workload(dataset={"data_folder": str(root / "data")},
                        reader={"batch_size": BATCH},
                        train={"computation_time": C}, metric={"client_ceiling": 500})
    workload = root / "tiny.yaml"
    workload.write_text(yaml.safe_dump(doc))
    assert main(["run", str(workload), "--output", str(root / "out"), "--no-progress"]) == 0
    (run_dir,) = (root / "out").iterdir()
    result: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return workload, result


def _step_bytes(real_result: dict[str, Any]) -> float:
    m = real_result["metrics"]
    return float(m["bytes"] / m["steps"])


def _write(folder: Path, real_result: dict[str, Any], n: int, bandwidth: float,
           ceiling: float = math.inf, compute: float = C, drift: float = 0.0,
           recorded: bool = True) -> Path:
    """A copy of the real result as a run of n ranks on B = bandwidth (bytes/s) would write
    it; ``ceiling`` per rank in bytes/s (in the verdict when ``recorded``); ``drift``:
    relative excess over B."""
    doc = copy.deepcopy(real_result)
    s = _step_bytes(real_result)
    sample = s / BATCH
    per_rank = min(ceiling, bandwidth * (1 + drift) / n)
    au = min(1.0, compute * per_rank / s) if compute else None
    rate = n * (per_rank if compute == 0 else au * s / compute)
    steps = 30 * n
    m = doc["metrics"]
    wall = steps * (compute / au if compute else s / per_rank)
    m.update(au=au, steps=steps, samples=steps * BATCH, bytes=steps * s, bytes_per_s=rate,
             samples_per_s=rate / sample, compute_s=steps * compute, wall_s=wall,
             wait_s=wall - steps * compute)
    doc["epochs"] = [{**doc["epochs"][0], "bytes_per_s": rate * (1 + e)} for e in EPOCH_NOISE]
    doc["time_shares"] = {"compute": au or 0.0, "wait": 1 - (au or 0.0), "comm": 0.0,
                          "checkpoint": 0.0, "other": 0.0}
    doc["ranks_count"] = n
    doc["nodes"] = [{**doc["nodes"][0], "ranks": list(range(n))}]  # one host
    doc["config"]["train"]["computation_time"] = compute
    if recorded and not math.isinf(ceiling):
        doc["verdict"]["client_ceiling_samples_per_s_per_rank"] = ceiling / sample
    run_dir = folder / f"r{n}-c{compute:g}-{len(list(folder.glob('*')))}"
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps(doc))
    return run_dir


def _config(workload: Path) -> Any:
    return load(workload, [], None)[0]


def test_a_real_run_is_read_as_a_point(real: tuple[Path, dict[str, Any]],
                                       tmp_path: Path) -> None:
    _, result = real
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text(json.dumps(result))
    p = point(run_dir)
    assert p is not None
    m = result["metrics"]
    assert p.ranks == 1 and p.au == m["au"] and p.bytes_per_s == m["bytes_per_s"]
    assert p.step_bytes == m["bytes"] / m["steps"]
    assert p.compute_s == pytest.approx(m["compute_s"] / m["steps"])
    assert p.ceiling_samples_per_s == 500
    assert p.limiter == ("none" if m["au"] >= SATURATED_BELOW else "storage")


def test_fit_on_one_and_two_ranks_projects_four_and_eight(
        real: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    workload, result = real
    s = _step_bytes(result)
    b = 1.5 * s / C  # one rank keeps up, two share 1.5 ranks' worth
    for n in (1, 2):
        _write(tmp_path / "fit", result, n, b)
    f = fit([str(tmp_path / "fit")])
    assert [p.limiter for p in f.points] == ["none", "storage"]
    assert f.bandwidth.value == pytest.approx(b)
    assert not f.bandwidth.bound and f.bandwidth.low < b < f.bandwidth.high
    assert f.ceiling is not None and f.ceiling.value == pytest.approx(500 * s / BATCH)
    doc = project(_config(workload), f, 8)
    rows = {r["accelerators"]: r for r in doc["projection"]}
    assert sorted(rows) == [1, 2, 4, 8]
    for n in (2, 4, 8):
        assert rows[n]["au"] == pytest.approx(1.5 / n)
        assert rows[n]["au_low"] < rows[n]["au"] < rows[n]["au_high"]
    assert rows[1]["au"] == 1.0
    assert doc["most_at_floor"] == 1  # 1.5 / 2 = 0.75 is under the floor of 0.9
    assert not any("lower bound" in n for n in doc["notes"])


def test_the_ceiling_recorded_at_the_most_ranks_per_host_is_used(
        real: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """More ranks on a host share its CPUs: each rank's recorded ceiling is lower."""
    _, result = real
    s = _step_bytes(result)
    _write(tmp_path / "fit", result, 1, 1.5 * s / C, ceiling=40 * s / C)
    _write(tmp_path / "fit", result, 2, 1.5 * s / C, ceiling=25 * s / C)
    c = fit([str(tmp_path / "fit")]).ceiling
    assert c is not None and c.value == pytest.approx(25 * s / C)
    assert "recorded at 2 rank(s) per host" in c.source


def test_no_saturated_run_gives_only_a_lower_bound(real: tuple[Path, dict[str, Any]],
                                                   tmp_path: Path) -> None:
    workload, result = real
    s = _step_bytes(result)
    for n in (1, 2):
        _write(tmp_path / "fit", result, n, 10 * s / C)
    f = fit([str(tmp_path / "fit")])
    assert f.bandwidth.bound and math.isinf(f.bandwidth.high)
    assert f.bandwidth.value == pytest.approx(2 * s / C)  # what two ranks read, keeping up
    assert any("only a lower bound" in n for n in f.notes)
    doc = project(_config(workload), f, 16)
    row16 = doc["projection"][-1]
    assert row16["at_least"] and row16["au"] == pytest.approx(2 / 16)
    assert row16["au_high"] == 1.0
    assert doc["most_at_floor_at_least"]
    text = table(doc)
    assert "at least" in text and "only a lower bound" in text


def test_client_bound_runs_fit_the_ceiling(real: tuple[Path, dict[str, Any]],
                                           tmp_path: Path) -> None:
    """Read-bound runs (compute 0) at the ranks' client ceiling measure C; runs on a capped
    storage measure B; the projection is held under both."""
    workload, result = real
    s = _step_bytes(result)
    ceiling, b = 0.8 * s / C, 3.0 * s / C  # one rank's loader delivers 0.8 of the demand
    for n in (1, 2):
        _write(tmp_path / "fit", result, n, b, ceiling, compute=0.0)
    _write(tmp_path / "fit", result, 8, b, ceiling, compute=0.0)
    f = fit([str(tmp_path / "fit")])
    assert [p.limiter for p in f.points] == ["client", "client", "storage"]
    assert f.ceiling is not None and f.ceiling.value == pytest.approx(ceiling)
    assert f.bandwidth.value == pytest.approx(b)
    rows = {r["accelerators"]: r["au"] for r in project(_config(workload), f, 8)["projection"]}
    assert rows[1] == pytest.approx(0.8) and rows[2] == pytest.approx(0.8)
    assert rows[4] == pytest.approx(0.75) and rows[8] == pytest.approx(3 / 8)


def test_bandwidth_still_growing_with_ranks_is_said(real: tuple[Path, dict[str, Any]],
                                                   tmp_path: Path) -> None:
    _, result = real
    s = _step_bytes(result)
    _write(tmp_path / "fit", result, 2, 1.0 * s / C)
    _write(tmp_path / "fit", result, 4, 1.0 * s / C, drift=0.03)  # 3 %: more than noise
    notes = fit([str(tmp_path / "fit")]).notes
    assert any("delivered more at more ranks" in n for n in notes)


def test_a_run_that_got_less_than_others_from_the_storage_was_client_bound(
        real: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """One rank waited while reading 0.6 of what two ranks later got: its client held it
    back (a loaded CPU, one client's link), so it measures C, not B."""
    workload, result = real
    s = _step_bytes(result)
    b = 1.0 * s / C
    _write(tmp_path / "fit", result, 1, b, ceiling=0.6 * b, recorded=False)
    _write(tmp_path / "fit", result, 2, b)
    f = fit([str(tmp_path / "fit")])
    assert [p.limiter for p in f.points] == ["client", "storage"]
    assert f.bandwidth.value == pytest.approx(b)
    assert f.ceiling is not None and f.ceiling.value == pytest.approx(0.6 * b)
    assert any("taken as limited by its clients" in n for n in f.notes)
    rows = {r["accelerators"]: r["au"] for r in project(_config(workload), f, 4)["projection"]}
    assert rows[1] == pytest.approx(0.6) and rows[4] == pytest.approx(0.25)


def test_cli_table_json_figure_and_checks(real: tuple[Path, dict[str, Any]], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    workload, result = real
    s = _step_bytes(result)
    b = 1.5 * s / C
    for n in (1, 2):
        _write(tmp_path / "fit", result, n, b)
    check = _write(tmp_path / "check", result, 4, b, drift=0.02)
    plot = tmp_path / "fig" / "projection.png"
    argv = ["predict", str(workload), "--from", str(tmp_path / "fit"), "--check", str(check),
            "--plot", str(plot)]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["calibrated"]
    (c,) = doc["checks"]
    assert c["ranks"] == 4 and c["au_error"] == pytest.approx(1.02 * 1.5 / 4 - 1.5 / 4)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 20_000
    assert [r["accelerators"] for r in doc["projection"]] == [1, 2, 4, 8, 16]  # 8 x 2 ranks
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "storage bandwidth" in out and "(not fitted)" in out and str(plot) in out


def test_cli_errors(real: tuple[Path, dict[str, Any]], tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    workload, result = real
    assert main(["predict", str(workload), "--check", str(tmp_path)]) == 2
    assert "--check and --plot go with --from" in capsys.readouterr().err
    assert main(["predict", str(workload), "--from", str(tmp_path)]) == 2
    assert "no result.json in it or in its subfolders" in capsys.readouterr().err
    failed = copy.deepcopy(result)
    failed["status"] = "failed"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "result.json").write_text(json.dumps(failed))
    assert main(["predict", str(workload), "--from", str(tmp_path / "bad")]) == 2
    assert "no completed run that read data" in capsys.readouterr().err
    broken = copy.deepcopy(result)
    del broken["config"]["train"]["computation_time"]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text(json.dumps(broken))
    assert main(["predict", str(workload), "--from", str(tmp_path / "broken")]) == 2
    assert "lacks a figure the fit needs ('computation_time')" in capsys.readouterr().err
    good = _write(tmp_path / "good", result, 1, 10 * _step_bytes(result) / C)
    assert main(["predict", str(workload), "train.computation_time=0", "--from",
                 str(good)]) == 2
    assert "has no compute time per batch" in capsys.readouterr().err


def test_a_ceiling_another_run_read_past_keeps_that_run_in_its_band(
        real: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """One rank waited at 0.8 of its demand (a busy host: taken as its client's ceiling)
    while two ranks on one host later kept up: the fit's ceiling is contradicted by them, so
    its band reaches what they read and the projection at 2 keeps their AU within it."""
    workload, result = real
    s = _step_bytes(result)
    _write(tmp_path / "fit", result, 1, 10 * s / C, ceiling=0.8 * s / C, recorded=False)
    _write(tmp_path / "fit", result, 2, 10 * s / C)
    f = fit([str(tmp_path / "fit")])
    assert [p.limiter for p in f.points] == ["client", "none"]
    assert f.ceiling is not None and f.ceiling.value == pytest.approx(0.8 * s / C)
    assert f.ceiling.high == pytest.approx(s / C)
    assert any("more than the client ceiling fitted" in n for n in f.notes)
    doc = project(_config(workload), f, 4)
    for run in doc["runs"]:
        r = next(r for r in doc["projection"] if r["accelerators"] == run["ranks"])
        assert r["au_low"] <= run["au"] <= r["au_high"]
