"""The max-accelerator search on a real, nearly full tmpfs: a probe that errors (here: its
free-space check) is an error of the search, never a count the storage failed to sustain."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import tiny_workload


@pytest.fixture
def full_mount(mount: Callable[..., Path]) -> Path:
    """An 8 MiB tmpfs with 7 MiB of it taken; skipped where mounting is not permitted."""
    point = mount("tmpfs", "size=8m")
    (point / "fill").write_bytes(os.urandom(7 << 20))
    return point


def test_a_probe_that_fails_its_free_space_check_is_an_error(
        full_mount: Path, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    doc = tiny_workload(dataset={"data_folder": str(full_mount / "data"),
                                 "num_files_train": 16},  # 1 MiB of samples: 1 MiB is free
                        train={"epochs": 1, "computation_time": 0.01},
                        accelerators={"fake": {"computation_time": 0.01, "au": 0.5}})
    code = run_cli("sweep", str(write_workload(doc)), "--find-max-accelerators",
                   "--accelerator", "fake", "--max-accelerators", "2",
                   "--output", str(workdir / "sweeps"))
    out = capsys.readouterr().out
    assert code == 1, out
    assert "cannot sustain" not in out
    assert "the probe at 1 fake accelerator(s) failed, so the search stopped with no " \
        "storage result: the dataset needs" in out
    assert f"are free under {full_mount / 'data'}" in out  # the probe's own sentence
    search = json.loads(next((workdir / "sweeps").glob("*/sweep.json")).read_text())["search"]
    assert search["error"]["ranks"] == 1 and "the dataset needs" in search["error"]["reason"]
    assert search["best"] == 0 and search["first_failure"] is None
