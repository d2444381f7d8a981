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


def test_make_run_installs_what_the_readme_quick_start_needs() -> None:
    """The README's quick start (the pytorch loader of unet3d, the bundled mpiexec) works
    right after `make run`: its set-up installs the torch and mpi extras (issue 49, item 8)."""
    root = Path(__file__).resolve().parents[2]
    makefile = (root / "Makefile").read_text()
    core = makefile.split("$(VENV)/.core:", 1)[1].split("\n\n", 1)[0]
    assert "'.[torch,mpi]'" in core and "$(TORCH)" in core
    readme = (root / "README.md").read_text()
    quick = readme.split("## MLPerf Storage quick start", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/mpiexec" in quick and "run unet3d" in quick
    assert "  data_loader: pytorch" in (root / "workloads" / "unet3d.yaml").read_text()
