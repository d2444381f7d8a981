"""The metadata phase: rates and percentiles over a real generated dataset's files, the
scratch folder removed, one-sentence errors, and the section in a run's result."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dliobench.comm.world import ThreadGroup, World
from dliobench.config.load import load
from dliobench.results.metadata import section
from dliobench.results.schema import parse_version
from dliobench.run.metadata import OPS, measure
from dliobench.run.planning import resolve
from tests.conftest import last_result, tiny_workload

FILES = 300
SUBFOLDERS = 3


def _doc(**train: Any) -> dict[str, Any]:
    return tiny_workload(dataset={"num_files_train": FILES, "num_subfolders_train": SUBFOLDERS,
                                  "format": "npy", "record_length_bytes": 512},
                         reader={"batch_size": 10}, train={"epochs": 1, **train})


def _metadata_json(root: Path) -> dict[str, Any]:
    found = sorted(root.glob("*/metadata.json"))
    assert len(found) == 1, found
    doc: dict[str, Any] = json.loads(found[0].read_text())
    return doc


def _check_ops(meta: dict[str, Any], files: int) -> None:
    assert meta["files"] == files
    for op in OPS:
        job = meta["ops"][op]
        assert job["files"] == files, op
        assert job["ops_per_s"] > 0
        assert 0 < job["p50_s"] <= job["p99_s"] <= job["max_s"], op
        assert sum(r["ops"][op]["files"] for r in meta["ranks"]) == files


def test_metadata_command_measures_and_cleans_up(workdir: Path, run_cli: Callable[..., int],
                                                 write_workload: Callable[..., Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write_workload(_doc()))
    assert run_cli("generate", path, "--no-progress") == 0
    before = sorted(p.relative_to(workdir) for p in (workdir / "data").rglob("*"))
    capsys.readouterr()
    assert run_cli("metadata", path, "--output", "md") == 0
    out = capsys.readouterr().out
    assert "metadata rates over 300 files" in out and "unlink" in out
    doc = _metadata_json(workdir / "md")
    assert doc["kind"] == "metadata" and doc["workload"] == "tiny"
    _check_ops(doc["metadata"], FILES)
    after = sorted(p.relative_to(workdir) for p in (workdir / "data").rglob("*"))
    assert after == before  # the dataset as it was, the scratch folder beside it gone
    assert [p.name for p in (workdir / "data").iterdir()] == ["tiny"]
    assert run_cli("metadata", path, "--max-files", "40", "--output", "md40") == 0
    _check_ops(_metadata_json(workdir / "md40")["metadata"], 40)


def test_no_dataset_is_one_sentence(workdir: Path, run_cli: Callable[..., int],
                                    write_workload: Callable[..., Path],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("metadata", str(write_workload(_doc()))) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("dliobench: error: there is no dataset in data/tiny yet")
    assert "dliobench generate" in err and "\n" not in err
    assert not (workdir / "data").exists()  # nothing created for an error


def test_ranks_split_the_files(workdir: Path, run_cli: Callable[..., int],
                               write_workload: Callable[..., Path]) -> None:
    """Two ranks (threads of one process, the Comm protocol's thread implementation)."""
    path = write_workload(_doc())
    assert run_cli("generate", str(path), "--no-progress") == 0
    config, _ = load(path, [])
    comms = ThreadGroup(2).comms()
    out: list[Any] = [None, None]

    def rank(r: int) -> None:
        world = World(rank=r, size=2, local_size=2, host="h")
        out[r] = measure(resolve(config, world, comms[r]), world, comms[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out[1] is None and out[0] is not None
    meta = section(out[0], config.dataset.data_folder, ".")
    assert [r["files"] for r in meta["ranks"]] == [FILES // 2, FILES // 2]
    _check_ops(meta, FILES)
    slowest = max(r["ops"]["stat"]["seconds"] for r in meta["ranks"])
    assert meta["ops"]["stat"]["ops_per_s"] == pytest.approx(FILES / slowest)


def test_workflow_metadata_adds_the_section(workdir: Path, run_cli: Callable[..., int],
                                            write_workload: Callable[..., Path]) -> None:
    doc = _doc()
    doc["workflow"] = {"metadata": True}
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    result = last_result(workdir / "reports")
    assert parse_version(result["schema_version"]) >= (1, 3)
    _check_ops(result["metadata"], FILES)
