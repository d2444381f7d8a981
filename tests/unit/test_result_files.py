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

from dliobench.cli.main import main
from dliobench.errors import DlioBenchError
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
