"""Configurations that cannot fit in a host's memory are refused before any work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.results.sysinfo import host_memory_bytes
from tests.conftest import tiny_workload

HOST = host_memory_bytes()


@pytest.mark.parametrize(("command", "overrides", "part"), [
    ("generate", [f"dataset.num_files_train={HOST // 1000}", "dataset.record_length_bytes=1"],
     "for the list of files it generates"),
    ("run", [f"dataset.record_length_bytes_resize={HOST // 4}"], "for the samples in flight"),
    ("run", ["dataset.format=png", f"dataset.record_length_bytes={HOST // 16}"],
     "for the samples in flight"),
], ids=["files", "resize", "png"])
def test_what_cannot_fit_is_said_at_once(workdir: Path, write_workload: Callable[..., Path],
                                         run_cli: Callable[..., int],
                                         capsys: pytest.CaptureFixture[str], command: str,
                                         overrides: list[str], part: str) -> None:
    path = write_workload(tiny_workload())
    assert run_cli(command, str(path), "--no-progress", *overrides) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would need about" in err and part in err, err
    assert "Traceback" not in err
    assert not (workdir / "data").exists() and not (workdir / "reports").exists()


def test_file_counts_in_scientific_notation(run_cli: Callable[..., int],
                                            write_workload: Callable[..., Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("show-config", str(path), "dataset.num_files_train=2.5e3") == 0
    assert "num_files_train: 2500" in capsys.readouterr().out
    assert run_cli("show-config", str(path), "dataset.num_files_train=2.5e0") == 2
