"""A run resolves its plan once: one format lookup and one manifest load per run, whether it
generates the dataset or finds it complete; staging only moves the folder the plan reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset.manifest import Manifest
from dliobench.formats import FORMATS, get_format
from dliobench.loaders import LOADERS
from dliobench.run import planning as plan_mod
from dliobench.storage.posix import PosixBackend
from tests.conftest import last_result, tiny_workload


def test_one_format_lookup_and_one_manifest_load_per_run(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"format_for": 0, "load": 0}
    real_format_for, real_load = plan_mod.format_for, Manifest.load

    def counting_format_for(dataset, *rest):  # type: ignore[no-untyped-def]
        calls["format_for"] += 1
        return real_format_for(dataset, *rest)

    def counting_load(data_folder):  # type: ignore[no-untyped-def]
        calls["load"] += 1
        return real_load(data_folder)

    monkeypatch.setattr(plan_mod, "format_for", counting_format_for)
    monkeypatch.setattr(Manifest, "load", staticmethod(counting_load))
    path = write_workload(tiny_workload())
    for generates in (True, False):  # the first run generates, the second finds the files
        calls.update(format_for=0, load=0)
        assert run_cli("run", str(path), "--no-progress") == 0
        assert calls == {"format_for": 1, "load": 1}, generates
        assert last_result(workdir / "reports")["metrics"]["exactly_once"] is True


def test_the_plan_holds_what_the_run_reads(tmp_path: Path) -> None:
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path}", "dataset.num_files_train=6",
                         "dataset.format=hdf5", "dataset.enable_chunking=true",
                         "dataset.chunk_size=1024", "reader.batch_size=2", "train.epochs=3",
                         "reader.sample_shuffle=seed"])
    plan = plan_mod.resolve(cfg, World(rank=1, size=2), LocalComm())
    assert plan.fmt.name == "hdf5" and plan.fmt is not get_format("hdf5")  # chunked options
    assert plan.backend.describe(plan.keys[5]) == str(tmp_path / "train" / "img_0000005.hdf5")
    assert len(plan.keys) == 6 and plan.object_keys(2) == ["train/img_0000002.hdf5"]
    assert plan.spec.rank == 1 and plan.spec.size == 2 and plan.seed == cfg.train.seed
    assert plan.steps == [1, 1, 1]  # 3 samples per rank and epoch, batches of 2, drop_last
    staged = plan.with_sizes([5] * 6).reading_from(PosixBackend(str(tmp_path / "local")))
    assert staged.backend.describe(staged.keys[0]) == str(tmp_path / "local/train/img_0000000.hdf5")
    assert staged.sizes == [5] * 6 and staged.spec == plan.spec


def test_the_configuration_takes_its_choices_from_the_registries() -> None:
    from dliobench.config.load import FIELDS

    assert FIELDS["dataset.format"].metadata["choices"] == FORMATS
    assert FIELDS["reader.data_loader"].metadata["choices"] == LOADERS
    for name in FORMATS:
        assert get_format(name).name == name
