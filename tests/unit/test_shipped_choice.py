"""Which workload a name means, said where it could mean two (issue 54): a folder of the
working directory named like a shipped workload (a data folder) is not taken for it; a file
of that name is taken, saying the shipped one is not; this folder's ./workloads copy is taken
before the shipped one, saying so."""

from __future__ import annotations

from pathlib import Path

import pytest

from dliobench.config.shipped import CHECKOUT, workload_path

SHIPPED = CHECKOUT / "workloads" / "unet3d.yaml"


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
         ) -> Path:
    monkeypatch.chdir(tmp_path)
    caplog.set_level("INFO", "dliobench")
    return tmp_path


def test_a_folder_named_like_a_shipped_workload_is_not_taken_for_it(
        caplog: pytest.LogCaptureFixture) -> None:
    Path("unet3d").mkdir()  # main took the folder (then: "it is a folder")
    assert workload_path("unet3d") == SHIPPED
    assert f"./unet3d is a folder, not a workload file: the workload unet3d is {SHIPPED}" \
        in caplog.text


def test_a_file_named_like_a_shipped_workload_is_taken_and_said(
        caplog: pytest.LogCaptureFixture) -> None:
    Path("unet3d").write_text("model: {name: mine}\n")
    assert workload_path("unet3d") == Path("unet3d")
    assert f"the workload unet3d is the file ./unet3d, not {SHIPPED}" in caplog.text


def test_this_folders_copy_is_taken_and_said(caplog: pytest.LogCaptureFixture) -> None:
    Path("workloads").mkdir()
    Path("workloads/unet3d.yaml").write_text(SHIPPED.read_text())
    assert workload_path("unet3d") == Path("workloads/unet3d.yaml")
    assert f"is this folder's copy workloads/unet3d.yaml, not the shipped {SHIPPED}" \
        in caplog.text
    caplog.clear()
    assert workload_path("bert") == CHECKOUT / "workloads" / "bert.yaml" and not caplog.text
