"""Shared fixtures: workload files in a temporary folder and an in-process CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dliobench.cli.main import main


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Client ceilings measured by tests are cached in a folder of their own (subprocesses
    inherit it), never in the user's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary working directory (data/ and reports/ land here)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_workload(workdir: Path) -> Callable[..., Path]:
    """Write a workload YAML (a mapping) and return its path."""

    def write(doc: dict[str, Any], name: str = "tiny.yaml") -> Path:
        path = workdir / name
        path.write_text(yaml.safe_dump(doc))
        return path

    return write


def tiny_workload(**sections: dict[str, Any]) -> dict[str, Any]:
    """A small, fast workload in dliobench's key names, with section overrides merged in."""
    doc: dict[str, Any] = {
        "model": {"name": "tiny"},
        "dataset": {"data_folder": "data/tiny", "format": "npz", "num_files_train": 8,
                    "num_samples_per_file": 1, "record_length_bytes": 65536},
        "reader": {"batch_size": 2, "read_threads": 2, "prefetch_size": 2},
        "train": {"epochs": 2, "computation_time": 0.0},
    }
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return doc


@pytest.fixture
def run_cli(workdir: Path) -> Callable[..., int]:
    """Run ``dliobench`` in-process and return its exit code."""

    def run(*argv: str) -> int:
        return main(list(argv))

    return run


def manifest_files(data_folder: Path) -> dict[str, tuple[int, int]]:
    """{file name: (size, CRC-32C)} of the files a dataset's manifest holds (names of
    dliobench's layout end in the file's index: ``img_0000007.npz``)."""
    from dliobench.dataset.manifest import Manifest
    from dliobench.storage.posix import PosixBackend

    manifest = Manifest.load(PosixBackend(str(data_folder)))
    assert manifest is not None, f"no manifest in {data_folder}"
    names = {index_of(p.name): p.name for p in (data_folder / "train").rglob("*")
             if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".idx")}
    return {names.get(i, f"#{i}"): entry for i, entry in manifest.held().items()}


def index_of(name: str) -> int:
    """The file index in a dliobench file name (the digits before the extension)."""
    import re

    match = re.search(r"_(\d+)\.[^.]+$", name)
    assert match, name
    return int(match.group(1))


def last_result(root: Path) -> dict[str, Any]:
    """The newest result.json under a reports folder."""
    runs = sorted(p for p in root.iterdir() if (p / "result.json").exists())
    assert runs, f"no result under {root}"
    result: dict[str, Any] = json.loads((runs[-1] / "result.json").read_text())
    return result


def rank_pid(marker: str, rank: int, variable: str = "PMI_RANK") -> int | None:
    """The pid of the process whose command line holds ``marker`` and whose environment sets
    the launcher's rank ``variable`` (MPICH's PMI_RANK, torchrun's RANK) to ``rank``."""
    wanted = f"\0{variable}={rank}\0".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd and wanted in b"\0" + env:
            return int(entry.name)
    return None
