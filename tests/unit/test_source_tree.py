"""What the code finds next to itself in a checkout: its commit and the shipped workloads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dliobench.config.shipped import workload_path
from dliobench.results import sysinfo

REPO = Path(__file__).resolve().parents[2]


def test_results_name_the_checkouts_commit() -> None:
    commit = sysinfo.commit()
    assert commit is not None and len(commit.removesuffix("-dirty")) == 40


def test_workload_names_are_found_from_any_folder(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert not (tmp_path / "workloads").exists()
    assert workload_path("unet3d") == REPO / "workloads" / "unet3d.yaml"
    assert os.path.isfile(workload_path("default"))
