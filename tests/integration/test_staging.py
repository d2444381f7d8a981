"""Staging to node-local storage, and Lustre keys where Lustre is absent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result, tiny_workload


@pytest.mark.parametrize("scope", ["shard", "node", "all"])
def test_run_trains_from_a_staged_copy_then_removes_it(
        scope: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int]) -> None:
    local = workdir / "nvme"
    doc = tiny_workload(dataset={"format": "tfrecord", "num_samples_per_file": 2},
                        storage={"stage_to": str(local), "stage_scope": scope})
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    result = last_result(workdir / "reports")
    staging = result["staging"]
    sizes = sum(p.stat().st_size for p in (workdir / "data/tiny/train").iterdir())
    assert staging["bytes"] == sizes  # every data file and its .idx, for one rank
    assert staging["files"] == 8 and staging["seconds"] > 0
    assert staging["source"] == "data/tiny"
    assert result["config"]["dataset"]["data_folder"] == "data/tiny"  # the source, not the copy
    assert staging["path"].startswith(str(local))
    assert result["metrics"]["exactly_once"] is True
    assert not list(local.iterdir())  # removed afterwards


def test_keep_staged_keeps_a_complete_copy(workdir: Path, write_workload: Callable[..., Path],
                                           run_cli: Callable[..., int]) -> None:
    local = workdir / "nvme"
    doc = tiny_workload(storage={"stage_to": str(local), "keep_staged": True})
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    run_id = last_result(workdir / "reports")["run_id"]
    src = sorted(p.name for p in (workdir / "data/tiny/train").iterdir())
    staged = local / run_id / "train"
    assert sorted(p.name for p in staged.iterdir()) == src
    for name in src:
        assert (staged / name).read_bytes() == (workdir / "data/tiny/train" / name).read_bytes()


def test_lustre_keys_without_lfs_say_so(write_workload: Callable[..., Path],
                                        run_cli: Callable[..., int],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = tiny_workload(storage={"lustre": {"stripe_count": 4, "stripe_size": "1MiB"}})
    assert run_cli("generate", str(write_workload(doc)), "--no-progress") == 2
    err = capsys.readouterr().err
    assert "need the Lustre `lfs` command" in err and err.count("\n") == 1


def test_every_result_has_the_file_system(workdir: Path, write_workload: Callable[..., Path],
                                          run_cli: Callable[..., int]) -> None:
    assert run_cli("run", str(write_workload(tiny_workload())), "--no-progress") == 0
    storage = last_result(workdir / "reports")["storage"]
    assert storage["fs_type"] not in ("", "unknown")
    assert storage["block_size"] > 0
