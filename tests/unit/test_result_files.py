"""result.json is written and read through one module: the schema version is checked, newer
minor versions are read with their extra fields, and anything else gets one sentence."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dliobench.base.errors import DlioBenchError, InputError
from dliobench.cli.main import main
from dliobench.results.files import read_result, write_partial_result, write_result
from dliobench.results.provenance import config_hash
from dliobench.results.schema import SCHEMA_MAJOR, SCHEMA_MINOR, parse_version
from tests.conftest import tiny_workload


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one real (tiny) run."""
    root = tmp_path_factory.mktemp("result")
    doc = tiny_workload(dataset={"data_folder": str(root / "data")})
    workload = root / "tiny.yaml"
    workload.write_text(json.dumps(doc))
    assert main(["run", str(workload), "--no-progress", "--output", str(root / "runs")]) == 0
    return next((root / "runs").iterdir())


def _copy_with(real_run: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    doc = json.loads((real_run / "result.json").read_text())
    change(doc)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps(doc))
    return folder


def test_a_real_result_reads_back_typed_and_round_trips(real_run: Path, tmp_path: Path) -> None:
    result = read_result(real_run)
    assert parse_version(result["schema_version"]) == (SCHEMA_MAJOR, SCHEMA_MINOR)
    assert result["status"] == "complete" and result["metrics"]["steps"] > 0
    assert result["honesty"]["page_cache_possible"] is True
    (tmp_path / "copy").mkdir()
    assert write_result(tmp_path / "copy", result)
    assert read_result(tmp_path / "copy") == result
    assert not write_result(tmp_path / "copy", result, replace=False)  # the first one wins


def test_a_result_carries_its_provenance(real_run: Path) -> None:
    result = read_result(real_run)
    stamp = result["provenance"]
    assert stamp["config_sha256"] == config_hash(result["config"])
    assert stamp["argv"] == sys.orig_argv  # this process's command line (pytest's here)
    assert stamp["packages"]["numpy"] == f"numpy=={np.__version__}"
    assert stamp["mpi_library"] is None  # one process: MPI never loaded
    assert result["launcher"] == "none"


def test_a_result_of_schema_1_1_without_provenance_still_reads(real_run: Path,
                                                               tmp_path: Path) -> None:
    def older(doc: dict[str, Any]) -> None:
        doc["schema_version"] = "1.1"
        del doc["provenance"]

    result = read_result(_copy_with(real_run, tmp_path, older))
    assert result["schema_version"] == "1.1" and "provenance" not in result


def test_a_newer_minor_version_is_read_and_its_fields_kept(real_run: Path,
                                                           tmp_path: Path) -> None:
    def newer(doc: dict[str, Any]) -> None:
        doc["schema_version"] = f"{SCHEMA_MAJOR}.7"
        doc["verdict"] = {"limiter": "storage"}

    result = read_result(_copy_with(real_run, tmp_path, newer))
    assert result["schema_version"] == f"{SCHEMA_MAJOR}.7"
    assert result["verdict"] == {"limiter": "storage"}  # type: ignore[typeddict-item]


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d.update(schema_version=SCHEMA_MAJOR + 1), "has result schema 2"),
    (lambda d: d.update(schema_version="2.0"), "has result schema 2.0"),
    (lambda d: d.pop("schema_version"), "is not a dliobench result"),
    (lambda d: d.update(schema_version="one"), "is not a dliobench result"),
    (lambda d: d.pop("metrics"), "is not a dliobench result"),
])
def test_other_documents_are_refused_in_one_sentence(
        real_run: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None],
        needle: str) -> None:
    with pytest.raises(DlioBenchError, match=needle) as info:
        read_result(_copy_with(real_run, tmp_path, change))
    assert "\n" not in str(info.value)


def test_report_names_a_file_that_is_not_a_result(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").write_text('["a list, not a result"]')
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "is not a dliobench result" in err and "Traceback" not in err
    (tmp_path / "run" / "result.json").write_text("{truncated")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_the_first_partial_result_owns_the_folder_and_a_later_one_is_kept_beside(
        real_run: Path, tmp_path: Path) -> None:
    """The failing rank writes first; rank 0, stopped later by the launcher, must not replace
    its measurements (torchrun stops rank 0 after rank 1 failed), nor lose its own."""
    failing = read_result(real_run)
    later = read_result(real_run)
    failing["ranks"][0]["rank"], later["ranks"][0]["rank"] = 1, 0
    assert write_partial_result(tmp_path, failing, 1) == tmp_path / "result.json"
    assert write_partial_result(tmp_path, later, 0) == tmp_path / "partial-rank0.json"
    assert [r["rank"] for r in read_result(tmp_path)["ranks"]] == [1]
    beside = json.loads((tmp_path / "partial-rank0.json").read_text())
    assert [r["rank"] for r in beside["ranks"]] == [0]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change setting the field at ``path`` (``metrics.au``, ``ranks.0.samples``)."""
    def change(doc: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            doc = doc[p]
        doc[last] = value
    return change


@pytest.mark.parametrize(("path", "value", "said"), [
    ("time_shares", "compute", 'time_shares is "compute", where an object or null belongs'),
    ("metrics.au", "high", 'metrics.au is "high", where a number or null belongs'),
    ("ranks_count", "two", 'ranks_count is "two", where an integer belongs'),
    ("ranks.0.samples", "12", 'ranks[0].samples is "12", where an integer belongs'),
    ("ranks.0.epochs.1.complete", 1, "ranks[0].epochs[1].complete is 1, where true or "
                                     "false belongs"),
    ("time_shares.wait", None, "time_shares.wait is null, where a number belongs"),
    ("verdict.meets_floor", "yes", 'verdict.meets_floor is "yes", where true or false or '
                                   "null belongs"),
    ("honesty.dataset_bytes", True, "honesty.dataset_bytes is true, where an integer belongs"),
    ("epochs.1.steps", 2.5, "epochs[1].steps is 2.5, where an integer belongs"),
    ("machine.hosts", "vm", 'machine.hosts is "vm", where a list belongs'),
    ("provenance.packages.numpy", 2, "provenance.packages.numpy is 2, where text or null "
                                     "belongs"),
    ("nodes.0.ranks", [0, "1"], 'nodes[0].ranks[1] is "1", where an integer belongs'),
])
def test_a_field_of_the_wrong_type_is_one_sentence_naming_file_and_field(
        real_run: Path, tmp_path: Path, path: str, value: Any, said: str) -> None:
    """Every declared field, nested ones too, is checked on reading (schema.first_mismatch),
    so no reader shows a blank figure or meets a string where it does arithmetic."""
    folder = _copy_with(real_run, tmp_path, _set(path, value))
    with pytest.raises(InputError) as info:
        read_result(folder)
    assert str(info.value).startswith(f"{folder / 'result.json'}: {said}, so it was edited")
    assert "\n" not in str(info.value)


def test_numbers_as_json_may_write_them_and_nulls_where_declared_are_read(
        real_run: Path, tmp_path: Path) -> None:
    def rewritten(doc: dict[str, Any]) -> None:
        doc["metrics"]["bytes"] = float(doc["metrics"]["bytes"])  # 789744.0: an integer
        doc["metrics"]["compute_s"] = 1  # a number without a fraction
        doc["metrics"]["au"] = None
        doc["time_shares"] = None
        doc["metrics"]["new_in_1_9"] = "kept"  # a field this version does not declare

    result = read_result(_copy_with(real_run, tmp_path, rewritten))
    assert result["metrics"]["au"] is None and result["time_shares"] is None


@pytest.mark.parametrize(("command", "change"), [
    (["report", "runs", "-o", "out"], lambda d: (_set("metrics.au", "high")(d),
                                                 _set("ranks_count", "two")(d))),
    (["predict", "--from", "runs"], _set("time_shares", "compute")),
    (["check", "runs"], _set("verdict.limiter", 3)),
], ids=["report", "predict", "check"])
def test_report_predict_and_check_refuse_a_result_of_the_wrong_types(
        real_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, command: list[str],
        change: Callable[[dict[str, Any]], None]) -> None:
    """report exited 0 with AU blank and ranks "two" (a false success), predict --from ended
    in an AttributeError traceback: now each is one sentence and exit 2."""
    folder = _copy_with(real_run, tmp_path, change)
    folder.rename(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dliobench: error: runs/result.json: "), err
    assert len(err.splitlines()) == 1 and "belongs, so it was edited or damaged" in err, err
    assert not (tmp_path / "out").exists()
